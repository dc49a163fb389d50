//! Finish several leases of one queue in one command: `ORCA.MACK <queue>
//! <numleases> <key> <lease> ... [RESULTS r ...] [TTL ms] [NEXT [LEASE ms]
//! [COUNT n]]`.
//!
//! - one outcome per lease, in order: `1`, or the error `ORCA.ACK` would
//!   give (lease not held, job cancelled); a refused lease never stops the
//!   others;
//! - it is exactly the ACKs one by one: a twin queue driven with ORCA.ACK
//!   (then POP COUNT for NEXT) ends in the same state with the same replies;
//! - `RESULTS` keeps one result per lease (acked ones only), for `TTL`;
//! - `NEXT` replies `[outcomes, jobs]`, jobs as `POP ... COUNT` (default:
//!   one per lease given), an empty array if none, whatever the outcomes;
//! - errors in the command (arity, counts, options, limits, type, a
//!   `NEXT LEASE` past the clock's range) change nothing;
//! - replicas and the AOF end in the master's state (only the ACKs that
//!   took effect are replicated, with the time pinned); one `orca.ack`
//!   event; a freed running cap wakes blocked pops; MULTI and scripts.

use std::collections::BTreeMap;

use crate::common::*;
use redis::Value;

/// `ORCA.MACK q n key lease ... opts...`: the raw reply.
fn mack(c: &mut Con, q: &str, jobs: &[&Fields], opts: &[&str]) -> Value {
    ok(c, &mack_args(q, jobs, opts))
}

fn mack_args(q: &str, jobs: &[&Fields], opts: &[&str]) -> Vec<Vec<u8>> {
    let mut a = args!["ORCA.MACK", q, jobs.len()];
    for j in jobs {
        a.extend(args![text(j, "key"), text(j, "lease")]);
    }
    a.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
    a
}

/// An outcome array as `Ok(())` / `Err(error text)`.
fn outcomes(v: &Value) -> Vec<Result<(), String>> {
    let Value::Array(items) = v else {
        panic!("expected an array of outcomes, got {v:?}");
    };
    items
        .iter()
        .map(|o| match error_text(o) {
            Some(e) => Err(e),
            None => {
                assert_eq!(as_int(o), 1, "an outcome is 1 or an error: {o:?}");
                Ok(())
            }
        })
        .collect()
}

/// The `[outcomes, jobs]` reply of `NEXT`.
fn next_reply(v: Value) -> (Vec<Result<(), String>>, Vec<Fields>) {
    let Value::Array(mut two) = v else {
        panic!("NEXT replies [outcomes, jobs], got {v:?}");
    };
    assert_eq!(two.len(), 2, "NEXT replies [outcomes, jobs]");
    let jobs = match two.pop() {
        Some(Value::Array(js)) => js.into_iter().map(fields).collect(),
        other => panic!("the jobs of NEXT are an array, got {other:?}"),
    };
    (outcomes(&two[0]), jobs)
}

fn pop_count(c: &mut Con, q: &str, n: usize, lease: i64, now: i64) -> Vec<Fields> {
    match ok(
        c,
        &args!["ORCA.POP", q, "COUNT", n, "LEASE", lease, "NOW", now],
    ) {
        Value::Nil => vec![],
        Value::Array(js) => js.into_iter().map(fields).collect(),
        v => panic!("POP COUNT: {v:?}"),
    }
}

const LOST: &str = "NOLEASE ";
const CANCELLED: &str = "CANCELLED ";

fn fill_jobs(c: &mut Con, q: &str, n: usize, t: i64) {
    for i in 0..n {
        let coll = ["user.1", "user.2", "team.1"][i % 3];
        enqueue_at(
            c,
            q,
            &config(&format!("m{i}"), Some(coll), (i as i64 * 37) % 500),
            t + i as i64,
        );
    }
}

#[test]
fn each_lease_gets_its_own_outcome() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    fill_jobs(&mut c, q, 6, t);
    let js = pop_count(&mut c, q, 5, LONG, t);
    let [a, b, cancelled, d, e] = &js[..] else {
        panic!("5 jobs")
    };
    // b is finished already, the job of `cancelled` deleted while it ran.
    ok(
        &mut c,
        &args!["ORCA.ACK", q, text(b, "key"), text(b, "lease")],
    );
    ok(&mut c, &args!["ORCA.DELETE", q, text(cancelled, "key")]);
    let mut a_args = mack_args(q, &[a, b, cancelled, d], &[]);
    // A lease given twice, a malformed key, a malformed token and a
    // foreign token: each refused on its own.
    let n = a_args.len();
    a_args[2] = b"8".to_vec();
    a_args.splice(
        n..n,
        args![
            text(d, "key"),
            text(d, "lease"),
            "not-a-key",
            text(e, "lease"),
            text(e, "key"),
            "x",
            text(a, "key"),
            text(e, "lease")
        ],
    );
    let got = outcomes(&ok(&mut c, &a_args));
    let want: [Option<&str>; 8] = [
        None,
        Some(LOST),
        Some(CANCELLED),
        None,
        Some(LOST),
        Some(LOST),
        Some(LOST),
        Some(LOST),
    ];
    assert_eq!(got.len(), 8);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        match (g, w) {
            (Ok(()), None) => {}
            (Err(e), Some(p)) if e.starts_with(p) => {}
            _ => panic!("outcome {i}: got {g:?}, want {w:?}"),
        }
    }
    for j in [a, d] {
        assert_eq!(status(&mut c, q, &text(j, "key")), None, "acked and gone");
    }
    assert_eq!(state(&mut c, q, &text(e, "key")).as_deref(), Some("leased"));
    let st = stats(&mut c, q);
    assert_eq!((int(&st, "queued"), int(&st, "leased")), (1, 1));
    assert_check(&mut c, q);
    // Nothing held any more (or a queue that does not exist): every lease refused.
    let again = outcomes(&mack(&mut c, q, &[a, d], &[]));
    assert!(again
        .iter()
        .all(|o| matches!(o, Err(e) if e.starts_with(LOST))));
    let none = outcomes(&mack(&mut c, "no-such-queue", &[a], &[]));
    assert!(matches!(&none[..], [Err(e)] if e.starts_with(LOST)));
    assert!(!exists(&mut c, "no-such-queue"));
}

#[test]
fn results_are_kept_per_lease_for_their_ttl() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    fill_jobs(&mut c, q, 3, t);
    let js = pop_count(&mut c, q, 3, LONG, t);
    let refs: Vec<&Fields> = js.iter().collect();
    // The second one is lost before the MACK: its result is not kept.
    ok(
        &mut c,
        &args!["ORCA.ACK", q, text(&js[1], "key"), text(&js[1], "lease")],
    );
    let got = outcomes(&mack(
        &mut c,
        q,
        &refs,
        &[
            "TTL",
            "600000",
            "RESULTS",
            "r0",
            "r1",
            "",
            "NOW",
            &t.to_string(),
        ],
    ));
    assert!(got[0].is_ok() && got[1].is_err() && got[2].is_ok());
    let result = |c: &mut Con, j: &Fields| ok(c, &args!["ORCA.RESULT", q, text(j, "key")]);
    assert_eq!(as_bytes(&result(&mut c, &js[0])), b"r0");
    assert_eq!(
        result(&mut c, &js[1]),
        Value::Nil,
        "a refused lease keeps nothing"
    );
    assert_eq!(
        as_bytes(&result(&mut c, &js[2])),
        b"",
        "an empty result is a result"
    );
    // Without RESULTS nothing is kept; TTL 0 keeps nothing either.
    fill_jobs(&mut c, "q2", 2, t);
    let js = pop_count(&mut c, "q2", 2, LONG, t);
    mack(&mut c, "q2", &[&js[0]], &[]);
    mack(&mut c, "q2", &[&js[1]], &["RESULTS", "x", "TTL", "0"]);
    for j in &js {
        assert_eq!(
            ok(&mut c, &args!["ORCA.RESULT", "q2", text(j, "key")]),
            Value::Nil
        );
    }
}

/// MACK is the ACKs one by one (and NEXT a `POP ... COUNT` after them):
/// twin queues, one driven each way, stay equal.
#[test]
fn mack_is_the_acks_then_a_pop() {
    let (_s, mut c, t) = start_pinned();
    let (a, b) = ("batched", "one-by-one");
    for q in [a, b] {
        set(&mut c, q, &["MAXRUNNING", "3"]);
        fill_jobs(&mut c, q, 60, t);
    }
    let mut rng = Rng::new(11);
    let mut now = t;
    let mut ja = pop_count(&mut c, a, 6, 1000, now);
    let mut jb = pop_count(&mut c, b, 6, 1000, now);
    let mut steps = 0;
    while !ja.is_empty() {
        let ka: Vec<_> = ja.iter().map(sorted).collect();
        let kb: Vec<_> = jb.iter().map(sorted).collect();
        assert_eq!(ka, kb, "step {steps}");
        now += rng.below(400) as i64;
        let ns = now.to_string();
        // Finish a random subset (some leases expire meanwhile: lease 1000).
        let take: Vec<usize> = (0..ja.len()).filter(|_| rng.chance(70)).collect();
        if take.is_empty() {
            continue;
        }
        let count = 1 + rng.below(4) as usize;
        let fa: Vec<&Fields> = take.iter().map(|&i| &ja[i]).collect();
        let cs = count.to_string();
        let opts = ["NOW", &ns, "NEXT", "LEASE", "1000", "COUNT", &cs];
        let (oa, next_a) = next_reply(mack(&mut c, a, &fa, &opts));
        let ob: Vec<Result<(), String>> = take
            .iter()
            .map(|&i| {
                let j = &jb[i];
                let v = raw(
                    &mut c,
                    &args!["ORCA.ACK", b, text(j, "key"), text(j, "lease"), "NOW", now],
                );
                match error_text(&v) {
                    Some(e) => Err(e),
                    None => Ok(()),
                }
            })
            .collect();
        assert_eq!(oa, ob, "step {steps}: outcomes");
        let next_b = pop_count(&mut c, b, count, 1000, now);
        let keep = |js: Vec<Fields>| -> Vec<Fields> {
            js.into_iter()
                .enumerate()
                .filter(|(i, _)| !take.contains(i))
                .map(|(_, j)| j)
                .collect()
        };
        ja = keep(ja);
        jb = keep(jb);
        ja.extend(next_a);
        jb.extend(next_b);
        assert_eq!(stats_view(&mut c, a), stats_view(&mut c, b), "step {steps}");
        steps += 1;
    }
    assert!(steps > 10, "only {steps} steps");
    assert_eq!(digest(&mut c, a), digest(&mut c, b));
    assert_check(&mut c, a);
}

fn stats_view(c: &mut Con, q: &str) -> BTreeMap<String, String> {
    let mut s = sorted(&stats(c, q));
    s.remove("name");
    s
}

#[test]
fn next_takes_one_job_per_lease_given_whatever_the_outcomes() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    fill_jobs(&mut c, q, 8, t);
    config_set(&mut c, "orca.lease-time", 7_000);
    let js = pop_count(&mut c, q, 3, LONG, t);
    let ts = t.to_string();
    // One of three lost: still three jobs (its slot is free as well).
    ok(
        &mut c,
        &args!["ORCA.ACK", q, text(&js[2], "key"), text(&js[2], "lease")],
    );
    let refs: Vec<&Fields> = js.iter().collect();
    let (o, next) = next_reply(mack(&mut c, q, &refs, &["NOW", &ts, "NEXT"]));
    assert_eq!((o.iter().filter(|o| o.is_ok()).count(), next.len()), (2, 3));
    for j in &next {
        assert_field_names(j, &["attempt", "lease", "deadline"]);
        assert_eq!(
            int(j, "deadline"),
            t + 7_000,
            "default lease: orca.lease-time"
        );
    }
    // COUNT beyond what is queued: what there is; then an empty array.
    let refs: Vec<&Fields> = next.iter().collect();
    let (o, rest) = next_reply(mack(
        &mut c,
        q,
        &refs,
        &["NOW", &ts, "NEXT", "COUNT", "50", "LEASE", "100000"],
    ));
    assert_eq!((o.len(), rest.len()), (3, 2));
    assert!(rest.iter().all(|j| int(j, "deadline") == t + 100_000));
    let refs: Vec<&Fields> = rest.iter().collect();
    let (o, none) = next_reply(mack(&mut c, q, &refs, &["NEXT"]));
    assert_eq!((o, none.len()), (vec![Ok(()), Ok(())], 0));
    // COUNT (or the default, one per pair) above orca.max-pop-count takes that many.
    config_set(&mut c, "orca.max-pop-count", 1);
    enqueue(&mut c, q, &config("capped-1", None, 0));
    enqueue(&mut c, q, &config("capped-2", None, 0));
    let (_, one) = next_reply(mack(&mut c, q, &refs, &["NEXT", "COUNT", "5"]));
    let (_, two) = next_reply(mack(&mut c, q, &refs, &["NEXT"]));
    assert_eq!((one.len(), two.len()), (1, 1));
    config_set(&mut c, "orca.max-pop-count", 1000);
    let refs: Vec<&Fields> = one.iter().chain(two.iter()).collect();
    mack(&mut c, q, &refs, &[]);
    // Every lease refused: the jobs are still handed out.
    enqueue(&mut c, q, &config("late", None, 0));
    let (o, got) = next_reply(mack(&mut c, q, &refs, &["NEXT"]));
    assert!(o.iter().all(|o| o.is_err()));
    assert_eq!(reply_keys(&got), vec![key_of("late")]);
    assert_check(&mut c, q);
}

#[test]
fn errors_change_nothing() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    fill_jobs(&mut c, q, 4, t);
    let js = pop_count(&mut c, q, 2, LONG, t);
    let (a, b) = (&js[0], &js[1]);
    let before = digest(&mut c, q);
    let (k, l) = (text(a, "key"), text(a, "lease"));
    let huge = "x".repeat(2000);
    config_set(&mut c, "orca.max-payload-bytes", 1000);
    let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
        (
            args!["ORCA.MACK", q, 1, &k],
            "ERR wrong number of arguments",
        ),
        (
            args!["ORCA.MACK", q, 0, &k, &l],
            "ERR numleases must be between 1",
        ),
        (
            args!["ORCA.MACK", q, 2, &k, &l],
            "ERR numleases must be between 1",
        ),
        (
            args!["ORCA.MACK", q, -1, &k, &l],
            "ERR numleases must be between 1",
        ),
        (
            args!["ORCA.MACK", q, "one", &k, &l],
            "ERR numleases must be an integer",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "RESULTS"],
            "ERR RESULTS needs one payload per lease (1)",
        ),
        (
            mack_args(q, &[a, b], &["RESULTS", "only-one"]),
            "ERR RESULTS needs one payload per lease (2)",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "RESULTS", "r", "RESULTS", "r"],
            "ERR option RESULTS given twice",
        ),
        (
            args![
                "ORCA.MACK",
                q,
                1,
                &k,
                &l,
                "TTL",
                5,
                "RESULTS",
                "r",
                "TTL",
                6
            ],
            "ERR option TTL given twice",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "TTL"],
            "ERR option TTL needs a value",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "RESULTS", "a", "b"],
            "ERR unknown option 'b' (allowed: TTL, NOW, RESULTS, NEXT); RESULTS takes one payload per lease (1)",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "TTL", -1],
            "ERR TTL must be between 0",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "FOO", 1],
            "ERR unknown option 'FOO' (allowed: TTL, NOW, RESULTS, NEXT)",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "RESULTS", &huge],
            "TOOLARGE result is 2000 bytes",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "NEXT", "COUNT", 0],
            "ERR COUNT must be at least 1",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "NEXT", "COUNT", "many"],
            "ERR COUNT must be an integer",
        ),
        (
            args!["ORCA.MACK", q, 1, &k, &l, "NEXT", "BLOCK", -5],
            "ERR BLOCK must be between 0 and",
        ),
        (
            args![
                "ORCA.MACK",
                q,
                1,
                &k,
                &l,
                "NEXT",
                "LEASE",
                9007199254740991i64
            ],
            "TIMERANGE ",
        ),
    ];
    for (a, prefix) in &cases {
        assert_err(&mut c, a, prefix);
        assert_eq!(digest(&mut c, q), before, "{}", show_args(a));
    }
    // NOW is for replication (this suite's servers trust client clocks).
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.trust-client-clock", "no"],
    );
    assert_err(
        &mut c,
        &args!["ORCA.MACK", q, 1, &k, &l, "NOW", t],
        "ERR NOW and MAXATTEMPTS",
    );
    assert_eq!(digest(&mut c, q), before);
    assert_eq!(state(&mut c, q, &k).as_deref(), Some("leased"));
    // A key of another type: WRONGTYPE, even for malformed leases.
    ok(&mut c, &args!["SET", "str", "v"]);
    for a in [
        args!["ORCA.MACK", "str", 1, &k, &l],
        args!["ORCA.MACK", "str", 1, "junk", "0"],
        args!["ORCA.MACK", "str", 1, &k, &l, "NEXT"],
    ] {
        assert_err(&mut c, &a, "WRONGTYPE");
    }
    assert_check(&mut c, q);
}

#[test]
fn replicas_and_the_aof_follow() {
    let dir_opts = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut master = Server::start(&dir_opts);
    let replica = master.start_replica(&[], &[]);
    let mut c = master.conn();
    let t = future_base(&mut c);
    let mut rng = Rng::new(3);
    for q in ["r1", "r2"] {
        set(&mut c, q, &["MAXRUNNING", "2"]);
        fill_jobs(&mut c, q, 40, t);
    }
    let mut held: Vec<(String, Fields)> = vec![];
    for round in 0..30 {
        let q = if round % 2 == 0 { "r1" } else { "r2" };
        held.extend(
            pop_count(&mut c, q, 1 + rng.below(4) as usize, LONG, t)
                .into_iter()
                .map(|j| (q.to_string(), j)),
        );
        let mine: Vec<&Fields> = held
            .iter()
            .filter(|(hq, _)| hq == q)
            .map(|(_, j)| j)
            .filter(|_| rng.chance(60))
            .collect();
        if mine.is_empty() {
            continue;
        }
        // Some leases are refused (finished twice): only the ACKs that took
        // effect replicate.
        let results: Vec<String> = (0..mine.len())
            .map(|i| format!("res-{round}-{i}"))
            .collect();
        let mut opts: Vec<&str> = vec![];
        if round % 3 == 0 {
            opts.push("RESULTS");
            opts.extend(results.iter().map(String::as_str));
        }
        if round % 4 == 0 {
            opts.extend(["NEXT", "LEASE", "90000000000"]);
        }
        let mut twice = mine.clone();
        if round % 5 == 0 {
            twice.push(mine[0]);
            if round % 3 == 0 {
                opts.insert(1 + mine.len(), "dup");
            }
        }
        let v = mack(&mut c, q, &twice, &opts);
        let done: Vec<String> = mine.iter().map(|j| text(j, "lease")).collect();
        held.retain(|(hq, j)| hq != q || !done.contains(&text(j, "lease")));
        if round % 4 == 0 {
            let (_, next) = next_reply(v);
            held.extend(next.into_iter().map(|j| (q.to_string(), j)));
        }
    }
    assert_replica_equal(&master, &replica);
    let before = dataset_digests(&mut c);
    drop(c);
    master.kill();
    master.start_again();
    let mut c = master.conn();
    assert_same("after AOF replay", &before, &dataset_digests(&mut c));
    for q in ["r1", "r2"] {
        assert_check(&mut c, q);
    }
}

#[test]
fn one_event_wakes_blocked_pops_multi_and_scripts() {
    let (s, mut c, t) = start_pinned();
    let q = "q";
    set(&mut c, q, &["MAXRUNNING", "2"]);
    for i in 0..5 {
        enqueue_at(
            &mut c,
            q,
            &config(&format!("e{i}"), Some("user.1"), 0),
            t + i,
        );
    }
    let js = pop_count(&mut c, q, 2, LONG, t);
    let refs: Vec<&Fields> = js.iter().collect();
    // The cap holds the other two back: a blocked pop waits, and the MACK
    // that frees the collation wakes it.
    let h = spawn_blocked(&s, args!["ORCA.POP", q, "BLOCK", 10_000]);
    wait_blocked(&mut c, 1);
    let mut sub = s.conn();
    ok(
        &mut c,
        &args!["CONFIG", "SET", "notify-keyspace-events", "KEA"],
    );
    let mut ev = Events::subscribe(&mut sub, q);
    mack(&mut c, q, &refs, &[]);
    let w = woken(h, "the MACK freed the capped collation");
    assert_eq!(text(&w, "collation"), "user.1");
    ev.expect(
        &["orca.ack", "orca.pop"],
        "one orca.ack for the whole batch",
    );
    // Inside MULTI and from a script.
    let j = must_pop(&mut c, q, LONG);
    ok(&mut c, &args!["MULTI"]);
    ok(&mut c, &mack_args(q, &[&j], &["NEXT", "COUNT", "1"]));
    let Value::Array(mut r) = ok(&mut c, &args!["EXEC"]) else {
        panic!("EXEC")
    };
    let (o, next) = next_reply(r.remove(0));
    assert_eq!((o, next.len()), (vec![Ok(())], 1));
    let v = ok(
        &mut c,
        &args![
            "EVAL",
            "return redis.call('ORCA.MACK', KEYS[1], 1, ARGV[1], ARGV[2])",
            1,
            q,
            text(&next[0], "key"),
            text(&next[0], "lease")
        ],
    );
    assert_eq!(outcomes(&v), vec![Ok(())]);
    ev.expect(
        &["orca.pop", "orca.ack", "orca.pop", "orca.ack"],
        "a pop, MULTI and the script",
    );
    assert_check(&mut c, q);
}

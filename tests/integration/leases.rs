//! Pop and leases (docs/commands.md: ORCA.POP, ORCA.ACK, ORCA.EXTEND): a
//! pop leases by default (`LEASE 0` removes), `COUNT` hands out several,
//! `ORCA.LEN` and `ORCA.STATUS` show every state, `ORCA.ACK` ends a lease
//! and keeps its result, `ORCA.EXTEND` moves the deadline, and fencing: a
//! worker can never complete or fail a delivery it no longer holds.
//!
//! Two clocks are used:
//! - *pinned*: `NOW <ms>` on every command, at a base far in the future of
//!   the server's clock (`future_base`), so the server's own 50 ms timer never
//!   finds anything due and every time-driven change happens exactly when a
//!   pinned POP (or TICK) applies it. Deterministic.
//! - *real*: short leases / retries / TTLs and polling with generous limits,
//!   for what only the server clock and its timer do.

use std::collections::HashSet;
use std::time::Duration;

use crate::common::*;
use redis::Value;

#[test]
fn pop_leases_by_default() {
    let (_s, mut c) = start_server();
    let cfg = config("a", Some("user.1"), 0);
    let e = enqueue(&mut c, "q", &cfg);
    let created_at = int(&e, "created_at");

    let t0 = server_ms(&mut c);
    let f = pop_with(&mut c, "q", &[]).expect("POP gives the job");
    let t1 = server_ms(&mut c);
    assert_eq!(text(&f, "key"), key_of("a"));
    assert_eq!(text(&f, "payload"), cfg);
    assert_eq!(opt_text(&f, "collation").as_deref(), Some("user.1"));
    assert_eq!(int(&f, "created_at"), created_at);
    assert_eq!(int(&f, "attempt"), 1);
    assert_eq!(int(&f, "attempts"), 1);
    let token = lease(&f);
    assert!(
        token.parse::<u64>().map(|t| t > 0).unwrap_or(false),
        "lease token {token:?}"
    );
    let deadline = int(&f, "deadline");
    assert!(
        (t0 + 300_000..=t1 + 300_000).contains(&deadline),
        "deadline {deadline} not now+300000 (now in {t0}..{t1})"
    );

    // Leased: not queued, but STATUS knows it.
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_eq!(
        pop_with(&mut c, "q", &[]),
        None,
        "a leased job is not handed out again"
    );
    let st = must_status(&mut c, "q", &key_of("a"));
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(text(&st, "lease"), token);
    assert_eq!(int(&st, "deadline"), deadline);
    assert_eq!(int(&st, "release_at"), deadline);
    assert_eq!(int(&st, "attempts"), 1);
    assert_eq!(text(&st, "payload"), cfg);
    let ls = leases(&st);
    assert_eq!(ls.len(), 1, "{st:?}");
    assert_eq!(text(&ls[0], "lease"), token);
    assert_eq!(int(&ls[0], "deadline"), deadline);
    assert_eq!(int(&ls[0], "attempts"), 1);

    // orca.lease-time is the default lease.
    config_set(&mut c, "orca.lease-time", 12_345);
    enqueue(&mut c, "q", &config("b", None, 0));
    let t0 = server_ms(&mut c);
    let f = pop_with(&mut c, "q", &[]).expect("POP b");
    let t1 = server_ms(&mut c);
    let deadline = int(&f, "deadline");
    assert!(
        (t0 + 12_345..=t1 + 12_345).contains(&deadline),
        "deadline {deadline} not now+12345 (now in {t0}..{t1})"
    );
    // An explicit LEASE wins over the setting.
    enqueue(&mut c, "q", &config("c", None, 0));
    let t0 = server_ms(&mut c);
    let f = pop_with(&mut c, "q", &args!["LEASE", 60_000]).expect("POP c");
    let t1 = server_ms(&mut c);
    let deadline = int(&f, "deadline");
    assert!((t0 + 60_000..=t1 + 60_000).contains(&deadline), "{f:?}");
    assert_check(&mut c, "q");
}

#[test]
fn pop_lease_zero_removes_the_job() {
    let (_s, mut c) = start_server();
    let cfg = config("a", None, 0);
    enqueue(&mut c, "q", &cfg);
    enqueue(&mut c, "q", &config("b", None, 0));
    let f = pop_with(&mut c, "q", &args!["LEASE", 0]).expect("POP LEASE 0");
    assert_eq!(text(&f, "key"), key_of("a"));
    assert_eq!(text(&f, "payload"), cfg);
    assert_eq!(int(&f, "attempt"), 1);
    assert_eq!(
        get(&f, "lease"),
        &Value::Nil,
        "at-most-once pop has no lease"
    );
    assert_eq!(get(&f, "deadline"), &Value::Nil);
    // Gone: not queued, not leased, nothing to ack.
    assert_eq!(status(&mut c, "q", &key_of("a")), None);
    assert_eq!(qlen(&mut c, "q"), 1);
    // And it never comes back, whatever time it is.
    let far = future_base(&mut c) * 2;
    ok(&mut c, &args!["ORCA.TICK", "q", "NOW", far]);
    let f = pop_with(&mut c, "q", &args!["LEASE", 0, "NOW", far]).expect("b");
    assert_eq!(text(&f, "key"), key_of("b"));
    assert_eq!(pop_with(&mut c, "q", &args!["LEASE", 0, "NOW", far]), None);
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_check(&mut c, "q");
}

#[test]
fn len_and_status_reflect_every_state() {
    let (_s, mut c, b) = start_pinned();
    let (ka, kb) = (key_of("a"), key_of("b"));
    enqueue_at(&mut c, "q", &config("a", None, 0), b);
    enqueue_at(&mut c, "q", &config("b", None, 0), b + 1);
    assert_eq!(qlen(&mut c, "q"), 2);
    for (k, pos) in [(&ka, 1), (&kb, 2)] {
        let st = must_status(&mut c, "q", k);
        assert_eq!(text(&st, "state"), "queued");
        assert_eq!(int(&st, "position"), pos);
        assert_eq!(int(&st, "attempts"), 0);
        assert!(leases(&st).is_empty(), "{st:?}");
    }

    // leased
    let pa = must_pop_at(&mut c, "q", 1000, b + 10);
    assert_eq!(text(&pa, "key"), ka);
    assert_eq!(int(&pa, "deadline"), b + 1010);
    assert_eq!(qlen(&mut c, "q"), 1);
    let st = must_status(&mut c, "q", &ka);
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(text(&st, "lease"), lease(&pa));
    assert_eq!(int(&st, "deadline"), b + 1010);
    assert_eq!(int(&st, "release_at"), b + 1010);
    assert_eq!(int(&st, "attempts"), 1);
    assert_eq!(leases(&st).len(), 1);
    // b moved up to position 1.
    assert_eq!(int(&must_status(&mut c, "q", &kb), "position"), 1);

    // delayed
    let n = nack_with(
        &mut c,
        "q",
        &ka,
        &lease(&pa),
        &args!["DELAY", 500, "NOW", b + 20],
    );
    assert_eq!(text(&n, "outcome"), "retry");
    assert_eq!(int(&n, "retry_at"), b + 520);
    assert_eq!(int(&n, "attempts"), 1);
    assert_eq!(
        qlen(&mut c, "q"),
        1,
        "a delayed job is not counted as queued"
    );
    let st = must_status(&mut c, "q", &ka);
    assert_eq!(text(&st, "state"), "delayed");
    assert_eq!(int(&st, "retry_at"), b + 520);
    assert_eq!(int(&st, "release_at"), b + 520);
    assert_eq!(int(&st, "attempts"), 1);
    assert!(leases(&st).is_empty(), "{st:?}");

    // dead
    let pb = must_pop_at(&mut c, "q", 1000, b + 30);
    assert_eq!(text(&pb, "key"), kb);
    let n = nack_with(
        &mut c,
        "q",
        &kb,
        &lease(&pb),
        &args!["NOW", b + 40, "MAXATTEMPTS", 1],
    );
    assert_eq!(text(&n, "outcome"), "dead");
    assert_eq!(int(&n, "attempts"), 1);
    assert_eq!(qlen(&mut c, "q"), 0);
    let st = must_status(&mut c, "q", &kb);
    assert_eq!(text(&st, "state"), "dead");
    assert_eq!(int(&st, "died_at"), b + 40);
    assert_eq!(text(&st, "cause"), "failed");
    assert_eq!(int(&st, "attempts"), 1);
    assert!(leases(&st).is_empty(), "{st:?}");
    // Still delayed (nothing was due) and nothing to pop.
    assert_eq!(pop_at(&mut c, "q", 1000, b + 50), None);
    assert_eq!(state(&mut c, "q", &ka).as_deref(), Some("delayed"));
    assert_check(&mut c, "q");
}

#[test]
fn pop_count() {
    let (s, mut c) = start_server();
    let names = ["a", "b", "c", "d", "e"];
    let b = future_base(&mut c);
    for (i, n) in names.iter().enumerate() {
        enqueue_at(&mut c, "q", &config(n, None, 0), b + i as i64);
    }
    let batch = |c: &mut Con, opts: Vec<Vec<u8>>| -> Option<Vec<Fields>> {
        let mut a = args!["ORCA.POP", "q"];
        a.extend(opts);
        match ok(c, &a) {
            Value::Nil => None,
            Value::Array(items) => Some(items.into_iter().map(fields).collect()),
            other => panic!("POP COUNT reply {other:?}"),
        }
    };
    let first = batch(&mut c, args!["COUNT", 3, "LEASE", 1000, "NOW", b + 10]).expect("3 jobs");
    let keys: Vec<String> = first.iter().map(|f| text(f, "key")).collect();
    assert_eq!(keys, vec![key_of("a"), key_of("b"), key_of("c")]);
    let tokens: HashSet<String> = first.iter().map(lease).collect();
    assert_eq!(tokens.len(), 3, "one lease per job");
    for f in &first {
        assert_eq!(int(f, "deadline"), b + 1010);
        assert_eq!(int(f, "attempt"), 1);
    }
    let rest = batch(&mut c, args!["COUNT", 3, "LEASE", 1000, "NOW", b + 11]).expect("2 jobs");
    let keys: Vec<String> = rest.iter().map(|f| text(f, "key")).collect();
    assert_eq!(keys, vec![key_of("d"), key_of("e")]);
    assert_eq!(batch(&mut c, args!["COUNT", 3, "NOW", b + 12]), None);
    // COUNT 1 is still an array.
    enqueue_at(&mut c, "q", &config("f", None, 0), b + 13);
    let one = batch(&mut c, args!["COUNT", 1, "LEASE", 0, "NOW", b + 14]).expect("1 job");
    assert_eq!(one.len(), 1);
    assert_eq!(get(&one[0], "lease"), &Value::Nil);
    // Each leased job is acked with its own token.
    for f in first.iter().chain(rest.iter()) {
        must_ack(&mut c, "q", &text(f, "key"), &lease(f));
    }
    for bad in ["0", "-1", "x"] {
        assert_err(&mut c, &args!["ORCA.POP", "q", "COUNT", bad], "ERR COUNT");
    }
    // Over orca.max-pop-count: TOOMANY with the maximum as its field.
    let e = assert_err(&mut c, &args!["ORCA.POP", "q", "COUNT", 1001], "TOOMANY ");
    assert_eq!(e, "TOOMANY 1000 COUNT must be between 1 and 1000");
    config_set(&mut c, "orca.max-pop-count", 2);
    assert_err(
        &mut c,
        &args!["ORCA.POP", "q", "COUNT", 3],
        "TOOMANY 2 COUNT must be between 1 and 2",
    );
    // A blocked COUNT pop is woken with what is there.
    let h = spawn_blocked(&s, args!["ORCA.POP", "q", "BLOCK", 5000, "COUNT", 2]);
    wait_blocked(&mut c, 1);
    enqueue(&mut c, "q", &config("g", None, 0));
    match joined(h).0 {
        Value::Array(items) => {
            assert_eq!(items.len(), 1);
            assert_eq!(text(&fields(items[0].clone()), "key"), key_of("g"));
        }
        other => panic!("blocked COUNT pop gave {other:?}"),
    }
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_check(&mut c, "q");
}

#[test]
fn ack_removes_and_keeps_results() {
    let (_s, mut c) = start_server();
    for k in ["a", "b", "c", "d"] {
        enqueue(&mut c, "q", &config(k, None, 0));
    }
    // Plain ACK: gone.
    let f = pop_with(&mut c, "q", &[]).expect("a");
    let ka = text(&f, "key");
    assert_eq!(ka, key_of("a"));
    must_ack(&mut c, "q", &ka, &lease(&f));
    assert_eq!(status(&mut c, "q", &ka), None);
    assert_eq!(result(&mut c, "q", &ka), None, "no RESULT given");
    assert_eq!(qlen(&mut c, "q"), 3);
    // A second ACK of the same delivery is refused, as are NACK and EXTEND.
    assert_err(
        &mut c,
        &args!["ORCA.ACK", "q", &ka, lease(&f)],
        LEASE_NOT_HELD,
    );
    assert_err(
        &mut c,
        &args!["ORCA.NACK", "q", &ka, lease(&f)],
        LEASE_NOT_HELD,
    );
    assert_err(
        &mut c,
        &args!["ORCA.EXTEND", "q", &ka, lease(&f), 1000],
        LEASE_NOT_HELD,
    );
    assert_eq!(qlen(&mut c, "q"), 3);

    // ACK with a RESULT (binary-safe), read with ORCA.RESULT.
    let f = pop_with(&mut c, "q", &[]).expect("b");
    let kb = text(&f, "key");
    let res: &[u8] = b"{\"score\":97}\x00\xff";
    assert_eq!(
        ok(
            &mut c,
            &args!["ORCA.ACK", "q", &kb, lease(&f), "RESULT", res]
        ),
        Value::Int(1)
    );
    assert_eq!(result(&mut c, "q", &kb).as_deref(), Some(res));
    let st = must_status(&mut c, "q", &kb);
    assert_eq!(text(&st, "state"), "done", "acked with result: finished");
    assert!(int(&st, "finished_at") > 0);
    assert!(int(&st, "expires_at") > int(&st, "finished_at"));
    assert!(leases(&st).is_empty());

    // TTL 0 keeps nothing.
    let f = pop_with(&mut c, "q", &[]).expect("c");
    let kc = text(&f, "key");
    assert_eq!(
        ok(
            &mut c,
            &args!["ORCA.ACK", "q", &kc, lease(&f), "RESULT", "x", "TTL", 0]
        ),
        Value::Int(1)
    );
    assert_eq!(result(&mut c, "q", &kc), None);

    // orca.result-ttl 0 keeps nothing either.
    config_set(&mut c, "orca.result-ttl", 0);
    let f = pop_with(&mut c, "q", &[]).expect("d");
    let kd = text(&f, "key");
    ok(
        &mut c,
        &args!["ORCA.ACK", "q", &kd, lease(&f), "RESULT", "y"],
    );
    assert_eq!(result(&mut c, "q", &kd), None);
    config_set(&mut c, "orca.result-ttl", 3_600_000);

    // A short TTL: there, then forgotten.
    enqueue(&mut c, "q", &config("e", None, 0));
    let f = pop_with(&mut c, "q", &[]).expect("e");
    let ke = text(&f, "key");
    let t0 = server_ms(&mut c);
    ok(
        &mut c,
        &args![
            "ORCA.ACK",
            "q",
            &ke,
            lease(&f),
            "RESULT",
            "short",
            "TTL",
            1500
        ],
    );
    let r = result(&mut c, "q", &ke);
    if server_ms(&mut c) < t0 + 1500 {
        assert_eq!(r.as_deref(), Some(b"short".as_slice()));
    }
    wait_for("the result to expire", Duration::from_secs(10), || {
        result(&mut c, "q", &ke).is_none()
    });
    assert!(
        server_ms(&mut c) >= t0 + 1500,
        "result expired before its TTL"
    );
    // Results of other jobs are unaffected.
    assert_eq!(result(&mut c, "q", &kb).as_deref(), Some(res));
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_check(&mut c, "q");
}

#[test]
fn ack_with_a_wrong_token_is_refused() {
    let (_s, mut c) = start_server();
    enqueue(&mut c, "q", &config("a", None, 0));
    enqueue(&mut c, "q", &config("b", None, 0));
    let fa = pop_with(&mut c, "q", &[]).expect("a");
    let fb = pop_with(&mut c, "q", &[]).expect("b");
    let (ka, ta) = (text(&fa, "key"), lease(&fa));
    let (kb, tb) = (text(&fb, "key"), lease(&fb));
    assert_ne!(ta, tb, "lease tokens are unique per delivery");
    let before = digest(&mut c, "q");
    let wrong_num = (ta.parse::<u64>().unwrap() + 1000).to_string();
    for bad in [wrong_num.as_str(), "0", "-1", "abc", "", "1.5"] {
        assert_err(&mut c, &args!["ORCA.ACK", "q", &ka, bad], LEASE_NOT_HELD);
        assert_err(&mut c, &args!["ORCA.NACK", "q", &ka, bad], LEASE_NOT_HELD);
        assert_err(
            &mut c,
            &args!["ORCA.EXTEND", "q", &ka, bad, 10],
            LEASE_NOT_HELD,
        );
    }
    // Another job's token does not fit this job.
    assert_err(&mut c, &args!["ORCA.ACK", "q", &ka, &tb], LEASE_NOT_HELD);
    assert_err(&mut c, &args!["ORCA.ACK", "q", &kb, &ta], LEASE_NOT_HELD);
    // A malformed orca key or a missing queue.
    assert_err(
        &mut c,
        &args!["ORCA.ACK", "q", "not-a-key", &ta],
        LEASE_NOT_HELD,
    );
    assert_err(
        &mut c,
        &args!["ORCA.ACK", "missing", &ka, &ta],
        LEASE_NOT_HELD,
    );
    // Nothing changed.
    assert_eq!(digest(&mut c, "q"), before);
    assert_eq!(state(&mut c, "q", &ka).as_deref(), Some("leased"));
    assert_eq!(state(&mut c, "q", &kb).as_deref(), Some("leased"));
    // The right tokens work.
    must_ack(&mut c, "q", &ka, &ta);
    must_ack(&mut c, "q", &kb, &tb);
    assert_eq!(status(&mut c, "q", &ka), None);
    assert_eq!(status(&mut c, "q", &kb), None);
    assert_check(&mut c, "q");
}

/// On the server clock: EXTEND moves the deadline; the timer neither
/// expires the lease at its original deadline nor hands the job out again,
/// and it does expire it at the new one.
#[test]
fn extend_pushes_the_deadline() {
    let (_s, mut c) = start_server();
    let ka = key_of("a");
    let p = leased(&mut c, "q", "a", 300);
    let t1 = lease(&p);
    let original = int(&p, "deadline");
    let before = server_ms(&mut c);
    let d = as_int(&ok(&mut c, &args!["ORCA.EXTEND", "q", &ka, &t1, 4000]));
    let after = server_ms(&mut c);
    assert!((before + 4000..=after + 4000).contains(&d), "deadline {d}");
    assert_eq!(int(&must_status(&mut c, "q", &ka), "deadline"), d);
    // Well past the original deadline: still held, not handed out again.
    wait_for(
        "the original deadline to pass",
        Duration::from_secs(10),
        || server_ms(&mut c) > original + 400,
    );
    let st = must_status(&mut c, "q", &ka);
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(text(&st, "lease"), t1);
    assert_eq!(int(&st, "deadline"), d);
    assert_eq!(int(&st, "attempts"), 1);
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_eq!(pop_with(&mut c, "q", &[]), None);
    // EXTEND can also shorten it ("ends ms from now"); at the new deadline
    // the timer expires it.
    let d2 = as_int(&ok(&mut c, &args!["ORCA.EXTEND", "q", &ka, &t1, 200]));
    assert!(d2 < d);
    wait_for(
        "the shortened lease to expire",
        Duration::from_secs(10),
        || state(&mut c, "q", &ka).as_deref() == Some("queued"),
    );
    assert!(server_ms(&mut c) >= d2);
    let p2 = pop_with(&mut c, "q", &args!["LEASE", 60_000]).expect("a again");
    assert_eq!(int(&p2, "attempt"), 2);
    let t2 = lease(&p2);
    assert_ne!(t1, t2);
    let d3 = int(&p2, "deadline");
    // The stale token is refused and changes nothing.
    let digest_before = digest(&mut c, "q");
    assert_err(
        &mut c,
        &args!["ORCA.EXTEND", "q", &ka, &t1, 600_000],
        LEASE_NOT_HELD,
    );
    assert_eq!(digest(&mut c, "q"), digest_before);
    assert_eq!(int(&must_status(&mut c, "q", &ka), "deadline"), d3);
    assert_err(
        &mut c,
        &args!["ORCA.EXTEND", "q", &ka, &t2, "soon"],
        "ERR lease time must be an integer",
    );
    assert_err(
        &mut c,
        &args!["ORCA.EXTEND", "q", &ka, &t2, -5],
        "ERR lease time must be between 0 and",
    );
    as_int(&ok(&mut c, &args!["ORCA.EXTEND", "q", &ka, &t2, 60_000]));
    assert_acked_and_gone(&mut c, "q", &ka, &t2);
}

/// EXTEND with `NOW` pinned: the form the server itself replicates
/// (`ORCA.EXTEND <q> <key> <lease> <ms> NOW <ms>`, src/redis/worker.rs), so
/// it must be accepted. (Fails while `orca.extend` is registered with the
/// exact arity 5 in src/redis/cmdinfo.rs.)
#[test]
fn extend_with_pinned_now_as_replicated() {
    let (_s, mut c, b) = start_pinned();
    let ka = key_of("a");
    let p = leased_at(&mut c, "q", "a", 1000, b);
    let t1 = lease(&p);
    assert_eq!(int(&p, "deadline"), b + 1000);
    let d = as_int(&ok(
        &mut c,
        &args!["ORCA.EXTEND", "q", &ka, &t1, 5000, "NOW", b + 500],
    ));
    assert_eq!(d, b + 5500);
    assert_eq!(int(&must_status(&mut c, "q", &ka), "deadline"), b + 5500);
    assert_eq!(pop_at(&mut c, "q", 1000, b + 2000), None);
    assert_eq!(pop_at(&mut c, "q", 1000, b + 5499), None);
    let p2 = must_pop_at(&mut c, "q", 1000, b + 5500);
    assert_eq!(int(&p2, "attempt"), 2);
    assert_err(
        &mut c,
        &args!["ORCA.EXTEND", "q", &ka, &t1, 60_000, "NOW", b + 5501],
        LEASE_NOT_HELD,
    );
    assert_check(&mut c, "q");
}

#[test]
fn fencing_after_lease_expiry() {
    let s = Server::start(&[]);
    let mut a = s.conn();
    let mut b = s.conn();
    let k = key_of("j");
    enqueue(&mut a, "q", &config("j", Some("user.5"), 0));
    let fa = pop_with(&mut a, "q", &args!["LEASE", 100]).expect("worker A gets j");
    let ta = lease(&fa);
    // The timer expires A's lease: j is queued again.
    wait_for("A's lease to expire", Duration::from_secs(10), || {
        state(&mut b, "q", &k).as_deref() == Some("queued")
    });
    let fb = pop_with(&mut b, "q", &args!["LEASE", 60_000]).expect("worker B gets j");
    let tb = lease(&fb);
    assert_eq!(text(&fb, "key"), k);
    assert_eq!(int(&fb, "attempt"), 2);
    assert_eq!(
        int(&fb, "immediate"),
        1,
        "an expired job comes back as immediate"
    );
    assert_eq!(int(&fb, "created_at"), int(&fa, "created_at"));
    assert_ne!(ta, tb);

    // A is fenced off.
    let before = digest(&mut a, "q");
    assert_err(&mut a, &args!["ORCA.ACK", "q", &k, &ta], LEASE_NOT_HELD);
    assert_err(
        &mut a,
        &args!["ORCA.EXTEND", "q", &k, &ta, 60_000],
        LEASE_NOT_HELD,
    );
    assert_err(&mut a, &args!["ORCA.NACK", "q", &k, &ta], LEASE_NOT_HELD);
    assert_err(
        &mut a,
        &args!["ORCA.ACK", "q", &k, &ta, "RESULT", "stale"],
        LEASE_NOT_HELD,
    );
    assert_eq!(
        digest(&mut a, "q"),
        before,
        "refused commands change nothing"
    );
    let st = must_status(&mut a, "q", &k);
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(text(&st, "lease"), tb);
    assert_eq!(leases(&st).len(), 1);
    assert_eq!(result(&mut a, "q", &k), None);

    // B completes it.
    as_int(&ok(&mut b, &args!["ORCA.EXTEND", "q", &k, &tb, 60_000]));
    assert_eq!(
        ok(&mut b, &args!["ORCA.ACK", "q", &k, &tb, "RESULT", "B"]),
        Value::Int(1)
    );
    assert_eq!(result(&mut a, "q", &k).as_deref(), Some(b"B".as_slice()));
    let st = must_status(&mut a, "q", &k);
    assert_eq!(text(&st, "state"), "done");
    assert_eq!(int(&st, "attempts"), 2, "A's delivery and B's");
    assert!(leases(&st).is_empty());
    assert_eq!(qlen(&mut a, "q"), 0);
    assert_check(&mut a, "q");
}

/// The same, the expiry applied by the next POP itself (pinned clock).
#[test]
fn fencing_when_the_next_pop_expires_the_lease() {
    let s = Server::start(&[]);
    let mut a = s.conn();
    let mut b = s.conn();
    let t = future_base(&mut a);
    let k = key_of("j");
    enqueue_at(&mut a, "q", &config("j", None, 0), t);
    let fa = must_pop_at(&mut a, "q", 100, t);
    assert_eq!(pop_at(&mut b, "q", 1000, t + 99), None);
    let fb = must_pop_at(&mut b, "q", 1000, t + 100);
    assert_eq!(text(&fb, "key"), k);
    assert_eq!(int(&fb, "attempt"), 2);
    let (ta, tb) = (lease(&fa), lease(&fb));
    assert_err(
        &mut a,
        &args!["ORCA.EXTEND", "q", &k, &ta, 100],
        LEASE_NOT_HELD,
    );
    assert_err(
        &mut a,
        &args!["ORCA.NACK", "q", &k, &ta, "NOW", t + 101],
        LEASE_NOT_HELD,
    );
    assert_err(&mut a, &args!["ORCA.ACK", "q", &k, &ta], LEASE_NOT_HELD);
    must_ack(&mut b, "q", &k, &tb);
    assert_eq!(status(&mut b, "q", &k), None);
    assert_check(&mut a, "q");
}

//! What each attempt keeps, and what a finished job leaves:
//!
//! - `WORKER <name>` on `ORCA.POP`, `ORCA.MPOP` and after `NEXT` (ACK, NACK,
//!   MACK), blocked pops included: the lease keeps the name and the time it
//!   was handed out (`worker`, `started_at` in STATUS and LIST STATE LEASED);
//!   an empty or over-long name is refused with nothing changed;
//! - `ORCA.NACK ... ERROR <text>`: the failure's text on the waiting retry
//!   and on the dead letter (STATUS, LIST, DEAD LIST), replaced by the next
//!   failure, cut (never refused) at `orca.max-error-length`;
//! - the `done` state: a job ACKed with a kept result (STATUS, LIST STATE
//!   DONE) until the result expires;
//! - all of it survives a reload and reaches replicas and the AOF exactly.

use std::time::Duration;

use redis::Value;

use crate::common::*;

/// Whether field `name` is nil (absent counts as a test failure).
fn is_nil(f: &Fields, name: &str) -> bool {
    matches!(get(f, name), Value::Nil)
}

fn bytes_of(f: &Fields, name: &str) -> Vec<u8> {
    as_bytes(get(f, name))
}

#[test]
fn a_lease_keeps_the_workers_name_and_its_start() {
    let (_s, mut c) = start_server();
    enqueue(&mut c, "q", &config("a", Some("user.1"), 0));
    enqueue(&mut c, "q", &config("b", None, 1));
    let t = server_ms(&mut c);
    let name = b"grader-3:4121:\xff\x00bytes".to_vec();
    let mut opts = args!["LEASE", LONG, "WORKER"];
    opts.push(name.clone());
    let a = pop_with(&mut c, "q", &opts).expect("a");
    // The delivery reply is unchanged: the name is not a job field.
    assert!(!a.contains_key("worker") && !a.contains_key("started_at"));
    let b = must_pop(&mut c, "q", LONG);

    let st = must_status(&mut c, "q", &text(&a, "key"));
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(bytes_of(&st, "worker"), name);
    let started = int(&st, "started_at");
    assert!(
        started >= t && started <= server_ms(&mut c),
        "{started} {t}"
    );
    assert_eq!(int(&st, "deadline"), started + LONG);
    let l = &leases(&st)[0];
    assert_eq!(bytes_of(l, "worker"), name);
    assert_eq!(int(l, "started_at"), started);
    // A pop without WORKER: the lease has no name, but a start.
    let st = must_status(&mut c, "q", &text(&b, "key"));
    assert!(is_nil(&st, "worker"));
    assert!(int(&st, "started_at") >= t);

    let listed = list(&mut c, "q", &["STATE", "LEASED"]);
    assert_eq!(listed.len(), 2);
    let of_a = listed
        .iter()
        .find(|f| text(f, "key") == text(&a, "key"))
        .expect("a listed");
    assert_eq!(bytes_of(of_a, "worker"), name);
    assert_eq!(int(of_a, "started_at"), started);
    assert_check(&mut c, "q");
}

#[test]
fn worker_names_are_bounded_and_refused_whole() {
    let (_s, mut c) = start_server();
    enqueue(&mut c, "q", &config("a", None, 0));
    let e = assert_rejected(&mut c, "q", &args!["ORCA.POP", "q", "WORKER", ""], ERR);
    assert_eq!(e, "ERR WORKER name must not be empty");
    let long = "w".repeat(257);
    let e = assert_rejected(&mut c, "q", &args!["ORCA.POP", "q", "WORKER", &long], ERR);
    assert_eq!(
        e,
        "ERR WORKER name is 257 bytes; the limit is 256 (orca.max-worker-length)"
    );
    let e = assert_rejected(
        &mut c,
        "q",
        &args!["ORCA.MPOP", 1, "q", "WORKER", &long],
        ERR,
    );
    assert!(e.contains("orca.max-worker-length"), "{e}");
    config_set(&mut c, "orca.max-worker-length", 300);
    let f = pop_with(&mut c, "q", &args!["LEASE", LONG, "WORKER", &long]).expect("job");
    assert_eq!(
        text(&must_status(&mut c, "q", &text(&f, "key")), "worker"),
        long
    );
    // After NEXT the same bound: the ACK is refused before it happens.
    config_set(&mut c, "orca.max-worker-length", 10);
    enqueue(&mut c, "q", &config("b", None, 0));
    let e = assert_rejected(
        &mut c,
        "q",
        &args![
            "ORCA.ACK",
            "q",
            text(&f, "key"),
            lease(&f),
            "NEXT",
            "WORKER",
            &long
        ],
        ERR,
    );
    assert!(e.contains("orca.max-worker-length"), "{e}");
    assert_eq!(
        state(&mut c, "q", &text(&f, "key")).as_deref(),
        Some("leased")
    );
}

#[test]
fn every_way_of_handing_out_keeps_the_name() {
    let (s, mut c) = start_server();
    for n in ["a", "b", "c", "d", "e", "f"] {
        enqueue(&mut c, "q", &config(n, None, 0));
    }
    let worker_of = |c: &mut Con, f: &Fields| -> Option<String> {
        opt_text(&must_status(c, "q", &text(f, "key")), "worker")
    };
    // MPOP.
    let m = fields(ok(
        &mut c,
        &args![
            "ORCA.MPOP",
            2,
            "empty",
            "q",
            "LEASE",
            LONG,
            "WORKER",
            "mpop"
        ],
    ));
    assert_eq!(text(&m, "queue"), "q");
    assert_eq!(worker_of(&mut c, &m).as_deref(), Some("mpop"));
    // ACK ... NEXT WORKER.
    let n1 = fields(ok(
        &mut c,
        &args![
            "ORCA.ACK",
            "q",
            text(&m, "key"),
            lease(&m),
            "NEXT",
            "LEASE",
            LONG,
            "WORKER",
            "ack"
        ],
    ));
    assert_eq!(worker_of(&mut c, &n1).as_deref(), Some("ack"));
    // NACK ... NEXT WORKER.
    let n2 = fields(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            text(&n1, "key"),
            lease(&n1),
            "NEXT",
            "WORKER",
            "nack"
        ],
    ));
    assert_eq!(worker_of(&mut c, &n2).as_deref(), Some("nack"));
    // MACK ... NEXT COUNT 2 WORKER: every job handed out.
    let v = ok(
        &mut c,
        &args![
            "ORCA.MACK",
            "q",
            1,
            text(&n2, "key"),
            lease(&n2),
            "NEXT",
            "COUNT",
            2,
            "WORKER",
            "mack"
        ],
    );
    let Value::Array(parts) = v else {
        panic!("MACK ... NEXT replies [outcomes, jobs]: {v:?}")
    };
    let Value::Array(jobs) = parts[1].clone() else {
        panic!("jobs: {:?}", parts[1])
    };
    assert_eq!(jobs.len(), 2);
    for j in jobs {
        assert_eq!(worker_of(&mut c, &fields(j)).as_deref(), Some("mack"));
    }
    // COUNT: each lease of the batch.
    enqueue(&mut c, "r", &config("x", None, 0));
    enqueue(&mut c, "r", &config("y", None, 0));
    let v = ok(
        &mut c,
        &args!["ORCA.POP", "r", "COUNT", 2, "WORKER", "batch"],
    );
    let Value::Array(batch) = v else {
        panic!("{v:?}")
    };
    for j in batch {
        let k = text(&fields(j), "key");
        assert_eq!(
            opt_text(&must_status(&mut c, "r", &k), "worker").as_deref(),
            Some("batch")
        );
    }
    // A blocked pop woken by an enqueue.
    let h = spawn_blocked(
        &s,
        args!["ORCA.POP", "w", "BLOCK", 10_000, "WORKER", "blocked"],
    );
    wait_for("the pop to block", Duration::from_secs(10), || {
        blocked_clients(&mut c) == 1
    });
    enqueue(&mut c, "w", &config("z", None, 0));
    let f = woken(h, "an enqueue");
    assert_eq!(
        opt_text(&must_status(&mut c, "w", &text(&f, "key")), "worker").as_deref(),
        Some("blocked")
    );
    check_all(&mut c);
}

#[test]
fn a_failure_keeps_its_text_until_the_next_one() {
    let (_s, mut c) = start_server();
    enqueue(&mut c, "q", &config("a", None, 0));
    let t = server_ms(&mut c);
    let k = key_of("a");
    let attempt = |c: &mut Con, now: i64| must_pop_at(c, "q", LONG, now);

    let f = attempt(&mut c, t);
    let out = nack_job(
        &mut c,
        "q",
        &f,
        &[
            "DELAY",
            "0",
            "NOW",
            &t.to_string(),
            "ERROR",
            "main.c:3: expected ';'\n\x00",
        ],
    );
    assert_eq!(text(&out, "outcome"), "retry");
    // DELAY 0: queued again at once, not delayed; the text goes with the
    // attempt and comes back only on a waiting retry or a dead letter.
    let f = attempt(&mut c, t);
    let out = nack_job(
        &mut c,
        "q",
        &f,
        &["DELAY", "5000", "NOW", &t.to_string(), "ERROR", "second"],
    );
    assert_eq!(text(&out, "outcome"), "retry");
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "delayed");
    assert_eq!(text(&st, "error"), "second");
    let d = list(&mut c, "q", &["STATE", "DELAYED"]);
    assert_eq!(text(&d[0], "error"), "second");

    // A failure without ERROR leaves none.
    let f = attempt(&mut c, t + 5_000);
    nack_job(
        &mut c,
        "q",
        &f,
        &["DELAY", "5000", "NOW", &(t + 5_000).to_string()],
    );
    assert!(is_nil(&must_status(&mut c, "q", &k), "error"));

    // Until the last attempt: the dead letter keeps the text.
    let mut now = t + 10_000;
    loop {
        let f = attempt(&mut c, now);
        let out = nack_job(
            &mut c,
            "q",
            &f,
            &[
                "DELAY",
                "1",
                "NOW",
                &now.to_string(),
                "ERROR",
                &format!("attempt {}", int(&f, "attempt")),
            ],
        );
        now += 1;
        if text(&out, "outcome") == "dead" {
            assert_eq!(int(&out, "attempts"), 5);
            break;
        }
    }
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "dead");
    assert_eq!(text(&st, "error"), "attempt 5");
    assert_eq!(text(&dead_list(&mut c, "q", &[])[0], "error"), "attempt 5");
    assert_eq!(
        text(&list(&mut c, "q", &["STATE", "DEAD"])[0], "error"),
        "attempt 5"
    );
    assert_check(&mut c, "q");
}

#[test]
fn a_long_failure_text_is_cut_not_refused() {
    let (_s, mut c) = start_server();
    config_set(&mut c, "orca.max-error-length", 8);
    enqueue(&mut c, "q", &config("a", None, 0));
    let f = must_pop(&mut c, "q", LONG);
    let out = nack_job(
        &mut c,
        "q",
        &f,
        &["DELAY", "60000", "ERROR", "0123456789abcdef"],
    );
    assert_eq!(text(&out, "outcome"), "retry");
    assert_eq!(
        text(&must_status(&mut c, "q", &text(&f, "key")), "error"),
        "01234567"
    );
    // An empty text is a text.
    enqueue(&mut c, "q", &config("b", None, 0));
    let f = must_pop(&mut c, "q", LONG);
    nack_job(&mut c, "q", &f, &["DELAY", "60000", "ERROR", ""]);
    assert_eq!(
        text(&must_status(&mut c, "q", &text(&f, "key")), "error"),
        ""
    );
}

#[test]
fn a_finished_job_with_a_kept_result_is_done_until_it_expires() {
    let (_s, mut c) = start_server();
    enqueue(&mut c, "q", &config("a", Some("user.7"), 0));
    enqueue(&mut c, "q", &config("b", None, 0));
    let t = server_ms(&mut c);
    let a = must_pop_at(&mut c, "q", LONG, t);
    let created = int(&a, "created_at");
    ok(
        &mut c,
        &args![
            "ORCA.ACK",
            "q",
            text(&a, "key"),
            lease(&a),
            "RESULT",
            "97",
            "TTL",
            10_000,
            "NOW",
            t + 50
        ],
    );
    let st = must_status(&mut c, "q", &key_of("a"));
    assert_eq!(text(&st, "state"), "done");
    assert_eq!(int(&st, "finished_at"), t + 50);
    assert_eq!(int(&st, "expires_at"), t + 50 + 10_000);
    assert_eq!(int(&st, "created_at"), created);
    assert_eq!(int(&st, "attempts"), 1);
    assert_eq!(text(&st, "collation"), "user.7");
    assert!(leases(&st).is_empty());
    assert!(!st.contains_key("payload"), "the config is gone");
    // ACK without a result: nothing is left of the job.
    let b = must_pop_at(&mut c, "q", LONG, t);
    ok(
        &mut c,
        &args!["ORCA.ACK", "q", text(&b, "key"), lease(&b), "NOW", t + 60],
    );
    assert_eq!(status(&mut c, "q", &key_of("b")), None);

    let done = list(&mut c, "q", &["STATE", "DONE"]);
    assert_eq!(reply_keys(&done), vec![key_of("a")]);
    let mut st_listed = st.clone();
    st_listed.remove("leases");
    assert_eq!(sorted(&done[0]), sorted(&st_listed));
    assert!(list(&mut c, "q", &["STATE", "DONE", "FILTER", "course", "x"]).is_empty());

    // A regrade while done: the queued job is what STATUS shows.
    enqueue(&mut c, "q", &revised("a", 2));
    assert_eq!(state(&mut c, "q", &key_of("a")).as_deref(), Some("queued"));
    ok(&mut c, &args!["ORCA.DELETE", "q", key_of("a")]);
    assert_eq!(state(&mut c, "q", &key_of("a")).as_deref(), Some("done"));

    // Expired: forgotten.
    ok(&mut c, &args!["ORCA.TICK", "q", "NOW", t + 50 + 10_000]);
    assert_eq!(status(&mut c, "q", &key_of("a")), None);
    assert!(list(&mut c, "q", &["STATE", "DONE"]).is_empty());
    assert_check(&mut c, "q");
}

/// A workload of every new field: named pops (plain, MPOP, after NEXT),
/// failures with texts (retries and dead letters), results kept.
fn workload(c: &mut Con) {
    for i in 0..30 {
        enqueue(
            c,
            "{a}q",
            &config(
                &format!("j{i}"),
                Some(["user.1", "team.2"][i % 2]),
                i as i64,
            ),
        );
    }
    for i in 0..30 {
        let Some(f) = pop_with(
            c,
            "{a}q",
            &args!["LEASE", LONG, "WORKER", format!("w{}", i % 3)],
        ) else {
            break;
        };
        let (k, l) = (text(&f, "key"), lease(&f));
        match i % 4 {
            0 => {
                ok(
                    c,
                    &args!["ORCA.ACK", "{a}q", &k, &l, "RESULT", format!("r{i}")],
                );
            }
            1 => {
                ok(
                    c,
                    &args![
                        "ORCA.NACK",
                        "{a}q",
                        &k,
                        &l,
                        "DELAY",
                        60_000,
                        "ERROR",
                        format!("e{i}")
                    ],
                );
            }
            2 => {
                ok(
                    c,
                    &args![
                        "ORCA.NACK",
                        "{a}q",
                        &k,
                        &l,
                        "MAXATTEMPTS",
                        1,
                        "ERROR",
                        "fatal"
                    ],
                );
            }
            _ => {
                ok(
                    c,
                    &args!["ORCA.ACK", "{a}q", &k, &l, "NEXT", "WORKER", "after-next"],
                );
            }
        }
    }
    for i in 0..3 {
        enqueue(c, "{a}q", &config(&format!("m{i}"), None, 0));
    }
    ok(
        c,
        &args![
            "ORCA.MPOP",
            2,
            "{a}none",
            "{a}q",
            "COUNT",
            3,
            "WORKER",
            "mpop"
        ],
    );
}

#[test]
fn replicas_the_aof_and_a_reload_keep_every_attempts_fields() {
    let master = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = master.start_replica(&[], &[]);
    let mut c = master.conn();
    workload(&mut c);
    let listing = |c: &mut Con| -> Vec<Vec<Fields>> {
        ["LEASED", "DELAYED", "DEAD", "DONE"]
            .iter()
            .map(|s| list(c, "{a}q", &["STATE", s, "LIMIT", "1000"]))
            .collect()
    };
    let before = listing(&mut c);
    assert!(before.iter().all(|l| !l.is_empty()), "{before:?}");
    let workers: Vec<Option<String>> = before[0].iter().map(|f| opt_text(f, "worker")).collect();
    assert!(workers.contains(&Some("mpop".into())), "{workers:?}");
    assert!(before[2].iter().all(|f| text(f, "error") == "fatal"));

    assert_replica_equal(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(listing(&mut r), before, "the replica's listings");

    let digests = dataset_digests(&mut c);
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_same("after DEBUG RELOAD", &digests, &dataset_digests(&mut c));
    assert_eq!(listing(&mut c), before, "after DEBUG RELOAD");
    ok(&mut c, &args!["DEBUG", "LOADAOF"]);
    assert_same("after AOF replay", &digests, &dataset_digests(&mut c));
    assert_eq!(listing(&mut c), before, "after AOF replay");
    check_all(&mut c);
}

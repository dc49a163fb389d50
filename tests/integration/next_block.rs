//! Finish a job and wait for the next: `NEXT ... BLOCK <ms>` on `ORCA.ACK`,
//! `ORCA.NACK` and `ORCA.MACK` (a worker at a trickle sends one command per
//! job instead of a blocking pop and an ACK).
//!
//! - the finish takes effect (and replicates) at once; only the NEXT half
//!   waits, as `ORCA.POP ... BLOCK` does: woken by an enqueue or anything
//!   else that wakes a blocked pop, served in the order clients blocked;
//!   a job already there is handed out at once;
//! - when BLOCK runs out (or `CLIENT UNBLOCK`) the reply is NEXT's empty
//!   one: nil for ACK/NACK, `[outcomes, []]` for MACK, whose ACK outcomes
//!   are kept for the reply however long it waits;
//! - a refused ACK/NACK (lease not held) replies its error at once and never
//!   waits; a MACK waits whatever its outcomes;
//! - a lease lost before the finish (expired, the job handed out again):
//!   NOLEASE at once, no wait, the new holder keeps the job;
//! - the queue deleted while a finish waits: it keeps waiting, and a job
//!   enqueued into the queue created again wakes it; the key replaced by
//!   another type: `WRONGTYPE` when it is signalled (MACK: after its
//!   outcomes), the finish done before stands;
//! - refused inside MULTI and scripts, with `FORWARD` (whose reply is
//!   written at once) and with a bad BLOCK value, before anything changes;
//! - replicas and the AOF end in the master's state.

use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use redis::Value;

const REFUSED: &str = "ERR BLOCK is not allowed inside MULTI/EXEC or scripts";

fn finish_args(cmd: &str, q: &str, j: &Fields, opts: &[&str]) -> Vec<Vec<u8>> {
    let mut a = args![cmd, q, text(j, "key"), text(j, "lease")];
    a.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
    a
}

fn mack_args(q: &str, jobs: &[&Fields], opts: &[&str]) -> Vec<Vec<u8>> {
    let mut a = args!["ORCA.MACK", q, jobs.len()];
    for j in jobs {
        a.extend(args![text(j, "key"), text(j, "lease")]);
    }
    a.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
    a
}

/// `[outcomes, jobs]`: each outcome `None` (acked) or its error text.
fn mack_reply(v: Value) -> (Vec<Option<String>>, Vec<Fields>) {
    let Value::Array(mut two) = v else {
        panic!("MACK ... NEXT replies [outcomes, jobs], got {v:?}");
    };
    assert_eq!(two.len(), 2, "[outcomes, jobs]");
    let jobs = match two.pop() {
        Some(Value::Array(js)) => js.into_iter().map(fields).collect(),
        other => panic!("jobs: {other:?}"),
    };
    let Some(Value::Array(os)) = two.pop() else {
        panic!("outcomes")
    };
    let outcomes = os
        .iter()
        .map(|o| {
            error_text(o).or_else(|| {
                assert_eq!(as_int(o), 1);
                None
            })
        })
        .collect();
    (outcomes, jobs)
}

fn is_lost(o: &Option<String>) -> bool {
    o.as_deref().is_some_and(|e| e.starts_with("NOLEASE "))
}

#[test]
fn ack_and_nack_finish_at_once_and_wait_for_the_next() {
    let (s, mut c) = start_server();
    let q = "q";
    let a = leased(&mut c, q, "a", LONG);
    let h = spawn_blocked(
        &s,
        finish_args(
            "ORCA.ACK",
            q,
            &a,
            &[
                "RESULT", "ra", "NEXT", "LEASE", "60000", "WORKER", "w:1", "BLOCK", "5000",
            ],
        ),
    );
    wait_blocked(&mut c, 1);
    // The ACK is done while the client waits for its next job (its result
    // kept: `done`).
    assert_eq!(state(&mut c, q, &key_of("a")).as_deref(), Some("done"));
    assert_eq!(result(&mut c, q, &key_of("a")).as_deref(), Some(&b"ra"[..]));
    enqueue(&mut c, q, &config("b", None, 0));
    let b = woken(h, "an enqueue");
    assert_eq!(text(&b, "key"), key_of("b"));
    assert!(int(&b, "deadline") - int(&b, "created_at") >= 60_000);
    // The job handed out on waking keeps the worker's name, as a woken pop's.
    let st = must_status(&mut c, q, &key_of("b"));
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(text(&st, "worker"), "w:1");
    assert_eq!(blocked_clients(&mut c), 0);

    // NACK: the failure is recorded at once (a retry in a minute), the next
    // job waited for.
    let h = spawn_blocked(
        &s,
        finish_args(
            "ORCA.NACK",
            q,
            &b,
            &["DELAY", "60000", "NEXT", "BLOCK", "0"],
        ),
    );
    wait_blocked(&mut c, 1);
    assert_eq!(state(&mut c, q, &key_of("b")).as_deref(), Some("delayed"));
    enqueue(&mut c, q, &config("c", None, 0));
    let cj = woken(h, "an enqueue after a NACK");
    assert_eq!(text(&cj, "key"), key_of("c"));

    // A job already there: handed out at once.
    enqueue(&mut c, q, &config("d", None, 0));
    let t = Instant::now();
    let d = fields(ok(
        &mut c,
        &finish_args("ORCA.ACK", q, &cj, &["NEXT", "BLOCK", "0"]),
    ));
    assert_eq!(text(&d, "key"), key_of("d"));
    assert!(t.elapsed() < Duration::from_secs(2));

    // BLOCK runs out: nil, the ACK stands.
    let t = Instant::now();
    let v = ok(
        &mut c,
        &finish_args("ORCA.ACK", q, &d, &["NEXT", "BLOCK", "200"]),
    );
    assert_eq!(v, Value::Nil);
    assert!(
        t.elapsed() >= Duration::from_millis(190),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(status(&mut c, q, &key_of("d")), None);

    // A lease not held: the error at once, no wait, nothing handed out.
    enqueue(&mut c, q, &config("e", None, 0));
    let t = Instant::now();
    let e = fails(
        &mut c,
        &finish_args("ORCA.ACK", q, &d, &["NEXT", "BLOCK", "0"]),
    );
    assert!(e.starts_with("NOLEASE "), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(state(&mut c, q, &key_of("e")).as_deref(), Some("queued"));
    assert_check(&mut c, q);
}

#[test]
fn mack_keeps_its_outcomes_while_it_waits() {
    let (s, mut c) = start_server();
    let q = "q";
    let a = leased(&mut c, q, "a", LONG);
    let b = leased(&mut c, q, "b", LONG);
    // b twice: its repeat is refused; the MACK waits all the same.
    let h = spawn_blocked(
        &s,
        mack_args(
            q,
            &[&a, &b, &b],
            &[
                "RESULTS", "ra", "rb", "rb2", "NEXT", "COUNT", "3", "WORKER", "w:2", "BLOCK",
                "5000",
            ],
        ),
    );
    wait_blocked(&mut c, 1);
    assert_eq!(state(&mut c, q, &key_of("a")).as_deref(), Some("done"));
    assert_eq!(state(&mut c, q, &key_of("b")).as_deref(), Some("done"));
    assert_eq!(result(&mut c, q, &key_of("b")).as_deref(), Some(&b"rb"[..]));
    enqueue(&mut c, q, &config("c", None, 0));
    let (outcomes, jobs) = mack_reply(joined(h).0);
    assert_eq!(outcomes[..2], [None, None]);
    assert!(is_lost(&outcomes[2]), "{outcomes:?}");
    assert_eq!(
        reply_keys(&jobs),
        vec![key_of("c")],
        "up to COUNT: what is there"
    );
    assert_eq!(text(&must_status(&mut c, q, &key_of("c")), "worker"), "w:2");

    // BLOCK runs out: the outcomes and no jobs.
    let t = Instant::now();
    let v = ok(
        &mut c,
        &mack_args(
            q,
            &[&jobs[0]],
            &["NEXT", "BLOCK", "200", "FORMAT", "VALUES"],
        ),
    );
    assert!(t.elapsed() >= Duration::from_millis(190));
    assert_eq!(mack_reply(v), (vec![None], vec![]));

    // CLIENT UNBLOCK answers as the timeout does; every lease refused, the
    // MACK waited all the same.
    let mut bc = blocking_conn(&s);
    let id = as_int(&ok(&mut bc, &args!["CLIENT", "ID"]));
    let h = spawn_cmd(bc, mack_args(q, &[&a], &["NEXT", "BLOCK", "0"]));
    wait_blocked(&mut c, 1);
    assert_eq!(as_int(&ok(&mut c, &args!["CLIENT", "UNBLOCK", id])), 1);
    let (outcomes, jobs) = mack_reply(joined(h).0);
    assert!(is_lost(&outcomes[0]) && jobs.is_empty(), "{outcomes:?}");

    // Woken with several jobs at once: up to COUNT, as values when asked.
    let f = leased(&mut c, q, "f", LONG);
    let h = spawn_blocked(
        &s,
        mack_args(
            q,
            &[&f],
            &["NEXT", "COUNT", "2", "BLOCK", "5000", "FORMAT", "VALUES"],
        ),
    );
    wait_blocked(&mut c, 1);
    let now = server_ms(&mut c);
    ok(&mut c, &args!["MULTI"]);
    for (i, n) in ["g", "h", "i"].iter().enumerate() {
        raw(
            &mut c,
            &args!["ORCA.ENQUEUE", q, config(n, None, 0), "NOW", now + i as i64],
        );
    }
    ok(&mut c, &args!["EXEC"]);
    let Value::Array(two) = joined(h).0 else {
        panic!("[outcomes, jobs]")
    };
    let Value::Array(values) = &two[1] else {
        panic!("jobs")
    };
    assert_eq!(values.len(), 2, "COUNT 2 of the three");
    assert!(values
        .iter()
        .all(|v| matches!(v, Value::Array(x) if x.len() == 11)));
    assert_eq!(qlen(&mut c, q), 1);
    assert_check(&mut c, q);
}

#[test]
fn waiting_finishes_are_served_in_the_order_they_blocked() {
    let (s, mut c) = start_server();
    let q = "q";
    let a = leased(&mut c, q, "a", LONG);
    let pop = spawn_blocked(&s, args!["ORCA.POP", q, "BLOCK", 5000]);
    wait_blocked(&mut c, 1);
    let ack = spawn_blocked(
        &s,
        finish_args("ORCA.ACK", q, &a, &["NEXT", "BLOCK", "5000"]),
    );
    wait_blocked(&mut c, 2);
    enqueue(&mut c, q, &config("b", None, 0));
    assert_eq!(text(&woken(pop, "the first job"), "key"), key_of("b"));
    thread::sleep(Duration::from_millis(100));
    assert!(!ack.is_finished(), "one job, one client served");
    enqueue(&mut c, q, &config("c", None, 0));
    assert_eq!(text(&woken(ack, "the second job"), "key"), key_of("c"));

    // Woken by a lease that expires (the server's timer), as a pop is.
    let d = leased(&mut c, q, "d", 200);
    let e = leased(&mut c, q, "e", LONG);
    let h = spawn_blocked(&s, mack_args(q, &[&e], &["NEXT", "BLOCK", "5000"]));
    let (o, jobs) = mack_reply(joined(h).0);
    assert_eq!(o, vec![None]);
    assert_eq!(reply_keys(&jobs), vec![text(&d, "key")]);
    assert_eq!(int(&jobs[0], "attempt"), 2);
    assert_check(&mut c, q);
}

#[test]
fn a_lost_lease_is_refused_at_once_and_never_waits() {
    let (s, mut c) = start_server();
    let q = "q";
    let a = leased(&mut c, q, "a", 100);
    // The lease runs out and the job goes to another worker.
    let h = spawn_blocked(&s, args!["ORCA.POP", q, "BLOCK", 5000, "LEASE", LONG]);
    let again = woken(h, "the expired lease");
    assert_eq!(int(&again, "attempt"), 2);
    enqueue(&mut c, q, &config("b", None, 0));
    for cmd in [
        finish_args("ORCA.ACK", q, &a, &["NEXT", "BLOCK", "0"]),
        finish_args("ORCA.NACK", q, &a, &["NEXT", "BLOCK", "0"]),
    ] {
        let t = Instant::now();
        let e = fails(&mut c, &cmd);
        assert!(e.starts_with("NOLEASE "), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2));
    }
    // MACK: the outcome says so; the job there is handed out at once.
    let (o, jobs) = mack_reply(ok(&mut c, &mack_args(q, &[&a], &["NEXT", "BLOCK", "0"])));
    assert!(is_lost(&o[0]), "{o:?}");
    assert_eq!(reply_keys(&jobs), vec![key_of("b")]);
    // The new holder still holds it and can finish it.
    let st = must_status(&mut c, q, &key_of("a"));
    assert_eq!(text(&st, "lease"), lease(&again));
    ok(&mut c, &finish_args("ORCA.ACK", q, &again, &[]));
    assert_eq!(blocked_clients(&mut c), 0);
    assert_check(&mut c, q);
}

#[test]
fn the_queue_deleted_or_replaced_while_a_finish_waits() {
    let (s, mut c) = start_server();
    let q = "q";
    // Deleted: the finish keeps waiting; the queue created again wakes it.
    let a = leased(&mut c, q, "a", LONG);
    let h = spawn_blocked(
        &s,
        finish_args("ORCA.ACK", q, &a, &["NEXT", "BLOCK", "5000"]),
    );
    wait_blocked(&mut c, 1);
    assert_eq!(as_int(&ok(&mut c, &args!["DEL", q])), 1);
    thread::sleep(Duration::from_millis(100));
    assert!(!h.is_finished(), "a deleted queue has no job to hand out");
    enqueue(&mut c, q, &config("b", None, 0));
    let b = woken(h, "an enqueue into the queue created again");
    assert_eq!(text(&b, "key"), key_of("b"));
    assert_check(&mut c, q);

    // Replaced by a list: WRONGTYPE once signalled; the ACK stands.
    let h = spawn_blocked(
        &s,
        finish_args("ORCA.ACK", q, &b, &["NEXT", "BLOCK", "5000"]),
    );
    wait_blocked(&mut c, 1);
    assert_eq!(status(&mut c, q, &key_of("b")), None);
    ok(&mut c, &args!["DEL", q]);
    ok(&mut c, &args!["RPUSH", q, "x"]);
    let (v, took) = joined(h);
    let e = error_text(&v).unwrap_or_else(|| panic!("WRONGTYPE, got {v:?} after {took:?}"));
    assert!(e.starts_with("WRONGTYPE"), "{e}");

    // MACK: its outcomes, then the error in place of the jobs.
    ok(&mut c, &args!["DEL", q]);
    let d = leased(&mut c, q, "d", LONG);
    let h = spawn_blocked(&s, mack_args(q, &[&d], &["NEXT", "BLOCK", "5000"]));
    wait_blocked(&mut c, 1);
    ok(&mut c, &args!["DEL", q]);
    ok(&mut c, &args!["RPUSH", q, "x"]);
    let Value::Array(two) = joined(h).0 else {
        panic!("[outcomes, error]")
    };
    assert_eq!(two[0], Value::Array(vec![Value::Int(1)]));
    let e = error_text(&two[1]).unwrap_or_default();
    assert!(e.starts_with("WRONGTYPE"), "{two:?}");
    assert_eq!(blocked_clients(&mut c), 0);
}

#[test]
fn refused_where_a_client_cannot_wait_and_on_bad_values() {
    let (_s, mut c) = start_server();
    let q = "q";
    let a = leased(&mut c, q, "a", LONG);
    enqueue(&mut c, q, &config("b", None, 0));
    let before = digest(&mut c, q);
    for cmd in [
        finish_args("ORCA.ACK", q, &a, &["NEXT", "BLOCK", "100"]),
        finish_args("ORCA.NACK", q, &a, &["NEXT", "BLOCK", "100"]),
        mack_args(q, &[&a], &["NEXT", "BLOCK", "100"]),
    ] {
        ok(&mut c, &args!["MULTI"]);
        raw(&mut c, &cmd);
        let Value::Array(items) = ok(&mut c, &args!["EXEC"]) else {
            panic!("EXEC")
        };
        let e = error_text(&items[0]).unwrap_or_default();
        assert!(e.starts_with(REFUSED), "{}: {e}", show_args(&cmd));
        let mut script = args!["EVAL", "return redis.call(unpack(ARGV))", 1, q];
        script.extend(cmd.clone());
        let e = fails(&mut c, &script);
        assert!(e.contains(&REFUSED[4..]), "{e}");
        assert_eq!(digest(&mut c, q), before, "{}", show_args(&cmd));
    }
    for bad in ["x", "-1", "1.5"] {
        for cmd in [
            finish_args("ORCA.ACK", q, &a, &["NEXT", "BLOCK", bad]),
            finish_args("ORCA.NACK", q, &a, &["NEXT", "BLOCK", bad]),
            mack_args(q, &[&a], &["NEXT", "BLOCK", bad]),
        ] {
            assert_err(&mut c, &cmd, "ERR ");
            assert_eq!(digest(&mut c, q), before, "{}", show_args(&cmd));
        }
    }
    // With FORWARD: refused before anything changes, in either queue.
    let fw = r#"{"key":"next"}"#;
    for cmd in [
        finish_args(
            "ORCA.ACK",
            q,
            &a,
            &["FORWARD", "q2", fw, "NEXT", "BLOCK", "100"],
        ),
        finish_args(
            "ORCA.NACK",
            q,
            &a,
            &["FORWARD", "q2", fw, "NEXT", "BLOCK", "0"],
        ),
    ] {
        assert_err(&mut c, &cmd, "ERR BLOCK is not allowed with FORWARD");
        assert_eq!(digest(&mut c, q), before, "{}", show_args(&cmd));
        assert_eq!(as_int(&ok(&mut c, &args!["EXISTS", "q2"])), 0);
    }
    // BLOCK before NEXT is an option of the finish, which has none.
    assert_err(
        &mut c,
        &finish_args("ORCA.ACK", q, &a, &["BLOCK", "100", "NEXT"]),
        "ERR unknown option 'BLOCK'",
    );
    assert_eq!(state(&mut c, q, &key_of("a")).as_deref(), Some("leased"));
    assert_eq!(blocked_clients(&mut c), 0);
    assert_check(&mut c, q);
}

#[test]
fn replicas_and_the_aof_follow() {
    let mut master = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = master.start_replica(&[], &[]);
    let mut c = master.conn();
    let q = "q";
    for round in 0..4 {
        let n = |s: &str| format!("{s}{round}");
        let a = leased(&mut c, q, &n("a"), LONG);
        let b = leased(&mut c, q, &n("b"), LONG);
        // ACK ... NEXT BLOCK woken by an enqueue.
        let h = spawn_blocked(
            &master,
            finish_args("ORCA.ACK", q, &a, &["RESULT", "r", "NEXT", "BLOCK", "5000"]),
        );
        wait_blocked(&mut c, 1);
        enqueue(&mut c, q, &config(&n("c"), Some("user.1"), 0));
        let cj = woken(h, "an enqueue");
        // MACK ... NEXT COUNT 2 BLOCK woken by two enqueues in a transaction.
        let h = spawn_blocked(
            &master,
            mack_args(q, &[&b, &cj, &a], &["NEXT", "COUNT", "2", "BLOCK", "5000"]),
        );
        wait_blocked(&mut c, 1);
        ok(&mut c, &args!["MULTI"]);
        raw(&mut c, &args!["ORCA.ENQUEUE", q, config(&n("d"), None, 5)]);
        raw(
            &mut c,
            &args!["ORCA.IMMEDIATE", q, config(&n("e"), None, 0)],
        );
        ok(&mut c, &args!["EXEC"]);
        let (o, jobs) = mack_reply(joined(h).0);
        assert_eq!((o[..2].to_vec(), jobs.len()), (vec![None, None], 2));
        // NACK ... NEXT BLOCK that runs out.
        let v = ok(
            &mut c,
            &finish_args(
                "ORCA.NACK",
                q,
                &jobs[0],
                &["DELAY", "600000", "NEXT", "BLOCK", "50"],
            ),
        );
        assert_eq!(v, Value::Nil);
        // A MACK woken by a lease the timer expires.
        let short = leased(&mut c, q, &n("s"), 100);
        let h = spawn_blocked(
            &master,
            mack_args(q, &[&jobs[1]], &["NEXT", "BLOCK", "5000"]),
        );
        let (_, js) = mack_reply(joined(h).0);
        assert_eq!(reply_keys(&js), vec![text(&short, "key")]);
        ok(&mut c, &finish_args("ORCA.ACK", q, &js[0], &[]));
    }
    assert_replica_equal(&master, &replica);
    let before = dataset_digests(&mut c);
    drop(c);
    master.kill();
    master.start_again();
    let mut c = master.conn();
    assert_same("after AOF replay", &before, &dataset_digests(&mut c));
    assert_check(&mut c, q);
}

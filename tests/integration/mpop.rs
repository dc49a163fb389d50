//! `ORCA.MPOP <numkeys> <queue> [<queue> ...] [LEASE ms] [BLOCK ms]
//! [COUNT n]`: one pop over several queues.
//!
//! - the first queue in argument order that can hand out a job does (held,
//!   delayed and capped jobs do not count), with `queue` added to the
//!   reply; COUNT takes all its jobs from that one queue; LEASE 0;
//! - BLOCK waits on every queue and is woken by any, served in blocking
//!   order; times out with nil; refused inside MULTI and scripts (without
//!   BLOCK it works there);
//! - numkeys refusals, WRONGTYPE, ACL key permissions checked on each key,
//!   `COMMAND GETKEYS`.

use crate::common::*;
use redis::Value;

/// Three queues: q1 empty (a held and a delayed job), q2 and q3 with jobs.
fn three_queues(c: &mut Con, t: i64) {
    close_gate(c, "q1", "img");
    enqueue_at(c, "q1", &gated("held", None, 0, "img"), t);
    enqueue_at(c, "q1", &config("delayed", None, 0), t);
    let j = must_pop_at(c, "q1", LONG, t);
    nack_with(
        c,
        "q1",
        &text(&j, "key"),
        &text(&j, "lease"),
        &args!["DELAY", LONG, "NOW", t],
    );
    for (q, names) in [("q2", ["b1", "b2"]), ("q3", ["c1", "c2"])] {
        for (i, n) in names.iter().enumerate() {
            enqueue_at(c, q, &config(n, None, 0), t + i as i64);
        }
    }
}

#[test]
fn first_queue_in_argument_order_hands_out() {
    let (_s, mut c, t) = start_pinned();
    three_queues(&mut c, t);
    let f = mpop(
        &mut c,
        &["missing", "q1", "q3", "q2"],
        &args!["LEASE", LONG, "NOW", t],
    )
    .unwrap();
    assert_field_names(&f, &["queue", "lease", "deadline", "attempt"]);
    assert_eq!(
        (text(&f, "queue"), text(&f, "key")),
        ("q3".into(), key_of("c1"))
    );
    assert_eq!(int(&f, "deadline"), t + LONG);
    // Its lease belongs to q3: ACK on q3 works, on q2 it is not held.
    assert_eq!(
        error_text(&ack(&mut c, "q2", &text(&f, "key"), &text(&f, "lease"))).as_deref(),
        Some("NOLEASE lease not held (it expired and the job was handed out again, was already acked or nacked, or never existed)")
    );
    ack_job(&mut c, "q3", &f, &[]);
    let f = mpop(&mut c, &["q2", "q3"], &args!["LEASE", 0]).unwrap();
    assert_eq!(
        (text(&f, "queue"), text(&f, "key")),
        ("q2".into(), key_of("b1"))
    );
    assert_eq!(
        (get(&f, "lease"), get(&f, "deadline")),
        (&Value::Nil, &Value::Nil)
    );
    assert_eq!(
        status(&mut c, "q2", &key_of("b1")),
        None,
        "LEASE 0 removes the job"
    );
    // The same queue twice is one queue.
    let f = mpop(&mut c, &["q2", "q2"], &args!["LEASE", 0]).unwrap();
    assert_eq!(text(&f, "key"), key_of("b2"));
    // Nothing anywhere: nil (COUNT too).
    let f = mpop(&mut c, &["q1", "q2"], &args!["LEASE", 0]);
    assert!(f.is_none());
    assert_eq!(
        ok(&mut c, &mpop_args(&["q1", "q2"], &args!["COUNT", 3])),
        Value::Nil
    );
    assert_eq!(qlen(&mut c, "q3"), 1);
    for q in ["q1", "q2", "q3"] {
        assert_check(&mut c, q);
    }
    assert!(!exists(&mut c, "missing"), "MPOP created a queue");
}

#[test]
fn count_takes_from_one_queue_only() {
    let (_s, mut c, t) = start_pinned();
    enqueue_at(&mut c, "a", &config("a1", None, 0), t);
    for i in 0..5 {
        enqueue_at(&mut c, "b", &config(&format!("b{i}"), None, 0), t + i);
    }
    let v = ok(
        &mut c,
        &mpop_args(&["a", "b"], &args!["COUNT", 3, "LEASE", LONG]),
    );
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    let items: Vec<Fields> = items.into_iter().map(fields).collect();
    assert_eq!(reply_keys(&items), keys_of(&["a1"]), "not topped up from b");
    assert_eq!(text(&items[0], "queue"), "a");
    let v = ok(
        &mut c,
        &mpop_args(&["a", "b"], &args!["COUNT", 3, "LEASE", 0]),
    );
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    let items: Vec<Fields> = items.into_iter().map(fields).collect();
    assert_eq!(reply_keys(&items), keys_of(&["b0", "b1", "b2"]));
    assert!(items.iter().all(|f| text(f, "queue") == "b"));
    assert_eq!(qlen(&mut c, "b"), 2);
}

#[test]
fn block_is_woken_by_any_queue() {
    let (s, mut c) = start_server();
    let h1 = spawn_blocked(
        &s,
        mpop_args(&["x", "y", "z"], &args!["BLOCK", 10_000, "LEASE", LONG]),
    );
    wait_blocked(&mut c, 1);
    let h2 = spawn_blocked(
        &s,
        mpop_args(&["z", "x"], &args!["BLOCK", 10_000, "LEASE", LONG]),
    );
    wait_blocked(&mut c, 2);
    enqueue_job(&mut c, "z", "first", None, 0);
    let f = woken(h1, "an enqueue on z");
    assert_eq!(
        (text(&f, "queue"), text(&f, "key")),
        ("z".into(), key_of("first"))
    );
    assert_eq!(blocked_clients(&mut c), 1, "one job, one worker served");
    // A gate opening on x wakes the other.
    close_gate(&mut c, "x", "img");
    enqueue(&mut c, "x", &gated("second", None, 0, "img"));
    assert_eq!(blocked_clients(&mut c), 1);
    assert_eq!(open_gate(&mut c, "x", "img"), 1);
    let f = woken(h2, "an opened gate on x");
    assert_eq!(
        (text(&f, "queue"), text(&f, "key")),
        ("x".into(), key_of("second"))
    );
    // Timing out: nil.
    let (v, _) = joined(spawn_blocked(
        &s,
        mpop_args(&["x", "y"], &args!["BLOCK", 50]),
    ));
    assert_eq!(v, Value::Nil);
}

#[test]
fn block_is_refused_in_multi_and_scripts() {
    let (_s, mut c) = start_server();
    enqueue_job(&mut c, "q2", "a", None, 0);
    let before = digest(&mut c, "q2");
    ok(&mut c, &args!["MULTI"]);
    raw(&mut c, &mpop_args(&["q1", "q2"], &args!["BLOCK", 100]));
    raw(&mut c, &mpop_args(&["q1", "q2"], &args!["LEASE", LONG]));
    let Value::Array(items) = ok(&mut c, &args!["EXEC"]) else {
        panic!("EXEC")
    };
    let e = error_text(&items[0]).expect("BLOCK refused in MULTI");
    assert!(e.starts_with("ERR") && e.contains(BLOCK_REFUSED), "{e}");
    let f = fields(items[1].clone());
    assert_eq!(
        (text(&f, "queue"), text(&f, "key")),
        ("q2".into(), key_of("a"))
    );
    ok(&mut c, &args!["ORCA.DELETE", "q2", key_of("a")]);
    enqueue_job(&mut c, "q2", "b", None, 0);
    let before2 = digest(&mut c, "q2");
    assert_ne!(before, before2);
    let script = r#"return redis.call("ORCA.MPOP", 2, KEYS[1], KEYS[2], "BLOCK", "0")"#;
    let e = fails(&mut c, &args!["EVAL", script, 2, "q1", "q2"]);
    assert!(e.contains(BLOCK_REFUSED), "{e}");
    assert_eq!(
        digest(&mut c, "q2"),
        before2,
        "a refused MPOP changes nothing"
    );
    let script = r#"return redis.call("ORCA.MPOP", 2, KEYS[1], KEYS[2])"#;
    let f = fields(ok(&mut c, &args!["EVAL", script, 2, "q1", "q2"]));
    assert_eq!(text(&f, "key"), key_of("b"));
}

#[test]
fn refusals_wrongtype_and_keys() {
    let (_s, mut c) = start_server();
    enqueue_job(&mut c, "q", "a", None, 0);
    ok(&mut c, &args!["SET", "str", "v"]);
    for (a, want) in [
        (
            args!["ORCA.MPOP", "x", "q"],
            "ERR numkeys must be an integer",
        ),
        (
            args!["ORCA.MPOP", "1.0", "q"],
            "ERR numkeys must be an integer",
        ),
        (
            args!["ORCA.MPOP", 0, "q"],
            "ERR numkeys must be between 1 and the number of queues given",
        ),
        (
            args!["ORCA.MPOP", -1, "q"],
            "ERR numkeys must be between 1 and the number of queues given",
        ),
        (
            args!["ORCA.MPOP", 2, "q"],
            "ERR numkeys must be between 1 and the number of queues given",
        ),
        (
            args!["ORCA.MPOP", 2, "q", "q2", "COUNT", 0],
            "ERR COUNT must be between 1 and 1000",
        ),
        (
            args!["ORCA.MPOP", 1, "q", "LEASE", -1],
            "ERR LEASE must be between 0 and 9007199254740991",
        ),
        (
            args!["ORCA.MPOP", 1, "q", "SIDEWAYS", 1],
            "ERR unknown option 'SIDEWAYS'",
        ),
        // A key of another type before any queue that can hand out.
        (
            args!["ORCA.MPOP", 2, "str", "q"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
    ] {
        let e = assert_rejected(&mut c, "q", &a, &[want]);
        assert!(e.starts_with(want), "{e}");
    }
    let e = assert_rejected(&mut c, "q", &args!["ORCA.MPOP", 1], ERR);
    assert!(e.contains("wrong number of arguments"), "{e}");
    // numkeys counts what follows as queues, keywords included.
    assert_eq!(
        ok(
            &mut c,
            &args!["COMMAND", "GETKEYS", "ORCA.MPOP", 3, "q", "LEASE", 100]
        ),
        Value::Array(vec![
            Value::BulkString(b"q".to_vec()),
            Value::BulkString(b"LEASE".to_vec()),
            Value::BulkString(b"100".to_vec()),
        ])
    );
    assert_eq!(
        ok(
            &mut c,
            &args![
                "COMMAND",
                "GETKEYS",
                "ORCA.MPOP",
                2,
                "a",
                "b",
                "COUNT",
                2,
                "BLOCK",
                0
            ]
        ),
        Value::Array(vec![
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"b".to_vec())
        ])
    );
    // A queue that hands out before the key of another type is reached.
    let f = mpop(&mut c, &["q", "str"], &args!["LEASE", LONG]).unwrap();
    assert_eq!(text(&f, "key"), key_of("a"));
}

#[test]
fn acl_key_permissions_apply_to_each_queue() {
    let (s, mut c) = start_server();
    ok(
        &mut c,
        &args![
            "ACL",
            "SETUSER",
            "w",
            "on",
            ">pw",
            "resetkeys",
            "~course:a*",
            "resetchannels",
            "-@all",
            "+orca.mpop",
            "+orca.ack"
        ],
    );
    enqueue_job(&mut c, "course:a1", "a", None, 0);
    enqueue_job(&mut c, "course:b1", "b", None, 0);
    let mut w = s.conn();
    ok(&mut w, &args!["AUTH", "w", "pw"]);
    for a in [
        mpop_args(&["course:a1", "course:b1"], &args!["LEASE", LONG]),
        mpop_args(&["course:b1", "course:a1"], &args!["LEASE", LONG]),
        mpop_args(&["course:a2", "course:b1"], &args!["BLOCK", 0]),
    ] {
        let e = fails(&mut w, &a);
        assert!(e.starts_with("NOPERM"), "{}: {e}", show_args(&a));
    }
    assert_eq!(
        (qlen(&mut c, "course:a1"), qlen(&mut c, "course:b1")),
        (1, 1),
        "nothing handed out"
    );
    let f = mpop(&mut w, &["course:a2", "course:a1"], &args!["LEASE", LONG]).unwrap();
    assert_eq!(
        (text(&f, "queue"), text(&f, "key")),
        ("course:a1".into(), key_of("a"))
    );
    ack_job(&mut w, "course:a1", &f, &[]);
}

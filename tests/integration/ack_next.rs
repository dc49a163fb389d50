//! Finish a job and take the next in one round trip: `ORCA.ACK <queue>
//! <key> <lease> [RESULT r] [TTL ms] NEXT [LEASE ms]` and `ORCA.NACK ...
//! NEXT [LEASE ms]`.
//!
//! - the reply is the next job's pop reply with a lease of its own
//!   (`LEASE`, default `orca.lease-time`), or nil; it never blocks;
//! - NEXT is exactly the finish followed by a pop: a twin queue driven with
//!   ACK/NACK then POP gives the same replies, leases and state (NACK DELAY 0
//!   hands the same job out again, a last attempt dies first);
//! - a stale, foreign, finished or cancelled lease is refused AND hands out
//!   nothing;
//! - RESULT/TTL with NEXT; NEXT under a running cap and with held jobs;
//!   inside MULTI; a worker draining a queue with it.

use std::collections::BTreeMap;

use crate::common::*;
use redis::Value;

#[test]
fn ack_next_replies_with_the_next_job_and_its_own_lease() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    for (i, n) in ["a", "b", "c"].iter().enumerate() {
        enqueue_at(&mut c, q, &config(n, Some("user.1"), 0), t + i as i64);
    }
    config_set(&mut c, "orca.lease-time", 12_345);
    let ts = t.to_string();
    // LIFO: c, b, a.
    let first = must_pop_at(&mut c, q, LONG, t);
    let next = finish_next(&mut c, "ORCA.ACK", q, &first, &str_args(&["NOW", &ts]), &[]).unwrap();
    assert_field_names(&next, &["attempt", "lease", "deadline"]);
    assert_eq!(text(&next, "key"), key_of("b"));
    assert_eq!((int(&next, "attempt"), int(&next, "attempts")), (1, 1));
    assert_eq!(
        int(&next, "deadline"),
        t + 12_345,
        "default lease: orca.lease-time"
    );
    assert_ne!(text(&next, "lease"), text(&first, "lease"));
    assert_eq!(text(&next, "payload"), config("b", Some("user.1"), 0));
    assert_eq!(status(&mut c, q, &key_of("c")), None, "the ACK took effect");
    let st = must_status(&mut c, q, &key_of("b"));
    assert_eq!(
        (text(&st, "state"), text(&st, "lease")),
        ("leased".into(), text(&next, "lease"))
    );

    let last = finish_next(
        &mut c,
        "ORCA.ACK",
        q,
        &next,
        &str_args(&["NOW", &ts]),
        &str_args(&["LEASE", "500"]),
    )
    .unwrap();
    assert_eq!(
        (text(&last, "key"), int(&last, "deadline")),
        (key_of("a"), t + 500)
    );
    // Nothing left: nil, and the ACK still took effect.
    assert_eq!(finish_next(&mut c, "ORCA.ACK", q, &last, &[], &[]), None);
    assert_eq!(status(&mut c, q, &key_of("a")), None);
    let st = stats(&mut c, q);
    assert_eq!((int(&st, "queued"), int(&st, "leased")), (0, 0));
    assert_check(&mut c, q);
}

/// One worker step: finish `job` (ACK, NACK with a delay, or NACK on its
/// last attempt) and take the next, on `a` with NEXT and on `b` in two
/// commands; the replies must be equal.
#[test]
fn next_is_the_finish_then_a_pop() {
    let (_s, mut c, t) = start_pinned();
    let (a, b) = ("with-next", "two-steps");
    for q in [a, b] {
        set(&mut c, q, &["MAXRUNNING", "2"]);
        for i in 0..30 {
            let coll = ["user.1", "user.2", "team.1"][i % 3];
            let prio = (i as i64 * 37) % 500;
            if i % 7 == 0 {
                immediate_at(
                    &mut c,
                    q,
                    &config(&format!("j{i}"), Some(coll), 0),
                    t + i as i64,
                );
            } else {
                enqueue_at(
                    &mut c,
                    q,
                    &config(&format!("j{i}"), Some(coll), prio),
                    t + i as i64,
                );
            }
        }
    }
    config_set(&mut c, "orca.max-attempts", 3);
    let mut rng = Rng::new(5);
    let mut now = t;
    let mut ja = must_pop_at(&mut c, a, 1000, now);
    let mut jb = must_pop_at(&mut c, b, 1000, now);
    let mut steps = 0;
    loop {
        assert_eq!(sorted(&ja), sorted(&jb), "step {steps}");
        now += rng.below(300) as i64;
        let ns = now.to_string();
        let (cmd, before): (&str, Vec<&str>) = match rng.below(4) {
            0 | 1 => ("ORCA.ACK", vec!["NOW", &ns]),
            2 => ("ORCA.NACK", vec!["DELAY", "0", "NOW", &ns]),
            _ => ("ORCA.NACK", vec!["DELAY", "200", "NOW", &ns]),
        };
        let lease = ["LEASE", "1000"];
        let na = finish_next(&mut c, cmd, a, &ja, &str_args(&before), &str_args(&lease));
        let mut two = args![cmd, b, text(&jb, "key"), text(&jb, "lease")];
        two.extend(str_args(&before));
        ok(&mut c, &two);
        let nb = pop_with(&mut c, b, &args!["LEASE", 1000, "NOW", now]);
        steps += 1;
        match (na, nb) {
            (Some(x), Some(y)) => {
                ja = x;
                jb = y;
            }
            (None, None) => {
                // Retries not due yet: wait for them, as a worker would.
                now += 1000;
                match (pop_at(&mut c, a, 1000, now), pop_at(&mut c, b, 1000, now)) {
                    (Some(x), Some(y)) => {
                        ja = x;
                        jb = y;
                    }
                    (None, None) => break,
                    other => panic!("step {steps}: pops differ {other:?}"),
                }
            }
            other => panic!("step {steps}: NEXT and the pop differ: {other:?}"),
        }
    }
    assert!(steps > 40, "{steps} steps");
    assert_eq!(
        digest(&mut c, a),
        digest(&mut c, b),
        "the two queues differ"
    );
    assert_eq!(
        policy_state(&mut c, &[a]).into_values().collect::<Vec<_>>(),
        policy_state(&mut c, &[b]).into_values().collect::<Vec<_>>()
    );
    assert!(
        int(&stats(&mut c, a), "dead") > 0,
        "no job used up its attempts"
    );
    config_set(&mut c, "orca.max-attempts", 5);
}

#[test]
fn nack_next_replies_with_the_next_job() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    enqueue_at(&mut c, q, &config("a", None, 0), t);
    enqueue_at(&mut c, q, &config("b", None, 0), t + 1);
    let ts = t.to_string();
    let ja = must_pop_at(&mut c, q, LONG, t);
    // Default backoff: a waits; b is handed out.
    let jb = finish_next(&mut c, "ORCA.NACK", q, &ja, &str_args(&["NOW", &ts]), &[]).unwrap();
    assert_eq!((text(&jb, "key"), int(&jb, "attempt")), (key_of("b"), 1));
    let sa = must_status(&mut c, q, &key_of("a"));
    assert_eq!(
        (text(&sa, "state"), int(&sa, "retry_at")),
        ("delayed".into(), t + 1000)
    );
    // DELAY 0: b is back at once, at its arrival: it is the next job again.
    let again = finish_next(
        &mut c,
        "ORCA.NACK",
        q,
        &jb,
        &str_args(&["DELAY", "0", "NOW", &ts]),
        &[],
    )
    .unwrap();
    assert_eq!(
        (text(&again, "key"), int(&again, "attempt")),
        (key_of("b"), 2)
    );
    assert_ne!(text(&again, "lease"), text(&jb, "lease"));
    // After a's retry time, NEXT hands a out.
    let t2 = (t + 1000).to_string();
    let next = finish_next(&mut c, "ORCA.ACK", q, &again, &str_args(&["NOW", &t2]), &[]).unwrap();
    assert_eq!(
        (text(&next, "key"), int(&next, "attempt")),
        (key_of("a"), 2)
    );
    assert_check(&mut c, q);
}

#[test]
fn a_refused_finish_hands_out_nothing() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
        enqueue_at(&mut c, q, &config(n, None, 0), t + i as i64);
    }
    let ja = must_pop_at(&mut c, q, LONG, t);
    let jb = must_pop_at(&mut c, q, LONG, t);
    let not_held = "NOLEASE lease not held (it expired and the job was handed out again, was already acked or nacked, or never existed)";
    // `cmd q <ja's key> <the lease of `lease`> NEXT extra...`.
    let finish = |cmd: &str, q: &str, lease: &Fields, extra: &[&str]| {
        let mut a = args![cmd, q, text(&ja, "key"), text(lease, "lease"), "NEXT"];
        a.extend(extra.iter().map(|s| s.as_bytes().to_vec()));
        a
    };
    let mut cases: Vec<(Vec<Vec<u8>>, &str)> = Vec::new();
    for cmd in ["ORCA.ACK", "ORCA.NACK"] {
        // A lease that never existed, the lease of another job, a lease on
        // the wrong queue; bad NEXT options.
        cases.push((args![cmd, q, text(&ja, "key"), "999999", "NEXT"], not_held));
        cases.push((finish(cmd, q, &jb, &[]), not_held));
        cases.push((finish(cmd, "other", &ja, &[]), not_held));
        cases.push((
            finish(cmd, q, &ja, &["LEASE", "-1"]),
            "ERR LEASE must be between 0 and 9007199254740991",
        ));
        cases.push((
            finish(cmd, q, &ja, &["COUNT", "2"]),
            "ERR unknown option 'COUNT'",
        ));
        // A lease the pop half could not take: refused before the finish,
        // which must not happen either.
        cases.push((
            finish(cmd, q, &ja, &["LEASE", "9007199254740991"]),
            "TIMERANGE ",
        ));
    }
    cases.push((
        finish("ORCA.ACK", q, &ja, &["RESULT", "r"]),
        "ERR unknown option 'RESULT'",
    ));
    for (a, want) in &cases {
        let e = assert_rejected(&mut c, q, a, &[want]);
        assert!(e.starts_with(want), "{}: {e}", show_args(a));
    }
    // Finished already: the second finish is refused.
    must_ack(&mut c, q, &text(&jb, "key"), &text(&jb, "lease"));
    let a = next_args("ORCA.ACK", q, &jb, &[], &[]);
    assert_eq!(assert_rejected(&mut c, q, &a, &[not_held]), not_held);
    // Cancelled (deleted while it ran).
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", q, text(&ja, "key")])),
        1
    );
    for cmd in ["ORCA.ACK", "ORCA.NACK"] {
        let a = next_args(cmd, q, &ja, &[], &[]);
        assert_eq!(
            assert_rejected(&mut c, q, &a, &[CANCELLED]),
            "CANCELLED job was cancelled"
        );
    }
    let st = stats(&mut c, q);
    assert_eq!(
        (int(&st, "queued"), int(&st, "leased")),
        (2, 0),
        "nothing was handed out"
    );
}

#[test]
fn result_and_ttl_with_next() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    enqueue_at(&mut c, q, &config("a", None, 0), t);
    enqueue_at(&mut c, q, &config("b", None, 0), t + 1);
    let ja = must_pop_at(&mut c, q, LONG, t);
    let ts = t.to_string();
    let jb = finish_next(
        &mut c,
        "ORCA.ACK",
        q,
        &ja,
        &str_args(&["RESULT", "{\"score\":97}", "TTL", "5000", "NOW", &ts]),
        &str_args(&["LEASE", "60000"]),
    )
    .unwrap();
    assert_eq!(
        (text(&jb, "key"), int(&jb, "deadline")),
        (key_of("b"), t + 60_000)
    );
    assert_eq!(
        result(&mut c, q, &key_of("a")),
        Some(b"{\"score\":97}".to_vec())
    );
    assert_eq!(int(&stats(&mut c, q), "results"), 1);
    // The result's TTL runs from the ACK.
    let f = tick_at(&mut c, q, t + 4999);
    assert_eq!(int(&f, "forgotten"), 0);
    tick_at(&mut c, q, t + 5001);
    assert_eq!(result(&mut c, q, &key_of("a")), None);
}

#[test]
fn next_under_a_cap_with_held_jobs_and_in_multi() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    set(&mut c, q, &["MAXRUNNING", "1"]);
    enqueue_at(&mut c, q, &config("a1", Some("user.1"), 0), t);
    enqueue_at(&mut c, q, &config("a2", Some("user.1"), 0), t + 1);
    close_gate(&mut c, q, "img");
    enqueue_at(&mut c, q, &gated("h", None, 0, "img"), t);
    let j = must_pop_at(&mut c, q, LONG, t);
    assert_eq!(pop_at(&mut c, q, LONG, t), None, "user.1 at its cap");
    // The ACK frees the slot the NEXT half takes.
    let n = finish_next(&mut c, "ORCA.ACK", q, &j, &[], &[]).unwrap();
    assert_eq!(text(&n, "key"), key_of("a1"));
    assert_eq!(
        running_of(&stats(&mut c, q)),
        BTreeMap::from([("user.1".to_string(), 1)])
    );
    // Only a held job left: nil, at once.
    ok(&mut c, &args!["MULTI"]);
    ok(&mut c, &next_args("ORCA.ACK", q, &n, &[], &[]));
    ok(&mut c, &args!["ORCA.GATE", q, "img", "OPEN"]);
    let Value::Array(items) = ok(&mut c, &args!["EXEC"]) else {
        panic!("EXEC")
    };
    assert_eq!(items[0], Value::Nil);
    assert_eq!(items[1], Value::Int(1));
    let f = must_pop_at(&mut c, q, LONG, t);
    assert_eq!(text(&f, "key"), key_of("h"));
    assert_check(&mut c, q);
}

#[test]
fn a_worker_drains_a_queue_with_next_in_pop_order() {
    let (_s, mut c, t) = start_pinned();
    for q in ["a", "b"] {
        for i in 0..40 {
            let coll = if i % 4 == 0 {
                None
            } else {
                Some(["user.1", "user.2", "user.3"][i % 3])
            };
            enqueue_at(
                &mut c,
                q,
                &config(&format!("j{i}"), coll, (i as i64 * 53) % 700),
                t + i as i64,
            );
        }
    }
    let popped: Vec<String> = pop_all(&mut c, "b")
        .iter()
        .map(|f| text(f, "key"))
        .collect();
    let mut got = Vec::new();
    let mut j = pop(&mut c, "a", LONG);
    while let Some(f) = j {
        got.push(text(&f, "key"));
        j = finish_next(&mut c, "ORCA.ACK", "a", &f, &[], &[]);
    }
    assert_eq!(got, popped);
    assert_eq!(int(&stats(&mut c, "a"), "leased"), 0);
}

//! Hand-offs: `ORCA.ACK ... FORWARD <queue2> <config>` finishes a delivery
//! and enqueues its successor in one step, `ORCA.NACK ... FORWARD` does it
//! when the job dies.
//!
//! - the reply is [what the finish replies, the successor's write reply];
//!   the successor is exactly what `ORCA.ENQUEUE` makes, in another queue or
//!   the same one; `NEXT` still takes the next job;
//! - every refusal of either half (lease, config, type, room, result size,
//!   options) leaves both queues as they were;
//! - NACK forwards only on `dead`;
//! - `COMMAND GETKEYS`, ACL and the key specs name `<queue2>` exactly when
//!   `FORWARD` stands as an option, for every spelling;
//! - replicas and AOF replay reach the same state; events and INFO.

use redis::Value;

use crate::common::*;

/// A popped job's (key, lease).
fn popped(c: &mut Con, q: &str, name: &str) -> (String, String) {
    enqueue(c, q, &config(name, None, 0));
    let f = must_pop(c, q, LONG);
    (text(&f, "key"), lease(&f))
}

fn pair(v: Value) -> (Value, Value) {
    match v {
        Value::Array(mut a) if a.len() == 2 => {
            let second = a.pop().unwrap();
            (a.pop().unwrap(), second)
        }
        other => panic!("expected [finish, successor], got {other:?}"),
    }
}

#[test]
fn ack_forward_finishes_and_enqueues_the_successor_in_one_step() {
    let (_s, mut c) = start_server();
    ok(
        &mut c,
        &args!["CONFIG", "SET", "notify-keyspace-events", "KEd"],
    );
    let (k, l) = popped(&mut c, "compile", "sub-41");
    let before = orca_info(&mut c, "orca_forwarded");
    let mut sub = _s.conn();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyspace@0__:*").unwrap();
    ps.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut events = move |n: usize| -> Vec<(String, String)> {
        (0..n)
            .map(|_| {
                let m = ps.get_message().expect("an event");
                (m.get_channel_name().to_string(), m.get_payload().unwrap())
            })
            .collect()
    };
    let next = config("sub-41", Some("user.7"), 0);
    let (first, succ) = pair(ok(
        &mut c,
        &args!["ORCA.ACK", "compile", &k, &l, "RESULT", "built", "FORWARD", "test", &next],
    ));
    assert_eq!(as_int(&first), 1);
    let succ = fields(succ);
    assert_write_fields(&succ, &["created"]);
    assert_eq!(int(&succ, "created"), 1);
    assert_eq!(text(&succ, "key"), key_of("sub-41"));
    assert_eq!(opt_text(&succ, "collation").as_deref(), Some("user.7"));
    // The delivery is done (its result kept), the successor queued.
    assert_eq!(state(&mut c, "compile", &k).as_deref(), Some("done"));
    assert_eq!(
        as_bytes(&ok(&mut c, &args!["ORCA.RESULT", "compile", &k])),
        b"built"
    );
    let st = must_status(&mut c, "test", &key_of("sub-41"));
    assert_eq!(text(&st, "state"), "queued");
    assert_eq!(text(&st, "payload"), next);
    assert_eq!(
        events(2),
        [
            ("__keyspace@0__:compile".into(), "orca.ack".into()),
            ("__keyspace@0__:test".into(), "orca.enqueue".into())
        ]
    );
    assert_eq!(orca_info(&mut c, "orca_forwarded"), before + 1);
    assert_check(&mut c, "compile");
    assert_check(&mut c, "test");

    // Into an existing job: an update, as ENQUEUE would.
    let (k2, l2) = popped(&mut c, "compile", "sub-42");
    let (_, succ) = pair(ok(
        &mut c,
        &args![
            "ORCA.ACK",
            "compile",
            &k2,
            &l2,
            "FORWARD",
            "test",
            config("sub-41", Some("user.7"), 5)
        ],
    ));
    assert_eq!(int(&fields(succ), "created"), 0);
    let ev = events(4);
    assert_eq!(
        ev.last().map(|e| e.1.as_str()),
        Some("orca.update"),
        "{ev:?}"
    );
}

#[test]
fn forward_into_the_same_queue_and_with_next() {
    let (_s, mut c) = start_server();
    let (k, l) = popped(&mut c, "q", "stage1");
    let stage2 = config("stage2", None, 0);
    let (next, succ) = pair(ok(
        &mut c,
        &args!["ORCA.ACK", "q", &k, &l, "FORWARD", "q", &stage2, "NEXT", "LEASE", "60000"],
    ));
    // The successor is queued before NEXT pops: it is the next job.
    let next = fields(next);
    assert_eq!(text(&next, "key"), key_of("stage2"));
    assert_eq!(text(&next, "key"), text(&fields(succ), "key"));
    assert_eq!(text(&next, "payload"), stage2);
    assert_eq!(status(&mut c, "q", &k), None);
    // Nothing left for a second NEXT: [nil, successor].
    let (nil, succ) = pair(ok(
        &mut c,
        &args![
            "ORCA.ACK",
            "q",
            text(&next, "key"),
            lease(&next),
            "FORWARD",
            "done",
            config("stage3", None, 0),
            "NEXT"
        ],
    ));
    assert_eq!(nil, Value::Nil);
    assert_eq!(text(&fields(succ), "key"), key_of("stage3"));
    assert_eq!(qlen(&mut c, "done"), 1);
    assert_check(&mut c, "q");
}

#[test]
fn every_refusal_leaves_both_queues_as_they_were() {
    let (_s, mut c) = start_server();
    let (k, l) = popped(&mut c, "q", "a");
    enqueue(&mut c, "q2", &config("x", None, 0));
    ok(&mut c, &args!["SET", "str", "v"]);
    let good = config("b", None, 0);
    let ack = |extra: &[&str]| -> Vec<Vec<u8>> {
        let mut a = args!["ORCA.ACK", "q", &k, &l];
        a.extend(extra.iter().map(|s| s.as_bytes().to_vec()));
        a
    };
    let cases: Vec<(Vec<Vec<u8>>, &str)> = vec![
        (
            args!["ORCA.ACK", "q", &k, "999999", "FORWARD", "q2", &good],
            "NOLEASE lease not held",
        ),
        (
            ack(&["FORWARD", "q2", "{"]),
            "BADCONFIG invalid config JSON",
        ),
        (
            ack(&["FORWARD", "q2", r#"{"nokey":1}"#]),
            "BADCONFIG config has no string field 'key'",
        ),
        (ack(&["FORWARD", "str", &good]), "WRONGTYPE"),
        (
            ack(&["FORWARD", "q2"]),
            "ERR option FORWARD needs a queue and a config",
        ),
        (
            ack(&["FORWARD", "q2", &good, "FORWARD", "q2", &good]),
            "ERR option FORWARD given twice",
        ),
        (ack(&["STOP", "STOP"]), "ERR option STOP given twice"),
        (
            ack(&["FORWARD", "q2", &good, "FOO"]),
            "ERR unknown option 'FOO' (allowed: RESULT, TTL, NOW, STOP, FORWARD, NEXT)",
        ),
        (
            ack(&["FORWARD", "q2", &good, "NEXT", "LEASE", "x"]),
            "ERR LEASE must be an integer",
        ),
    ];
    for (a, want) in &cases {
        let q2 = snapshot(&mut c, "q2");
        let e = assert_rejected(&mut c, "q", a, &[want]);
        assert!(e.starts_with(want), "{e}");
        assert_eq!(snapshot(&mut c, "q2"), q2, "{} changed q2", show_args(a));
    }
    // q2 full (orca.max-queue-length), a result over the limit.
    config_set(&mut c, "orca.max-queue-length", 1);
    assert_rejected(
        &mut c,
        "q2",
        &ack(&["FORWARD", "q2", &good]),
        &["QUEUEFULL queue is full"],
    );
    config_set(&mut c, "orca.max-queue-length", 10_000_000);
    config_set(&mut c, "orca.max-payload-bytes", 64);
    let big = "r".repeat(100);
    assert_rejected(
        &mut c,
        "q2",
        &ack(&["RESULT", &big, "FORWARD", "q2", &good]),
        &["TOOLARGE result is 100 bytes"],
    );
    config_set(&mut c, "orca.max-payload-bytes", 4_194_304);
    assert_eq!(
        state(&mut c, "q", &k).as_deref(),
        Some("leased"),
        "still held"
    );
    // A cancelled delivery.
    ok(&mut c, &args!["ORCA.DELETE", "q", &k]);
    assert_rejected(
        &mut c,
        "q2",
        &ack(&["FORWARD", "q2", &good]),
        &["CANCELLED job was cancelled"],
    );
    // A missing queue holds no lease, and no successor is created.
    assert_rejected(
        &mut c,
        "nothing",
        &args!["ORCA.ACK", "nothing", &k, "5", "FORWARD", "q3", &good],
        &["NOLEASE lease not held"],
    );
    assert!(!exists(&mut c, "q3"));
}

#[test]
fn nack_forwards_only_when_the_job_dies() {
    let s = Server::start_with(&["max-attempts", "2", "retry-base", "1"], &[]);
    let mut c = s.conn();
    let (k, l) = popped(&mut c, "q", "a");
    let report = config("report-a", None, 0);
    let (outcome, succ) = pair(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &k,
            &l,
            "DELAY",
            "0",
            "FORWARD",
            "failures",
            &report
        ],
    ));
    assert_eq!(text(&fields(outcome), "outcome"), "retry");
    assert_eq!(succ, Value::Nil);
    assert!(!exists(&mut c, "failures"));
    let f = must_pop(&mut c, "q", LONG);
    let (outcome, succ) = pair(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &k,
            lease(&f),
            "FORWARD",
            "failures",
            &report
        ],
    ));
    let outcome = fields(outcome);
    assert_eq!(
        (text(&outcome, "outcome"), int(&outcome, "attempts")),
        ("dead".into(), 2)
    );
    assert_eq!(int(&fields(succ), "created"), 1);
    assert_eq!(
        state(&mut c, "failures", &key_of("report-a")).as_deref(),
        Some("queued")
    );
    assert_eq!(state(&mut c, "q", &k).as_deref(), Some("dead"));

    // A superseded attempt (regraded while it ran) forwards nothing.
    let (k, l) = popped(&mut c, "q", "b");
    enqueue(&mut c, "q", &config("b", None, 0));
    let (outcome, succ) = pair(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &k,
            &l,
            "FORWARD",
            "failures",
            config("report-b", None, 0)
        ],
    ));
    assert_eq!(text(&fields(outcome), "outcome"), "superseded");
    assert_eq!(succ, Value::Nil);
    assert_eq!(qlen(&mut c, "failures"), 1);
    // With NEXT: [the next job, successor or nil]; a retry forwards nothing.
    let (k, l) = popped(&mut c, "q3", "c");
    enqueue(&mut c, "q3", &config("d", None, 0));
    let (next, succ) = pair(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q3",
            &k,
            &l,
            "FORWARD",
            "failures",
            &report,
            "NEXT"
        ],
    ));
    assert_eq!(text(&fields(next), "key"), key_of("d"));
    assert_eq!(succ, Value::Nil);
    assert_eq!(qlen(&mut c, "failures"), 1);
    assert_check(&mut c, "q3");
}

/// The keys of every spelling: `<queue2>` exactly when FORWARD stands as an
/// option with its values; a user who may only touch `q` is refused
/// (NOPERM) exactly then.
#[test]
fn getkeys_and_acl_name_the_second_queue_only_for_a_forward_option() {
    let (_s, mut c) = start_server();
    ok(
        &mut c,
        &args![
            "ACL",
            "SETUSER",
            "w",
            "on",
            ">pw",
            "resetkeys",
            "~q",
            "+@all"
        ],
    );
    let mut w = _s.conn();
    ok(&mut w, &args!["AUTH", "w", "pw"]);
    let cases: Vec<(&[&str], bool)> = vec![
        (&["ORCA.ACK", "q", "k", "1"], false),
        (&["ORCA.ACK", "q", "k", "1", "FORWARD", "q2", "{}"], true),
        (&["ORCA.ACK", "q", "k", "1", "forward", "q2", "{}"], true),
        (&["ORCA.ACK", "q", "k", "1", "RESULT", "FORWARD"], false),
        (
            &["ORCA.ACK", "q", "k", "1", "RESULT", "FORWARD", "TTL", "5"],
            false,
        ),
        (
            &[
                "ORCA.ACK", "q", "k", "1", "RESULT", "FORWARD", "FORWARD", "q2", "{}",
            ],
            true,
        ),
        (
            &[
                "ORCA.ACK", "q", "k", "1", "STOP", "TTL", "5", "FORWARD", "q2", "{}", "NEXT",
            ],
            true,
        ),
        (&["ORCA.ACK", "q", "k", "1", "FORWARD", "q2"], false),
        (
            &["ORCA.ACK", "q", "k", "1", "NEXT", "FORWARD", "q2", "{}"],
            false,
        ),
        (
            &["ORCA.ACK", "q", "k", "1", "FOO", "FORWARD", "q2", "{}"],
            false,
        ),
        (&["ORCA.ACK", "q", "FORWARD", "1", "RESULT", "x"], false),
        (&["ORCA.NACK", "q", "k", "1", "DELAY", "FORWARD"], false),
        (
            &[
                "ORCA.NACK",
                "q",
                "k",
                "1",
                "DELAY",
                "5",
                "FORWARD",
                "q2",
                "{}",
                "NEXT",
            ],
            true,
        ),
        (
            &["ORCA.NACK", "q", "k", "1", "STOP", "FORWARD", "q2", "{}"],
            false,
        ),
    ];
    for (spelling, second) in cases {
        let mut a = args!["COMMAND", "GETKEYS"];
        a.extend(spelling.iter().map(|s| s.as_bytes().to_vec()));
        let keys: Vec<String> = match ok(&mut c, &a) {
            Value::Array(v) => v.iter().map(as_string).collect(),
            other => panic!("{other:?}"),
        };
        let want: Vec<String> = if second {
            vec!["q".into(), "q2".into()]
        } else {
            vec!["q".into()]
        };
        assert_eq!(keys, want, "{spelling:?}");
        let cmd: Vec<Vec<u8>> = spelling.iter().map(|s| s.as_bytes().to_vec()).collect();
        let e = error_text(&raw(&mut w, &cmd)).unwrap_or_default();
        assert_eq!(e.starts_with("NOPERM"), second, "{spelling:?}: {e}");
    }
    // COMMAND INFO: movable keys, both key specs.
    let info = ok(&mut c, &args!["COMMAND", "INFO", "ORCA.ACK"]);
    assert!(format!("{info:?}").contains("movablekeys"), "{info:?}");
}

#[test]
fn replicas_and_aof_replay_reach_the_same_state() {
    let master = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = master.start_replica(&[], &[]);
    let mut c = master.conn();
    for i in 0..40 {
        let (k, l) = popped(&mut c, "{p}:a", &format!("j{i}"));
        let succ = config(
            &format!("s{i}"),
            Some(["user.1", "user.2"][i % 2]),
            i as i64,
        );
        let target = ["{p}:b", "{p}:a", "{p}:new"][i % 3];
        if i % 4 == 3 {
            ok(
                &mut c,
                &args!["ORCA.NACK", "{p}:a", &k, &l, "FORWARD", target, &succ],
            );
        } else {
            ok(
                &mut c,
                &args![
                    "ORCA.ACK",
                    "{p}:a",
                    &k,
                    &l,
                    "RESULT",
                    i.to_string(),
                    "FORWARD",
                    target,
                    &succ,
                    "NEXT"
                ],
            );
        }
    }
    assert_replica_equal(&master, &replica);
    let before = dataset_digests(&mut c);
    ok(&mut c, &args!["DEBUG", "LOADAOF"]);
    assert_same("after AOF replay", &before, &dataset_digests(&mut c));
    check_all(&mut c);
}

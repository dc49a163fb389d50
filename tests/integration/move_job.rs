//! `ORCA.MOVE`: `RELEASE` puts a job at the front, `DELAY` behind the last
//! score plus the buffer (`orca.move-to-back-buffer` or `BUFFER <ms>`);
//! the seed-000 examples, and what MOVE refuses.

use crate::common::*;

/// Seed 000's independent jobs: j1..j5 enqueued at 1000..5000, each in a
/// collation of its own or none.
fn independent_jobs(c: &mut Con, q: &str) {
    let colls = [Some("user.1"), None, Some("team.1"), Some("user.2"), None];
    for (i, coll) in colls.iter().enumerate() {
        let name = format!("j{}", i + 1);
        enqueue_at(c, q, &config(&name, *coll, 0), 1000 * (i as i64 + 1));
    }
}

/// Seed 000's collation: j5..j1 enqueued at 1000..5000 into one LIFO
/// collation (the stack j1..j5 over reservations 1000..5000).
fn one_collation(c: &mut Con, q: &str) {
    for (i, n) in ["j5", "j4", "j3", "j2", "j1"].iter().enumerate() {
        enqueue_at(c, q, &config(n, Some("user.1"), 0), 1000 * (i as i64 + 1));
    }
}

#[test]
fn move_release_seed_example() {
    // Variant 1: independent jobs (each its own collation or none).
    let (s, mut c) = start_server();
    independent_jobs(&mut c, "q");
    let f = move_at(&mut c, "q", &key_of("j1"), "RELEASE", 10_000);
    assert_write_fields(&f, &[]);
    assert_eq!(text(&f, "key"), key_of("j1"));
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&f, "created_at"), 1000);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j1")), "position"), 1);
    let f = move_at(&mut c, "q", &key_of("j2"), "release", 10_001);
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j2")), "position"), 1);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j1")), "position"), 2);
    for (i, n) in ["j3", "j4", "j5"].iter().enumerate() {
        let st = must_status(&mut c, "q", &key_of(n));
        assert_eq!(int(&st, "position"), i as i64 + 3);
        assert_eq!(
            int(&st, "release_at"),
            1000 * (i as i64 + 3),
            "{n} kept its time"
        );
    }
    assert_check(&mut c, "q");
    assert_eq!(
        pop_keys(&mut c, "q"),
        keys_of(&["j2", "j1", "j3", "j4", "j5"])
    );

    // Variant 2: all jobs in one LIFO collation (stack j1..j5), released
    // at a time earlier than every reservation.
    let mut c2 = s.conn();
    one_collation(&mut c2, "c");
    let f = move_at(&mut c2, "c", &key_of("j1"), "RELEASE", 10);
    assert_eq!(int(&f, "immediate"), 1);
    assert!(int(&f, "release_at") <= 10);
    let f = move_at(&mut c2, "c", &key_of("j2"), "RELEASE", 20);
    assert!(int(&f, "release_at") <= 10);
    // j1 and j2's paired reservations (1000, 2000) are gone; j3..j5 keep theirs.
    for (n, t) in [("j3", 3000), ("j4", 4000), ("j5", 5000)] {
        assert_eq!(
            int(&must_status(&mut c2, "c", &key_of(n)), "release_at"),
            t,
            "{n}"
        );
    }
    assert_eq!(int(&settings(&mut c2, "c"), "collations"), 1);
    assert_check(&mut c2, "c");
    assert_eq!(
        pop_keys(&mut c2, "c"),
        keys_of(&["j2", "j1", "j3", "j4", "j5"])
    );
}

#[test]
fn move_delay_seed_example() {
    // Variant 1: independent jobs.
    let (_s, mut c) = start_server();
    independent_jobs(&mut c, "q");
    let f = move_at(&mut c, "q", &key_of("j1"), "DELAY", 9000);
    assert_write_fields(&f, &[]);
    assert_eq!(int(&f, "immediate"), 0);
    assert_eq!(int(&f, "release_at"), 5000 + 10_000);
    assert_eq!(int(&f, "created_at"), 1000);
    let f = move_at(&mut c, "q", &key_of("j2"), "delay", 9000);
    assert_eq!(int(&f, "release_at"), 15_000 + 10_000);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j1")), "position"), 4);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j2")), "position"), 5);
    assert_check(&mut c, "q");
    assert_eq!(
        pop_keys(&mut c, "q"),
        keys_of(&["j3", "j4", "j5", "j1", "j2"])
    );

    // Variant 2: one LIFO collation; the delayed jobs go to the back of the
    // stack, the others keep their reservations.
    one_collation(&mut c, "c");
    assert_eq!(
        int(
            &move_at(&mut c, "c", &key_of("j1"), "DELAY", 1),
            "release_at"
        ),
        15_000
    );
    assert_eq!(
        int(
            &move_at(&mut c, "c", &key_of("j2"), "DELAY", 1),
            "release_at"
        ),
        25_000
    );
    for (n, t) in [("j3", 3000), ("j4", 4000), ("j5", 5000)] {
        assert_eq!(
            int(&must_status(&mut c, "c", &key_of(n)), "release_at"),
            t,
            "{n}"
        );
    }
    // The last score counts immediate jobs too.
    immediate_at(&mut c, "c", &config("z", None, 0), 100_000);
    assert_eq!(
        int(
            &move_at(&mut c, "c", &key_of("j3"), "DELAY", 1),
            "release_at"
        ),
        110_000
    );
    assert_check(&mut c, "c");
    assert_eq!(
        pop_keys(&mut c, "c"),
        keys_of(&["j4", "j5", "j1", "j2", "z", "j3"])
    );
}

#[test]
fn move_delay_buffer_setting_and_option() {
    let (_s, mut c) = start_server();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("orca.move-to-back-buffer")
        .query(&mut c)
        .unwrap();
    assert_eq!(got[1], "10000");
    for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
        enqueue_at(
            &mut c,
            "q",
            &config(n, Some("user.1"), 0),
            1000 * (i as i64 + 1),
        );
    }
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.move-to-back-buffer", "2500"],
    );
    let f = fields(ok(&mut c, &args!["ORCA.MOVE", "q", key_of("a"), "DELAY"]));
    assert_eq!(int(&f, "release_at"), 4000 + 2500);
    let f = fields(ok(
        &mut c,
        &args!["ORCA.MOVE", "q", key_of("b"), "DELAY", "BUFFER", "7"],
    ));
    assert_eq!(int(&f, "release_at"), 6500 + 7);
    // BUFFER 0: same score as the last one, still after it.
    let f = fields(ok(
        &mut c,
        &args![
            "ORCA.MOVE",
            "q",
            key_of("c"),
            "DELAY",
            "buffer",
            "0",
            "now",
            "5"
        ],
    ));
    assert_eq!(int(&f, "release_at"), 6507);
    assert_check(&mut c, "q");
    assert_eq!(pop_keys(&mut c, "q"), keys_of(&["d", "a", "b", "c"]));
}

#[test]
fn move_errors() {
    let (_s, mut c) = start_server();
    enqueue_at(&mut c, "q", &config("a", Some("user.1"), 0), 1000);
    enqueue_at(&mut c, "q", &config("b", None, 0), 1000);
    immediate_at(&mut c, "q", &config("i", Some("user.1"), 0), 1000);
    move_at(&mut c, "q", &key_of("b"), "RELEASE", 2000);
    for k in ["i", "b"] {
        for action in ["RELEASE", "DELAY"] {
            let e = assert_rejected(
                &mut c,
                "q",
                &args!["ORCA.MOVE", "q", key_of(k), action],
                &["IMMEDIATE "],
            );
            assert_eq!(e, "IMMEDIATE immediate jobs cannot be moved");
        }
    }
    // Unknown jobs: a well-formed key not in the queue, junk, a missing queue.
    let absent = key_of("absent");
    for key in [
        absent.as_str(),
        "nope",
        "",
        "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",
    ] {
        for action in ["RELEASE", "DELAY"] {
            let a = args!["ORCA.MOVE", "q", key, action];
            assert_eq!(
                assert_rejected(&mut c, "q", &a, &["NOJOB "]),
                "NOJOB no such job"
            );
        }
    }
    let e = assert_rejected(
        &mut c,
        "missing",
        &args!["ORCA.MOVE", "missing", key_of("a"), "RELEASE"],
        &["NOJOB "],
    );
    assert_eq!(e, "NOJOB no such job");
    assert!(!exists(&mut c, "missing"));
}

/// Regression (issue 14): MOVE of a key that exists but is not in the
/// queue order says where the job is, instead of "no such job"; nothing
/// changes.
#[test]
fn move_says_where_a_job_is_that_is_not_queued() {
    let (_s, mut c) = start_server();
    ok(&mut c, &args!["ORCA.SETTINGS", "q", "ORDER", "FIFO"]);
    for n in ["running", "retry", "dead", "held", "queued"] {
        let mut cfg: serde_json::Value = serde_json::from_str(&config(n, None, 0)).unwrap();
        if n == "held" {
            cfg["gate"] = "image-1".into();
            ok(&mut c, &args!["ORCA.GATE", "q", "image-1", "CLOSE"]);
        }
        enqueue(&mut c, "q", &cfg.to_string());
    }
    let running = must_pop(&mut c, "q", 60_000);
    assert_eq!(text(&running, "key"), key_of("running"));
    let retry = must_pop(&mut c, "q", 60_000);
    let nacked = nack_with(
        &mut c,
        "q",
        &text(&retry, "key"),
        &lease(&retry),
        &args!["DELAY", 60_000],
    );
    let retry_at = int(&nacked, "retry_at");
    let dead = must_pop(&mut c, "q", 60_000);
    nack_with(
        &mut c,
        "q",
        &text(&dead, "key"),
        &lease(&dead),
        &args!["MAXATTEMPTS", 1],
    );
    // A code per state, the retry time and the gate as fields (the full
    // texts are checked here; clients read only the code and fields).
    let cases = [
        (
            "running",
            "LEASED job is running (leased to a worker); it is not in the queue order".to_string(),
        ),
        (
            "retry",
            format!(
                "DELAYED {retry_at} job is waiting to be retried (at {retry_at}); it is not in the queue order"
            ),
        ),
        (
            "dead",
            "DEAD job is a dead letter (ORCA.DEAD ... REQUEUE puts it back)".to_string(),
        ),
        (
            "held",
            "HELD image-1 job is held behind gate 'image-1' (ORCA.GATE ... OPEN releases it)"
                .to_string(),
        ),
        ("never-enqueued", "NOJOB no such job".to_string()),
    ];
    for (n, want) in cases {
        for how in ["RELEASE", "DELAY"] {
            let e = assert_rejected(
                &mut c,
                "q",
                &args!["ORCA.MOVE", "q", key_of(n), how],
                &[&want],
            );
            assert_eq!(e, want, "{n}");
        }
    }
    // The queued one still moves.
    move_at(&mut c, "q", &key_of("queued"), "RELEASE", 5);
    assert_check(&mut c, "q");
}

//! `ORCA.DELETE`: the job leaves with its paired reservation; a job that is
//! leased, waiting for a retry or dead is cancelled in every state, and a
//! worker still holding it is told so.

use std::time::Duration;

use crate::common::*;

#[test]
fn delete_removes_the_job_and_its_paired_reservation() {
    let (_s, mut c) = start_server();
    for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
        enqueue_at(&mut c, "q", &config(n, Some("user.1"), 100), 10 * i as i64);
    }
    enqueue_at(&mut c, "q", &config("n", None, 0), 105);
    immediate_at(&mut c, "q", &config("i", None, 0), 1);
    // LIFO stack d c b a paired with 100 110 120 130.
    assert_eq!(
        int(&must_status(&mut c, "q", &key_of("c")), "release_at"),
        110
    );
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", key_of("c")])),
        1
    );
    assert!(status(&mut c, "q", &key_of("c")).is_none());
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", key_of("c")])),
        0
    );
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", key_of("i")])),
        1
    );
    // Not a key / not queued / no queue: 0, nothing created.
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", "junk"])), 0);
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", key_of("zz")])),
        0
    );
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "none", key_of("a")])),
        0
    );
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "none", "junk"])),
        0
    );
    assert!(!exists(&mut c, "none"));
    assert_order(
        &mut c,
        "q",
        &[("d", 100), ("n", 105), ("b", 120), ("a", 130)],
    );
}

#[test]
fn delete_cancels_a_leased_job() {
    let (_s, mut c) = start_server();
    let k = key_of("a");
    enqueue(&mut c, "q", &config("a", Some("user.1"), 0));
    enqueue(&mut c, "q", &config("other", None, 0));
    let p = pop_with(&mut c, "q", &args!["LEASE", 300]).expect("a");
    assert_eq!(text(&p, "key"), k);
    let t = lease(&p);
    let deadline = int(&p, "deadline");
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", &k])), 1);
    assert_eq!(status(&mut c, "q", &k), None);
    assert_eq!(qlen(&mut c, "q"), 1);
    assert_err(
        &mut c,
        &args!["ORCA.EXTEND", "q", &k, &t, 60_000],
        CANCELLED,
    );
    assert_err(&mut c, &args!["ORCA.ACK", "q", &k, &t], CANCELLED);
    assert_err(&mut c, &args!["ORCA.NACK", "q", &k, &t], CANCELLED);
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", &k])), 0);
    // Past the lease deadline: it never comes back.
    wait_for(
        "the lease deadline to pass",
        Duration::from_secs(10),
        || server_ms(&mut c) > deadline + 200,
    );
    let o = pop_with(&mut c, "q", &args!["LEASE", 60_000]).expect("other");
    assert_eq!(text(&o, "key"), key_of("other"));
    assert_eq!(pop_with(&mut c, "q", &[]), None);
    assert_eq!(status(&mut c, "q", &k), None);
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_err(&mut c, &args!["ORCA.ACK", "q", &k, &t], CANCELLED);
    assert!(dead_list(&mut c, "q", &[]).is_empty());
    assert_check(&mut c, "q");
}

#[test]
fn delete_cancels_every_state() {
    let (_s, mut c, b) = start_pinned();
    let (kd, kx, kr) = (key_of("delayed"), key_of("dead"), key_of("regraded"));
    enqueue_at(&mut c, "q", &config("delayed", None, 0), b);
    enqueue_at(&mut c, "q", &config("dead", None, 0), b + 1);
    enqueue_at(&mut c, "q", &config("regraded", None, 0), b + 2);
    let pd = must_pop_at(&mut c, "q", 1000, b + 10);
    let px = must_pop_at(&mut c, "q", 1000, b + 10);
    let pr = must_pop_at(&mut c, "q", 1000, b + 10);
    ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &kd,
            lease(&pd),
            "DELAY",
            500,
            "NOW",
            b + 20
        ],
    );
    ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &kx,
            lease(&px),
            "NOW",
            b + 20,
            "MAXATTEMPTS",
            1
        ],
    );
    enqueue_at(&mut c, "q", &config("regraded", None, 0), b + 30);
    assert_eq!(state(&mut c, "q", &kd).as_deref(), Some("delayed"));
    assert_eq!(state(&mut c, "q", &kx).as_deref(), Some("dead"));
    assert_eq!(state(&mut c, "q", &kr).as_deref(), Some("queued"));

    for k in [&kd, &kx, &kr] {
        assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", k])), 1, "{k}");
        assert_eq!(status(&mut c, "q", k), None, "{k}");
    }
    assert!(dead_list(&mut c, "q", &[]).is_empty());
    assert_eq!(qlen(&mut c, "q"), 0);
    // The regraded job's running delivery was cancelled with it.
    assert_err(&mut c, &args!["ORCA.ACK", "q", &kr, lease(&pr)], CANCELLED);
    // Nothing comes back: not the retry, not the lease.
    assert_eq!(pop_at(&mut c, "q", 1000, b + 100_000), None);
    assert_check(&mut c, "q");
}

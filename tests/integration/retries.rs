//! Retries and dead letters (docs/commands.md: ORCA.NACK, ORCA.DEAD,
//! ORCA.TICK): a NACKed job waits out its exponential backoff and is not
//! handed out before it, comes back at its original arrival time, dies
//! after `orca.max-attempts` deliveries (NACKed or expired), can be
//! requeued or purged from the dead list; a regrade supersedes the attempts
//! of the older config.

use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn nack_backoff_holds_the_job_until_retry_at() {
    let (_s, mut c) = start_server();
    config_set(&mut c, "orca.retry-base", 200);
    config_set(&mut c, "orca.retry-cap", 1000);
    config_set(&mut c, "orca.max-attempts", 0);
    let b = future_base(&mut c);
    let ka = key_of("a");
    enqueue_at(&mut c, "q", &config("a", Some("user.1"), 0), b);

    let p = must_pop_at(&mut c, "q", 10_000, b + 10);
    assert_eq!(text(&p, "key"), ka);
    let n = nack_at(&mut c, "q", &ka, &lease(&p), b + 20);
    assert_eq!(text(&n, "outcome"), "retry");
    assert_eq!(int(&n, "retry_at"), b + 20 + 200, "retry-base * 2^0");
    assert_eq!(int(&n, "attempts"), 1);

    // The only job, but not before its retry time.
    assert_eq!(pop_at(&mut c, "q", 10_000, b + 30), None);
    assert_eq!(pop_at(&mut c, "q", 10_000, b + 219), None);
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_eq!(state(&mut c, "q", &ka).as_deref(), Some("delayed"));

    // Jobs that arrive meanwhile are handed out; a's earlier arrival does not
    // let it cut in before its retry time.
    enqueue_at(&mut c, "q", &config("x", None, 0), b + 100);
    enqueue_at(&mut c, "q", &config("y", None, 0), b + 120);
    let px = must_pop_at(&mut c, "q", 10_000, b + 150);
    assert_eq!(text(&px, "key"), key_of("x"));

    // At retry_at it is back, immediate at its original arrival time: ahead
    // of y, which arrived after it.
    let p = must_pop_at(&mut c, "q", 10_000, b + 220);
    assert_eq!(text(&p, "key"), ka, "the retried job pops before y");
    assert_eq!(int(&p, "attempt"), 2);
    assert_eq!(int(&p, "immediate"), 1);
    assert_eq!(int(&p, "created_at"), b);
    let py = must_pop_at(&mut c, "q", 10_000, b + 221);
    assert_eq!(text(&py, "key"), key_of("y"));
    must_ack(&mut c, "q", &key_of("x"), &lease(&px));
    must_ack(&mut c, "q", &key_of("y"), &lease(&py));

    // Exponential backoff, capped by retry-cap.
    let mut now = b + 300;
    let mut p = p;
    for (attempt, backoff) in [(2, 400), (3, 800), (4, 1000), (5, 1000)] {
        assert_eq!(int(&p, "attempt"), attempt);
        let n = nack_at(&mut c, "q", &ka, &lease(&p), now);
        assert_eq!(text(&n, "outcome"), "retry");
        assert_eq!(int(&n, "attempts"), attempt);
        let retry_at = int(&n, "retry_at");
        assert_eq!(retry_at, now + backoff, "backoff after attempt {attempt}");
        assert_eq!(pop_at(&mut c, "q", 10_000, retry_at - 1), None);
        p = must_pop_at(&mut c, "q", 10_000, retry_at);
        assert_eq!(text(&p, "key"), ka);
        now = retry_at + 100;
    }
    assert_eq!(int(&p, "attempt"), 6);

    // DELAY 0: available at once.
    let n = nack_with(&mut c, "q", &ka, &lease(&p), &args!["DELAY", 0, "NOW", now]);
    assert_eq!(text(&n, "outcome"), "retry");
    assert_eq!(int(&n, "retry_at"), now);
    assert_eq!(qlen(&mut c, "q"), 1);
    let st = must_status(&mut c, "q", &ka);
    assert_eq!(text(&st, "state"), "queued");
    assert_eq!(int(&st, "position"), 1);
    let p = must_pop_at(&mut c, "q", 10_000, now);
    assert_eq!(text(&p, "key"), ka);
    assert_eq!(int(&p, "attempt"), 7);

    // An explicit DELAY overrides the backoff.
    let n = nack_with(
        &mut c,
        "q",
        &ka,
        &lease(&p),
        &args!["DELAY", 5000, "NOW", now + 1],
    );
    assert_eq!(int(&n, "retry_at"), now + 5001);
    assert_eq!(pop_at(&mut c, "q", 10_000, now + 5000), None);
    assert!(pop_at(&mut c, "q", 10_000, now + 5001).is_some());
    assert_check(&mut c, "q");
}

/// The same with the server's clock: NACK without NOW, POP right away is nil
/// while the server time is before retry_at, and the job comes back after.
#[test]
fn nack_backoff_on_the_server_clock() {
    let (_s, mut c) = start_server();
    config_set(&mut c, "orca.retry-base", 300);
    config_set(&mut c, "orca.retry-cap", 10_000);
    enqueue(&mut c, "q", &config("a", None, 0));
    let ka = key_of("a");
    let p = pop_with(&mut c, "q", &[]).expect("a");
    let t0 = server_ms(&mut c);
    let n = fields(ok(&mut c, &args!["ORCA.NACK", "q", &ka, lease(&p)]));
    let t1 = server_ms(&mut c);
    assert_eq!(text(&n, "outcome"), "retry");
    let retry_at = int(&n, "retry_at");
    assert!(
        (t0 + 300..=t1 + 300).contains(&retry_at),
        "retry_at {retry_at} not now+300 (now in {t0}..{t1})"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = pop_with(&mut c, "q", &[]);
        let after = server_ms(&mut c);
        match got {
            None => assert!(Instant::now() < deadline, "retried job never came back"),
            Some(f) => {
                assert!(
                    after >= retry_at,
                    "handed out at {after} < retry_at {retry_at}"
                );
                assert_eq!(text(&f, "key"), ka);
                assert_eq!(int(&f, "attempt"), 2);
                break;
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn max_attempts_dead_list_requeue_purge() {
    let s = Server::start_with(&["max-attempts", "2", "retry-base", "100"], &[]);
    let mut c = s.conn();
    let b = future_base(&mut c);
    let (ka, kz) = (key_of("a"), key_of("z"));
    let cfg_a = config("a", Some("team.9"), 0);
    enqueue_at(&mut c, "q", &cfg_a, b);
    enqueue_at(&mut c, "q", &config("z", None, 0), b + 1);

    let p = must_pop_at(&mut c, "q", 1000, b + 10);
    assert_eq!(text(&p, "key"), ka);
    let n = nack_at(&mut c, "q", &ka, &lease(&p), b + 20);
    assert_eq!(text(&n, "outcome"), "retry");
    assert_eq!(int(&n, "retry_at"), b + 120);
    let p = must_pop_at(&mut c, "q", 1000, b + 120);
    assert_eq!(
        text(&p, "key"),
        ka,
        "retried a (created b) before z (created b+1)"
    );
    assert_eq!(int(&p, "attempt"), 2);
    let n = nack_at(&mut c, "q", &ka, &lease(&p), b + 130);
    assert_eq!(text(&n, "outcome"), "dead");
    assert_eq!(int(&n, "attempts"), 2);
    assert!(!n.contains_key("retry_at"), "{n:?}");

    let st = must_status(&mut c, "q", &ka);
    assert_eq!(text(&st, "state"), "dead");
    assert_eq!(text(&st, "cause"), "failed");
    assert_eq!(int(&st, "died_at"), b + 130);
    assert_eq!(int(&st, "attempts"), 2);
    assert_eq!(qlen(&mut c, "q"), 1);
    let dl = dead_list(&mut c, "q", &[]);
    assert_eq!(dl.len(), 1);
    assert_eq!(text(&dl[0], "key"), ka);
    assert_eq!(text(&dl[0], "state"), "dead");
    assert_eq!(text(&dl[0], "cause"), "failed");
    assert_eq!(int(&dl[0], "died_at"), b + 130);
    assert_eq!(int(&dl[0], "attempts"), 2);
    assert_eq!(text(&dl[0], "payload"), cfg_a);
    assert_eq!(int(&dl[0], "created_at"), b);
    // A dead job is not handed out, whatever time it is.
    let pz = must_pop_at(&mut c, "q", 100_000, b + 10_000);
    assert_eq!(text(&pz, "key"), kz);
    assert_eq!(pop_at(&mut c, "q", 1000, b + 20_000), None);
    must_ack(&mut c, "q", &kz, &lease(&pz));

    // REQUEUE: back as immediate at now, attempts reset.
    let r = fields(ok(
        &mut c,
        &args!["ORCA.DEAD", "q", "REQUEUE", &ka, "NOW", b + 30_000],
    ));
    assert_eq!(text(&r, "key"), ka);
    assert_eq!(int(&r, "attempts"), 0);
    assert_eq!(int(&r, "immediate"), 1);
    assert_eq!(int(&r, "release_at"), b + 30_000);
    assert_eq!(text(&r, "payload"), cfg_a);
    assert!(dead_list(&mut c, "q", &[]).is_empty());
    assert_eq!(qlen(&mut c, "q"), 1);
    assert_eq!(state(&mut c, "q", &ka).as_deref(), Some("queued"));
    assert_err(&mut c, &args!["ORCA.DEAD", "q", "REQUEUE", &ka], "NOJOB ");
    let p = must_pop_at(&mut c, "q", 1000, b + 30_001);
    assert_eq!(text(&p, "key"), ka);
    assert_eq!(
        int(&p, "attempt"),
        1,
        "a requeued job has a fresh set of attempts"
    );
    // One failure is not fatal again (max-attempts 2).
    let n = nack_at(&mut c, "q", &ka, &lease(&p), b + 30_002);
    assert_eq!(text(&n, "outcome"), "retry");

    // Two dead jobs in the order they died; LIST paging; PURGE.
    let p = must_pop_at(&mut c, "q", 1000, b + 40_000);
    let n = nack_at(&mut c, "q", &ka, &lease(&p), b + 40_001);
    assert_eq!(text(&n, "outcome"), "dead");
    enqueue_at(&mut c, "q", &config("z", None, 0), b + 40_002);
    let pz = must_pop_at(&mut c, "q", 1000, b + 40_003);
    assert_eq!(text(&pz, "key"), kz);
    let n = nack_with(
        &mut c,
        "q",
        &kz,
        &lease(&pz),
        &args!["NOW", b + 40_004, "MAXATTEMPTS", 1],
    );
    assert_eq!(text(&n, "outcome"), "dead");
    let dl = dead_list(&mut c, "q", &[]);
    let order: Vec<String> = dl.iter().map(|f| text(f, "key")).collect();
    assert_eq!(order, vec![ka.clone(), kz.clone()]);
    let page = dead_list(&mut c, "q", &args!["OFFSET", 1, "LIMIT", 1]);
    assert_eq!(page.len(), 1);
    assert_eq!(text(&page[0], "key"), kz);
    assert_eq!(dead_list(&mut c, "q", &args!["LIMIT", 1]).len(), 1);
    // REQUEUE refused while the key is queued again (a regrade).
    enqueue_at(&mut c, "q", &config("z", None, 0), b + 40_005);
    assert_err(
        &mut c,
        &args!["ORCA.DEAD", "q", "REQUEUE", &kz],
        "ALREADYQUEUED ",
    );
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DEAD", "q", "PURGE"])), 2);
    assert!(dead_list(&mut c, "q", &[]).is_empty());
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DEAD", "q", "PURGE"])), 0);
    assert_eq!(status(&mut c, "q", &ka), None);
    assert_eq!(state(&mut c, "q", &kz).as_deref(), Some("queued"));
    assert_eq!(qlen(&mut c, "q"), 1);
    assert_check(&mut c, "q");
}

#[test]
fn expired_leases_count_as_attempts() {
    let s = Server::start_with(&["max-attempts", "2"], &[]);
    let mut c = s.conn();
    let ka = key_of("a");
    enqueue(&mut c, "q", &config("a", Some("user.3"), 0));

    let p = pop_with(&mut c, "q", &args!["LEASE", 100]).expect("a");
    assert_eq!(int(&p, "attempt"), 1);
    // The server's timer expires the lease: the job is queued again, as
    // immediate at its arrival time, with its attempt counted.
    wait_for("the first lease to expire", Duration::from_secs(10), || {
        state(&mut c, "q", &ka).as_deref() == Some("queued")
    });
    let st = must_status(&mut c, "q", &ka);
    assert_eq!(int(&st, "attempts"), 1);
    assert_eq!(int(&st, "immediate"), 1);
    assert_eq!(qlen(&mut c, "q"), 1);
    assert_err(
        &mut c,
        &args!["ORCA.ACK", "q", &ka, lease(&p)],
        LEASE_NOT_HELD,
    );

    let p = pop_with(&mut c, "q", &args!["LEASE", 100]).expect("a again");
    assert_eq!(int(&p, "attempt"), 2);
    let deadline = int(&p, "deadline");
    wait_for(
        "the second lease to expire",
        Duration::from_secs(10),
        || state(&mut c, "q", &ka).as_deref() == Some("dead"),
    );
    let st = must_status(&mut c, "q", &ka);
    assert_eq!(text(&st, "cause"), "lease-expired");
    assert_eq!(int(&st, "attempts"), 2);
    assert!(int(&st, "died_at") >= deadline, "{st:?}");
    let dl = dead_list(&mut c, "q", &[]);
    assert_eq!(dl.len(), 1);
    assert_eq!(text(&dl[0], "cause"), "lease-expired");
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_eq!(pop_with(&mut c, "q", &[]), None);
    assert_check(&mut c, "q");
}

/// Expiry applied by a pinned POP / TICK (not the timer), with the
/// threshold pinned by MAXATTEMPTS.
#[test]
fn pinned_tick_expires_and_buries() {
    let (_s, mut c, b) = start_pinned();
    let ka = key_of("a");
    let p = leased_at(&mut c, "q", "a", 100, b);
    assert_eq!(int(&p, "deadline"), b + 100);
    let t = fields(ok(&mut c, &args!["ORCA.TICK", "q", "NOW", b + 99]));
    assert_eq!(int(&t, "expired"), 0);
    assert_eq!(state(&mut c, "q", &ka).as_deref(), Some("leased"));
    let t = fields(ok(
        &mut c,
        &args!["ORCA.TICK", "q", "NOW", b + 100, "MAXATTEMPTS", 3],
    ));
    assert_eq!(int(&t, "expired"), 1);
    assert_eq!(int(&t, "died"), 0);
    assert_eq!(state(&mut c, "q", &ka).as_deref(), Some("queued"));
    let p = must_pop_at(&mut c, "q", 100, b + 200);
    assert_eq!(int(&p, "attempt"), 2);
    let t = fields(ok(
        &mut c,
        &args!["ORCA.TICK", "q", "NOW", b + 300, "MAXATTEMPTS", 2],
    ));
    // (`expired` counts leases that ran out, whatever became of them.)
    assert_eq!(int(&t, "died"), 1);
    assert_eq!(int(&t, "retried"), 0);
    let st = must_status(&mut c, "q", &ka);
    assert_eq!(text(&st, "state"), "dead");
    assert_eq!(text(&st, "cause"), "lease-expired");
    assert_eq!(int(&st, "died_at"), b + 300);
    assert_check(&mut c, "q");
}

#[test]
fn regrade_while_leased() {
    let (_s, mut c, b) = start_pinned();
    let k = key_of("r");
    let (v1, v2, v3, v4) = (
        revised("r", 1),
        revised("r", 2),
        revised("r", 3),
        revised("r", 4),
    );
    enqueue_at(&mut c, "q", &v1, b);
    let p1 = must_pop_at(&mut c, "q", 10_000, b + 1);
    assert_eq!(text(&p1, "payload"), v1);

    // Enqueue the same job while it runs: a new queued job.
    let e = enqueue_at(&mut c, "q", &v2, b + 2);
    assert_eq!(
        int(&e, "created"),
        1,
        "a running job is not 'updated' in place"
    );
    assert_eq!(text(&e, "key"), k);
    assert_eq!(qlen(&mut c, "q"), 1);
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "queued", "queued is shown first");
    assert_eq!(text(&st, "payload"), v2);
    let ls = leases(&st);
    assert_eq!(ls.len(), 1);
    assert_eq!(text(&ls[0], "lease"), lease(&p1));

    // The old delivery's ACK ends only itself.
    must_ack(&mut c, "q", &k, &lease(&p1));
    assert_eq!(qlen(&mut c, "q"), 1);
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "queued");
    assert_eq!(text(&st, "payload"), v2);
    assert!(leases(&st).is_empty(), "{st:?}");
    let p2 = must_pop_at(&mut c, "q", 10_000, b + 3);
    assert_eq!(text(&p2, "payload"), v2);
    assert_eq!(int(&p2, "attempt"), 1);
    assert_ne!(lease(&p2), lease(&p1));

    // NACK of a delivery whose key is queued again: superseded, dropped.
    enqueue_at(&mut c, "q", &v3, b + 4);
    let n = nack_at(&mut c, "q", &k, &lease(&p2), b + 5);
    assert_eq!(text(&n, "outcome"), "superseded");
    assert_eq!(qlen(&mut c, "q"), 1);
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "queued");
    assert_eq!(text(&st, "payload"), v3);
    assert!(leases(&st).is_empty());

    // A lease that expires while its key is queued again is dropped.
    let p3 = must_pop_at(&mut c, "q", 100, b + 6);
    assert_eq!(text(&p3, "payload"), v3);
    enqueue_at(&mut c, "q", &v4, b + 7);
    let p4 = must_pop_at(&mut c, "q", 10_000, b + 106);
    assert_eq!(text(&p4, "payload"), v4);
    assert_eq!(
        qlen(&mut c, "q"),
        0,
        "the expired v3 attempt did not come back"
    );
    assert_eq!(pop_at(&mut c, "q", 10_000, b + 107), None);
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(text(&st, "lease"), lease(&p4));
    assert_eq!(leases(&st).len(), 1);
    assert_err(
        &mut c,
        &args!["ORCA.ACK", "q", &k, lease(&p3)],
        LEASE_NOT_HELD,
    );
    assert_acked_and_gone(&mut c, "q", &k, &lease(&p4));
}

/// A regrade while the job waits for its retry: the newer config runs, the
/// pending retry is dropped and never comes back on top of it.
#[test]
fn regrade_while_delayed_drops_the_retry() {
    let (_s, mut c, b) = start_pinned();
    let k = key_of("r");
    enqueue_at(&mut c, "q", &revised("r", 1), b);
    let p = must_pop_at(&mut c, "q", 10_000, b + 1);
    let n = nack_with(
        &mut c,
        "q",
        &k,
        &lease(&p),
        &args!["DELAY", 1000, "NOW", b + 2],
    );
    assert_eq!(text(&n, "outcome"), "retry");
    assert_eq!(state(&mut c, "q", &k).as_deref(), Some("delayed"));
    let e = enqueue_at(&mut c, "q", &revised("r", 2), b + 3);
    assert_eq!(text(&e, "key"), k);
    assert_eq!(qlen(&mut c, "q"), 1);
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "queued");
    assert_eq!(text(&st, "payload"), revised("r", 2));
    // Past the old retry time: only the new config, once.
    let p2 = must_pop_at(&mut c, "q", 10_000, b + 5000);
    assert_eq!(text(&p2, "payload"), revised("r", 2));
    assert_eq!(pop_at(&mut c, "q", 10_000, b + 5001), None);
    assert_eq!(qlen(&mut c, "q"), 0);
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(leases(&st).len(), 1);
    assert_acked_and_gone(&mut c, "q", &k, &lease(&p2));
}

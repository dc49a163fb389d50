//! `ORCA.POP ... BLOCK`: a blocked worker is woken by an enqueue, an expired
//! lease, a due retry, a requeue or a NACK with `DELAY 0`; it times out with
//! nil; blocked workers are served in the order they blocked; BLOCK is
//! refused inside MULTI and scripts.

use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use redis::Value;

#[test]
fn block_pop_woken_by_enqueue() {
    let (s, mut c) = start_server();
    for (q, block) in [("q2000", 2000), ("q0", 0)] {
        // Blocked on a key that does not exist yet.
        let h = spawn_blocked(&s, args!["ORCA.POP", q, "BLOCK", block]);
        wait_blocked(&mut c, 1);
        let cfg = config("a", None, 0);
        enqueue(&mut c, q, &cfg);
        let (v, _) = joined(h);
        let f = fields(v);
        assert_eq!(text(&f, "key"), key_of("a"), "BLOCK {block}");
        assert_eq!(text(&f, "payload"), cfg);
        assert!(opt_text(&f, "lease").is_some(), "a blocked pop leases too");
        assert_eq!(state(&mut c, q, &key_of("a")).as_deref(), Some("leased"));
        assert_eq!(blocked_clients(&mut c), 0);
        assert_check(&mut c, q);
    }
    // Blocked on an existing, empty queue; LEASE 0 given with BLOCK applies.
    let h = spawn_blocked(&s, args!["ORCA.POP", "q0", "BLOCK", 5000, "LEASE", 0]);
    wait_blocked(&mut c, 1);
    enqueue(&mut c, "q0", &config("b", None, 0));
    let f = fields(joined(h).0);
    assert_eq!(text(&f, "key"), key_of("b"));
    assert_eq!(get(&f, "lease"), &Value::Nil);
    assert_eq!(status(&mut c, "q0", &key_of("b")), None);
    // A job already there: BLOCK returns at once.
    enqueue(&mut c, "q0", &config("c", None, 0));
    let t = Instant::now();
    let f = pop_with(&mut c, "q0", &args!["BLOCK", 0]).expect("c");
    assert_eq!(text(&f, "key"), key_of("c"));
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn block_pop_woken_by_expiry_retry_and_requeue() {
    let (s, mut c) = start_server();
    let k = key_of("a");
    let p = leased(&mut c, "q", "a", 200);

    // Woken when the lease expires (the timer).
    let h = spawn_blocked(&s, args!["ORCA.POP", "q", "BLOCK", 5000, "LEASE", 60_000]);
    let f = woken(h, "the lease expiry");
    assert_eq!(text(&f, "key"), k);
    assert_eq!(int(&f, "attempt"), 2);
    assert_ne!(lease(&f), lease(&p));

    // Woken when a retry comes due.
    let n = nack_with(&mut c, "q", &k, &lease(&f), &args!["DELAY", 300]);
    let retry_at = int(&n, "retry_at");
    let h = spawn_blocked(&s, args!["ORCA.POP", "q", "BLOCK", 5000, "LEASE", 60_000]);
    let f = woken(h, "the due retry");
    assert_eq!(text(&f, "key"), k);
    assert_eq!(int(&f, "attempt"), 3);
    assert!(server_ms(&mut c) >= retry_at);

    // Woken by ORCA.DEAD REQUEUE.
    ok(
        &mut c,
        &args!["ORCA.NACK", "q", &k, lease(&f), "MAXATTEMPTS", 1],
    );
    assert_eq!(state(&mut c, "q", &k).as_deref(), Some("dead"));
    let h = spawn_blocked(&s, args!["ORCA.POP", "q", "BLOCK", 5000]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &args!["ORCA.DEAD", "q", "REQUEUE", &k]);
    assert_eq!(int(&woken(h, "DEAD REQUEUE"), "attempt"), 1);
    assert_check(&mut c, "q");
}

#[test]
fn block_pop_woken_by_nack_delay_zero() {
    let (s, mut c) = start_server();
    let k = key_of("a");
    let p = leased(&mut c, "q", "a", 60_000);
    let h = spawn_blocked(&s, args!["ORCA.POP", "q", "BLOCK", 5000]);
    wait_blocked(&mut c, 1);
    let n = nack_with(&mut c, "q", &k, &lease(&p), &args!["DELAY", 0]);
    assert_eq!(text(&n, "outcome"), "retry");
    let f = woken(h, "NACK DELAY 0");
    assert_eq!(text(&f, "key"), k);
    assert_eq!(int(&f, "attempt"), 2);
}

#[test]
fn block_pop_times_out_with_nil() {
    let s = Server::start(&[]);
    let mut c = blocking_conn(&s);
    let t = Instant::now();
    assert_eq!(
        ok(&mut c, &args!["ORCA.POP", "none", "BLOCK", 300]),
        Value::Nil
    );
    let e = t.elapsed();
    assert!(e >= Duration::from_millis(250), "returned after {e:?}");
    assert!(e < Duration::from_secs(5), "returned after {e:?}");
    // An existing queue with only a leased and a delayed job: still nil.
    enqueue(&mut c, "q", &config("a", None, 0));
    enqueue(&mut c, "q", &config("b", None, 0));
    pop_with(&mut c, "q", &args!["LEASE", 60_000]).expect("a");
    let pb = pop_with(&mut c, "q", &args!["LEASE", 60_000]).expect("b");
    ok(
        &mut c,
        &args!["ORCA.NACK", "q", key_of("b"), lease(&pb), "DELAY", 60_000],
    );
    let t = Instant::now();
    assert_eq!(
        ok(&mut c, &args!["ORCA.POP", "q", "BLOCK", 300, "COUNT", 2]),
        Value::Nil
    );
    assert!(t.elapsed() >= Duration::from_millis(250));
    assert_eq!(blocked_clients(&mut c), 0);
    // The connection is usable afterwards.
    assert_eq!(qlen(&mut c, "q"), 0);
}

/// Two clients blocked in `ORCA.POP q BLOCK 10000`, the first before the
/// second. They connect in the opposite order, so the order a test sees is
/// the blocking order, not the connection order.
fn block_two(s: &Server, c: &mut Con) -> (Blocked, Blocked) {
    let second = blocking_conn(s);
    let first = blocking_conn(s);
    let h1 = spawn_cmd(first, args!["ORCA.POP", "q", "BLOCK", 10_000]);
    wait_blocked(c, 1);
    let h2 = spawn_cmd(second, args!["ORCA.POP", "q", "BLOCK", 10_000]);
    wait_blocked(c, 2);
    (h1, h2)
}

#[test]
fn blocked_clients_are_served_in_blocking_order() {
    let (s, mut c) = start_server();
    let (h1, h2) = block_two(&s, &mut c);
    enqueue(&mut c, "q", &config("j1", None, 0));
    let (v1, _) = joined(h1);
    assert_eq!(
        text(&fields(v1), "key"),
        key_of("j1"),
        "the first blocked client gets j1"
    );
    // The second one is still waiting: one job, one client served.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(blocked_clients(&mut c), 1);
    assert!(!h2.is_finished());
    enqueue(&mut c, "q", &config("j2", None, 0));
    let (v2, _) = joined(h2);
    assert_eq!(text(&fields(v2), "key"), key_of("j2"));

    // Two jobs arriving in one transaction serve two clients, in order.
    let (h1, h2) = block_two(&s, &mut c);
    let t = server_ms(&mut c);
    ok(&mut c, &args!["MULTI"]);
    raw(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", config("k1", None, 0), "NOW", t],
    );
    raw(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", config("k2", None, 0), "NOW", t + 1],
    );
    let exec = ok(&mut c, &args!["EXEC"]);
    assert!(matches!(&exec, Value::Array(v) if v.len() == 2), "{exec:?}");
    let (v1, _) = joined(h1);
    let (v2, _) = joined(h2);
    assert_eq!(text(&fields(v1), "key"), key_of("k1"));
    assert_eq!(text(&fields(v2), "key"), key_of("k2"));
    assert_check(&mut c, "q");
}

#[test]
fn block_is_refused_in_multi_and_scripts() {
    let (_s, mut c) = start_server();
    enqueue(&mut c, "q", &config("a", None, 0));
    let before = digest(&mut c, "q");

    ok(&mut c, &args!["MULTI"]);
    raw(&mut c, &args!["ORCA.POP", "q", "BLOCK", 100]);
    let exec = ok(&mut c, &args!["EXEC"]);
    match &exec {
        Value::Array(items) if items.len() == 1 => {
            let e = error_text(&items[0])
                .unwrap_or_else(|| panic!("BLOCK in MULTI gave {:?}", items[0]));
            assert!(e.starts_with("ERR") && e.contains(BLOCK_REFUSED), "{e}");
        }
        other => panic!("EXEC reply {other:?}"),
    }
    assert_eq!(digest(&mut c, "q"), before, "a refused pop changes nothing");

    for (block, key) in [("100", "q"), ("0", "missing")] {
        let script = format!(r#"return redis.call("ORCA.POP", KEYS[1], "BLOCK", "{block}")"#);
        let e = fails(&mut c, &args!["EVAL", script, 1, key]);
        assert!(e.contains(BLOCK_REFUSED), "{e}");
    }
    assert_eq!(digest(&mut c, "q"), before);
    assert_eq!(blocked_clients(&mut c), 0);

    // Without BLOCK both work.
    ok(&mut c, &args!["MULTI"]);
    raw(&mut c, &args!["ORCA.POP", "q", "LEASE", 60_000]);
    match ok(&mut c, &args!["EXEC"]) {
        Value::Array(items) if items.len() == 1 => {
            assert_eq!(text(&fields(items[0].clone()), "key"), key_of("a"))
        }
        other => panic!("EXEC reply {other:?}"),
    }
    enqueue(&mut c, "q", &config("b", None, 0));
    let v = ok(
        &mut c,
        &args!["EVAL", r#"return redis.call("ORCA.POP", KEYS[1])"#, 1, "q"],
    );
    assert_eq!(text(&fields(v), "key"), key_of("b"));
    assert_check(&mut c, "q");
}

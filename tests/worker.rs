//! Integration tests of the worker features (docs/commands.md: ORCA.POP with
//! LEASE/BLOCK/COUNT, ORCA.ACK, ORCA.NACK, ORCA.EXTEND, ORCA.RESULT,
//! ORCA.DEAD, ORCA.TICK, cancellation by ORCA.DELETE, ORCA.STATUS states)
//! against a real redis-server with the built module (`tests/common/mod.rs`).
//!
//! Two clocks are used:
//! - *pinned*: `NOW <ms>` on every command, at a base far in the future of
//!   the server's clock (`future_base`), so the server's own 50 ms timer never
//!   finds anything due and every time-driven change happens exactly when a
//!   pinned POP (or TICK) applies it. Deterministic.
//! - *real*: short leases / retries / TTLs and polling with generous limits,
//!   for what only the server clock and its timer do (expiry by the timer,
//!   BLOCK wake-ups, replication of ticks, the chaos test).

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use redis::Value;

type Con = redis::Connection;

const LEASE_NOT_HELD: &str = "ERR lease not held";
const CANCELLED: &str = "ERR job was cancelled";
const BLOCK_REFUSED: &str = "BLOCK is not allowed inside MULTI/EXEC or scripts";

// ---------------------------------------------------------------------------
// Helpers (this file only)
// ---------------------------------------------------------------------------

/// The server's clock (ms), from `TIME`.
fn server_ms(c: &mut Con) -> i64 {
    match ok(c, &args!["TIME"]) {
        Value::Array(v) if v.len() == 2 => {
            let s: i64 = as_string(&v[0]).parse().expect("TIME seconds");
            let us: i64 = as_string(&v[1]).parse().expect("TIME micros");
            s * 1000 + us / 1000
        }
        other => panic!("unexpected TIME reply {other:?}"),
    }
}

/// A pinned clock far ahead of the server's (about 28 hours), so the
/// server's timer never reaches any deadline set from it during a test.
fn future_base(c: &mut Con) -> i64 {
    server_ms(c) + 100_000_000
}

fn set_config(c: &mut Con, name: &str, value: i64) {
    ok(c, &args!["CONFIG", "SET", format!("orca.{name}"), value]);
}

/// `ORCA.ENQUEUE` with `NOW` pinned (or the server clock with `None`).
fn enq(c: &mut Con, q: &str, cfg: &str, now: Option<i64>) -> Fields {
    let mut a = args!["ORCA.ENQUEUE", q, cfg];
    if let Some(t) = now {
        a.extend(args!["NOW", t]);
    }
    fields(ok(c, &a))
}

/// A config whose payload carries a version marker (same orca key as
/// `config(key, ..)`: a regrade of the same job).
fn config_v(key: &str, version: i64) -> String {
    format!(r#"{{"key":"{key}","response_url":"http://cb/{key}","version":{version}}}"#)
}

/// `ORCA.POP q <opts...>` that must succeed: the job reply or `None`.
fn pop_opts(c: &mut Con, q: &str, opts: &[Vec<u8>]) -> Option<Fields> {
    let mut a = args!["ORCA.POP", q];
    a.extend(opts.iter().cloned());
    match ok(c, &a) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

/// Pinned pop with a lease.
fn pop_at(c: &mut Con, q: &str, lease: i64, now: i64) -> Option<Fields> {
    pop_opts(c, q, &args!["LEASE", lease, "NOW", now])
}

fn must_pop_at(c: &mut Con, q: &str, lease: i64, now: i64) -> Fields {
    pop_at(c, q, lease, now).unwrap_or_else(|| panic!("POP {q} at {now} gave nil"))
}

fn status(c: &mut Con, q: &str, key: &str) -> Option<Fields> {
    match ok(c, &args!["ORCA.STATUS", q, key]) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

fn must_status(c: &mut Con, q: &str, key: &str) -> Fields {
    status(c, q, key).unwrap_or_else(|| panic!("ORCA.STATUS {q} {key} is nil"))
}

fn state(c: &mut Con, q: &str, key: &str) -> Option<String> {
    status(c, q, key).map(|f| text(&f, "state"))
}

/// The `leases` field of a STATUS reply, each entry parsed.
fn leases(f: &Fields) -> Vec<Fields> {
    match get(f, "leases") {
        Value::Array(items) => items.iter().cloned().map(fields).collect(),
        other => panic!("leases is not an array: {other:?}"),
    }
}

fn lease(f: &Fields) -> String {
    opt_text(f, "lease").unwrap_or_else(|| panic!("reply has a nil lease: {f:?}"))
}

fn ack(c: &mut Con, q: &str, key: &str, lease: &str) -> Value {
    raw(c, &args!["ORCA.ACK", q, key, lease])
}

fn must_ack(c: &mut Con, q: &str, key: &str, lease: &str) {
    assert_eq!(ack(c, q, key, lease), Value::Int(1), "ACK {key} {lease}");
}

fn nack_at(c: &mut Con, q: &str, key: &str, lease: &str, now: i64) -> Fields {
    fields(ok(c, &args!["ORCA.NACK", q, key, lease, "NOW", now]))
}

/// The command must fail with an error starting with `prefix`.
fn assert_err(c: &mut Con, a: &[Vec<u8>], prefix: &str) -> String {
    let e = fails(c, a);
    assert!(
        e.starts_with(prefix),
        "{}: expected an error starting with {prefix:?}, got {e:?}",
        show_args(a)
    );
    e
}

fn dead_list(c: &mut Con, q: &str, extra: &[Vec<u8>]) -> Vec<Fields> {
    let mut a = args!["ORCA.DEAD", q, "LIST"];
    a.extend(extra.iter().cloned());
    match ok(c, &a) {
        Value::Array(items) => items.into_iter().map(fields).collect(),
        other => panic!("DEAD LIST reply {other:?}"),
    }
}

fn result(c: &mut Con, q: &str, key: &str) -> Option<Vec<u8>> {
    match ok(c, &args!["ORCA.RESULT", q, key]) {
        Value::Nil => None,
        v => Some(as_bytes(&v)),
    }
}

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn blocked_clients(c: &mut Con) -> i64 {
    info(c, "clients")
        .get("blocked_clients")
        .and_then(|v| v.parse().ok())
        .expect("blocked_clients in INFO clients")
}

fn wait_blocked(c: &mut Con, n: i64) {
    wait_for(
        &format!("{n} blocked clients"),
        Duration::from_secs(10),
        || blocked_clients(c) == n,
    );
}

/// A connection for a blocking call: a read timeout so a broken wake-up
/// fails the test instead of hanging it.
fn blocking_conn(s: &Server) -> Con {
    let c = s.conn();
    c.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("set_read_timeout");
    c
}

/// Run a command on its own thread (a blocked client); the reply and how
/// long it took.
fn spawn_cmd(mut c: Con, a: Vec<Vec<u8>>) -> thread::JoinHandle<(Value, Duration, Con)> {
    thread::spawn(move || {
        let t = Instant::now();
        let v = raw(&mut c, &a);
        (v, t.elapsed(), c)
    })
}

fn joined(h: thread::JoinHandle<(Value, Duration, Con)>) -> (Value, Duration) {
    let (v, d, _c) = h.join().expect("blocked client thread panicked");
    (v, d)
}

// ---------------------------------------------------------------------------
// 1. POP leases by default; LEASE 0; LEN and STATUS per state
// ---------------------------------------------------------------------------

#[test]
fn pop_leases_by_default() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let cfg = config("a", Some("user.1"), 0);
    let e = enq(&mut c, "q", &cfg, None);
    let created_at = int(&e, "created_at");

    let t0 = server_ms(&mut c);
    let f = pop_opts(&mut c, "q", &[]).expect("POP gives the job");
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
        pop_opts(&mut c, "q", &[]),
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
    set_config(&mut c, "lease-time", 12_345);
    enq(&mut c, "q", &config("b", None, 0), None);
    let t0 = server_ms(&mut c);
    let f = pop_opts(&mut c, "q", &[]).expect("POP b");
    let t1 = server_ms(&mut c);
    let deadline = int(&f, "deadline");
    assert!(
        (t0 + 12_345..=t1 + 12_345).contains(&deadline),
        "deadline {deadline} not now+12345 (now in {t0}..{t1})"
    );
    // An explicit LEASE wins over the setting.
    enq(&mut c, "q", &config("c", None, 0), None);
    let t0 = server_ms(&mut c);
    let f = pop_opts(&mut c, "q", &args!["LEASE", 60_000]).expect("POP c");
    let t1 = server_ms(&mut c);
    let deadline = int(&f, "deadline");
    assert!((t0 + 60_000..=t1 + 60_000).contains(&deadline), "{f:?}");
    assert_check(&mut c, "q");
}

#[test]
fn pop_lease_zero_removes_the_job() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let cfg = config("a", None, 0);
    enq(&mut c, "q", &cfg, None);
    enq(&mut c, "q", &config("b", None, 0), None);
    let f = pop_opts(&mut c, "q", &args!["LEASE", 0]).expect("POP LEASE 0");
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
    let f = pop_opts(&mut c, "q", &args!["LEASE", 0, "NOW", far]).expect("b");
    assert_eq!(text(&f, "key"), key_of("b"));
    assert_eq!(pop_opts(&mut c, "q", &args!["LEASE", 0, "NOW", far]), None);
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_check(&mut c, "q");
}

#[test]
fn len_and_status_reflect_every_state() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let b = future_base(&mut c);
    let (ka, kb) = (key_of("a"), key_of("b"));
    enq(&mut c, "q", &config("a", None, 0), Some(b));
    enq(&mut c, "q", &config("b", None, 0), Some(b + 1));
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
    let n = fields(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &ka,
            lease(&pa),
            "DELAY",
            500,
            "NOW",
            b + 20
        ],
    ));
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
    let n = fields(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &kb,
            lease(&pb),
            "NOW",
            b + 40,
            "MAXATTEMPTS",
            1
        ],
    ));
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

// ---------------------------------------------------------------------------
// 2. ACK, results, refused ACKs
// ---------------------------------------------------------------------------

#[test]
fn ack_removes_and_keeps_results() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    for k in ["a", "b", "c", "d"] {
        enq(&mut c, "q", &config(k, None, 0), None);
    }
    // Plain ACK: gone.
    let f = pop_opts(&mut c, "q", &[]).expect("a");
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
    let f = pop_opts(&mut c, "q", &[]).expect("b");
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
    assert_eq!(
        status(&mut c, "q", &kb),
        None,
        "acked with result: job gone"
    );

    // TTL 0 keeps nothing.
    let f = pop_opts(&mut c, "q", &[]).expect("c");
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
    set_config(&mut c, "result-ttl", 0);
    let f = pop_opts(&mut c, "q", &[]).expect("d");
    let kd = text(&f, "key");
    ok(
        &mut c,
        &args!["ORCA.ACK", "q", &kd, lease(&f), "RESULT", "y"],
    );
    assert_eq!(result(&mut c, "q", &kd), None);
    set_config(&mut c, "result-ttl", 3_600_000);

    // A short TTL: there, then forgotten.
    enq(&mut c, "q", &config("e", None, 0), None);
    let f = pop_opts(&mut c, "q", &[]).expect("e");
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
    let s = Server::start(&[]);
    let mut c = s.conn();
    enq(&mut c, "q", &config("a", None, 0), None);
    enq(&mut c, "q", &config("b", None, 0), None);
    let fa = pop_opts(&mut c, "q", &[]).expect("a");
    let fb = pop_opts(&mut c, "q", &[]).expect("b");
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

// ---------------------------------------------------------------------------
// 3. NACK: backoff, not handed out before retry_at, comes back at created_at
// ---------------------------------------------------------------------------

#[test]
fn nack_backoff_holds_the_job_until_retry_at() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    set_config(&mut c, "retry-base", 200);
    set_config(&mut c, "retry-cap", 1000);
    set_config(&mut c, "max-attempts", 0);
    let b = future_base(&mut c);
    let ka = key_of("a");
    enq(&mut c, "q", &config("a", Some("user.1"), 0), Some(b));

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
    enq(&mut c, "q", &config("x", None, 0), Some(b + 100));
    enq(&mut c, "q", &config("y", None, 0), Some(b + 120));
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
    let n = fields(ok(
        &mut c,
        &args!["ORCA.NACK", "q", &ka, lease(&p), "DELAY", 0, "NOW", now],
    ));
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
    let n = fields(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &ka,
            lease(&p),
            "DELAY",
            5000,
            "NOW",
            now + 1
        ],
    ));
    assert_eq!(int(&n, "retry_at"), now + 5001);
    assert_eq!(pop_at(&mut c, "q", 10_000, now + 5000), None);
    assert!(pop_at(&mut c, "q", 10_000, now + 5001).is_some());
    assert_check(&mut c, "q");
}

/// The same with the server's clock: NACK without NOW, POP right away is nil
/// while the server time is before retry_at, and the job comes back after.
#[test]
fn nack_backoff_on_the_server_clock() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    set_config(&mut c, "retry-base", 300);
    set_config(&mut c, "retry-cap", 10_000);
    enq(&mut c, "q", &config("a", None, 0), None);
    let ka = key_of("a");
    let p = pop_opts(&mut c, "q", &[]).expect("a");
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
        let got = pop_opts(&mut c, "q", &[]);
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

// ---------------------------------------------------------------------------
// 4. max-attempts and the dead list
// ---------------------------------------------------------------------------

#[test]
fn max_attempts_dead_list_requeue_purge() {
    let s = Server::start_with(&["max-attempts", "2", "retry-base", "100"], &[]);
    let mut c = s.conn();
    let b = future_base(&mut c);
    let (ka, kz) = (key_of("a"), key_of("z"));
    let cfg_a = config("a", Some("team.9"), 0);
    enq(&mut c, "q", &cfg_a, Some(b));
    enq(&mut c, "q", &config("z", None, 0), Some(b + 1));

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
    assert_err(
        &mut c,
        &args!["ORCA.DEAD", "q", "REQUEUE", &ka],
        "ERR no such job",
    );
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
    enq(&mut c, "q", &config("z", None, 0), Some(b + 40_002));
    let pz = must_pop_at(&mut c, "q", 1000, b + 40_003);
    assert_eq!(text(&pz, "key"), kz);
    let n = fields(ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "q",
            &kz,
            lease(&pz),
            "NOW",
            b + 40_004,
            "MAXATTEMPTS",
            1
        ],
    ));
    assert_eq!(text(&n, "outcome"), "dead");
    let dl = dead_list(&mut c, "q", &[]);
    let order: Vec<String> = dl.iter().map(|f| text(f, "key")).collect();
    assert_eq!(order, vec![ka.clone(), kz.clone()]);
    let page = dead_list(&mut c, "q", &args!["OFFSET", 1, "LIMIT", 1]);
    assert_eq!(page.len(), 1);
    assert_eq!(text(&page[0], "key"), kz);
    assert_eq!(dead_list(&mut c, "q", &args!["LIMIT", 1]).len(), 1);
    // REQUEUE refused while the key is queued again (a regrade).
    enq(&mut c, "q", &config("z", None, 0), Some(b + 40_005));
    assert_err(
        &mut c,
        &args!["ORCA.DEAD", "q", "REQUEUE", &kz],
        "ERR job is already queued",
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
    enq(&mut c, "q", &config("a", Some("user.3"), 0), None);

    let p = pop_opts(&mut c, "q", &args!["LEASE", 100]).expect("a");
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

    let p = pop_opts(&mut c, "q", &args!["LEASE", 100]).expect("a again");
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
    assert_eq!(pop_opts(&mut c, "q", &[]), None);
    assert_check(&mut c, "q");
}

/// Expiry applied by a pinned POP / TICK (not the timer), with the
/// threshold pinned by MAXATTEMPTS.
#[test]
fn pinned_tick_expires_and_buries() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let b = future_base(&mut c);
    let ka = key_of("a");
    enq(&mut c, "q", &config("a", None, 0), Some(b));
    let p = must_pop_at(&mut c, "q", 100, b);
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

// ---------------------------------------------------------------------------
// 5. EXTEND
// ---------------------------------------------------------------------------

/// On the server clock: EXTEND moves the deadline; the timer neither
/// expires the lease at its original deadline nor hands the job out again,
/// and it does expire it at the new one.
#[test]
fn extend_pushes_the_deadline() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let ka = key_of("a");
    enq(&mut c, "q", &config("a", None, 0), None);
    let p = pop_opts(&mut c, "q", &args!["LEASE", 300]).expect("a");
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
    assert_eq!(pop_opts(&mut c, "q", &[]), None);
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
    let p2 = pop_opts(&mut c, "q", &args!["LEASE", 60_000]).expect("a again");
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
    must_ack(&mut c, "q", &ka, &t2);
    assert_eq!(status(&mut c, "q", &ka), None);
    assert_check(&mut c, "q");
}

/// EXTEND with `NOW` pinned: the form the server itself replicates
/// (`ORCA.EXTEND <q> <key> <lease> <ms> NOW <ms>`, src/redis/worker.rs), so
/// it must be accepted. (Fails while `orca.extend` is registered with the
/// exact arity 5 in src/redis/cmdinfo.rs.)
#[test]
fn extend_with_pinned_now_as_replicated() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let b = future_base(&mut c);
    let ka = key_of("a");
    enq(&mut c, "q", &config("a", None, 0), Some(b));
    let p = must_pop_at(&mut c, "q", 1000, b);
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

/// A heartbeat on the master reaches the replica. (Fails while the
/// replicated `ORCA.EXTEND ... NOW <ms>` is refused by the replica for its
/// arity: the replica logs "== CRITICAL == This replica is sending an error
/// to its master: 'wrong number of arguments for 'orca.extend' command'" and
/// keeps the old deadline.)
#[test]
fn extend_reaches_the_replica() {
    let m = Server::start(&[]);
    let r = m.start_replica(&[], &[]);
    let mut c = m.conn();
    let mut rc = r.conn();
    let ka = key_of("a");
    enq(&mut c, "q", &config("a", None, 0), None);
    let p = pop_opts(&mut c, "q", &args!["LEASE", 60_000]).expect("a");
    let d = as_int(&ok(
        &mut c,
        &args!["ORCA.EXTEND", "q", &ka, lease(&p), 600_000],
    ));
    sync_replica(&m, &r);
    let st = must_status(&mut rc, "q", &ka);
    assert_eq!(int(&st, "deadline"), d, "the replica kept the old deadline");
    assert_eq!(digest(&mut c, "q"), digest(&mut rc, "q"));
    assert!(
        !r.log()
            .contains("This replica is sending an error to its master"),
        "replica refused a replicated command:\n{}",
        r.log()
    );
}

// ---------------------------------------------------------------------------
// 6. Fencing
// ---------------------------------------------------------------------------

#[test]
fn fencing_after_lease_expiry() {
    let s = Server::start(&[]);
    let mut a = s.conn();
    let mut b = s.conn();
    let k = key_of("j");
    enq(&mut a, "q", &config("j", Some("user.5"), 0), None);
    let fa = pop_opts(&mut a, "q", &args!["LEASE", 100]).expect("worker A gets j");
    let ta = lease(&fa);
    // The timer expires A's lease: j is queued again.
    wait_for("A's lease to expire", Duration::from_secs(10), || {
        state(&mut b, "q", &k).as_deref() == Some("queued")
    });
    let fb = pop_opts(&mut b, "q", &args!["LEASE", 60_000]).expect("worker B gets j");
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
    assert_eq!(status(&mut a, "q", &k), None);
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
    enq(&mut a, "q", &config("j", None, 0), Some(t));
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

// ---------------------------------------------------------------------------
// 7. Regrade while leased
// ---------------------------------------------------------------------------

#[test]
fn regrade_while_leased() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let b = future_base(&mut c);
    let k = key_of("r");
    let (v1, v2, v3, v4) = (
        config_v("r", 1),
        config_v("r", 2),
        config_v("r", 3),
        config_v("r", 4),
    );
    enq(&mut c, "q", &v1, Some(b));
    let p1 = must_pop_at(&mut c, "q", 10_000, b + 1);
    assert_eq!(text(&p1, "payload"), v1);

    // Enqueue the same job while it runs: a new queued job.
    let e = enq(&mut c, "q", &v2, Some(b + 2));
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
    enq(&mut c, "q", &v3, Some(b + 4));
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
    enq(&mut c, "q", &v4, Some(b + 7));
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
    must_ack(&mut c, "q", &k, &lease(&p4));
    assert_eq!(status(&mut c, "q", &k), None);
    assert_check(&mut c, "q");
}

/// A regrade while the job waits for its retry: the newer config runs, the
/// pending retry is dropped and never comes back on top of it.
#[test]
fn regrade_while_delayed_drops_the_retry() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let b = future_base(&mut c);
    let k = key_of("r");
    enq(&mut c, "q", &config_v("r", 1), Some(b));
    let p = must_pop_at(&mut c, "q", 10_000, b + 1);
    let n = fields(ok(
        &mut c,
        &args!["ORCA.NACK", "q", &k, lease(&p), "DELAY", 1000, "NOW", b + 2],
    ));
    assert_eq!(text(&n, "outcome"), "retry");
    assert_eq!(state(&mut c, "q", &k).as_deref(), Some("delayed"));
    let e = enq(&mut c, "q", &config_v("r", 2), Some(b + 3));
    assert_eq!(text(&e, "key"), k);
    assert_eq!(qlen(&mut c, "q"), 1);
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "queued");
    assert_eq!(text(&st, "payload"), config_v("r", 2));
    // Past the old retry time: only the new config, once.
    let p2 = must_pop_at(&mut c, "q", 10_000, b + 5000);
    assert_eq!(text(&p2, "payload"), config_v("r", 2));
    assert_eq!(pop_at(&mut c, "q", 10_000, b + 5001), None);
    assert_eq!(qlen(&mut c, "q"), 0);
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "state"), "leased");
    assert_eq!(leases(&st).len(), 1);
    must_ack(&mut c, "q", &k, &lease(&p2));
    assert_eq!(status(&mut c, "q", &k), None);
    assert_check(&mut c, "q");
}

// ---------------------------------------------------------------------------
// 8. DELETE cancels
// ---------------------------------------------------------------------------

#[test]
fn delete_cancels_a_leased_job() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let k = key_of("a");
    enq(&mut c, "q", &config("a", Some("user.1"), 0), None);
    enq(&mut c, "q", &config("other", None, 0), None);
    let p = pop_opts(&mut c, "q", &args!["LEASE", 300]).expect("a");
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
    let o = pop_opts(&mut c, "q", &args!["LEASE", 60_000]).expect("other");
    assert_eq!(text(&o, "key"), key_of("other"));
    assert_eq!(pop_opts(&mut c, "q", &[]), None);
    assert_eq!(status(&mut c, "q", &k), None);
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_err(&mut c, &args!["ORCA.ACK", "q", &k, &t], CANCELLED);
    assert!(dead_list(&mut c, "q", &[]).is_empty());
    assert_check(&mut c, "q");
}

#[test]
fn delete_cancels_every_state() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let b = future_base(&mut c);
    let (kd, kx, kr) = (key_of("delayed"), key_of("dead"), key_of("regraded"));
    enq(&mut c, "q", &config("delayed", None, 0), Some(b));
    enq(&mut c, "q", &config("dead", None, 0), Some(b + 1));
    enq(&mut c, "q", &config("regraded", None, 0), Some(b + 2));
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
    enq(&mut c, "q", &config("regraded", None, 0), Some(b + 30));
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

// ---------------------------------------------------------------------------
// 9. BLOCK and COUNT
// ---------------------------------------------------------------------------

#[test]
fn block_pop_woken_by_enqueue() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    for (q, block) in [("q2000", 2000), ("q0", 0)] {
        // Blocked on a key that does not exist yet.
        let h = spawn_cmd(blocking_conn(&s), args!["ORCA.POP", q, "BLOCK", block]);
        wait_blocked(&mut c, 1);
        let cfg = config("a", None, 0);
        enq(&mut c, q, &cfg, None);
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
    let h = spawn_cmd(
        blocking_conn(&s),
        args!["ORCA.POP", "q0", "BLOCK", 5000, "LEASE", 0],
    );
    wait_blocked(&mut c, 1);
    enq(&mut c, "q0", &config("b", None, 0), None);
    let f = fields(joined(h).0);
    assert_eq!(text(&f, "key"), key_of("b"));
    assert_eq!(get(&f, "lease"), &Value::Nil);
    assert_eq!(status(&mut c, "q0", &key_of("b")), None);
    // A job already there: BLOCK returns at once.
    enq(&mut c, "q0", &config("c", None, 0), None);
    let t = Instant::now();
    let f = pop_opts(&mut c, "q0", &args!["BLOCK", 0]).expect("c");
    assert_eq!(text(&f, "key"), key_of("c"));
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn block_pop_woken_by_expiry_retry_and_requeue() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let k = key_of("a");
    enq(&mut c, "q", &config("a", None, 0), None);
    let p = pop_opts(&mut c, "q", &args!["LEASE", 200]).expect("a");

    // Woken when the lease expires (the timer).
    let h = spawn_cmd(
        blocking_conn(&s),
        args!["ORCA.POP", "q", "BLOCK", 5000, "LEASE", 60_000],
    );
    let (v, _) = joined(h);
    assert_ne!(
        v,
        Value::Nil,
        "the blocked pop was not woken by the lease expiry"
    );
    let f = fields(v);
    assert_eq!(text(&f, "key"), k);
    assert_eq!(int(&f, "attempt"), 2);
    assert_ne!(lease(&f), lease(&p));

    // Woken when a retry comes due.
    let n = fields(ok(
        &mut c,
        &args!["ORCA.NACK", "q", &k, lease(&f), "DELAY", 300],
    ));
    let retry_at = int(&n, "retry_at");
    let h = spawn_cmd(
        blocking_conn(&s),
        args!["ORCA.POP", "q", "BLOCK", 5000, "LEASE", 60_000],
    );
    let (v, _) = joined(h);
    assert_ne!(
        v,
        Value::Nil,
        "the blocked pop was not woken by the due retry"
    );
    let f = fields(v);
    assert_eq!(text(&f, "key"), k);
    assert_eq!(int(&f, "attempt"), 3);
    assert!(server_ms(&mut c) >= retry_at);

    // Woken by ORCA.DEAD REQUEUE.
    ok(
        &mut c,
        &args!["ORCA.NACK", "q", &k, lease(&f), "MAXATTEMPTS", 1],
    );
    assert_eq!(state(&mut c, "q", &k).as_deref(), Some("dead"));
    let h = spawn_cmd(blocking_conn(&s), args!["ORCA.POP", "q", "BLOCK", 5000]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &args!["ORCA.DEAD", "q", "REQUEUE", &k]);
    let (v, _) = joined(h);
    assert_ne!(
        v,
        Value::Nil,
        "the blocked pop was not woken by DEAD REQUEUE"
    );
    assert_eq!(int(&fields(v), "attempt"), 1);
    assert_check(&mut c, "q");
}

#[test]
fn block_pop_woken_by_nack_delay_zero() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let k = key_of("a");
    enq(&mut c, "q", &config("a", None, 0), None);
    let p = pop_opts(&mut c, "q", &args!["LEASE", 60_000]).expect("a");
    let h = spawn_cmd(blocking_conn(&s), args!["ORCA.POP", "q", "BLOCK", 5000]);
    wait_blocked(&mut c, 1);
    let n = fields(ok(
        &mut c,
        &args!["ORCA.NACK", "q", &k, lease(&p), "DELAY", 0],
    ));
    assert_eq!(text(&n, "outcome"), "retry");
    let (v, took) = joined(h);
    assert_ne!(v, Value::Nil, "not woken by NACK DELAY 0 (after {took:?})");
    let f = fields(v);
    assert_eq!(text(&f, "key"), k);
    assert_eq!(int(&f, "attempt"), 2);
}

/// The timer works in every database: a lease expires in db 3 and wakes a
/// client blocked there, and a same-named queue in db 0 is left alone.
#[test]
fn leases_expire_in_other_databases() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let mut c3 = s.conn();
    ok(&mut c3, &args!["SELECT", 3]);
    let k = key_of("a");
    enq(&mut c, "q", &config("a", None, 0), None);
    let p0 = pop_opts(&mut c, "q", &args!["LEASE", 60_000]).expect("db0 a");
    enq(&mut c3, "q", &config("a", None, 0), None);
    let p3 = pop_opts(&mut c3, "q", &args!["LEASE", 200]).expect("db3 a");
    let mut blocked = blocking_conn(&s);
    ok(&mut blocked, &args!["SELECT", 3]);
    let h = spawn_cmd(
        blocked,
        args!["ORCA.POP", "q", "BLOCK", 5000, "LEASE", 60_000],
    );
    let (v, took) = joined(h);
    assert_ne!(v, Value::Nil, "db 3 lease never expired (waited {took:?})");
    let f = fields(v);
    assert_eq!(text(&f, "key"), k);
    assert_eq!(int(&f, "attempt"), 2);
    assert_ne!(lease(&f), lease(&p3));
    // db 0 untouched: still the first lease.
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "lease"), lease(&p0));
    assert_eq!(int(&st, "attempts"), 1);
    assert_check(&mut c, "q");
    assert_check(&mut c3, "q");
}

/// Leases keep expiring after the queue key is renamed, moved to another
/// database, copied or dumped and restored.
#[test]
fn leases_expire_after_key_operations() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let k = key_of("a");
    let names = ["renamed", "moved", "copied", "restored"];
    for n in names {
        enq(&mut c, n, &config("a", None, 0), None);
        enq(&mut c, n, &config("b", None, 0), None);
        pop_opts(&mut c, n, &args!["LEASE", 300]).expect("a");
    }
    ok(&mut c, &args!["RENAME", "renamed", "renamed2"]);
    assert_eq!(as_int(&ok(&mut c, &args!["MOVE", "moved", 2])), 1);
    assert_eq!(as_int(&ok(&mut c, &args!["COPY", "copied", "copy2"])), 1);
    let dump = as_bytes(&ok(&mut c, &args!["DUMP", "restored"]));
    ok(&mut c, &args!["DEL", "restored"]);
    ok(&mut c, &args!["RESTORE", "restored", 0, dump]);
    let mut c2 = s.conn();
    ok(&mut c2, &args!["SELECT", 2]);
    wait_for("every lease to expire", Duration::from_secs(10), || {
        ["renamed2", "copied", "copy2", "restored"]
            .iter()
            .all(|q| state(&mut c, q, &k).as_deref() == Some("queued"))
            && state(&mut c2, "moved", &k).as_deref() == Some("queued")
    });
    for q in ["renamed2", "copied", "copy2", "restored"] {
        assert_eq!(qlen(&mut c, q), 2, "{q}");
        assert_eq!(int(&must_status(&mut c, q, &k), "attempts"), 1, "{q}");
        assert_check(&mut c, q);
    }
    assert_eq!(qlen(&mut c2, "moved"), 2);
    assert_check(&mut c2, "moved");
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
    enq(&mut c, "q", &config("a", None, 0), None);
    enq(&mut c, "q", &config("b", None, 0), None);
    pop_opts(&mut c, "q", &args!["LEASE", 60_000]).expect("a");
    let pb = pop_opts(&mut c, "q", &args!["LEASE", 60_000]).expect("b");
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

#[test]
fn blocked_clients_are_served_in_blocking_order() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    // Connect in the opposite order of blocking, so the order tested is the
    // blocking order, not the connection order.
    let second = blocking_conn(&s);
    let first = blocking_conn(&s);
    let h1 = spawn_cmd(first, args!["ORCA.POP", "q", "BLOCK", 10_000]);
    wait_blocked(&mut c, 1);
    let h2 = spawn_cmd(second, args!["ORCA.POP", "q", "BLOCK", 10_000]);
    wait_blocked(&mut c, 2);
    enq(&mut c, "q", &config("j1", None, 0), None);
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
    enq(&mut c, "q", &config("j2", None, 0), None);
    let (v2, _) = joined(h2);
    assert_eq!(text(&fields(v2), "key"), key_of("j2"));

    // Two jobs arriving in one transaction serve two clients, in order.
    let second = blocking_conn(&s);
    let first = blocking_conn(&s);
    let h1 = spawn_cmd(first, args!["ORCA.POP", "q", "BLOCK", 10_000]);
    wait_blocked(&mut c, 1);
    let h2 = spawn_cmd(second, args!["ORCA.POP", "q", "BLOCK", 10_000]);
    wait_blocked(&mut c, 2);
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
    let s = Server::start(&[]);
    let mut c = s.conn();
    enq(&mut c, "q", &config("a", None, 0), None);
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

    let e = fails(
        &mut c,
        &args![
            "EVAL",
            r#"return redis.call("ORCA.POP", KEYS[1], "BLOCK", "100")"#,
            1,
            "q"
        ],
    );
    assert!(e.contains(BLOCK_REFUSED), "{e}");
    let e = fails(
        &mut c,
        &args![
            "EVAL",
            r#"return redis.call("ORCA.POP", KEYS[1], "BLOCK", "0")"#,
            1,
            "missing"
        ],
    );
    assert!(e.contains(BLOCK_REFUSED), "{e}");
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
    enq(&mut c, "q", &config("b", None, 0), None);
    let v = ok(
        &mut c,
        &args!["EVAL", r#"return redis.call("ORCA.POP", KEYS[1])"#, 1, "q"],
    );
    assert_eq!(text(&fields(v), "key"), key_of("b"));
    assert_check(&mut c, "q");
}

#[test]
fn pop_count() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let names = ["a", "b", "c", "d", "e"];
    let b = future_base(&mut c);
    for (i, n) in names.iter().enumerate() {
        enq(&mut c, "q", &config(n, None, 0), Some(b + i as i64));
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
    enq(&mut c, "q", &config("f", None, 0), Some(b + 13));
    let one = batch(&mut c, args!["COUNT", 1, "LEASE", 0, "NOW", b + 14]).expect("1 job");
    assert_eq!(one.len(), 1);
    assert_eq!(get(&one[0], "lease"), &Value::Nil);
    // Each leased job is acked with its own token.
    for f in first.iter().chain(rest.iter()) {
        must_ack(&mut c, "q", &text(f, "key"), &lease(f));
    }
    for bad in ["0", "1001", "-1", "x"] {
        assert_err(&mut c, &args!["ORCA.POP", "q", "COUNT", bad], "ERR COUNT");
    }
    set_config(&mut c, "max-pop-count", 2);
    assert_err(
        &mut c,
        &args!["ORCA.POP", "q", "COUNT", 3],
        "ERR COUNT must be between 1 and 2",
    );
    // A blocked COUNT pop is woken with what is there.
    let h = spawn_cmd(
        blocking_conn(&s),
        args!["ORCA.POP", "q", "BLOCK", 5000, "COUNT", 2],
    );
    wait_blocked(&mut c, 1);
    enq(&mut c, "q", &config("g", None, 0), None);
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

// ---------------------------------------------------------------------------
// 10. Replication and DEBUG RELOAD
// ---------------------------------------------------------------------------

/// The master and the replica show the same worker state of `keys` in `q`.
fn assert_same_view(m: &mut Con, r: &mut Con, q: &str, keys: &[String]) {
    let (a, b) = (observe(m, q, keys), observe(r, q, keys));
    let diff: Vec<String> = a
        .lines()
        .zip(b.lines())
        .filter(|(x, y)| x != y)
        .map(|(x, y)| format!("master:  {x}\nreplica: {y}"))
        .collect();
    assert!(diff.is_empty(), "{q} differs:\n{}", diff.join("\n"));
}

/// Everything observable of the worker state of `keys` in `q` by read-only
/// commands (ORCA.DEAD is a write command: a replica refuses even LIST).
fn observe(c: &mut Con, q: &str, keys: &[String]) -> String {
    let mut out = format!("len={}\n", qlen(c, q));
    for k in keys {
        out.push_str(&format!(
            "{k}: {:?} result={:?}\n",
            raw(c, &args!["ORCA.STATUS", q, k]),
            raw(c, &args!["ORCA.RESULT", q, k])
        ));
    }
    out
}

#[test]
fn replica_follows_leases_acks_nacks_and_expiry() {
    let m = Server::start_with(&["retry-base", "100", "max-attempts", "3"], &[]);
    let r = m.start_replica(&[], &[]);
    let mut c = m.conn();
    let mut rc = r.conn();
    let q = "wq";
    let names: Vec<String> = (0..16).map(|i| format!("job{i}")).collect();
    let keys: Vec<String> = names.iter().map(|n| key_of(n)).collect();
    for (i, n) in names.iter().enumerate() {
        let coll = format!("user.{}", i % 3);
        let coll = (i % 4 != 0).then_some(coll.as_str());
        enq(&mut c, q, &config(n, coll, (i as i64 % 5) * 10), None);
    }
    let pop_lease = |c: &mut Con, lease_ms: i64| -> Fields {
        pop_opts(c, q, &args!["LEASE", lease_ms]).expect("a job")
    };
    // acked with a result
    let f = pop_lease(&mut c, 60_000);
    let done_key = text(&f, "key");
    ok(
        &mut c,
        &args!["ORCA.ACK", q, &done_key, lease(&f), "RESULT", "done"],
    );
    // acked without
    let f = pop_lease(&mut c, 60_000);
    must_ack(&mut c, q, &text(&f, "key"), &lease(&f));
    // nacked: the timer brings it back after 100 ms
    let retried = pop_lease(&mut c, 60_000);
    ok(
        &mut c,
        &args!["ORCA.NACK", q, text(&retried, "key"), lease(&retried)],
    );
    // a short lease the timer expires
    let expired = pop_lease(&mut c, 150);
    // another long lease (EXTEND replication has its own test)
    pop_lease(&mut c, 120_000);
    // dead
    let f = pop_lease(&mut c, 60_000);
    ok(
        &mut c,
        &args!["ORCA.NACK", q, text(&f, "key"), lease(&f), "MAXATTEMPTS", 1],
    );
    // cancelled while leased
    let f = pop_lease(&mut c, 60_000);
    ok(&mut c, &args!["ORCA.DELETE", q, text(&f, "key")]);
    // at-most-once
    pop_lease(&mut c, 0);
    // left leased; left delayed
    pop_lease(&mut c, 120_000);
    let f = pop_lease(&mut c, 60_000);
    ok(
        &mut c,
        &args!["ORCA.NACK", q, text(&f, "key"), lease(&f), "DELAY", 120_000],
    );
    // a result the timer forgets after 200 ms
    let f = pop_lease(&mut c, 60_000);
    let brief_key = text(&f, "key");
    ok(
        &mut c,
        &args![
            "ORCA.ACK",
            q,
            &brief_key,
            lease(&f),
            "RESULT",
            "brief",
            "TTL",
            200
        ],
    );
    // dead, then requeued
    let f = pop_lease(&mut c, 60_000);
    let requeued_key = text(&f, "key");
    ok(
        &mut c,
        &args!["ORCA.NACK", q, &requeued_key, lease(&f), "MAXATTEMPTS", 1],
    );
    ok(&mut c, &args!["ORCA.DEAD", q, "REQUEUE", &requeued_key]);
    // failed, back at once
    let f = pop_lease(&mut c, 60_000);
    ok(
        &mut c,
        &args!["ORCA.NACK", q, text(&f, "key"), lease(&f), "DELAY", 0],
    );
    // a blocked pop on another queue, woken by an enqueue
    let h = spawn_cmd(blocking_conn(&m), args!["ORCA.POP", "wq2", "BLOCK", 5000]);
    wait_blocked(&mut c, 1);
    enq(&mut c, "wq2", &config("blocked", None, 0), None);
    enq(&mut c, "wq2", &config("stays", None, 0), None);
    enq(&mut c, "wq2", &config("purged", None, 0), None);
    let bf = fields(joined(h).0);
    assert_eq!(text(&bf, "key"), key_of("blocked"));
    // a purged dead job there
    let mut f = pop_opts(&mut c, "wq2", &args!["LEASE", 60_000]).expect("a job");
    if text(&f, "key") != key_of("purged") {
        f = pop_opts(&mut c, "wq2", &args!["LEASE", 60_000]).expect("purged");
        let stays = pop_opts(&mut c, "wq2", &[]);
        assert_eq!(stays, None, "only stays was left; it is leased now");
    }
    assert_eq!(text(&f, "key"), key_of("purged"));
    ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "wq2",
            text(&f, "key"),
            lease(&f),
            "MAXATTEMPTS",
            1
        ],
    );
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DEAD", "wq2", "PURGE"])), 1);

    // Wait for the timer: the retry and the expiry come back by themselves.
    let (kr, ke) = (text(&retried, "key"), text(&expired, "key"));
    wait_for(
        "retry and expiry on the master",
        Duration::from_secs(10),
        || {
            state(&mut c, q, &kr).as_deref() == Some("queued")
                && state(&mut c, q, &ke).as_deref() == Some("queued")
                && result(&mut c, q, &brief_key).is_none()
        },
    );
    assert_eq!(int(&must_status(&mut c, q, &ke), "attempts"), 1);
    assert_eq!(int(&must_status(&mut c, q, &kr), "attempts"), 1);
    // More pops after the ticks, so the replica sees those too.
    pop_lease(&mut c, 120_000);
    let g = pop_lease(&mut c, 120_000);
    must_ack(&mut c, q, &text(&g, "key"), &lease(&g));

    sync_replica(&m, &r);
    for key in [q, "wq2"] {
        assert_eq!(digest(&mut c, key), digest(&mut rc, key), "digest of {key}");
        assert_check(&mut rc, key);
    }
    let mut all_keys = keys.clone();
    all_keys.push(key_of("blocked"));
    assert_same_view(&mut c, &mut rc, q, &all_keys);
    assert_same_view(
        &mut c,
        &mut rc,
        "wq2",
        &[key_of("blocked"), key_of("stays"), key_of("purged")],
    );
    // The timer's forgetting of the short result reached the replica too
    // (the replica reads with its own clock, so check the stored state).
    assert_eq!(result(&mut rc, q, &brief_key), None);
    assert!(
        status(&mut rc, q, &requeued_key).is_some(),
        "the requeued job is gone"
    );
    // The replica does not tick by itself, and refuses worker writes.
    let e = fails(&mut rc, &args!["ORCA.POP", q]);
    assert!(e.starts_with("READONLY"), "{e}");

    // DEBUG RELOAD on the master keeps leases, delayed, dead and results.
    let short = pop_lease(&mut c, 1500);
    let ks = text(&short, "key");
    let before_digest = digest(&mut c, q);
    let before = observe(&mut c, q, &all_keys);
    let dead_before = raw(&mut c, &args!["ORCA.DEAD", q, "LIST"]);
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_eq!(
        digest(&mut c, q),
        before_digest,
        "digest changed by DEBUG RELOAD"
    );
    assert_eq!(observe(&mut c, q, &all_keys), before);
    assert_eq!(raw(&mut c, &args!["ORCA.DEAD", q, "LIST"]), dead_before);
    assert_check(&mut c, q);
    let states: Vec<Option<String>> = keys.iter().map(|k| state(&mut c, q, k)).collect();
    for s in ["leased", "delayed", "dead"] {
        assert!(
            states.iter().any(|x| x.as_deref() == Some(s)),
            "no {s} job: {states:?}"
        );
    }
    assert_eq!(
        result(&mut c, q, &done_key).as_deref(),
        Some(b"done".as_slice())
    );
    // The reloaded lease still expires (timer), and the replica follows.
    wait_for(
        "the reloaded lease to expire",
        Duration::from_secs(10),
        || state(&mut c, q, &ks).as_deref() == Some("queued"),
    );
    assert_err(
        &mut c,
        &args!["ORCA.ACK", q, &ks, lease(&short)],
        LEASE_NOT_HELD,
    );
    sync_replica(&m, &r);
    assert_eq!(
        digest(&mut c, q),
        digest(&mut rc, q),
        "digest after reload + expiry"
    );
    assert_same_view(&mut c, &mut rc, q, &all_keys);
    // And DEBUG RELOAD on the replica keeps its copy identical.
    let rd = digest(&mut rc, q);
    ok(&mut rc, &args!["DEBUG", "RELOAD"]);
    assert_eq!(digest(&mut rc, q), rd);
    assert_check(&mut rc, q);
    assert_check(&mut c, q);
}

// ---------------------------------------------------------------------------
// 11. Chaos: workers that die, a producer, at-least-once end to end
// ---------------------------------------------------------------------------

/// Sets the flag when dropped (also when the test panics), so scoped worker
/// threads end.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn chaos_workers_never_lose_a_job() {
    const WORKERS: u64 = 8;
    const JOBS: usize = 300;
    const Q: &str = "chaos";
    let s = Server::start_with(&["max-attempts", "0"], &[]);
    let mut c = s.conn();
    let started = Instant::now();

    let names: Vec<String> = (0..JOBS).map(|i| format!("chaos-{i}")).collect();
    let key_to_name: HashMap<String, String> =
        names.iter().map(|n| (key_of(n), n.clone())).collect();
    let stop = AtomicBool::new(false);
    // Successful ACKs per orca key.
    let acks: Mutex<HashMap<String, u32>> = Mutex::new(HashMap::new());
    // Every delivery read by a worker: (key, attempt).
    let deliveries: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());
    // Deliveries that did not complete (worker died, NACK, too slow): the
    // job must be handed out again later.
    let unfinished: Mutex<Vec<(String, i64, &'static str)>> = Mutex::new(Vec::new());
    let counts: Mutex<HashMap<&'static str, usize>> = Mutex::new(HashMap::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());

    thread::scope(|scope| {
        for w in 0..WORKERS {
            let (s, stop, acks, deliveries) = (&s, &stop, &acks, &deliveries);
            let (unfinished, counts, failures) = (&unfinished, &counts, &failures);
            scope.spawn(move || {
                let count =
                    |what: &'static str| *counts.lock().unwrap().entry(what).or_insert(0) += 1;
                let fail = |what: String| failures.lock().unwrap().push(what);
                let mut rng = Rng::new(0xC4A05 + w);
                let mut con = blocking_conn(s);
                while !stop.load(Ordering::Relaxed) {
                    // Sometimes die while waiting in a blocking pop: the
                    // reply (maybe a job, now leased to nobody) is never read.
                    if rng.chance(2) {
                        let cmd = redis::cmd("ORCA.POP")
                            .arg(Q)
                            .arg("LEASE")
                            .arg(300)
                            .arg("BLOCK")
                            .arg(200)
                            .get_packed_command();
                        let _ = con.send_packed_command(&cmd);
                        thread::sleep(Duration::from_millis(rng.below(5)));
                        count("blind death");
                        con = blocking_conn(s);
                        continue;
                    }
                    let v = raw(&mut con, &args!["ORCA.POP", Q, "LEASE", 300, "BLOCK", 200]);
                    if v == Value::Nil {
                        continue;
                    }
                    if let Some(e) = error_text(&v) {
                        fail(format!("POP: {e}"));
                        continue;
                    }
                    let f = fields(v);
                    let (key, token, attempt) = (text(&f, "key"), lease(&f), int(&f, "attempt"));
                    deliveries.lock().unwrap().push((key.clone(), attempt));
                    thread::sleep(Duration::from_millis(rng.below(6)));
                    let roll = rng.below(100);
                    if roll < 10 {
                        // Die mid-job: no ACK; a new worker takes this place.
                        count("death mid-job");
                        unfinished.lock().unwrap().push((key, attempt, "died"));
                        drop(con);
                        con = blocking_conn(s);
                        continue;
                    }
                    if roll < 18 {
                        // Fail the job: it is retried (no dead list here).
                        let delay = rng.below(100) as i64;
                        let v = raw(
                            &mut con,
                            &args!["ORCA.NACK", Q, &key, &token, "DELAY", delay],
                        );
                        match error_text(&v) {
                            None => {
                                let n = fields(v);
                                if text(&n, "outcome") != "retry" {
                                    fail(format!("NACK {key}: {n:?}"));
                                }
                                count("nack");
                                unfinished.lock().unwrap().push((key, attempt, "nacked"));
                            }
                            Some(e) if e.starts_with(LEASE_NOT_HELD) => count("late nack"),
                            Some(e) => fail(format!("NACK {key}: {e}")),
                        }
                        continue;
                    }
                    if roll < 22 {
                        // A long job with heartbeats: the lease must hold.
                        let mut held = true;
                        for _ in 0..4 {
                            let v = raw(&mut con, &args!["ORCA.EXTEND", Q, &key, &token, 1500]);
                            if let Some(e) = error_text(&v) {
                                fail(format!("EXTEND {key} (attempt {attempt}): {e}"));
                                held = false;
                                break;
                            }
                            thread::sleep(Duration::from_millis(100));
                        }
                        if held {
                            count("heartbeat");
                            match raw(
                                &mut con,
                                &args!["ORCA.ACK", Q, &key, &token, "RESULT", &key],
                            ) {
                                Value::Int(1) => *acks.lock().unwrap().entry(key).or_insert(0) += 1,
                                v => fail(format!("ACK after heartbeats {key}: {v:?}")),
                            }
                        }
                        continue;
                    }
                    if roll < 25 {
                        // Too slow, no heartbeat: the lease (300 ms) runs out.
                        thread::sleep(Duration::from_millis(450));
                        count("slow");
                    }
                    let v = raw(
                        &mut con,
                        &args!["ORCA.ACK", Q, &key, &token, "RESULT", &key],
                    );
                    match (&v, error_text(&v)) {
                        (Value::Int(1), _) => *acks.lock().unwrap().entry(key).or_insert(0) += 1,
                        (_, Some(e)) if e.starts_with(LEASE_NOT_HELD) => {
                            // The lease expired and the job went back to the
                            // queue or to another worker: fenced off.
                            count("late ack refused");
                            unfinished.lock().unwrap().push((key, attempt, "late"));
                        }
                        _ => fail(format!("ACK {key}: {v:?}")),
                    }
                }
            });
        }

        // Whatever happens below, the workers stop.
        let _stop = StopOnDrop(&stop);
        // The producer, over about two seconds.
        let mut p = s.conn();
        let mut rng = Rng::new(42);
        for (i, n) in names.iter().enumerate() {
            let coll = match i % 3 {
                0 => None,
                1 => Some(format!("user.{}", rng.below(7))),
                _ => Some(format!("team.{}", rng.below(3))),
            };
            let priority = if rng.chance(20) {
                rng.below(2000) as i64
            } else {
                0
            };
            let cfg = config(n, coll.as_deref(), priority);
            let e = enq(&mut p, Q, &cfg, None);
            assert_eq!(int(&e, "created"), 1);
            if i % 5 == 4 {
                thread::sleep(Duration::from_millis(10 + rng.below(40)));
            }
        }

        // Wait until every job was acked (expired leases of dead workers
        // and retries come back by themselves), bounded.
        let deadline = Instant::now() + Duration::from_secs(20);
        while acks.lock().unwrap().len() < JOBS && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
    });

    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "worker errors: {failures:?}");
    let acks = acks.into_inner().unwrap();
    let deliveries = deliveries.into_inner().unwrap();
    let unfinished = unfinished.into_inner().unwrap();
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !acks.contains_key(&key_of(n)))
        .collect();
    let mut diag = String::new();
    for n in missing.iter().take(5) {
        diag.push_str(&format!(
            "\n{n}: {:?}",
            raw(&mut c, &args!["ORCA.STATUS", Q, key_of(n)])
        ));
    }
    assert!(
        missing.is_empty(),
        "{} of {JOBS} jobs never acked (len {}):{diag}",
        missing.len(),
        qlen(&mut c, Q)
    );
    // Every job completed exactly once: a second completion would mean two
    // workers held valid leases on the same job.
    for (k, n) in &acks {
        assert!(key_to_name.contains_key(k), "acked an unknown key {k}");
        assert_eq!(*n, 1, "{} acked {n} times", key_to_name[k]);
    }
    // No delivery handed out twice: (key, attempt) pairs are unique.
    let mut seen = HashSet::new();
    for d in &deliveries {
        assert!(d.1 >= 1, "attempt {} of {}", d.1, d.0);
        assert!(seen.insert(d.clone()), "delivery {d:?} handed out twice");
    }
    // Every delivery that did not complete was followed by another one,
    // with its attempts counted.
    for (k, a, why) in &unfinished {
        assert!(
            deliveries.iter().any(|(k2, a2)| k2 == k && a2 > a),
            "{} ({why} at attempt {a}) never came back",
            key_to_name[k]
        );
    }

    // Drained: nothing queued, leased, delayed or dead; results kept.
    wait_for("no job state left", Duration::from_secs(10), || {
        names
            .iter()
            .all(|n| status(&mut c, Q, &key_of(n)).is_none())
    });
    assert_eq!(qlen(&mut c, Q), 0);
    assert!(dead_list(&mut c, Q, &[]).is_empty());
    for n in names.iter().step_by(37) {
        assert_eq!(result(&mut c, Q, &key_of(n)), Some(key_of(n).into_bytes()));
    }
    assert_check(&mut c, Q);
    let counts = counts.into_inner().unwrap();
    eprintln!(
        "chaos: {} deliveries, {counts:?}, {:?}",
        deliveries.len(),
        started.elapsed()
    );
    for what in ["death mid-job", "nack", "heartbeat"] {
        assert!(
            counts.get(what).copied().unwrap_or(0) > 0,
            "no {what} happened"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(40));
}

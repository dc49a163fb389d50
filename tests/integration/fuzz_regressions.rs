//! Bugs found by the fuzzers (`fuzz_live/`, `tests/fuzz/`), each kept as
//! the test that reproduced it; the doc comment of each says what broke.
//!
//! Replies are read from a raw socket where the bug breaks the reply itself
//! (a client library would fail to parse it).

use std::time::Duration;

use crate::common::*;
use orca::core::{parse_config, Order, Policy, Queue};

/// The worker policy of the core-level regressions (the module's defaults
/// but for a one-minute retry cap).
const POLICY: Policy = Policy {
    max_attempts: 5,
    retry_base: 1000,
    retry_cap: 60_000,
};

/// The lines of a server log that hold any of `patterns`.
fn log_lines(log: &str, patterns: &[&str]) -> String {
    log.lines()
        .filter(|l| patterns.iter().any(|p| l.contains(p)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A master (AOF on) with a lease that comes due in 200 ms and a replica
/// that stops answering for 1.5 s; `shut_down` then starts a shutdown,
/// which has to wait for the replica. Returns the master's log once it is
/// ready to exit (or has crashed).
fn shutdown_waiting_for_a_lagging_replica(shut_down: impl FnOnce(&Server)) -> String {
    let master = Server::start(&["--appendonly", "yes"]);
    let replica = master.start_replica(&[], &[]);
    let mut c = master.conn();
    ok(&mut c, &args!["ORCA.ENQUEUE", "q", config("a", None, 0)]);
    ok(&mut c, &args!["ORCA.POP", "q", "LEASE", 200]);
    // The replica stops answering for a second, so the shutdown has to wait.
    let rport = replica.port;
    let sleeper = std::thread::spawn(move || raw_line(rport, &[b"DEBUG", b"SLEEP", b"1.5"]));
    std::thread::sleep(Duration::from_millis(100));
    ok(&mut c, &args!["SET", "k", "v"]);
    shut_down(&master);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = master.log();
        if log.contains("ready to exit") || log.contains("ASSERTION FAILED") {
            break log;
        }
        assert!(std::time::Instant::now() < deadline, "no shutdown:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = sleeper.join();
    log
}
use redis::Value;

fn assert_alive(s: &Server) {
    assert_eq!(
        raw_line(s.port, &[b"PING"]).as_deref(),
        Some(&b"+PONG"[..]),
        "the server is gone; log:\n{}",
        s.log()
    );
}

/// A clean error reply: `-<code> ...`, one line of printable UTF-8.
fn assert_clean_error(reply: Option<Vec<u8>>, code: &str, what: &str, s: &Server) {
    let Some(line) = reply else {
        panic!(
            "{what}: the server closed the connection (it crashed); log tail:\n{}",
            tail(&s.log(), 40)
        );
    };
    assert!(
        line.starts_with(format!("-{code} ").as_bytes()),
        "{what}: not an error reply: {line:?}"
    );
    let text = std::str::from_utf8(&line).unwrap_or_else(|_| {
        panic!(
            "{what}: the error reply is not valid UTF-8 (clients fail to parse it): {:?}",
            String::from_utf8_lossy(&line)
        )
    });
    assert!(
        text.chars().all(|c| !c.is_control()),
        "{what}: control characters in the error reply: {text:?}"
    );
}

/// BUG (critical): an error text that quotes client input holding a
/// character whose code point is a multiple of 256 (U+0100 'Ā', U+0200, ...)
/// aborts the server. The wrapper crate's `reply_error_string` turns each
/// char into one byte (`c as u8`), U+0100 becomes NUL, `CString::new`
/// fails and its `unwrap` panics in `Context::reply`, outside the module's
/// `catch_unwind`: "failed to initiate panic", SIGABRT, every key lost.
/// `clean_error` must reduce error texts to printable ASCII.
#[test]
fn error_text_with_u0100_does_not_abort_the_server() {
    let s = Server::start(&[]);
    // serde_json quotes the string in its message.
    let r = raw_line(
        s.port,
        &[
            b"ORCA.ENQUEUE",
            b"q",
            "{\"key\":\"k\",\"priority\":\"\u{100}\"}".as_bytes(),
        ],
    );
    assert_clean_error(r, "BADCONFIG", "ENQUEUE with priority \"\\u{100}\"", &s);
    assert_alive(&s);
    // The option parser quotes the unknown option.
    let r = raw_line(s.port, &[b"ORCA.LIST", b"q", "\u{100}".as_bytes()]);
    assert_clean_error(r, "ERR", "ORCA.LIST q \\u{100}", &s);
    assert_alive(&s);
}

/// BUG (high): error texts that quote non-ASCII client input are sent as
/// invalid UTF-8 (same `c as u8` truncation: "é" U+00E9 is sent as the lone
/// byte 0xE9). A Rust client (redis-rs) fails to parse the reply and drops
/// the connection. Any user config with non-ASCII text in a mistyped field
/// triggers it.
#[test]
fn error_replies_are_valid_utf8() {
    let s = Server::start(&[]);
    let r = raw_line(
        s.port,
        &[
            b"ORCA.ENQUEUE",
            b"q",
            "{\"key\":\"k\",\"priority\":\"é\"}".as_bytes(),
        ],
    );
    assert_clean_error(r, "BADCONFIG", "ENQUEUE with priority \"é\"", &s);
    let r = raw_line(s.port, &[b"ORCA.POP", b"q", "ünknown".as_bytes(), b"1"]);
    assert_clean_error(r, "ERR", "ORCA.POP q ünknown 1", &s);
}

/// BUG (high): the lease timer panics on a queue whose name holds a NUL
/// byte (`ctx.create_string` -> `CString::new(..).unwrap()` in
/// `timer::tick_due`). The panic is caught, but the entry stays due, so it
/// panics again every 50 ms (the log fills with backtraces), the queue's
/// expired leases never come back by themselves, and the loop over due
/// queues stops there, starving every queue after it in the map.
#[test]
fn timer_serves_queues_with_nul_in_their_name() {
    let (s, mut c) = start_server();
    let q = b"q\x00x".to_vec();
    ok(
        &mut c,
        &[
            b"ORCA.ENQUEUE".to_vec(),
            q.clone(),
            config("a", None, 0).into_bytes(),
        ],
    );
    ok(
        &mut c,
        &[
            b"ORCA.POP".to_vec(),
            q.clone(),
            b"LEASE".to_vec(),
            b"20".to_vec(),
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    let stats = fields(ok(&mut c, &[b"ORCA.STATS".to_vec(), q.clone()]));
    let log = s.log();
    assert!(
        !log.contains("panicked"),
        "the server log has panics:\n{}",
        log.lines()
            .filter(|l| l.contains("panicked") || l.contains("NulError"))
            .take(4)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        (int(&stats, "leased"), int(&stats, "queued")),
        (0, 1),
        "the expired lease did not come back by itself: {stats:?}"
    );
}

/// BUG (critical): `ORCA.IMPORT` into an existing queue accepts a blob
/// whose reservation nonces collide with the queue's own (`absorb` checks
/// job keys, reservation keys and collation names, not nonces), and the
/// merged queue breaks invariant 4 ("nonce N used twice"). Worse, such a
/// queue cannot be loaded again: the RDB loader runs the same check, so
/// `DEBUG RELOAD` or a restart fails and Redis exits ("Terminating server
/// after rdb file reading failure"). Both queues here are valid on their
/// own (each a single job with nonce 1, at different scores).
#[test]
fn import_with_colliding_nonces_is_refused_or_valid() {
    let (s, mut c) = start_server();
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", config("a", None, 0), "NOW", 100],
    );
    let mut other = Queue::new(Order::Lifo);
    let cfg = config("b", None, 0);
    other
        .enqueue(&parse_config(cfg.as_bytes()).unwrap(), cfg.as_bytes(), 200)
        .unwrap();
    assert!(other.check().is_ok());
    let r = raw(&mut c, &args!["ORCA.IMPORT", "q", other.encode()]);
    if error_text(&r).is_none() {
        // Accepted: the queue must be valid, and survive an RDB save + load.
        let check = raw(&mut c, &args!["ORCA.CHECK", "q"]);
        let reload = raw_line(s.port, &[b"DEBUG", b"RELOAD"]);
        let exited = reload.is_none() || raw_line(s.port, &[b"PING"]).is_none();
        assert!(
            matches!(&check, Value::Okay) && !exited,
            "IMPORT accepted a blob; then ORCA.CHECK: {check:?}; DEBUG RELOAD: {:?}{}",
            reload.map(|l| String::from_utf8_lossy(&l).into_owned()),
            if exited {
                format!(
                    "; the server EXITED:\n{}",
                    s.log()
                        .lines()
                        .filter(|l| l.contains("orcaqueue") || l.contains("Terminating"))
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            } else {
                String::new()
            }
        );
    }
}

/// The consequence of the IMPORT bug above on persistence: the RDB written
/// after an accepted `ORCA.IMPORT` cannot be loaded, so the server does not
/// come back after a restart (every key lost, not just the queue).
#[test]
fn rdb_after_import_with_colliding_nonces_loads_again() {
    let mut s = Server::start(&[]);
    let mut c = s.conn();
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", config("a", None, 0), "NOW", 100],
    );
    ok(&mut c, &args!["SET", "unrelated", "value"]);
    let mut other = Queue::new(Order::Lifo);
    let cfg = config("b", None, 0);
    other
        .enqueue(&parse_config(cfg.as_bytes()).unwrap(), cfg.as_bytes(), 200)
        .unwrap();
    if error_text(&raw(&mut c, &args!["ORCA.IMPORT", "q", other.encode()])).is_some() {
        return; // refused: fine
    }
    drop(c);
    s.restart(); // SHUTDOWN SAVE, then start on the same RDB
    let mut c = s.conn();
    assert_eq!(qlen(&mut c, "q"), 2);
    assert_check(&mut c, "q");
}

/// BUG (medium): the size limits (`orca.max-payload-bytes`,
/// `orca.max-key-length`, `orca.max-collation-id-length`,
/// `orca.max-queue-length`, `orca.max-pop-count`) are also enforced on
/// commands that come from the master or the AOF, where they are not pinned
/// in the replicated form. A replica configured with a lower limit than its
/// master silently drops jobs the master accepted (the datasets diverge),
/// and an AOF replayed after the limit was lowered loses them. Limits
/// belong to client input; replicated and loaded commands should skip them.
#[test]
fn replica_with_lower_limit_keeps_what_the_master_accepted() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&["max-payload-bytes", "100"], &[]);
    let mut m = master.conn();
    let big = format!(
        r#"{{"key":"big","response_url":"u","script":"{}"}}"#,
        "x".repeat(200)
    );
    ok(&mut m, &args!["ORCA.ENQUEUE", "q", big]);
    sync_replica(&master, &replica);
    let mut r = replica.conn();
    assert_eq!(
        (qlen(&mut m, "q"), qlen(&mut r, "q")),
        (1, 1),
        "master and replica diverge"
    );
}

/// SECURITY (design, medium): the options meant for replication (`NOW`,
/// `MAXATTEMPTS`) are accepted from any client, and Redis 7.0 ACLs cannot
/// restrict arguments. A user allowed only `ORCA.POP` (the worker user of
/// docs/security.md) pops with a far-future `NOW` and `MAXATTEMPTS 1`: the
/// pop first applies every time-driven change "due" by then, so another
/// worker's running job is expired and dead-lettered. Clients should not be
/// able to move the server's clock forward (e.g. accept `NOW`/`MAXATTEMPTS`
/// only from the master or the AOF, or never let `NOW` run ahead of the
/// server's clock).
#[test]
fn worker_user_cannot_expire_another_workers_lease() {
    // The server's default: clients may not pin the clock on worker commands.
    let s = Server::start(&["--orca.trust-client-clock", "no"]);
    let mut admin = s.conn();
    add_worker_user(&mut admin, "pw");
    ok(
        &mut admin,
        &args!["ORCA.ENQUEUE", "queue:x", config("a", None, 0)],
    );
    let running = fields(ok(
        &mut admin,
        &args!["ORCA.POP", "queue:x", "LEASE", 600_000],
    ));
    let key = text(&running, "key");
    let lease = text(&running, "lease");
    let mut w = redis::Client::open(format!("redis://worker:pw@127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let now: i64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let _ = raw(
        &mut w,
        &args![
            "ORCA.POP",
            "queue:x",
            "NOW",
            now + 100_000_000,
            "MAXATTEMPTS",
            1
        ],
    );
    // The first worker's lease must still be held.
    let r = raw(
        &mut admin,
        &args![
            "ORCA.EXTEND",
            "queue:x",
            key.as_str(),
            lease.as_str(),
            60_000
        ],
    );
    assert!(
        error_text(&r).is_none(),
        "a worker-only user expired another worker's lease (and dead-lettered its job): EXTEND -> {r:?}"
    );
}

/// BUG (critical; found by the live fuzzer at SHUTDOWN with a replica): the
/// lease timer writes (and replicates `ORCA.TICK`) while clients are paused
/// for writes. Redis 7.0 asserts that nothing is propagated during a write
/// pause (`server.c: '!(areClientsPaused() && ...)' is not true`), so with
/// AOF on or a replica attached the server crashes whenever a lease or retry
/// comes due during `CLIENT PAUSE ... WRITE`, `FAILOVER`, or a `SHUTDOWN`
/// that waits for a lagging replica. Redis's own active expiry stands still
/// during a pause; the timer must too (and catch up afterwards).
#[test]
fn timer_does_not_write_while_clients_are_paused() {
    let s = Server::start(&["--appendonly", "yes"]);
    let mut c = s.conn();
    ok(&mut c, &args!["ORCA.ENQUEUE", "q", config("a", None, 0)]);
    ok(&mut c, &args!["ORCA.POP", "q", "LEASE", 50]);
    ok(&mut c, &args!["CLIENT", "PAUSE", 600, "WRITE"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        raw_line(s.port, &[b"PING"]).as_deref(),
        Some(&b"+PONG"[..]),
        "the server died while clients were paused; log:\n{}",
        log_lines(&s.log(), &["ASSERT", "==>"])
    );
    // After the pause the expired lease comes back by itself.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let stats = fields(ok(&mut c, &args!["ORCA.STATS", "q"]));
        let got = (int(&stats, "leased"), int(&stats, "queued"));
        if got == (0, 1) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the expired lease did not come back after the pause: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A queue serialized with its sequence counter set to `next_seq` (the
/// header's bytes 10..18 of `Queue::encode`), holding one running lease
/// (after `skip` other jobs, so tokens differ between such queues).
fn queue_with_lease_and_counter(name: &str, next_seq: i64, skip: usize) -> Vec<u8> {
    let mut q = Queue::new(Order::Lifo);
    for i in 0..skip {
        let cfg = config(&format!("{name}-{i}"), None, 0);
        q.enqueue(&parse_config(cfg.as_bytes()).unwrap(), cfg.as_bytes(), 900)
            .unwrap();
        q.delete(&parse_config(cfg.as_bytes()).unwrap().job_key)
            .unwrap();
    }
    let cfg = config(name, None, 0);
    q.enqueue(&parse_config(cfg.as_bytes()).unwrap(), cfg.as_bytes(), 1000)
        .unwrap();
    q.pop_deliveries(1000, 10, 1, &POLICY).unwrap();
    let mut b = q.encode();
    b[10..18].copy_from_slice(&next_seq.to_le_bytes());
    b
}

/// BUG (critical; found by the live fuzzer in long mode, a mutated
/// `ORCA.IMPORT` blob): the loaders accept a sequence counter up to
/// `SEQ_LOAD_LIMIT`, but a tick takes one more number for every lease or
/// retry that comes due, without asking. A queue loaded (RESTORE, IMPORT,
/// RDB) with its counter at the limit and a lease running goes past it when
/// the lease expires, and from then on its RDB cannot be loaded: `DEBUG
/// RELOAD` fails ("counters out of range") and a restart aborts ("Short read
/// or OOM loading DB. Unrecoverable error"). Whatever a loader accepts must
/// stay loadable after every time-driven change.
#[test]
fn loaded_queue_stays_loadable_after_its_leases_expire() {
    use orca::core::SEQ_LOAD_LIMIT;
    for next_seq in [SEQ_LOAD_LIMIT, SEQ_LOAD_LIMIT - 1] {
        let blob = queue_with_lease_and_counter("a", next_seq, 0);
        let Ok(mut q) = Queue::decode(&blob) else {
            continue; // refused: fine
        };
        q.tick(1_000_000, &POLICY); // the lease has expired: requeued
        assert!(
            Queue::decode(&q.encode()).is_ok(),
            "a queue accepted with next_seq {next_seq} cannot be loaded after a tick: {:?}",
            Queue::decode(&q.encode()).err()
        );
    }
}

/// The same through `ORCA.IMPORT` into a queue that has a lease of its own:
/// each side leaves room for its own pending leases, the merge must leave
/// room for both.
#[test]
fn imported_queue_stays_loadable_after_its_leases_expire() {
    use orca::core::SEQ_LOAD_LIMIT;
    let mut host = Queue::decode(&queue_with_lease_and_counter("a", 100, 0)).unwrap();
    // A lease needs room for two numbers: to come back, and to die of its
    // lifetime later (`Queue::tick_reserve`).
    let other = Queue::decode(&queue_with_lease_and_counter("b", SEQ_LOAD_LIMIT - 2, 5))
        .expect("valid on its own: room for its one lease");
    if host.absorb(other).is_err() {
        return; // refused: fine
    }
    host.tick(1_000_000, &POLICY); // both leases expire
    assert!(
        Queue::decode(&host.encode()).is_ok(),
        "after IMPORT and a tick the queue cannot be loaded: {:?}",
        Queue::decode(&host.encode()).err()
    );
}

/// Live: a RESTOREd queue with its counter at the limit and a running lease;
/// the timer expires the lease; the RDB must still load.
#[test]
fn restored_queue_with_counter_at_the_limit_survives_a_reload() {
    use orca::core::SEQ_LOAD_LIMIT;
    let (s, mut c) = start_server();
    let blob = queue_with_lease_and_counter("a", SEQ_LOAD_LIMIT, 0);
    if error_text(&raw(&mut c, &args!["ORCA.IMPORT", "q", blob])).is_some() {
        return; // refused: fine
    }
    std::thread::sleep(Duration::from_millis(300)); // the timer expires the lease
    let reload = raw_line(s.port, &[b"DEBUG", b"RELOAD"]);
    assert_eq!(
        reload.as_deref(),
        Some(&b"+OK"[..]),
        "DEBUG RELOAD after the lease expired; log:\n{}",
        log_lines(&s.log(), &["orcaqueue"])
    );
}

/// The same timer bug through `SHUTDOWN`: with a replica that lags, Redis
/// 7.0 pauses writes while `SHUTDOWN` waits for it (no `CLIENT PAUSE`
/// command is involved); a lease that comes due then makes the timer
/// propagate and the master dies on the assertion instead of shutting down.
/// `RedisModule_AvoidReplicaTraffic()` is true during every such pause.
#[test]
fn timer_does_not_write_while_shutdown_waits_for_a_replica() {
    let log = shutdown_waiting_for_a_lagging_replica(|master| {
        let _ = raw_line(master.port, &[b"SHUTDOWN", b"NOSAVE"]);
    });
    assert!(
        !log.contains("ASSERTION FAILED"),
        "the master crashed while SHUTDOWN waited for the replica:\n{}",
        log_lines(&log, &["ASSERT", "==>", "Waiting for replicas"])
    );
}

/// The timer/pause bug through SIGTERM (`systemctl stop`, `docker stop`):
/// Redis 7.0 pauses writes while a SIGTERM shutdown waits for a lagging
/// replica, and no command passes a command filter then, so the timer must
/// learn about the pause another way (`RedisModule_AvoidReplicaTraffic()`).
#[test]
fn timer_does_not_write_while_a_sigterm_shutdown_waits_for_a_replica() {
    let log = shutdown_waiting_for_a_lagging_replica(|master| {
        let pid = master.pid().expect("master pid");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
    });
    assert!(
        !log.contains("ASSERTION FAILED"),
        "the master crashed while a SIGTERM shutdown waited for the replica:\n{}",
        log_lines(&log, &["ASSERT", "==>", "Waiting for replicas", "SIGTERM"])
    );
}

/// Found by `fuzz_live` once it sent gates: `ORCA.IMPORT` of a blob holding
/// a closed gate without held jobs (its own unit) into a queue where that
/// gate is closed too. docs/commands.md: "into an existing queue, the queue
/// keeps its settings and closed gates merge", and a refused blob is
/// "refused whole ... before anything changes". The module replied `ERR
/// corrupt queue data: duplicate gate` AFTER adding the blob's jobs: an
/// error that changed the queue, and errors are not replicated, so the
/// replica (and the AOF) diverged from the master; under a running cap the
/// half-imported queue even fails ORCA.CHECK ("the eligibility index of the
/// running cap is stale"), the state an RDB load refuses.
#[test]
fn import_of_a_gate_closed_on_both_sides_merges_or_changes_nothing() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&[], &[]);
    let mut c = master.conn();
    set(&mut c, "q", &["MAXRUNNING", "1"]);
    assert_eq!(close_gate(&mut c, "q", "g"), 1);
    let mut blob = Queue::new(Order::Lifo);
    blob.close_gate(b"g").unwrap();
    for (name, coll) in [("plain", None), ("coll", Some("user.1"))] {
        let cfg = config(name, coll, 0);
        blob.enqueue(&parse_config(cfg.as_bytes()).unwrap(), cfg.as_bytes(), 200)
            .unwrap();
    }
    assert!(blob.check().is_ok());
    let before = digest(&mut c, "q");
    let r = raw(&mut c, &args!["ORCA.IMPORT", "q", blob.encode()]);
    if let Some(e) = error_text(&r) {
        let check = raw(&mut c, &args!["ORCA.CHECK", "q"]);
        assert_eq!(
            check,
            Value::Okay,
            "ORCA.IMPORT was refused ({e}) and left a broken queue"
        );
        assert_eq!(
            digest(&mut c, "q"),
            before,
            "ORCA.IMPORT was refused ({e}) but changed the queue: {} queued job(s) now",
            qlen(&mut c, "q")
        );
        panic!("ORCA.IMPORT refused ({e}); closed gates should merge");
    }
    assert_eq!(r, Value::Int(2));
    let st = stats(&mut c, "q");
    assert_eq!(
        (
            int(&st, "queued"),
            gates_of(&st).get(b"g".as_slice()).copied()
        ),
        (2, Some(0))
    );
    assert_check(&mut c, "q");
    assert_replica_equal(&master, &replica);
}

/// Found by `fuzz_live` once it sent lifetimes (the server aborted with
/// `ASSERTION FAILED blocked.c:624 'server.also_propagate.numops == 0'`).
/// A worker blocks on a queue; a write wakes it, but what the wake-up's pop
/// finds is only due changes (here the new job's lifetime has already run
/// out): it applies them, replicates `ORCA.POP ...`, hands out nothing and
/// keeps the client blocked. Redis 7.0 propagates what a blocked client's
/// callback replicated only when the client is served, so the replicated
/// command is left pending and the next round of blocked clients asserts.
/// Needs replication or the AOF (else nothing is propagated): any master
/// with a replica. The same through ORCA.MPOP.
#[test]
fn a_wake_up_that_only_applies_due_changes_does_not_abort_the_server() {
    for cmd in ["ORCA.POP", "ORCA.MPOP"] {
        let s = Server::start(&["--appendonly", "yes"]);
        let mut c = s.conn();
        set(&mut c, "q", &["LIFETIME", "1000"]);
        let a = if cmd == "ORCA.POP" {
            args!["ORCA.POP", "q", "BLOCK", 500]
        } else {
            args!["ORCA.MPOP", 2, "other", "q", "BLOCK", 500]
        };
        let h = spawn_blocked(&s, a);
        wait_blocked(&mut c, 1);
        let past = (server_ms(&mut c) - 60_000).to_string();
        let cfg = config("a", None, 0);
        let reply = raw_line(
            s.port,
            &[
                b"ORCA.ENQUEUE",
                b"q",
                cfg.as_bytes(),
                b"NOW",
                past.as_bytes(),
            ],
        );
        assert!(
            reply.is_some() && raw_line(s.port, &[b"PING"]).is_some(),
            "{cmd}: the server died:\n{}",
            log_lines(&s.log(), &["==>", "ASSERTION"])
        );
        // Nothing to hand out: the worker times out; the job is a dead letter.
        let (v, _) = joined(h);
        assert_eq!(v, Value::Nil, "{cmd}");
        assert_eq!(state(&mut c, "q", &key_of("a")).as_deref(), Some("dead"));
        let d = dataset_digests(&mut c);
        ok(&mut c, &args!["DEBUG", "LOADAOF"]);
        assert_same(&format!("{cmd}: AOF replay"), &d, &dataset_digests(&mut c));
        assert_alive(&s);
    }
}

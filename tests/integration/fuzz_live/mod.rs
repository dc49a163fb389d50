//! Live-server fuzzer: a real `redis-server` with the module loaded (see
//! `tests/common/mod.rs`) gets a long stream of random, malformed and
//! adversarial commands, pipelined in batches, and must survive all of it.
//!
//! What is sent (weights in `Fuzz::command`):
//! - every `ORCA.*` command, its name in random case, with well-formed
//!   arguments (valid and MUTATED `GradingJobConfig` JSON with
//!   key/response_url/collation/priority/metadata_table/gate, option
//!   keywords, edge integers) or with random arity and random bytes;
//! - the policies (`policies.rs`): `ORCA.GATE` CLOSE/OPEN/DROP with pooled
//!   and hostile gate names (empty, binary, over `orca.max-gate-length`,
//!   huge), configs naming gates, `ORCA.MPOP` with random numkeys and keys,
//!   `ACK`/`NACK ... NEXT [LEASE]`, `ORCA.SETTINGS` LIFETIME (short enough
//!   for the timer to expire jobs mid-run) / AUTODELAY / MAXRUNNING /
//!   DEADMAX / DEADTTL / RESULTMAX, `ORCA.LIST STATE ... GATE`;
//! - orca keys and lease tokens harvested from earlier replies, so ACK, NACK,
//!   EXTEND, MOVE, DELETE, STATUS and RESULT hit real jobs and leases;
//! - keys of other types (string, list, hash, zset) as the queue, and
//!   SET/DEL/RENAME/COPY/PEXPIRE/MOVE/SWAPDB turning queues into other types
//!   and back;
//! - `MULTI`/`EXEC` and `EVAL` wrapping some commands;
//! - `ORCA.IMPORT` with real blobs (read from the base file of a
//!   `BGREWRITEAOF` with `aof-use-rdb-preamble no`, and built in-process by
//!   the core), mutated unit by unit, and with random bytes;
//! - `RESTORE` of real and mutated `DUMP` payloads (mutated bodies get a
//!   correct CRC-64, so they reach the module's `rdb_load`);
//! - `CONFIG SET orca.*` (limits lowered and restored, policies changed);
//! - a second connection blocking in `ORCA.POP ... BLOCK` or `ORCA.MPOP
//!   ... BLOCK` (woken by the
//!   fuzz stream, by `CLIENT UNBLOCK`, or timing out), and some batches over
//!   RESP3;
//! - `DEBUG RELOAD` (RDB save + load of everything) every so often (TTLs
//!   taken off first: a master drops keys expired at load without telling
//!   its replicas).
//!
//! Checks: every command gets a reply (read timeout: a hang fails), no reply
//! is `INTERNAL internal error in the orca module`, no `ORCA.*` error reply
//! is anything but a clean line starting with a documented code (`ERR`,
//! `WRONGTYPE`, `NOJOB`, ...: docs/commands.md), no `ORCA.CHECK`
//! reports a broken invariant, the server answers PING after every batch and
//! its process is alive, at the end `ORCA.CHECK` is OK on every key of type
//! `orcaqueue` (`KEYS *` in db 0 and 1), the replica holds the same dataset
//! and refused none of the replicated commands (its log), the AOF
//! (replicated forms) replays to the same dataset (`DEBUG LOADAOF`, digests
//! compared), and the server log has no panic lines.
//!
//! Environment:
//! - `ORCA_FUZZ_COMMANDS` (default 100000): commands to send. Manual long
//!   mode: `ORCA_FUZZ_COMMANDS=1000000 cargo test --release --test integration fuzz_live -- --nocapture`.
//! - `ORCA_FUZZ_SEED` (default: from the clock; printed): the PRNG seed. The
//!   server's clock and timer are not under the seed's control, so a replay
//!   is close to, not exactly, the original run.
//! - `ORCA_FUZZ_TIMEOUT_SECS` (default 30): read timeout per batch (raise it
//!   under valgrind).
//! - `ORCA_FUZZ_BATCH` (default 250): commands per pipelined batch (a small
//!   one, e.g. 10, makes the batch saved after a crash short).
//! - `ORCA_FUZZ_MONITOR=<file>`: write the server's `MONITOR` stream there
//!   (every command of every connection, in the order it ran: what led to a
//!   crash).

mod blobs;
mod commands;
mod generators;
mod policies;
mod replies;
mod session;
mod wire;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::common::*;

use self::blobs::*;
use self::replies::*;
use self::session::*;
use self::wire::*;

/// Queue names the stream works on (binary and empty names included).
const QUEUES: &[&[u8]] = &[
    b"q0",
    b"q1",
    b"q2",
    b"q3",
    b"{grading}:queue",
    b"",
    b"q\x00\xff\r\n",
];

/// Keys that usually hold other types.
const OTHERS: &[&[u8]] = &[b"str", b"list", b"hash", b"zset"];

/// Keys RESTORE and COPY write to (they then join the queue pool).
const COPIES: &[&[u8]] = &[b"r0", b"r1", b"r2"];

const ORCA_COMMANDS: &[&str] = &[
    "ORCA.ENQUEUE",
    "ORCA.IMMEDIATE",
    "ORCA.REENQUEUE",
    "ORCA.MOVE",
    "ORCA.DELETE",
    "ORCA.POP",
    "ORCA.ACK",
    "ORCA.MACK",
    "ORCA.NACK",
    "ORCA.EXTEND",
    "ORCA.RESULT",
    "ORCA.DEAD",
    "ORCA.TICK",
    "ORCA.LEN",
    "ORCA.CHECK",
    "ORCA.STATUS",
    "ORCA.LIST",
    "ORCA.STATS",
    "ORCA.SETTINGS",
    "ORCA.IMPORT",
    "ORCA.GATE",
    "ORCA.MPOP",
];

const KEYWORDS: &[&str] = &[
    "NOW",
    "WORKER",
    "ERROR",
    "BUFFER",
    "RELEASE",
    "DELAY",
    "LEASE",
    "BLOCK",
    "COUNT",
    "MAXATTEMPTS",
    "RESULT",
    "RESULTS",
    "TTL",
    "OFFSET",
    "LIMIT",
    "FILTER",
    "ORDER",
    "LIFO",
    "FIFO",
    "LIST",
    "REQUEUE",
    "PURGE",
    "CLOSE",
    "OPEN",
    "DROP",
    "NEXT",
    "FORWARD",
    "STOP",
    "STATE",
    "GATE",
    "HELD",
    "QUEUED",
    "LEASED",
    "DELAYED",
    "DEAD",
    "LIFETIME",
    "AUTODELAY",
    "CAP",
    "MAXRUNNING",
    "DEADMAX",
    "DEADTTL",
    "RESULTMAX",
];

/// The options of `ORCA.POP` and `ORCA.MPOP`, with their value kinds (see
/// `Fuzz::option_value`).
const POP_OPTIONS: &[(&str, u8)] = &[
    ("LEASE", 1),
    ("BLOCK", 1),
    ("COUNT", 2),
    ("NOW", 0),
    ("MAXATTEMPTS", 3),
    ("FORMAT", 7),
    ("WORKER", 4),
];

const EDGE_INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "9007199254740991",
    "9007199254740992",
    "-9007199254740991",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
    "4294967295",
    "4294967296",
    "2147483647",
    "-2147483648",
    "1000000",
    "1000001",
    "",
    "+1",
    " 1",
    "1 ",
    "1.5",
    "-0",
    "007",
    "0x10",
    "1e3",
    "NaN",
    "inf",
    "-",
    "\u{0661}",
];

/// Settings the stream may change. Limits are only ever lowered below their
/// defaults (or restored), so the final AOF replay, run with the defaults,
/// accepts everything the live server accepted. (The policy defaults only
/// shape queues created from then on, and a write that creates a queue
/// replicates its settings first.)
const SETTINGS: &[(&str, &[&str])] = &[
    ("orca.max-payload-bytes", &["300", "1000", "4194304"]),
    ("orca.max-queue-length", &["5", "50", "10000000"]),
    ("orca.max-key-length", &["3", "16", "1024"]),
    ("orca.max-collation-id-length", &["1", "8", "256"]),
    ("orca.max-pop-count", &["1", "10", "1000"]),
    ("orca.lease-time", &["0", "5", "100", "300000"]),
    ("orca.max-attempts", &["0", "1", "2", "5", "4294967295"]),
    (
        "orca.retry-base",
        &["0", "1", "10", "1000", "9007199254740991"],
    ),
    ("orca.retry-cap", &["0", "10", "300000", "9007199254740991"]),
    (
        "orca.result-ttl",
        &["0", "1", "3600000", "9007199254740991"],
    ),
    (
        "orca.move-to-back-buffer",
        &["0", "1", "10000", "9007199254740991"],
    ),
    ("orca.default-order", &["lifo", "fifo"]),
    ("orca.trust-client-clock", &["yes", "no"]),
    ("orca.max-gate-length", &["1", "4", "256"]),
    ("orca.job-lifetime", &["0", "50", "1000", "86400000"]),
    ("orca.autodelay-window", &["0", "1000", "900000"]),
    ("orca.autodelay-step", &["0", "10", "60000"]),
    ("orca.autodelay-cap", &["0", "100"]),
    ("orca.max-running", &["0", "1", "2"]),
    ("orca.dead-max", &["0", "1", "5", "100000"]),
    ("orca.dead-ttl", &["0", "100", "60000"]),
    ("orca.result-max", &["0", "1", "100000"]),
];

const SETTING_DEFAULTS: &[(&str, &str)] = &[
    ("orca.max-payload-bytes", "4194304"),
    ("orca.max-queue-length", "10000000"),
    ("orca.max-key-length", "1024"),
    ("orca.max-collation-id-length", "256"),
    ("orca.max-pop-count", "1000"),
    ("orca.lease-time", "300000"),
    ("orca.max-attempts", "5"),
    ("orca.retry-base", "1000"),
    ("orca.retry-cap", "300000"),
    ("orca.result-ttl", "3600000"),
    ("orca.move-to-back-buffer", "10000"),
    ("orca.default-order", "lifo"),
    // The harness starts servers with `yes` (tests pin the clock).
    ("orca.trust-client-clock", "yes"),
    ("orca.max-gate-length", "256"),
    ("orca.job-lifetime", "0"),
    ("orca.autodelay-window", "0"),
    ("orca.autodelay-step", "0"),
    ("orca.autodelay-cap", "0"),
    ("orca.max-running", "0"),
    ("orca.dead-max", "100000"),
    ("orca.dead-ttl", "0"),
    ("orca.result-max", "100000"),
];

fn eq_ci(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

struct Fuzz {
    rng: Rng,
    /// Orca keys (base64) seen in replies or built from known configs.
    keys: Vec<Vec<u8>>,
    /// (queue, orca key, lease token) seen in replies.
    leases: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    /// Valid import blobs (from the AOF and built by the core).
    blobs: Vec<Blob>,
    /// Real DUMP payloads.
    dumps: Vec<Vec<u8>>,
    dump_format: Option<DumpFormat>,
    /// Client id of the blocking connection (for CLIENT UNBLOCK).
    blocker_id: Option<i64>,
    /// The last commands on each key, for reproductions.
    history: HashMap<Vec<u8>, VecDeque<String>>,
    failures: Vec<String>,
    failure_kinds: std::collections::BTreeMap<String, u64>,
    counts: Counts,
    unique: u64,
}

fn push_bounded<T>(v: &mut Vec<T>, item: T, max: usize, rng: &mut Rng) {
    if v.len() < max {
        v.push(item);
    } else {
        let i = rng.below(max as u64) as usize;
        v[i] = item;
    }
}

impl Fuzz {
    fn new(seed: u64) -> Fuzz {
        Fuzz {
            rng: Rng::new(seed),
            keys: Vec::new(),
            leases: Vec::new(),
            blobs: Vec::new(),
            dumps: Vec::new(),
            dump_format: None,
            blocker_id: None,
            history: HashMap::new(),
            failures: Vec::new(),
            failure_kinds: Default::default(),
            counts: Counts::default(),
            unique: 0,
        }
    }

    /// Record a problem; the first three of each kind are kept in full.
    fn fail(&mut self, kind: &str, msg: String) {
        let n = self.failure_kinds.entry(kind.to_string()).or_insert(0);
        *n += 1;
        if *n <= 3 {
            eprintln!("FUZZ FAILURE ({kind}): {msg}");
            self.failures.push(format!("[{kind}] {msg}"));
        }
    }

    fn history_of(&self, key: &[u8]) -> String {
        self.history
            .get(key)
            .map(|h| h.iter().cloned().collect::<Vec<_>>().join("\n    "))
            .unwrap_or_default()
    }

    fn record(&mut self, key: &[u8], args: &[Vec<u8>]) {
        let h = self.history.entry(key.to_vec()).or_default();
        h.push_back(show_args(args));
        if h.len() > 40 {
            h.pop_front();
        }
    }
}

#[test]
fn fuzz_live_server() {
    let total = env_u64("ORCA_FUZZ_COMMANDS").unwrap_or(100_000);
    let seed = env_u64("ORCA_FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let timeout = Duration::from_secs(env_u64("ORCA_FUZZ_TIMEOUT_SECS").unwrap_or(30));
    let batch_size = env_u64("ORCA_FUZZ_BATCH").unwrap_or(250).max(10) as usize;
    println!(
        "fuzz_live: seed {seed} (replay: ORCA_FUZZ_SEED={seed}), {total} commands, batches of {batch_size}"
    );
    let started = Instant::now();

    let server = Server::start(&[
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        "no",
        "--appendfsync",
        "no",
        "--lazyfree-lazy-user-del",
        "yes",
        "--lazyfree-lazy-server-del",
        "yes",
        "--notify-keyspace-events",
        "KEA",
    ]);
    let mut con = Wire::connect(server.port, timeout);
    // A replica follows the whole stream (ORCA_FUZZ_REPLICA=0: none); at the
    // end it must hold exactly the master's dataset.
    let replica =
        (env_u64("ORCA_FUZZ_REPLICA").unwrap_or(1) != 0).then(|| server.start_replica(&[], &[]));
    if let Some(path) = std::env::var_os("ORCA_FUZZ_MONITOR") {
        monitor_to(server.port, std::path::PathBuf::from(path));
    }
    let mut con3 = Wire::connect(server.port, timeout);
    assert!(
        matches!(con3.call(&args!["HELLO", "3"]), R::Map(_)),
        "HELLO 3 refused"
    );
    setup_other_types(&mut con);

    let mut f = Fuzz::new(seed);
    if std::env::var_os("ORCA_FUZZ_ERRORS").is_some() {
        f.counts.error_texts = Some(HashMap::new());
    }
    // Blobs built by the core, and a first DUMP to learn the payload format.
    let mut brng = Rng::new(seed ^ 0xB10B);
    for tag in 0..24 {
        let (b, keys) = core_blob(&mut brng, tag);
        for k in keys {
            push_bounded(&mut f.keys, k.into_bytes(), 512, &mut f.rng);
        }
        f.blobs.push(b);
    }
    con.call(&args![
        "ORCA.ENQUEUE",
        "probe",
        config("probe", Some("user.1"), 0)
    ]);
    match con.call(&args!["DUMP", "probe"]) {
        R::Bulk(d) => {
            f.dump_format = DumpFormat::learn(&d);
            assert!(
                f.dump_format.is_some(),
                "DUMP payload format not understood (CRC-64 or module id): {:?}",
                &d[..d.len().min(16)]
            );
            f.dumps.push(d);
        }
        other => panic!("DUMP probe: {other:?}"),
    }
    con.call(&args!["DEL", "probe"]);

    // The blocking connection.
    let stop = Arc::new(AtomicBool::new(false));
    let pops = Arc::new(AtomicU64::new(0));
    let (id_tx, id_rx) = mpsc::channel();
    let bcon = Wire::connect(server.port, timeout);
    let blocker_thread = {
        let (stop, pops) = (stop.clone(), pops.clone());
        std::thread::spawn(move || blocker(bcon, seed, stop, pops, id_tx))
    };
    f.blocker_id = id_rx.recv_timeout(Duration::from_secs(10)).ok();

    // Periodic work, scaled so short runs (valgrind) still do each of it.
    let batches = (total / batch_size as u64).max(1);
    let sweep_every = (batches / 5).clamp(1, 40);
    let rewrite_every = (batches / 2).clamp(2, 60);
    let reload_every = (batches / 2).clamp(2, 100);
    let mut sent_total: u64 = 0;
    let mut batch_no: u64 = 0;
    while sent_total < total {
        batch_no += 1;
        let mut batch: Vec<Sent> = Vec::new();
        while batch.len() < batch_size {
            f.step(&mut batch);
        }
        if batch_no.is_multiple_of(7) {
            // Keep the other-type keys around.
            batch.push(Sent::new(args!["SET", "str", "v"]));
            batch.push(Sent::new(args!["RPUSH", "list", "a"]));
            batch.push(Sent::new(args!["HSET", "hash", "f", "v"]));
        }
        for s in batch.iter_mut() {
            shorten_blocks(s);
        }
        let use3 = f.rng.chance(10);
        let c = if use3 { &mut con3 } else { &mut con };
        let replies = match send_batch(c, &batch) {
            Ok(r) => r,
            Err(e) => {
                let last: Vec<String> = batch
                    .iter()
                    .rev()
                    .take(5)
                    .map(|s| show_args(&s.args))
                    .collect();
                let saved = save_log(&server, seed);
                let dump = std::env::temp_dir().join(format!("orca-fuzz-{seed}-batch.txt"));
                let text: Vec<String> = batch.iter().map(|s| show_args(&s.args)).collect();
                let _ = std::fs::write(&dump, text.join("\n"));
                eprintln!(
                    "server log saved to {saved}; the batch to {}",
                    dump.display()
                );
                let log = server.log();
                let crash_lines: Vec<&str> = log
                    .lines()
                    .filter(|l| {
                        l.contains("panicked at")
                            || l.contains("Err` value")
                            || l.contains("fatal runtime")
                            || l.contains("crashed by signal")
                            || l.contains("ASSERTION FAILED")
                            || l.contains("==> ")
                            || l.contains("Guru Meditation")
                    })
                    .collect();
                panic!(
                    "batch {batch_no}: no reply ({e}); server alive: {}\n\
                     server log: {saved}; the batch: {}\n\
                     last commands of the batch:\n  {}\n\
                     last panic/crash lines of the log:\n  {}\n\
                     problems found before (seed {seed}):\n\n{}",
                    alive(server.pid()),
                    dump.display(),
                    last.join("\n  "),
                    crash_lines[crash_lines.len().saturating_sub(6)..].join("\n  "),
                    f.failures.join("\n\n")
                );
            }
        };
        f.counts.batches += 1;
        if use3 {
            f.counts.resp3_batches += 1;
        }
        for (s, v) in batch.iter().zip(replies.iter()) {
            f.inspect(s, v);
        }
        sent_total += batch.len() as u64;
        // Alive and answering.
        let pong = con.call(&args!["PING"]);
        assert_eq!(pong, R::Status(b"PONG".to_vec()), "batch {batch_no}: PING");
        assert!(
            alive(server.pid()),
            "batch {batch_no}: server process is gone"
        );
        f.counts.commands += 1;

        if batch_no.is_multiple_of(sweep_every) {
            check_sweep(&mut f, &mut con);
        }
        if batch_no % rewrite_every == rewrite_every / 2 {
            // An AOF rewrite (no RDB preamble): harvest ORCA.IMPORT blobs.
            f.counts.rewrites += 1;
            con.call(&args!["BGREWRITEAOF"]);
            if wait_rewrite(&mut con, timeout) {
                for b in aof_import_blobs(&server.dir) {
                    if let Some(blob) = Blob::parse(&b) {
                        f.counts.aof_blobs += 1;
                        push_bounded(&mut f.blobs, blob, 96, &mut f.rng);
                    }
                }
            }
        }
        if batch_no % reload_every == reload_every / 2 + 1 {
            // RDB save + load of everything. A queue that fails ORCA.CHECK
            // would make the load fail (and the server exit), so the sweep
            // reports and removes those first.
            check_sweep(&mut f, &mut con);
            persist_all(&mut con);
            f.counts.reloads += 1;
            let v = con.call(&args!["DEBUG", "RELOAD"]);
            if !v.is_ok() {
                f.fail(
                    "reload",
                    format!(
                        "DEBUG RELOAD: {v:?}\nlog tail:\n{}",
                        tail(&server.log(), 20)
                    ),
                );
            }
            assert!(
                alive(server.pid()),
                "server died in DEBUG RELOAD:\n{}",
                tail(&server.log(), 30)
            );
        }
    }

    // Stop the blocking connection (unblock it if it waits forever).
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + timeout;
    while !blocker_thread.is_finished() && Instant::now() < deadline {
        if let Some(id) = f.blocker_id {
            con.call(&args!["CLIENT", "UNBLOCK", id]);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let bfail = blocker_thread.join().expect("blocker thread");
    for m in bfail {
        f.fail("blocker", m);
    }
    f.counts.blocker_pops = pops.load(Ordering::Relaxed);

    // Every queue passes ORCA.CHECK.
    let queues = check_sweep(&mut f, &mut con);

    // The replica applied the replicated forms to the same dataset, and its
    // queues pass ORCA.CHECK too.
    if let Some(replica) = &replica {
        let mut rcon = Wire::connect(replica.port, timeout);
        let mut diverged = None;
        for _ in 0..3 {
            sync_replica(&server, replica);
            let d = args!["DEBUG", "DIGEST"];
            let m = con.call(&d);
            let r = rcon.call(&d);
            if m == r {
                diverged = None;
                break;
            }
            diverged = Some((m, r));
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some((m, r)) = diverged {
            let mut keys = Vec::new();
            for db in [0, 1] {
                con.call(&args!["SELECT", db]);
                rcon.call(&args!["SELECT", db]);
                let names = match con.call(&args!["KEYS", "*"]) {
                    R::Array(v) => v,
                    _ => Vec::new(),
                };
                for k in names {
                    let R::Bulk(k) = k else { continue };
                    let dv = args!["DEBUG", "DIGEST-VALUE", k.clone()];
                    if con.call(&dv) != rcon.call(&dv) && keys.len() < 3 {
                        keys.push(format!(
                            "{} (db {db}); last commands on it:\n    {}",
                            show_args(std::slice::from_ref(&k)),
                            f.history_of(&k)
                        ));
                    }
                }
            }
            con.call(&args!["SELECT", 0]);
            rcon.call(&args!["SELECT", 0]);
            f.fail(
                "replica",
                format!(
                    "the replica diverged (DEBUG DIGEST {m:?} on the master, {r:?} on the replica); keys that differ:\n  {}",
                    keys.join("\n  ")
                ),
            );
        }
        f.counts.replica_queues = check_sweep(&mut f, &mut rcon) as u64;
        // The replica accepted every command its master sent: a refused one
        // means the master replicated a form the replica's state could not
        // apply (they had diverged before), even if the digests agree.
        let rlog = replica.log();
        let lines: Vec<&str> = rlog.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.contains("sending an error to its master") {
                // The next line shows the end of the replication stream.
                let backlog = lines.get(i + 1).copied().unwrap_or("");
                f.fail("replica-refused", format!("replica log: {l}\n{backlog}"));
            }
        }
    }

    // The AOF (base + the replicated forms of every command) replays to the
    // same dataset. Limits back to the defaults first (they were only ever
    // lowered), so the replay accepts what the live server accepted.
    for (n, v) in SETTING_DEFAULTS {
        con.call(&args!["CONFIG", "SET", *n, *v]);
    }
    let mut outcome = None;
    for _ in 0..3 {
        let d = args!["DEBUG", "DIGEST"];
        let l = args!["DEBUG", "LOADAOF"];
        let r = con.pipeline(&[&d, &l, &d]).expect("DEBUG LOADAOF");
        if !r[1].is_ok() {
            outcome = Some(format!(
                "DEBUG LOADAOF: {:?}\nlog tail:\n{}",
                r[1],
                tail(&server.log(), 20)
            ));
            break;
        }
        if r[0] == r[2] {
            outcome = None;
            break;
        }
        outcome = Some(format!(
            "the AOF replays to another dataset (DEBUG DIGEST {:?} before, {:?} after)",
            r[0], r[2]
        ));
    }
    if let Some(m) = outcome {
        f.fail("aof", m);
    }
    let queues_after = check_sweep(&mut f, &mut con);
    assert!(
        alive(server.pid()),
        "server died:\n{}",
        tail(&server.log(), 30)
    );

    // A clean shutdown with an RDB save (under valgrind this is also when
    // the exit-time leak check runs).
    // From a fresh connection: Redis 7.0 panics ("Unknown btype in
    // replyToBlockedClientTimedOut") when SHUTDOWN has to wait for a lagging
    // replica on a connection that ran a blocking command with a timeout
    // before (a stale timeout; a Redis bug, BLPOP does it too).
    let mut last = Wire::connect(server.port, timeout);
    let _ = last.pipeline(&[&args!["SHUTDOWN", "SAVE"]]);
    let deadline = Instant::now() + timeout;
    while alive(server.pid()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(server.pid()) {
        f.fail(
            "shutdown",
            "the server did not exit after SHUTDOWN SAVE".into(),
        );
    } else if !server.log().contains("ready to exit, bye bye") {
        f.fail(
            "shutdown",
            format!("unclean shutdown:\n{}", tail(&server.log(), 20)),
        );
    }

    // No panic in the log.
    let log = server.log();
    for l in log.lines() {
        let low = l.to_ascii_lowercase();
        if low.contains("panic")
            || low.contains("guru meditation")
            || low.contains("crashed by signal")
            || low.contains("assertion failed")
        {
            f.fail("log", format!("server log: {l}"));
        }
    }

    let secs = started.elapsed().as_secs_f64();
    let c = &f.counts;
    println!(
        "fuzz_live: seed {seed}: {} commands ({} ORCA.*) in {secs:.1}s ({:.0}/s), {} batches ({} RESP3), \
         {} error replies, {} MULTI, {} EVAL, {} imports ({} accepted), {} restores ({} accepted), \
         {} harvested leases used, {} ACKs ok, {} MACK leases acked, {} blocking pops, {} AOF rewrites ({} blobs), \
         {} DEBUG RELOADs, {} ORCA.CHECKs, {} queues at the end ({} after AOF replay, {} on the replica)",
        c.commands,
        c.orca_commands,
        c.commands as f64 / secs,
        c.batches,
        c.resp3_batches,
        c.errors,
        c.multi,
        c.eval,
        c.imports,
        c.imports_ok,
        c.restores,
        c.restores_ok,
        c.leases_used,
        c.acks_ok,
        c.mack_acks_ok,
        c.blocker_pops,
        c.rewrites,
        c.aof_blobs,
        c.reloads,
        c.checks,
        queues,
        queues_after,
        c.replica_queues,
    );
    let per: Vec<String> = c
        .per_command
        .iter()
        .filter(|(k, _)| k.starts_with("ORCA."))
        .map(|(k, (o, e))| format!("{} {o}/{e}", &k[5..]))
        .collect();
    println!("fuzz_live: ORCA.* replies ok/error: {}", per.join(", "));
    if let Some(m) = &c.error_texts {
        let mut v: Vec<(&String, &u64)> = m.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1));
        for (k, n) in v.iter().take(60) {
            println!("  {n:>7}  {k}");
        }
    }
    if !f.failures.is_empty() {
        println!("fuzz_live: server log saved to {}", save_log(&server, seed));
    }
    let kinds: Vec<String> = f
        .failure_kinds
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect();
    assert!(
        f.failures.is_empty(),
        "fuzz_live (seed {seed}) found problems ({}); the first of each kind:\n\n{}",
        kinds.join(", "),
        f.failures.join("\n\n")
    );
}

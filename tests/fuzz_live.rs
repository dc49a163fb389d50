//! Live-server fuzzer: a real `redis-server` with the module loaded (see
//! `tests/common/mod.rs`) gets a long stream of random, malformed and
//! adversarial commands, pipelined in batches, and must survive all of it.
//!
//! What is sent (weights in `Fuzz::command`):
//! - every `ORCA.*` command, its name in random case, with well-formed
//!   arguments (valid and MUTATED `GradingJobConfig` JSON with
//!   key/response_url/collation/priority/metadata_table, option keywords,
//!   edge integers) or with random arity and random bytes;
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
//! - a second connection blocking in `ORCA.POP ... BLOCK` (woken by the
//!   fuzz stream, by `CLIENT UNBLOCK`, or timing out), and some batches over
//!   RESP3;
//! - `DEBUG RELOAD` (RDB save + load of everything) every so often.
//!
//! Checks: every command gets a reply (read timeout: a hang fails), no reply
//! is `ERR internal error in the orca module`, no `ORCA.*` error reply is
//! anything but a clean `ERR ...`/`WRONGTYPE ...` line, no `ORCA.CHECK`
//! reports a broken invariant, the server answers PING after every batch and
//! its process is alive, at the end `ORCA.CHECK` is OK on every key of type
//! `orcaqueue` (`KEYS *` in db 0 and 1), the AOF (replicated forms) replays
//! to the same dataset (`DEBUG LOADAOF`, digests compared), and the server
//! log has no panic lines.
//!
//! Environment:
//! - `ORCA_FUZZ_COMMANDS` (default 100000): commands to send. Manual long
//!   mode: `ORCA_FUZZ_COMMANDS=1000000 cargo test --release --test fuzz_live -- --nocapture`.
//! - `ORCA_FUZZ_SEED` (default: from the clock; printed): the PRNG seed. The
//!   server's clock and timer are not under the seed's control, so a replay
//!   is close to, not exactly, the original run.
//! - `ORCA_FUZZ_TIMEOUT_SECS` (default 30): read timeout per batch (raise it
//!   under valgrind).
//! - `ORCA_FUZZ_BATCH` (default 250): commands per pipelined batch.

mod common;

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::*;

use orca::core::{encode_key, parse_config, Move, Order, Policy, Queue};

/// 2^53 - 1: the largest time (ms) the module accepts.
const MAX_TIME: i64 = (1 << 53) - 1;

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
];

const KEYWORDS: &[&str] = &[
    "NOW",
    "BUFFER",
    "RELEASE",
    "DELAY",
    "LEASE",
    "BLOCK",
    "COUNT",
    "MAXATTEMPTS",
    "RESULT",
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
/// accepts everything the live server accepted.
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
];

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    if let Some(hex) = v.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()
    } else {
        v.parse().ok()
    }
}

fn eq_ci(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------
// A raw RESP client
// ---------------------------------------------------------------------------

/// A reply as it came off the wire. Error and status lines are kept as
/// bytes: a module must not send invalid UTF-8 there, and the fuzzer wants
/// to see it if it does (a client library would fail to parse the reply).
#[derive(Clone, Debug, PartialEq)]
enum R {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Status(Vec<u8>),
    Err(Vec<u8>),
    Array(Vec<R>),
    Map(Vec<(R, R)>),
    Other(Vec<u8>),
}

impl R {
    fn is_ok(&self) -> bool {
        matches!(self, R::Status(s) if s == b"OK")
    }
}

/// One connection speaking RESP2 (or RESP3 after `HELLO 3`), pipelined.
struct Wire {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

fn pack(out: &mut Vec<u8>, args: &[Vec<u8>]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

impl Wire {
    fn connect(port: u16, timeout: Duration) -> Wire {
        let w = TcpStream::connect(("127.0.0.1", port)).expect("connect to redis-server");
        w.set_read_timeout(Some(timeout)).expect("read timeout");
        w.set_nodelay(true).ok();
        let r = BufReader::with_capacity(1 << 16, w.try_clone().expect("clone socket"));
        Wire { r, w }
    }

    fn line(&mut self) -> std::io::Result<Vec<u8>> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l)?;
        if l.len() < 2 || !l.ends_with(b"\r\n") {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("bad reply line {:?}", String::from_utf8_lossy(&l)),
            ));
        }
        l.truncate(l.len() - 2);
        Ok(l)
    }

    fn num(l: &[u8]) -> std::io::Result<i64> {
        std::str::from_utf8(l)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad number {l:?}")))
    }

    fn blob(&mut self, n: i64) -> std::io::Result<Option<Vec<u8>>> {
        if n < 0 {
            return Ok(None);
        }
        let mut b = vec![0u8; n as usize + 2];
        self.r.read_exact(&mut b)?;
        b.truncate(n as usize);
        Ok(Some(b))
    }

    fn read(&mut self) -> std::io::Result<R> {
        loop {
            let l = self.line()?;
            let (t, rest) = (l[0], &l[1..]);
            return Ok(match t {
                b'+' => R::Status(rest.to_vec()),
                b'-' => R::Err(rest.to_vec()),
                b':' => R::Int(Self::num(rest)?),
                b'$' => match self.blob(Self::num(rest)?)? {
                    Some(b) => R::Bulk(b),
                    None => R::Nil,
                },
                b'!' => R::Err(self.blob(Self::num(rest)?)?.unwrap_or_default()),
                b'=' => R::Bulk(self.blob(Self::num(rest)?)?.unwrap_or_default()),
                b'*' | b'~' => {
                    let n = Self::num(rest)?;
                    if n < 0 {
                        R::Nil
                    } else {
                        let mut v = Vec::with_capacity(n as usize);
                        for _ in 0..n {
                            v.push(self.read()?);
                        }
                        R::Array(v)
                    }
                }
                b'%' => {
                    let n = Self::num(rest)?;
                    let mut v = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let k = self.read()?;
                        let x = self.read()?;
                        v.push((k, x));
                    }
                    R::Map(v)
                }
                b'>' | b'|' => {
                    // Push data (or an attribute) before the reply: skip it.
                    let n = Self::num(rest)?;
                    for _ in 0..n * if t == b'|' { 2 } else { 1 } {
                        self.read()?;
                    }
                    continue;
                }
                b'_' => R::Nil,
                b'#' | b',' | b'(' => R::Other(rest.to_vec()),
                _ => {
                    return Err(std::io::Error::other(format!(
                        "unknown reply type in {:?}",
                        String::from_utf8_lossy(&l)
                    )))
                }
            });
        }
    }

    fn pipeline(&mut self, cmds: &[&[Vec<u8>]]) -> std::io::Result<Vec<R>> {
        let mut out = Vec::new();
        for c in cmds {
            pack(&mut out, c);
        }
        self.w.write_all(&out)?;
        (0..cmds.len()).map(|_| self.read()).collect()
    }

    fn call(&mut self, args: &[Vec<u8>]) -> R {
        let mut out = Vec::new();
        pack(&mut out, args);
        self.w
            .write_all(&out)
            .and_then(|_| self.read())
            .unwrap_or_else(|e| panic!("I/O error running {}: {e}", show_args(args)))
    }

    fn info(&mut self, section: &str) -> HashMap<String, String> {
        match self.call(&args!["INFO", section]) {
            R::Bulk(b) => String::from_utf8_lossy(&b)
                .lines()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect(),
            other => panic!("INFO {section}: {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------
// Serialized queues: IMPORT blobs and RESTORE payloads
// ---------------------------------------------------------------------------

/// An `ORCA.IMPORT` blob (`Queue::encode` format) split into header and units.
#[derive(Clone)]
struct Blob {
    header: Vec<u8>,
    units: Vec<Vec<u8>>,
}

fn read_u64(b: &[u8], at: &mut usize) -> Option<u64> {
    let s = b.get(*at..*at + 8)?;
    *at += 8;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

fn read_bytes(b: &[u8], at: &mut usize) -> Option<Vec<u8>> {
    let n = usize::try_from(read_u64(b, at)?).ok()?;
    let end = at.checked_add(n)?;
    let s = b.get(*at..end)?.to_vec();
    *at = end;
    Some(s)
}

impl Blob {
    fn parse(b: &[u8]) -> Option<Blob> {
        let mut at = 0;
        let header = read_bytes(b, &mut at)?;
        let n = read_u64(b, &mut at)?;
        let mut units = Vec::new();
        for _ in 0..n {
            units.push(read_bytes(b, &mut at)?);
        }
        (at == b.len()).then_some(Blob { header, units })
    }

    fn encode_with_count(&self, count: u64) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(self.header.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&count.to_le_bytes());
        for u in &self.units {
            out.extend_from_slice(&(u.len() as u64).to_le_bytes());
            out.extend_from_slice(u);
        }
        out
    }

    fn encode(&self) -> Vec<u8> {
        self.encode_with_count(self.units.len() as u64)
    }
}

/// Redis's CRC-64 (Jones polynomial, reflected), as DUMP payloads carry it.
fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0x95AC_9329_AC4B_C9B5;
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

fn rdb_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// What a DUMP payload of this server starts with (object type + module
/// id) and ends with (RDB version), learned from a real DUMP.
#[derive(Clone)]
struct DumpFormat {
    prefix: Vec<u8>,
    version: [u8; 2],
}

impl DumpFormat {
    fn learn(dump: &[u8]) -> Option<DumpFormat> {
        // type RDB_TYPE_MODULE_2 (7), then the 64-bit module id as an RDB
        // length (0x81 + 8 bytes big-endian).
        if dump.len() < 20 || dump[0] != 7 || dump[1] != 0x81 {
            return None;
        }
        let n = dump.len();
        if crc64(&dump[..n - 8]).to_le_bytes() != dump[n - 8..] {
            return None;
        }
        Some(DumpFormat {
            prefix: dump[..10].to_vec(),
            version: [dump[n - 10], dump[n - 9]],
        })
    }

    /// Seal a payload body with the RDB version and a correct CRC.
    fn seal(&self, mut body: Vec<u8>) -> Vec<u8> {
        body.extend_from_slice(&self.version);
        let crc = crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    /// A RESTORE payload carrying `blob` the way `rdb_save` writes a queue:
    /// header string, unit count, unit strings, module EOF.
    fn payload(&self, blob: &Blob, count: u64) -> Vec<u8> {
        const OPCODE_UINT: u64 = 2;
        const OPCODE_STRING: u64 = 5;
        let mut b = self.prefix.clone();
        rdb_len(&mut b, OPCODE_STRING);
        rdb_len(&mut b, blob.header.len() as u64);
        b.extend_from_slice(&blob.header);
        rdb_len(&mut b, OPCODE_UINT);
        rdb_len(&mut b, count);
        for u in &blob.units {
            rdb_len(&mut b, OPCODE_STRING);
            rdb_len(&mut b, u.len() as u64);
            b.extend_from_slice(u);
        }
        rdb_len(&mut b, 0); // RDB_MODULE_OPCODE_EOF
        self.seal(b)
    }
}

/// Parse a RESP file (an AOF) into commands.
fn parse_resp_commands(mut b: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
        let i = b.windows(2).position(|w| w == b"\r\n")?;
        let l = &b[..i];
        *b = &b[i + 2..];
        Some(l)
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let Some(l) = line(&mut b) else { break };
        let Some(n) = l
            .strip_prefix(b"*")
            .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
        else {
            break;
        };
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let Some(len) = line(&mut b)
                .and_then(|l| l.strip_prefix(b"$"))
                .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
            else {
                return out;
            };
            if b.len() < len + 2 {
                return out;
            }
            cmd.push(b[..len].to_vec());
            b = &b[len + 2..];
        }
        out.push(cmd);
    }
    out
}

/// Blobs of the `ORCA.IMPORT` commands in the base file of the server's AOF.
fn aof_import_blobs(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let adir = dir.join("appendonlydir");
    let Ok(manifest) = std::fs::read_to_string(adir.join("appendonly.aof.manifest")) else {
        return Vec::new();
    };
    let Some(base) = manifest.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 6 && f[0] == "file" && f[4] == "type" && f[5] == "b").then(|| f[1].to_string())
    }) else {
        return Vec::new();
    };
    let Ok(bytes) = std::fs::read(adir.join(base)) else {
        return Vec::new();
    };
    parse_resp_commands(&bytes)
        .into_iter()
        .filter(|c| c.len() == 3 && eq_ci(&c[0], "ORCA.IMPORT"))
        .map(|mut c| c.pop().unwrap_or_default())
        .collect()
}

// ---------------------------------------------------------------------------
// Commands in flight and reply inspection
// ---------------------------------------------------------------------------

/// A wrapped command (inside MULTI/EXEC or EVAL) and the queue it names.
type Inner = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// One command on the wire, with what is needed to read its reply.
struct Sent {
    args: Vec<Vec<u8>>,
    /// The queue an `ORCA.*` command names (for harvesting leases).
    queue: Option<Vec<u8>>,
    /// For `EXEC`: the queued commands (their replies are its array); for
    /// `EVAL`: the wrapped command.
    inner: Vec<Inner>,
}

impl Sent {
    fn new(args: Vec<Vec<u8>>) -> Sent {
        let queue = (args.len() >= 2 && is_orca(&args[0])).then(|| args[1].clone());
        Sent {
            args,
            queue,
            inner: Vec::new(),
        }
    }
}

fn is_orca(name: &[u8]) -> bool {
    name.len() > 5 && name[..5].eq_ignore_ascii_case(b"orca.")
}

fn val_str(v: &R) -> Option<String> {
    match v {
        R::Bulk(b) | R::Status(b) => Some(String::from_utf8_lossy(b).into_owned()),
        R::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// Field/value pairs of a flat RESP2 array or a RESP3 map.
fn pairs(v: &R) -> Option<Vec<(String, &R)>> {
    match v {
        R::Array(items) if items.len() >= 2 && items.len() % 2 == 0 => {
            let mut out = Vec::new();
            for p in items.chunks(2) {
                match &p[0] {
                    R::Bulk(_) | R::Status(_) => out.push((val_str(&p[0])?, &p[1])),
                    _ => return None,
                }
            }
            Some(out)
        }
        R::Map(m) => m.iter().map(|(k, v)| Some((val_str(k)?, v))).collect(),
        _ => None,
    }
}

#[derive(Default)]
struct Counts {
    commands: u64,
    orca_commands: u64,
    errors: u64,
    batches: u64,
    resp3_batches: u64,
    multi: u64,
    eval: u64,
    imports: u64,
    imports_ok: u64,
    restores: u64,
    restores_ok: u64,
    leases_used: u64,
    acks_ok: u64,
    reloads: u64,
    rewrites: u64,
    aof_blobs: u64,
    checks: u64,
    blocker_pops: u64,
    replica_queues: u64,
    /// Error reply kinds and counts, with `ORCA_FUZZ_ERRORS=1`.
    error_texts: Option<HashMap<String, u64>>,
    /// Per command name (upper case): (ok replies, error replies).
    per_command: std::collections::BTreeMap<String, (u64, u64)>,
}

// ---------------------------------------------------------------------------
// The fuzzer
// ---------------------------------------------------------------------------

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

    // -- small generators ---------------------------------------------------

    fn pct(&mut self, p: u64) -> bool {
        self.rng.chance(p)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    /// `s` in upper, lower or random case.
    fn case(&mut self, s: &str) -> Vec<u8> {
        match self.below(6) {
            0..=2 => s.as_bytes().to_vec(),
            3 => s.to_ascii_lowercase().into_bytes(),
            _ => s
                .bytes()
                .map(|c| {
                    if self.rng.chance(50) {
                        c.to_ascii_lowercase()
                    } else {
                        c.to_ascii_uppercase()
                    }
                })
                .collect(),
        }
    }

    fn random_bytes(&mut self, max: u64) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.rng.next_u64() as u8).collect()
    }

    fn queue(&mut self) -> Vec<u8> {
        match self.below(100) {
            0..=79 => self.rng.pick(QUEUES).to_vec(),
            80..=87 => self.rng.pick(COPIES).to_vec(),
            88..=97 => self.rng.pick(OTHERS).to_vec(),
            _ => self.random_bytes(12),
        }
    }

    fn edge_int(&mut self) -> Vec<u8> {
        if self.pct(70) {
            self.rng.pick(EDGE_INTS).as_bytes().to_vec()
        } else {
            (self.rng.next_u64() as i64 >> self.below(64))
                .to_string()
                .into_bytes()
        }
    }

    /// A time or duration in ms: mostly valid, sometimes an edge value.
    fn ms(&mut self, small: bool) -> Vec<u8> {
        match self.below(20) {
            0..=11 if small => self.below(200).to_string().into_bytes(),
            0..=11 => self.below(600_000).to_string().into_bytes(),
            12..=14 => (now_ms() + self.below(120_000) as i64 - 60_000)
                .to_string()
                .into_bytes(),
            15 => b"0".to_vec(),
            16 => MAX_TIME.to_string().into_bytes(),
            _ => self.edge_int(),
        }
    }

    /// A key name for configs: a small pool (so updates and regrades
    /// happen), unique names, or odd strings.
    fn job_name(&mut self) -> String {
        match self.below(100) {
            0..=79 => format!("k{}", self.below(48)),
            80..=89 => {
                self.unique += 1;
                format!("u{}-{}", self.unique, self.rng.next_u64() % 1000)
            }
            90..=92 => String::new(),
            93..=94 => "x".repeat(1024 + self.below(3) as usize - 1),
            95 => "é😀\u{7f}\\u0000".to_string(),
            _ => format!("g{}-{}", self.below(8), self.below(40)),
        }
    }

    fn url(&mut self, name: &str) -> Option<String> {
        match self.below(10) {
            0..=5 => Some(format!("http://cb/{name}")),
            6 => Some(String::new()),
            7 => Some("u".into()),
            _ => None,
        }
    }

    /// A Orca GradingJobConfig, mostly valid.
    fn config(&mut self) -> Vec<u8> {
        let name = self.job_name();
        let url = self.url(&name);
        let mut fields: Vec<String> = Vec::new();
        if self.pct(97) {
            fields.push(format!("\"key\":{}", json_str(&name)));
        }
        if let Some(u) = &url {
            fields.push(format!("\"response_url\":{}", json_str(u)));
        }
        // Remember the orca key, so later commands can name the job.
        let okey = orca_key(&name, url.as_deref().unwrap_or(""));
        if self.pct(30) {
            push_bounded(&mut self.keys, okey.into_bytes(), 512, &mut self.rng);
        }
        if self.pct(60) {
            {
                let kind = match self.below(20) {
                    0..=9 => "\"user\"".to_string(),
                    10..=17 => "\"team\"".to_string(),
                    18 => "\"group\"".to_string(),
                    _ => "1".to_string(),
                };
                let id = match self.below(20) {
                    0..=11 => format!("\"{}\"", self.below(12)),
                    12..=14 => format!("{}", self.below(12)),
                    15 => "\"\"".to_string(),
                    16 => json_str(&"i".repeat(255 + self.below(3) as usize)),
                    17 => "-9223372036854775808".to_string(),
                    18 => "1.5".to_string(),
                    _ => "null".to_string(),
                };
                match self.below(12) {
                    0 => fields.push("\"collation\":null".into()),
                    1 => fields.push(format!("\"collation\":[{kind},{id}]")),
                    2 => fields.push(format!("\"collation\":{{\"type\":{kind}}}")),
                    3 => fields.push(format!(
                        "\"collation\":{{\"type\":{kind},\"id\":{id},\"id\":{id}}}"
                    )),
                    _ => fields.push(format!("\"collation\":{{\"type\":{kind},\"id\":{id}}}")),
                }
            }
        }
        if self.pct(60) {
            let p = match self.below(24) {
                0..=13 => self.below(5000).to_string(),
                14..=16 => "0".to_string(),
                17 => "9007199254740991".to_string(),
                18 => "9007199254740992".to_string(),
                19 => "-1".to_string(),
                20 => "1.5".to_string(),
                21 => "1e300".to_string(),
                22 => "\"5\"".to_string(),
                _ => "18446744073709551616".to_string(),
            };
            fields.push(format!("\"priority\":{p}"));
        }
        if self.pct(40) {
            let course = ["cs2500", "cs3500", "cs4500"][self.below(3) as usize];
            let tag = ["a", "b", "c"][self.below(3) as usize];
            fields.push(format!(
                "\"metadata_table\":{{\"course\":\"{course}\",\"tags\":[\"{tag}\",\"x\"],\"n\":{}}}",
                self.below(10)
            ));
        }
        match self.below(40) {
            0..=24 => fields.push("\"script\":[\"make\",\"test\"]".into()),
            25 => fields.push(format!("\"deep\":{}{}", "[".repeat(200), "]".repeat(200))),
            26 => fields.push(format!(
                "\"big\":\"{}\"",
                "b".repeat(self.below(300_000) as usize)
            )),
            27 => fields.push("\"key\":\"dup\"".into()),
            28 => fields.push("\"s\":\"\\ud800\\u0000\\n\"".into()),
            _ => {}
        }
        // Shuffle the fields a little.
        if fields.len() > 1 && self.pct(30) {
            let i = self.below(fields.len() as u64) as usize;
            let f = fields.remove(i);
            fields.push(f);
        }
        let mut json = format!("{{{}}}", fields.join(",")).into_bytes();
        match self.below(100) {
            0..=74 => {}
            75..=92 => json = self.mutate(json),
            93..=95 => json = format!(" \t\n{}\n ", String::from_utf8_lossy(&json)).into_bytes(),
            96 => json.extend_from_slice(b" trailing"),
            97 => json = b"[\"k\"]".to_vec(),
            98 => json = self.random_bytes(40),
            _ => json = Vec::new(),
        }
        json
    }

    /// Byte-level mutations.
    fn mutate(&mut self, mut b: Vec<u8>) -> Vec<u8> {
        let rounds = 1 + self.below(3);
        for _ in 0..rounds {
            let n = b.len();
            match self.below(9) {
                0 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    b.remove(i);
                }
                1 => {
                    let i = self.below(n as u64 + 1) as usize;
                    let c = *self.rng.pick(&[
                        b'"', b'{', b'}', b'[', b']', b',', b':', b'\\', 0, 0xff, b'9',
                    ]);
                    b.insert(i, c);
                }
                2 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    b[i] ^= 1 << self.below(8);
                }
                3 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    b.truncate(i);
                }
                4 if n > 2 => {
                    let i = self.below(n as u64) as usize;
                    let j = i + self.below((n - i) as u64) as usize;
                    let seg = b[i..j].to_vec();
                    let at = self.below(n as u64) as usize;
                    b.splice(at..at, seg);
                }
                5 if n > 1 => {
                    let i = self.below(n as u64) as usize;
                    let j = self.below(n as u64) as usize;
                    b.swap(i, j);
                }
                6 if n > 0 => {
                    // Replace a digit with an edge number.
                    if let Some(i) = b.iter().position(|c| c.is_ascii_digit()) {
                        let e = self.edge_int();
                        b.splice(i..i + 1, e);
                    }
                }
                7 => {
                    let i = self.below(n as u64 + 1) as usize;
                    b.splice(i..i, b"\\u0000".iter().copied());
                }
                _ => {
                    let i = self.below(n as u64 + 1) as usize;
                    b.insert(i, self.rng.next_u64() as u8);
                }
            }
        }
        b
    }

    fn orca_key(&mut self) -> Vec<u8> {
        match self.below(100) {
            0..=74 if !self.keys.is_empty() => self.rng.pick(&self.keys).clone(),
            0..=79 => {
                let n = self.job_name();
                orca_key(&n, &format!("http://cb/{n}")).into_bytes()
            }
            80..=84 => {
                // A valid base64 of 32 random bytes: no such job.
                let raw: Vec<u8> = (0..32).map(|_| self.rng.next_u64() as u8).collect();
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .encode(raw)
                    .into_bytes()
            }
            85..=87 => {
                // 44 characters that are not base64 (or mis-padded).
                let mut k = if self.keys.is_empty() {
                    vec![b'A'; 44]
                } else {
                    self.rng.pick(&self.keys).clone()
                };
                let i = self.below(44) as usize;
                if i < k.len() {
                    k[i] = *self.rng.pick(&[b'.', b'=', b'-', b'_', 0, b' ']);
                }
                k
            }
            88..=90 => {
                let mut k = if self.keys.is_empty() {
                    vec![b'A'; 44]
                } else {
                    self.rng.pick(&self.keys).clone()
                };
                k.truncate(43);
                k
            }
            91..=93 => Vec::new(),
            _ => self.random_bytes(60),
        }
    }

    /// (queue, key, lease) of a harvested lease, or junk.
    fn lease_target(&mut self) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        if !self.leases.is_empty() && self.pct(75) {
            self.counts.leases_used += 1;
            let i = self.below(self.leases.len() as u64) as usize;
            let (q, k, l) = self.leases[i].clone();
            // Sometimes the right lease on the wrong queue or key.
            return match self.below(20) {
                0 => (self.queue(), k, l),
                1 => {
                    let k2 = self.orca_key();
                    (q, k2, l)
                }
                _ => (q, k, l),
            };
        }
        let q = self.queue();
        let k = self.orca_key();
        let l = match self.below(4) {
            0 => self.edge_int(),
            1 => self.random_bytes(10),
            _ => (1 + self.below(5000)).to_string().into_bytes(),
        };
        (q, k, l)
    }

    /// Trailing options: each allowed one with some chance, in random order,
    /// sometimes an unknown one, a duplicate or a missing value.
    fn options(&mut self, allowed: &[(&str, u8)]) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut chosen: Vec<(&str, u8)> = allowed
            .iter()
            .copied()
            .filter(|_| self.rng.chance(35))
            .collect();
        if chosen.len() > 1 && self.pct(50) {
            chosen.reverse();
        }
        for (name, kind) in chosen {
            out.push(self.case(name));
            let v = self.option_value(kind);
            out.push(v);
        }
        match self.below(40) {
            0 => {
                let kw = *self.rng.pick(KEYWORDS);
                out.push(self.case(kw));
                let v = self.edge_int();
                out.push(v);
            }
            1 if !allowed.is_empty() => {
                let (name, kind) = *self.rng.pick(allowed);
                for _ in 0..2 {
                    out.push(self.case(name));
                    let v = self.option_value(kind);
                    out.push(v);
                }
            }
            2 if !allowed.is_empty() => {
                let (name, _) = *self.rng.pick(allowed);
                out.push(self.case(name));
            }
            3 => {
                let b = self.random_bytes(8);
                out.push(b);
            }
            _ => {}
        }
        out
    }

    /// Option value kinds: 0 time/ms, 1 small ms (lease/block), 2 count,
    /// 3 attempts, 4 bytes, 5 order, 6 offset/limit.
    fn option_value(&mut self, kind: u8) -> Vec<u8> {
        if self.pct(8) {
            return self.edge_int();
        }
        match kind {
            0 => self.ms(false),
            1 if self.rng.chance(50) => (10_000 + self.below(600_000)).to_string().into_bytes(),
            1 => self.ms(true),
            2 => (1 + self.below(20)).to_string().into_bytes(),
            3 => self.below(8).to_string().into_bytes(),
            4 => {
                if self.pct(10) {
                    self.random_bytes(5000)
                } else {
                    self.random_bytes(40)
                }
            }
            5 => {
                let o = *self
                    .rng
                    .pick(&["LIFO", "FIFO", "lifo", "Fifo", "stack", ""]);
                o.as_bytes().to_vec()
            }
            _ => self.below(30).to_string().into_bytes(),
        }
    }

    fn name(&mut self, cmd: &str) -> Vec<u8> {
        self.case(cmd)
    }

    /// A well-formed (or nearly) `ORCA.*` command.
    fn orca_command(&mut self) -> Vec<Vec<u8>> {
        let which = self.below(100);
        let mut a: Vec<Vec<u8>>;
        match which {
            0..=21 => {
                a = vec![self.name("ORCA.ENQUEUE"), self.queue(), self.config()];
                a.extend(self.options(&[("NOW", 0)]));
            }
            22..=27 => {
                a = vec![self.name("ORCA.IMMEDIATE"), self.queue(), self.config()];
                a.extend(self.options(&[("NOW", 0)]));
            }
            28..=30 => {
                a = vec![
                    self.name("ORCA.REENQUEUE"),
                    self.queue(),
                    self.config(),
                    self.ms(false),
                ];
            }
            31..=35 => {
                let how = match self.below(10) {
                    0..=4 => "RELEASE",
                    5..=8 => "DELAY",
                    _ => *self.rng.pick(KEYWORDS),
                };
                a = vec![
                    self.name("ORCA.MOVE"),
                    self.queue(),
                    self.orca_key(),
                    self.case(how),
                ];
                a.extend(self.options(&[("NOW", 0), ("BUFFER", 0)]));
            }
            36..=39 => a = vec![self.name("ORCA.DELETE"), self.queue(), self.orca_key()],
            40..=53 => {
                a = vec![self.name("ORCA.POP"), self.queue()];
                a.extend(self.options(&[
                    ("LEASE", 1),
                    ("BLOCK", 1),
                    ("COUNT", 2),
                    ("NOW", 0),
                    ("MAXATTEMPTS", 3),
                ]));
            }
            54..=60 => {
                let (q, k, l) = self.lease_target();
                a = vec![self.name("ORCA.ACK"), q, k, l];
                a.extend(self.options(&[("RESULT", 4), ("TTL", 0), ("NOW", 0)]));
            }
            61..=66 => {
                let (q, k, l) = self.lease_target();
                a = vec![self.name("ORCA.NACK"), q, k, l];
                a.extend(self.options(&[("DELAY", 1), ("NOW", 0), ("MAXATTEMPTS", 3)]));
            }
            67..=70 => {
                let (q, k, l) = self.lease_target();
                a = vec![self.name("ORCA.EXTEND"), q, k, l, self.ms(true)];
                a.extend(self.options(&[("NOW", 0)]));
            }
            71..=72 => a = vec![self.name("ORCA.RESULT"), self.queue(), self.orca_key()],
            73..=76 => {
                a = vec![self.name("ORCA.DEAD"), self.queue()];
                match self.below(6) {
                    0..=2 => {
                        a.push(self.case("LIST"));
                        a.extend(self.options(&[("OFFSET", 6), ("LIMIT", 6)]));
                    }
                    3..=4 => {
                        a.push(self.case("REQUEUE"));
                        a.push(self.orca_key());
                        a.extend(self.options(&[("NOW", 0)]));
                    }
                    _ => {
                        a.push(self.case("PURGE"));
                        if self.pct(10) {
                            a.push(b"x".to_vec());
                        }
                    }
                }
            }
            77..=79 => {
                a = vec![self.name("ORCA.TICK"), self.queue()];
                a.extend(self.options(&[("NOW", 0), ("MAXATTEMPTS", 3)]));
            }
            80..=81 => a = vec![self.name("ORCA.LEN"), self.queue()],
            82..=83 => a = vec![self.name("ORCA.CHECK"), self.queue()],
            84..=87 => a = vec![self.name("ORCA.STATUS"), self.queue(), self.orca_key()],
            88..=91 => {
                a = vec![self.name("ORCA.LIST"), self.queue()];
                a.extend(self.options(&[("OFFSET", 6), ("LIMIT", 6)]));
                if self.pct(40) {
                    let (f, v) = match self.below(5) {
                        0 => ("course", "cs2500"),
                        1 => ("tags", "a"),
                        2 => ("n", "3"),
                        3 => ("missing", ""),
                        _ => ("course", "\u{0}\u{ff}"),
                    };
                    let at = self.below(a.len() as u64 - 1) as usize + 2;
                    let at = at.min(a.len());
                    let mut filt = vec![self.case("FILTER"), f.as_bytes().to_vec()];
                    if self.pct(90) {
                        filt.push(v.as_bytes().to_vec());
                    }
                    a.splice(at..at, filt);
                }
            }
            92..=93 => a = vec![self.name("ORCA.STATS"), self.queue()],
            94..=95 => {
                a = vec![self.name("ORCA.SETTINGS"), self.queue()];
                a.extend(self.options(&[("ORDER", 5)]));
            }
            _ => {
                a = vec![self.name("ORCA.IMPORT"), self.queue(), self.import_blob()];
                self.counts.imports += 1;
            }
        }
        a
    }

    /// An `ORCA.*` command with random arity and arguments from every pool.
    fn garbage_command(&mut self) -> Vec<Vec<u8>> {
        let cmd = *self.rng.pick(ORCA_COMMANDS);
        let mut a = vec![self.name(cmd)];
        let n = self.below(9);
        for i in 0..n {
            let arg = match self.below(10) {
                _ if i == 0 && self.pct(70) => self.queue(),
                0 => self.queue(),
                1 => self.orca_key(),
                2 | 3 => {
                    let kw = *self.rng.pick(KEYWORDS);
                    self.case(kw)
                }
                4 | 5 => self.edge_int(),
                6 => self.config(),
                7 => self.lease_target().2,
                _ => self.random_bytes(30),
            };
            a.push(arg);
        }
        a
    }

    /// Commands of Redis itself on queue keys: other types, renames,
    /// copies, expiry, dumps and restores.
    fn key_command(&mut self) -> Vec<Vec<u8>> {
        let q = self.queue();
        let q2 = self.queue();
        match self.below(31) {
            0 => args!["SET", q, self.random_bytes(8)],
            1 => args!["RPUSH", q, "a", "b"],
            2 => args!["HSET", q, "f", "v"],
            3 => args!["ZADD", q, "1", "m"],
            4 | 5 => args!["DEL", q],
            6 => args!["UNLINK", q],
            7 => args!["RENAME", q, q2],
            8 => args!["COPY", q, self.rng.pick(COPIES).to_vec(), "REPLACE"],
            9 => args!["COPY", q, q2],
            10 => args!["PEXPIRE", q, (1 + self.below(300)).to_string()],
            11 => args!["PERSIST", q],
            12 => args!["TYPE", q],
            13 => args!["OBJECT", "ENCODING", q],
            14 => args!["MEMORY", "USAGE", q],
            15 => args!["DEBUG", "DIGEST-VALUE", q],
            16..=18 => args!["DUMP", q],
            19..=22 => self.restore_command(),
            23 => args!["MOVE", q, "1"],
            24 if self.pct(20) => args!["SWAPDB", "0", "1"],
            25 => args!["EXISTS", q, q2],
            26 => {
                let v = self.config();
                args!["SETRANGE", q, "0", v]
            }
            27 => match self.blocker_id {
                Some(id) => {
                    let how = *self.rng.pick(&["TIMEOUT", "ERROR"]);
                    args!["CLIENT", "UNBLOCK", id, how]
                }
                None => args!["PING"],
            },
            28 => self.config_set(),
            // Writes are paused (as FAILOVER and SHUTDOWN do): nothing may
            // be written or replicated meanwhile, timers included.
            29 if self.pct(30) => {
                let how = *self.rng.pick(&["WRITE", "ALL"]);
                args!["CLIENT", "PAUSE", (1 + self.below(60)).to_string(), how]
            }
            _ => args!["INFO", "orca"],
        }
    }

    fn config_set(&mut self) -> Vec<Vec<u8>> {
        let (name, values) = *self.rng.pick(SETTINGS);
        // Mostly back to the default, so lowered limits do not linger.
        let default = SETTING_DEFAULTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|d| d.1);
        let v: Vec<u8> = match (self.below(10), default) {
            (0, _) => self.edge_int(),
            (1..=5, Some(d)) => d.as_bytes().to_vec(),
            _ => self.rng.pick(values).as_bytes().to_vec(),
        };
        // Never raise a limit above its default (see SETTINGS).
        let raises = |v: &[u8]| -> bool {
            let Some(def) = SETTING_DEFAULTS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|d| d.1)
            else {
                return false;
            };
            let limit = name.starts_with("orca.max-") && name != "orca.max-attempts";
            match (
                std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok()),
                def.parse::<i64>(),
            ) {
                (Some(x), Ok(d)) => limit && x > d,
                _ => false,
            }
        };
        let v = if raises(&v) { b"1".to_vec() } else { v };
        args!["CONFIG", "SET", name, v]
    }

    /// A blob for `ORCA.IMPORT`: a real one (maybe mutated), or junk.
    fn import_blob(&mut self) -> Vec<u8> {
        if self.blobs.is_empty() || self.pct(10) {
            return match self.below(3) {
                0 => self.random_bytes(200),
                1 => {
                    // A plausible header with garbage units.
                    let mut b = Blob {
                        header: vec![1, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                        units: Vec::new(),
                    };
                    for _ in 0..self.below(4) {
                        let mut u = vec![1 + self.below(8) as u8];
                        u.extend(self.random_bytes(120));
                        b.units.push(u);
                    }
                    b.encode()
                }
                _ => Vec::new(),
            };
        }
        let blob = self.rng.pick(&self.blobs).clone();
        if self.pct(25) {
            return blob.encode();
        }
        let (m, count) = self.mutate_blob(blob);
        if self.pct(10) {
            let mut b = m.encode_with_count(count);
            let extra = self.random_bytes(3);
            b.extend(extra);
            return b;
        }
        m.encode_with_count(count)
    }

    /// Unit-aware mutations of a serialized queue; returns the blob and the
    /// unit count to declare (usually the true one).
    fn mutate_blob(&mut self, mut b: Blob) -> (Blob, u64) {
        let rounds = 1 + self.below(3);
        for _ in 0..rounds {
            let n = b.units.len();
            match self.below(13) {
                0 | 1 if n > 0 => {
                    // Overwrite 8 bytes with an edge value.
                    let i = self.below(n as u64) as usize;
                    let u = &b.units[i];
                    if u.len() >= 9 {
                        let at = 1 + self.below(u.len() as u64 - 8) as usize;
                        let v: i64 = *self.rng.pick(&[
                            0,
                            1,
                            -1,
                            i64::MIN,
                            i64::MAX,
                            MAX_TIME,
                            MAX_TIME + 1,
                            1 << 62,
                            (1 << 62) + (1 << 61),
                            (1 << 62) + (1 << 61) - 1,
                            -(1 << 62),
                            1 << 40,
                            2,
                        ]);
                        b.units[i][at..at + 8].copy_from_slice(&v.to_le_bytes());
                    }
                }
                2 | 3 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    let len = b.units[i].len();
                    if len > 0 {
                        let at = self.below(len as u64) as usize;
                        b.units[i][at] ^= 1 << self.below(8);
                    }
                }
                4 if n > 0 => {
                    // Replace a job key (any 32-byte window) with a known one.
                    let i = self.below(n as u64) as usize;
                    if let Some(k) = self.known_raw_key() {
                        let u = &mut b.units[i];
                        if u.len() >= 33 {
                            let at = 1 + self.below(u.len() as u64 - 32) as usize;
                            u[at..at + 32].copy_from_slice(&k);
                        }
                    }
                }
                5 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    let u = b.units[i].clone();
                    b.units.push(u);
                }
                6 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    b.units.remove(i);
                }
                7 if !self.blobs.is_empty() => {
                    let other = self.rng.pick(&self.blobs).clone();
                    if !other.units.is_empty() {
                        let u = self.rng.pick(&other.units).clone();
                        b.units.push(u);
                    }
                }
                8 if n > 0 => {
                    let i = self.below(n as u64) as usize;
                    let len = b.units[i].len() as u64;
                    let cut = self.below(len + 1) as usize;
                    b.units[i].truncate(cut);
                }
                9 if n > 1 => {
                    let i = self.below(n as u64) as usize;
                    let j = self.below(n as u64) as usize;
                    b.units.swap(i, j);
                }
                10 => {
                    if b.header.len() == 18 {
                        match self.below(4) {
                            0 => b.header[0] = *self.rng.pick(&[0, 2, 255]),
                            1 => b.header[1] = *self.rng.pick(&[1, 2, 255]),
                            2 => {
                                let v: i64 = *self.rng.pick(&[0, 1, -1, i64::MAX, 1 << 62]);
                                b.header[2..10].copy_from_slice(&v.to_le_bytes());
                            }
                            _ => {
                                let v: i64 = *self.rng.pick(&[0, 1, -1, i64::MIN, -(1 << 62)]);
                                b.header[10..18].copy_from_slice(&v.to_le_bytes());
                            }
                        }
                    }
                }
                11 if n > 0 => {
                    // A u32 attempts field or length prefix at an odd place.
                    let i = self.below(n as u64) as usize;
                    let u = &mut b.units[i];
                    if u.len() >= 5 {
                        let at = 1 + self.below(u.len() as u64 - 4) as usize;
                        u[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
                    }
                }
                _ => {
                    // The unit type byte.
                    if n > 0 {
                        let i = self.below(n as u64) as usize;
                        if !b.units[i].is_empty() {
                            b.units[i][0] = self.below(9) as u8;
                        }
                    }
                }
            }
        }
        let count = match self.below(20) {
            0 => b.units.len() as u64 + 1,
            1 => (b.units.len() as u64).saturating_sub(1),
            2 => u64::MAX,
            _ => b.units.len() as u64,
        };
        (b, count)
    }

    fn known_raw_key(&mut self) -> Option<Vec<u8>> {
        if self.keys.is_empty() {
            return None;
        }
        use base64::Engine;
        let k = self.rng.pick(&self.keys).clone();
        base64::engine::general_purpose::STANDARD
            .decode(k)
            .ok()
            .filter(|v| v.len() == 32)
    }

    fn restore_command(&mut self) -> Vec<Vec<u8>> {
        self.counts.restores += 1;
        let dst = match self.below(4) {
            0 => self.queue(),
            _ => self.rng.pick(COPIES).to_vec(),
        };
        let payload = match (self.dump_format.clone(), self.below(10)) {
            (Some(f), 0..=3) if !self.blobs.is_empty() => {
                // A structured payload from a (mutated) blob.
                let blob = self.rng.pick(&self.blobs).clone();
                if self.pct(30) {
                    let n = blob.units.len() as u64;
                    f.payload(&blob, n)
                } else {
                    let (m, count) = self.mutate_blob(blob);
                    f.payload(&m, count)
                }
            }
            (Some(f), 4..=6) if !self.dumps.is_empty() => {
                // A real dump with its body mutated and the CRC fixed.
                let d = self.rng.pick(&self.dumps).clone();
                let body = d[..d.len() - 10].to_vec();
                let keep = f.prefix.len().min(body.len());
                let tail = self.mutate(body[keep..].to_vec());
                let mut b = body[..keep].to_vec();
                b.extend(tail);
                f.seal(b)
            }
            (_, 7..=8) if !self.dumps.is_empty() => self.rng.pick(&self.dumps).clone(),
            _ => {
                let mut d = if self.dumps.is_empty() {
                    self.random_bytes(50)
                } else {
                    self.rng.pick(&self.dumps).clone()
                };
                if !d.is_empty() {
                    let i = self.below(d.len() as u64) as usize;
                    d[i] ^= 0x5a;
                }
                d
            }
        };
        let mut a = args!["RESTORE", dst, "0", payload];
        if self.pct(70) {
            a.push(b"REPLACE".to_vec());
        }
        a
    }

    /// One top-level step: a command, or a MULTI/EXEC or EVAL wrapping.
    fn step(&mut self, out: &mut Vec<Sent>) {
        match self.below(1000) {
            0..=29 => {
                // MULTI ... EXEC
                self.counts.multi += 1;
                out.push(Sent::new(args!["MULTI"]));
                let mut inner = Vec::new();
                for _ in 0..1 + self.below(5) {
                    let a = if self.pct(80) {
                        self.orca_command()
                    } else {
                        self.garbage_command()
                    };
                    let s = Sent::new(a);
                    inner.push((s.args.clone(), s.queue.clone()));
                    out.push(s);
                }
                let mut exec = Sent::new(args![if self.pct(95) { "EXEC" } else { "DISCARD" }]);
                exec.inner = inner;
                out.push(exec);
            }
            30..=59 => {
                // EVAL wrapping one command.
                self.counts.eval += 1;
                let a = if self.pct(80) {
                    self.orca_command()
                } else {
                    self.garbage_command()
                };
                let script = if self.pct(60) {
                    "return redis.pcall(unpack(ARGV))"
                } else {
                    "return redis.call(unpack(ARGV))"
                };
                let mut e = args!["EVAL", script, "0"];
                e.extend(a.iter().cloned());
                let mut s = Sent::new(e);
                s.queue = a.get(1).cloned();
                s.inner = vec![(a, None)];
                out.push(s);
            }
            60..=159 => out.push(Sent::new(self.key_command())),
            160..=339 => out.push(Sent::new(self.garbage_command())),
            _ => out.push(Sent::new(self.orca_command())),
        }
    }

    // -- replies ------------------------------------------------------------

    fn inspect(&mut self, s: &Sent, v: &R) {
        self.counts.commands += 1;
        if is_orca(&s.args[0]) {
            self.counts.orca_commands += 1;
        }
        if let Some(q) = &s.queue {
            let q = q.clone();
            self.record(&q, &s.args);
        } else if s.args.len() >= 2 && !eq_ci(&s.args[0], "EVAL") {
            let k = s.args[1].clone();
            self.record(&k, &s.args);
        }
        let name = s.args[0].to_ascii_uppercase();
        {
            let e = self
                .counts
                .per_command
                .entry(String::from_utf8_lossy(&name).into_owned())
                .or_default();
            if matches!(v, R::Err(_)) {
                e.1 += 1;
            } else {
                e.0 += 1;
            }
        }
        match v {
            R::Err(e) => {
                self.counts.errors += 1;
                if self.counts.error_texts.is_some() {
                    // Error kinds for tuning (ORCA_FUZZ_ERRORS=1): the text up
                    // to its first quote or digit.
                    let t = String::from_utf8_lossy(e);
                    let cut = t
                        .find(|c: char| c == '\'' || c.is_ascii_digit())
                        .unwrap_or(t.len());
                    let k = format!("{} {}", String::from_utf8_lossy(&name), &t[..cut.min(70)]);
                    if let Some(m) = self.counts.error_texts.as_mut() {
                        *m.entry(k).or_insert(0) += 1;
                    }
                }
                self.check_error(&s.args, e);
                if name == b"RESTORE" {
                    return;
                }
            }
            R::Array(items) if name == b"EXEC" => {
                for (i, item) in items.iter().enumerate() {
                    if let Some((a, q)) = s.inner.get(i) {
                        let inner = Sent {
                            args: a.clone(),
                            queue: q.clone(),
                            inner: Vec::new(),
                        };
                        self.inspect_inner(&inner, item);
                    }
                }
            }
            _ => {}
        }
        if name == b"EVAL" {
            if let Some((a, _)) = s.inner.first() {
                let inner = Sent {
                    args: a.clone(),
                    queue: s.queue.clone(),
                    inner: Vec::new(),
                };
                if !matches!(v, R::Err(_)) {
                    self.inspect_inner(&inner, v);
                }
            }
            return;
        }
        if name == b"DUMP" {
            if let R::Bulk(b) = v {
                if self.dump_format.is_none() {
                    self.dump_format = DumpFormat::learn(b);
                }
                if b.first() == Some(&7) {
                    let b = b.clone();
                    push_bounded(&mut self.dumps, b, 32, &mut self.rng);
                }
            }
            return;
        }
        if name == b"RESTORE" && v.is_ok() {
            self.counts.restores_ok += 1;
        }
        if name == b"ORCA.IMPORT" && matches!(v, R::Int(_)) {
            self.counts.imports_ok += 1;
        }
        if name == b"ORCA.ACK" && matches!(v, R::Int(1)) {
            self.counts.acks_ok += 1;
        }
        if let Some(q) = s.queue.clone() {
            self.harvest(v, &q, None);
        }
    }

    fn inspect_inner(&mut self, s: &Sent, v: &R) {
        if let R::Err(e) = v {
            self.check_error(&s.args, e);
            return;
        }
        if let Some(q) = s.queue.clone() {
            if is_orca(&s.args[0]) {
                self.harvest(v, &q, None);
            }
        }
    }

    fn check_error(&mut self, args: &[Vec<u8>], raw_text: &[u8]) {
        let shown = show_args(args);
        let text = &*String::from_utf8_lossy(raw_text);
        if text.contains("internal error") {
            let hist = args.get(1).map(|k| self.history_of(k)).unwrap_or_default();
            self.fail(
                "internal-error",
                format!(
                    "internal error reply to {shown}: {text}\n  history of the key:\n    {hist}"
                ),
            );
        }
        if text.contains("invariant broken") {
            let hist = args.get(1).map(|k| self.history_of(k)).unwrap_or_default();
            self.fail(
                "check",
                format!("ORCA.CHECK failed: {text}\n  last commands on the key:\n    {hist}"),
            );
        }
        if is_orca(&args[0]) || eq_ci(&args[0], "EVAL") {
            let ok_prefix = [
                "ERR ",
                "WRONGTYPE ",
                "EXECABORT ",
                "UNBLOCKED ",
                "NOSCRIPT ",
            ]
            .iter()
            .any(|p| text.starts_with(p));
            let clean = std::str::from_utf8(raw_text).is_ok()
                && text.chars().all(|c| !c.is_control())
                && text.len() <= 1200;
            if !ok_prefix || !clean {
                self.fail(
                    "unclean-error",
                    format!(
                        "unclean error reply (not one printable UTF-8 line) to {shown}: {:?}",
                        String::from_utf8_lossy(raw_text)
                    ),
                );
            }
        }
    }

    /// Collect orca keys and lease tokens from a reply.
    fn harvest(&mut self, v: &R, queue: &[u8], outer_key: Option<&[u8]>) {
        if let Some(ps) = pairs(v) {
            let mut key: Option<Vec<u8>> = None;
            let mut lease: Option<Vec<u8>> = None;
            for (f, val) in &ps {
                match f.as_str() {
                    "key" => key = val_str(val).map(String::into_bytes),
                    "lease" => lease = val_str(val).map(String::into_bytes),
                    _ => {}
                }
            }
            let key = key.or_else(|| outer_key.map(<[u8]>::to_vec));
            if let Some(k) = &key {
                if k.len() == 44 && self.pct(50) {
                    push_bounded(&mut self.keys, k.clone(), 512, &mut self.rng);
                }
                if let Some(l) = lease {
                    push_bounded(
                        &mut self.leases,
                        (queue.to_vec(), k.clone(), l),
                        256,
                        &mut self.rng,
                    );
                }
            }
            for (f, val) in ps {
                if f == "leases" {
                    if let R::Array(items) = val {
                        for it in items {
                            self.harvest(it, queue, key.as_deref());
                        }
                    }
                }
            }
            return;
        }
        if let R::Array(items) = v {
            for it in items {
                self.harvest(it, queue, None);
            }
        }
    }
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------------------
// Blobs built by the core in-process
// ---------------------------------------------------------------------------

/// A valid serialized queue with every kind of unit: collations, immediate
/// jobs, leases, retries, dead jobs, results, cancellations. Returns the
/// blob and the orca keys it holds.
fn core_blob(rng: &mut Rng, tag: u64) -> (Blob, Vec<String>) {
    let order = if rng.chance(50) {
        Order::Lifo
    } else {
        Order::Fifo
    };
    let mut q = Queue::new(order);
    let policy = Policy {
        max_attempts: 2,
        retry_base: 1000,
        retry_cap: 60_000,
    };
    let mut now = now_ms() - 30_000;
    let mut keys: Vec<String> = Vec::new();
    let mut leases: Vec<([u8; 32], u64)> = Vec::new();
    let steps = 5 + rng.below(40);
    for _ in 0..steps {
        now += rng.below(500) as i64;
        match rng.below(12) {
            0..=5 => {
                // Pool names collide with the live stream's jobs; g-names do not.
                let name = if rng.chance(40) {
                    format!("k{}", rng.below(48))
                } else {
                    format!("g{tag}-{}", rng.below(40))
                };
                let coll = match rng.below(3) {
                    0 => String::new(),
                    1 => format!(
                        ",\"collation\":{{\"type\":\"user\",\"id\":\"{}\"}}",
                        rng.below(4)
                    ),
                    _ => format!(
                        ",\"collation\":{{\"type\":\"team\",\"id\":{}}}",
                        rng.below(4)
                    ),
                };
                let cfg = format!(
                    "{{\"key\":\"{name}\",\"response_url\":\"http://cb/{name}\"{coll},\"priority\":{}}}",
                    rng.below(3000)
                );
                let Ok(c) = parse_config(cfg.as_bytes()) else {
                    continue;
                };
                keys.push(encode_key(&c.job_key));
                if rng.chance(80) {
                    let _ = q.enqueue(&c, cfg.as_bytes(), now);
                } else {
                    let _ = q.put_immediate(&c, cfg.as_bytes(), now);
                }
            }
            6 | 7 => {
                let lease = if rng.chance(20) {
                    0
                } else {
                    1 + rng.below(60_000) as i64
                };
                if let Ok((ds, _)) =
                    q.pop_deliveries(now, lease, 1 + rng.below(2) as usize, &policy)
                {
                    for d in ds {
                        if let Some((t, _)) = d.lease {
                            leases.push((d.job.key, t));
                        }
                    }
                }
            }
            8 if !leases.is_empty() => {
                let (k, t) = leases.remove(rng.below(leases.len() as u64) as usize);
                let delay = if rng.chance(30) { Some(0) } else { None };
                let _ = q.nack(&k, t, delay, now, &policy);
            }
            9 if !leases.is_empty() => {
                let (k, t) = leases.remove(rng.below(leases.len() as u64) as usize);
                let _ = q.ack(&k, t, Some(b"{\"score\":1}"), now, 3_600_000);
            }
            10 if !leases.is_empty() => {
                let (k, _) = leases[rng.below(leases.len() as u64) as usize];
                let _ = q.cancel(&k);
            }
            _ => {
                if let Some(k) = q.pop_order().first().copied() {
                    let how = if rng.chance(50) {
                        Move::Release
                    } else {
                        Move::Delay { buffer: 1000 }
                    };
                    let _ = q.move_job(&k, how, now);
                }
            }
        }
    }
    assert!(q.check().is_ok(), "core-built queue fails check()");
    let blob = Blob::parse(&q.encode()).expect("core blob parses");
    (blob, keys)
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

fn alive(pid: Option<u32>) -> bool {
    let Some(pid) = pid else { return false };
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Pipelined send; the replies in order.
fn send_batch(con: &mut Wire, batch: &[Sent]) -> std::io::Result<Vec<R>> {
    let cmds: Vec<&[Vec<u8>]> = batch.iter().map(|s| s.args.as_slice()).collect();
    con.pipeline(&cmds)
}

/// Replace the timeout of a top-level blocking pop by a short one, so the
/// pipeline never waits on itself.
fn shorten_blocks(s: &mut Sent) {
    if !eq_ci(&s.args[0], "ORCA.POP") {
        return;
    }
    for i in 0..s.args.len().saturating_sub(1) {
        if eq_ci(&s.args[i], "BLOCK") {
            let v = std::str::from_utf8(&s.args[i + 1])
                .ok()
                .and_then(|t| t.parse::<i64>().ok());
            if let Some(v) = v {
                if (0..=MAX_TIME).contains(&v) && !(1..=20).contains(&v) {
                    s.args[i + 1] = b"5".to_vec();
                }
            }
        }
    }
}

fn keys_of_type(con: &mut Wire, db: i64) -> Vec<Vec<u8>> {
    con.call(&args!["SELECT", db]);
    let keys: Vec<Vec<u8>> = match con.call(&args!["KEYS", "*"]) {
        R::Array(items) => items
            .into_iter()
            .filter_map(|v| match v {
                R::Bulk(b) => Some(b),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    keys.into_iter()
        .filter(|k| con.call(&args!["TYPE", k.clone()]) == R::Status(b"orcaqueue".to_vec()))
        .collect()
}

/// ORCA.CHECK on every queue of db 0 and 1; broken ones are reported with
/// their history and deleted, so the run goes on.
fn check_sweep(f: &mut Fuzz, con: &mut Wire) -> usize {
    let mut n = 0;
    for db in [0, 1] {
        for k in keys_of_type(con, db) {
            n += 1;
            f.counts.checks += 1;
            let v = con.call(&args!["ORCA.CHECK", k.clone()]);
            if !v.is_ok() {
                let hist = f.history_of(&k);
                f.fail(
                    "check",
                    format!(
                        "ORCA.CHECK {} in db {db}: {v:?}\n  last commands on the key:\n    {hist}",
                        show_args(std::slice::from_ref(&k))
                    ),
                );
                con.call(&args!["DEL", k]);
            }
        }
    }
    con.call(&args!["SELECT", 0]);
    n
}

fn wait_rewrite(con: &mut Wire, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let i = con.info("persistence");
        let idle = i.get("aof_rewrite_in_progress").map(String::as_str) == Some("0")
            && i.get("aof_rewrite_scheduled").map(String::as_str) == Some("0");
        if idle {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn setup_other_types(con: &mut Wire) {
    con.call(&args!["SET", "str", "v"]);
    con.call(&args!["DEL", "list", "hash", "zset"]);
    con.call(&args!["RPUSH", "list", "a"]);
    con.call(&args!["HSET", "hash", "f", "v"]);
    con.call(&args!["ZADD", "zset", "1", "m"]);
}

/// The blocking connection: ORCA.POP ... BLOCK on the queue keys until told
/// to stop. Returns its failures.
fn blocker(
    mut con: Wire,
    seed: u64,
    stop: Arc<AtomicBool>,
    pops: Arc<AtomicU64>,
    id_tx: mpsc::Sender<i64>,
) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0xB10C);
    let mut failures = Vec::new();
    if let R::Int(id) = con.call(&args!["CLIENT", "ID"]) {
        let _ = id_tx.send(id);
    }
    while !stop.load(Ordering::Relaxed) {
        let q = if rng.chance(85) {
            rng.pick(QUEUES).to_vec()
        } else {
            rng.pick(OTHERS).to_vec()
        };
        let block = match rng.below(10) {
            0 => "0".to_string(),
            _ => (1 + rng.below(150)).to_string(),
        };
        let lease = (1 + rng.below(400)).to_string();
        let mut a = args!["ORCA.POP", q, "BLOCK", block, "LEASE", lease];
        if rng.chance(30) {
            a.extend(args!["COUNT", (1 + rng.below(5)).to_string()]);
        }
        match con.pipeline(&[&a]) {
            Ok(v) => {
                pops.fetch_add(1, Ordering::Relaxed);
                if let Some(R::Err(e)) = v.first() {
                    let t = String::from_utf8_lossy(e);
                    let ok = std::str::from_utf8(e).is_ok()
                        && ["ERR ", "WRONGTYPE ", "UNBLOCKED "]
                            .iter()
                            .any(|p| t.starts_with(p))
                        && !t.contains("internal error");
                    if !ok {
                        failures.push(format!("blocking pop {}: {t}", show_args(&a)));
                    }
                }
            }
            Err(e) => {
                failures.push(format!("blocking pop {} got no reply: {e}", show_args(&a)));
                break;
            }
        }
    }
    failures
}

/// Keep the whole server log (the harness removes its directory).
fn save_log(server: &Server, seed: u64) -> String {
    let p = std::env::temp_dir().join(format!("orca-fuzz-{seed}-server.log"));
    let _ = std::fs::copy(server.log_path(), &p);
    p.display().to_string()
}

fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
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
         {} harvested leases used, {} ACKs ok, {} blocking pops, {} AOF rewrites ({} blobs), \
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

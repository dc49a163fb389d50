//! Durability and distribution: AOF (with and without the RDB preamble,
//! rewrites racing writes, `kill -9`), `RESTORE` of hostile `DUMP` payloads
//! (re-signed so they reach the module's loader), key operations on queues
//! (DEL/UNLINK of big queues, COPY, RENAME, MOVE, EXPIRE, SWAPDB, FLUSHALL,
//! MEMORY USAGE, digests across servers) and the timer following keys,
//! replication with failover, command metadata and ACLs, and `maxmemory`.
//!
//! Every server is a real `redis-server` with the built module (see
//! `common/mod.rs`); state is compared with `DEBUG DIGEST-VALUE` of every
//! queue plus `ORCA.CHECK`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use redis::Value;

/// A lease long enough never to expire during a test (ms).
const LONG: i64 = 600_000;
const MAX_TIME: i64 = (1 << 53) - 1;

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

fn enqueue(c: &mut redis::Connection, q: &str, key: &str, coll: Option<&str>, prio: i64) -> Fields {
    fields(ok(c, &args!["ORCA.ENQUEUE", q, config(key, coll, prio)]))
}

fn immediate(c: &mut redis::Connection, q: &str, key: &str, coll: Option<&str>) -> Fields {
    fields(ok(c, &args!["ORCA.IMMEDIATE", q, config(key, coll, 0)]))
}

/// A config with the same orca key as `config(key, ..)` but another payload.
fn revised(key: &str, rev: u64) -> String {
    format!(r#"{{"key":"{key}","response_url":"http://cb/{key}","rev":{rev}}}"#)
}

fn pop(c: &mut redis::Connection, q: &str, lease: i64) -> Option<Fields> {
    match ok(c, &args!["ORCA.POP", q, "LEASE", lease]) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

/// A delivery a worker holds.
#[derive(Clone, Debug)]
struct Held {
    q: String,
    key: String,
    lease: String,
}

fn held(q: &str, f: &Fields) -> Held {
    Held {
        q: q.to_string(),
        key: text(f, "key"),
        lease: text(f, "lease"),
    }
}

fn ack(c: &mut redis::Connection, h: &Held) -> Value {
    raw(c, &args!["ORCA.ACK", &h.q, &h.key, &h.lease])
}

/// `ORCA.STATUS` state of a job, or None.
fn state(c: &mut redis::Connection, q: &str, key: &str) -> Option<String> {
    match ok(c, &args!["ORCA.STATUS", q, key]) {
        Value::Nil => None,
        v => Some(text(&fields(v), "state")),
    }
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        if Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every key of type `orcaqueue` in the selected db, sorted.
fn orca_queues(c: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    let mut out: Vec<String> = keys
        .into_iter()
        .filter(|k| as_string(&ok(c, &args!["TYPE", k])) == "orcaqueue")
        .collect();
    out.sort();
    out
}

fn digests(c: &mut redis::Connection) -> BTreeMap<String, String> {
    orca_queues(c)
        .into_iter()
        .map(|q| {
            let d = digest(c, &q);
            (q, d)
        })
        .collect()
}

fn check_all(c: &mut redis::Connection) {
    for q in orca_queues(c) {
        assert_check(c, &q);
    }
}

fn exists(c: &mut redis::Connection, key: &str) -> bool {
    as_int(&ok(c, &args!["EXISTS", key])) == 1
}

fn info_int(c: &mut redis::Connection, section: &str, field: &str) -> i64 {
    info(c, section)
        .get(field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .parse()
        .unwrap_or_else(|_| panic!("INFO {field} not an integer"))
}

fn assert_same_digests(what: &str, a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) {
    let ka: Vec<&String> = a.keys().collect();
    let kb: Vec<&String> = b.keys().collect();
    assert_eq!(ka, kb, "{what}: queue keys differ");
    for (k, d) in a {
        assert_eq!(Some(d), b.get(k), "{what}: digest of {k} differs");
    }
    assert!(!a.is_empty(), "{what}: no queues compared");
}

// ---------------------------------------------------------------------------
// 1. AOF
// ---------------------------------------------------------------------------

/// One round of every kind of write on `aof:lifo` and `aof:fifo` (job names
/// carry `tag`, so rounds add up). Returns the long leases still held and the
/// leases that were cancelled (by deleting their job).
fn aof_workload(c: &mut redis::Connection, tag: &str) -> (Vec<Held>, Vec<Held>) {
    let (lifo, fifo) = ("aof:lifo", "aof:fifo");
    if !exists(c, fifo) {
        ok(c, &args!["ORCA.SETTINGS", fifo, "ORDER", "FIFO"]);
    }
    let mut holding = Vec::new();
    let mut cancelled = Vec::new();
    for q in [lifo, fifo] {
        let name = |i: usize| format!("{tag}-{q}-{i}");
        for i in 0..12 {
            let coll = match i % 4 {
                0 => Some("user.1"),
                1 => Some("user.2"),
                2 => Some("team.x"),
                _ => None,
            };
            let f = enqueue(c, q, &name(i), coll, i as i64 * 100);
            assert_eq!(int(&f, "created"), 1);
        }
        immediate(c, q, &name(12), Some("user.1"));
        // Upgrade a waiting collation job.
        let f = immediate(c, q, &name(4), None);
        assert_eq!((int(&f, "created"), int(&f, "immediate")), (0, 1));
        ok(c, &args!["ORCA.MOVE", q, key_of(&name(5)), "RELEASE"]);
        ok(c, &args!["ORCA.MOVE", q, key_of(&name(6)), "DELAY"]);
        ok(
            c,
            &args!["ORCA.MOVE", q, key_of(&name(9)), "DELAY", "BUFFER", 5],
        );
        assert_eq!(
            as_int(&ok(c, &args!["ORCA.DELETE", q, key_of(&name(1))])),
            1
        );
        let f = fields(ok(c, &args!["ORCA.ENQUEUE", q, revised(&name(2), 7)]));
        assert_eq!(int(&f, "created"), 0);
        ok(
            c,
            &args![
                "ORCA.REENQUEUE",
                q,
                config(&name(13), Some("user.3"), 0),
                12345
            ],
        );

        // Acked with a result.
        let a = held(q, &pop(c, q, LONG).expect("pop"));
        assert_eq!(
            as_int(&ok(
                c,
                &args![
                    "ORCA.ACK",
                    q,
                    &a.key,
                    &a.lease,
                    "RESULT",
                    format!("result of {}", a.key)
                ]
            )),
            1
        );
        // Failed, retried in 10 minutes.
        let b = held(q, &pop(c, q, LONG).expect("pop"));
        let f = fields(ok(
            c,
            &args!["ORCA.NACK", q, &b.key, &b.lease, "DELAY", LONG],
        ));
        assert_eq!(text(&f, "outcome"), "retry");
        // Still running.
        holding.push(held(q, &pop(c, q, LONG).expect("pop")));
        // Cancelled while running.
        let e = held(q, &pop(c, q, LONG).expect("pop"));
        assert_eq!(as_int(&ok(c, &args!["ORCA.DELETE", q, &e.key])), 1);
        cancelled.push(e);
        // Extended.
        let f = held(q, &pop(c, q, LONG).expect("pop"));
        ok(c, &args!["ORCA.EXTEND", q, &f.key, &f.lease, 2 * LONG]);
        holding.push(f);
    }
    // Dead after one attempt.
    ok(c, &args!["CONFIG", "SET", "orca.max-attempts", "1"]);
    let g = held(lifo, &pop(c, lifo, LONG).expect("pop"));
    let f = fields(ok(c, &args!["ORCA.NACK", lifo, &g.key, &g.lease]));
    assert_eq!(text(&f, "outcome"), "dead");
    ok(c, &args!["CONFIG", "SET", "orca.max-attempts", "5"]);
    (holding, cancelled)
}

/// A queue with more units than one `ORCA.IMPORT` carries (512), so an AOF
/// rewrite without preamble splits it into several commands.
fn big_aof_queue(c: &mut redis::Connection, q: &str) {
    let mut p = redis::pipe();
    for i in 0..700 {
        p.cmd("ORCA.ENQUEUE")
            .arg(q)
            .arg(config(&format!("single-{i}"), None, i))
            .ignore();
    }
    for i in 0..600 {
        let coll = format!("user.{}", i % 300);
        p.cmd("ORCA.ENQUEUE")
            .arg(q)
            .arg(config(&format!("coll-{i}"), Some(&coll), i))
            .ignore();
    }
    p.query::<()>(c).expect("pipeline");
    assert_eq!(qlen(c, q), 1300);
}

/// Pop a job with a short lease and wait until the server's timer puts it
/// back (so the AOF holds a timer-driven `ORCA.TICK`).
fn expire_by_timer(c: &mut redis::Connection, q: &str) {
    let h = held(q, &pop(c, q, 50).expect("pop"));
    wait_for("lease expiry by the timer", Duration::from_secs(5), || {
        state(c, q, &h.key).as_deref() == Some("queued")
    });
}

fn aof_info(c: &mut redis::Connection) -> (i64, i64) {
    (
        info_int(c, "persistence", "aof_rewrite_in_progress"),
        info_int(c, "persistence", "aof_rewrite_scheduled"),
    )
}

fn wait_rewrite_done(c: &mut redis::Connection) {
    wait_for("AOF rewrite to finish", Duration::from_secs(30), || {
        aof_info(c) == (0, 0)
    });
    let inf = info(c, "persistence");
    assert_eq!(
        inf.get("aof_last_bgrewrite_status").map(String::as_str),
        Some("ok"),
        "{inf:?}"
    );
}

/// Start a rewrite that takes a while (`rdb-key-save-delay` slows the child
/// down per key) so writes land while it runs.
fn start_slow_rewrite(c: &mut redis::Connection, per_key_us: i64) {
    ok(c, &args!["CONFIG", "SET", "rdb-key-save-delay", per_key_us]);
    ok(c, &args!["BGREWRITEAOF"]);
    wait_for("AOF rewrite to start", Duration::from_secs(10), || {
        aof_info(c).0 == 1
    });
    ok(c, &args!["CONFIG", "SET", "rdb-key-save-delay", 0]);
}

/// The base file of the multi-part AOF, with its contents.
fn aof_base(s: &Server) -> (String, Vec<u8>) {
    let dir = s.dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(dir.join("appendonly.aof.manifest")).expect("manifest");
    let base = manifest
        .lines()
        .find(|l| l.contains("type b"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no base in manifest:\n{manifest}"))
        .to_string();
    let bytes = std::fs::read(dir.join(&base)).expect("read base");
    (base, bytes)
}

fn count_occurrences(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

/// Pids of the processes the server forked (a rewrite child), so a test
/// that kills the server can end them too.
fn forked_children(s: &Server) -> Vec<u32> {
    let Some(pid) = s.pid() else {
        return Vec::new();
    };
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn kill_pid(pid: u32) {
    let _ = std::process::Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status();
}

/// SIGKILL the server (and a rewrite child it may have forked).
fn kill9(s: &mut Server) {
    let children = forked_children(s);
    s.kill();
    for pid in children {
        kill_pid(pid);
    }
}

fn aof_roundtrip(preamble: &str) {
    let mut s = Server::start(&[
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        preamble,
        "--appendfsync",
        "always",
    ]);
    let mut c = s.conn();
    let (mut holding, mut cancelled) = aof_workload(&mut c, "a");
    big_aof_queue(&mut c, "aof:big");
    expire_by_timer(&mut c, "aof:fifo");

    // Rewrite with writes racing it (they go to the new incremental file).
    start_slow_rewrite(&mut c, 500_000);
    let (h, x) = aof_workload(&mut c, "b");
    holding.extend(h);
    cancelled.extend(x);
    assert_eq!(
        aof_info(&mut c).0,
        1,
        "the writes of round b should have raced the rewrite"
    );
    wait_rewrite_done(&mut c);
    let (h, x) = aof_workload(&mut c, "c");
    holding.extend(h);
    cancelled.extend(x);

    // The rewrite took the intended path.
    let (base, bytes) = aof_base(&s);
    if preamble == "yes" {
        assert!(
            base.ends_with(".base.rdb") && bytes.starts_with(b"REDIS"),
            "{base}"
        );
    } else {
        assert!(base.ends_with(".base.aof"), "{base}");
        let imports = count_occurrences(&bytes, b"ORCA.IMPORT");
        assert!(
            imports > 3,
            "aof:big (1300+ units) must be split over several ORCA.IMPORT: {imports}"
        );
        assert!(!bytes.starts_with(b"REDIS"));
    }

    let before = digests(&mut c);
    assert_eq!(before.len(), 3, "{before:?}");
    check_all(&mut c);
    drop(c);

    // Graceful restart, loading from the AOF only.
    s.shutdown_save();
    let _ = std::fs::remove_file(s.dir.join("dump.rdb"));
    s.start_again();
    assert!(
        s.log().contains("DB loaded from append only file"),
        "not loaded from the AOF"
    );
    let mut c = s.conn();
    assert_same_digests("after AOF restart", &before, &digests(&mut c));
    check_all(&mut c);
    for h in &cancelled {
        let e = error_text(&ack(&mut c, h)).expect("ack of a cancelled lease must fail");
        assert!(e.contains("cancelled"), "{e}");
    }

    // More acknowledged writes, then kill -9 (appendfsync always).
    let (h, _) = aof_workload(&mut c, "d");
    holding.extend(h);
    let half = holding.len() / 2;
    for h in holding.drain(..half) {
        assert_eq!(as_int(&ack(&mut c, &h)), 1, "lease {h:?} lost");
    }
    expire_by_timer(&mut c, "aof:lifo");
    let before = digests(&mut c);
    drop(c);
    kill9(&mut s);
    s.start_again();
    let mut c = s.conn();
    assert_same_digests("after kill -9", &before, &digests(&mut c));
    check_all(&mut c);
    // Every lease taken before either restart still completes, and new
    // deliveries never reuse a token.
    let tokens: BTreeSet<String> = holding.iter().map(|h| h.lease.clone()).collect();
    for h in &holding {
        assert_eq!(as_int(&ack(&mut c, h)), 1, "lease {h:?} lost");
    }
    for _ in 0..5 {
        let f = pop(&mut c, "aof:big", LONG).expect("pop");
        assert!(!tokens.contains(&text(&f, "lease")), "lease token reused");
    }
    check_all(&mut c);
}

#[test]
fn aof_without_preamble_rewrite_restart_and_kill9() {
    aof_roundtrip("no");
}

#[test]
fn aof_with_preamble_rewrite_restart_and_kill9() {
    aof_roundtrip("yes");
}

/// `kill -9` while a rewrite is still running: the server restarts from the
/// old base plus the increments, and nothing acknowledged is lost.
#[test]
fn aof_kill9_during_rewrite_loses_nothing() {
    let mut s = Server::start(&[
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        "no",
        "--appendfsync",
        "always",
    ]);
    let mut c = s.conn();
    let (mut holding, _) = aof_workload(&mut c, "a");
    big_aof_queue(&mut c, "aof:big");
    start_slow_rewrite(&mut c, 500_000);
    let (h, _) = aof_workload(&mut c, "b");
    holding.extend(h);
    assert_eq!(aof_info(&mut c).0, 1, "the rewrite should still run");
    let before = digests(&mut c);
    check_all(&mut c);
    drop(c);
    kill9(&mut s);
    s.start_again();
    let mut c = s.conn();
    assert_same_digests("after kill -9 during a rewrite", &before, &digests(&mut c));
    check_all(&mut c);
    for h in &holding {
        assert_eq!(as_int(&ack(&mut c, h)), 1, "lease {h:?} lost");
    }
}

// ---------------------------------------------------------------------------
// 2. RESTORE of hostile payloads
// ---------------------------------------------------------------------------

/// CRC-64/Jones as Redis signs DUMP payloads: polynomial 0xad93d23594c935a9,
/// reflected, init 0, no final xor.
fn crc64(data: &[u8]) -> u64 {
    const POLY: u64 = 0xad93_d235_94c9_35a9_u64.reverse_bits();
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut crc = i as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY
                } else {
                    crc >> 1
                };
            }
            *e = crc;
        }
        t
    });
    let mut crc = 0u64;
    for &b in data {
        crc = table[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// RDB length encoding.
fn put_len(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.push(0x40 | (v >> 8) as u8);
        out.push(v as u8);
    } else if v <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(v as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

struct RdbReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl RdbReader<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.buf[self.pos];
        self.pos += 1;
        b
    }
    fn take(&mut self, n: usize) -> Vec<u8> {
        let v = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        v
    }
    /// (value, is a special string encoding)
    fn len(&mut self) -> (u64, bool) {
        let b = self.byte();
        match b >> 6 {
            0 => ((b & 0x3f) as u64, false),
            1 => ((((b & 0x3f) as u64) << 8) | self.byte() as u64, false),
            2 if b == 0x80 => (
                u32::from_be_bytes(self.take(4).try_into().unwrap()) as u64,
                false,
            ),
            2 if b == 0x81 => (u64::from_be_bytes(self.take(8).try_into().unwrap()), false),
            3 => ((b & 0x3f) as u64, true),
            _ => panic!("bad RDB length byte {b:#x}"),
        }
    }
    fn string(&mut self) -> Vec<u8> {
        let (v, enc) = self.len();
        if !enc {
            return self.take(v as usize);
        }
        match v {
            0 => (self.byte() as i8).to_string().into_bytes(),
            1 => i16::from_le_bytes(self.take(2).try_into().unwrap())
                .to_string()
                .into_bytes(),
            2 => i32::from_le_bytes(self.take(4).try_into().unwrap())
                .to_string()
                .into_bytes(),
            3 => {
                let clen = self.len().0 as usize;
                let ulen = self.len().0 as usize;
                let data = self.take(clen);
                let out = lzf_decompress(&data);
                assert_eq!(out.len(), ulen, "LZF length");
                out
            }
            _ => panic!("unknown string encoding {v}"),
        }
    }
}

fn lzf_decompress(input: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            out.extend_from_slice(&input[i..i + ctrl + 1]);
            i += ctrl + 1;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += input[i] as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + input[i] as usize + 1;
            i += 1;
            let start = out.len() - back;
            for k in 0..len + 2 {
                out.push(out[start + k]);
            }
        }
    }
    out
}

/// One item of a module value in RDB (opcode + value).
#[derive(Clone, Debug, PartialEq)]
enum Item {
    Uint(u64),
    Str(Vec<u8>),
}

const RDB_TYPE_MODULE_2: u8 = 7;

/// A DUMP payload of a module value, taken apart.
#[derive(Clone, Debug)]
struct ModuleDump {
    module_id: u64,
    items: Vec<Item>,
    rdb_version: u16,
}

impl ModuleDump {
    fn parse(payload: &[u8]) -> ModuleDump {
        let n = payload.len();
        assert!(n > 10);
        let crc = u64::from_le_bytes(payload[n - 8..].try_into().unwrap());
        assert_eq!(
            crc64(&payload[..n - 8]),
            crc,
            "our CRC-64 must match Redis's"
        );
        let rdb_version = u16::from_le_bytes(payload[n - 10..n - 8].try_into().unwrap());
        let body = &payload[..n - 10];
        let mut r = RdbReader { buf: body, pos: 0 };
        assert_eq!(r.byte(), RDB_TYPE_MODULE_2);
        let (module_id, _) = r.len();
        let mut items = Vec::new();
        loop {
            match r.len().0 {
                0 => break,
                2 => items.push(Item::Uint(r.len().0)),
                5 => items.push(Item::Str(r.string())),
                op => panic!("unexpected module opcode {op}"),
            }
        }
        assert_eq!(r.pos, body.len(), "bytes after the module EOF");
        ModuleDump {
            module_id,
            items,
            rdb_version,
        }
    }

    /// The body (type, module id, items, EOF), plain strings.
    fn body_with(module_id: u64, items: &[Item]) -> Vec<u8> {
        let mut out = vec![RDB_TYPE_MODULE_2];
        put_len(&mut out, module_id);
        for it in items {
            match it {
                Item::Uint(v) => {
                    out.push(2);
                    put_len(&mut out, *v);
                }
                Item::Str(s) => {
                    out.push(5);
                    put_len(&mut out, s.len() as u64);
                    out.extend_from_slice(s);
                }
            }
        }
        out.push(0);
        out
    }

    fn body(&self) -> Vec<u8> {
        Self::body_with(self.module_id, &self.items)
    }

    /// Body + RDB version + CRC-64: a payload RESTORE accepts as genuine.
    fn sign(&self, body: &[u8]) -> Vec<u8> {
        let mut out = body.to_vec();
        out.extend_from_slice(&self.rdb_version.to_le_bytes());
        let crc = crc64(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    fn payload_with(&self, items: &[Item]) -> Vec<u8> {
        self.sign(&Self::body_with(self.module_id, items))
    }

    fn header(&self) -> Vec<u8> {
        match &self.items[0] {
            Item::Str(h) => h.clone(),
            other => panic!("header is {other:?}"),
        }
    }

    fn units(&self) -> Vec<Vec<u8>> {
        assert_eq!(self.items[1], Item::Uint(self.items.len() as u64 - 2));
        self.items[2..]
            .iter()
            .map(|i| match i {
                Item::Str(u) => u.clone(),
                other => panic!("unit is {other:?}"),
            })
            .collect()
    }

    /// Items for a header and units, with a correct unit count.
    fn items_for(header: &[u8], units: &[Vec<u8>]) -> Vec<Item> {
        let mut items = vec![Item::Str(header.to_vec()), Item::Uint(units.len() as u64)];
        items.extend(units.iter().map(|u| Item::Str(u.clone())));
        items
    }
}

/// What a field of a serialized unit is (see `src/core/codec.rs`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum K {
    Type,
    Key,
    Time,
    Attempts,
    Len,
    Count,
    Score,
    Tie,
    Nonce,
    Flag,
    Token,
    Seq,
    Cause,
    Name,
    Data,
    /// A stack key (encoding version 2).
    Skey,
}

#[derive(Clone, Copy, Debug)]
struct Fld {
    off: usize,
    size: usize,
    k: K,
    value: u64,
}

struct UnitParser<'a> {
    buf: &'a [u8],
    pos: usize,
    out: Vec<Fld>,
}

impl UnitParser<'_> {
    fn f(&mut self, size: usize, k: K) -> u64 {
        let bytes = &self.buf[self.pos..self.pos + size];
        let mut v = [0u8; 8];
        if size <= 8 {
            v[..size].copy_from_slice(bytes);
        }
        let value = u64::from_le_bytes(v);
        self.out.push(Fld {
            off: self.pos,
            size,
            k,
            value,
        });
        self.pos += size;
        value
    }
    fn bytes(&mut self, k: K) {
        let n = self.f(8, K::Len) as usize;
        self.f(n, k);
    }
    fn job(&mut self) {
        self.f(32, K::Key);
        self.f(8, K::Time);
        self.f(4, K::Attempts);
        self.bytes(K::Data);
    }
    fn res(&mut self) {
        self.f(8, K::Score);
        self.f(8, K::Tie);
        self.f(8, K::Nonce);
    }
    fn parked(&mut self) {
        self.f(8, K::Time);
        self.f(4, K::Attempts);
        self.f(1, K::Flag);
        if self.f(1, K::Flag) == 1 {
            self.bytes(K::Name);
        }
        self.bytes(K::Data);
    }
}

/// The fields of one unit, in order.
fn unit_fields(u: &[u8]) -> Vec<Fld> {
    let mut p = UnitParser {
        buf: u,
        pos: 0,
        out: Vec::new(),
    };
    match p.f(1, K::Type) {
        1 => {
            p.job();
            if p.f(1, K::Flag) == 1 {
                p.bytes(K::Name);
            }
            p.res();
            p.f(1, K::Flag);
        }
        2 => {
            p.bytes(K::Name);
            let m = p.f(8, K::Count);
            for _ in 0..m {
                p.job();
                p.f(8, K::Skey);
            }
            for _ in 0..m {
                p.res();
            }
        }
        3 => {
            p.f(8, K::Token);
            p.f(32, K::Key);
            p.f(8, K::Time);
            p.f(1, K::Flag); // superseded
            p.parked();
        }
        4 => {
            p.f(32, K::Key);
            p.f(8, K::Time);
            p.parked();
        }
        5 => {
            p.f(32, K::Key);
            p.f(8, K::Time);
            p.f(8, K::Seq);
            p.f(1, K::Cause);
            p.parked();
        }
        6 => {
            p.f(32, K::Key);
            p.f(8, K::Time);
            p.bytes(K::Data);
        }
        7 => {
            p.f(8, K::Token);
            p.f(8, K::Time);
        }
        t => panic!("unknown unit type {t} in a genuine dump"),
    }
    assert_eq!(p.pos, u.len(), "unit parser out of step with the codec");
    p.out
}

fn set_field(u: &[u8], f: &Fld, v: u64) -> Vec<u8> {
    let mut out = u.to_vec();
    out[f.off..f.off + f.size].copy_from_slice(&v.to_le_bytes()[..f.size]);
    out
}

/// Build a queue with every kind of unit: collations (LIFO, several jobs
/// each), a released job (front reservation), immediate jobs, a job without
/// collation, leases, a delayed retry, a dead job, a result and a
/// cancelled lease.
fn rich_queue(c: &mut redis::Connection, q: &str) {
    for i in 0..9 {
        let coll = ["user.1", "user.2", "team.t"][i % 3];
        enqueue(c, q, &format!("r{i}"), Some(coll), i as i64 * 10);
    }
    enqueue(c, q, "plain", None, 5);
    immediate(c, q, "imm", Some("user.9"));
    for i in 0..6 {
        enqueue(c, q, &format!("w{i}"), Some("user.5"), 1000);
    }
    let a = held(q, &pop(c, q, LONG).unwrap());
    ok(c, &args!["ORCA.ACK", q, &a.key, &a.lease, "RESULT", "done"]);
    let b = held(q, &pop(c, q, LONG).unwrap());
    ok(c, &args!["ORCA.NACK", q, &b.key, &b.lease, "DELAY", LONG]);
    ok(c, &args!["CONFIG", "SET", "orca.max-attempts", "1"]);
    let d = held(q, &pop(c, q, LONG).unwrap());
    ok(c, &args!["ORCA.NACK", q, &d.key, &d.lease]);
    ok(c, &args!["CONFIG", "SET", "orca.max-attempts", "5"]);
    let e = held(q, &pop(c, q, LONG).unwrap());
    ok(c, &args!["ORCA.DELETE", q, &e.key]);
    pop(c, q, LONG).unwrap();
    pop(c, q, LONG).unwrap();
    enqueue(c, q, "plain2", None, 5000);
    immediate(c, q, "imm2", Some("team.t"));
    // Released last, so its reservation has a front (negative) tie.
    ok(c, &args!["ORCA.MOVE", q, key_of("w0"), "RELEASE"]);
    assert_check(c, q);
}

/// RESTORE must refuse `payload` with an error, survive, leave no key and
/// leave `keep` (an existing queue restored over with REPLACE) untouched.
fn refused(c: &mut redis::Connection, what: &str, payload: &[u8], keep: (&str, &str)) {
    let v = raw(c, &args!["RESTORE", "forged", 0, payload.to_vec()]);
    let e = error_text(&v).unwrap_or_else(|| panic!("RESTORE of {what} accepted: {v:?}"));
    assert!(
        e.contains("Bad data format"),
        "RESTORE of {what}: {e} (a checksum error means our re-signing is wrong)"
    );
    assert_eq!(as_string(&ok(c, &args!["PING"])), "PONG");
    assert!(!exists(c, "forged"), "{what}: a key was left behind");
    let v = raw(c, &args!["RESTORE", keep.0, 0, payload.to_vec(), "REPLACE"]);
    assert!(
        error_text(&v).is_some(),
        "RESTORE REPLACE of {what} accepted"
    );
    assert_eq!(digest(c, keep.0), keep.1, "{what}: REPLACE damaged the key");
}

/// RESTORE of a mutated payload may be accepted (a different but valid
/// queue) or refused; never anything in between.
fn valid_or_refused(c: &mut redis::Connection, what: &str, payload: &[u8]) -> bool {
    let v = raw(c, &args!["RESTORE", "fuzzed", 0, payload.to_vec()]);
    if let Some(e) = error_text(&v) {
        assert!(e.contains("Bad data format"), "{what}: {e}");
        assert!(!exists(c, "fuzzed"), "{what}: a key was left behind");
        false
    } else {
        assert_check(c, "fuzzed");
        ok(c, &args!["ORCA.LIST", "fuzzed", "LIMIT", 1000]);
        ok(c, &args!["ORCA.STATS", "fuzzed"]);
        ok(c, &args!["DEL", "fuzzed"]);
        true
    }
}

#[test]
fn restore_refuses_forged_payloads() {
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    let s = Server::start(&[]);
    let mut c = s.conn();
    rich_queue(&mut c, "q");
    let dq = digest(&mut c, "q");
    let payload = as_bytes(&ok(&mut c, &args!["DUMP", "q"]));
    let dump = ModuleDump::parse(&payload);
    let header = dump.header();
    let units = dump.units();
    let fields: Vec<Vec<Fld>> = units.iter().map(|u| unit_fields(u)).collect();
    let types: BTreeSet<u64> = fields.iter().map(|f| f[0].value).collect();
    assert_eq!(
        types,
        (1..=7).collect(),
        "the queue must have every unit type"
    );

    // Sanity: our re-encoding (plain strings) and CRC are accepted and give
    // the same queue.
    let same = dump.payload_with(&dump.items);
    ok(&mut c, &args!["RESTORE", "copy", 0, same]);
    assert_eq!(digest(&mut c, "copy"), dq);
    assert_check(&mut c, "copy");
    ok(&mut c, &args!["DEL", "copy"]);
    let queues_before = info_int(&mut c, "orca", "orca_queues");
    let keep = ("q", dq.as_str());

    let with_units = |us: &[Vec<u8>]| dump.payload_with(&ModuleDump::items_for(&header, us));
    let with_unit = |i: usize, u: Vec<u8>| {
        let mut us = units.clone();
        us[i] = u;
        with_units(&us)
    };
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();

    // --- Newer (or impossible) encoding versions.
    let bump = |id: u64, v: u64| (id & !1023) | v;
    for v in [0u64, 3, 1023] {
        cases.push((
            format!("module encver {v}"),
            dump.sign(&ModuleDump::body_with(bump(dump.module_id, v), &dump.items)),
        ));
    }
    for v in [0u8, 3, 0xff] {
        let mut h = header.clone();
        h[0] = v;
        cases.push((
            format!("header version {v}"),
            dump.payload_with(&ModuleDump::items_for(&h, &units)),
        ));
    }
    // Another (unknown) module type name.
    cases.push((
        "unknown module type".into(),
        dump.sign(&ModuleDump::body_with(
            dump.module_id ^ (1 << 40),
            &dump.items,
        )),
    ));

    // --- Header forgeries.
    let header_variants: Vec<(&str, Vec<u8>)> = vec![
        ("empty header", vec![]),
        ("header of 1 byte", header[..1].to_vec()),
        ("header cut by 1", header[..header.len() - 1].to_vec()),
        (
            "header with a trailing byte",
            [header.clone(), vec![0]].concat(),
        ),
        ("unknown order", {
            let mut h = header.clone();
            h[1] = 2;
            h
        }),
        (
            "next_seq 0",
            [
                header[..2].to_vec(),
                0i64.to_le_bytes().to_vec(),
                header[10..].to_vec(),
            ]
            .concat(),
        ),
        (
            "next_seq -1",
            [
                header[..2].to_vec(),
                (-1i64).to_le_bytes().to_vec(),
                header[10..].to_vec(),
            ]
            .concat(),
        ),
        (
            "next_seq i64::MAX",
            [
                header[..2].to_vec(),
                i64::MAX.to_le_bytes().to_vec(),
                header[10..].to_vec(),
            ]
            .concat(),
        ),
        (
            "positive front tie",
            [header[..10].to_vec(), 1i64.to_le_bytes().to_vec()].concat(),
        ),
        (
            "front tie i64::MIN",
            [header[..10].to_vec(), i64::MIN.to_le_bytes().to_vec()].concat(),
        ),
    ];
    for (what, h) in header_variants {
        cases.push((
            what.into(),
            dump.payload_with(&ModuleDump::items_for(&h, &units)),
        ));
    }

    // --- Unit counts and RDB-level lengths that lie.
    let n = units.len() as u64;
    for count in [0, n - 1, n + 1, n + 1000, u32::MAX as u64, u64::MAX - 1] {
        let mut items = dump.items.clone();
        items[1] = Item::Uint(count);
        cases.push((
            format!("unit count {count} (really {n})"),
            dump.payload_with(&items),
        ));
    }
    {
        let body = dump.body();
        // The first unit string's length prefix sits right after the
        // header and the count: re-encode it with lying lengths.
        let mut prefix = vec![RDB_TYPE_MODULE_2];
        put_len(&mut prefix, dump.module_id);
        prefix.push(5);
        put_len(&mut prefix, header.len() as u64);
        prefix.extend_from_slice(&header);
        prefix.push(2);
        put_len(&mut prefix, n);
        assert_eq!(body[prefix.len()], 5);
        let mut rest_start = prefix.len() + 1;
        let mut tmp = Vec::new();
        put_len(&mut tmp, units[0].len() as u64);
        rest_start += tmp.len();
        for lie in [
            units[0].len() as u64 + 1,
            units[0].len() as u64 + 1000,
            body.len() as u64 * 4,
            u32::MAX as u64,
            1 << 40,
        ] {
            let mut b = prefix.clone();
            b.push(5);
            put_len(&mut b, lie);
            b.extend_from_slice(&body[rest_start..]);
            cases.push((
                format!("RDB string length {lie} for {} bytes", units[0].len()),
                dump.sign(&b),
            ));
        }
        // No module EOF marker.
        cases.push(("no EOF marker".into(), dump.sign(&body[..body.len() - 1])));
        // The whole payload cut anywhere.
        // RESTORE parses the value from a buffer that still holds the
        // footer (RDB version, CRC), so a cut whose missing tail equals the
        // footer's first bytes reads back the very same value (e.g. a last
        // unit ending in 0x0a, then EOF 0x00, against version 10 = 0a 00):
        // that is the original payload, not a forgery.
        let footer = dump.rdb_version.to_le_bytes();
        for cut in 0..body.len() - 1 {
            let tail = &body[cut..];
            if tail.len() <= footer.len() && *tail == footer[..tail.len()] {
                continue;
            }
            cases.push((format!("body cut at {cut}"), dump.sign(&body[..cut])));
        }
    }

    // --- Truncated and padded units.
    for (i, u) in units.iter().enumerate() {
        for len in [0, 1, u.len() / 2, u.len() - 1] {
            cases.push((
                format!("unit {i} cut to {len}"),
                with_unit(i, u[..len].to_vec()),
            ));
        }
        cases.push((
            format!("unit {i} with a trailing byte"),
            with_unit(i, [u.clone(), vec![0]].concat()),
        ));
    }

    // --- Field-level forgeries that can never be valid.
    for (i, (u, fl)) in units.iter().zip(&fields).enumerate() {
        for f in fl {
            let bad: Vec<u64> = match f.k {
                K::Type => vec![0, 8, 0xff],
                K::Flag => vec![2, 0xff],
                K::Cause => vec![0, 4, 0xff],
                K::Time | K::Score => vec![u64::MAX, (MAX_TIME + 1) as u64, 1 << 63],
                K::Tie => vec![0, i64::MAX as u64, i64::MIN as u64],
                K::Skey => vec![i64::MAX as u64, i64::MIN as u64],
                K::Nonce | K::Token => vec![0, i64::MAX as u64, u64::MAX, 1 << 63],
                K::Seq => vec![0, u64::MAX, i64::MAX as u64],
                K::Len => {
                    let v = f.value;
                    let mut l = vec![v + 1, v + 9, u64::MAX, 1 << 63, u32::MAX as u64];
                    if v > 0 {
                        l.push(v - 1);
                    }
                    l
                }
                K::Count => vec![0, f.value - 1, f.value + 1, u64::MAX],
                K::Name => {
                    // Not UTF-8; a name without the user./team. prefix.
                    let mut a = u.clone();
                    a[f.off + f.size - 1] = 0xff;
                    cases.push((
                        format!("unit {i}: collation name not UTF-8"),
                        with_unit(i, a),
                    ));
                    let mut b = u.clone();
                    b[f.off] = b'x';
                    cases.push((
                        format!("unit {i}: collation name without prefix"),
                        with_unit(i, b),
                    ));
                    vec![]
                }
                K::Key | K::Attempts | K::Data => vec![],
            };
            for v in bad {
                cases.push((
                    format!(
                        "unit {i} (type {}): {:?} at {} set to {v:#x}",
                        fl[0].value, f.k, f.off
                    ),
                    with_unit(i, set_field(u, f, v)),
                ));
            }
        }
    }

    // --- Duplicated units.
    for i in 0..units.len() {
        let mut us = units.clone();
        us.insert(i + 1, units[i].clone());
        cases.push((
            format!("unit {i} (type {}) twice", fields[i][0].value),
            with_units(&us),
        ));
    }

    // --- Pairing broken between or inside units.
    let colls: Vec<usize> = (0..units.len())
        .filter(|&i| fields[i][0].value == 2)
        .collect();
    let singles: Vec<usize> = (0..units.len())
        .filter(|&i| fields[i][0].value == 1)
        .collect();
    let leases: Vec<usize> = (0..units.len())
        .filter(|&i| fields[i][0].value == 3)
        .collect();
    let cancels: Vec<usize> = (0..units.len())
        .filter(|&i| fields[i][0].value == 7)
        .collect();
    let of =
        |i: usize, k: K| -> Vec<Fld> { fields[i].iter().filter(|f| f.k == k).copied().collect() };
    assert!(colls.len() >= 3 && singles.len() >= 2 && leases.len() >= 2 && !cancels.is_empty());
    let copy_field = |u: &[u8], to: &Fld, from_unit: &[u8], from: &Fld| -> Vec<u8> {
        let mut out = u.to_vec();
        out[to.off..to.off + to.size].copy_from_slice(&from_unit[from.off..from.off + from.size]);
        out
    };
    let mut multi_job_collations = 0;
    for &a in &colls {
        for &b in &colls {
            if a == b {
                continue;
            }
            // B's first reservation (score and tie) = A's first.
            let (sa, ta) = (of(a, K::Score)[0], of(a, K::Tie)[0]);
            let (sb, tb) = (of(b, K::Score)[0], of(b, K::Tie)[0]);
            let u = copy_field(
                &copy_field(&units[b], &sb, &units[a], &sa),
                &tb,
                &units[a],
                &ta,
            );
            cases.push((
                format!("collation {b} shares a reservation with {a}"),
                with_unit(b, u),
            ));
            // B's first job = A's first job.
            let (ka, kb) = (of(a, K::Key)[0], of(b, K::Key)[0]);
            cases.push((
                format!("collation {b} holds a job of collation {a}"),
                with_unit(b, copy_field(&units[b], &kb, &units[a], &ka)),
            ));
        }
        let (sc, tc, nc, kc) = (
            of(a, K::Score),
            of(a, K::Tie),
            of(a, K::Nonce),
            of(a, K::Key),
        );
        let u = &units[a];
        if nc.len() >= 2 {
            multi_job_collations += 1;
            cases.push((
                format!("collation {a}: nonce twice"),
                with_unit(a, copy_field(u, &nc[1], u, &nc[0])),
            ));
            cases.push((
                format!("collation {a}: reservation twice"),
                with_unit(
                    a,
                    copy_field(&copy_field(u, &sc[1], u, &sc[0]), &tc[1], u, &tc[0]),
                ),
            ));
            cases.push((
                format!("collation {a}: job twice"),
                with_unit(a, copy_field(u, &kc[1], u, &kc[0])),
            ));
        }
        cases.push((
            format!("collation {a}: front (negative) tie"),
            with_unit(a, set_field(u, &tc[0], (-5i64) as u64)),
        ));
        // One job fewer than reservations, and one reservation fewer than
        // jobs (count adjusted so only the pairing is wrong).
        let count = of(a, K::Count)[0];
        let m = count.value;
        let job_start = count.off + 8;
        let res_start = sc[0].off;
        let first_job_end = of(a, K::Data)[0].off + of(a, K::Data)[0].size;
        let fewer_jobs = [
            &set_field(u, &count, m - 1)[..job_start],
            &u[first_job_end..],
        ]
        .concat();
        cases.push((
            format!("collation {a}: {} jobs, {m} reservations", m - 1),
            with_unit(a, fewer_jobs),
        ));
        let fewer_res = [&set_field(u, &count, m)[..res_start], &u[res_start + 24..]].concat();
        cases.push((
            format!("collation {a}: {m} jobs, {} reservations", m - 1),
            with_unit(a, fewer_res),
        ));
        let empty = set_field(u, &count, 0)[..job_start].to_vec();
        cases.push((format!("collation {a}: empty"), with_unit(a, empty)));
        for &s in &singles {
            // A single job's reservation = the collation's first.
            let (ss, ts) = (of(s, K::Score)[0], of(s, K::Tie)[0]);
            let v = copy_field(&copy_field(&units[s], &ss, u, &sc[0]), &ts, u, &tc[0]);
            cases.push((
                format!("single {s} shares a reservation with collation {a}"),
                with_unit(s, v),
            ));
            // A single job that is also in the collation.
            let ks = of(s, K::Key)[0];
            cases.push((
                format!("collation {a} holds single job {s}"),
                with_unit(a, copy_field(u, &kc[0], &units[s], &ks)),
            ));
        }
    }
    assert!(multi_job_collations >= 2);
    // A front reservation on a job that is not immediate.
    let released = singles
        .iter()
        .copied()
        .find(|&s| (of(s, K::Tie)[0].value as i64) < 0)
        .expect("a released job with a front tie");
    let imm_flag = *fields[released].last().unwrap();
    cases.push((
        "front reservation of a non-immediate job".into(),
        with_unit(released, set_field(&units[released], &imm_flag, 0)),
    ));
    // Lease tokens shared.
    let (t0, t1) = (of(leases[0], K::Token)[0], of(leases[1], K::Token)[0]);
    cases.push((
        "two leases with one token".into(),
        with_unit(
            leases[1],
            copy_field(&units[leases[1]], &t1, &units[leases[0]], &t0),
        ),
    ));
    let tc = of(cancels[0], K::Token)[0];
    cases.push((
        "a lease token also cancelled".into(),
        with_unit(
            cancels[0],
            copy_field(&units[cancels[0]], &tc, &units[leases[0]], &t0),
        ),
    ));

    assert!(cases.len() > 500, "{}", cases.len());
    for (what, p) in &cases {
        refused(&mut c, what, p, keep);
    }

    // --- Blind mutation: every byte flipped, one at a time. Accepted or
    // refused, the server stays up and never holds a broken queue.
    let mut accepted = 0;
    let mut total = 0;
    for (i, u) in units.iter().enumerate() {
        for pos in 0..u.len() {
            for mask in [0x01u8, 0x80] {
                let mut v = u.clone();
                v[pos] ^= mask;
                total += 1;
                if valid_or_refused(
                    &mut c,
                    &format!("unit {i} byte {pos} ^ {mask:#x}"),
                    &with_unit(i, v),
                ) {
                    accepted += 1;
                }
            }
        }
    }
    let mut rng = Rng::new(7);
    for round in 0..500 {
        let mut us = units.clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(us.len() as u64) as usize;
            if us[i].is_empty() {
                continue;
            }
            let pos = rng.below(us[i].len() as u64) as usize;
            us[i][pos] = rng.next_u64() as u8;
        }
        total += 1;
        if valid_or_refused(
            &mut c,
            &format!("random mutation {round}"),
            &with_units(&us),
        ) {
            accepted += 1;
        }
    }
    assert!(
        accepted < total,
        "every mutation accepted: the loader validates nothing"
    );
    eprintln!(
        "{} forged payloads refused; blind mutations: {accepted} of {total} valid",
        cases.len()
    );

    // Nothing refused left a trace; the original is intact.
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), queues_before);
    assert_eq!(digest(&mut c, "q"), dq);
    assert_check(&mut c, "q");
    assert_eq!(orca_queues(&mut c), vec!["q".to_string()]);
}

// ---------------------------------------------------------------------------
// 3. Key operations
// ---------------------------------------------------------------------------

/// Fill `q` with `n` jobs through pipelines (half in 1000 collations).
fn fill(c: &mut redis::Connection, q: &str, n: usize) {
    let mut i = 0;
    while i < n {
        let mut p = redis::pipe();
        for j in i..(i + 5000).min(n) {
            let coll = if j % 2 == 0 {
                Some(format!("user.{}", j % 1000))
            } else {
                None
            };
            p.cmd("ORCA.ENQUEUE")
                .arg(q)
                .arg(config(&format!("big-{j}"), coll.as_deref(), (j % 7) as i64))
                .ignore();
        }
        p.query::<()>(c).expect("pipeline");
        i += 5000;
    }
}

#[test]
fn del_and_unlink_of_a_big_queue() {
    const N: usize = 200_000;
    let s = Server::start(&["--lazyfree-lazy-user-del", "no"]);
    let mut c = s.conn();
    let baseline = info_int(&mut c, "memory", "used_memory");
    fill(&mut c, "big", N);
    assert_eq!(qlen(&mut c, "big"), N as i64);
    let full = info_int(&mut c, "memory", "used_memory");
    assert!(
        full - baseline > (N * 100) as i64,
        "used_memory grew by {}",
        full - baseline
    );
    ok(&mut c, &args!["COPY", "big", "big2"]);
    ok(&mut c, &args!["COPY", "big", "big3"]);
    let d = digest(&mut c, "big");
    assert_eq!(digest(&mut c, "big2"), d);
    assert_eq!(digest(&mut c, "big3"), d);
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), 3);
    assert_eq!(info_int(&mut c, "orca", "orca_jobs_queued"), 3 * N as i64);

    // DEL frees in the foreground.
    let lazy0 = info_int(&mut c, "memory", "lazyfreed_objects");
    let t = Instant::now();
    assert_eq!(as_int(&ok(&mut c, &args!["DEL", "big"])), 1);
    let del_time = t.elapsed();
    assert_eq!(info_int(&mut c, "memory", "lazyfreed_objects"), lazy0);

    // With lazyfree-lazy-user-del, DEL and UNLINK hand the queue to the
    // lazyfree thread (the module reports its free effort).
    ok(
        &mut c,
        &args!["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"],
    );
    let t = Instant::now();
    assert_eq!(as_int(&ok(&mut c, &args!["UNLINK", "big2"])), 1);
    let unlink_time = t.elapsed();
    let t = Instant::now();
    assert_eq!(as_string(&ok(&mut c, &args!["PING"])), "PONG");
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "server not responsive"
    );
    assert_eq!(as_int(&ok(&mut c, &args!["DEL", "big3"])), 1);
    assert!(!exists(&mut c, "big2") && !exists(&mut c, "big3"));
    wait_for("lazyfree", Duration::from_secs(20), || {
        info_int(&mut c, "memory", "lazyfree_pending_objects") == 0
            && info_int(&mut c, "memory", "lazyfreed_objects") == lazy0 + 2
    });
    eprintln!("DEL {del_time:?}, UNLINK {unlink_time:?}");
    assert!(
        unlink_time < Duration::from_millis(250),
        "UNLINK of {N} jobs took {unlink_time:?} (DEL: {del_time:?})"
    );
    // The gauges follow frees on the lazyfree thread too.
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), 0);
    assert_eq!(info_int(&mut c, "orca", "orca_jobs_queued"), 0);
    let after = info_int(&mut c, "memory", "used_memory");
    assert!(
        after - baseline < (full - baseline) / 4,
        "memory not returned: baseline {baseline}, full {full}, after {after}"
    );
}

#[test]
fn copy_is_deep_and_key_operations_work() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    rich_queue(&mut c, "q");
    assert_eq!(as_string(&ok(&mut c, &args!["TYPE", "q"])), "orcaqueue");
    let dq = digest(&mut c, "q");
    let lenq = qlen(&mut c, "q");

    // COPY: equal right after, independent afterwards (both ways).
    assert_eq!(as_int(&ok(&mut c, &args!["COPY", "q", "q2"])), 1);
    assert_eq!(digest(&mut c, "q2"), dq);
    assert_check(&mut c, "q2");
    enqueue(&mut c, "q2", "only-in-copy", Some("user.1"), 0);
    let h = held("q2", &pop(&mut c, "q2", LONG).unwrap());
    assert_eq!(as_int(&ack(&mut c, &h)), 1);
    ok(&mut c, &args!["ORCA.DEAD", "q2", "PURGE"]);
    ok(&mut c, &args!["ORCA.SETTINGS", "q2", "ORDER", "FIFO"]);
    assert_eq!(
        digest(&mut c, "q"),
        dq,
        "modifying the copy changed the original"
    );
    assert_eq!(qlen(&mut c, "q"), lenq);
    assert!(state(&mut c, "q", &key_of("only-in-copy")).is_none());
    let d2 = digest(&mut c, "q2");
    assert_ne!(d2, dq);
    enqueue(&mut c, "q", "only-in-original", None, 0);
    assert_eq!(
        digest(&mut c, "q2"),
        d2,
        "modifying the original changed the copy"
    );
    ok(
        &mut c,
        &args!["ORCA.DELETE", "q", key_of("only-in-original")],
    );
    assert_check(&mut c, "q");
    assert_check(&mut c, "q2");
    // COPY onto an existing key needs REPLACE; COPY to another db.
    assert_eq!(as_int(&ok(&mut c, &args!["COPY", "q", "q2"])), 0);
    assert_eq!(as_int(&ok(&mut c, &args!["COPY", "q", "q2", "REPLACE"])), 1);
    let dq = digest(&mut c, "q");
    assert_eq!(digest(&mut c, "q2"), dq);

    // RENAME keeps the queue.
    ok(&mut c, &args!["RENAME", "q2", "renamed"]);
    assert!(!exists(&mut c, "q2"));
    assert_eq!(digest(&mut c, "renamed"), dq);
    assert_check(&mut c, "renamed");

    // MOVE to db 1, usable there.
    assert_eq!(as_int(&ok(&mut c, &args!["MOVE", "renamed", 1])), 1);
    assert!(!exists(&mut c, "renamed"));
    let mut c1 = redis::Client::open(format!("redis://127.0.0.1:{}/1", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(digest(&mut c1, "renamed"), dq);
    assert_check(&mut c1, "renamed");
    assert!(pop(&mut c1, "renamed", LONG).is_some());
    assert_check(&mut c1, "renamed");

    // SWAPDB: db 0's queue is now in db 1 and vice versa.
    ok(&mut c, &args!["SWAPDB", 0, 1]);
    assert_eq!(digest(&mut c1, "q"), dq);
    assert!(exists(&mut c, "renamed") && !exists(&mut c, "q"));
    ok(&mut c, &args!["SWAPDB", 0, 1]);

    // EXPIRE: the queue vanishes (and is freed).
    ok(&mut c, &args!["COPY", "q", "temp"]);
    let queues = info_int(&mut c, "orca", "orca_queues");
    assert_eq!(as_int(&ok(&mut c, &args!["PEXPIRE", "temp", 300])), 1);
    let ttl = as_int(&ok(&mut c, &args!["PTTL", "temp"]));
    assert!((1..=300).contains(&ttl), "PTTL {ttl}");
    assert_eq!(as_int(&ok(&mut c, &args!["TTL", "q"])), -1);
    wait_for("the queue to expire", Duration::from_secs(5), || {
        !exists(&mut c, "temp")
    });
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), queues - 1);

    // FLUSHALL: everything goes, and the module keeps working.
    ok(&mut c, &args!["FLUSHALL"]);
    assert!(orca_queues(&mut c).is_empty() && orca_queues(&mut c1).is_empty());
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), 0);
    assert_eq!(info_int(&mut c, "orca", "orca_jobs_queued"), 0);
    assert_eq!(info_int(&mut c, "orca", "orca_jobs_leased"), 0);
    assert_eq!(qlen(&mut c, "q"), 0);
    std::thread::sleep(Duration::from_millis(150)); // a few timer rounds
    enqueue(&mut c, "q", "after-flush", None, 0);
    assert_eq!(qlen(&mut c, "q"), 1);
}

#[test]
fn memory_usage_grows_with_jobs() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let pad = "x".repeat(500);
    let mem =
        |c: &mut redis::Connection| as_int(&ok(c, &args!["MEMORY", "USAGE", "q", "SAMPLES", 0]));
    ok(&mut c, &args!["ORCA.SETTINGS", "q", "ORDER", "LIFO"]);
    let empty = mem(&mut c);
    let mut last = empty;
    let mut payload_bytes = 0usize;
    for round in 1..=4 {
        let mut p = redis::pipe();
        for i in 0..250 {
            let cfg = format!(
                r#"{{"key":"m{round}-{i}","collation":{{"type":"user","id":"{}"}},"pad":"{pad}"}}"#,
                i % 10
            );
            payload_bytes += cfg.len();
            p.cmd("ORCA.ENQUEUE").arg("q").arg(cfg).ignore();
        }
        p.query::<()>(&mut c).unwrap();
        let m = mem(&mut c);
        assert!(m > last, "MEMORY USAGE did not grow: {last} -> {m}");
        assert!(
            m as usize > payload_bytes,
            "MEMORY USAGE {m} < payload bytes {payload_bytes}"
        );
        assert!(
            (m as usize) < 4 * payload_bytes + 1_000_000,
            "MEMORY USAGE {m} implausible for {payload_bytes} payload bytes"
        );
        last = m;
    }
    // Leased jobs still count; popping without a lease frees.
    for _ in 0..100 {
        pop(&mut c, "q", LONG).unwrap();
    }
    assert!(mem(&mut c) as usize > payload_bytes);
    let before = mem(&mut c);
    for _ in 0..500 {
        ok(&mut c, &args!["ORCA.POP", "q", "LEASE", 0]);
    }
    let after = mem(&mut c);
    assert!(after < before - 500 * 500, "{before} -> {after}");
    assert!(empty < 10_000, "an empty queue uses {empty} bytes");
}

/// The same commands with the clock pinned give the same queue on two
/// servers: same digest; any difference shows.
#[test]
fn digests_match_across_servers() {
    let a = Server::start(&[]);
    let b = Server::start(&[]);
    let run = |c: &mut redis::Connection| {
        let now = 1_700_000_000_000i64;
        for i in 0..40 {
            let coll = ["user.1", "user.2", "team.z"][i % 3];
            let coll = if i % 5 == 0 { None } else { Some(coll) };
            ok(
                c,
                &args![
                    "ORCA.ENQUEUE",
                    "d",
                    config(&format!("j{i}"), coll, (i * 37 % 11) as i64),
                    "NOW",
                    now + i as i64
                ],
            );
        }
        ok(
            c,
            &args![
                "ORCA.IMMEDIATE",
                "d",
                config("j3", None, 0),
                "NOW",
                now + 100
            ],
        );
        ok(
            c,
            &args!["ORCA.MOVE", "d", key_of("j4"), "RELEASE", "NOW", now + 101],
        );
        ok(
            c,
            &args!["ORCA.MOVE", "d", key_of("j7"), "DELAY", "BUFFER", 50],
        );
        for k in 0..5 {
            let f = fields(ok(
                c,
                &args!["ORCA.POP", "d", "LEASE", LONG, "NOW", now + 200 + k],
            ));
            if k == 0 {
                ok(
                    c,
                    &args!["ORCA.ACK", "d", text(&f, "key"), text(&f, "lease")],
                );
            }
        }
    };
    let (mut ca, mut cb) = (a.conn(), b.conn());
    run(&mut ca);
    run(&mut cb);
    let (da, db) = (digest(&mut ca, "d"), digest(&mut cb, "d"));
    assert_eq!(da, db);
    assert_ne!(da, "0".repeat(40));
    ok(
        &mut cb,
        &args![
            "ORCA.ENQUEUE",
            "d",
            config("extra", None, 0),
            "NOW",
            1_700_000_001_000i64
        ],
    );
    assert_ne!(digest(&mut cb, "d"), da, "the digest must see every job");
    ok(&mut cb, &args!["ORCA.DELETE", "d", key_of("extra")]);
    ok(&mut ca, &args!["ORCA.SETTINGS", "d", "ORDER", "FIFO"]);
    assert_ne!(
        digest(&mut ca, "d"),
        digest(&mut cb, "d"),
        "the digest must see the order"
    );
}

/// A queue with one job leased for `ms`; returns the job's key.
fn one_short_lease(c: &mut redis::Connection, q: &str, ms: i64) -> String {
    enqueue(c, q, "short", Some("user.1"), 0);
    enqueue(c, q, "other", Some("user.2"), 10_000);
    let f = pop(c, q, ms).unwrap();
    assert_eq!(text(&f, "key"), key_of("short"));
    text(&f, "key")
}

/// The job comes back (timer only: STATUS and LEN do not tick).
fn expires_by_timer(c: &mut redis::Connection, q: &str, key: &str, what: &str) {
    wait_for(what, Duration::from_secs(5), || {
        state(c, q, key).as_deref() == Some("queued")
    });
    assert_eq!(qlen(c, q), 2, "{what}");
    assert_check(c, q);
}

#[test]
fn leases_expire_after_rename_copy_move_and_restore() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let mut c1 = redis::Client::open(format!("redis://127.0.0.1:{}/1", s.port))
        .unwrap()
        .get_connection()
        .unwrap();

    let k = one_short_lease(&mut c, "r", 400);
    ok(&mut c, &args!["RENAME", "r", "r-renamed"]);
    expires_by_timer(&mut c, "r-renamed", &k, "lease expiry after RENAME");

    let k = one_short_lease(&mut c, "c", 400);
    ok(&mut c, &args!["COPY", "c", "c-copy"]);
    ok(&mut c, &args!["DEL", "c"]);
    expires_by_timer(&mut c, "c-copy", &k, "lease expiry in a COPY");

    let k = one_short_lease(&mut c, "m", 400);
    ok(&mut c, &args!["MOVE", "m", 1]);
    expires_by_timer(&mut c1, "m", &k, "lease expiry after MOVE to db 1");

    let k = one_short_lease(&mut c, "d", 400);
    let payload = as_bytes(&ok(&mut c, &args!["DUMP", "d"]));
    ok(&mut c, &args!["DEL", "d"]);
    ok(&mut c, &args!["RESTORE", "d-restored", 0, payload]);
    expires_by_timer(&mut c, "d-restored", &k, "lease expiry after DUMP/RESTORE");

    let k = one_short_lease(&mut c, "n", 400);
    ok(&mut c, &args!["RENAME", "n", "n2"]);
    ok(&mut c, &args!["RENAME", "n2", "n3"]);
    ok(&mut c, &args!["COPY", "n3", "n4", "DB", 1]);
    ok(&mut c, &args!["DEL", "n3"]);
    expires_by_timer(
        &mut c1,
        "n4",
        &k,
        "lease expiry after RENAME, RENAME, COPY DB 1",
    );
}

#[test]
fn leases_expire_after_swapdb() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let mut c1 = redis::Client::open(format!("redis://127.0.0.1:{}/1", s.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let k = one_short_lease(&mut c, "s", 400);
    ok(&mut c, &args!["SWAPDB", 0, 1]);
    assert!(exists(&mut c1, "s"));
    expires_by_timer(&mut c1, "s", &k, "lease expiry after SWAPDB 0 1");
}

// ---------------------------------------------------------------------------
// 4. Replication and failover
// ---------------------------------------------------------------------------

fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(10))
        .unwrap()
}

/// `ORCA.POP <q> BLOCK <ms> LEASE <lease>` on its own connection and thread.
fn blocking_pop(
    port: u16,
    q: &str,
    block: i64,
    lease: i64,
) -> std::thread::JoinHandle<Option<Fields>> {
    let q = q.to_string();
    std::thread::spawn(move || {
        let mut c = connect(port);
        match ok(
            &mut c,
            &args!["ORCA.POP", &q, "BLOCK", block, "LEASE", lease],
        ) {
            Value::Nil => None,
            v => Some(fields(v)),
        }
    })
}

fn wait_blocked(c: &mut redis::Connection, n: i64) {
    wait_for("blocked clients", Duration::from_secs(5), || {
        info_int(c, "clients", "blocked_clients") == n
    });
}

/// A seeded mix of every write, with short leases and retries left to the
/// master's timer. Returns the long leases still held and those cancelled.
fn replicated_workload(c: &mut redis::Connection, seed: u64, ops: usize) -> (Vec<Held>, Vec<Held>) {
    let mut rng = Rng::new(seed);
    let queues = ["rq:0", "rq:1", "rq:2", "rq:3", "rq:4", "rq:5"];
    let colls = [
        Some("user.1"),
        Some("user.2"),
        Some("user.3"),
        Some("team.a"),
        None,
    ];
    let mut holding: Vec<(Held, bool)> = Vec::new();
    let mut cancelled: Vec<Held> = Vec::new();
    ok(c, &args!["ORCA.SETTINGS", "rq:1", "ORDER", "FIFO"]);
    for n in 0..ops {
        let q = *rng.pick(&queues);
        let name = format!("j{}", rng.below(60));
        let r = rng.below(100);
        let v = if r < 28 {
            raw(
                c,
                &args![
                    "ORCA.ENQUEUE",
                    q,
                    config(&name, *rng.pick(&colls), rng.below(3000) as i64)
                ],
            )
        } else if r < 34 {
            raw(
                c,
                &args!["ORCA.IMMEDIATE", q, config(&name, *rng.pick(&colls), 0)],
            )
        } else if r < 37 {
            raw(
                c,
                &args![
                    "ORCA.REENQUEUE",
                    q,
                    config(&name, *rng.pick(&colls), 0),
                    1_000 + n as i64
                ],
            )
        } else if r < 41 {
            let how = if rng.chance(50) { "RELEASE" } else { "DELAY" };
            raw(c, &args!["ORCA.MOVE", q, key_of(&name), how])
        } else if r < 44 {
            let v = raw(c, &args!["ORCA.DELETE", q, key_of(&name)]);
            // Deleting a running job cancels its leases.
            let key = key_of(&name);
            holding.retain(|(h, long)| {
                let hit = h.q == q && h.key == key;
                if hit && *long {
                    cancelled.push(h.clone());
                }
                !hit
            });
            v
        } else if r < 64 {
            let long = rng.chance(60);
            let lease = if long {
                LONG
            } else {
                50 + rng.below(400) as i64
            };
            let count = 1 + rng.below(2) as i64;
            let v = raw(c, &args!["ORCA.POP", q, "LEASE", lease, "COUNT", count]);
            if let Value::Array(jobs) = &v {
                for j in jobs {
                    holding.push((held(q, &fields(j.clone())), long));
                }
            }
            v
        } else if r < 92 && !holding.is_empty() {
            let i = rng.below(holding.len() as u64) as usize;
            let (h, long) = holding[i].clone();
            let r2 = rng.below(100);
            let v = if r2 < 45 {
                let mut a = args!["ORCA.ACK", &h.q, &h.key, &h.lease];
                if rng.chance(50) {
                    a.extend(args!["RESULT", format!("result {n}")]);
                }
                raw(c, &a)
            } else if r2 < 85 {
                raw(
                    c,
                    &args![
                        "ORCA.NACK",
                        &h.q,
                        &h.key,
                        &h.lease,
                        "DELAY",
                        20 + rng.below(300) as i64
                    ],
                )
            } else {
                raw(
                    c,
                    &args![
                        "ORCA.EXTEND",
                        &h.q,
                        &h.key,
                        &h.lease,
                        if long { LONG } else { 300 }
                    ],
                )
            };
            if r2 < 85 {
                holding.swap_remove(i);
            }
            v
        } else if r < 94 {
            let order = if rng.chance(50) { "FIFO" } else { "LIFO" };
            raw(c, &args!["ORCA.SETTINGS", q, "ORDER", order])
        } else if r < 96 {
            // Master-only setting: replicas learn the pinned threshold.
            let n = if rng.chance(50) { "2" } else { "5" };
            raw(c, &args!["CONFIG", "SET", "orca.max-attempts", n])
        } else if r < 98 {
            let dead = ok(c, &args!["ORCA.DEAD", q, "LIST"]);
            match dead {
                Value::Array(items) if !items.is_empty() => {
                    let key = text(&fields(items[0].clone()), "key");
                    raw(c, &args!["ORCA.DEAD", q, "REQUEUE", key])
                }
                v => v,
            }
        } else {
            raw(c, &args!["ORCA.TICK", q])
        };
        if let Some(e) = error_text(&v) {
            assert!(e.starts_with("ERR "), "unexpected error {e}");
        }
    }
    let long = holding
        .into_iter()
        .filter(|(_, long)| *long)
        .map(|(h, _)| h)
        .collect();
    (long, cancelled)
}

/// Wait until the master's timer has nothing short left to do: digests
/// stable over a while.
fn settle(c: &mut redis::Connection) -> BTreeMap<String, String> {
    std::thread::sleep(Duration::from_millis(700));
    let mut last = digests(c);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(400));
        let now = digests(c);
        if now == last {
            return now;
        }
        assert!(Instant::now() < deadline, "queues never settle");
        last = now;
    }
}

fn wait1(c: &mut redis::Connection) {
    let n = as_int(&ok(c, &args!["WAIT", 1, 5000]));
    assert_eq!(n, 1, "WAIT 1 5000 gave {n}");
}

/// A replica that refuses a command of its master's stream (wrong arity,
/// unknown option, ...) silently diverges: Redis only logs it.
fn assert_replica_accepted_everything(replica: &Server) {
    let log = replica.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sending an error to its master"))
        .collect();
    assert!(
        refused.is_empty(),
        "the replica refused replicated commands:\n{}",
        refused.join("\n")
    );
}

/// The smallest reproduction of a replica refusing its master's stream:
/// `ORCA.EXTEND` is replicated with `NOW <ms>` pinned.
#[test]
fn replica_applies_orca_extend() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&[], &[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    enqueue(&mut m, "x", "job", None, 0);
    let h = held("x", &pop(&mut m, "x", LONG).unwrap());
    let deadline = as_int(&ok(
        &mut m,
        &args!["ORCA.EXTEND", "x", &h.key, &h.lease, 2 * LONG],
    ));
    wait1(&mut m);
    sync_replica(&master, &replica);
    assert_replica_accepted_everything(&replica);
    assert_eq!(
        digest(&mut r, "x"),
        digest(&mut m, "x"),
        "the replica missed the EXTEND"
    );
    let st = fields(ok(&mut r, &args!["ORCA.STATUS", "x", &h.key]));
    assert_eq!(int(&st, "deadline"), deadline);
}

#[test]
fn replica_follows_master_then_takes_over() {
    let mut master = Server::start(&[]);
    let replica = master.start_replica(&[], &[]);
    let mut m = master.conn();
    let mut r = replica.conn();

    // Blocking pops served later: by an enqueue, by an expired lease (the
    // timer), by a due retry.
    let t1 = blocking_pop(master.port, "rq:blk", 5000, LONG);
    let t2 = blocking_pop(master.port, "rq:blk", 5000, LONG);
    wait_blocked(&mut m, 2);
    enqueue(&mut m, "rq:blk", "b1", None, 0);
    enqueue(&mut m, "rq:blk", "b2", Some("user.1"), 0);
    let (f1, f2) = (
        t1.join().unwrap().expect("served"),
        t2.join().unwrap().expect("served"),
    );
    let served: BTreeSet<String> = [text(&f1, "key"), text(&f2, "key")].into();
    assert_eq!(served, [key_of("b1"), key_of("b2")].into());

    enqueue(&mut m, "rq:exp", "e1", None, 0);
    let first = pop(&mut m, "rq:exp", 300).unwrap();
    let t3 = blocking_pop(master.port, "rq:exp", 5000, LONG);
    wait_blocked(&mut m, 1);
    let f3 = t3.join().unwrap().expect("served after the lease expired");
    assert_eq!(text(&f3, "key"), text(&first, "key"));
    assert_eq!(int(&f3, "attempt"), 2);

    enqueue(&mut m, "rq:retry", "n1", None, 0);
    let h = held("rq:retry", &pop(&mut m, "rq:retry", LONG).unwrap());
    ok(
        &mut m,
        &args!["ORCA.NACK", "rq:retry", &h.key, &h.lease, "DELAY", 300],
    );
    let t4 = blocking_pop(master.port, "rq:retry", 5000, LONG);
    wait_blocked(&mut m, 1);
    let f4 = t4.join().unwrap().expect("served after the retry came due");
    assert_eq!(text(&f4, "key"), h.key);

    // A random mix, with short leases and retries left to the timer.
    let (mut holding, cancelled) = replicated_workload(&mut m, 0xD0_0D, 1500);
    let settled = settle(&mut m);
    wait1(&mut m);
    sync_replica(&master, &replica);
    assert_replica_accepted_everything(&replica);
    assert_same_digests("replica after the workload", &settled, &digests(&mut r));
    check_all(&mut m);
    check_all(&mut r);

    // Failover. Fresh leases expiring soon after the master dies.
    let mut soon = Vec::new();
    for q in ["rq:0", "rq:2", "rq:3"] {
        enqueue(&mut m, q, "failover-job", Some("user.7"), 0);
        ok(
            &mut m,
            &args!["ORCA.MOVE", q, key_of("failover-job"), "RELEASE"],
        );
        let f = pop(&mut m, q, 2500).unwrap();
        assert_eq!(text(&f, "key"), key_of("failover-job"));
        soon.push(held(q, &f));
    }
    holding.push(held("rq:4", &{
        enqueue(&mut m, "rq:4", "acked-after-failover", None, 0);
        ok(
            &mut m,
            &args![
                "ORCA.MOVE",
                "rq:4",
                key_of("acked-after-failover"),
                "RELEASE"
            ],
        );
        pop(&mut m, "rq:4", LONG).unwrap()
    }));
    wait1(&mut m);
    let acknowledged = digests(&mut m);
    drop(m);
    master.kill();
    ok(&mut r, &args!["REPLICAOF", "NO", "ONE"]);
    assert_eq!(
        info(&mut r, "replication").get("role").map(String::as_str),
        Some("master")
    );
    assert_same_digests("promoted replica", &acknowledged, &digests(&mut r));
    check_all(&mut r);
    for h in &soon {
        assert_eq!(state(&mut r, &h.q, &h.key).as_deref(), Some("leased"));
    }
    // Its timer takes over: the short leases expire without any command.
    for h in &soon {
        wait_for(
            "lease expiry on the promoted replica",
            Duration::from_secs(10),
            || state(&mut r, &h.q, &h.key).as_deref() == Some("queued"),
        );
        let e = error_text(&ack(&mut r, h)).expect("expired lease must not ack");
        assert!(e.contains("lease not held"), "{e}");
    }
    // Long leases taken on the old master complete on the new one.
    assert!(holding.len() > 5, "{}", holding.len());
    for h in &holding {
        assert_eq!(
            as_int(&ack(&mut r, h)),
            1,
            "lease {h:?} lost in the failover"
        );
    }
    for h in &cancelled {
        let e = error_text(&ack(&mut r, h)).expect("a cancelled lease must not ack");
        assert!(e.contains("cancelled"), "{e}");
    }
    check_all(&mut r);
}

// ---------------------------------------------------------------------------
// 5. Command metadata and ACL
// ---------------------------------------------------------------------------

/// (name, arity, flags besides `module`)
const COMMANDS: &[(&str, i64, &[&str])] = &[
    ("orca.enqueue", -3, &["write", "denyoom"]),
    ("orca.immediate", -3, &["write", "denyoom"]),
    ("orca.reenqueue", 4, &["write", "denyoom"]),
    ("orca.move", -4, &["write"]),
    ("orca.delete", 3, &["write", "fast"]),
    ("orca.pop", -2, &["write", "fast"]),
    ("orca.mpop", -3, &["write", "movablekeys"]),
    ("orca.ack", -4, &["write", "fast"]),
    ("orca.nack", -4, &["write", "fast"]),
    // Documented as 5 arguments, but the server replicates it with `NOW <ms>`
    // pinned, so -5 is also right (5 makes replicas refuse the stream).
    ("orca.extend", 5, &["write", "fast"]),
    ("orca.result", 3, &["readonly", "fast"]),
    ("orca.dead", -3, &["write"]),
    ("orca.tick", -2, &["write"]),
    ("orca.len", 2, &["readonly", "fast"]),
    ("orca.check", 2, &["readonly"]),
    ("orca.status", 3, &["readonly"]),
    ("orca.list", -2, &["readonly"]),
    ("orca.stats", 2, &["readonly"]),
    ("orca.settings", -2, &["write", "denyoom"]),
    ("orca.import", 3, &["write", "denyoom"]),
    ("orca.gate", 4, &["write", "denyoom"]),
];

/// A flat RESP2 field/value array as a map (values kept raw).
fn pairs(v: &Value) -> BTreeMap<String, Value> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .map(|kv| (as_string(&kv[0]), kv[1].clone()))
            .collect(),
        Value::Map(m) => m.iter().map(|(k, v)| (as_string(k), v.clone())).collect(),
        other => panic!("expected pairs, got {other:?}"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(as_string).collect(),
        other => panic!("expected an array, got {other:?}"),
    }
}

#[test]
fn command_info_docs_getkeys_and_acl() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let listed: BTreeSet<String> = strings(&ok(
        &mut c,
        &args!["COMMAND", "LIST", "FILTERBY", "MODULE", "orca"],
    ))
    .into_iter()
    .collect();
    let expected: BTreeSet<String> = COMMANDS.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(listed, expected);

    for &(name, arity, flags) in COMMANDS {
        let v = ok(&mut c, &args!["COMMAND", "INFO", name]);
        let Value::Array(outer) = v else {
            panic!("{v:?}")
        };
        let Value::Array(info) = &outer[0] else {
            panic!("no COMMAND INFO for {name}")
        };
        assert_eq!(as_string(&info[0]), name);
        if name == "orca.extend" {
            assert!([5, -5].contains(&as_int(&info[1])), "{name} arity");
        } else {
            assert_eq!(as_int(&info[1]), arity, "{name} arity");
        }
        let got: BTreeSet<String> = strings(&info[2]).into_iter().collect();
        let want: BTreeSet<String> = flags
            .iter()
            .chain(&["module"])
            .map(|f| f.to_string())
            .collect();
        assert_eq!(got, want, "{name} flags");
        if name == "orca.mpop" {
            // numkeys at index 1, the queues after it: a keynum key spec.
            assert_eq!(
                (as_int(&info[3]), as_int(&info[4]), as_int(&info[5])),
                (0, 0, 0),
                "{name} keys"
            );
            let Value::Array(specs) = &info[8] else {
                panic!("{name} key specs {:?}", info[8])
            };
            let spec = pairs(&specs[0]);
            let find = pairs(&spec["find_keys"]);
            assert_eq!(as_string(&find["type"]), "keynum");
            let keys = strings(&ok(
                &mut c,
                &args![
                    "COMMAND",
                    "GETKEYS",
                    "ORCA.MPOP",
                    3,
                    "a",
                    "b",
                    "c",
                    "BLOCK",
                    5
                ],
            ));
            assert_eq!(keys, vec!["a", "b", "c"]);
            continue;
        }
        assert_eq!(
            (as_int(&info[3]), as_int(&info[4]), as_int(&info[5])),
            (1, 1, 1),
            "{name} keys"
        );
        // One key spec: the queue at index 1.
        let Value::Array(specs) = &info[8] else {
            panic!("{name} key specs {:?}", info[8])
        };
        assert_eq!(specs.len(), 1, "{name} key specs");
        let spec = pairs(&specs[0]);
        let spec_flags: BTreeSet<String> = strings(&spec["flags"]).into_iter().collect();
        let rw = if flags.contains(&"readonly") {
            "RO"
        } else {
            "RW"
        };
        assert!(
            spec_flags.contains(rw),
            "{name} key spec flags {spec_flags:?}"
        );
        let begin = pairs(&spec["begin_search"]);
        assert_eq!(as_string(&begin["type"]), "index");
        assert_eq!(as_int(&pairs(&begin["spec"])["index"]), 1, "{name}");
        let find = pairs(&spec["find_keys"]);
        assert_eq!(as_string(&find["type"]), "range");
        let range = pairs(&find["spec"]);
        assert_eq!(
            (
                as_int(&range["lastkey"]),
                as_int(&range["keystep"]),
                as_int(&range["limit"])
            ),
            (0, 1, 0),
            "{name}"
        );

        // Docs.
        let docs = ok(&mut c, &args!["COMMAND", "DOCS", name]);
        let docs = pairs(&docs);
        let doc = pairs(&docs[name]);
        assert!(!as_string(&doc["summary"]).is_empty(), "{name} summary");
        assert!(
            !as_string(&doc["complexity"]).is_empty(),
            "{name} complexity"
        );
        assert_eq!(as_string(&doc["group"]), "module");
        assert_eq!(as_string(&doc["module"]), "orca");

        // GETKEYS with the least arguments the arity allows.
        let mut cmd = args![name, "the-queue"];
        while (cmd.len() as i64) < arity.abs() {
            cmd.push(b"x".to_vec());
        }
        let mut getkeys = args!["COMMAND", "GETKEYS"];
        getkeys.extend(cmd.iter().cloned());
        assert_eq!(
            strings(&ok(&mut c, &getkeys)),
            vec!["the-queue"],
            "{name} GETKEYS"
        );
        // Arity is enforced.
        let e = fails(&mut c, &cmd[..cmd.len() - 1]);
        assert!(e.contains("wrong number of arguments"), "{name}: {e}");
        if as_int(&info[1]) > 0 {
            let mut more = cmd.clone();
            more.push(b"x".to_vec());
            let e = fails(&mut c, &more);
            assert!(e.contains("wrong number of arguments"), "{name}: {e}");
        }
    }

    // ACL: a worker user limited to the worker commands on queue:*.
    ok(
        &mut c,
        &args![
            "ACL",
            "SETUSER",
            "worker",
            "on",
            ">workerpw",
            "resetkeys",
            "~queue:*",
            "resetchannels",
            "-@all",
            "+orca.pop",
            "+orca.ack",
            "+orca.nack",
            "+orca.extend"
        ],
    );
    enqueue(&mut c, "queue:1", "a", Some("user.1"), 0);
    enqueue(&mut c, "queue:1", "b", Some("user.1"), 0);
    enqueue(&mut c, "other:1", "c", None, 0);
    let mut w = s.conn();
    ok(&mut w, &args!["AUTH", "worker", "workerpw"]);
    let f = pop(&mut w, "queue:1", LONG).expect("worker pops");
    let h = held("queue:1", &f);
    ok(
        &mut w,
        &args!["ORCA.EXTEND", "queue:1", &h.key, &h.lease, LONG],
    );
    assert_eq!(as_int(&ack(&mut w, &h)), 1);
    let h = held("queue:1", &pop(&mut w, "queue:1", LONG).unwrap());
    ok(
        &mut w,
        &args!["ORCA.NACK", "queue:1", &h.key, &h.lease, "DELAY", LONG],
    );
    for denied in [
        args!["ORCA.ENQUEUE", "queue:1", config("x", None, 0)],
        args!["ORCA.POP", "other:1"],
        args!["ORCA.ACK", "other:1", key_of("c"), "1"],
        args!["ORCA.LEN", "queue:1"],
        args!["ORCA.DELETE", "queue:1", key_of("a")],
        args!["DEL", "queue:1"],
    ] {
        let e = fails(&mut w, &denied);
        assert!(e.starts_with("NOPERM"), "{}: {e}", show_args(&denied));
    }
    assert_eq!(qlen(&mut c, "other:1"), 1);
    assert_check(&mut c, "queue:1");
}

// ---------------------------------------------------------------------------
// 6. maxmemory
// ---------------------------------------------------------------------------

#[test]
fn maxmemory_refuses_enqueue_but_serves_workers() {
    let s = Server::start(&["--maxmemory-policy", "noeviction"]);
    let mut c = s.conn();
    for i in 0..20 {
        enqueue(&mut c, "mq", &format!("m{i}"), Some("user.1"), 0);
    }
    let used = info_int(&mut c, "memory", "used_memory");
    ok(
        &mut c,
        &args!["CONFIG", "SET", "maxmemory", used + 512 * 1024],
    );
    let big = format!(r#"{{"key":"fill-{{}}","pad":"{}"}}"#, "y".repeat(64 * 1024));
    let mut refused_after = None;
    for i in 0..200 {
        let v = raw(
            &mut c,
            &args!["ORCA.ENQUEUE", "mq", big.replace("{}", &i.to_string())],
        );
        if let Some(e) = error_text(&v) {
            assert!(e.starts_with("OOM"), "{e}");
            refused_after = Some(i);
            break;
        }
    }
    let n =
        refused_after.expect("ORCA.ENQUEUE never refused: does the module allocate through Redis?");
    assert!(n > 0, "refused before anything was added");
    let len = qlen(&mut c, "mq");
    let d = digest(&mut c, "mq");
    // Everything that adds is refused, with nothing changed.
    for cmd in [
        args!["ORCA.ENQUEUE", "mq", config("late", None, 0)],
        args!["ORCA.IMMEDIATE", "mq", config("late", None, 0)],
        args!["ORCA.REENQUEUE", "mq", config("late", None, 0), 5],
        args!["ORCA.ENQUEUE", "new-queue", config("late", None, 0)],
        args!["ORCA.SETTINGS", "new-queue", "ORDER", "FIFO"],
    ] {
        let e = fails(&mut c, &cmd);
        assert!(e.starts_with("OOM"), "{}: {e}", show_args(&cmd));
    }
    assert_eq!(digest(&mut c, "mq"), d);
    assert!(!exists(&mut c, "new-queue"));
    // Workers and readers still work.
    assert_eq!(qlen(&mut c, "mq"), len);
    assert_eq!(
        state(&mut c, "mq", &key_of("m3")).as_deref(),
        Some("queued")
    );
    ok(&mut c, &args!["ORCA.STATS", "mq"]);
    ok(&mut c, &args!["ORCA.LIST", "mq", "LIMIT", 5]);
    let h = held("mq", &pop(&mut c, "mq", LONG).expect("POP under OOM"));
    assert_eq!(state(&mut c, "mq", &h.key).as_deref(), Some("leased"));
    ok(&mut c, &args!["ORCA.EXTEND", "mq", &h.key, &h.lease, LONG]);
    assert_eq!(as_int(&ack(&mut c, &h)), 1);
    let h = held("mq", &pop(&mut c, "mq", LONG).unwrap());
    ok(
        &mut c,
        &args!["ORCA.NACK", "mq", &h.key, &h.lease, "DELAY", LONG],
    );
    assert_eq!(qlen(&mut c, "mq"), len - 2);
    assert_check(&mut c, "mq");
    // Room again: enqueue works.
    ok(&mut c, &args!["CONFIG", "SET", "maxmemory", 0]);
    enqueue(&mut c, "mq", "late", None, 0);
    assert_eq!(qlen(&mut c, "mq"), len - 1);
}

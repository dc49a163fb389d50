//! The checks behind the cargo-fuzz targets (`fuzz_targets/*.rs` call these).
//! Plain Rust with no libFuzzer dependency, so the same functions replay the
//! committed corpus on stable (`tests/props/fuzz_corpus.rs` in the main
//! crate includes this file as a module).
//!
//! - `config`: `parse_config` on arbitrary bytes: never panics; what it
//!   accepts is in range and can be enqueued; the limited parser is stricter;
//!   and it is differential: the scanner (`src/core/scan.rs`) accepts
//!   exactly what the serde_json reference (`config_ref.rs`) accepts and
//!   reads the same `JobConfig`, with and without limits, also with the
//!   input wrapped as the `key` value of a config and as a skipped field.
//! - `codec`: `Queue::decode` on arbitrary bytes: never panics; if it
//!   accepts, `check()` is Ok, encode/decode round-trips byte for byte (also
//!   split into AOF-style parts), and a few operations keep `check()` Ok,
//!   including `absorb` (what `ORCA.IMPORT` does) into a non-empty queue.
//! - `ops`: arbitrary bytes as a sequence of core operations (enqueue,
//!   immediate, reenqueue, move, delete, pop_deliveries, ack, nack, extend,
//!   cancel, tick, dead requeue/purge, order, clock changes, codec round
//!   trips) with the clock as input: `check()` after each, and an operation
//!   that fails changes nothing.

#[path = "config_ref.rs"]
pub mod config_ref;

use orca::core::config::{parse_config_limited, valid_collation_name, ConfigLimits};
use orca::core::inspect::metadata_matches;
use orca::core::{
    decode_key, encode_key, parse_config, JobConfig, JobKey, Move, Order, Policy, Queue, MAX_TIME,
    SEQ_LOAD_LIMIT,
};

/// Bytes consumed front to back; reads past the end give zeros.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }
    /// A time or duration: small values mostly, edge values sometimes.
    pub fn time(&mut self) -> i64 {
        match self.u8() % 16 {
            0 => 0,
            1 => MAX_TIME,
            2 => MAX_TIME - self.u16() as i64,
            3 => -1 - self.u8() as i64,
            4 => i64::MAX,
            5 => i64::MIN,
            6 => self.u64() as i64,
            _ => self.u16() as i64 * 16,
        }
    }
    pub fn bytes(&mut self, max: usize) -> &'a [u8] {
        let n = (self.u8() as usize).min(max).min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
}

/// Bugs already reported can be let through while fuzzing for others:
/// `ORCA_FUZZ_ALLOW=absorb-nonce,...` (never in the corpus replay test).
fn known_bug(name: &str) -> bool {
    static ALLOW: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    ALLOW
        .get_or_init(|| {
            std::env::var("ORCA_FUZZ_ALLOW")
                .unwrap_or_default()
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .iter()
        .any(|a| a == name)
}

fn must_check(q: &Queue, what: &str) {
    if let Err(e) = q.check() {
        panic!("check() failed after {what}: {e}");
    }
}

/// Encode, decode, and make sure nothing was lost.
fn round_trip(q: &Queue, what: &str) -> Queue {
    let enc = q.encode();
    let back = Queue::decode(&enc).unwrap_or_else(|e| panic!("decode(encode()) after {what}: {e}"));
    assert!(
        back.encode() == enc,
        "encode/decode is not a round trip after {what}"
    );
    assert_eq!(
        back.len(),
        q.len(),
        "length changed in a round trip after {what}"
    );
    assert_eq!(
        back.pop_order(),
        q.pop_order(),
        "pop order changed in a round trip"
    );
    back
}

// ---------------------------------------------------------------------------
// config
// ---------------------------------------------------------------------------

/// Wrap `data` the way a field of a config would hold it: inside a string
/// (`"key":"<data>"`) and as a skipped value (`"x":<data>`), so the
/// byte-level fuzzing reaches the string and skip paths with few bytes.
fn config_wrappings(data: &[u8]) -> [Vec<u8>; 3] {
    let mut as_key = b"{\"key\":\"".to_vec();
    as_key.extend_from_slice(data);
    as_key.extend_from_slice(b"\"}");
    let mut skipped = b"{\"key\":\"k\",\"x\":".to_vec();
    skipped.extend_from_slice(data);
    skipped.extend_from_slice(b"}");
    let mut in_collation = b"{\"key\":\"k\",\"collation\":{\"type\":\"user\",\"id\":".to_vec();
    in_collation.extend_from_slice(data);
    in_collation.extend_from_slice(b"}}");
    [as_key, skipped, in_collation]
}

pub fn config(data: &[u8]) {
    let plain = parse_config(data);
    let limits = ConfigLimits {
        max_key_len: 8,
        max_collation_id_len: 4,
        max_gate_len: 5,
    };
    for l in [&ConfigLimits::NONE, &limits] {
        if let Err(e) = config_ref::compare(data, l) {
            panic!("{e}");
        }
    }
    for wrapped in config_wrappings(data) {
        if let Err(e) = config_ref::compare(&wrapped, &ConfigLimits::NONE) {
            panic!("{e}");
        }
    }
    let limited = parse_config_limited(data, &limits);
    match &plain {
        Ok(c) => {
            assert!(
                (0..=MAX_TIME).contains(&c.priority),
                "priority out of range"
            );
            if let Some(n) = &c.collation {
                assert!(valid_collation_name(n), "invalid collation name {n:?}");
            }
            let shown = encode_key(&c.job_key);
            assert_eq!(shown.len(), 44);
            assert!(!shown.contains('.'));
            assert_eq!(decode_key(shown.as_bytes()), Some(c.job_key));
            if let Ok(l) = &limited {
                assert_eq!(l, c, "the limited parser read the config differently");
            }
            // Anything accepted can be enqueued at any valid time.
            let mut q = Queue::new(Order::Lifo);
            match q.enqueue(c, data, 0) {
                Ok(_) => must_check(&q, "enqueue of a fuzzed config"),
                Err(e) => panic!("accepted config cannot be enqueued: {e}"),
            }
            let _ = q.put_immediate(c, data, MAX_TIME);
            must_check(&q, "put_immediate of a fuzzed config");
        }
        Err(e) => {
            let _ = e.to_string();
            assert!(
                limited.is_err(),
                "the limited parser accepted what the plain one refused"
            );
        }
    }
    let _ = decode_key(data);
    let _ = metadata_matches(data, "course", "cs2500");
    let _ = metadata_matches(data, "", "");
}

// ---------------------------------------------------------------------------
// codec
// ---------------------------------------------------------------------------

const POLICY: Policy = Policy {
    max_attempts: 2,
    retry_base: 1000,
    retry_cap: 60_000,
};

/// Run `op`; if it fails, the queue must be exactly as before.
fn unchanged_on_err<T, E: std::fmt::Debug>(
    q: &mut Queue,
    what: &str,
    op: impl FnOnce(&mut Queue) -> Result<T, E>,
) -> Option<T> {
    let before = q.encode();
    match op(q) {
        Ok(v) => {
            must_check(q, what);
            Some(v)
        }
        Err(_) => {
            assert!(q.encode() == before, "a failed {what} changed the queue");
            must_check(q, what);
            None
        }
    }
}

fn host_config(name: &str, coll: Option<&str>) -> (JobConfig, Vec<u8>) {
    let coll = coll
        .map(|c| {
            let (t, id) = c.split_once('.').unwrap_or(("user", "1"));
            format!(",\"collation\":{{\"type\":\"{t}\",\"id\":\"{id}\"}}")
        })
        .unwrap_or_default();
    let json = format!("{{\"key\":\"{name}\",\"response_url\":\"http://cb/{name}\"{coll}}}");
    (
        parse_config(json.as_bytes()).expect("host config parses"),
        json.into_bytes(),
    )
}

/// Whatever was accepted must stay loadable after every time-driven change
/// (ticks take sequence numbers without asking).
fn reloadable_after_ticks(mut q: Queue, what: &str) {
    for now in [1_700_000_000_000, MAX_TIME] {
        q.tick(now, &POLICY);
        if let Err(e) = Queue::decode(&q.encode()) {
            if known_bug("counter-room") {
                return;
            }
            panic!("{what}: the queue cannot be loaded again after tick({now}): {e}");
        }
    }
}

/// A host queue for `absorb` with a job and a running lease of its own.
fn host_with_lease(name: &str) -> Queue {
    let mut host = Queue::new(Order::Lifo);
    for n in [name, "other"] {
        let (cfg, payload) = host_config(&format!("{name}-{n}"), None);
        host.enqueue(&cfg, &payload, 1).expect("host enqueue");
    }
    host.pop_deliveries(1, 10, 1, &POLICY).expect("host pop");
    host
}

pub fn codec(data: &[u8]) {
    // The counters at the loaders' edge (bytes 10..18 of the standard
    // header hold next_seq): what is accepted there must stay loadable,
    // alone and merged into a queue with leases of its own.
    if data.len() >= 18 && data[..8] == 18u64.to_le_bytes() {
        for v in [SEQ_LOAD_LIMIT, SEQ_LOAD_LIMIT - 1, SEQ_LOAD_LIMIT - 2] {
            let mut d = data.to_vec();
            d[10..18].copy_from_slice(&v.to_le_bytes());
            if let Ok(q) = Queue::decode(&d) {
                reloadable_after_ticks(q, "decode with the counter at the edge");
                let mut host = host_with_lease("edge");
                if let Ok(q) = Queue::decode(&d) {
                    if host.absorb(q).is_ok() {
                        reloadable_after_ticks(host, "absorb with the counter at the edge");
                    }
                }
            }
        }
    }
    let Ok(q) = Queue::decode(data) else {
        return;
    };
    must_check(&q, "decode");
    let enc = q.encode();
    let mut q = round_trip(&q, "decode");

    // The AOF-rewrite form: header + all units, and in two batches merged.
    let header = q.encode_header();
    let mut units: Vec<Vec<u8>> = Vec::new();
    q.for_each_unit(|u| units.push(u.to_vec()));
    assert_eq!(units.len(), q.unit_count());
    let whole = Queue::encode_parts(&header, units.iter().map(|u| u.as_slice()));
    let back = Queue::decode(&whole).expect("decode of encode_parts");
    assert!(back.encode() == enc, "encode_parts differs from encode");
    let half = units.len() / 2;
    let a = Queue::encode_parts(&header, units[..half].iter().map(|u| u.as_slice()));
    let b = Queue::encode_parts(&header, units[half..].iter().map(|u| u.as_slice()));
    // A batch of whole units is valid on its own, and the batches merge.
    if let (Ok(mut qa), Ok(qb)) = (Queue::decode(&a), Queue::decode(&b)) {
        if qa.absorb(qb).is_ok() {
            must_check(&qa, "absorb of the second AOF batch");
        }
    }

    // Read-only inspection at a few clocks.
    for now in [0, 1_700_000_000_000, MAX_TIME] {
        let _ = q.stats(now);
        let _ = q.list(0, 10, None);
        let _ = q.list(1, 5, Some(("course", "cs2500")));
        for k in q.pop_order().iter().take(4) {
            let _ = q.states(k);
            let _ = q.position(k);
            let _ = q.info(k);
            let _ = q.result(k, now);
        }
        let _ = q.dead_list(0, 10);
        let _ = q.next_deadline();
        let _ = q.mem_usage();
    }

    // A few operations on the decoded queue.
    let now = 1_700_000_000_000;
    unchanged_on_err(&mut q, "pop_deliveries", |q| {
        q.pop_deliveries(now, 60_000, 3, &POLICY)
    });
    unchanged_on_err(&mut q, "pop_deliveries(lease 0)", |q| {
        q.pop_deliveries(now, 0, 1, &POLICY)
    });
    q.tick(MAX_TIME - 1, &POLICY);
    must_check(&q, "tick");
    let (cfg, payload) = host_config("new", Some("team.9"));
    unchanged_on_err(&mut q, "enqueue", |q| {
        q.enqueue(&cfg, &payload, now).map(|_| ())
    });
    if let Some(k) = q.pop_order().last().copied() {
        unchanged_on_err(&mut q, "move release", |q| {
            q.move_job(&k, Move::Release, now).map(|_| ())
        });
    }
    if let Some(k) = q.pop_order().first().copied() {
        unchanged_on_err(&mut q, "move delay", |q| {
            q.move_job(&k, Move::Delay { buffer: 10_000 }, now)
                .map(|_| ())
        });
        unchanged_on_err(&mut q, "cancel", |q| q.cancel(&k));
    }
    let dead: Vec<JobKey> = q.dead_list(0, 2).into_iter().map(|(k, _)| k).collect();
    for k in dead {
        unchanged_on_err(&mut q, "dead requeue", |q| {
            q.dead_requeue(&k, now).map(|_| ())
        });
    }
    q.dead_purge();
    must_check(&q, "dead purge");
    let copy = q.deep_copy().expect("deep copy of a valid queue");
    assert!(copy.encode() == q.encode(), "deep copy differs");

    // IMPORT into a queue that already holds jobs: refused, or valid.
    for (name, coll, now) in [
        ("host", None, 1),
        ("host2", Some("user.1"), 1_700_000_000_000),
    ] {
        let mut host = Queue::new(Order::Lifo);
        let (cfg, payload) = host_config(name, coll);
        host.enqueue(&cfg, &payload, now).expect("host enqueue");
        let incoming = Queue::decode(data).expect("decoded before");
        let before = host.encode();
        match host.absorb(incoming) {
            Ok(()) => {
                if let Err(e) = host.check() {
                    if known_bug("absorb-nonce") {
                        continue;
                    }
                    panic!("absorb (ORCA.IMPORT) accepted a queue and broke an invariant: {e}");
                }
                round_trip(&host, "absorb");
            }
            Err(_) => assert!(
                host.encode() == before,
                "a refused absorb changed the queue"
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// ops
// ---------------------------------------------------------------------------

struct Ops {
    q: Queue,
    now: i64,
    policy: Policy,
    /// Lease tokens handed out (and some made up), with their keys.
    leases: Vec<(JobKey, u64)>,
}

fn name_of(i: u8) -> String {
    format!("j{}", i % 24)
}

fn job_config(inp: &mut Input) -> (JobConfig, Vec<u8>) {
    let name = name_of(inp.u8());
    let url = match inp.u8() % 3 {
        0 => String::new(),
        1 => "u".to_string(),
        _ => format!("http://cb/{name}"),
    };
    let coll = match inp.u8() % 5 {
        0 | 1 => String::new(),
        2 => format!(
            ",\"collation\":{{\"type\":\"user\",\"id\":\"{}\"}}",
            inp.u8() % 4
        ),
        3 => format!(
            ",\"collation\":{{\"type\":\"team\",\"id\":{}}}",
            inp.u8() % 4
        ),
        _ => ",\"collation\":null".to_string(),
    };
    let priority = match inp.u8() % 8 {
        0 => MAX_TIME,
        1 => 0,
        2 => inp.u32() as i64,
        _ => inp.u16() as i64,
    };
    let json = format!(
        "{{\"key\":\"{name}\",\"response_url\":\"{url}\"{coll},\"priority\":{priority},\"metadata_table\":{{\"course\":\"cs{}\"}}}}",
        inp.u8() % 3
    );
    match parse_config(json.as_bytes()) {
        Ok(c) => (c, json.into_bytes()),
        Err(e) => panic!("generated config {json} refused: {e}"),
    }
}

impl Ops {
    fn key(&mut self, inp: &mut Input) -> JobKey {
        let order = self.q.pop_order();
        match inp.u8() % 4 {
            0 | 1 if !order.is_empty() => order[inp.u8() as usize % order.len()],
            2 if !self.leases.is_empty() => self.leases[inp.u8() as usize % self.leases.len()].0,
            _ => {
                let (c, _) = job_config(inp);
                c.job_key
            }
        }
    }

    fn lease(&mut self, inp: &mut Input) -> (JobKey, u64) {
        match inp.u8() % 8 {
            0 => (self.key(inp), inp.u64()),
            1 if !self.leases.is_empty() => {
                // A real token with another key.
                let t = self.leases[inp.u8() as usize % self.leases.len()].1;
                (self.key(inp), t)
            }
            _ if !self.leases.is_empty() => self.leases[inp.u8() as usize % self.leases.len()],
            _ => (self.key(inp), 1 + inp.u8() as u64),
        }
    }

    fn step(&mut self, inp: &mut Input) {
        let now = self.now;
        match inp.u8() % 20 {
            0..=3 => {
                let (c, p) = job_config(inp);
                unchanged_on_err(&mut self.q, "enqueue", |q| {
                    q.enqueue(&c, &p, now).map(|_| ())
                });
            }
            4 => {
                let (c, p) = job_config(inp);
                unchanged_on_err(&mut self.q, "put_immediate", |q| {
                    q.put_immediate(&c, &p, now).map(|_| ())
                });
            }
            5 => {
                let (c, p) = job_config(inp);
                let at = inp.time();
                unchanged_on_err(&mut self.q, "reenqueue", |q| {
                    q.put_immediate(&c, &p, at).map(|_| ())
                });
            }
            6 => {
                let k = self.key(inp);
                let how = if inp.u8().is_multiple_of(2) {
                    Move::Release
                } else {
                    Move::Delay { buffer: inp.time() }
                };
                unchanged_on_err(&mut self.q, "move", |q| {
                    q.move_job(&k, how, now).map(|_| ())
                });
            }
            7 => {
                let k = self.key(inp);
                unchanged_on_err(&mut self.q, "delete", |q| q.delete(&k));
            }
            8..=10 => {
                let lease = match inp.u8() % 4 {
                    0 => 0,
                    1 => inp.time(),
                    _ => inp.u16() as i64,
                };
                let count = 1 + inp.u8() as usize % 4;
                let policy = self.policy;
                if let Some((ds, _)) = unchanged_on_err(&mut self.q, "pop_deliveries", |q| {
                    q.pop_deliveries(now, lease, count, &policy)
                }) {
                    for d in ds {
                        if let Some((t, deadline)) = d.lease {
                            assert!(deadline >= now, "lease deadline before now");
                            self.leases.push((d.job.key, t));
                        }
                    }
                    if self.leases.len() > 64 {
                        self.leases.drain(..32);
                    }
                }
            }
            11 => {
                let (k, t) = self.lease(inp);
                let result = if inp.u8().is_multiple_of(2) {
                    Some(&b"{}"[..])
                } else {
                    None
                };
                let ttl = inp.time();
                unchanged_on_err(&mut self.q, "ack", |q| q.ack(&k, t, result, now, ttl));
            }
            12 => {
                let (k, t) = self.lease(inp);
                let delay = match inp.u8() % 3 {
                    0 => None,
                    1 => Some(0),
                    _ => Some(inp.time()),
                };
                let policy = self.policy;
                unchanged_on_err(&mut self.q, "nack", |q| q.nack(&k, t, delay, now, &policy));
            }
            13 => {
                let (k, t) = self.lease(inp);
                let ms = inp.time();
                unchanged_on_err(&mut self.q, "extend", |q| q.extend(&k, t, ms, now));
            }
            14 => {
                let k = self.key(inp);
                unchanged_on_err(&mut self.q, "cancel", |q| q.cancel(&k));
            }
            15 => {
                let policy = self.policy;
                if !(0..=MAX_TIME).contains(&now) && known_bug("tick-now") {
                    // The adapter only ticks with a clock in range.
                    return;
                }
                self.q.tick(now, &policy);
                if let Err(e) = self.q.check() {
                    panic!("check() failed after tick(now = {now}): {e}");
                }
            }
            16 => {
                // The clock: forward mostly, sometimes anywhere (pinned NOW).
                self.now = match inp.u8() % 6 {
                    0 => inp.time(),
                    1 => self.now.saturating_add(inp.u32() as i64),
                    _ => self.now.saturating_add(inp.u16() as i64),
                };
            }
            17 => {
                let k = self.key(inp);
                if inp.u8().is_multiple_of(3) {
                    self.q.dead_purge();
                    must_check(&self.q, "dead purge");
                } else {
                    unchanged_on_err(&mut self.q, "dead requeue", |q| {
                        q.dead_requeue(&k, now).map(|_| ())
                    });
                }
            }
            18 => {
                match inp.u8() % 4 {
                    0 => self.q.set_order(Order::Fifo),
                    1 => self.q.set_order(Order::Lifo),
                    2 => {
                        self.policy = Policy {
                            max_attempts: (inp.u8() % 4) as u32,
                            retry_base: inp.time().clamp(0, MAX_TIME),
                            retry_cap: inp.time().clamp(0, MAX_TIME),
                        }
                    }
                    _ => {
                        let _ = self.q.stats(now);
                        let _ = self.q.list(inp.u8() as usize % 4, 5, None);
                        let k = self.key(inp);
                        let _ = self.q.states(&k);
                    }
                }
                must_check(&self.q, "settings");
            }
            _ => {
                self.q = round_trip(&self.q, "ops");
            }
        }
    }
}

pub fn ops(data: &[u8]) {
    let mut inp = Input::new(data);
    let order = if inp.u8().is_multiple_of(2) {
        Order::Lifo
    } else {
        Order::Fifo
    };
    let mut s = Ops {
        q: Queue::new(order),
        now: 1_700_000_000_000 + inp.u16() as i64,
        policy: POLICY,
        leases: Vec::new(),
    };
    let trace = std::env::var_os("ORCA_FUZZ_TRACE").is_some();
    let mut steps = 0;
    while !inp.is_empty() && steps < 400 {
        if trace {
            eprintln!(
                "step {steps}: next op byte {:?} (op {}), now {}, queued {}, {} leases known",
                inp.data.first(),
                inp.data.first().map(|b| b % 20).unwrap_or(0),
                s.now,
                s.q.len(),
                s.leases.len()
            );
        }
        s.step(&mut inp);
        steps += 1;
    }
    round_trip(&s.q, "the last operation");
    let _ = inp.bytes(0);
}

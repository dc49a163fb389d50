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
//! - `codec` (`codec.rs`): `Queue::decode` on arbitrary bytes (V1, and V2
//!   with settings, held jobs, gates and submission windows): never
//!   panics; if it accepts, `check()` is Ok, encode/decode round-trips byte
//!   for byte (also split into AOF-style parts), and operations keep
//!   `check()` Ok: the worker's, the gates' (open, drop, hold), settings
//!   changes (running cap, lifetime, bounds) with ticks, `maintain`, and
//!   `absorb` (what `ORCA.IMPORT` does) into a non-empty queue.
//! - `ops` (`ops.rs`): arbitrary bytes as a sequence of core operations
//!   (enqueue, immediate, reenqueue, move, delete, pop_deliveries, ack,
//!   nack, extend, cancel, tick, dead requeue/purge, order, gates, queue
//!   settings, `maintain`, a rush of jobs, inspection, clock changes, codec
//!   round trips) with the clock as input: `check()` after each, an
//!   operation that fails changes nothing, and after a round trip the
//!   decoded twin (which never compacts) answers and encodes identically.

#[path = "config_ref.rs"]
pub mod config_ref;

#[path = "codec.rs"]
mod codec;
#[path = "ops.rs"]
mod ops;

pub use codec::codec;
pub use ops::ops;

use orca::core::config::{parse_config_limited, valid_collation_name, ConfigLimits};
use orca::core::inspect::metadata_matches;
use orca::core::{decode_key, encode_key, parse_config, Order, Policy, Queue, MAX_TIME};

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
    /// The next byte, not consumed.
    pub fn peek(&self) -> Option<u8> {
        self.data.first().copied()
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
pub(crate) fn known_bug(name: &str) -> bool {
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

pub(crate) fn must_check(q: &Queue, what: &str) {
    if let Err(e) = q.check() {
        panic!("check() failed after {what}: {e}");
    }
}

/// Encode, decode, and make sure nothing was lost.
pub(crate) fn round_trip(q: &Queue, what: &str) -> Queue {
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

/// The retry policy of the `codec` and `ops` targets.
pub(crate) const POLICY: Policy = Policy {
    max_attempts: 2,
    retry_base: 1000,
    retry_cap: 60_000,
};

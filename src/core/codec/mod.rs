//! The serialized form of a queue (RDB, `DUMP`/`RESTORE`, digests, AOF
//! rewrite without preamble).
//!
//! A queue is written as one header (version, settings, counters) followed
//! by self-contained *units*: a single job (immediate or without collation)
//! with its reservation, one whole collation (its stack in pop order with
//! stack keys, and its reservations), a held job, an empty closed gate, a
//! collation's submission window, a lease, a delayed job, a dead letter, a
//! result, a cancelled lease. Each unit is valid on its own, so a loader can
//! check each before accepting it and never holds a half-built queue; units
//! may come in any order. They are written in a canonical order (single jobs
//! in reservation order, collations by name, ...), so two equal queues
//! encode to the same bytes and the digest compares them.
//!
//! Decoding treats the bytes as hostile: every length is bounded by what is
//! left, nothing is indexed blindly, and the result passes `Queue::check`.
//!
//! Versions: 1 (order and counters in the header; stacks without keys), 2
//! (settings in the header, stack keys, held jobs, gates, windows) and 3
//! (what an attempt keeps: a lease's start time and worker name, the error
//! text of a failed attempt on a retry or a dead letter; a kept result's
//! finish time, delivery, arrival, attempts and collation). A loader reads
//! all three and refuses newer ones; what an older version did not keep
//! loads as unknown (times 0, no name, no text).
//!
//! This file: the header, the unit framing and the loader (`QueueBuilder`);
//! the units by kind: `records.rs` (single jobs, collations), `policies.rs`
//! (held jobs, gates, windows), `work.rs` (leases, retries, dead letters,
//! results, cancellations); `io.rs` the bytes; `absorb.rs` merging a queue
//! into another.

use std::collections::HashSet;

mod absorb;
mod io;
mod policies;
mod records;
mod work;

use io::{Reader, Writer};

use super::error::QueueError;
use super::limits::SEQ_LOAD_LIMIT;
use super::queue::{Order, Queue, ResKey, Settings};
use super::settings::{AutoDelay, MAX_COUNT_SETTING};

/// Encoding versions. A loader reads every version up to `ENCODING_CURRENT`
/// and refuses newer ones.
pub const ENCODING_V1: u8 = 1;
/// Version 2: settings in the header, stack keys, held jobs, gates,
/// submission windows.
pub const ENCODING_V2: u8 = 2;
/// Version 3: a lease's `started_at` and `worker`, a retry's and a dead
/// letter's `error`, a
/// kept result's `finished_at`, `token`, `created_at`, `attempts` and
/// `collation`.
pub const ENCODING_V3: u8 = 3;
pub const ENCODING_CURRENT: u8 = ENCODING_V3;

/// Written in place of the rest of a queue whose save was cut short by an
/// internal error (see `datatype.rs`): loaders refuse it, so a partial queue
/// never loads as if it were whole. It can stand where a header or a unit
/// stands; its first byte is neither a version nor a unit type.
pub const SAVE_FAILED: &[u8] = b"\xffORCA: this queue's save failed";

fn save_failed() -> QueueError {
    corrupt(
        "this queue was saved by a server that hit an internal error while saving it \
         (see that server's log); a partial queue is not loaded",
    )
}

const UNIT_SINGLE: u8 = 1;
const UNIT_COLLATION: u8 = 2;
const UNIT_LEASE: u8 = 3;
const UNIT_DELAYED: u8 = 4;
const UNIT_DEAD: u8 = 5;
const UNIT_RESULT: u8 = 6;
const UNIT_CANCELLED: u8 = 7;
const UNIT_HELD: u8 = 8;
const UNIT_GATE: u8 = 9;
const UNIT_WINDOW: u8 = 10;

/// Longest gate name a loader accepts (bytes).
pub const MAX_GATE_NAME: usize = 1 << 20;

fn corrupt(msg: &str) -> QueueError {
    QueueError::Corrupt(msg.to_string())
}

fn order_byte(o: Order) -> u8 {
    match o {
        Order::Lifo => 0,
        Order::Fifo => 1,
    }
}

impl Queue {
    /// The header: encoding version, settings and the counters.
    pub fn encode_header(&self) -> Vec<u8> {
        let s = &self.settings;
        let mut w = Writer(Vec::with_capacity(82));
        w.u8(ENCODING_CURRENT);
        w.u8(order_byte(s.order));
        w.i64(self.records.next_seq());
        w.i64(self.records.front_tie());
        w.i64(s.lifetime);
        w.i64(s.autodelay.window);
        w.i64(s.autodelay.step);
        w.i64(s.autodelay.cap);
        w.u32(s.max_running);
        w.u64(s.dead_max);
        w.i64(s.dead_ttl);
        w.u64(s.result_max);
        w.0
    }

    /// Number of units `for_each_unit` produces.
    pub fn unit_count(&self) -> usize {
        let gates = self.gates.gates().filter(|g| g.is_empty()).count();
        (self.len() - self.records.stacked())
            + self.records.collation_count()
            + self.gates.held_count()
            + gates
            + self.window.len()
            + self.work.lease_count()
            + self.work.delayed_count()
            + self.work.dead_count()
            + self.work.result_count()
            + self.work.cancelled_count()
    }

    /// Call `f` with each encoded unit, in canonical order.
    pub fn for_each_unit(&self, mut f: impl FnMut(&[u8])) {
        let mut w = Writer(Vec::new());
        self.write_record_units(&mut w, &mut f);
        self.write_gate_units(&mut w, &mut f);
        self.write_window_units(&mut w, &mut f);
        self.write_work_units(&mut w, &mut f);
    }

    /// The whole queue as one buffer: header, unit count, then each unit
    /// length-prefixed. Used by tests, fuzzing and digests.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.bytes(&self.encode_header());
        w.u64(self.unit_count() as u64);
        self.for_each_unit(|u| w.bytes(u));
        w.0
    }

    /// The `encode` format from a header and some of the units (the blobs of
    /// `ORCA.IMPORT`, one per batch of an AOF rewrite).
    pub fn encode_parts<'u>(
        header: &[u8],
        units: impl ExactSizeIterator<Item = &'u [u8]>,
    ) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.bytes(header);
        w.u64(units.len() as u64);
        for u in units {
            w.bytes(u);
        }
        w.0
    }

    /// An independent copy (for `COPY`): nothing shared with `self`.
    pub fn deep_copy(&self) -> Result<Queue, QueueError> {
        Queue::decode(&self.encode())
    }

    /// Inverse of `encode`.
    pub fn decode(buf: &[u8]) -> Result<Queue, QueueError> {
        let mut r = Reader { buf };
        let mut b = QueueBuilder::new(r.bytes()?)?;
        let n = r.u64()?;
        for _ in 0..n {
            b.add_unit(r.bytes()?)?;
        }
        r.done()?;
        b.finish()
    }
}

/// Builds a queue from a header and units, validating each unit before it is
/// applied. `finish` runs the full invariant check.
pub struct QueueBuilder {
    q: Queue,
    /// The encoding version of the header.
    version: u8,
    max_seq: i64,
    min_tie: i64,
    /// Gates declared closed and empty by a gate unit.
    empty_gates: HashSet<Vec<u8>>,
    /// Merging into an existing queue (`absorb`): a gate the queue already
    /// has closed merges instead of being a duplicate.
    merging: bool,
}

impl QueueBuilder {
    pub fn new(header: &[u8]) -> Result<Self, QueueError> {
        if header == SAVE_FAILED {
            return Err(save_failed());
        }
        let mut r = Reader { buf: header };
        let version = r.u8()?;
        if version == 0 || version > ENCODING_CURRENT {
            return Err(QueueError::Corrupt(format!(
                "encoding version {version} is not supported (this module reads 1..={ENCODING_CURRENT})"
            )));
        }
        let order = match r.u8()? {
            0 => Order::Lifo,
            1 => Order::Fifo,
            _ => return Err(corrupt("unknown collation order")),
        };
        let next_seq = r.i64()?;
        let front_tie = r.i64()?;
        let mut settings = Settings {
            order,
            ..Settings::default()
        };
        if version >= ENCODING_V2 {
            settings.lifetime = r.i64()?;
            settings.autodelay = AutoDelay {
                window: r.i64()?,
                step: r.i64()?,
                cap: r.i64()?,
            };
            settings.max_running = r.u32()?;
            settings.dead_max = r.u64()?;
            settings.dead_ttl = r.i64()?;
            settings.result_max = r.u64()?;
            if settings.dead_max > MAX_COUNT_SETTING || settings.result_max > MAX_COUNT_SETTING {
                return Err(corrupt("settings out of range"));
            }
            settings
                .validate()
                .map_err(|e| QueueError::Corrupt(format!("settings: {e}")))?;
        }
        r.done()?;
        if !(1..=SEQ_LOAD_LIMIT).contains(&next_seq) || !(-SEQ_LOAD_LIMIT..=0).contains(&front_tie)
        {
            return Err(corrupt("counters out of range"));
        }
        let mut q = Queue::with_settings(settings);
        q.records.set_counters(next_seq, front_tie);
        Ok(QueueBuilder {
            q,
            version,
            max_seq: 0,
            min_tie: 0,
            empty_gates: HashSet::new(),
            merging: false,
        })
    }

    /// A stack key (or a held job's arrival) was taken from the queue's
    /// sequence before it was saved: below the header's counter. (Keys past
    /// it would not stay below later arrivals.)
    pub(super) fn check_skey(&self, skey: i64) -> Result<(), QueueError> {
        if skey.unsigned_abs() >= self.q.records.next_seq().unsigned_abs() {
            return Err(corrupt("stack key beyond the queue's sequence"));
        }
        Ok(())
    }

    pub(super) fn note(&mut self, rk: ResKey, nonce: u64) {
        self.max_seq = self.max_seq.max(rk.tie).max(nonce as i64);
        self.min_tie = self.min_tie.min(rk.tie);
    }

    /// Validate one unit against what is already built, then apply it.
    pub fn add_unit(&mut self, unit: &[u8]) -> Result<(), QueueError> {
        if unit == SAVE_FAILED {
            return Err(save_failed());
        }
        let mut r = Reader { buf: unit };
        let kind = r.u8()?;
        if kind >= UNIT_HELD && self.version < ENCODING_V2 {
            return Err(corrupt("unknown unit type"));
        }
        match kind {
            UNIT_SINGLE => self.add_single(&mut r),
            UNIT_COLLATION => self.add_collation(&mut r),
            UNIT_LEASE => self.add_lease(&mut r),
            UNIT_DELAYED => self.add_delayed(&mut r),
            UNIT_DEAD => self.add_dead(&mut r),
            UNIT_RESULT => self.add_result(&mut r),
            UNIT_CANCELLED => self.add_cancelled(&mut r),
            UNIT_HELD => self.add_held(&mut r),
            UNIT_GATE => self.add_gate(&mut r),
            UNIT_WINDOW => self.add_window(&mut r),
            _ => Err(corrupt("unknown unit type")),
        }
    }

    /// Counters ahead of everything loaded, the cap index rebuilt, then the
    /// full check.
    pub(super) fn settle(&mut self) -> Result<(), QueueError> {
        // Counters must stay ahead of everything loaded so new ties and
        // nonces remain unique.
        let r = &mut self.q.records;
        let next_seq = r.next_seq().max(self.max_seq.saturating_add(1));
        let front_tie = r.front_tie().min(self.min_tie);
        r.set_counters(next_seq, front_tie);
        // Ticks take numbers without asking (`Queue::tick_reserve`): leave
        // room for all of them, so the queue can always be saved and loaded
        // again.
        let pending = self.q.tick_reserve();
        if next_seq.saturating_add(pending) > SEQ_LOAD_LIMIT {
            return Err(corrupt("counters out of range"));
        }
        self.q.rebuild_caps();
        self.q.check().map_err(QueueError::Corrupt)
    }

    pub fn finish(mut self) -> Result<Queue, QueueError> {
        self.settle()?;
        Ok(self.q)
    }
}

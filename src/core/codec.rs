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

use std::collections::{HashSet, VecDeque};

use super::config::{valid_collation_name, JobKey};
use super::error::QueueError;
use super::limits::{valid_time, MAX_TIME, SEQ_LOAD_LIMIT};
use super::queue::{LoadedJob, Order, Queue, ResKey, Settings};
use super::settings::{AutoDelay, MAX_COUNT_SETTING};
use super::work::{Dead, DeathCause, Delayed, Lease, Parked, StoredResult};

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

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn optional_name(&mut self, name: Option<&str>) {
        match name {
            Some(c) => {
                self.u8(1);
                self.bytes(c.as_bytes());
            }
            None => self.u8(0),
        }
    }
    fn optional_bytes(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => {
                self.u8(1);
                self.bytes(b);
            }
            None => self.u8(0),
        }
    }
    fn parked(&mut self, p: &Parked, collation: Option<&str>) {
        self.i64(p.created_at);
        self.u32(p.attempts);
        self.u8(p.immediate as u8);
        self.optional_name(collation);
        self.bytes(&p.payload);
    }
    fn job(&mut self, key: &JobKey, created_at: i64, attempts: u32, payload: &[u8]) {
        self.0.extend_from_slice(key);
        self.i64(created_at);
        self.u32(attempts);
        self.bytes(payload);
    }
}

/// A parked job as read: created_at, attempts, immediate, collation, payload.
type RawParked<'a> = (i64, u32, bool, Option<&'a str>, &'a [u8]);

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], QueueError> {
        if n > self.buf.len() {
            return Err(corrupt("truncated"));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, QueueError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, QueueError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn i64(&mut self) -> Result<i64, QueueError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, QueueError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    fn bytes(&mut self) -> Result<&'a [u8], QueueError> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| corrupt("length too large"))?;
        self.take(n)
    }
    fn flag(&mut self, what: &str) -> Result<bool, QueueError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(QueueError::Corrupt(format!("bad {what} flag"))),
        }
    }
    fn key(&mut self) -> Result<JobKey, QueueError> {
        let mut k = [0u8; 32];
        k.copy_from_slice(self.take(32)?);
        Ok(k)
    }
    fn res(&mut self) -> Result<(ResKey, u64), QueueError> {
        let score = self.i64()?;
        let tie = self.i64()?;
        let nonce = self.u64()?;
        if !valid_time(score) {
            return Err(corrupt("reservation score out of range"));
        }
        if tie == 0
            || nonce == 0
            || nonce >= SEQ_LOAD_LIMIT as u64
            || !(-SEQ_LOAD_LIMIT..SEQ_LOAD_LIMIT).contains(&tie)
        {
            return Err(corrupt("reservation tie or nonce out of range"));
        }
        Ok((ResKey { score, tie }, nonce))
    }
    fn job(&mut self) -> Result<(JobKey, i64, u32, &'a [u8]), QueueError> {
        let key = self.key()?;
        let created_at = self.i64()?;
        if !valid_time(created_at) {
            return Err(corrupt("created_at out of range"));
        }
        let attempts = self.u32()?;
        let payload = self.bytes()?;
        Ok((key, created_at, attempts, payload))
    }
    fn time(&mut self) -> Result<i64, QueueError> {
        let t = self.i64()?;
        if !valid_time(t) {
            return Err(corrupt("time out of range"));
        }
        Ok(t)
    }
    fn token(&mut self) -> Result<u64, QueueError> {
        let t = self.u64()?;
        if t == 0 || t >= SEQ_LOAD_LIMIT as u64 {
            return Err(corrupt("lease token out of range"));
        }
        Ok(t)
    }
    fn skey(&mut self) -> Result<i64, QueueError> {
        let skey = self.i64()?;
        if !(-SEQ_LOAD_LIMIT + 1..SEQ_LOAD_LIMIT).contains(&skey) {
            return Err(corrupt("stack key out of range"));
        }
        Ok(skey)
    }
    /// Optional bytes: a flag, then the bytes if set.
    fn optional_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>, QueueError> {
        Ok(if self.flag(what)? {
            Some(self.bytes()?)
        } else {
            None
        })
    }
    fn parked(&mut self) -> Result<RawParked<'a>, QueueError> {
        let created_at = self.time()?;
        let attempts = self.u32()?;
        let immediate = self.flag("immediate")?;
        let collation = self.optional_collation()?;
        let payload = self.bytes()?;
        Ok((created_at, attempts, immediate, collation, payload))
    }
    /// A failure's text (`ORCA.NACK ... ERROR`), from version 3 on.
    fn error_text(&mut self, version: u8) -> Result<Option<&'a [u8]>, QueueError> {
        if version >= ENCODING_V3 {
            self.optional_bytes("error")
        } else {
            Ok(None)
        }
    }
    /// A collation name: UTF-8 and valid.
    fn collation_name(&mut self) -> Result<&'a str, QueueError> {
        let name =
            std::str::from_utf8(self.bytes()?).map_err(|_| corrupt("collation name not UTF-8"))?;
        if !valid_collation_name(name) {
            return Err(corrupt("invalid collation name"));
        }
        Ok(name)
    }
    /// A flag byte, then the collation name if the flag is 1.
    fn optional_collation(&mut self) -> Result<Option<&'a str>, QueueError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.collation_name()?)),
            _ => Err(corrupt("bad collation flag")),
        }
    }
    fn gate_name(&mut self) -> Result<&'a [u8], QueueError> {
        let g = self.bytes()?;
        if g.is_empty() || g.len() > MAX_GATE_NAME {
            return Err(corrupt("gate name empty or too long"));
        }
        Ok(g)
    }
    fn done(&self) -> Result<(), QueueError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(corrupt("trailing bytes"))
        }
    }
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
        w.i64(self.next_seq);
        w.i64(self.front_tie);
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
        (self.len() - self.stacked_jobs())
            + self.colls.active()
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
        let name = |c: Option<super::ids::CollId>| c.map(|c| self.name_of(c));
        for (j, n) in self.singles() {
            let job = &self.jobs[j];
            let rk = self.rk(n);
            w.0.clear();
            w.u8(UNIT_SINGLE);
            w.job(&job.key, job.created_at, self.job_attempts(j), &job.payload);
            w.optional_name(self.coll_name(job).as_deref());
            w.i64(rk.score);
            w.i64(rk.tie);
            w.u64(self.nonce_of(n));
            w.u8(self.index.aux(n).immediate() as u8);
            f(&w.0);
        }
        for c in self.collations_by_name() {
            w.0.clear();
            w.u8(UNIT_COLLATION);
            w.bytes(self.name_of(c).as_bytes());
            w.u64(self.colls.len_of(c) as u64);
            for j in self.stack(c) {
                let job = &self.jobs[j];
                w.job(&job.key, job.created_at, self.job_attempts(j), &job.payload);
                w.i64(job.skey);
            }
            for n in self.coll_reservations(c) {
                let rk = self.rk(n);
                w.i64(rk.score);
                w.i64(rk.tie);
                w.u64(self.nonce_of(n));
            }
            f(&w.0);
        }
        let mut gates: Vec<&super::gates::Gate> = self.gates.gates().collect();
        gates.sort_unstable_by(|a, b| a.name().cmp(b.name()));
        for g in &gates {
            for j in g.members() {
                let (Some(job), Some(h)) = (self.jobs.get(j), self.gates.get(j)) else {
                    continue;
                };
                w.0.clear();
                w.u8(UNIT_HELD);
                w.job(&job.key, job.created_at, self.job_attempts(j), &job.payload);
                w.optional_name(self.coll_name(job).as_deref());
                w.bytes(g.name());
                w.i64(job.skey);
                w.i64(h.priority);
                w.u8(h.immediate as u8);
                f(&w.0);
            }
            if g.is_empty() {
                w.0.clear();
                w.u8(UNIT_GATE);
                w.bytes(g.name());
                f(&w.0);
            }
        }
        let mut windows: Vec<(std::borrow::Cow<'_, str>, &VecDeque<i64>)> = self
            .window
            .records()
            .map(|(c, t)| (self.name_of(c), t))
            .collect();
        windows.sort_unstable();
        for (coll, times) in windows {
            w.0.clear();
            w.u8(UNIT_WINDOW);
            w.bytes(coll.as_bytes());
            w.u64(times.len() as u64);
            for t in times {
                w.i64(*t);
            }
            f(&w.0);
        }
        let work = &self.work;
        let mut leases: Vec<(u64, &super::work::Lease)> = work.leases().collect();
        leases.sort_unstable_by_key(|(t, _)| *t);
        for (token, l) in leases {
            w.0.clear();
            w.u8(UNIT_LEASE);
            w.u64(token);
            w.0.extend_from_slice(&l.key);
            w.i64(l.deadline);
            w.u8(l.superseded as u8);
            w.parked(&l.job, name(l.job.coll).as_deref());
            w.i64(l.started_at);
            w.optional_bytes(l.worker.as_deref());
            f(&w.0);
        }
        for (key, d) in work.delayed_page(0, usize::MAX) {
            w.0.clear();
            w.u8(UNIT_DELAYED);
            w.0.extend_from_slice(&key);
            w.i64(d.retry_at);
            w.parked(&d.job, name(d.job.coll).as_deref());
            w.optional_bytes(d.error.as_deref());
            f(&w.0);
        }
        for (key, d) in work.dead_page(0, usize::MAX) {
            w.0.clear();
            w.u8(UNIT_DEAD);
            w.0.extend_from_slice(&key);
            w.i64(d.died_at);
            w.i64(d.seq);
            w.u8(d.cause as u8);
            w.parked(&d.job, name(d.job.coll).as_deref());
            w.optional_bytes(d.error.as_deref());
            f(&w.0);
        }
        for (key, r) in work.results() {
            w.0.clear();
            w.u8(UNIT_RESULT);
            w.0.extend_from_slice(&key);
            w.i64(r.expires_at);
            w.bytes(&r.payload);
            w.i64(r.finished_at);
            w.u64(r.token);
            w.i64(r.created_at);
            w.u32(r.attempts);
            w.optional_name(r.collation.as_deref());
            f(&w.0);
        }
        for (token, until) in work.cancelled() {
            w.0.clear();
            w.u8(UNIT_CANCELLED);
            w.u64(token);
            w.i64(until);
            f(&w.0);
        }
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

    /// Merge `other` into `self` (for `ORCA.IMPORT` into an existing queue).
    /// Refused, with nothing changed, if anything of `other` collides with
    /// what `self` holds (a job key, a reservation, a nonce, a collation
    /// stack, a window, a lease token, a delayed/dead/result key). `self`'s
    /// settings are kept; closed gates merge.
    pub fn absorb(&mut self, other: Queue) -> Result<(), QueueError> {
        self.absorb_check(&other)?;
        // Apply `other` unit by unit through the loader, which cannot fail
        // now but for an internal error.
        // The merged counters, first: the units' sequence numbers (stack
        // keys, held arrivals) are below `other`'s.
        self.next_seq = self.next_seq.max(other.next_seq);
        self.front_tie = self.front_tie.min(other.front_tie);
        let mut b = QueueBuilder {
            q: std::mem::replace(self, Queue::new(Order::Lifo)),
            version: ENCODING_CURRENT,
            max_seq: other.next_seq.saturating_sub(1),
            min_tie: other.front_tie,
            empty_gates: HashSet::new(),
            merging: true,
        };
        let mut failed = None;
        other.for_each_unit(|u| {
            if failed.is_none() {
                if let Err(e) = b.add_unit(u) {
                    failed = Some(e);
                }
            }
        });
        let result = match failed {
            Some(e) => Err(e),
            None => b.settle(),
        };
        *self = b.q;
        result
    }

    /// Everything `absorb` must refuse before changing anything.
    fn absorb_check(&self, other: &Queue) -> Result<(), QueueError> {
        for (_, job) in other.jobs.iter() {
            if self.contains(&job.key) {
                return Err(corrupt("imported job already in the queue"));
            }
        }
        for n in other.index.iter() {
            if self.index.contains(other.index.key(n)) {
                return Err(corrupt("imported reservation already in the queue"));
            }
        }
        for c in other.collations_by_name() {
            if self.has_collation(&other.name_of(c)) {
                return Err(corrupt("imported collation already in the queue"));
            }
        }
        if !other.window.is_empty() && !self.settings.autodelay.on() {
            // Its loader would refuse it after the other units went in.
            return Err(corrupt(
                "imported submission window into a queue without an auto delay",
            ));
        }
        for (c, _) in other.window.records() {
            if self
                .coll_id(&other.name_of(c))
                .is_some_and(|mine| self.window.records().any(|(x, _)| x == mine))
            {
                return Err(corrupt("imported submission window already in the queue"));
            }
        }
        // The merged counters must leave room for every number ticks may
        // take without asking (`Queue::tick_reserve`), as a loaded queue's
        // do, so the result can always be saved and loaded again.
        let merged_next = self.next_seq.max(other.next_seq);
        let pending = self.tick_reserve().saturating_add(other.tick_reserve());
        if merged_next.saturating_add(pending) > SEQ_LOAD_LIMIT {
            return Err(corrupt("counters out of range"));
        }
        // Nonces (and the sequence numbers held jobs will use as nonces)
        // are unique in the whole queue (invariant 4): O(n) here. Imports
        // are rare (loading an AOF written without RDB preamble applies one
        // per batch of 512 units, so that load is quadratic in a huge
        // queue: docs/operations.md recommends the preamble).
        let theirs = other.nonce_set();
        if !theirs.is_empty() && self.nonce_set().intersection(&theirs).next().is_some() {
            return Err(corrupt("imported nonces collide with the queue's"));
        }
        let (mine, theirs) = (&self.work, &other.work);
        let token_taken = |t: u64| mine.lease(t).is_some() || mine.is_cancelled(t);
        if theirs.leases().any(|(t, _)| token_taken(t))
            || theirs.cancelled().any(|(t, _)| token_taken(t))
            || theirs
                .delayed_page(0, usize::MAX)
                .any(|(k, _)| mine.is_delayed(&k))
            || theirs
                .dead_page(0, usize::MAX)
                .any(|(k, _)| mine.is_dead(&k))
            || theirs.results().any(|(k, _)| mine.result(&k).is_some())
        {
            return Err(corrupt(
                "imported leases, retries, dead jobs or results collide with the queue's",
            ));
        }
        // Room for every record (checked now: nothing may change on refusal).
        let max = super::containers::slab::MAX_ID as usize;
        if self.jobs.len() + other.jobs.len() >= max
            || self.index.len() + other.index.len() + other.gates.held_count() >= max
            || self.colls.records() + other.colls.records() >= max
        {
            return Err(QueueError::Full);
        }
        Ok(())
    }

    /// Every nonce in use or promised to a held job.
    fn nonce_set(&self) -> HashSet<u64> {
        let mut s: HashSet<u64> = self.index.iter().map(|n| self.nonce_of(n)).collect();
        s.extend(
            self.jobs
                .iter()
                .filter(|(_, j)| j.held())
                .map(|(_, j)| j.skey.unsigned_abs()),
        );
        s
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
        q.next_seq = next_seq;
        q.front_tie = front_tie;
        Ok(QueueBuilder {
            q,
            version,
            max_seq: 0,
            min_tie: 0,
            empty_gates: HashSet::new(),
            merging: false,
        })
    }

    /// A parked job read from a unit: its collation is acquired (the parked
    /// job holds that reference).
    fn parked(&mut self, raw: RawParked<'_>) -> Result<Parked, QueueError> {
        let (created_at, attempts, immediate, collation, payload) = raw;
        let coll = match collation {
            Some(name) => Some(self.q.colls.acquire(name)?),
            None => None,
        };
        Ok(Parked {
            payload: payload.into(),
            created_at,
            attempts,
            coll,
            immediate,
        })
    }

    /// A stack key (or a held job's arrival) was taken from the queue's
    /// sequence before it was saved: below the header's counter. (Keys past
    /// it would not stay below later arrivals.)
    fn check_skey(&self, skey: i64) -> Result<(), QueueError> {
        if skey.unsigned_abs() >= self.q.next_seq.unsigned_abs() {
            return Err(corrupt("stack key beyond the queue's sequence"));
        }
        Ok(())
    }

    fn note(&mut self, rk: ResKey, nonce: u64) {
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

    /// A single job (immediate, or without a collation) with its reservation.
    fn add_single(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let (key, created_at, attempts, payload) = r.job()?;
        let collation = r.optional_collation()?;
        let (rk, nonce) = r.res()?;
        let immediate = r.flag("immediate")?;
        r.done()?;
        if rk.tie < 0 && !immediate {
            return Err(corrupt("front reservation of a job that is not immediate"));
        }
        self.note(rk, nonce);
        self.q.load_single(
            LoadedJob {
                key,
                created_at,
                attempts,
                skey: 0,
                payload: payload.into(),
            },
            collation,
            rk,
            nonce,
            immediate,
        )
    }

    /// A whole collation: its stack in pop order (with stack keys since
    /// version 2), then its reservations.
    fn add_collation(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let name = r.collation_name()?;
        if self.q.has_collation(name) {
            return Err(corrupt("duplicate collation"));
        }
        let m = r.u64()?;
        if m == 0 {
            return Err(corrupt("empty collation"));
        }
        let mut jobs = Vec::new();
        for i in 0..m {
            let (key, created_at, attempts, payload) = r.job()?;
            let skey = if self.version >= ENCODING_V2 {
                r.skey()?
            } else {
                // Version 1 kept the stack's order only: keys below every
                // key a later arrival or move takes (those are +-seq).
                (i as i64).saturating_sub(m.min(SEQ_LOAD_LIMIT as u64) as i64)
            };
            self.check_skey(skey)?;
            jobs.push(LoadedJob {
                key,
                created_at,
                attempts,
                skey,
                payload: payload.into(),
            });
        }
        let mut res = Vec::new();
        let mut nonces = HashSet::new();
        for _ in 0..m {
            let (rk, nonce) = r.res()?;
            if rk.tie < 0 {
                return Err(corrupt("front reservation in a collation"));
            }
            if !nonces.insert(nonce) {
                return Err(corrupt("duplicate nonce in a collation"));
            }
            res.push((rk, nonce));
        }
        r.done()?;
        for (rk, nonce) in &res {
            self.note(*rk, *nonce);
        }
        self.q.load_collation(name, jobs, res)
    }

    /// A job held behind a closed gate (which the unit closes if needed).
    fn add_held(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let (key, created_at, attempts, payload) = r.job()?;
        let collation = r.optional_collation()?;
        let gate = r.gate_name()?;
        let skey = r.skey()?;
        let priority = r.time()?;
        let immediate = r.flag("immediate")?;
        r.done()?;
        let seq = skey.saturating_abs();
        if seq == 0 || (skey < 0 && (collation.is_none() || immediate)) {
            return Err(corrupt("held job with a bad arrival"));
        }
        self.check_skey(skey)?;
        if !immediate
            && created_at
                .checked_add(priority)
                .is_none_or(|t| t > MAX_TIME)
        {
            return Err(corrupt("held job released out of range"));
        }
        if self.empty_gates.contains(gate) {
            return Err(corrupt("held job behind a gate declared empty"));
        }
        if self.q.contains(&key) {
            return Err(corrupt("duplicate job key"));
        }
        self.q.room()?;
        let g = self.q.gates.close(gate);
        let j = self
            .q
            .new_job(key, payload.into(), created_at, attempts, collation)?;
        self.q.jobs[j].skey = skey;
        self.q.hold(j, g, seq, priority, immediate);
        Ok(())
    }

    /// A closed gate holding no job.
    fn add_gate(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let gate = r.gate_name()?;
        r.done()?;
        if self.q.gates.closed(gate).is_some() {
            if self.merging {
                // Closed on both sides: one closed gate (`absorb`).
                return Ok(());
            }
            return Err(corrupt("duplicate gate"));
        }
        self.q.gates.close(gate);
        self.empty_gates.insert(gate.to_vec());
        Ok(())
    }

    /// A collation's recent submissions (times ascending).
    fn add_window(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let name = r.collation_name()?;
        let n = r.u64()?;
        if n == 0 || n > r.buf.len() as u64 / 8 {
            return Err(corrupt("submission window count out of range"));
        }
        let mut times = VecDeque::new();
        for _ in 0..n {
            let t = r.time()?;
            if times.back().is_some_and(|&b| b > t) {
                return Err(corrupt("submission window times out of order"));
            }
            times.push_back(t);
        }
        r.done()?;
        if !self.q.settings.autodelay.on() {
            return Err(corrupt("submission window without an auto delay"));
        }
        if self
            .q
            .coll_id(name)
            .is_some_and(|c| self.q.window.records().any(|(x, _)| x == c))
        {
            return Err(corrupt("duplicate submission window"));
        }
        let c = self.q.colls.acquire(name)?;
        let window = self.q.settings.autodelay.window;
        if !self.q.window.load(c, times, window) {
            self.q.colls.release(c);
            return Err(corrupt("duplicate submission window"));
        }
        Ok(())
    }

    /// A running delivery.
    fn add_lease(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let token = r.token()?;
        let key = r.key()?;
        let deadline = r.time()?;
        let superseded = r.flag("superseded")?;
        let raw = r.parked()?;
        let (started_at, worker) = if self.version >= ENCODING_V3 {
            (r.time()?, r.optional_bytes("worker")?)
        } else {
            (0, None)
        };
        r.done()?;
        let w = &self.q.work;
        if w.lease(token).is_some() || w.is_cancelled(token) {
            return Err(corrupt("duplicate lease token"));
        }
        let job = self.parked(raw)?;
        self.max_seq = self.max_seq.max(token as i64);
        let lease = Lease {
            key,
            deadline,
            job,
            superseded,
            started_at,
            worker: worker.map(Box::from),
        };
        if let Err(l) = self.q.lease_insert(token, lease) {
            self.q.release_parked(l.job);
            return Err(corrupt("more leases than a queue can hold"));
        }
        Ok(())
    }

    /// A job waiting for its retry time.
    fn add_delayed(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let key = r.key()?;
        let retry_at = r.time()?;
        let raw = r.parked()?;
        let error = r.error_text(self.version)?.map(Box::from);
        r.done()?;
        if self.q.work.is_delayed(&key) {
            return Err(corrupt("duplicate delayed job"));
        }
        let job = self.parked(raw)?;
        self.q.work.park(
            key,
            Delayed {
                retry_at,
                job,
                error,
            },
        );
        Ok(())
    }

    /// A dead letter.
    fn add_dead(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let key = r.key()?;
        let died_at = r.time()?;
        let seq = r.i64()?;
        if !(1..SEQ_LOAD_LIMIT).contains(&seq) {
            return Err(corrupt("dead sequence out of range"));
        }
        let cause =
            DeathCause::from_u8(r.u8()?).ok_or_else(|| corrupt("unknown cause of death"))?;
        let raw = r.parked()?;
        let error = r.error_text(self.version)?.map(Box::from);
        r.done()?;
        if self.q.work.is_dead(&key) {
            return Err(corrupt("duplicate dead job"));
        }
        let job = self.parked(raw)?;
        self.max_seq = self.max_seq.max(seq);
        let dead = Dead {
            died_at,
            seq,
            cause,
            job,
            error,
        };
        self.q.work.bury(key, dead);
        Ok(())
    }

    /// A kept ACK result.
    fn add_result(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let key = r.key()?;
        let expires_at = r.time()?;
        let payload = r.bytes()?;
        let (finished_at, token, created_at, attempts, collation) = if self.version >= ENCODING_V3 {
            let finished_at = r.time()?;
            let token = r.u64()?;
            if token as i64 >= SEQ_LOAD_LIMIT || (token as i64) < 0 {
                return Err(corrupt("result token out of range"));
            }
            (
                finished_at,
                token,
                r.time()?,
                r.u32()?,
                r.optional_collation()?,
            )
        } else {
            (0, 0, 0, 0, None)
        };
        r.done()?;
        let w = &mut self.q.work;
        if w.result(&key).is_some() {
            return Err(corrupt("duplicate result"));
        }
        self.max_seq = self.max_seq.max(token as i64);
        let kept = StoredResult {
            expires_at,
            payload: payload.into(),
            finished_at,
            token,
            created_at,
            attempts,
            collation: collation.map(Box::from),
        };
        w.keep_result(key, kept);
        Ok(())
    }

    /// A cancelled lease, remembered for a late worker.
    fn add_cancelled(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let token = r.token()?;
        let until = r.time()?;
        r.done()?;
        let w = &mut self.q.work;
        if w.is_cancelled(token) || w.lease(token).is_some() {
            return Err(corrupt("duplicate cancelled lease"));
        }
        self.max_seq = self.max_seq.max(token as i64);
        w.remember_cancelled(token, until);
        Ok(())
    }

    /// Counters ahead of everything loaded, the cap index rebuilt, then the
    /// full check.
    fn settle(&mut self) -> Result<(), QueueError> {
        // Counters must stay ahead of everything loaded so new ties and
        // nonces remain unique.
        self.q.next_seq = self.q.next_seq.max(self.max_seq.saturating_add(1));
        self.q.front_tie = self.q.front_tie.min(self.min_tie);
        // Ticks take numbers without asking (`Queue::tick_reserve`): leave
        // room for all of them, so the queue can always be saved and loaded
        // again.
        let pending = self.q.tick_reserve();
        if self.q.next_seq.saturating_add(pending) > SEQ_LOAD_LIMIT {
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

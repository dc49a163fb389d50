//! Property tests of the pure queue core (`orca::core`) against a naive
//! reference model, plus deterministic scenarios from seed 000 and a decode
//! fuzz test.
//!
//! No test-framework dependencies: a tiny deterministic xorshift64* PRNG
//! drives everything.
//!
//! - `random_sequences_{lifo,fifo}`: long random operation sequences; after
//!   every step `check()`, `len()`, `collation_count()`, `pop_order()` and a
//!   sample of `info()`/`position()` are compared with the model, and a
//!   failing operation must leave `encode()` unchanged. Every 100 steps the
//!   queue goes through `encode`/`decode` (byte-identical), and the decoded
//!   copy is driven alongside and must keep behaving identically.
//! - `ORCA_PROP_SEED=<u64>` (decimal or 0x-hex): run the random-sequence and
//!   fuzz tests with only that seed (instead of the fixed list).
//! - `ORCA_PROP_STEPS=<n>`: steps per random sequence (default 3000).
//!
//! A failure prints the seed, the collation order, the step number, the
//! operation that failed and the operations leading up to it; re-run with
//! `ORCA_PROP_SEED=<seed>` to replay it.
//!
//! Core bugs this suite found are kept as `regression_*` tests at the end.

mod props;
use props::{seeds, steps, Rng};

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use orca::core::config::orca_key;
use orca::core::{
    encode_key, parse_config, JobConfig, JobInfo, JobKey, Move, Order, Queue, QueueError, MAX_TIME,
};

// ---------------------------------------------------------------------------
// PRNG and run parameters
// ---------------------------------------------------------------------------

const DEFAULT_SEEDS: [u64; 20] = [
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    42,
    1337,
    0xDEAD_BEEF,
    0xC0FF_EE00,
    123_456_789,
    987_654_321,
    31_337,
    2024,
    77,
    0x5EED_0000_0001,
    0xFFFF_FFFF_FFFF_FFFF,
    0x0123_4567_89AB_CDEF,
];

// ---------------------------------------------------------------------------
// Job names: readable names for job keys in failure messages
// ---------------------------------------------------------------------------

thread_local! {
    static NAMES: RefCell<HashMap<JobKey, String>> = RefCell::new(HashMap::new());
}

/// The job key of `name` (response_url ""), remembered for messages.
fn k(name: &str) -> JobKey {
    key_with_url(name, "")
}

fn key_with_url(name: &str, url: &str) -> JobKey {
    let key = orca_key(name, url);
    NAMES.with(|n| n.borrow_mut().insert(key, name.to_string()));
    key
}

fn kname(key: &JobKey) -> String {
    NAMES
        .with(|n| n.borrow().get(key).cloned())
        .unwrap_or_else(|| encode_key(key))
}

fn names(keys: &[JobKey]) -> Vec<String> {
    keys.iter().map(kname).collect()
}

fn cfg(name: &str, coll: Option<&str>, priority: i64) -> JobConfig {
    JobConfig {
        job_key: k(name),
        collation: coll.map(str::to_string),
        priority,
        gate: None,
    }
}

// ---------------------------------------------------------------------------
// What the core reports about a job, owned and comparable
// ---------------------------------------------------------------------------

#[derive(Clone, PartialEq, Eq)]
struct Info {
    key: JobKey,
    collation: Option<String>,
    immediate: bool,
    nonce: u64,
    created_at: i64,
    release_at: i64,
    attempts: u32,
    payload: Vec<u8>,
}

impl fmt::Debug for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{{} coll={:?} imm={} nonce={} created={} release={} attempts={} payload={:?}}}",
            kname(&self.key),
            self.collation,
            self.immediate,
            self.nonce,
            self.created_at,
            self.release_at,
            self.attempts,
            String::from_utf8_lossy(&self.payload)
        )
    }
}

fn conv(j: &JobInfo<'_>) -> Info {
    Info {
        key: j.key,
        collation: j.collation.as_deref().map(str::to_string),
        immediate: j.immediate,
        nonce: j.nonce,
        created_at: j.created_at,
        release_at: j.release_at,
        attempts: j.attempts,
        payload: j.payload.to_vec(),
    }
}

// ---------------------------------------------------------------------------
// Reference model: plain Vecs kept sorted, linear scans, the pairing rule
// recomputed from its definition on every query
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum MOwner {
    Single(JobKey),
    Coll(String),
}

#[derive(Clone, Debug)]
struct MRes {
    score: i64,
    tie: i64,
    nonce: u64,
    owner: MOwner,
}

#[derive(Clone, Debug)]
struct MJob {
    key: JobKey,
    payload: Vec<u8>,
    created_at: i64,
    /// The collation named when the job was created (for a collated job, the
    /// one whose stack holds it).
    collation: Option<String>,
    /// In its collation's stack (paired by position) rather than owning a
    /// single reservation.
    collated: bool,
    immediate: bool,
}

#[derive(Clone, Debug)]
struct Model {
    order: Order,
    jobs: Vec<MJob>,
    /// Reservations, always sorted by (score, tie): the global order.
    res: Vec<MRes>,
    /// Collation name -> job keys in pop order (front first). Never empty.
    stacks: Vec<(String, Vec<JobKey>)>,
    next_seq: i64,
    front_tie: i64,
}

impl Model {
    fn new(order: Order) -> Self {
        Model {
            order,
            jobs: Vec::new(),
            res: Vec::new(),
            stacks: Vec::new(),
            next_seq: 1,
            front_tie: 0,
        }
    }

    fn len(&self) -> usize {
        self.jobs.len()
    }

    fn alloc(&mut self) -> i64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    fn job(&self, key: &JobKey) -> Option<&MJob> {
        self.jobs.iter().find(|j| j.key == *key)
    }

    fn job_mut(&mut self, key: &JobKey) -> Option<&mut MJob> {
        self.jobs.iter_mut().find(|j| j.key == *key)
    }

    fn stack(&self, name: &str) -> &[JobKey] {
        self.stacks
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.as_slice())
            .unwrap_or(&[])
    }

    fn stack_mut(&mut self, name: &str) -> &mut Vec<JobKey> {
        if let Some(i) = self.stacks.iter().position(|(n, _)| n == name) {
            &mut self.stacks[i].1
        } else {
            self.stacks.push((name.to_string(), Vec::new()));
            &mut self.stacks.last_mut().unwrap().1
        }
    }

    /// Add a reservation, keeping `res` sorted in global order (score, then
    /// tie).
    fn push_res(&mut self, r: MRes) {
        self.res.push(r);
        self.res.sort_by_key(|r| (r.score, r.tie));
    }

    /// Index into `res` of the reservation the job holds or is paired with:
    /// the k-th job of a stack <-> the k-th earliest reservation of its
    /// collation.
    fn paired(&self, key: &JobKey) -> Option<usize> {
        let job = self.job(key)?;
        if job.collated {
            let name = job.collation.as_deref()?;
            let kth = self.stack(name).iter().position(|j| j == key)?;
            (0..self.res.len())
                .filter(|&i| self.res[i].owner == MOwner::Coll(name.to_string()))
                .nth(kth)
        } else {
            self.res
                .iter()
                .position(|r| r.owner == MOwner::Single(*key))
        }
    }

    fn info(&self, key: &JobKey) -> Option<Info> {
        let job = self.job(key)?;
        let r = &self.res[self.paired(key)?];
        Some(Info {
            key: *key,
            collation: job.collation.clone(),
            immediate: job.immediate,
            nonce: r.nonce,
            created_at: job.created_at,
            release_at: r.score,
            attempts: 0,
            payload: job.payload.clone(),
        })
    }

    fn position(&self, key: &JobKey) -> Option<usize> {
        let p = self.paired(key)?;
        Some(p + 1)
    }

    fn pop_order(&self) -> Vec<JobKey> {
        let mut taken: HashMap<&str, usize> = HashMap::new();
        let mut out = Vec::new();
        for r in &self.res {
            match &r.owner {
                MOwner::Single(key) => out.push(*key),
                MOwner::Coll(name) => {
                    let t = taken.entry(name).or_insert(0);
                    out.push(self.stack(name)[*t]);
                    *t += 1;
                }
            }
        }
        out
    }

    /// Remove the job's reservation (and, if collated, take it out of its
    /// stack). The job itself stays.
    fn detach(&mut self, key: &JobKey) {
        let p = self.paired(key).expect("model: job without reservation");
        self.res.remove(p);
        let job = self.job(key).unwrap().clone();
        if job.collated {
            let name = job.collation.unwrap();
            self.stack_mut(&name).retain(|j| j != key);
            self.stacks.retain(|(_, s)| !s.is_empty());
            self.job_mut(key).unwrap().collated = false;
        }
    }

    fn add_single(&mut self, key: JobKey, score: i64) {
        let seq = self.alloc();
        self.push_res(MRes {
            score,
            tie: seq,
            nonce: seq as u64,
            owner: MOwner::Single(key),
        });
    }

    fn add_coll_res(&mut self, name: &str, score: i64) {
        let seq = self.alloc();
        self.push_res(MRes {
            score,
            tie: seq,
            nonce: seq as u64,
            owner: MOwner::Coll(name.to_string()),
        });
    }

    fn enqueue(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        now: i64,
    ) -> Result<(Info, bool), QueueError> {
        let key = cfg.job_key;
        if let Some(job) = self.job_mut(&key) {
            job.payload = payload.to_vec();
            return Ok((self.info(&key).unwrap(), false));
        }
        let release = now
            .checked_add(cfg.priority)
            .filter(|t| (0..=MAX_TIME).contains(t))
            .ok_or(QueueError::TimeOverflow)?;
        match &cfg.collation {
            None => {
                self.add_single(key, release);
            }
            Some(name) => {
                self.add_coll_res(name, release);
                let order = self.order;
                let stack = self.stack_mut(name);
                match order {
                    Order::Lifo => stack.insert(0, key),
                    Order::Fifo => stack.push(key),
                }
            }
        }
        self.jobs.push(MJob {
            key,
            payload: payload.to_vec(),
            created_at: now,
            collation: cfg.collation.clone(),
            collated: cfg.collation.is_some(),
            immediate: false,
        });
        Ok((self.info(&key).unwrap(), true))
    }

    fn put_immediate(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        arrival: i64,
    ) -> Result<(Info, bool), QueueError> {
        if !(0..=MAX_TIME).contains(&arrival) {
            return Err(QueueError::TimeOverflow);
        }
        let key = cfg.job_key;
        if let Some(job) = self.job(&key) {
            if !job.immediate {
                self.detach(&key);
                self.add_single(key, arrival);
                self.job_mut(&key).unwrap().immediate = true;
            }
            self.job_mut(&key).unwrap().payload = payload.to_vec();
            return Ok((self.info(&key).unwrap(), false));
        }
        self.add_single(key, arrival);
        self.jobs.push(MJob {
            key,
            payload: payload.to_vec(),
            created_at: arrival,
            collation: cfg.collation.clone(),
            collated: false,
            immediate: true,
        });
        Ok((self.info(&key).unwrap(), true))
    }

    fn move_job(&mut self, key: &JobKey, how: Move, now: i64) -> Result<Info, QueueError> {
        let job = self.job(key).ok_or(QueueError::NoSuchJob)?.clone();
        if job.immediate {
            return Err(QueueError::ImmediateNotMovable);
        }
        match how {
            Move::Release => {
                if !(0..=MAX_TIME).contains(&now) {
                    return Err(QueueError::TimeOverflow);
                }
                self.detach(key);
                // Before every remaining reservation.
                let score = match self.res.first() {
                    Some(first) => first.score.min(now),
                    None => now,
                };
                self.front_tie -= 1;
                let nonce = self.alloc() as u64;
                self.push_res(MRes {
                    score,
                    tie: self.front_tie,
                    nonce,
                    owner: MOwner::Single(*key),
                });
                self.job_mut(key).unwrap().immediate = true;
            }
            Move::Delay { buffer } => {
                // The last reservation of the whole queue, the job's own included.
                let last = self.res.last().unwrap().score;
                let score = last
                    .checked_add(buffer)
                    .filter(|t| (0..=MAX_TIME).contains(t))
                    .ok_or(QueueError::TimeOverflow)?;
                self.detach(key);
                if job.collated {
                    let name = job.collation.clone().unwrap();
                    self.add_coll_res(&name, score);
                    self.stack_mut(&name).push(*key);
                    self.job_mut(key).unwrap().collated = true;
                } else {
                    self.add_single(*key, score);
                }
            }
        }
        Ok(self.info(key).unwrap())
    }

    fn delete(&mut self, key: &JobKey) -> bool {
        if self.job(key).is_none() {
            return false;
        }
        self.detach(key);
        self.jobs.retain(|j| j.key != *key);
        true
    }

    fn pop(&mut self) -> Option<Info> {
        let key = match &self.res.first()?.owner {
            MOwner::Single(key) => *key,
            MOwner::Coll(name) => self.stack(name)[0],
        };
        let mut info = self.info(&key).unwrap();
        info.attempts += 1;
        assert_eq!(
            self.paired(&key),
            Some(0),
            "model: popped job not paired with the first reservation"
        );
        self.delete(&key);
        Some(info)
    }
}

// ---------------------------------------------------------------------------
// Operations of the random sequences
// ---------------------------------------------------------------------------

// Short names are packed into the collation record, longer ones (ids over
// 15 bytes) kept aside (src/core/names.rs): both kinds are exercised.
const COLLS: [&str; 4] = [
    "user.1",
    "team.7",
    "user.123456789012345",
    "team.a-long-team-name-over-15-bytes",
];
const POOL: usize = 80;

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        key: usize,
        coll: Option<&'static str>,
        priority: i64,
        payload: Vec<u8>,
        now: i64,
        json: bool,
    },
    Immediate {
        key: usize,
        coll: Option<&'static str>,
        payload: Vec<u8>,
        arrival: i64,
        json: bool,
    },
    Release {
        key: usize,
        now: i64,
    },
    Delay {
        key: usize,
        buffer: i64,
    },
    Delete {
        key: usize,
    },
    Pop,
    SetOrder(Order),
}

/// Pool key `i`: name `k<i>`, with a response_url for odd `i`.
fn pool_name(i: usize) -> String {
    format!("k{i}")
}

fn pool_url(i: usize) -> String {
    if i % 2 == 1 {
        format!("http://r.example/{i}")
    } else {
        String::new()
    }
}

/// Minimal JSON string literal (our names never need more than this).
fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The config of pool key `i`, built directly or through `parse_config` on a
/// JSON config (checking both agree).
fn pool_cfg(
    i: usize,
    job_key: JobKey,
    coll: Option<&str>,
    priority: i64,
    json: bool,
) -> Result<JobConfig, String> {
    let name = pool_name(i);
    let url = pool_url(i);
    let direct = JobConfig {
        job_key,
        collation: coll.map(str::to_string),
        priority,
        gate: None,
    };
    if !json || !(0..=MAX_TIME).contains(&priority) {
        return Ok(direct);
    }
    let coll_json = match coll {
        None if i.is_multiple_of(3) => ",\"collation\":null".to_string(),
        None => String::new(),
        Some(c) => {
            let (kind, id) = c.split_once('.').unwrap();
            if kind == "team" && id.bytes().all(|b| b.is_ascii_digit()) {
                // Integer ids are accepted and stringified.
                format!(",\"collation\":{{\"type\":\"team\",\"id\":{id}}}")
            } else {
                format!(
                    ",\"collation\":{{\"type\":{},\"id\":{}}}",
                    json_str(kind),
                    json_str(id)
                )
            }
        }
    };
    let text = format!(
        "{{\"key\":{},\"response_url\":{}{coll_json},\"priority\":{priority},\"script\":[\"make test\"],\"extra\":{{\"a\":[1,2,{{}}]}}}}",
        json_str(&name),
        json_str(&url)
    );
    let parsed =
        parse_config(text.as_bytes()).map_err(|e| format!("parse_config({text}) failed: {e}"))?;
    if parsed != direct {
        return Err(format!(
            "parse_config({text}) = {parsed:?}, expected {direct:?}"
        ));
    }
    Ok(parsed)
}

// ---------------------------------------------------------------------------
// The random-sequence harness
// ---------------------------------------------------------------------------

struct Harness {
    rng: Rng,
    q: Queue,
    /// Decoded copy of `q` taken at the last sync point, driven with the same
    /// operations: it must behave identically.
    twin: Queue,
    model: Model,
    now: i64,
    pool: Vec<JobKey>,
    pool_index: HashMap<JobKey, usize>,
    last_popped: Option<(usize, i64)>,
    allow_set_order: bool,
}

fn err<T>(msg: String) -> Result<T, String> {
    Err(msg)
}

macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return err(format!($($arg)*));
        }
    };
}

impl Harness {
    fn new(seed: u64, order: Order) -> Self {
        let pool: Vec<JobKey> = (0..POOL)
            .map(|i| key_with_url(&pool_name(i), &pool_url(i)))
            .collect();
        let pool_index = pool.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let q = Queue::new(order);
        Harness {
            rng: Rng::new(seed ^ if order == Order::Fifo { 0xF1F0 } else { 0 }),
            twin: q.clone(),
            q,
            model: Model::new(order),
            now: 1_000,
            pool,
            pool_index,
            last_popped: None,
            allow_set_order: seed % 4 == 3,
        }
    }

    fn payload(&mut self, step: usize) -> Vec<u8> {
        match self.rng.below(10) {
            0 => Vec::new(),
            1 => (0..self.rng.below(20))
                .map(|_| self.rng.next_u64() as u8)
                .collect(),
            _ => format!("p{step}").into_bytes(),
        }
    }

    fn coll(&mut self) -> Option<&'static str> {
        match self.rng.below(100) {
            0..=34 => Some(COLLS[0]),
            35..=59 => Some(COLLS[1]),
            60..=74 => Some(COLLS[2]),
            75..=79 => Some(COLLS[3]),
            _ => None,
        }
    }

    /// A key for move/delete: usually a queued job, sometimes any pool key.
    fn target(&mut self) -> usize {
        let n = self.model.len();
        if n > 0 && self.rng.pct(85) {
            let key = self.model.jobs[self.rng.below(n as u64) as usize].key;
            self.pool_index[&key]
        } else {
            self.rng.below(POOL as u64) as usize
        }
    }

    fn gen_op(&mut self, step: usize) -> Op {
        self.now += match self.rng.below(100) {
            0..=29 => 0,
            30..=79 => self.rng.range(1, 20),
            80..=94 => self.rng.range(21, 500),
            _ => self.rng.range(1000, 20_000),
        };
        let now = self.now;
        let mut r = self.rng.below(1000);
        // Phases of 300 steps: fill (few pops), balanced, drain (many pops),
        // so queues get long and collations deep, then empty out again.
        match (step / 300) % 3 {
            0 if (690..=997).contains(&r) && self.rng.pct(75) => r = self.rng.below(360),
            2 if r < 460 && self.rng.pct(30) => r = 800,
            _ => {}
        }
        match r {
            0..=359 => {
                let priority = match self.rng.below(1000) {
                    0..=249 => 0,
                    250..=399 => 1000,
                    400..=499 => 60_000,
                    500..=599 => 10 * self.rng.range(0, 20),
                    600..=993 => self.rng.range(0, 3000),
                    994..=995 => MAX_TIME - now, // release exactly MAX_TIME
                    996..=997 => MAX_TIME,       // overflows (now > 0)
                    _ => i64::MAX,               // checked_add overflow
                };
                Op::Enqueue {
                    key: self.rng.below(POOL as u64) as usize,
                    coll: self.coll(),
                    priority,
                    payload: self.payload(step),
                    now,
                    json: self.rng.pct(30),
                }
            }
            360..=459 => {
                let (key, arrival) = match (self.last_popped, self.rng.below(100)) {
                    // A worker hands its job back: immediate at its arrival.
                    (Some((key, created)), 0..=24) => {
                        self.last_popped = None;
                        (key, created)
                    }
                    (_, r) => {
                        let key = if self.rng.pct(50) {
                            self.target()
                        } else {
                            self.rng.below(POOL as u64) as usize
                        };
                        let arrival = match r {
                            0..=49 => now,
                            50..=74 => (now - self.rng.range(0, 5000)).max(0),
                            75..=89 => {
                                let n = self.model.len();
                                if n == 0 {
                                    now
                                } else {
                                    self.model.jobs[self.rng.below(n as u64) as usize].created_at
                                }
                            }
                            90..=95 => 0,
                            96..=97 => -1,
                            _ => MAX_TIME + 1,
                        };
                        (key, arrival)
                    }
                };
                Op::Immediate {
                    key,
                    coll: self.coll(),
                    payload: self.payload(step),
                    arrival,
                    json: self.rng.pct(30),
                }
            }
            460..=529 => Op::Release {
                key: self.target(),
                now: match self.rng.below(100) {
                    0 => -1,
                    1 => MAX_TIME + 1,
                    _ => now,
                },
            },
            530..=609 => Op::Delay {
                key: self.target(),
                buffer: match self.rng.below(100) {
                    0..=19 => 0,
                    20..=29 => 1,
                    30..=79 => 10_000,
                    80..=97 => self.rng.range(0, 100_000),
                    _ => MAX_TIME,
                },
            },
            610..=689 => Op::Delete { key: self.target() },
            690..=997 => Op::Pop,
            _ if self.allow_set_order => Op::SetOrder(if self.rng.pct(50) {
                Order::Lifo
            } else {
                Order::Fifo
            }),
            _ => Op::Pop,
        }
    }

    /// Apply `op` to the model, the queue and the twin; compare results.
    /// Returns the job key the operation touched and a label of what
    /// happened (for coverage counters).
    fn apply(&mut self, op: &Op) -> Result<(Option<JobKey>, String), String> {
        // Only these can fail; errors must change nothing.
        let before = match op {
            Op::Enqueue { .. } | Op::Immediate { .. } | Op::Release { .. } | Op::Delay { .. } => {
                self.q.encode()
            }
            _ => Vec::new(),
        };
        let kind_of = |j: Option<&MJob>| match j {
            None => "missing",
            Some(j) if j.immediate => "immediate",
            Some(j) if j.collated => "collated",
            Some(_) => "single",
        };
        let (touched, failed, label) = match op {
            Op::Enqueue {
                key,
                coll,
                priority,
                payload,
                now,
                json,
            } => {
                let c = pool_cfg(*key, self.pool[*key], *coll, *priority, *json)?;
                let want = self.model.enqueue(&c, payload, *now);
                let got = self
                    .q
                    .enqueue(&c, payload, *now)
                    .map(|(i, p)| (i, p.created))
                    .map(|(i, b)| (conv(&i), b));
                let twin = self
                    .twin
                    .enqueue(&c, payload, *now)
                    .map(|(i, p)| (i, p.created))
                    .map(|(i, b)| (conv(&i), b));
                ensure!(got == want, "enqueue returned {got:?}, model says {want:?}");
                ensure!(
                    twin == got,
                    "decoded twin: enqueue returned {twin:?}, queue {got:?}"
                );
                let label = match &got {
                    Err(e) => format!("enqueue: {e:?}"),
                    Ok((_, true)) => {
                        format!("enqueue: new {}", kind_of(self.model.job(&c.job_key)))
                    }
                    Ok((i, false)) => {
                        format!("enqueue: update of {}", kind_of(self.model.job(&i.key)))
                    }
                };
                (Some(c.job_key), got.is_err(), label)
            }
            Op::Immediate {
                key,
                coll,
                payload,
                arrival,
                json,
            } => {
                let c = pool_cfg(*key, self.pool[*key], *coll, 0, *json)?;
                let was = kind_of(self.model.job(&c.job_key));
                let want = self.model.put_immediate(&c, payload, *arrival);
                let got = self
                    .q
                    .put_immediate(&c, payload, *arrival)
                    .map(|(i, p)| (i, p.created))
                    .map(|(i, b)| (conv(&i), b));
                let twin = self
                    .twin
                    .put_immediate(&c, payload, *arrival)
                    .map(|(i, p)| (i, p.created))
                    .map(|(i, b)| (conv(&i), b));
                ensure!(
                    got == want,
                    "put_immediate returned {got:?}, model says {want:?}"
                );
                ensure!(
                    twin == got,
                    "decoded twin: put_immediate returned {twin:?}, queue {got:?}"
                );
                let label = match &got {
                    Err(e) => format!("immediate: {e:?}"),
                    Ok((_, true)) => "immediate: new".to_string(),
                    Ok((_, false)) if was == "immediate" => "immediate: update".to_string(),
                    Ok((_, false)) => format!("immediate: upgrade of {was}"),
                };
                (Some(c.job_key), got.is_err(), label)
            }
            Op::Release { key, .. } | Op::Delay { key, .. } => {
                let (how, at, name) = match op {
                    Op::Release { now, .. } => (Move::Release, *now, "release"),
                    Op::Delay { buffer, .. } => {
                        (Move::Delay { buffer: *buffer }, self.now, "delay")
                    }
                    _ => unreachable!(),
                };
                let jk = self.pool[*key];
                let was = kind_of(self.model.job(&jk));
                let want = self.model.move_job(&jk, how, at);
                let got = self.q.move_job(&jk, how, at).map(|i| conv(&i));
                let twin = self.twin.move_job(&jk, how, at).map(|i| conv(&i));
                ensure!(
                    got == want,
                    "move_job returned {got:?}, model says {want:?}"
                );
                ensure!(
                    twin == got,
                    "decoded twin: move_job returned {twin:?}, queue {got:?}"
                );
                let label = match &got {
                    Err(e) => format!("{name}: {e:?} ({was})"),
                    Ok(_) => format!("{name}: of {was}"),
                };
                (Some(jk), got.is_err(), label)
            }
            Op::Delete { key } => {
                let jk = self.pool[*key];
                let was = kind_of(self.model.job(&jk));
                let want = Ok(self.model.delete(&jk));
                let got = self.q.delete(&jk);
                let twin = self.twin.delete(&jk);
                ensure!(got == want, "delete returned {got:?}, model says {want:?}");
                ensure!(
                    twin == got,
                    "decoded twin: delete returned {twin:?}, queue {got:?}"
                );
                (Some(jk), false, format!("delete: {was}"))
            }
            Op::Pop => {
                let first = self.model.pop_order().first().copied();
                let was = kind_of(first.and_then(|k| self.model.job(&k)));
                let want = Ok(self.model.pop());
                let got = self.q.pop().map(|o| o.as_ref().map(conv));
                let twin = self.twin.pop().map(|o| o.as_ref().map(conv));
                ensure!(got == want, "pop returned {got:?}, model says {want:?}");
                ensure!(
                    twin == got,
                    "decoded twin: pop returned {twin:?}, queue {got:?}"
                );
                let touched = match &got {
                    Ok(Some(info)) => {
                        self.last_popped = Some((self.pool_index[&info.key], info.created_at));
                        Some(info.key)
                    }
                    _ => None,
                };
                (
                    touched,
                    false,
                    format!("pop: {}", if first.is_some() { was } else { "empty" }),
                )
            }
            Op::SetOrder(order) => {
                self.model.order = *order;
                self.q.set_order(*order);
                self.twin.set_order(*order);
                ensure!(self.q.order() == *order, "set_order did not take");
                (None, false, "set_order".to_string())
            }
        };
        if failed {
            ensure!(
                self.q.encode() == before,
                "a failing operation changed the queue's encoding"
            );
        }
        Ok((touched, label))
    }

    fn compare_job(&self, key: &JobKey) -> Result<(), String> {
        let want = self.model.info(key);
        let got = self.q.info(key).map(|i| conv(&i));
        match &want {
            Some(w) => ensure!(
                got.as_ref() == Ok(w),
                "info({}) = {got:?}, model says {w:?}",
                kname(key)
            ),
            None => ensure!(
                got == Err(QueueError::NoSuchJob),
                "info({}) of a missing job = {got:?}",
                kname(key)
            ),
        }
        let want = self.model.position(key).ok_or(QueueError::NoSuchJob);
        let got = self.q.position(key);
        ensure!(
            got == want,
            "position({}) = {got:?}, model says {want:?}",
            kname(key)
        );
        Ok(())
    }

    /// Compare the whole observable state with the model.
    fn verify(&mut self, touched: Option<JobKey>, full: bool) -> Result<(), String> {
        self.q.check().map_err(|e| format!("check() failed: {e}"))?;
        ensure!(
            self.q.len() == self.model.len(),
            "len() = {}, model says {}",
            self.q.len(),
            self.model.len()
        );
        ensure!(
            self.q.is_empty() == (self.model.len() == 0),
            "is_empty() wrong"
        );
        ensure!(
            self.q.collation_count() == self.model.stacks.len(),
            "collation_count() = {}, model has {} non-empty stacks",
            self.q.collation_count(),
            self.model.stacks.len()
        );
        let got = self.q.pop_order();
        let want = self.model.pop_order();
        ensure!(
            got == want,
            "pop_order() = {:?}\n  model says  {:?}",
            names(&got),
            names(&want)
        );
        if let Some(key) = touched {
            self.compare_job(&key)?;
        }
        if full {
            for key in self.pool.clone() {
                self.compare_job(&key)?;
            }
        } else {
            for _ in 0..3 {
                let key = self.pool[self.rng.below(POOL as u64) as usize];
                self.compare_job(&key)?;
            }
            if self.model.len() > 0 {
                let key = self.model.jobs[self.rng.below(self.model.len() as u64) as usize].key;
                self.compare_job(&key)?;
            }
        }
        Ok(())
    }

    /// Round trip through the codec; the twin (decoded at the previous sync
    /// point and driven since) must encode identically; then re-sync it.
    fn sync(&mut self) -> Result<(), String> {
        let bytes = self.q.encode();
        let twin_bytes = self.twin.encode();
        ensure!(
            twin_bytes == bytes,
            "the decoded twin diverged from the queue since the last sync point"
        );
        self.twin
            .check()
            .map_err(|e| format!("twin check() failed: {e}"))?;
        let decoded = Queue::decode(&bytes).map_err(|e| format!("decode(encode()) failed: {e}"))?;
        ensure!(
            decoded.encode() == bytes,
            "decode(encode()).encode() differs"
        );
        decoded
            .check()
            .map_err(|e| format!("decoded queue fails check(): {e}"))?;
        ensure!(decoded.len() == self.q.len(), "decoded len differs");
        ensure!(decoded.order() == self.q.order(), "decoded order differs");
        ensure!(
            decoded.pop_order() == self.q.pop_order(),
            "decoded pop_order differs"
        );
        self.twin = decoded;
        Ok(())
    }

    /// Pop everything from queue, twin and model.
    fn drain(&mut self) -> Result<(), String> {
        loop {
            let want = self.model.pop();
            let got = self.q.pop().map(|o| o.as_ref().map(conv));
            let twin = self.twin.pop().map(|o| o.as_ref().map(conv));
            ensure!(
                got == Ok(want.clone()),
                "drain: pop returned {got:?}, model says {want:?}"
            );
            ensure!(
                twin == got,
                "drain: twin pop returned {twin:?}, queue {got:?}"
            );
            self.q
                .check()
                .map_err(|e| format!("drain: check() failed: {e}"))?;
            if want.is_none() {
                break;
            }
        }
        ensure!(
            self.q.is_empty() && self.q.collation_count() == 0,
            "drained queue not empty"
        );
        Ok(())
    }
}

fn describe(op: &Op) -> String {
    let name = |i: &usize| pool_name(*i);
    match op {
        Op::Enqueue {
            key,
            coll,
            priority,
            payload,
            now,
            json,
        } => format!(
            "enqueue({} coll={coll:?} priority={priority} payload={:?} now={now} json={json})",
            name(key),
            String::from_utf8_lossy(payload)
        ),
        Op::Immediate {
            key,
            coll,
            payload,
            arrival,
            json,
        } => format!(
            "put_immediate({} coll={coll:?} payload={:?} arrival={arrival} json={json})",
            name(key),
            String::from_utf8_lossy(payload)
        ),
        Op::Release { key, now } => format!("move_job({}, Release, now={now})", name(key)),
        Op::Delay { key, buffer } => format!("move_job({}, Delay{{buffer:{buffer}}})", name(key)),
        Op::Delete { key } => format!("delete({})", name(key)),
        Op::Pop => "pop()".into(),
        Op::SetOrder(o) => format!("set_order({o:?})"),
    }
}

/// Outcome counters of one or more runs, to see what the sequences covered.
#[derive(Default)]
struct Stats {
    counts: std::collections::BTreeMap<String, usize>,
    max_len: usize,
    max_stack: usize,
}

impl Stats {
    fn add(&mut self, label: String) {
        *self.counts.entry(label).or_insert(0) += 1;
    }
}

fn run_sequence(seed: u64, order: Order, steps: usize, stats: &mut Stats) {
    let mut h = Harness::new(seed, order);
    let mut log: Vec<(usize, Op)> = Vec::new();
    let fail = |step: usize, op: Option<&Op>, msg: &str, log: &[(usize, Op)]| -> ! {
        let tail: Vec<String> = log
            .iter()
            .rev()
            .take(25)
            .rev()
            .map(|(s, o)| format!("    step {s}: {}", describe(o)))
            .collect();
        panic!(
            "property failure: seed {seed} (replay: ORCA_PROP_SEED={seed}), order {order:?}, step {step}\n  op: {}\n  {msg}\n  last operations:\n{}",
            op.map(describe).unwrap_or_else(|| "(sync / drain)".into()),
            tail.join("\n")
        )
    };
    for step in 0..steps {
        let op = h.gen_op(step);
        log.push((step, op.clone()));
        let r = catch_unwind(AssertUnwindSafe(|| {
            let (touched, label) = h.apply(&op)?;
            h.verify(touched, step % 100 == 99)?;
            if step % 100 == 99 {
                h.sync()?;
            }
            Ok::<_, String>(label)
        }));
        match r {
            Ok(Ok(label)) => stats.add(label),
            Ok(Err(msg)) => fail(step, Some(&op), &msg, &log),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                fail(step, Some(&op), &format!("panicked: {msg}"), &log)
            }
        }
        stats.max_len = stats.max_len.max(h.model.len());
        let deepest = h
            .model
            .stacks
            .iter()
            .map(|(_, s)| s.len())
            .max()
            .unwrap_or(0);
        stats.max_stack = stats.max_stack.max(deepest);
    }
    match catch_unwind(AssertUnwindSafe(|| h.sync().and_then(|_| h.drain()))) {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => fail(steps, None, &msg, &log),
        Err(_) => fail(steps, None, "panicked during final sync/drain", &log),
    }
}

fn run_all(order: Order) {
    let start = Instant::now();
    let steps = steps(3000);
    let seeds = seeds(&DEFAULT_SEEDS);
    let mut stats = Stats::default();
    for &seed in &seeds {
        run_sequence(seed, order, steps, &mut stats);
    }
    eprintln!(
        "core_props: {order:?}: {} seeds x {steps} steps in {:.2?}; max queue length {}, deepest collation {}",
        seeds.len(),
        start.elapsed(),
        stats.max_len,
        stats.max_stack
    );
    for (label, n) in &stats.counts {
        eprintln!("    {label}: {n}");
    }
}

#[test]
fn random_sequences_lifo() {
    run_all(Order::Lifo);
}

#[test]
fn random_sequences_fifo() {
    run_all(Order::Fifo);
}

// ---------------------------------------------------------------------------
// Deterministic scenarios (seed 000 examples, LIFO/FIFO, pairing)
// ---------------------------------------------------------------------------

fn order_of(q: &Queue) -> Vec<String> {
    names(&q.pop_order())
}

fn enq(q: &mut Queue, name: &str, coll: Option<&str>, priority: i64, now: i64) -> Info {
    let (info, created) = q
        .enqueue(&cfg(name, coll, priority), name.as_bytes(), now)
        .map(|(i, p)| (i, p.created))
        .unwrap_or_else(|e| panic!("enqueue {name}: {e}"));
    assert!(created, "enqueue {name}: not created");
    let info = conv(&info);
    q.check().unwrap();
    info
}

fn info_of(q: &Queue, name: &str) -> Info {
    conv(
        &q.info(&k(name))
            .unwrap_or_else(|e| panic!("info({name}): {e}")),
    )
}

fn pop_all(q: &mut Queue) -> Vec<Info> {
    let mut out = Vec::new();
    while let Some(i) = q.pop().unwrap() {
        q.check().unwrap();
        out.push(conv(&i));
    }
    assert!(q.is_empty());
    out
}

fn popped_names(v: &[Info]) -> Vec<String> {
    v.iter().map(|i| kname(&i.key)).collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// j1..j6 over collations user.1 (j1, j3), team.2 (j2, j5), user.3 (j6) and
/// one job without collation (j4).
fn seed_queue(order: Order) -> Queue {
    let mut q = Queue::new(order);
    enq(&mut q, "j1", Some("user.1"), 0, 0);
    enq(&mut q, "j2", Some("team.2"), 0, 1);
    enq(&mut q, "j3", Some("user.1"), 0, 2);
    enq(&mut q, "j4", None, 0, 3);
    enq(&mut q, "j5", Some("team.2"), 50, 4);
    enq(&mut q, "j6", Some("user.3"), 0, 5);
    q
}

#[test]
fn seed_queue_layout() {
    // LIFO: user.1 stack [j3, j1] with reservations 0, 2; team.2 [j5, j2]
    // with 1, 54.
    let q = seed_queue(Order::Lifo);
    assert_eq!(order_of(&q), strs(&["j3", "j5", "j1", "j4", "j6", "j2"]));
    let rel: Vec<i64> = ["j3", "j5", "j1", "j4", "j6", "j2"]
        .iter()
        .map(|n| info_of(&q, n).release_at)
        .collect();
    assert_eq!(rel, [0, 1, 2, 3, 5, 54]);
    // FIFO: user.1 [j1, j3], team.2 [j2, j5].
    let q = seed_queue(Order::Fifo);
    assert_eq!(order_of(&q), strs(&["j1", "j2", "j3", "j4", "j6", "j5"]));
    for (i, n) in ["j1", "j2", "j3", "j4", "j6", "j5"].iter().enumerate() {
        assert_eq!(q.position(&k(n)), Ok(i + 1), "position of {n}");
    }
}

#[test]
fn seed_examples_release_then_release() {
    for order in [Order::Lifo, Order::Fifo] {
        for (a, b) in [
            ("j1", "j2"),
            ("j4", "j1"),
            ("j6", "j3"),
            ("j2", "j5"),
            ("j3", "j1"),
        ] {
            let mut q = seed_queue(order);
            let before = order_of(&q);
            let others: Vec<String> = before
                .iter()
                .filter(|n| *n != a && *n != b)
                .cloned()
                .collect();
            let kept: Vec<Info> = others.iter().map(|n| info_of(&q, n)).collect();
            let ia = conv(&q.move_job(&k(a), Move::Release, 100).unwrap());
            q.check().unwrap();
            assert_eq!(order_of(&q)[0], a, "{order:?}: release {a} -> front");
            assert!(ia.immediate);
            let ib = conv(&q.move_job(&k(b), Move::Release, 100).unwrap());
            q.check().unwrap();
            assert!(ib.immediate);
            let mut want = strs(&[b, a]);
            want.extend(others.iter().cloned());
            assert_eq!(order_of(&q), want, "{order:?}: release {a} then {b}");
            // Nobody else moved: same release time and nonce.
            for w in &kept {
                assert_eq!(
                    &info_of(&q, &kname(&w.key)),
                    w,
                    "{order:?}: release {a},{b} moved another job"
                );
            }
            // Released jobs are immediate now and cannot be moved again.
            let enc = q.encode();
            assert_eq!(
                q.move_job(&k(a), Move::Release, 200).map(|i| conv(&i)),
                Err(QueueError::ImmediateNotMovable)
            );
            assert_eq!(
                q.move_job(&k(b), Move::Delay { buffer: 10_000 }, 200)
                    .map(|i| conv(&i)),
                Err(QueueError::ImmediateNotMovable)
            );
            assert_eq!(q.encode(), enc);
            assert_eq!(popped_names(&pop_all(&mut q)), want);
        }
    }
}

#[test]
fn seed_examples_delay_then_delay() {
    for order in [Order::Lifo, Order::Fifo] {
        for (a, b) in [
            ("j1", "j2"),
            ("j4", "j1"),
            ("j6", "j3"),
            ("j2", "j5"),
            ("j3", "j1"),
            ("j2", "j4"),
        ] {
            let mut q = seed_queue(order);
            let before = order_of(&q);
            let others: Vec<String> = before
                .iter()
                .filter(|n| *n != a && *n != b)
                .cloned()
                .collect();
            let kept: Vec<Info> = others.iter().map(|n| info_of(&q, n)).collect();
            // The last reservation is j2's/j5's at 54.
            let ia = conv(
                &q.move_job(&k(a), Move::Delay { buffer: 10_000 }, 100)
                    .unwrap(),
            );
            q.check().unwrap();
            assert_eq!(ia.release_at, 10_054, "{order:?}: delay {a}");
            assert!(!ia.immediate);
            assert_eq!(
                order_of(&q).last().unwrap(),
                a,
                "{order:?}: delay {a} -> back"
            );
            let ib = conv(
                &q.move_job(&k(b), Move::Delay { buffer: 10_000 }, 100)
                    .unwrap(),
            );
            q.check().unwrap();
            assert_eq!(ib.release_at, 20_054, "{order:?}: delay {b}");
            let mut want = others.clone();
            want.extend(strs(&[a, b]));
            assert_eq!(order_of(&q), want, "{order:?}: delay {a} then {b}");
            for w in &kept {
                assert_eq!(
                    &info_of(&q, &kname(&w.key)),
                    w,
                    "{order:?}: delay {a},{b} moved another job"
                );
            }
            assert_eq!(q.position(&k(a)), Ok(5));
            assert_eq!(q.position(&k(b)), Ok(6));
            // A delayed job can still be moved (it is not immediate).
            let ia2 = conv(&q.move_job(&k(a), Move::Delay { buffer: 0 }, 100).unwrap());
            assert_eq!(
                ia2.release_at, 20_054,
                "buffer 0: same score as the last, after it"
            );
            assert_eq!(order_of(&q).last().unwrap(), a);
            let popped = pop_all(&mut q);
            let mut want = others.clone();
            want.extend(strs(&[b, a]));
            assert_eq!(popped_names(&popped), want);
        }
    }
}

#[test]
fn delay_counts_the_jobs_own_reservation() {
    for order in [Order::Lifo, Order::Fifo] {
        let mut q = Queue::new(order);
        enq(&mut q, "s", None, 500, 0);
        let i = conv(
            &q.move_job(&k("s"), Move::Delay { buffer: 10_000 }, 0)
                .unwrap(),
        );
        assert_eq!(i.release_at, 10_500);
        enq(&mut q, "c", Some("user.5"), 20_000, 0);
        let i = conv(&q.move_job(&k("c"), Move::Delay { buffer: 1 }, 0).unwrap());
        assert_eq!(i.release_at, 20_001);
        assert_eq!(order_of(&q), strs(&["s", "c"]));
        q.check().unwrap();
    }
}

#[test]
fn lifo_vs_fifo_in_one_collation() {
    let build = |order| {
        let mut q = Queue::new(order);
        enq(&mut q, "a", Some("user.9"), 0, 0);
        enq(&mut q, "b", Some("user.9"), 0, 10);
        enq(&mut q, "x", None, 0, 15);
        enq(&mut q, "c", Some("user.9"), 0, 20);
        q
    };
    let mut q = build(Order::Lifo);
    assert_eq!(q.order(), Order::Lifo);
    assert_eq!(order_of(&q), strs(&["c", "b", "x", "a"]));
    let popped = pop_all(&mut q);
    assert_eq!(popped_names(&popped), strs(&["c", "b", "x", "a"]));
    // The k-th job takes the k-th reservation, not its own arrival time.
    let rel: Vec<i64> = popped.iter().map(|i| i.release_at).collect();
    assert_eq!(rel, [0, 10, 15, 20]);
    let created: Vec<i64> = popped.iter().map(|i| i.created_at).collect();
    assert_eq!(created, [20, 10, 15, 0]);
    assert!(popped.iter().all(|i| i.attempts == 1 && !i.immediate));

    let mut q = build(Order::Fifo);
    assert_eq!(order_of(&q), strs(&["a", "b", "x", "c"]));
    let popped = pop_all(&mut q);
    assert_eq!(popped_names(&popped), strs(&["a", "b", "x", "c"]));
    let rel: Vec<i64> = popped.iter().map(|i| i.release_at).collect();
    assert_eq!(rel, [0, 10, 15, 20]);

    // A spamming student: priorities push their later reservations back, and
    // LIFO hands out the newest submission at the earliest reservation.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "s1", Some("user.7"), 0, 0);
    enq(&mut q, "s2", Some("user.7"), 60_000, 1);
    enq(&mut q, "s3", Some("user.7"), 120_000, 2);
    enq(&mut q, "other", Some("user.8"), 0, 3);
    assert_eq!(order_of(&q), strs(&["s3", "other", "s2", "s1"]));
    assert_eq!(info_of(&q, "s3").release_at, 0);
    assert_eq!(info_of(&q, "s1").release_at, 120_002);
}

#[test]
fn set_order_affects_only_new_jobs() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "a", Some("user.1"), 0, 0);
    enq(&mut q, "b", Some("user.1"), 0, 1);
    q.set_order(Order::Fifo);
    enq(&mut q, "c", Some("user.1"), 0, 2);
    assert_eq!(order_of(&q), strs(&["b", "a", "c"]));
    q.set_order(Order::Lifo);
    enq(&mut q, "d", Some("user.1"), 0, 3);
    assert_eq!(order_of(&q), strs(&["d", "b", "a", "c"]));
    let back = Queue::decode(&q.encode()).unwrap();
    assert_eq!(back.order(), Order::Lifo);
}

#[test]
fn pairing_preserved_on_delete_and_upgrade() {
    for order in [Order::Lifo, Order::Fifo] {
        // Pop order: (first, middle, last) at reservations 0, 100, 200.
        let build = || {
            let mut q = Queue::new(order);
            enq(&mut q, "a", Some("team.3"), 0, 0);
            enq(&mut q, "b", Some("team.3"), 0, 100);
            enq(&mut q, "c", Some("team.3"), 0, 200);
            enq(&mut q, "z", None, 0, 150);
            q
        };
        let q = build();
        let names3 = match order {
            Order::Lifo => ["c", "b", "a"],
            Order::Fifo => ["a", "b", "c"],
        };
        assert_eq!(order_of(&q), strs(&[names3[0], names3[1], "z", names3[2]]));
        let orig: Vec<Info> = names3.iter().map(|n| info_of(&q, n)).collect();
        assert_eq!(
            orig.iter().map(|i| i.release_at).collect::<Vec<_>>(),
            [0, 100, 200]
        );

        for victim in 0..3 {
            // Delete.
            let mut q = build();
            assert_eq!(q.delete(&k(names3[victim])), Ok(true));
            q.check().unwrap();
            for (i, n) in names3.iter().enumerate() {
                if i != victim {
                    assert_eq!(
                        info_of(&q, n),
                        orig[i],
                        "{order:?}: delete {} moved {n}",
                        names3[victim]
                    );
                }
            }
            assert_eq!(q.delete(&k(names3[victim])), Ok(false));
            assert_eq!(q.len(), 3);

            // Upgrade (IMMEDIATE on a waiting collated job).
            let mut q = build();
            let v = names3[victim];
            let (up, created) = q
                .put_immediate(&cfg(v, Some("team.3"), 0), b"new", 300)
                .map(|(i, p)| (i, p.created))
                .unwrap();
            let up = conv(&up);
            assert!(!created);
            assert!(up.immediate);
            assert_eq!(up.release_at, 300);
            assert_eq!(
                up.created_at, orig[victim].created_at,
                "upgrade keeps created_at"
            );
            assert_eq!(up.collation.as_deref(), Some("team.3"));
            assert_eq!(up.payload, b"new");
            q.check().unwrap();
            for (i, n) in names3.iter().enumerate() {
                if i != victim {
                    assert_eq!(info_of(&q, n), orig[i], "{order:?}: upgrade {v} moved {n}");
                }
            }
            // Release / delay of the victim: same for the others.
            for how in [Move::Release, Move::Delay { buffer: 10_000 }] {
                let mut q = build();
                q.move_job(&k(v), how, 400).unwrap();
                q.check().unwrap();
                for (i, n) in names3.iter().enumerate() {
                    if i != victim {
                        assert_eq!(info_of(&q, n), orig[i], "{order:?}: {how:?} {v} moved {n}");
                    }
                }
            }
        }
    }
}

#[test]
fn enqueue_existing_job_replaces_payload_only() {
    for order in [Order::Lifo, Order::Fifo] {
        let mut q = Queue::new(order);
        enq(&mut q, "a", Some("user.1"), 100, 0);
        enq(&mut q, "b", Some("user.1"), 0, 10);
        enq(&mut q, "n", None, 5, 20);
        let before: Vec<Info> = ["a", "b", "n"].iter().map(|n| info_of(&q, n)).collect();
        let pos: Vec<_> = ["a", "b", "n"].iter().map(|n| q.position(&k(n))).collect();
        let ord = order_of(&q);
        // Different priority, collation and time: all ignored.
        let (i, created) = q
            .enqueue(&cfg("a", Some("team.9"), 0), b"A2", 5_000)
            .map(|(i, p)| (i, p.created))
            .unwrap();
        assert!(!created);
        let mut want = before[0].clone();
        want.payload = b"A2".to_vec();
        assert_eq!(conv(&i), want);
        let (i, created) = q
            .enqueue(&cfg("n", Some("user.1"), 0), b"", 5_000)
            .map(|(i, p)| (i, p.created))
            .unwrap();
        assert!(!created);
        assert_eq!(conv(&i).release_at, before[2].release_at);
        assert_eq!(conv(&i).collation, None);
        assert_eq!(order_of(&q), ord);
        assert_eq!(info_of(&q, "b"), before[1]);
        let pos2: Vec<_> = ["a", "b", "n"].iter().map(|n| q.position(&k(n))).collect();
        assert_eq!(pos, pos2);
        // An existing job whose new release time would overflow: still only
        // the payload changes.
        let (_, created) = q
            .enqueue(&cfg("b", None, MAX_TIME), b"B2", MAX_TIME)
            .map(|(i, p)| (i, p.created))
            .unwrap();
        assert!(!created);
        assert_eq!(info_of(&q, "b").payload, b"B2");
        assert_eq!(info_of(&q, "b").release_at, before[1].release_at);
        q.check().unwrap();
    }
}

#[test]
fn immediate_jobs_and_reenqueue() {
    for order in [Order::Lifo, Order::Fifo] {
        let mut q = Queue::new(order);
        enq(&mut q, "a", Some("user.1"), 0, 1_000);
        enq(&mut q, "b", None, 0, 1_001);
        // New immediate job at its arrival.
        let (i, created) = q
            .put_immediate(&cfg("i", Some("user.1"), 0), b"I", 1_002)
            .map(|(i, p)| (i, p.created))
            .unwrap();
        let i = conv(&i);
        assert!(created && i.immediate);
        assert_eq!((i.created_at, i.release_at), (1_002, 1_002));
        assert_eq!(i.collation.as_deref(), Some("user.1"));
        assert_eq!(order_of(&q), strs(&["a", "b", "i"]));
        // Existing immediate job: payload only; arrival ignored.
        let (i2, created) = q
            .put_immediate(&cfg("i", None, 0), b"I2", 0)
            .map(|(i, p)| (i, p.created))
            .unwrap();
        let i2 = conv(&i2);
        assert!(!created);
        assert_eq!(
            (i2.nonce, i2.release_at, i2.created_at),
            (i.nonce, i.release_at, i.created_at)
        );
        assert_eq!(i2.payload, b"I2");
        // Immediate job with equal score: after the earlier arrivals at that time.
        let (j, _) = q
            .put_immediate(&cfg("j", None, 0), b"J", 1_000)
            .map(|(i, p)| (i, p.created))
            .unwrap();
        assert_eq!(conv(&j).release_at, 1_000);
        assert_eq!(order_of(&q), strs(&["a", "j", "b", "i"]));
        // Upgrade of a job without collation.
        let (u, created) = q
            .put_immediate(&cfg("b", None, 0), b"B", 5_000)
            .map(|(i, p)| (i, p.created))
            .unwrap();
        let u = conv(&u);
        assert!(!created && u.immediate);
        assert_eq!((u.created_at, u.release_at), (1_001, 5_000));
        assert_eq!(order_of(&q), strs(&["a", "j", "i", "b"]));
        // A worker hands a popped job back: immediate at its arrival time,
        // ahead of everything that arrived later.
        let popped = conv(&q.pop().unwrap().unwrap());
        assert_eq!(kname(&popped.key), "a");
        assert_eq!(popped.attempts, 1);
        let (r, created) = q
            .put_immediate(
                &cfg("a", Some("user.1"), 0),
                &popped.payload,
                popped.created_at,
            )
            .map(|(i, p)| (i, p.created))
            .unwrap();
        let r = conv(&r);
        assert!(created && r.immediate);
        assert_eq!((r.created_at, r.release_at), (1_000, 1_000));
        assert_eq!(
            order_of(&q),
            strs(&["j", "a", "i", "b"]),
            "equal score: arrival (sequence) order"
        );
        // Arrival in the past: before everything.
        q.put_immediate(&cfg("old", None, 0), b"", 10)
            .map(|(i, p)| (i, p.created))
            .unwrap();
        assert_eq!(order_of(&q)[0], "old");
        q.check().unwrap();
        assert_eq!(
            popped_names(&pop_all(&mut q)),
            strs(&["old", "j", "a", "i", "b"])
        );
    }
}

#[test]
fn release_goes_before_everything_even_in_the_past() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "late", None, 0, 5_000);
    q.put_immediate(&cfg("early", None, 0), b"", 100)
        .map(|(i, p)| (i, p.created))
        .unwrap();
    enq(&mut q, "r", Some("user.1"), 60_000, 6_000);
    // Released at now=7000, but the first reservation is at 100.
    let r = conv(&q.move_job(&k("r"), Move::Release, 7_000).unwrap());
    assert_eq!(r.release_at, 100);
    assert!(r.immediate);
    assert_eq!(order_of(&q), strs(&["r", "early", "late"]));
    // now earlier than the first reservation: score = now.
    enq(&mut q, "s", None, 0, 8_000);
    let s = conv(&q.move_job(&k("s"), Move::Release, 50).unwrap());
    assert_eq!(s.release_at, 50);
    assert_eq!(order_of(&q), strs(&["s", "r", "early", "late"]));
    // Releasing the only job.
    let mut q = Queue::new(Order::Fifo);
    enq(&mut q, "only", Some("team.1"), 100, 0);
    let o = conv(&q.move_job(&k("only"), Move::Release, 30).unwrap());
    assert_eq!(o.release_at, 30);
    assert_eq!(q.collation_count(), 0);
    q.check().unwrap();
}

#[test]
fn pop_does_not_wait_for_release_time() {
    let mut q = Queue::new(Order::Lifo);
    assert_eq!(q.pop().map(|o| o.is_none()), Ok(true));
    enq(&mut q, "far", Some("user.1"), 1_000_000_000, 0);
    let p = conv(
        &q.pop()
            .unwrap()
            .expect("future release time held the job back"),
    );
    assert_eq!(kname(&p.key), "far");
    assert_eq!(p.release_at, 1_000_000_000);
    assert_eq!(p.attempts, 1);
    assert_eq!(p.payload, b"far");
    assert!(q.is_empty());
    assert_eq!(q.collation_count(), 0);
    assert_eq!(q.pop().map(|o| o.is_none()), Ok(true));
}

#[test]
fn errors_change_nothing() {
    let mut q = seed_queue(Order::Lifo);
    q.put_immediate(&cfg("imm", None, 0), b"", 7)
        .map(|(i, p)| (i, p.created))
        .unwrap();
    let enc = q.encode();
    let same = |q: &Queue| assert_eq!(q.encode(), enc);
    assert_eq!(
        q.move_job(&k("nope"), Move::Release, 1).map(|i| conv(&i)),
        Err(QueueError::NoSuchJob)
    );
    same(&q);
    assert_eq!(
        q.move_job(&k("nope"), Move::Delay { buffer: 1 }, 1)
            .map(|i| conv(&i)),
        Err(QueueError::NoSuchJob)
    );
    same(&q);
    assert_eq!(
        q.move_job(&k("imm"), Move::Release, 1).map(|i| conv(&i)),
        Err(QueueError::ImmediateNotMovable)
    );
    same(&q);
    assert_eq!(q.delete(&k("nope")), Ok(false));
    same(&q);
    assert_eq!(
        q.info(&k("nope")).map(|i| conv(&i)),
        Err(QueueError::NoSuchJob)
    );
    assert_eq!(q.position(&k("nope")), Err(QueueError::NoSuchJob));
    assert_eq!(
        q.enqueue(&cfg("new", Some("user.1"), MAX_TIME), b"", 1)
            .map(|(i, p)| (i, p.created))
            .map(|(i, b)| (conv(&i), b)),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.enqueue(&cfg("new", None, i64::MAX), b"", 1)
            .map(|(i, p)| (i, p.created))
            .map(|(i, b)| (conv(&i), b)),
        Err(QueueError::TimeOverflow)
    );
    same(&q);
    for bad in [-1, MAX_TIME + 1, i64::MIN, i64::MAX] {
        assert_eq!(
            q.put_immediate(&cfg("new", None, 0), b"", bad)
                .map(|(i, p)| (i, p.created))
                .map(|(i, b)| (conv(&i), b)),
            Err(QueueError::TimeOverflow)
        );
        // Even for an existing job (an upgrade would be wrong too).
        assert_eq!(
            q.put_immediate(&cfg("j1", None, 0), b"", bad)
                .map(|(i, p)| (i, p.created))
                .map(|(i, b)| (conv(&i), b)),
            Err(QueueError::TimeOverflow)
        );
        assert_eq!(
            q.move_job(&k("j1"), Move::Release, bad).map(|i| conv(&i)),
            Err(QueueError::TimeOverflow)
        );
        same(&q);
    }
    assert_eq!(
        q.move_job(&k("j1"), Move::Delay { buffer: MAX_TIME }, 1)
            .map(|i| conv(&i)),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.move_job(&k("j4"), Move::Delay { buffer: i64::MAX }, 1)
            .map(|i| conv(&i)),
        Err(QueueError::TimeOverflow)
    );
    same(&q);
    // Exactly MAX_TIME is fine; one more is not.
    enq(&mut q, "max", None, MAX_TIME - 10, 10);
    assert_eq!(info_of(&q, "max").release_at, MAX_TIME);
    let enc = q.encode();
    assert_eq!(
        q.move_job(&k("j1"), Move::Delay { buffer: 1 }, 1)
            .map(|i| conv(&i)),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(q.encode(), enc);
    assert_eq!(
        conv(&q.move_job(&k("j1"), Move::Delay { buffer: 0 }, 1).unwrap()).release_at,
        MAX_TIME
    );
    assert_eq!(order_of(&q).last().unwrap(), "j1");
    q.check().unwrap();
    let back = Queue::decode(&q.encode()).unwrap();
    assert_eq!(back.encode(), q.encode());
}

#[test]
fn config_json_gives_the_orca_key() {
    let c = parse_config(
        br#"{"key":"k1","response_url":"http://cb/1","collation":{"type":"user","id":"3"},"priority":5000,"script":[]}"#,
    )
    .unwrap();
    assert_eq!(c.job_key, orca_key("k1", "http://cb/1"));
    assert_eq!(c.collation.as_deref(), Some("user.3"));
    assert_eq!(c.priority, 5000);
    let mut q = Queue::new(Order::Lifo);
    let (i, created) = q
        .enqueue(&c, b"{}", 10)
        .map(|(i, p)| (i, p.created))
        .unwrap();
    assert!(created);
    assert_eq!(i.release_at, 5010);
    assert_eq!(encode_key(&i.key).len(), 44);
    assert!(!encode_key(&i.key).contains('.'));
    // Without collation: a single reservation, not immediate.
    let c = parse_config(br#"{"key":"k2"}"#).unwrap();
    let (i, _) = q.enqueue(&c, b"", 10).map(|(i, p)| (i, p.created)).unwrap();
    assert_eq!(
        (i.immediate, i.collation.is_none(), i.release_at),
        (false, true, 10)
    );
}

// ---------------------------------------------------------------------------
// Codec: unit-level properties and a decode fuzz test
// ---------------------------------------------------------------------------

/// A queue built by a random sequence (checked against the model as it goes).
fn random_queue(seed: u64, order: Order, steps: usize) -> Queue {
    let mut h = Harness::new(seed, order);
    for step in 0..steps {
        let op = h.gen_op(step);
        h.apply(&op)
            .unwrap_or_else(|e| panic!("seed {seed} step {step} {}: {e}", describe(&op)));
    }
    h.q
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Split `encode()` output into (header, units) following its framing:
/// bytes(header) u64(count) bytes(unit)*.
fn split_units(buf: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let hl = le_u64(buf, 0).unwrap() as usize;
    let header = buf[8..8 + hl].to_vec();
    let mut at = 8 + hl;
    let n = le_u64(buf, at).unwrap();
    at += 8;
    let mut units = Vec::new();
    for _ in 0..n {
        let l = le_u64(buf, at).unwrap() as usize;
        units.push(buf[at + 8..at + 8 + l].to_vec());
        at += 8 + l;
    }
    assert_eq!(at, buf.len(), "framing of encode() not as expected");
    (header, units)
}

fn join_units(header: &[u8], units: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(&(units.len() as u64).to_le_bytes());
    for u in units {
        out.extend_from_slice(&(u.len() as u64).to_le_bytes());
        out.extend_from_slice(u);
    }
    out
}

#[test]
fn codec_units_are_canonical_and_self_contained() {
    for (seed, order) in [(21, Order::Lifo), (22, Order::Fifo), (23, Order::Lifo)] {
        let q = random_queue(seed, order, 700);
        let bytes = q.encode();
        let (header, units) = split_units(&bytes);
        assert_eq!(units.len(), q.unit_count());
        let mut rng = Rng::new(seed);
        // Any permutation of the units decodes to the same queue, which
        // encodes back canonically.
        for _ in 0..10 {
            let mut u = units.clone();
            for i in (1..u.len()).rev() {
                u.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let d = Queue::decode(&join_units(&header, &u)).expect("shuffled units rejected");
            assert_eq!(
                d.encode(),
                bytes,
                "seed {seed}: shuffled units decode differently"
            );
        }
        // Each unit is valid on its own: dropping one loses exactly its jobs.
        let full = Queue::decode(&bytes).unwrap();
        for drop in 0..units.len() {
            let mut u = units.clone();
            u.remove(drop);
            let d = Queue::decode(&join_units(&header, &u))
                .unwrap_or_else(|e| panic!("seed {seed}: dropping unit {drop} rejected: {e}"));
            d.check().unwrap();
            let kept: Vec<JobKey> = full
                .pop_order()
                .into_iter()
                .filter(|key| d.info(key).is_ok())
                .collect();
            assert_eq!(d.pop_order().len(), kept.len());
            assert!(d.len() < full.len());
        }
        // A duplicated unit is rejected.
        if !units.is_empty() {
            let mut u = units.clone();
            let i = rng.below(u.len() as u64) as usize;
            u.push(u[i].clone());
            assert!(
                Queue::decode(&join_units(&header, &u)).is_err(),
                "duplicate unit accepted"
            );
        }
        // Header/count/trailing-byte damage.
        let mut t = bytes.clone();
        t.push(0);
        assert!(Queue::decode(&t).is_err(), "trailing byte accepted");
        let mut h = header.clone();
        h[0] = orca::core::codec::ENCODING_CURRENT + 1; // a newer encoding version
        assert!(
            Queue::decode(&join_units(&h, &units)).is_err(),
            "future version accepted"
        );
        let mut h = header.clone();
        h[1] = 2; // unknown order
        assert!(
            Queue::decode(&join_units(&h, &units)).is_err(),
            "unknown order accepted"
        );
    }
}

const INTERESTING: [i64; 12] = [
    0,
    1,
    -1,
    2,
    MAX_TIME,
    MAX_TIME + 1,
    i64::MIN,
    i64::MAX,
    u32::MAX as i64,
    1 << 32,
    i64::MAX / 2,
    i64::MIN / 2,
];

fn mutate(rng: &mut Rng, base: &[u8]) -> (String, Vec<u8>) {
    let mut b = base.to_vec();
    let len = b.len();
    let pos = |rng: &mut Rng, len: usize| {
        if len == 0 {
            0
        } else {
            rng.below(len as u64) as usize
        }
    };
    let kind = rng.below(10);
    let desc = match kind {
        0 => {
            let p = pos(rng, len);
            let x = 1 + rng.below(255) as u8;
            if len > 0 {
                b[p] ^= x;
            }
            format!("xor byte {p} with {x:#04x}")
        }
        1 => {
            let p = pos(rng, len);
            let bit = rng.below(8);
            if len > 0 {
                b[p] ^= 1 << bit;
            }
            format!("flip bit {bit} of byte {p}")
        }
        2 => {
            let p = pos(rng, len);
            b.truncate(p);
            format!("truncate to {p}")
        }
        3 | 4 => {
            let p = pos(rng, len);
            let n = 1 + rng.below(8) as usize;
            let v = if kind == 3 { 0xff } else { 0 };
            for x in b.iter_mut().skip(p).take(n) {
                *x = v;
            }
            format!("set {n} bytes at {p} to {v:#04x}")
        }
        5 => {
            let p = pos(rng, len + 1);
            let n = 1 + rng.below(16) as usize;
            let ins: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            b.splice(p..p, ins);
            format!("insert {n} random bytes at {p}")
        }
        6 => {
            let p = pos(rng, len);
            let n = (1 + rng.below(64) as usize).min(len - p.min(len));
            b.drain(p..p + n);
            format!("delete {n} bytes at {p}")
        }
        7 => {
            // Copy a chunk over another place (duplicates keys, units, ...).
            let n = 1 + rng.below(80) as usize;
            if len > n {
                let from = rng.below((len - n) as u64) as usize;
                let to = rng.below((len - n) as u64) as usize;
                let chunk = b[from..from + n].to_vec();
                b[to..to + n].copy_from_slice(&chunk);
                format!("copy {n} bytes from {from} to {to}")
            } else {
                "no-op".into()
            }
        }
        8 => {
            // An interesting 8-byte value at a random offset.
            let v = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
            if len >= 8 {
                let p = rng.below((len - 7) as u64) as usize;
                b[p..p + 8].copy_from_slice(&v.to_le_bytes());
                format!("write i64 {v} at {p}")
            } else {
                "no-op".into()
            }
        }
        _ => {
            let n = 2 + rng.below(4);
            for _ in 0..n {
                if !b.is_empty() {
                    let p = rng.below(b.len() as u64) as usize;
                    b[p] = rng.next_u64() as u8;
                }
            }
            format!("{n} random bytes replaced")
        }
    };
    (desc, b)
}

/// Use a queue that decoding accepted: every query and operation must work
/// without panicking and keep it valid.
fn exercise(q: &mut Queue) -> Result<(), String> {
    q.check()
        .map_err(|e| format!("accepted queue fails check(): {e}"))?;
    let bytes = q.encode();
    let again = match Queue::decode(&bytes) {
        Ok(q) => q,
        Err(e) => return err(format!("re-decoding an accepted queue failed: {e}")),
    };
    ensure!(
        again.encode() == bytes,
        "accepted queue does not round-trip"
    );
    let order = q.pop_order();
    ensure!(
        order.len() == q.len(),
        "pop_order() has {} jobs, len() {}",
        order.len(),
        q.len()
    );
    for (i, key) in order.iter().enumerate() {
        q.info(key).map_err(|e| format!("info failed: {e}"))?;
        ensure!(
            q.position(key) == Ok(i + 1),
            "position disagrees with pop_order"
        );
    }
    // A crafted queue may sit at the end of its sequence range: then writes
    // are refused (with nothing changed), never half-done.
    let before = q.encode();
    match q
        .enqueue(&cfg("fuzz-new", Some("user.1"), 10), b"n", 1_000)
        .map(|(i, p)| (i, p.created))
    {
        Ok(_) => {}
        Err(e) if exhausted(&e) => {
            ensure!(q.encode() == before, "refused enqueue changed the queue")
        }
        Err(e) => return err(format!("enqueue failed: {e}")),
    }
    q.check()?;
    let before = q.encode();
    match q
        .put_immediate(&cfg("fuzz-imm", None, 0), b"i", 0)
        .map(|(i, p)| (i, p.created))
    {
        Ok(_) => {}
        Err(e) if exhausted(&e) => ensure!(
            q.encode() == before,
            "refused put_immediate changed the queue"
        ),
        Err(e) => return err(format!("put_immediate failed: {e}")),
    }
    q.check()?;
    let movable: Vec<JobKey> = q
        .pop_order()
        .into_iter()
        .filter(|key| q.info(key).map(|i| !i.immediate).unwrap_or(false))
        .take(2)
        .collect();
    for (i, key) in movable.iter().enumerate() {
        let how = if i == 0 {
            Move::Delay { buffer: 10_000 }
        } else {
            Move::Release
        };
        match q.move_job(key, how, 2_000) {
            Ok(_) | Err(QueueError::TimeOverflow) => {}
            Err(e) if exhausted(&e) => {}
            Err(e) => return err(format!("move_job failed: {e}")),
        }
        q.check()?;
    }
    if let Some(key) = q.pop_order().get(q.len() / 2).copied() {
        ensure!(q.delete(&key) == Ok(true), "delete of a listed job failed");
        q.check()?;
    }
    let expect = q.pop_order();
    let mut got = Vec::new();
    while let Some(i) = q.pop().map_err(|e| format!("pop failed: {e}"))? {
        got.push(i.key);
        if got.len() % 8 == 1 {
            q.check()?;
        }
    }
    q.check()?;
    ensure!(got == expect, "pops do not follow pop_order()");
    Ok(())
}

/// The refusal of a write on a queue whose sequence counters are exhausted.
fn exhausted(e: &QueueError) -> bool {
    matches!(e, QueueError::Corrupt(m) if m == "sequence numbers exhausted")
}

#[test]
fn decode_fuzz() {
    let start = Instant::now();
    let mut bases: Vec<(String, Vec<u8>)> = vec![
        ("empty lifo".into(), Queue::new(Order::Lifo).encode()),
        ("empty fifo".into(), Queue::new(Order::Fifo).encode()),
        ("seed queue".into(), {
            let mut q = seed_queue(Order::Lifo);
            q.move_job(&k("j1"), Move::Release, 9).unwrap();
            q.move_job(&k("j2"), Move::Delay { buffer: 10 }, 9).unwrap();
            q.put_immediate(&cfg("imm", Some("team.2"), 0), b"payload", 3)
                .map(|(i, p)| (i, p.created))
                .unwrap();
            q.encode()
        }),
    ];
    for (seed, order, steps) in [
        (31, Order::Lifo, 40),
        (32, Order::Fifo, 120),
        (33, Order::Lifo, 350),
        (34, Order::Fifo, 800),
    ] {
        bases.push((
            format!("random seed {seed} {order:?} {steps} steps"),
            random_queue(seed, order, steps).encode(),
        ));
    }
    let mut accepted = 0usize;
    let mut rejected = 0usize;
    let fuzz_seeds: Vec<u64> = seeds(&DEFAULT_SEEDS).into_iter().take(3).collect();
    for &seed in &fuzz_seeds {
        let mut rng = Rng::new(seed ^ 0xF022);
        for (name, base) in &bases {
            for m in 0..300 {
                let (desc, bytes) = mutate(&mut rng, base);
                let r = catch_unwind(AssertUnwindSafe(|| match Queue::decode(&bytes) {
                    Err(_) => Ok(false),
                    Ok(mut q) => exercise(&mut q).map(|_| true),
                }));
                match r {
                    Ok(Ok(true)) => accepted += 1,
                    Ok(Ok(false)) => rejected += 1,
                    Ok(Err(e)) => panic!(
                        "decode fuzz: seed {seed}, base {name:?}, mutation {m} ({desc}): {e}"
                    ),
                    Err(_) => panic!(
                        "decode fuzz: seed {seed}, base {name:?}, mutation {m} ({desc}): PANIC (see above)"
                    ),
                }
            }
        }
    }
    eprintln!(
        "decode_fuzz: {} mutations ({accepted} accepted and exercised, {rejected} rejected) in {:.2?}",
        accepted + rejected,
        start.elapsed()
    );
}

// ---------------------------------------------------------------------------
// Regressions: core bugs this suite found (each failed before its fix).
// ---------------------------------------------------------------------------

/// Offset of the u32 `attempts` of job `name` in an encoding: it follows the
/// 32-byte job key and the 8-byte created_at.
fn attempts_offset(bytes: &[u8], name: &str) -> usize {
    let key = k(name);
    bytes
        .windows(32)
        .position(|w| w == key)
        .expect("job key not in encoding")
        + 40
}

#[test]
fn regression_pop_attempts_overflow() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "a", None, 0, 0);
    let mut bytes = q.encode();
    let at = attempts_offset(&bytes, "a");
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    // Rejecting such a queue is a fix too.
    let Ok(mut d) = Queue::decode(&bytes) else {
        return;
    };
    assert_eq!(d.info(&k("a")).unwrap().attempts, u32::MAX);
    let r = catch_unwind(AssertUnwindSafe(|| d.pop().map(|o| o.map(|i| i.attempts))));
    let attempts = r.expect("pop panicked").unwrap().unwrap();
    assert_ne!(attempts, 0, "attempts wrapped around to 0");
}

#[test]
fn regression_decode_accepts_counters_it_cannot_reload() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "a", None, 0, 0);
    let bytes = q.encode();
    // A single unit ends with score(8) tie(8) nonce(8) immediate(1).
    let n = bytes.len();
    for (what, at) in [("nonce", n - 9), ("tie", n - 17)] {
        let mut b = bytes.clone();
        b[at..at + 8].copy_from_slice(&(i64::MAX / 2).to_le_bytes());
        if let Ok(d) = Queue::decode(&b) {
            let again = Queue::decode(&d.encode());
            assert!(
                again.is_ok(),
                "{what} = i64::MAX/2 accepted, but its re-encoding is rejected: {again:?}"
            );
        }
    }
    // Header: bytes(header) = len(8) version(1) order(1) next_seq(8) front_tie(8).
    let mut b = bytes.clone();
    b[10..18].copy_from_slice(&(i64::MAX / 2).to_le_bytes());
    if let Ok(mut d) = Queue::decode(&b) {
        if d.enqueue(&cfg("b", None, 0), b"", 1)
            .map(|(i, p)| (i, p.created))
            .is_ok()
        {
            let again = Queue::decode(&d.encode());
            assert!(again.is_ok(), "next_seq = i64::MAX/2 accepted; one enqueue later the queue cannot be reloaded: {again:?}");
        }
    }
}

#[test]
fn regression_enqueue_accepts_negative_now() {
    let mut q = Queue::new(Order::Lifo);
    if q.enqueue(&cfg("neg", None, 10), b"", -5)
        .map(|(i, p)| (i, p.created))
        .is_ok()
    {
        q.check().unwrap();
        let d = Queue::decode(&q.encode());
        assert!(
            d.is_ok(),
            "enqueue at now=-5 accepted, but the queue cannot be reloaded: {d:?}"
        );
    }
}

#[test]
fn regression_negative_delay_buffer_moves_other_jobs() {
    let mut q = Queue::new(Order::Fifo);
    enq(&mut q, "a", Some("user.1"), 1_000, 0);
    enq(&mut q, "b", Some("user.1"), 2_000, 0);
    enq(&mut q, "z", None, 5_000, 0);
    let b_before = info_of(&q, "b");
    if q.move_job(&k("a"), Move::Delay { buffer: -4_500 }, 0)
        .is_ok()
    {
        q.check().unwrap();
        assert_eq!(info_of(&q, "b"), b_before, "delaying a moved b");
        assert_eq!(
            order_of(&q).last().unwrap(),
            "a",
            "delay did not move a to the back"
        );
    }
}

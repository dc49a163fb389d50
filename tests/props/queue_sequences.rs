//! Long random operation sequences on the queue core against the model
//! (`queue_model.rs`), in LIFO and FIFO queues. After every step
//! `check()`, `len()`, `collation_count()`, `pop_order()` and a sample of
//! `info()`/`position()` are compared with the model, and a failing
//! operation must leave `encode()` unchanged. Every 100 steps the queue goes
//! through `encode`/`decode` (byte-identical), and the decoded copy is
//! driven alongside and must keep behaving identically.
//!
//! A failure prints the seed, the collation order, the step number, the
//! operation that failed and the operations leading up to it; re-run with
//! `ORCA_PROP_SEED=<seed>` to replay it (`ORCA_PROP_STEPS`: steps per
//! sequence, default 3000).

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use orca::core::{parse_config, JobConfig, JobKey, Move, Order, Queue, QueueError, MAX_TIME};

use crate::common::{json_str, seeds, steps, Rng};
use crate::queue_model::*;
use crate::support::*;

// Short names are packed into the collation record, longer ones (ids over
// 15 bytes) kept aside (src/core/names.rs): both kinds are exercised.
pub const COLLS: [&str; 4] = [
    "user.1",
    "team.7",
    "user.123456789012345",
    "team.a-long-team-name-over-15-bytes",
];

pub const POOL: usize = 80;

#[derive(Clone, Debug)]
pub enum Op {
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
pub fn pool_name(i: usize) -> String {
    format!("k{i}")
}

pub fn pool_url(i: usize) -> String {
    if i % 2 == 1 {
        format!("http://r.example/{i}")
    } else {
        String::new()
    }
}

/// The config of pool key `i`, built directly or through `parse_config` on a
/// JSON config (checking both agree).
pub fn pool_cfg(
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

pub struct Harness {
    pub rng: Rng,
    pub q: Queue,
    /// Decoded copy of `q` taken at the last sync point, driven with the same
    /// operations: it must behave identically.
    pub twin: Queue,
    pub model: Model,
    pub now: i64,
    pub pool: Vec<JobKey>,
    pub pool_index: HashMap<JobKey, usize>,
    pub last_popped: Option<(usize, i64)>,
    pub allow_set_order: bool,
}

impl Harness {
    pub fn new(seed: u64, order: Order) -> Self {
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

    pub fn payload(&mut self, step: usize) -> Vec<u8> {
        match self.rng.below(10) {
            0 => Vec::new(),
            1 => (0..self.rng.below(20))
                .map(|_| self.rng.next_u64() as u8)
                .collect(),
            _ => format!("p{step}").into_bytes(),
        }
    }

    pub fn coll(&mut self) -> Option<&'static str> {
        match self.rng.below(100) {
            0..=34 => Some(COLLS[0]),
            35..=59 => Some(COLLS[1]),
            60..=74 => Some(COLLS[2]),
            75..=79 => Some(COLLS[3]),
            _ => None,
        }
    }

    /// A key for move/delete: usually a queued job, sometimes any pool key.
    pub fn target(&mut self) -> usize {
        let n = self.model.len();
        if n > 0 && self.rng.chance(85) {
            let key = self.model.jobs[self.rng.below(n as u64) as usize].key;
            self.pool_index[&key]
        } else {
            self.rng.below(POOL as u64) as usize
        }
    }

    pub fn gen_op(&mut self, step: usize) -> Op {
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
            0 if (690..=997).contains(&r) && self.rng.chance(75) => r = self.rng.below(360),
            2 if r < 460 && self.rng.chance(30) => r = 800,
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
                    json: self.rng.chance(30),
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
                        let key = if self.rng.chance(50) {
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
                    json: self.rng.chance(30),
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
            _ if self.allow_set_order => Op::SetOrder(if self.rng.chance(50) {
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
    pub fn apply(&mut self, op: &Op) -> Result<(Option<JobKey>, String), String> {
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
                let got = self.on_both("enqueue", &want, |q| {
                    q.enqueue(&c, payload, *now)
                        .map(|(i, p)| (conv(&i), p.created))
                })?;
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
                let got = self.on_both("put_immediate", &want, |q| {
                    q.put_immediate(&c, payload, *arrival)
                        .map(|(i, p)| (conv(&i), p.created))
                })?;
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
                let got = self.on_both("move_job", &want, |q| {
                    q.move_job(&jk, how, at).map(|i| conv(&i))
                })?;
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
                let _ = self.on_both("delete", &want, |q| q.delete(&jk))?;
                (Some(jk), false, format!("delete: {was}"))
            }
            Op::Pop => {
                let first = self.model.pop_order().first().copied();
                let was = kind_of(first.and_then(|k| self.model.job(&k)));
                let want = Ok(self.model.pop());
                let got = self.on_both("pop", &want, |q| q.pop().map(|o| o.as_ref().map(conv)))?;
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

    /// `f` on the queue and on its decoded twin: the queue's answer, which
    /// must be `want` (the model's) and the twin's answer too.
    pub fn on_both<T: PartialEq + std::fmt::Debug>(
        &mut self,
        what: &str,
        want: &T,
        f: impl Fn(&mut Queue) -> T,
    ) -> Result<T, String> {
        let got = f(&mut self.q);
        let twin = f(&mut self.twin);
        ensure!(got == *want, "{what} returned {got:?}, model says {want:?}");
        ensure!(
            twin == got,
            "decoded twin: {what} returned {twin:?}, queue {got:?}"
        );
        Ok(got)
    }

    pub fn compare_job(&self, key: &JobKey) -> Result<(), String> {
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
    pub fn verify(&mut self, touched: Option<JobKey>, full: bool) -> Result<(), String> {
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
    pub fn sync(&mut self) -> Result<(), String> {
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
    pub fn drain(&mut self) -> Result<(), String> {
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

pub fn describe(op: &Op) -> String {
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
pub struct Stats {
    pub counts: std::collections::BTreeMap<String, usize>,
    pub max_len: usize,
    pub max_stack: usize,
}

impl Stats {
    pub fn add(&mut self, label: String) {
        *self.counts.entry(label).or_insert(0) += 1;
    }
}

pub fn run_sequence(seed: u64, order: Order, steps: usize, stats: &mut Stats) {
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
                let msg = panic_text(&*p);
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

pub fn run_all(order: Order) {
    let start = Instant::now();
    let steps = steps(3000);
    let seeds = seeds(&SEEDS);
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
pub fn random_sequences_lifo() {
    run_all(Order::Lifo);
}

#[test]
pub fn random_sequences_fifo() {
    run_all(Order::Fifo);
}

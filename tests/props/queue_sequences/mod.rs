//! Long random operation sequences on the queue core against the order
//! model (`queue_model.rs`, with `gates_model.rs` and `window_model.rs`),
//! in LIFO and FIFO queues: enqueue (directly or through a JSON config,
//! some naming gates), immediate / re-enqueue, release, delay, delete, pop,
//! order changes, and in most sequences gates closed, opened and dropped
//! (held jobs updated, upgraded, deleted, refused by MOVE, released exactly
//! as if enqueued at their arrival) and the automatic delay turned on,
//! changed and off. After every step `check()`, `len()`, `held_len()`,
//! `gate_list()`, `collation_count()`, `pop_order()`, the held listing and
//! a sample of `info()`/`position()` are compared with the model, and a
//! failing operation must leave `encode()` unchanged. Every 100 steps the
//! queue goes through `encode`/`decode` (byte-identical), and the decoded
//! copy is driven alongside and must keep behaving identically. At the end
//! every gate is opened and the queue drained.
//!
//! A failure prints the seed, the collation order, the step number, the
//! operation that failed and the operations leading up to it; re-run with
//! `ORCA_PROP_SEED=<seed>` to replay it (`ORCA_PROP_STEPS`: steps per
//! sequence, default 3000).

mod generate;

pub use generate::pool_cfg;

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use orca::core::settings::AutoDelay;
use orca::core::{JobKey, Move, Order, Put, Queue, QueueError, Settings};

use crate::common::{seeds, steps, Rng};
pub use crate::gates_model::{compare_gates, GateOp};
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

/// Gates: the first `CONFIG_GATES` can be named by a config (a JSON
/// string); the others only by `ORCA.GATE`, which takes any bytes ("Gate
/// names are binary-safe"): they are closed, opened and dropped, and never
/// hold anything.
pub const GATES: [&[u8]; 5] = [
    b"img-hw1",
    b"img-hw2",
    "\u{e9}t\u{e9} \"2\"".as_bytes(),
    b"\x00\xff\xfe binary",
    &[b'g'; 300],
];
pub const CONFIG_GATES: usize = 3;

#[derive(Clone, Debug)]
pub enum Op {
    Enqueue {
        key: usize,
        coll: Option<&'static str>,
        priority: i64,
        gate: Option<usize>,
        payload: Vec<u8>,
        now: i64,
        json: bool,
    },
    Immediate {
        key: usize,
        coll: Option<&'static str>,
        gate: Option<usize>,
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
    Gate {
        gate: usize,
        op: GateOp,
    },
    SetAutoDelay(AutoDelay),
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
    /// Configs name gates and gates are closed, opened and dropped.
    pub gates_on: bool,
    /// The automatic delay is turned on, changed and off.
    pub autodelay_on: bool,
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
            gates_on: seed % 5 != 4,
            autodelay_on: seed % 3 != 1,
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
            Some(j) if j.held.is_some() && j.immediate => "held immediate",
            Some(j) if j.held.is_some() => "held",
            Some(j) if j.immediate => "immediate",
            Some(j) if j.collated => "collated",
            Some(_) => "single",
        };
        let delayed = |p: &Put| if p.delay > 0 { ", auto-delayed" } else { "" };
        let (touched, failed, label) = match op {
            Op::Enqueue {
                key,
                coll,
                priority,
                gate,
                payload,
                now,
                json,
            } => {
                let c = pool_cfg(*key, self.pool[*key], *coll, *priority, *gate, *json)?;
                let want = self.model.enqueue(&c, payload, *now);
                let got = self.on_both("enqueue", &want, |q| {
                    q.enqueue(&c, payload, *now).map(|(i, p)| (conv(&i), p))
                })?;
                let label = match &got {
                    Err(e) => format!("enqueue: {e:?}"),
                    Ok((_, p)) if p.created => format!(
                        "enqueue: new {}{}",
                        kind_of(self.model.job(&c.job_key)),
                        delayed(p)
                    ),
                    Ok((i, _)) => {
                        format!("enqueue: update of {}", kind_of(self.model.job(&i.key)))
                    }
                };
                (Some(c.job_key), got.is_err(), label)
            }
            Op::Immediate {
                key,
                coll,
                gate,
                payload,
                arrival,
                json,
            } => {
                let c = pool_cfg(*key, self.pool[*key], *coll, 0, *gate, *json)?;
                let was = kind_of(self.model.job(&c.job_key));
                let want = self.model.put_immediate(&c, payload, *arrival);
                let got = self.on_both("put_immediate", &want, |q| {
                    q.put_immediate(&c, payload, *arrival)
                        .map(|(i, p)| (conv(&i), p))
                })?;
                let label = match &got {
                    Err(e) => format!("immediate: {e:?}"),
                    Ok((_, p)) if p.created => {
                        format!("immediate: new {}", kind_of(self.model.job(&c.job_key)))
                    }
                    Ok(_) if was == "immediate" => "immediate: update".to_string(),
                    Ok(_) => format!("immediate: upgrade of {was}"),
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
            Op::Gate { gate, op } => {
                let g = GATES[*gate];
                let held = self.model.held_keys(g).len();
                let closed = self.model.gates.contains(g);
                let label = match op {
                    GateOp::Close => {
                        let want = Ok(self.model.close_gate(g));
                        let _ = self.on_both("close_gate", &want, |q| q.close_gate(g))?;
                        format!("gate close: was open {want:?}")
                    }
                    GateOp::Open => {
                        let want = Ok(self.model.open_gate(g));
                        let _ = self.on_both("open_gate", &want, |q| q.open_gate(g))?;
                        format!("gate open: closed {closed}, released {}", held.min(3))
                    }
                    GateOp::Drop => {
                        let want: Result<Vec<Vec<u8>>, QueueError> = Ok(self.model.drop_gate(g));
                        let _ = self.on_both("drop_gate", &want, |q| {
                            q.drop_gate(g)
                                .map(|v| v.into_iter().map(|b| b.to_vec()).collect())
                        })?;
                        format!("gate drop: closed {closed}, dropped {}", held.min(3))
                    }
                };
                (None, false, label)
            }
            Op::SetAutoDelay(a) => {
                self.model.window.set(*a);
                for q in [&mut self.q, &mut self.twin] {
                    let s = Settings {
                        autodelay: *a,
                        ..*q.settings()
                    };
                    q.set_settings(s)
                        .map_err(|e| format!("set_settings({a:?}) failed: {e}"))?;
                }
                ensure!(
                    self.q.settings().autodelay == *a,
                    "the auto delay did not take"
                );
                (None, false, format!("autodelay: on {}", a.window > 0))
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
        let want = self.model.position(key);
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
        self.verify_gates()?;
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
            if !self.model.jobs.is_empty() {
                let n = self.model.jobs.len() as u64;
                let key = self.model.jobs[self.rng.below(n) as usize].key;
                self.compare_job(&key)?;
            }
        }
        Ok(())
    }

    /// Held jobs and gates: counts, each closed gate with its held count,
    /// the held listing (all, one gate, a page) and the settings.
    pub fn verify_gates(&mut self) -> Result<(), String> {
        let m = &self.model;
        compare_gates(&self.q, m)?;
        let held = |q: &Queue, gate: Option<&[u8]>, offset, limit| -> Vec<(Info, Vec<u8>)> {
            q.held_list(gate, offset, limit)
                .into_iter()
                .map(|(i, g)| (conv(&i), g.to_vec()))
                .collect()
        };
        let all = m.held_list(None);
        let got = held(&self.q, None, 0, usize::MAX);
        ensure!(got == all, "held_list() = {got:?}\n  model says {all:?}");
        let g = GATES[self.rng.below(CONFIG_GATES as u64) as usize];
        let want = m.held_list(Some(g));
        let got = held(&self.q, Some(g), 0, usize::MAX);
        ensure!(
            got == want,
            "held_list({}) = {got:?}\n  model says {want:?}",
            text(g)
        );
        let (offset, limit) = (self.rng.below(4) as usize, self.rng.below(4) as usize);
        let want: Vec<_> = all.into_iter().skip(offset).take(limit).collect();
        let got = held(&self.q, None, offset, limit);
        ensure!(
            got == want,
            "held_list(offset {offset}, limit {limit}) = {got:?}\n  model says {want:?}"
        );
        ensure!(
            self.q.settings().autodelay == m.window.settings() && self.q.order() == m.order,
            "settings {:?}, model says order {:?}, auto delay {:?}",
            self.q.settings(),
            m.order,
            m.window.settings()
        );
        Ok(())
    }

    /// Open every closed gate (queue, twin, model), then check everything.
    pub fn open_all(&mut self) -> Result<(), String> {
        let gates: Vec<Vec<u8>> = self.model.gates.iter().cloned().collect();
        for g in gates {
            let want = Ok(self.model.open_gate(&g));
            let _ = self.on_both("final open_gate", &want, |q| q.open_gate(&g))?;
        }
        self.verify(None, true)
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
            self.model.self_check()?;
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
    let gate = |g: &Option<usize>| g.map(|g| text(GATES[g]));
    match op {
        Op::Enqueue {
            key,
            coll,
            priority,
            gate: g,
            payload,
            now,
            json,
        } => format!(
            "enqueue({} coll={coll:?} priority={priority} gate={:?} payload={:?} now={now} json={json})",
            name(key),
            gate(g),
            String::from_utf8_lossy(payload)
        ),
        Op::Immediate {
            key,
            coll,
            gate: g,
            payload,
            arrival,
            json,
        } => format!(
            "put_immediate({} coll={coll:?} gate={:?} payload={:?} arrival={arrival} json={json})",
            name(key),
            gate(g),
            String::from_utf8_lossy(payload)
        ),
        Op::Release { key, now } => format!("move_job({}, Release, now={now})", name(key)),
        Op::Delay { key, buffer } => format!("move_job({}, Delay{{buffer:{buffer}}})", name(key)),
        Op::Delete { key } => format!("delete({})", name(key)),
        Op::Pop => "pop()".into(),
        Op::SetOrder(o) => format!("set_order({o:?})"),
        Op::Gate { gate, op } => format!("{op:?} gate {:?}", text(GATES[*gate])),
        Op::SetAutoDelay(a) => format!("set autodelay {a:?}"),
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
            h.model.self_check()?;
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
    match catch_unwind(AssertUnwindSafe(|| {
        h.sync()?;
        h.open_all()?;
        h.drain()
    })) {
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

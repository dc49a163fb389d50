//! Property tests of the worker layer of the queue core (`orca::core::worker`)
//! and the queue's policies, against the reference model
//! (`worker_model.rs`, which composes the order model and one model file
//! per policy): leases, ack/nack, retries with backoff, dead letters, kept
//! results, cancellation and `tick`; gates and held jobs, the submission
//! window of automatic delays, lifetimes, running caps, and the bounds on
//! dead letters and results.
//!
//! No test-framework dependencies: a tiny deterministic xorshift64* PRNG
//! drives everything.
//!
//! - `random_worker_sequences`: long random sequences mixing enqueue (some
//!   naming gates), immediate, move, delete, pop (leases of many lengths and
//!   `LEASE 0`, count 1..3), ack (with and without results, stale, cancelled
//!   and wrong-key tokens), nack (backoff, explicit and zero delays),
//!   extend, cancel, tick, dead list/requeue/purge, gates closed, opened and
//!   dropped, policy changes and queue settings changes (lifetime, auto
//!   delay, running cap, DEADMAX, DEADTTL, RESULTMAX, order), with a clock
//!   that advances by random amounts and sometimes jumps straight onto (or
//!   1 ms around) the next deadline of any kind (leases, retries, results,
//!   cancellations, lifetimes, dead-letter ages, submission windows) or
//!   past `CANCEL_MEMORY_MS`. After every step the core is compared with
//!   the model: `check()`, `states()` of every key (queued with its exact
//!   position, release time and `capped` flag, held with its gate, delayed,
//!   leased, dead), `result()` of every key, `state_counts()`,
//!   `held_len()`, `gate_list()`, `running_by_collation()`, `stats(now)`,
//!   `settings()`, `next_deadline()`, the whole `dead_list()`, and
//!   `pop_order()`. Every job instance the model created is, at all times,
//!   in exactly one place (queued, held, delayed, leased, dead) or has
//!   exactly one fate (acked, consumed by `LEASE 0`, superseded, cancelled,
//!   deleted, purged, replaced on the dead list, forgotten by a bound,
//!   dropped with its gate). Tokens are never reused; attempts grow by
//!   exactly one per delivery; a job dies exactly at `max_attempts`; a
//!   delayed, acked or cancelled job is never handed out; a pop hands out
//!   exactly the jobs the model predicts, in its order, under the running
//!   cap. Regrade supersession: a new job under a key (enqueue or
//!   put_immediate creating it, dead_requeue) marks every lease on the key
//!   superseded and drops its pending retry at once; a superseded lease can
//!   still be acked, its NACK is `Superseded` whatever its attempts, its
//!   expiry drops it. So per key at most one of (queued or held job,
//!   delayed retry, lease that is not superseded) exists, and every
//!   delivery is of the newest instance of its key: a stale attempt never
//!   comes back. A lease ending under a running cap that lets a collation
//!   with queued jobs be popped again must raise the core's wake-up
//!   (`take_woken`, or the tick report's `uncapped`).
//!   Without a cap (or with count 1), pops are also checked against a
//!   probe: a clone of the queue that runs `tick(now)` and then plain
//!   `pop()` `count` times must give exactly the deliveries (and tick
//!   report) `pop_deliveries` gives.
//!   Every 4 steps `next_deadline()` is probed on a clone: a tick 1 ms
//!   before it changes nothing, a tick at it changes something.
//!   A failing operation must leave `encode()` unchanged. Every 50 steps the
//!   queue goes through `encode`/`decode` (byte-identical), and the decoded
//!   copy (the "twin") is driven alongside with the same operations: its
//!   every answer must equal the original's.
//! - `ORCA_PROP_SEED=<u64>` (decimal or 0x-hex): only that seed.
//! - `ORCA_PROP_STEPS=<n>`: steps per random sequence (default 2000).
//!
//! A failure prints the seed, the step, the clock, the operation and the
//! operations leading up to it; re-run with `ORCA_PROP_SEED=<seed>`.
//!
//! Core bugs this suite found are kept as tests in `worker_rules/`
//! (`regression_*` fixed, `worker_bug_*` still open);
//! `design_stale_attempt_beats_regrade` keeps the design hazard it found
//! (the newest regrade dropped for a stale attempt), now ruled out.

mod apply;
mod generate;
mod verify;

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use orca::core::settings::AutoDelay;
use orca::core::worker::Delivery;
use orca::core::{
    JobConfig, JobKey, Move, NackOutcome, Order, Policy, Put, Queue, QueueError, Settings,
    TickReport, MAX_TIME,
};

use crate::common::{seeds, steps, Rng};
pub use crate::gates_model::{compare_gates, GateOp};
use crate::support::*;
use crate::worker_model::*;
use crate::worker_views::*;

pub const COLLS: [&str; 3] = ["user.1", "team.7", "user.2"];

pub const POOL: usize = 20;

/// Gates: the first two can be named by configs; the last only by
/// `ORCA.GATE` ("Gate names are binary-safe").
pub const GATES: [&[u8]; 3] = [b"img-a", b"img-b", b"\x00\xffbin"];
pub const CONFIG_GATES: usize = 2;

#[derive(Clone, Debug)]
pub enum Op {
    Enqueue {
        key: usize,
        coll: Option<&'static str>,
        priority: i64,
        gate: Option<usize>,
        payload: Vec<u8>,
        now: i64,
    },
    Immediate {
        key: usize,
        coll: Option<&'static str>,
        gate: Option<usize>,
        payload: Vec<u8>,
        arrival: i64,
    },
    Move {
        key: usize,
        release: bool,
        buffer: i64,
        now: i64,
    },
    Delete {
        key: usize,
    },
    Pop {
        now: i64,
        lease_ms: i64,
        count: usize,
    },
    Ack {
        key: usize,
        token: u64,
        why: &'static str,
        result: Option<Vec<u8>>,
        ttl: i64,
        now: i64,
    },
    Nack {
        key: usize,
        token: u64,
        why: &'static str,
        delay: Option<i64>,
        now: i64,
    },
    Extend {
        key: usize,
        token: u64,
        why: &'static str,
        ms: i64,
        now: i64,
    },
    Cancel {
        key: usize,
    },
    Tick {
        now: i64,
    },
    DeadRequeue {
        key: usize,
        now: i64,
    },
    DeadPurge,
    DeadList {
        offset: usize,
        limit: usize,
    },
    SetPolicy(Policy),
    Gate {
        gate: usize,
        op: GateOp,
    },
    SetSettings(Settings),
}

pub fn pool_name(i: usize) -> String {
    format!("w{i}")
}

pub fn describe(op: &Op) -> String {
    let n = |i: &usize| pool_name(*i);
    match op {
        Op::Enqueue {
            key,
            coll,
            priority,
            gate,
            payload,
            now,
        } => format!(
            "enqueue({} coll={coll:?} priority={priority} gate={:?} payload={:?} now={now})",
            n(key),
            gate.map(|g| text(GATES[g])),
            text(payload)
        ),
        Op::Immediate {
            key,
            coll,
            gate,
            payload,
            arrival,
        } => format!(
            "put_immediate({} coll={coll:?} gate={:?} payload={:?} arrival={arrival})",
            n(key),
            gate.map(|g| text(GATES[g])),
            text(payload)
        ),
        Op::Move {
            key,
            release,
            buffer,
            now,
        } => {
            if *release {
                format!("move_job({}, Release, now={now})", n(key))
            } else {
                format!("move_job({}, Delay{{buffer:{buffer}}})", n(key))
            }
        }
        Op::Delete { key } => format!("delete({})", n(key)),
        Op::Pop {
            now,
            lease_ms,
            count,
        } => format!("pop_deliveries(now={now}, lease_ms={lease_ms}, count={count})"),
        Op::Ack {
            key,
            token,
            why,
            result,
            ttl,
            now,
        } => format!(
            "ack({}, token={token} [{why}], result={:?}, now={now}, ttl={ttl})",
            n(key),
            result.as_deref().map(text)
        ),
        Op::Nack {
            key,
            token,
            why,
            delay,
            now,
        } => format!(
            "nack({}, token={token} [{why}], delay={delay:?}, now={now})",
            n(key)
        ),
        Op::Extend {
            key,
            token,
            why,
            ms,
            now,
        } => format!(
            "extend({}, token={token} [{why}], ms={ms}, now={now})",
            n(key)
        ),
        Op::Cancel { key } => format!("cancel({})", n(key)),
        Op::Tick { now } => format!("tick(now={now})"),
        Op::DeadRequeue { key, now } => format!("dead_requeue({}, now={now})", n(key)),
        Op::DeadPurge => "dead_purge()".into(),
        Op::DeadList { offset, limit } => format!("dead_list({offset}, {limit})"),
        Op::SetPolicy(p) => format!("policy := {p:?}"),
        Op::Gate { gate, op } => format!("{op:?} gate {:?}", text(GATES[*gate])),
        Op::SetSettings(s) => format!("settings := {s:?}"),
    }
}

/// Deliveries, owned: the job and its lease (token, deadline).
pub type Delivered = Vec<(Info, Option<(u64, i64)>)>;

/// What the core answered, owned; compared between the queue and its
/// decoded twin through `Debug`.
#[derive(Debug)]
pub enum Out {
    Put(Result<(Info, Put), QueueError>),
    Move(Result<Info, QueueError>),
    Delete(Result<bool, QueueError>),
    Pop(Result<(Delivered, TickReport), QueueError>),
    Ack(Result<(), QueueError>),
    Nack(Result<NackOutcome, QueueError>),
    Extend(Result<i64, QueueError>),
    Cancel(Result<bool, QueueError>),
    Tick(TickReport),
    Requeue(Result<Info, QueueError>),
    Purge(usize),
    List(Vec<DeadView>),
    GateClose(Result<bool, QueueError>),
    GateOpen(Result<usize, QueueError>),
    GateDrop(Result<Vec<Vec<u8>>, QueueError>),
    Settings(Result<(), QueueError>),
    None,
}

impl Out {
    pub fn is_err(&self) -> bool {
        match self {
            Out::Put(r) => r.is_err(),
            Out::Move(r) => r.is_err(),
            Out::Delete(r) => r.is_err(),
            Out::Pop(r) => r.is_err(),
            Out::Ack(r) => r.is_err(),
            Out::Nack(r) => r.is_err(),
            Out::Extend(r) => r.is_err(),
            Out::Cancel(r) => r.is_err(),
            Out::Requeue(r) => r.is_err(),
            Out::GateOpen(r) => r.is_err(),
            Out::GateDrop(r) => r.is_err(),
            Out::Settings(r) => r.is_err(),
            Out::GateClose(r) => r.is_err(),
            Out::Tick(_) | Out::Purge(_) | Out::List(_) | Out::None => false,
        }
    }
}

pub fn deliveries(ds: &[Delivery]) -> Delivered {
    ds.iter().map(|d| (conv(&d.job), d.lease)).collect()
}

pub fn run_core(q: &mut Queue, op: &Op, policy: &Policy, keys: &[JobKey]) -> Out {
    match op {
        Op::Enqueue {
            key,
            coll,
            priority,
            gate,
            payload,
            now,
        } => {
            let c = job_config(keys[*key], *coll, *priority, *gate);
            Out::Put(q.enqueue(&c, payload, *now).map(|(i, p)| (conv(&i), p)))
        }
        Op::Immediate {
            key,
            coll,
            gate,
            payload,
            arrival,
        } => {
            let c = job_config(keys[*key], *coll, 0, *gate);
            Out::Put(
                q.put_immediate(&c, payload, *arrival)
                    .map(|(i, p)| (conv(&i), p)),
            )
        }
        Op::Move {
            key,
            release,
            buffer,
            now,
        } => {
            let how = if *release {
                Move::Release
            } else {
                Move::Delay { buffer: *buffer }
            };
            Out::Move(q.move_job(&keys[*key], how, *now).map(|i| conv(&i)))
        }
        Op::Delete { key } => Out::Delete(q.delete(&keys[*key])),
        Op::Pop {
            now,
            lease_ms,
            count,
        } => Out::Pop(
            q.pop_deliveries(*now, *lease_ms, *count, policy)
                .map(|(ds, r)| (deliveries(&ds), r)),
        ),
        Op::Ack {
            key,
            token,
            result,
            ttl,
            now,
            ..
        } => Out::Ack(q.ack(&keys[*key], *token, result.as_deref(), *now, *ttl)),
        Op::Nack {
            key,
            token,
            delay,
            now,
            ..
        } => Out::Nack(q.nack(&keys[*key], *token, *delay, *now, policy)),
        Op::Extend {
            key,
            token,
            ms,
            now,
            ..
        } => Out::Extend(q.extend(&keys[*key], *token, *ms, *now)),
        Op::Cancel { key } => Out::Cancel(q.cancel(&keys[*key])),
        Op::Tick { now } => Out::Tick(q.tick(*now, policy)),
        Op::DeadRequeue { key, now } => {
            Out::Requeue(q.dead_requeue(&keys[*key], *now).map(|i| conv(&i)))
        }
        Op::DeadPurge => Out::Purge(q.dead_purge()),
        Op::DeadList { offset, limit } => Out::List(core_dead_list(q, *offset, *limit)),
        Op::SetPolicy(_) => Out::None,
        Op::Gate { gate, op } => {
            let g = GATES[*gate];
            match op {
                GateOp::Close => Out::GateClose(q.close_gate(g)),
                GateOp::Open => Out::GateOpen(q.open_gate(g)),
                GateOp::Drop => Out::GateDrop(
                    q.drop_gate(g)
                        .map(|v| v.into_iter().map(|b| b.to_vec()).collect()),
                ),
            }
        }
        Op::SetSettings(s) => Out::Settings(q.set_settings(*s)),
    }
}

pub fn job_config(
    key: JobKey,
    coll: Option<&str>,
    priority: i64,
    gate: Option<usize>,
) -> JobConfig {
    JobConfig {
        job_key: key,
        collation: coll.map(str::to_string),
        priority,
        gate: gate.map(|g| text(GATES[g])),
    }
}

/// Queue settings for a sequence: the order kept; the automatic delay
/// only where `autodelay` (never growing its window while it is on: the
/// docs do not say what that does to submissions outside the old window).
pub fn random_settings(rng: &mut Rng, cur: &Settings, autodelay: bool) -> Settings {
    let autodelay = if !autodelay || rng.chance(20) {
        AutoDelay::default()
    } else {
        let mut window = *rng.pick(&[400, 3_000, 20_000, 60_000, 300_000]);
        if cur.autodelay.window > 0 {
            window = window.min(cur.autodelay.window);
        }
        AutoDelay {
            window,
            step: *rng.pick(&[0, 10, 300, 2_000, 2_000]),
            cap: *rng.pick(&[0, 0, 500, 5_000]),
        }
    };
    let order = if rng.chance(90) {
        cur.order
    } else if rng.chance(50) {
        Order::Lifo
    } else {
        Order::Fifo
    };
    Settings {
        order,
        lifetime: *rng.pick(&[0, 0, 0, 40, 700, 4_000, 30_000]),
        autodelay,
        max_running: *rng.pick(&[0, 0, 1, 1, 2, 3]),
        dead_max: *rng.pick(&[0, 1, 2, 4, 100_000]),
        dead_ttl: *rng.pick(&[0, 0, 0, 100, 2_000, 40_000]),
        result_max: *rng.pick(&[0, 1, 3, 100_000]),
    }
}

pub fn random_policy(rng: &mut Rng) -> Policy {
    Policy {
        max_attempts: *rng.pick(&[0, 1, 2, 3, 3, 4, 6]),
        retry_base: *rng.pick(&[0, 1, 20, 200, 1500]),
        retry_cap: *rng.pick(&[0, 100, 1000, 10_000, MAX_TIME]),
    }
}

pub struct Harness {
    pub rng: Rng,
    pub q: Queue,
    /// Decoded copy of `q` taken at the last sync point, driven with the
    /// same operations: it must answer identically.
    pub twin: Queue,
    pub model: Model,
    pub now: i64,
    pub policy: Policy,
    /// The policy never changes in this sequence (so attempts are bounded
    /// by `max_attempts` everywhere).
    pub policy_fixed: bool,
    pub clock_may_go_back: bool,
    /// Configs name gates, and gates are closed, opened and dropped.
    pub gates_on: bool,
    /// The automatic delay may be on (never with a clock going back: the
    /// docs do not say what earlier times do to the count).
    pub autodelay_ok: bool,
    /// The queue's settings change as the sequence goes.
    pub settings_change: bool,
    pub keys: Vec<JobKey>,
    pub key_index: HashMap<JobKey, usize>,
    pub writes: u64,
    /// The clock was just moved onto a deadline.
    pub jumped: bool,
}

#[derive(Default)]
pub struct Stats {
    pub counts: BTreeMap<String, usize>,
    pub max_waiting: usize,
    pub max_leased: usize,
    pub max_dead: usize,
}

pub fn run_sequence(seed: u64, steps: usize, stats: &mut Stats) {
    let mut h = Harness::new(seed);
    let policy0 = h.policy;
    let mut log: Vec<(usize, Op)> = Vec::new();
    let fail = |step: usize, op: &Op, msg: &str, log: &[(usize, Op)], policy: &Policy| -> ! {
        let tail: Vec<String> = log
            .iter()
            .rev()
            .take(30)
            .rev()
            .map(|(s, o)| format!("    step {s}: {}", describe(o)))
            .collect();
        panic!(
            "worker property failure: seed {seed} (replay: ORCA_PROP_SEED={seed}), step {step}, policy {policy:?} (initial {policy0:?})\n  op: {}\n  {msg}\n  last operations:\n{}",
            describe(op),
            tail.join("\n")
        )
    };
    // The random part, then every gate opened, a final tick far in the
    // future (everything due comes back or dies, all records are
    // forgotten) and a drain.
    let total = steps + GATES.len() + 2;
    for step in 0..total {
        let op = if step < steps {
            h.advance_clock();
            h.gen_op()
        } else if step < steps + GATES.len() {
            Op::Gate {
                gate: step - steps,
                op: GateOp::Open,
            }
        } else if step == steps + GATES.len() {
            // Leases and retries may be parked up to MAX_TIME.
            h.now = MAX_TIME;
            Op::Tick { now: h.now }
        } else {
            Op::Pop {
                now: h.now,
                lease_ms: 0,
                count: POOL * 2,
            }
        };
        log.push((step, op.clone()));
        let r = catch_unwind(AssertUnwindSafe(|| {
            let label = h.apply(&op)?;
            h.verify()?;
            if step % 4 == 3 {
                h.probe_next_deadline()?;
            }
            if step % 50 == 49 || step + 1 == total {
                h.sync()?;
            }
            Ok::<_, String>(label)
        }));
        match r {
            Ok(Ok(label)) => *stats.counts.entry(label).or_insert(0) += 1,
            Ok(Err(msg)) => fail(step, &op, &msg, &log, &h.policy),
            Err(p) => {
                let msg = panic_text(&*p);
                fail(step, &op, &format!("panicked: {msg}"), &log, &h.policy)
            }
        }
        let (qd, dl, ls, dd) = h.model.counts();
        stats.max_waiting = stats.max_waiting.max(qd + dl);
        stats.max_leased = stats.max_leased.max(ls);
        stats.max_dead = stats.max_dead.max(dd);
    }
    let m = &h.model;
    assert!(
        m.leases.is_empty() && m.delayed.is_empty() && m.queued.is_empty(),
        "seed {seed}: final tick and drain left work behind"
    );
    for (name, n) in &m.events {
        *stats.counts.entry(name.to_string()).or_insert(0) += n;
    }
}

#[test]
pub fn random_worker_sequences() {
    let start = Instant::now();
    let steps = steps(2000);
    let seeds = seeds(&SEEDS);
    let mut stats = Stats::default();
    for &seed in &seeds {
        run_sequence(seed, steps, &mut stats);
    }
    eprintln!(
        "worker_props: {} seeds x {steps} steps in {:.2?}; max waiting {}, max leased {}, max dead {}",
        seeds.len(),
        start.elapsed(),
        stats.max_waiting,
        stats.max_leased,
        stats.max_dead
    );
    for (label, n) in &stats.counts {
        eprintln!("    {label}: {n}");
    }
}

//! Giving memory back (`src/core/compact.rs`): a queue that compacts as it
//! drains behaves exactly like one that never does, and holds little more
//! memory than a fresh queue of the jobs it has left.
//!
//! Each run drives two queues with the same operations: `q` runs
//! `maintain` after every operation (with a random budget, sometimes none),
//! `twin` never does. Every result must agree, `check()` must pass, and the
//! encodings (which name jobs by key and collations by name, never by
//! record id) must be equal. The runs rush a few thousand jobs in
//! (singles, small and large collations, immediate and held jobs, leases,
//! retries, dead letters, caps, automatic delays, moved reservations with
//! nonces) and drain them, so every slab shrinks while records of every
//! kind move.

use orca::core::compact::MOVES_PER_WRITE;
use orca::core::settings::AutoDelay;
use orca::core::{JobConfig, JobKey, Move, Policy, Queue, QueueError};

use crate::common::{seeds, steps, Rng};
use crate::support::{cfg, conv, k, kname};

const SEEDS: [u64; 4] = [1, 7, 0xc0ffee, 0x5eed_0015];

const POLICY: Policy = Policy {
    max_attempts: 3,
    retry_base: 50,
    retry_cap: 1_000,
};

/// Both queues, the clock, and what the harness knows of them.
struct Pair {
    q: Queue,
    twin: Queue,
    now: i64,
    rng: Rng,
    /// Leases handed out: (key, token).
    leases: Vec<(JobKey, u64)>,
    names: usize,
    /// Moves `maintain` did in all.
    moves: usize,
}

fn ensure_same<T: PartialEq + std::fmt::Debug>(what: &str, a: T, b: T) -> Result<(), String> {
    if a == b {
        Ok(())
    } else {
        Err(format!("{what}: compacting queue {a:?}, twin {b:?}"))
    }
}

impl Pair {
    fn new(seed: u64) -> Self {
        Pair {
            q: Queue::new(orca::core::Order::Lifo),
            twin: Queue::new(orca::core::Order::Lifo),
            now: 1_000,
            rng: Rng::new(seed),
            leases: Vec::new(),
            names: 0,
            moves: 0,
        }
    }

    fn config(&mut self) -> JobConfig {
        let name = format!("j{}", self.names);
        self.names += 1;
        let coll = match self.rng.below(10) {
            0..=2 => None,
            3..=6 => Some(format!("user.{}", self.rng.below(150))),
            _ => Some(format!("team.{}", self.rng.below(3))),
        };
        let mut c = cfg(&name, coll.as_deref(), self.rng.range(0, 5_000));
        if self.rng.chance(4) {
            c.gate = Some(format!("image{}", self.rng.below(3)));
        }
        c
    }

    fn any_key(&mut self) -> JobKey {
        let n = self.rng.below(self.names.max(1) as u64);
        k(&format!("j{n}"))
    }

    /// One random operation on both queues; a rush (`fill`) or a drain.
    fn step(&mut self, fill: bool) -> Result<(), String> {
        self.now += self.rng.range(0, 20);
        let now = self.now;
        let roll = self.rng.below(100);
        match (fill, roll) {
            (true, 0..=69) | (false, 0..=4) => {
                let c = self.config();
                let payload = format!("p{}", self.names).into_bytes();
                let a = self
                    .q
                    .enqueue(&c, &payload, now)
                    .map(|(i, p)| (conv(&i), p));
                let b = self
                    .twin
                    .enqueue(&c, &payload, now)
                    .map(|(i, p)| (conv(&i), p));
                ensure_same("enqueue", a, b)?;
            }
            (true, 70..=79) | (false, 5..=7) => {
                let c = self.config();
                let a = self
                    .q
                    .put_immediate(&c, b"i", now)
                    .map(|(i, p)| (conv(&i), p));
                let b = self
                    .twin
                    .put_immediate(&c, b"i", now)
                    .map(|(i, p)| (conv(&i), p));
                ensure_same("immediate", a, b)?;
            }
            (_, 80..=84) => {
                let key = self.any_key();
                let how = if self.rng.chance(50) {
                    Move::Release
                } else {
                    Move::Delay { buffer: 100 }
                };
                let a = self.q.move_job(&key, how, now).map(|i| conv(&i));
                let b = self.twin.move_job(&key, how, now).map(|i| conv(&i));
                ensure_same(&format!("move {}", kname(&key)), a, b)?;
            }
            (_, 85..=87) => {
                let gate = format!("image{}", self.rng.below(3));
                match self.rng.below(3) {
                    0 => ensure_same(
                        "close",
                        self.q
                            .close_gate(gate.as_bytes())
                            .map_err(|e| e.to_string()),
                        self.twin
                            .close_gate(gate.as_bytes())
                            .map_err(|e| e.to_string()),
                    )?,
                    1 => ensure_same(
                        "open",
                        self.q.open_gate(gate.as_bytes()),
                        self.twin.open_gate(gate.as_bytes()),
                    )?,
                    _ => ensure_same(
                        "drop",
                        self.q.drop_gate(gate.as_bytes()),
                        self.twin.drop_gate(gate.as_bytes()),
                    )?,
                }
            }
            (true, _) | (false, 88..=89) => {
                let key = self.any_key();
                ensure_same("delete", self.q.delete(&key), self.twin.delete(&key))?;
            }
            (false, _) => self.work(now)?,
        }
        Ok(())
    }

    /// Workers: pop (leased or not), ack, nack, tick; now and then a cap or
    /// an automatic delay (whose submission windows pin their collations:
    /// a collation named by a window never moves).
    fn work(&mut self, now: i64) -> Result<(), String> {
        match self.rng.below(10) {
            0..=4 => {
                let lease = if self.rng.chance(30) { 0 } else { 10_000 };
                let count = 1 + self.rng.below(8) as usize;
                let a = self.q.pop_deliveries(now, lease, count, &POLICY);
                let b = self.twin.pop_deliveries(now, lease, count, &POLICY);
                let (a, b) = match (a, b) {
                    (Ok((a, ra)), Ok((b, rb))) => {
                        ensure_same("pop tick", ra, rb)?;
                        (a, b)
                    }
                    (a, b) => return ensure_same("pop", a.err(), b.err()),
                };
                let sa: Vec<_> = a.iter().map(|d| (conv(&d.job), d.lease)).collect();
                let sb: Vec<_> = b.iter().map(|d| (conv(&d.job), d.lease)).collect();
                ensure_same("pop", &sa, &sb)?;
                for d in a {
                    if let Some((token, _)) = d.lease {
                        self.leases.push((d.job.key, token));
                    }
                }
            }
            5..=7 if !self.leases.is_empty() => {
                let i = self.rng.below(self.leases.len() as u64) as usize;
                let (key, token) = self.leases.swap_remove(i);
                if self.rng.chance(70) {
                    let a = self.q.ack(&key, token, None, now, 0);
                    let b = self.twin.ack(&key, token, None, now, 0);
                    ensure_same("ack", a, b)?;
                } else {
                    let a = self.q.nack(&key, token, None, now, &POLICY);
                    let b = self.twin.nack(&key, token, None, now, &POLICY);
                    ensure_same("nack", a, b)?;
                }
            }
            8 => {
                let a = self.q.tick(now, &POLICY);
                let b = self.twin.tick(now, &POLICY);
                ensure_same("tick", a, b)?;
            }
            _ => {
                let mut s = *self.q.settings();
                if self.rng.chance(50) {
                    s.max_running = if s.max_running == 0 { 2 } else { 0 };
                } else if s.autodelay.on() {
                    s.autodelay = AutoDelay::default();
                } else {
                    s.autodelay = AutoDelay {
                        window: 2_000,
                        step: 10,
                        cap: 200,
                    };
                }
                let a = self.q.set_settings(s);
                let b = self.twin.set_settings(s);
                ensure_same("settings", a, b)?;
            }
        }
        Ok(())
    }

    /// `maintain` on the compacting queue only, then the full comparison
    /// now and then.
    fn after(&mut self, i: usize) -> Result<(), String> {
        let budget = match self.rng.below(10) {
            0 => 0,
            1 => 1 + self.rng.below(4) as usize,
            _ => MOVES_PER_WRITE,
        };
        self.moves += self.q.maintain(budget);
        ensure_same("len", self.q.len(), self.twin.len())?;
        if i.is_multiple_of(97) {
            self.q.check().map_err(|e| format!("check: {e}"))?;
            if self.q.encode() != self.twin.encode() {
                return Err("the encodings differ".into());
            }
            ensure_same("pop order", self.q.pop_order(), self.twin.pop_order())?;
        }
        Ok(())
    }
}

fn run(seed: u64, rushes: usize, per_rush: usize) -> Result<Pair, String> {
    let mut p = Pair::new(seed);
    let mut i = 0;
    for _ in 0..rushes {
        for _ in 0..per_rush {
            p.step(true).map_err(|e| format!("step {i} (fill): {e}"))?;
            p.after(i).map_err(|e| format!("step {i}: {e}"))?;
            i += 1;
        }
        // Drain to a few dozen jobs.
        let mut guard = 0;
        while p.q.len() + p.q.held_len() > 40 && guard < per_rush * 20 {
            p.step(false)
                .map_err(|e| format!("step {i} (drain): {e}"))?;
            p.after(i).map_err(|e| format!("step {i}: {e}"))?;
            i += 1;
            guard += 1;
        }
    }
    p.q.check().map_err(|e| format!("final check: {e}"))?;
    ensure_same("encoding", p.q.encode(), p.twin.encode())?;
    Ok(p)
}

#[test]
fn compaction_changes_nothing_observable() {
    let per_rush = steps(3_000);
    for seed in seeds(&SEEDS) {
        let p = run(seed, 2, per_rush).unwrap_or_else(|e| panic!("seed {seed:#x}: {e}"));
        assert!(
            p.moves > 0,
            "seed {seed:#x}: the drains moved no record, the test tests nothing"
        );
    }
}

#[test]
fn drained_queue_holds_about_what_a_fresh_one_does() {
    // Rush 30k jobs in, drain to 1k, keep working until the shrinks finish.
    let mut q = Queue::new(orca::core::Order::Lifo);
    let mut rng = Rng::new(42);
    let mut now = 1_000;
    for i in 0..30_000 {
        let coll = match rng.below(4) {
            0 => None,
            1 | 2 => Some(format!("user.{}", rng.below(2_000))),
            _ => Some(format!("team.{}", rng.below(4))),
        };
        let c = cfg(&format!("d{i}"), coll.as_deref(), rng.range(0, 60_000));
        q.enqueue(&c, &[7u8; 64], now).unwrap();
        q.maintain(MOVES_PER_WRITE);
        now += 1;
    }
    let peak = q.mem_usage();
    while q.len() > 1_000 {
        let (got, _) = q.pop_deliveries(now, 0, 1, &POLICY).unwrap();
        assert_eq!(got.len(), 1);
        q.maintain(MOVES_PER_WRITE);
        now += 1;
    }
    for _ in 0..200 {
        q.maintain(MOVES_PER_WRITE);
    }
    q.check().unwrap();
    let fresh = Queue::decode(&q.encode()).unwrap();
    let (drained, small) = (q.mem_usage(), fresh.mem_usage());
    eprintln!("peak {peak} B, drained {drained} B, fresh {small} B");
    // The slabs shrink to twice their records once under a quarter full,
    // so records may take up to 4x what a fresh queue's do.
    assert!(
        drained <= 4 * small,
        "a queue drained to 1k jobs holds {drained} B, a fresh one {small} B (peak {peak} B)"
    );
    assert_eq!(
        q.encode(),
        fresh.encode(),
        "the drained queue and its fresh copy differ"
    );
}

#[test]
fn errors_do_not_start_compaction_midway() {
    // A refused operation and an idle maintain change nothing observable.
    let mut q = Queue::new(orca::core::Order::Lifo);
    for i in 0..2_000 {
        q.enqueue(&cfg(&format!("e{i}"), Some("user.1"), i), b"x", 10)
            .unwrap();
    }
    for _ in 0..1_900 {
        q.pop_deliveries(20, 0, 1, &POLICY).unwrap();
    }
    let before = q.encode();
    assert_eq!(
        q.move_job(&k("missing"), Move::Release, 30).map(|_| ()),
        Err(QueueError::NoSuchJob)
    );
    let mut moved = 0;
    for _ in 0..100 {
        moved += q.maintain(MOVES_PER_WRITE);
        q.check().unwrap();
    }
    assert!(moved > 0, "nothing was compacted");
    assert_eq!(q.encode(), before);
    assert_eq!(q.maintain(MOVES_PER_WRITE), 0, "compaction never ends");
}

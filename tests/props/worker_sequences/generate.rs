//! The random operations: a clock that mostly creeps and sometimes jumps
//! onto a deadline, keys that are somewhere interesting, tokens that are
//! live, stale, cancelled, of another key or never issued; gates, queue
//! settings.

use orca::core::worker::CANCEL_MEMORY_MS;
use orca::core::{JobKey, Order, Queue, Settings, MAX_TIME};

use crate::common::Rng;
use crate::support::*;
use crate::worker_model::*;

use super::*;

impl Harness {
    pub(super) fn new(seed: u64) -> Self {
        let keys: Vec<JobKey> = (0..POOL).map(|i| k(&pool_name(i))).collect();
        let key_index = keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let mut rng = Rng::new(seed);
        let order = if rng.chance(50) {
            Order::Lifo
        } else {
            Order::Fifo
        };
        let policy = random_policy(&mut rng);
        let clock_may_go_back = seed % 4 == 1;
        let autodelay_ok = !clock_may_go_back;
        // A few sequences start with the defaults (no policy at all), the
        // others with random settings; some change them as they go.
        let settings = if seed % 7 == 3 {
            Settings {
                order,
                ..Settings::default()
            }
        } else {
            random_settings(
                &mut rng,
                &Settings {
                    order,
                    ..Settings::default()
                },
                autodelay_ok,
            )
        };
        settings.validate().expect("valid settings");
        let q = Queue::with_settings(settings);
        Harness {
            twin: q.clone(),
            q,
            model: Model::new(settings),
            now: rng.range(0, 5_000),
            policy,
            policy_fixed: seed % 3 != 2,
            clock_may_go_back,
            gates_on: seed % 5 != 2,
            autodelay_ok,
            settings_change: seed.is_multiple_of(2),
            keys,
            key_index,
            writes: 0,
            jumped: false,
            rng,
        }
    }

    pub(super) fn payload(&mut self, i: usize, what: &str) -> Vec<u8> {
        self.writes += 1;
        format!("{}:{what}#{}", pool_name(i), self.writes).into_bytes()
    }

    /// Advance the clock: mostly a little, sometimes a lot, sometimes
    /// exactly to (or just past) the next deadline, rarely past the
    /// cancellation memory, and in some sequences a little backwards.
    pub(super) fn advance_clock(&mut self) {
        let r = self.rng.below(100);
        let step = match r {
            0..=49 => self.rng.range(0, 20),
            50..=74 => self.rng.range(20, 600),
            75..=89 => self.rng.range(600, 6_000),
            90..=97 => {
                // To a pending deadline (the next one, or any later one,
                // skipping those before it): exactly on it, or 1 ms either side.
                let m = &self.model;
                let mut ds: Vec<i64> = m
                    .leases
                    .values()
                    .map(|l| l.deadline)
                    .chain(m.delayed.values().map(|(at, _)| *at))
                    .chain(m.results.values().map(|(at, _)| *at))
                    .chain(m.cancelled.values().copied())
                    .chain(m.policy_deadlines())
                    .filter(|d| *d >= self.now && *d - self.now < 10_000_000)
                    .collect();
                ds.sort_unstable();
                if ds.is_empty() {
                    self.rng.range(0, 100)
                } else {
                    let d = if self.rng.chance(50) {
                        ds[0]
                    } else {
                        *self.rng.pick(&ds)
                    };
                    self.jumped = true;
                    (d - self.now + *self.rng.pick(&[0, 0, 0, -1, 1])).max(0)
                }
            }
            98 => CANCEL_MEMORY_MS + self.rng.range(0, 20_000),
            _ if self.clock_may_go_back => -self.rng.range(1, 300),
            _ => 0,
        };
        self.now = (self.now + step).max(0);
    }

    pub(super) fn any_key(&mut self) -> usize {
        self.rng.below(POOL as u64) as usize
    }

    /// A key that is somewhere interesting (delayed, leased, dead), or any.
    pub(super) fn busy_key(&mut self) -> usize {
        let mut busy: Vec<JobKey> = self.model.delayed.keys().copied().collect();
        busy.extend(
            self.model
                .order
                .jobs
                .iter()
                .filter(|j| j.held.is_some())
                .map(|j| j.key),
        );
        busy.extend(self.model.leases.values().map(|l| l.key));
        busy.extend(self.model.dead.keys().copied());
        busy.extend(self.model.queued.keys().copied());
        if busy.is_empty() || self.rng.chance(20) {
            return self.any_key();
        }
        busy.sort_unstable();
        let key = *self.rng.pick(&busy);
        self.key_index[&key]
    }

    /// A (key, token) for ack/nack/extend: mostly a live lease, sometimes a
    /// cancelled, stale, wrong-key or never-issued token.
    pub(super) fn pick_token(&mut self) -> (usize, u64, &'static str) {
        let r = self.rng.below(100);
        if r < 70 && !self.model.leases.is_empty() {
            let tokens: Vec<u64> = self.model.leases.keys().copied().collect();
            let t = *self.rng.pick(&tokens);
            return (self.key_index[&self.model.leases[&t].key], t, "live");
        }
        if r < 78 && !self.model.cancelled.is_empty() {
            let tokens: Vec<u64> = self.model.cancelled.keys().copied().collect();
            let t = *self.rng.pick(&tokens);
            return (self.key_index[&self.model.issued[&t]], t, "cancelled");
        }
        if r < 90 && !self.model.issued_log.is_empty() {
            let t = *self.rng.pick(&self.model.issued_log);
            return (self.key_index[&self.model.issued[&t]], t, "old");
        }
        if r < 95 && !self.model.leases.is_empty() {
            let tokens: Vec<u64> = self.model.leases.keys().copied().collect();
            let t = *self.rng.pick(&tokens);
            return (self.any_key(), t, "wrong-key?");
        }
        let t = if self.rng.chance(50) {
            self.rng.range(1, 1 << 40) as u64
        } else {
            0
        };
        (self.any_key(), t, "never-issued")
    }

    pub(super) fn gen_op(&mut self) -> Op {
        let now = self.now;
        let mut r = self.rng.below(1000);
        if std::mem::take(&mut self.jumped) && self.rng.chance(60) {
            // Right on a deadline: tick or pop now.
            r = if self.rng.chance(50) { 820 } else { 240 };
        }
        match r {
            0..=149 => {
                let key = self.any_key();
                let coll = if self.rng.chance(45) {
                    None
                } else {
                    Some(*self.rng.pick(&COLLS))
                };
                let priority = if self.rng.chance(50) {
                    0
                } else {
                    self.rng.range(0, 3000)
                };
                let gate = self.config_gate();
                Op::Enqueue {
                    key,
                    coll,
                    priority,
                    gate,
                    payload: self.payload(key, "e"),
                    now,
                }
            }
            150..=209 => {
                let key = self.any_key();
                let coll = if self.rng.chance(50) {
                    None
                } else {
                    Some(*self.rng.pick(&COLLS))
                };
                let arrival = if self.rng.chance(70) {
                    now
                } else {
                    (now - self.rng.range(0, 5000)).max(0)
                };
                let gate = self.config_gate();
                Op::Immediate {
                    key,
                    coll,
                    gate,
                    payload: self.payload(key, "i"),
                    arrival,
                }
            }
            210..=229 => Op::Move {
                key: self.busy_key(),
                release: self.rng.chance(50),
                buffer: self.rng.range(0, 20_000),
                now,
            },
            230..=239 => Op::Delete {
                key: self.busy_key(),
            },
            240..=459 => {
                let lease_ms = match self.rng.below(100) {
                    0..=14 => 0,
                    15..=39 => self.rng.range(1, 50),
                    40..=79 => self.rng.range(50, 2_000),
                    80..=96 => self.rng.range(2_000, 20_000),
                    97 => -1,
                    98 => MAX_TIME,
                    _ => MAX_TIME - now + 1,
                };
                let now = if self.rng.below(200) == 0 { -1 } else { now };
                Op::Pop {
                    now,
                    lease_ms,
                    count: self.rng.range(1, 3) as usize,
                }
            }
            460..=579 => {
                let (key, token, why) = self.pick_token();
                let result = if self.rng.chance(60) {
                    Some(format!("result#{}", self.rng.below(1 << 20)).into_bytes())
                } else {
                    None
                };
                let ttl = match self.rng.below(100) {
                    0..=19 => 0,
                    20..=89 => self.rng.range(1, 5_000),
                    90..=96 => self.rng.range(100_000, 1_000_000),
                    97 => -self.rng.range(1, 100),
                    _ => MAX_TIME,
                };
                let now = if self.rng.below(50) == 0 { -1 } else { now };
                Op::Ack {
                    key,
                    token,
                    why,
                    result,
                    ttl,
                    now,
                }
            }
            580..=709 => {
                let (key, token, why) = self.pick_token();
                let delay = match self.rng.below(100) {
                    0..=39 => None,
                    40..=59 => Some(0),
                    60..=94 => Some(self.rng.range(1, 3_000)),
                    95..=96 => Some(-self.rng.range(1, 10)),
                    97 => Some(MAX_TIME),
                    _ => Some(MAX_TIME - now),
                };
                let now = if self.rng.below(100) == 0 { -1 } else { now };
                Op::Nack {
                    key,
                    token,
                    why,
                    delay,
                    now,
                }
            }
            710..=769 => {
                let (key, token, why) = self.pick_token();
                let ms = match self.rng.below(100) {
                    0..=9 => 0,
                    10..=94 => self.rng.range(1, 5_000),
                    95..=96 => -1,
                    97 => MAX_TIME,
                    _ => MAX_TIME - now,
                };
                let now = if self.rng.below(100) == 0 { -1 } else { now };
                Op::Extend {
                    key,
                    token,
                    why,
                    ms,
                    now,
                }
            }
            770..=819 => Op::Cancel {
                key: self.busy_key(),
            },
            820..=879 => Op::Tick { now },
            880..=929 => {
                let key = if !self.model.dead.is_empty() && self.rng.chance(75) {
                    let mut dead: Vec<JobKey> = self.model.dead.keys().copied().collect();
                    dead.sort_unstable();
                    self.key_index[self.rng.pick(&dead)]
                } else {
                    self.any_key()
                };
                let now = if self.rng.below(50) == 0 { -1 } else { now };
                Op::DeadRequeue { key, now }
            }
            930..=934 => Op::DeadPurge,
            935..=949 => Op::DeadList {
                offset: self.rng.range(0, 3) as usize,
                limit: self.rng.range(0, 5) as usize,
            },
            950..=979 if self.gates_on => Op::Gate {
                gate: self.rng.below(GATES.len() as u64) as usize,
                op: *self
                    .rng
                    .pick(&[GateOp::Close, GateOp::Close, GateOp::Open, GateOp::Drop]),
            },
            980..=984 if self.settings_change => {
                let cur = *self.q.settings();
                Op::SetSettings(random_settings(&mut self.rng, &cur, self.autodelay_ok))
            }
            _ => {
                if self.policy_fixed {
                    Op::Tick { now }
                } else {
                    Op::SetPolicy(random_policy(&mut self.rng))
                }
            }
        }
    }

    /// A gate for a config: none mostly; where gates are on, one a config
    /// can name (closed or not).
    pub(super) fn config_gate(&mut self) -> Option<usize> {
        (self.gates_on && self.rng.chance(30)).then(|| self.rng.below(CONFIG_GATES as u64) as usize)
    }
}

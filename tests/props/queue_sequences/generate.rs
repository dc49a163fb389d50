//! The random operations of the order sequences: phases that fill and
//! drain, priorities at the edges of the time range, configs built directly
//! or parsed from JSON, jobs naming gates (some closed), gates closed,
//! opened and dropped (hostile names included), the automatic delay turned
//! on, changed and off.

use orca::core::settings::AutoDelay;
use orca::core::{parse_config, JobConfig, JobKey, Order, MAX_TIME};

use crate::common::json_str;

use super::*;

/// The config of pool key `i`, built directly or through `parse_config` on a
/// JSON config (checking both agree).
pub fn pool_cfg(
    i: usize,
    job_key: JobKey,
    coll: Option<&str>,
    priority: i64,
    gate: Option<usize>,
    json: bool,
) -> Result<JobConfig, String> {
    let name = pool_name(i);
    let url = pool_url(i);
    let gate = gate.map(|g| text(GATES[g]));
    let direct = JobConfig {
        job_key,
        collation: coll.map(str::to_string),
        priority,
        gate: gate.clone(),
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
    let gate_json = match &gate {
        Some(g) => format!(",\"gate\":{}", json_str(g)),
        None if i.is_multiple_of(5) => ",\"gate\":null".to_string(),
        None => String::new(),
    };
    let text = format!(
        "{{\"key\":{},\"response_url\":{}{coll_json},\"priority\":{priority}{gate_json},\"script\":[\"make test\"],\"extra\":{{\"a\":[1,2,{{}}]}}}}",
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

impl Harness {
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

    /// A gate for a config: none mostly; in sequences with gates, one of
    /// the gates a config can name (closed or not).
    pub fn config_gate(&mut self) -> Option<usize> {
        (self.gates_on && self.rng.chance(35)).then(|| self.rng.below(CONFIG_GATES as u64) as usize)
    }

    /// A key for move/delete: usually a queued or held job, sometimes any
    /// pool key.
    pub fn target(&mut self) -> usize {
        let n = self.model.jobs.len();
        if n > 0 && self.rng.chance(85) {
            let key = self.model.jobs[self.rng.below(n as u64) as usize].key;
            self.pool_index[&key]
        } else {
            self.rng.below(POOL as u64) as usize
        }
    }

    /// A new automatic delay: off, or on with a window no larger than the
    /// current one while it is on (the docs do not say what a larger window
    /// does to submissions already outside the old one).
    pub fn autodelay(&mut self) -> AutoDelay {
        if self.rng.chance(25) {
            return AutoDelay::default();
        }
        let cur = self.model.window.window;
        let mut window = *self.rng.pick(&[1, 50, 400, 2_000, 30_000]);
        if cur > 0 && window > cur {
            window = cur;
        }
        AutoDelay {
            window,
            step: *self.rng.pick(&[0, 1, 7, 100, 1_000, MAX_TIME]),
            cap: *self.rng.pick(&[0, 0, 5, 250, 3_000]),
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
        if self.gates_on && r >= 690 && self.rng.chance(12) {
            let gate = self.rng.below(GATES.len() as u64) as usize;
            return Op::Gate {
                gate,
                op: *self
                    .rng
                    .pick(&[GateOp::Close, GateOp::Close, GateOp::Open, GateOp::Drop]),
            };
        }
        if self.autodelay_on && self.rng.below(200) == 0 {
            return Op::SetAutoDelay(self.autodelay());
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
                    gate: self.config_gate(),
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
                                let n = self.model.jobs.len();
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
                    gate: self.config_gate(),
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
}

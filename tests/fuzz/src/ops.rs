//! The `ops` target: arbitrary bytes as a sequence of core operations with
//! the clock as input. Each operation is decoded once and applied to the
//! queue and, after the first codec round trip, to its decoded twin, which
//! never compacts: `check()` after each, a failing operation changes
//! nothing, and the twin answers and encodes exactly as the queue does (so
//! neither loading nor `maintain` changes anything observable).
//!
//! Operations: enqueue / immediate / reenqueue (configs naming gates
//! sometimes), move, delete, pop_deliveries, ack, nack, extend, cancel,
//! tick, dead requeue / purge, order and policy changes, gates closed,
//! opened and dropped (hostile names too: empty, binary, long), queue
//! settings (lifetime, auto delay, running cap, dead and result bounds,
//! valid or not), `maintain(budget)`, a rush of a thousand jobs (so slabs
//! get big enough to shrink), inspection, clock changes (forward, or
//! pinned anywhere incl. negative and 2^53) and codec round trips.

use orca::core::settings::AutoDelay;
use orca::core::{
    parse_config, JobConfig, JobKey, Move, Order, Policy, Queue, Settings, State, MAX_TIME,
};

use super::{known_bug, must_check, round_trip, Input, POLICY};

/// Gate names a config can name.
const CONFIG_GATES: [&str; 3] = ["g0", "g1", "img/hw 3"];

fn name_of(i: u8) -> String {
    format!("j{}", i % 24)
}

fn job_config(inp: &mut Input) -> (JobConfig, Vec<u8>) {
    let name = name_of(inp.u8());
    let url = match inp.u8() % 3 {
        0 => String::new(),
        1 => "u".to_string(),
        _ => format!("http://cb/{name}"),
    };
    let coll = match inp.u8() % 5 {
        0 | 1 => String::new(),
        2 => format!(
            ",\"collation\":{{\"type\":\"user\",\"id\":\"{}\"}}",
            inp.u8() % 4
        ),
        3 => format!(
            ",\"collation\":{{\"type\":\"team\",\"id\":{}}}",
            inp.u8() % 4
        ),
        _ => ",\"collation\":null".to_string(),
    };
    let priority = match inp.u8() % 8 {
        0 => MAX_TIME,
        1 => 0,
        2 => inp.u32() as i64,
        _ => inp.u16() as i64,
    };
    let gate = match inp.u8() % 6 {
        0 | 1 => format!(",\"gate\":\"{}\"", CONFIG_GATES[inp.u8() as usize % 3]),
        2 => ",\"gate\":null".to_string(),
        _ => String::new(),
    };
    let json = format!(
        "{{\"key\":\"{name}\",\"response_url\":\"{url}\"{coll},\"priority\":{priority}{gate},\"metadata_table\":{{\"course\":\"cs{}\"}}}}",
        inp.u8() % 3
    );
    match parse_config(json.as_bytes()) {
        Ok(c) => (c, json.into_bytes()),
        Err(e) => panic!("generated config {json} refused: {e}"),
    }
}

/// A gate name for `ORCA.GATE`: mostly one a config names; sometimes
/// empty, binary or long ("binary-safe"). The adapter refuses an empty
/// name (and one over `orca.max-gate-length`, at most 1 MiB) before the
/// core sees it; the core's own `close_gate` takes any name, and a queue
/// with an empty closed gate cannot be loaded again (its loader refuses
/// the name), so `apply` does not close one: OPEN and DROP get it.
fn gate_name(inp: &mut Input) -> Vec<u8> {
    match inp.u8() % 8 {
        0..=4 => CONFIG_GATES[inp.u8() as usize % 3].as_bytes().to_vec(),
        5 => Vec::new(),
        6 => inp.bytes(40).to_vec(),
        _ => vec![b'G'; 300 + inp.u8() as usize],
    }
}

/// A time setting: mostly small, sometimes an edge or out of range (then
/// the setting is refused and nothing changes).
fn setting_time(inp: &mut Input) -> i64 {
    match inp.u8() % 4 {
        0 => 0,
        1 => inp.time(),
        _ => inp.u16() as i64,
    }
}

fn settings(inp: &mut Input, order: Order) -> Settings {
    let window = setting_time(inp);
    let (step, cap) = if window == 0 && !inp.u8().is_multiple_of(8) {
        (0, 0)
    } else {
        (setting_time(inp), setting_time(inp))
    };
    Settings {
        order,
        lifetime: setting_time(inp),
        autodelay: AutoDelay { window, step, cap },
        max_running: match inp.u8() % 4 {
            0 => 0,
            3 => inp.u32(),
            n => n as u32,
        },
        dead_max: match inp.u8() % 4 {
            0 => 0,
            3 => inp.u64(),
            n => n as u64,
        },
        dead_ttl: setting_time(inp),
        result_max: match inp.u8() % 4 {
            0 => 0,
            3 => inp.u64(),
            n => n as u64,
        },
    }
}

#[derive(Debug)]
enum Op {
    Enqueue(JobConfig, Vec<u8>),
    Immediate(JobConfig, Vec<u8>, i64),
    Move(JobKey, Move),
    Delete(JobKey),
    Pop { lease: i64, count: usize },
    Ack(JobKey, u64, Option<&'static [u8]>, i64),
    Nack(JobKey, u64, Option<i64>),
    Extend(JobKey, u64, i64),
    Cancel(JobKey),
    Tick,
    Clock(i64),
    DeadRequeue(JobKey),
    DeadPurge,
    SetOrder(Order),
    SetPolicy(Policy),
    Inspect(usize, JobKey),
    RoundTrip,
    Gate(Vec<u8>, u8),
    Settings(Settings),
    Maintain(usize),
    Rush(usize),
}

struct Ops {
    q: Queue,
    /// The queue decoded at the last round trip, driven alongside; it never
    /// compacts.
    twin: Option<Queue>,
    now: i64,
    policy: Policy,
    /// Lease tokens handed out (and some made up), with their keys.
    leases: Vec<(JobKey, u64)>,
    rushed: bool,
}

impl Ops {
    fn key(&mut self, inp: &mut Input) -> JobKey {
        let order = self.q.pop_order();
        match inp.u8() % 4 {
            0 | 1 if !order.is_empty() => order[inp.u8() as usize % order.len()],
            2 if !self.leases.is_empty() => self.leases[inp.u8() as usize % self.leases.len()].0,
            _ => job_config(inp).0.job_key,
        }
    }

    fn lease(&mut self, inp: &mut Input) -> (JobKey, u64) {
        match inp.u8() % 8 {
            0 => (self.key(inp), inp.u64()),
            1 if !self.leases.is_empty() => {
                // A real token with another key.
                let t = self.leases[inp.u8() as usize % self.leases.len()].1;
                (self.key(inp), t)
            }
            _ if !self.leases.is_empty() => self.leases[inp.u8() as usize % self.leases.len()],
            _ => (self.key(inp), 1 + inp.u8() as u64),
        }
    }

    fn decode(&mut self, inp: &mut Input) -> Op {
        match inp.u8() % 26 {
            0..=3 => {
                let (c, p) = job_config(inp);
                Op::Enqueue(c, p)
            }
            4 => {
                let (c, p) = job_config(inp);
                Op::Immediate(c, p, self.now)
            }
            5 => {
                let (c, p) = job_config(inp);
                Op::Immediate(c, p, inp.time())
            }
            6 => {
                let k = self.key(inp);
                let how = if inp.u8().is_multiple_of(2) {
                    Move::Release
                } else {
                    Move::Delay { buffer: inp.time() }
                };
                Op::Move(k, how)
            }
            7 => Op::Delete(self.key(inp)),
            8..=10 => {
                let lease = match inp.u8() % 4 {
                    0 => 0,
                    1 => inp.time(),
                    _ => inp.u16() as i64,
                };
                let count = match inp.u8() % 8 {
                    // Drain a rush.
                    7 => 100 + inp.u8() as usize * 4,
                    n => 1 + n as usize % 4,
                };
                Op::Pop { lease, count }
            }
            11 => {
                let (k, t) = self.lease(inp);
                let result = inp.u8().is_multiple_of(2).then_some(&b"{}"[..]);
                Op::Ack(k, t, result, inp.time())
            }
            12 => {
                let (k, t) = self.lease(inp);
                let delay = match inp.u8() % 3 {
                    0 => None,
                    1 => Some(0),
                    _ => Some(inp.time()),
                };
                Op::Nack(k, t, delay)
            }
            13 => {
                let (k, t) = self.lease(inp);
                Op::Extend(k, t, inp.time())
            }
            14 => Op::Cancel(self.key(inp)),
            15 => Op::Tick,
            16 => Op::Clock(match inp.u8() % 6 {
                0 => inp.time(),
                1 => self.now.saturating_add(inp.u32() as i64),
                _ => self.now.saturating_add(inp.u16() as i64),
            }),
            17 => {
                let k = self.key(inp);
                if inp.u8().is_multiple_of(3) {
                    Op::DeadPurge
                } else {
                    Op::DeadRequeue(k)
                }
            }
            18 => match inp.u8() % 4 {
                0 => Op::SetOrder(Order::Fifo),
                1 => Op::SetOrder(Order::Lifo),
                2 => Op::SetPolicy(Policy {
                    max_attempts: (inp.u8() % 4) as u32,
                    retry_base: inp.time().clamp(0, MAX_TIME),
                    retry_cap: inp.time().clamp(0, MAX_TIME),
                }),
                _ => {
                    let n = inp.u8() as usize;
                    Op::Inspect(n, self.key(inp))
                }
            },
            19 => Op::RoundTrip,
            20..=21 => {
                let g = gate_name(inp);
                Op::Gate(g, inp.u8() % 3)
            }
            22 => Op::Settings(settings(inp, self.q.order())),
            23 => Op::Maintain(match inp.u8() % 4 {
                0 => 0,
                1 => usize::MAX,
                _ => inp.u8() as usize,
            }),
            // A rush is costly for every later step: rare (a magic byte,
            // which libFuzzer's comparison tracing finds).
            24 if !self.rushed && inp.u8() == 0xA5 => {
                self.rushed = true;
                // Just past the 1024 slots a slab needs before it shrinks.
                Op::Rush(1_030 + inp.u8() as usize)
            }
            _ => {
                let n = inp.u8() as usize;
                Op::Inspect(n, self.key(inp))
            }
        }
    }

    /// Apply `op` to `q` (the queue or its twin); what it answered.
    fn apply(q: &mut Queue, op: &Op, now: i64, policy: &Policy, twin: bool, check: bool) -> String {
        match op {
            Op::Enqueue(c, p) => run(q, "enqueue", check, |q| {
                q.enqueue(c, p, now).map(|(i, p)| format!("{i:?} {p:?}"))
            }),
            Op::Immediate(c, p, at) => run(q, "put_immediate", check, |q| {
                q.put_immediate(c, p, *at)
                    .map(|(i, p)| format!("{i:?} {p:?}"))
            }),
            Op::Move(k, how) => run(q, "move", check, |q| {
                q.move_job(k, *how, now).map(|i| format!("{i:?}"))
            }),
            Op::Delete(k) => run(q, "delete", check, |q| q.delete(k)),
            Op::Pop { lease, count } => run(q, "pop_deliveries", check, |q| {
                q.pop_deliveries(now, *lease, *count, policy)
                    .map(|(ds, r)| {
                        for d in &ds {
                            if let Some((_, deadline)) = d.lease {
                                assert!(deadline >= now, "lease deadline before now");
                            }
                        }
                        format!("{ds:?} {r:?}")
                    })
            }),
            Op::Ack(k, t, result, ttl) => {
                run(q, "ack", check, |q| q.ack(k, *t, *result, now, *ttl))
            }
            Op::Nack(k, t, delay) => run(q, "nack", check, |q| q.nack(k, *t, *delay, now, policy)),
            Op::Extend(k, t, ms) => run(q, "extend", check, |q| q.extend(k, *t, *ms, now)),
            Op::Cancel(k) => run(q, "cancel", check, |q| q.cancel(k)),
            Op::Tick => {
                if !(0..=MAX_TIME).contains(&now) && known_bug("tick-now") {
                    // The adapter only ticks with a clock in range.
                    return String::new();
                }
                let r = q.tick(now, policy);
                if check {
                    if let Err(e) = q.check() {
                        panic!("check() failed after tick(now = {now}): {e}");
                    }
                }
                format!("{r:?}")
            }
            Op::Clock(_) | Op::RoundTrip => String::new(),
            Op::DeadRequeue(k) => run(q, "dead requeue", check, |q| {
                q.dead_requeue(k, now).map(|i| format!("{i:?}"))
            }),
            Op::DeadPurge => {
                let n = q.dead_purge();
                if check {
                    must_check(q, "dead purge");
                }
                n.to_string()
            }
            Op::SetOrder(o) => {
                q.set_order(*o);
                if check {
                    must_check(q, "set_order");
                }
                String::new()
            }
            Op::SetPolicy(_) => String::new(),
            Op::Inspect(n, k) => {
                let s = q.stats(now);
                let list = q.list(n % 4, 5, None);
                let held = q.held_list(None, n % 3, 4);
                let gates = q.gate_list();
                // The busiest collations: ties come in no documented order,
                // so the twin compares the whole list, sorted.
                let _ = q.running_by_collation(n % 5);
                let mut running = q.running_by_collation(usize::MAX);
                running.sort();
                let out = format!(
                    "{s:?} {list:?} {held:?} {gates:?} {running:?} {} {:?} {} {:?}",
                    states(q, k),
                    q.position(k),
                    q.waits_for_cap(k),
                    q.next_deadline()
                );
                let _ = q.mem_usage();
                out
            }
            Op::Gate(g, which) => {
                let out = match which {
                    0 if g.is_empty() => "refused by the adapter".into(),
                    0 => format!("{:?}", q.close_gate(g)),
                    1 => run(q, "open_gate", check, |q| q.open_gate(g)),
                    _ => run(q, "drop_gate", check, |q| {
                        q.drop_gate(g).map(|v| format!("{v:?}"))
                    }),
                };
                if q.gate_closed(g) {
                    assert!(*which == 0, "a gate still closed after OPEN/DROP");
                }
                if check {
                    must_check(q, "gate");
                }
                out
            }
            Op::Settings(s) => run(q, "set_settings", check, |q| q.set_settings(*s)),
            Op::Maintain(budget) => {
                if !twin {
                    let moves = q.maintain(*budget);
                    if std::env::var_os("ORCA_FUZZ_TRACE").is_some() {
                        eprintln!("maintain({budget}): {moves} moves");
                    }
                    if check {
                        must_check(q, "maintain");
                    }
                }
                String::new()
            }
            Op::Rush(n) => {
                for i in 0..*n {
                    let coll = match i % 5 {
                        0 => String::new(),
                        1 => ",\"collation\":{\"type\":\"user\",\"id\":\"rush\"}".to_string(),
                        _ => format!(",\"collation\":{{\"type\":\"team\",\"id\":{}}}", i % 7),
                    };
                    let gate = if i % 11 == 0 { ",\"gate\":\"g0\"" } else { "" };
                    let json = format!("{{\"key\":\"r{i}\"{coll}{gate},\"priority\":{}}}", i % 97);
                    let c = parse_config(json.as_bytes()).expect("rush config");
                    if q.enqueue(&c, json.as_bytes(), now).is_err() {
                        break;
                    }
                }
                must_check(q, "rush");
                format!("{}", q.len())
            }
        }
    }

    /// One operation. A large queue (after a rush) is checked every 8th
    /// step only, so that an input stays fast enough to fuzz.
    fn step(&mut self, inp: &mut Input, step: usize) {
        let op = self.decode(inp);
        let (now, policy) = (self.now, self.policy);
        let check = self.q.len() + self.q.held_len() <= 128 || step.is_multiple_of(8);
        let out = Ops::apply(&mut self.q, &op, now, &policy, false, check);
        match &op {
            Op::Clock(t) => self.now = *t,
            Op::SetPolicy(p) => self.policy = *p,
            Op::Pop { .. } => {
                // Remember the tokens handed out (the reply's Debug form
                // is not parsed: the queue's lease list has them).
                for (t, l) in self.q.lease_list(0, 64) {
                    if !self.leases.contains(&(l.key, t)) {
                        self.leases.push((l.key, t));
                    }
                }
                if self.leases.len() > 64 {
                    self.leases.drain(..32);
                }
            }
            Op::RoundTrip => {
                let mut back = round_trip(&self.q, "ops");
                back.take_woken();
                self.q.take_woken();
                self.twin = Some(back);
            }
            _ => {}
        }
        if let Some(twin) = &mut self.twin {
            if !matches!(op, Op::RoundTrip) {
                let t = Ops::apply(twin, &op, now, &policy, true, check);
                let differ = t != out || (check && twin.encode() != self.q.encode());
                if differ && !known_bug("twin-divergence") {
                    panic!(
                        "the decoded twin diverged after {op:?} (now {now}):\n  queue: {out}\n  twin:  {t}"
                    );
                }
            }
            twin.take_woken();
        }
        self.q.take_woken();
    }
}

/// `states(key)` as text, jobs by what clients see (no record ids).
fn states(q: &Queue, key: &JobKey) -> String {
    let Ok(states) = q.states(key) else {
        return "error".into();
    };
    let parts: Vec<String> = states
        .iter()
        .map(|s| match s {
            State::Queued(i, pos) => format!("queued {pos} {i:?}"),
            State::Held(i, g) => format!("held {g:?} {i:?}"),
            State::Delayed(k, d) => format!(
                "delayed {} {:?}",
                d.retry_at,
                q.parked_info(*k, &d.job, d.retry_at)
            ),
            State::Leased(k, t, l) => format!(
                "leased {t} {} {} {:?}",
                l.deadline,
                l.superseded,
                q.parked_info(*k, &l.job, l.deadline)
            ),
            State::Dead(k, d) => format!(
                "dead {} {:?} {:?}",
                d.died_at,
                d.cause,
                q.parked_info(*k, &d.job, d.died_at)
            ),
        })
        .collect();
    parts.join("; ")
}

/// Run `f`; a failure must leave the queue exactly as it was (checked,
/// with `check()`, on the steps that check). The answer, as text, for the
/// twin comparison.
fn run<T: std::fmt::Debug, E: std::fmt::Debug>(
    q: &mut Queue,
    what: &str,
    check: bool,
    f: impl FnOnce(&mut Queue) -> Result<T, E>,
) -> String {
    let before = check.then(|| q.encode());
    let r = f(q);
    if let Some(before) = before {
        if r.is_err() {
            assert!(q.encode() == before, "a failed {what} changed the queue");
        }
        must_check(q, what);
    }
    format!("{r:?}")
}

pub fn ops(data: &[u8]) {
    let mut inp = Input::new(data);
    let order = if inp.u8().is_multiple_of(2) {
        Order::Lifo
    } else {
        Order::Fifo
    };
    let mut s = Ops {
        q: Queue::new(order),
        twin: None,
        now: 1_700_000_000_000 + inp.u16() as i64,
        policy: POLICY,
        leases: Vec::new(),
        rushed: false,
    };
    let trace = std::env::var_os("ORCA_FUZZ_TRACE").is_some();
    let mut steps = 0;
    while !inp.is_empty() && steps < 400 {
        if trace {
            eprintln!(
                "step {steps}: next op byte {:?} (op {}), now {}, queued {}, held {}, {} leases known, twin {}",
                inp.peek(),
                inp.peek().map(|b| b % 26).unwrap_or(0),
                s.now,
                s.q.len(),
                s.q.held_len(),
                s.leases.len(),
                s.twin.is_some()
            );
        }
        s.step(&mut inp, steps);
        steps += 1;
    }
    round_trip(&s.q, "the last operation");
}

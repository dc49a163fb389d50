//! The reference model of the queue order (seed 000's rules, made exact):
//! what `tests/props/queue_sequences/` checks the core against, and the
//! order half of the worker model (`worker_model.rs`). Written from
//! docs/design.md ("The model") and docs/commands.md, naively: every
//! reservation in a plain list, pairing and pop order recomputed from
//! scratch. Two policies of docs/commands.md live in files of their own
//! that extend this model: gates and held jobs (`gates_model.rs`) and the
//! submission window of automatic delays (`window_model.rs`).

use std::collections::{BTreeSet, HashMap};

use orca::core::{JobConfig, JobKey, Move, Order, Put, QueueError, MAX_TIME};

use crate::support::*;
use crate::window_model::MWindow;

#[derive(Clone, Debug, PartialEq)]
pub enum MOwner {
    Single(JobKey),
    Coll(String),
}

#[derive(Clone, Debug)]
pub struct MRes {
    pub score: i64,
    pub tie: i64,
    pub nonce: u64,
    pub owner: MOwner,
    /// "`immediate`: `1` if the job bypasses its collation (immediate,
    /// released, re-enqueued)" (the job reply): a single reservation of an
    /// immediate job. A job without a collation owns a single reservation
    /// without being immediate.
    pub immediate: bool,
}

/// A job held behind a closed gate (docs/commands.md, ORCA.GATE): "it has
/// no reservation", and keeps what its arrival decided.
#[derive(Clone, Debug)]
pub struct MHeld {
    pub gate: Vec<u8>,
    /// The sequence number its arrival took: OPEN queues it "exactly as if
    /// it had been enqueued at its own arrival time", so its reservation
    /// then has the tie (and nonce) a direct enqueue would have taken
    /// ("`release_at` and `nonce` are what its reservation will be when the
    /// gate opens", ORCA.STATUS).
    pub seq: i64,
    /// "its reservation is arrival + priority (with the automatic delay it
    /// got at arrival)"; an immediate one "immediate at [its] arrival".
    pub release: i64,
    /// The order was LIFO at its arrival: "a collation job takes the place
    /// in its collation's stack its arrival gives it (LIFO or FIFO, as the
    /// queue's order was when it arrived)".
    pub front: bool,
}

#[derive(Clone, Debug)]
pub struct MJob {
    pub key: JobKey,
    pub payload: Vec<u8>,
    pub created_at: i64,
    /// The collation named when the job was created (for a collated job, the
    /// one whose stack holds it).
    pub collation: Option<String>,
    /// In its collation's stack (paired by position) rather than owning a
    /// single reservation.
    pub collated: bool,
    pub immediate: bool,
    /// How a stacked job entered its stack: (sequence number of that push,
    /// at the front). The stack is always what pushing its jobs in
    /// sequence order gives ("at the front for a LIFO queue ..., at the
    /// back for FIFO"; `DELAY`: "the job goes to the back of its
    /// collation's stack"), which is how a released held job finds its
    /// place (`gates_model.rs`).
    pub entry: (i64, bool),
    pub held: Option<MHeld>,
}

#[derive(Clone, Debug)]
pub struct Model {
    pub order: Order,
    /// Queued and held jobs.
    pub jobs: Vec<MJob>,
    /// Reservations, always sorted by (score, tie): the global order.
    pub res: Vec<MRes>,
    /// Collation name -> job keys in pop order (front first). Never empty.
    pub stacks: Vec<(String, Vec<JobKey>)>,
    pub next_seq: i64,
    pub front_tie: i64,
    /// Closed gates (`gates_model.rs`).
    pub gates: BTreeSet<Vec<u8>>,
    /// Automatic delay and the submissions it counts (`window_model.rs`).
    pub window: MWindow,
}

/// "Times are milliseconds ... (0..2^53-1)".
pub fn valid_time(t: i64) -> bool {
    (0..=MAX_TIME).contains(&t)
}

impl Model {
    pub fn new(order: Order) -> Self {
        Model {
            order,
            jobs: Vec::new(),
            res: Vec::new(),
            stacks: Vec::new(),
            next_seq: 1,
            front_tie: 0,
            gates: BTreeSet::new(),
            window: MWindow::default(),
        }
    }

    /// Queued jobs ("`ORCA.LEN`: not counting held ... ones").
    pub fn len(&self) -> usize {
        self.jobs.iter().filter(|j| j.held.is_none()).count()
    }

    pub fn alloc(&mut self) -> i64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    pub fn job(&self, key: &JobKey) -> Option<&MJob> {
        self.jobs.iter().find(|j| j.key == *key)
    }

    pub fn job_mut(&mut self, key: &JobKey) -> Option<&mut MJob> {
        self.jobs.iter_mut().find(|j| j.key == *key)
    }

    pub fn stack(&self, name: &str) -> &[JobKey] {
        self.stacks
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.as_slice())
            .unwrap_or(&[])
    }

    pub fn stack_mut(&mut self, name: &str) -> &mut Vec<JobKey> {
        if let Some(i) = self.stacks.iter().position(|(n, _)| n == name) {
            &mut self.stacks[i].1
        } else {
            self.stacks.push((name.to_string(), Vec::new()));
            &mut self.stacks.last_mut().unwrap().1
        }
    }

    /// Add a reservation, keeping `res` sorted in global order (score, then
    /// tie).
    pub fn push_res(&mut self, r: MRes) {
        self.res.push(r);
        self.res.sort_by_key(|r| (r.score, r.tie));
    }

    /// Index into `res` of the reservation the job holds or is paired with:
    /// the k-th job of a stack <-> the k-th earliest reservation of its
    /// collation. None for a held job (it has no reservation).
    pub fn paired(&self, key: &JobKey) -> Option<usize> {
        let job = self.job(key)?;
        if job.held.is_some() {
            return None;
        }
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

    pub fn info(&self, key: &JobKey) -> Option<Info> {
        let job = self.job(key)?;
        if let Some(h) = &job.held {
            return Some(Info {
                key: *key,
                collation: job.collation.clone(),
                immediate: job.immediate,
                nonce: h.seq as u64,
                created_at: job.created_at,
                release_at: h.release,
                attempts: 0,
                payload: job.payload.clone(),
            });
        }
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

    /// 1-based position in pop order; a held job has none ("not in the
    /// queue order").
    pub fn position(&self, key: &JobKey) -> Result<usize, QueueError> {
        match self.job(key) {
            None => Err(QueueError::NoSuchJob),
            Some(j) if j.held.is_some() => Err(QueueError::NotQueued),
            Some(_) => Ok(self.paired(key).expect("model: queued job unpaired") + 1),
        }
    }

    pub fn pop_order(&self) -> Vec<JobKey> {
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
    pub fn detach(&mut self, key: &JobKey) {
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

    pub fn add_single(&mut self, key: JobKey, score: i64, immediate: bool) {
        let seq = self.alloc();
        self.push_res(MRes {
            score,
            tie: seq,
            nonce: seq as u64,
            owner: MOwner::Single(key),
            immediate,
        });
    }

    /// Push `key` on its collation's stack with a reservation at `score`
    /// (tie and nonce `seq`): "at the front for a LIFO queue ..., at the
    /// back for FIFO".
    pub fn push_collated(&mut self, key: JobKey, name: &str, score: i64, seq: i64, front: bool) {
        self.push_res(MRes {
            score,
            tie: seq,
            nonce: seq as u64,
            owner: MOwner::Coll(name.to_string()),
            immediate: false,
        });
        let stack = self.stack_mut(name);
        if front {
            stack.insert(0, key);
        } else {
            stack.push(key);
        }
        let job = self.job_mut(&key).unwrap();
        job.collated = true;
        job.entry = (seq, front);
    }

    pub fn new_job(&mut self, key: JobKey, payload: &[u8], created_at: i64, coll: Option<&str>) {
        self.jobs.push(MJob {
            key,
            payload: payload.to_vec(),
            created_at,
            collation: coll.map(str::to_string),
            collated: false,
            immediate: false,
            entry: (0, false),
            held: None,
        });
    }

    /// `ORCA.ENQUEUE`: "Create-or-update (a PUT). A new job gets a
    /// reservation at now + `priority` for its collation ... and is pushed
    /// on its collation's stack"; with an automatic delay "a new collation
    /// job's reservation is at now + `priority` + step × (the jobs the same
    /// collation submitted in the `window` ms before this one)"; "If the
    /// config names a gate that is closed, the new job is **held**". "An
    /// existing job (same orca key) only has its payload replaced ... (a
    /// held job stays held)".
    pub fn enqueue(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        now: i64,
    ) -> Result<(Info, Put), QueueError> {
        // "`NOW <ms>` pins the clock (0..2^53-1)".
        if !valid_time(now) {
            return Err(QueueError::TimeOverflow);
        }
        let key = cfg.job_key;
        if let Some(job) = self.job_mut(&key) {
            job.payload = payload.to_vec();
            let held = job.held.is_some();
            let put = Put {
                created: false,
                delay: 0,
                held,
            };
            return Ok((self.info(&key).unwrap(), put));
        }
        let delay = match &cfg.collation {
            Some(name) => self.window.delay(name, now),
            None => 0,
        };
        // "`time out of range` (arrival + priority beyond 2^53-1)".
        let release = (now as i128 + cfg.priority as i128 + delay as i128)
            .try_into()
            .ok()
            .filter(|t| valid_time(*t))
            .ok_or(QueueError::TimeOverflow)?;
        let coll = cfg.collation.as_deref();
        let gate = cfg
            .gate
            .as_ref()
            .map(|g| g.as_bytes().to_vec())
            .filter(|g| self.gates.contains(g));
        self.new_job(key, payload, now, coll);
        let seq = self.alloc();
        let front = self.order == Order::Lifo;
        match (&gate, coll) {
            (Some(g), _) => {
                self.job_mut(&key).unwrap().held = Some(MHeld {
                    gate: g.clone(),
                    seq,
                    release,
                    front,
                });
            }
            (None, None) => self.push_res(MRes {
                score: release,
                tie: seq,
                nonce: seq as u64,
                owner: MOwner::Single(key),
                immediate: false,
            }),
            (None, Some(name)) => self.push_collated(key, name, release, seq, front),
        }
        if let Some(name) = coll {
            self.window.record(name, now);
        }
        let put = Put {
            created: true,
            delay,
            held: gate.is_some(),
        };
        Ok((self.info(&key).unwrap(), put))
    }

    /// `ORCA.IMMEDIATE` / `ORCA.REENQUEUE`: "its own reservation scored at
    /// arrival time ..., bypassing its collation's stack". "If a waiting
    /// non-immediate job has that orca key, it is upgraded: it leaves its
    /// collation's stack, the reservation paired with it is removed ..., and
    /// an immediate reservation at arrival time is added. An existing
    /// immediate job only has its payload replaced. A held job becomes
    /// immediate where it waits (its arrival is kept; it is queued at that
    /// arrival when its gate opens). A new job naming a closed gate is
    /// held, as immediate. Immediate jobs are never delayed automatically
    /// and do not count as submissions".
    pub fn put_immediate(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        arrival: i64,
    ) -> Result<(Info, Put), QueueError> {
        if !valid_time(arrival) {
            return Err(QueueError::TimeOverflow);
        }
        let key = cfg.job_key;
        if let Some(job) = self.job(&key).cloned() {
            let held = job.held.is_some();
            if held {
                let j = self.job_mut(&key).unwrap();
                j.immediate = true;
                let created_at = j.created_at;
                j.held.as_mut().unwrap().release = created_at;
            } else if !job.immediate {
                self.detach(&key);
                self.add_single(key, arrival, true);
                self.job_mut(&key).unwrap().immediate = true;
            }
            self.job_mut(&key).unwrap().payload = payload.to_vec();
            let put = Put {
                created: false,
                delay: 0,
                held,
            };
            return Ok((self.info(&key).unwrap(), put));
        }
        let gate = cfg
            .gate
            .as_ref()
            .map(|g| g.as_bytes().to_vec())
            .filter(|g| self.gates.contains(g));
        self.new_job(key, payload, arrival, cfg.collation.as_deref());
        self.job_mut(&key).unwrap().immediate = true;
        match &gate {
            Some(g) => {
                let seq = self.alloc();
                self.job_mut(&key).unwrap().held = Some(MHeld {
                    gate: g.clone(),
                    seq,
                    release: arrival,
                    front: false,
                });
            }
            None => self.add_single(key, arrival, true),
        }
        let put = Put {
            created: true,
            delay: 0,
            held: gate.is_some(),
        };
        Ok((self.info(&key).unwrap(), put))
    }

    /// A job coming back from a lease or a retry, or out of the dead list:
    /// queued "as immediate" at `score` (its original arrival, or now).
    pub fn insert_immediate(
        &mut self,
        key: JobKey,
        payload: &[u8],
        created_at: i64,
        coll: Option<&str>,
        score: i64,
    ) {
        assert!(
            self.job(&key).is_none(),
            "model: {} queued twice",
            kname(&key)
        );
        self.new_job(key, payload, created_at, coll);
        self.job_mut(&key).unwrap().immediate = true;
        self.add_single(key, score, true);
    }

    pub fn move_job(&mut self, key: &JobKey, how: Move, now: i64) -> Result<Info, QueueError> {
        let job = self.job(key).ok_or(QueueError::NoSuchJob)?.clone();
        // "`ERR job is held behind gate '<gate>' (ORCA.GATE ... OPEN
        // releases it)`": a held job is "never moved by `ORCA.MOVE`".
        if let Some(h) = &job.held {
            return Err(QueueError::Held(text(&h.gate)));
        }
        if job.immediate {
            return Err(QueueError::ImmediateNotMovable);
        }
        match how {
            Move::Release => {
                if !valid_time(now) {
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
                    immediate: true,
                });
                self.job_mut(key).unwrap().immediate = true;
            }
            Move::Delay { buffer } => {
                // The last reservation of the whole queue, the job's own included.
                let last = self.res.last().unwrap().score;
                let score = last
                    .checked_add(buffer)
                    .filter(|t| valid_time(*t) && buffer >= 0)
                    .ok_or(QueueError::TimeOverflow)?;
                self.detach(key);
                if job.collated {
                    let name = job.collation.clone().unwrap();
                    let seq = self.alloc();
                    self.push_collated(*key, &name, score, seq, false);
                } else {
                    self.add_single(*key, score, false);
                }
            }
        }
        Ok(self.info(key).unwrap())
    }

    /// `ORCA.DELETE`: "Removes the job and the reservation paired with it
    /// (or a held job from its gate)".
    pub fn delete(&mut self, key: &JobKey) -> bool {
        let Some(job) = self.job(key) else {
            return false;
        };
        if job.held.is_none() {
            self.detach(key);
        }
        self.jobs.retain(|j| j.key != *key);
        true
    }

    /// `ORCA.POP`: "Takes the lowest reservation of the whole queue and
    /// hands out its job: for an immediate (or collation-less) job the job
    /// itself, for a collation reservation the job at the front of that
    /// collation's stack." Under a running cap only the reservations of
    /// collations `eligible` says yes to, and every single one ("the
    /// immediate jobs (never capped)"), are candidates (`caps_model.rs`).
    pub fn pop_where(&mut self, eligible: impl Fn(&str) -> bool) -> Option<Info> {
        let i = self.res.iter().position(|r| match &r.owner {
            MOwner::Single(_) => true,
            MOwner::Coll(name) => eligible(name),
        })?;
        let key = match &self.res[i].owner {
            MOwner::Single(key) => *key,
            MOwner::Coll(name) => self.stack(name)[0],
        };
        let mut info = self.info(&key).unwrap();
        info.attempts += 1;
        assert_eq!(
            self.paired(&key),
            Some(i),
            "model: popped job not paired with the reservation taken"
        );
        self.delete(&key);
        Some(info)
    }

    pub fn pop(&mut self) -> Option<Info> {
        self.pop_where(|_| true)
    }

    /// The model's own books agree: `res` sorted, every queued job paired
    /// exactly once, stacks in the order their pushes give, flags right.
    pub fn self_check(&self) -> Result<(), String> {
        ensure!(
            self.res
                .windows(2)
                .all(|w| (w[0].score, w[0].tie) < (w[1].score, w[1].tie)),
            "model: reservations out of order"
        );
        let queued = self.len();
        ensure!(
            self.res.len() == queued,
            "model: {} reservations for {queued} queued jobs",
            self.res.len()
        );
        for (name, stack) in &self.stacks {
            let keys: Vec<(i64, i64)> = stack
                .iter()
                .map(|k| {
                    let (seq, front) = self.job(k).unwrap().entry;
                    if front {
                        (0, -seq)
                    } else {
                        (1, seq)
                    }
                })
                .collect();
            ensure!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "model: stack {name} is not in the order its pushes give"
            );
        }
        for j in &self.jobs {
            ensure!(
                j.held.is_none() || (!j.collated && self.paired(&j.key).is_none()),
                "model: held job {} placed",
                kname(&j.key)
            );
            if j.held.is_none() {
                let p = self.paired(&j.key);
                ensure!(p.is_some(), "model: {} unpaired", kname(&j.key));
                let r = &self.res[p.unwrap()];
                ensure!(
                    j.collated || r.immediate == j.immediate,
                    "model: {} immediate flag differs from its reservation's",
                    kname(&j.key)
                );
            }
        }
        Ok(())
    }
}

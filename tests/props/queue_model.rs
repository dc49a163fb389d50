//! The reference model of the queue order (seed 000's rules, made exact):
//! what `tests/props/queue_sequences.rs` checks the core against. Written
//! from docs/design.md ("The model"), naively: every reservation in a
//! plain list, pairing and pop order recomputed from scratch.

use std::collections::HashMap;

use orca::core::{JobConfig, JobKey, Move, Order, QueueError, MAX_TIME};

use crate::support::*;

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
}

#[derive(Clone, Debug)]
pub struct Model {
    pub order: Order,
    pub jobs: Vec<MJob>,
    /// Reservations, always sorted by (score, tie): the global order.
    pub res: Vec<MRes>,
    /// Collation name -> job keys in pop order (front first). Never empty.
    pub stacks: Vec<(String, Vec<JobKey>)>,
    pub next_seq: i64,
    pub front_tie: i64,
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
        }
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
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
    /// collation.
    pub fn paired(&self, key: &JobKey) -> Option<usize> {
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

    pub fn info(&self, key: &JobKey) -> Option<Info> {
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

    pub fn position(&self, key: &JobKey) -> Option<usize> {
        let p = self.paired(key)?;
        Some(p + 1)
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

    pub fn add_single(&mut self, key: JobKey, score: i64) {
        let seq = self.alloc();
        self.push_res(MRes {
            score,
            tie: seq,
            nonce: seq as u64,
            owner: MOwner::Single(key),
        });
    }

    pub fn add_coll_res(&mut self, name: &str, score: i64) {
        let seq = self.alloc();
        self.push_res(MRes {
            score,
            tie: seq,
            nonce: seq as u64,
            owner: MOwner::Coll(name.to_string()),
        });
    }

    pub fn enqueue(
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

    pub fn put_immediate(
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

    pub fn move_job(&mut self, key: &JobKey, how: Move, now: i64) -> Result<Info, QueueError> {
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

    pub fn delete(&mut self, key: &JobKey) -> bool {
        if self.job(key).is_none() {
            return false;
        }
        self.detach(key);
        self.jobs.retain(|j| j.key != *key);
        true
    }

    pub fn pop(&mut self) -> Option<Info> {
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

//! The grading queue of seed 000 as one in-memory value.
//!
//! Nothing here knows about Redis: every operation takes the time (`now`, ms)
//! as an argument, so the queue is deterministic and can be tested and
//! replayed exactly. See docs/design.md for the model and its invariants.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use super::config::{JobConfig, JobKey, KeyMap};
use super::error::QueueError;
use super::index::OrderIndex;
use super::{MAX_TIME, SEQ_LIMIT};

/// A reservation's place in the global order: by score (release time, ms),
/// then by tie. Ties of ordinary reservations are increasing sequence numbers
/// (arrival order); reservations put at the very front get decreasing
/// negative ties, so they sort before every reservation of the same score.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResKey {
    pub score: i64,
    pub tie: i64,
}

/// Whose reservation it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The reservation of one job that is not in a collation stack
    /// (an immediate job, or a job without collation).
    Single(JobKey),
    /// One of a collation's reservations; which job it serves follows from
    /// the pairing rule, not from the reservation.
    Collation(Rc<str>),
}

impl Default for Owner {
    fn default() -> Self {
        Owner::Single([0; 32])
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Res {
    pub owner: Owner,
    pub nonce: u64,
}

/// Where a job sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Owns exactly one reservation of its own.
    Single {
        res: ResKey,
        nonce: u64,
        immediate: bool,
    },
    /// In its collation's stack, paired by position with a reservation.
    Collated,
}

#[derive(Clone, Debug)]
pub struct Job {
    pub payload: Box<[u8]>,
    pub created_at: i64,
    pub attempts: u32,
    /// For a collated job, the collation whose stack holds it; for a single
    /// job, the collation its config named (informational).
    pub collation: Option<Rc<str>>,
    pub place: Place,
}

/// One collation (`user.<id>` / `team.<id>`): its stack of job keys in pop
/// order (front = next) and its reservations ordered by `ResKey`, each with a
/// nonce. The k-th job of the stack is paired with the k-th reservation.
#[derive(Clone, Debug, Default)]
pub struct Collation {
    pub stack: VecDeque<JobKey>,
    pub res: BTreeMap<ResKey, u64>,
}

/// Order in which a collation's own jobs are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Most recent submission first (seed 000's default).
    Lifo,
    /// Oldest submission first.
    Fifo,
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Lifo => "lifo",
            Order::Fifo => "fifo",
        }
    }
}

/// What a job looks like to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo<'a> {
    pub key: JobKey,
    pub collation: Option<Cow<'a, str>>,
    pub immediate: bool,
    pub nonce: u64,
    pub created_at: i64,
    pub release_at: i64,
    pub attempts: u32,
    pub payload: Cow<'a, [u8]>,
}

/// How `ORCA.MOVE` moves a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// To the very front of the whole queue (the job becomes immediate).
    Release,
    /// To the very back: last score + buffer, and the back of its collation.
    Delay { buffer: i64 },
}

#[derive(Clone, Debug)]
pub struct Queue {
    pub(crate) order: Order,
    pub(crate) jobs: KeyMap<Job>,
    pub(crate) index: OrderIndex<ResKey, Res>,
    pub(crate) collations: HashMap<Rc<str>, Collation>,
    /// Next sequence number (ties of ordinary reservations, and nonces). > 0.
    pub(crate) next_seq: i64,
    /// Tie of the last reservation put at the very front. <= 0.
    pub(crate) front_tie: i64,
    /// Sum of payload lengths of queued jobs (for memory accounting).
    pub(crate) payload_bytes: usize,
    /// Jobs handed out and not yet acked/nacked/expired (see worker.rs).
    pub(crate) work: super::worker::Work,
}

impl Queue {
    pub fn new(order: Order) -> Self {
        Queue {
            order,
            jobs: KeyMap::default(),
            index: OrderIndex::new(),
            collations: HashMap::new(),
            next_seq: 1,
            front_tie: 0,
            payload_bytes: 0,
            work: Default::default(),
        }
    }

    pub fn order(&self) -> Order {
        self.order
    }

    /// Change the collation order. Jobs already queued keep their places;
    /// the order decides where new jobs enter their collation's stack.
    pub fn set_order(&mut self, order: Order) {
        self.order = order;
    }

    /// Is a job queued under `key`?
    pub fn contains(&self, key: &JobKey) -> bool {
        self.jobs.contains_key(key)
    }

    /// Number of queued jobs.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn collation_count(&self) -> usize {
        self.collations.len()
    }

    /// Refuse an operation (before it changes anything) when the sequence
    /// counters are near their limit, so every queue stays reloadable.
    pub(crate) fn seq_room(&self) -> Result<(), QueueError> {
        if self.next_seq > SEQ_LIMIT - 16 || self.front_tie < -SEQ_LIMIT + 16 {
            return Err(QueueError::Corrupt("sequence numbers exhausted".into()));
        }
        Ok(())
    }

    pub(crate) fn alloc_seq(&mut self) -> i64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    pub(crate) fn intern(&self, name: &str) -> Rc<str> {
        match self.collations.get_key_value(name) {
            Some((k, _)) => k.clone(),
            None => Rc::from(name),
        }
    }

    fn replace_payload(&mut self, key: &JobKey, payload: &[u8]) {
        if let Some(job) = self.jobs.get_mut(key) {
            self.payload_bytes = self.payload_bytes - job.payload.len() + payload.len();
            job.payload = payload.into();
        }
    }

    pub(crate) fn insert_job(&mut self, key: JobKey, job: Job) {
        self.payload_bytes += job.payload.len();
        self.jobs.insert(key, job);
    }

    pub(crate) fn remove_job(&mut self, key: &JobKey) -> Option<Job> {
        let job = self.jobs.remove(key)?;
        self.payload_bytes -= job.payload.len();
        Some(job)
    }

    /// Give `key` a single reservation of its own at `score`, in arrival order
    /// among equal scores.
    pub(crate) fn add_single(&mut self, key: JobKey, score: i64, immediate: bool) -> Place {
        let seq = self.alloc_seq();
        let res = ResKey { score, tie: seq };
        self.index.insert(
            res,
            Res {
                owner: Owner::Single(key),
                nonce: seq as u64,
            },
        );
        Place::Single {
            res,
            nonce: seq as u64,
            immediate,
        }
    }

    /// Give `key` a reservation before every other one.
    fn add_front(&mut self, key: JobKey, now: i64) -> Place {
        let score = match self.index.first() {
            Some((first, _)) => first.score.min(now),
            None => now,
        };
        self.front_tie -= 1;
        let nonce = self.alloc_seq() as u64;
        let res = ResKey {
            score,
            tie: self.front_tie,
        };
        self.index.insert(
            res,
            Res {
                owner: Owner::Single(key),
                nonce,
            },
        );
        Place::Single {
            res,
            nonce,
            immediate: true,
        }
    }

    /// Add a reservation at `score` to collation `name`; returns its key.
    fn add_collation_res(&mut self, name: &Rc<str>, score: i64) -> ResKey {
        let seq = self.alloc_seq();
        let res = ResKey { score, tie: seq };
        self.collations
            .entry(name.clone())
            .or_default()
            .res
            .insert(res, seq as u64);
        self.index.insert(
            res,
            Res {
                owner: Owner::Collation(name.clone()),
                nonce: seq as u64,
            },
        );
        res
    }

    /// Take a collated job out of its collation: out of the stack, and the
    /// reservation paired with it out of the collation and the global order.
    /// Every other job of the collation keeps its pairing.
    fn detach_collated(&mut self, key: &JobKey, name: &Rc<str>) -> Result<(), QueueError> {
        let coll = self
            .collations
            .get_mut(name)
            .ok_or_else(|| QueueError::Corrupt("job's collation missing".into()))?;
        let k = coll
            .stack
            .iter()
            .position(|j| j == key)
            .ok_or_else(|| QueueError::Corrupt("job missing from its collation".into()))?;
        let paired = *coll
            .res
            .keys()
            .nth(k)
            .ok_or_else(|| QueueError::Corrupt("collation has too few reservations".into()))?;
        coll.stack.remove(k);
        coll.res.remove(&paired);
        let empty = coll.stack.is_empty();
        if empty {
            self.collations.remove(name);
        }
        self.index.remove(&paired);
        Ok(())
    }

    /// Remove whatever reservation the job holds (single or paired).
    pub(crate) fn detach(&mut self, key: &JobKey) -> Result<(), QueueError> {
        let job = self.jobs.get(key).ok_or(QueueError::NoSuchJob)?;
        match job.place {
            Place::Single { res, .. } => {
                self.index.remove(&res);
                Ok(())
            }
            Place::Collated => {
                let name = job
                    .collation
                    .clone()
                    .ok_or_else(|| QueueError::Corrupt("collated job without collation".into()))?;
                self.detach_collated(key, &name)
            }
        }
    }

    /// `ORCA.ENQUEUE`: create-or-update. A new job gets a reservation at
    /// `now + priority` and enters its collation's stack (front for LIFO, back
    /// for FIFO). An existing job only has its payload replaced.
    /// Returns the job and whether it was created.
    pub fn enqueue(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        now: i64,
    ) -> Result<(JobInfo<'_>, bool), QueueError> {
        let key = cfg.job_key;
        if !(0..=MAX_TIME).contains(&now) {
            return Err(QueueError::TimeOverflow);
        }
        if self.jobs.contains_key(&key) {
            self.replace_payload(&key, payload);
            return Ok((self.info(&key)?, false));
        }
        self.seq_room()?;
        let release = now
            .checked_add(cfg.priority)
            .filter(|t| (0..=MAX_TIME).contains(t))
            .ok_or(QueueError::TimeOverflow)?;
        let job = match &cfg.collation {
            None => Job {
                payload: payload.into(),
                created_at: now,
                attempts: 0,
                collation: None,
                place: self.add_single(key, release, false),
            },
            Some(name) => {
                let name = self.intern(name);
                self.add_collation_res(&name, release);
                let coll = self.collations.entry(name.clone()).or_default();
                match self.order {
                    Order::Lifo => coll.stack.push_front(key),
                    Order::Fifo => coll.stack.push_back(key),
                }
                Job {
                    payload: payload.into(),
                    created_at: now,
                    attempts: 0,
                    collation: Some(name),
                    place: Place::Collated,
                }
            }
        };
        self.insert_job(key, job);
        self.supersede(&key);
        Ok((self.info(&key)?, true))
    }

    /// `ORCA.IMMEDIATE` (arrival = created = now) and `ORCA.REENQUEUE`
    /// (arrival = created = the job's original arrival time): create-or-update
    /// as an immediate job with a reservation at `arrival`. A waiting job that
    /// is not immediate is upgraded: the reservation paired with it is removed
    /// and an immediate one at `arrival` added.
    pub fn put_immediate(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        arrival: i64,
    ) -> Result<(JobInfo<'_>, bool), QueueError> {
        if !(0..=MAX_TIME).contains(&arrival) {
            return Err(QueueError::TimeOverflow);
        }
        self.seq_room()?;
        let key = cfg.job_key;
        if let Some(job) = self.jobs.get(&key) {
            let already = matches!(
                job.place,
                Place::Single {
                    immediate: true,
                    ..
                }
            );
            if !already {
                self.detach(&key)?;
                let place = self.add_single(key, arrival, true);
                if let Some(job) = self.jobs.get_mut(&key) {
                    job.place = place;
                }
            }
            self.replace_payload(&key, payload);
            return Ok((self.info(&key)?, false));
        }
        let collation = cfg.collation.as_deref().map(|n| self.intern(n));
        self.supersede(&key);
        let place = self.add_single(key, arrival, true);
        self.insert_job(
            key,
            Job {
                payload: payload.into(),
                created_at: arrival,
                attempts: 0,
                collation,
                place,
            },
        );
        Ok((self.info(&key)?, true))
    }

    /// `ORCA.MOVE`.
    pub fn move_job(
        &mut self,
        key: &JobKey,
        how: Move,
        now: i64,
    ) -> Result<JobInfo<'_>, QueueError> {
        let job = self.jobs.get(key).ok_or(QueueError::NoSuchJob)?;
        let place = job.place;
        if let Place::Single {
            immediate: true, ..
        } = place
        {
            return Err(QueueError::ImmediateNotMovable);
        }
        if let Move::Delay { buffer } = how {
            if !(0..=MAX_TIME).contains(&buffer) {
                return Err(QueueError::TimeOverflow);
            }
        }
        self.seq_room()?;
        match how {
            Move::Release => {
                if !(0..=MAX_TIME).contains(&now) {
                    return Err(QueueError::TimeOverflow);
                }
                self.detach(key)?;
                let place = self.add_front(*key, now);
                if let Some(job) = self.jobs.get_mut(key) {
                    job.place = place;
                }
            }
            Move::Delay { buffer } => {
                let last = self.index.last().map(|(k, _)| k.score).unwrap_or(now);
                let score = last
                    .checked_add(buffer)
                    .filter(|t| (0..=MAX_TIME).contains(t))
                    .ok_or(QueueError::TimeOverflow)?;
                match place {
                    Place::Single { .. } => {
                        self.detach(key)?;
                        let place = self.add_single(*key, score, false);
                        if let Some(job) = self.jobs.get_mut(key) {
                            job.place = place;
                        }
                    }
                    Place::Collated => {
                        let name = job.collation.clone().ok_or_else(|| {
                            QueueError::Corrupt("collated job without collation".into())
                        })?;
                        self.detach_collated(key, &name)?;
                        self.add_collation_res(&name, score);
                        self.collations
                            .entry(name)
                            .or_default()
                            .stack
                            .push_back(*key);
                    }
                }
            }
        }
        self.info(key)
    }

    /// `ORCA.DELETE`: remove the job and the reservation paired with it.
    pub fn delete(&mut self, key: &JobKey) -> Result<bool, QueueError> {
        if !self.jobs.contains_key(key) {
            return Ok(false);
        }
        self.detach(key)?;
        self.remove_job(key);
        Ok(true)
    }

    /// `ORCA.POP`: the job of the lowest reservation, removed from the queue.
    /// Priority orders the queue; it does not hold jobs back, so the lowest
    /// reservation is taken even when its release time is in the future.
    pub fn pop(&mut self) -> Result<Option<JobInfo<'static>>, QueueError> {
        let (rk, res) = match self.index.first() {
            None => return Ok(None),
            Some((k, r)) => (*k, r.clone()),
        };
        let key = match &res.owner {
            Owner::Single(key) => *key,
            Owner::Collation(name) => {
                let coll = self.collations.get_mut(name).ok_or_else(|| {
                    QueueError::Corrupt("reservation of unknown collation".into())
                })?;
                let key = coll
                    .stack
                    .pop_front()
                    .ok_or_else(|| QueueError::Corrupt("collation stack empty".into()))?;
                coll.res.remove(&rk);
                if coll.stack.is_empty() {
                    self.collations.remove(name);
                }
                key
            }
        };
        self.index.remove(&rk);
        let job = self
            .remove_job(&key)
            .ok_or_else(|| QueueError::Corrupt("reservation of unknown job".into()))?;
        let immediate = matches!(
            job.place,
            Place::Single {
                immediate: true,
                ..
            }
        );
        Ok(Some(JobInfo {
            key,
            collation: job.collation.as_deref().map(|c| Cow::Owned(c.to_owned())),
            immediate,
            nonce: res.nonce,
            created_at: job.created_at,
            release_at: rk.score,
            attempts: job.attempts.saturating_add(1),
            payload: Cow::Owned(job.payload.into_vec()),
        }))
    }

    /// The reservation a job holds or is paired with, and its nonce.
    pub fn reservation_of(&self, key: &JobKey) -> Result<(ResKey, u64), QueueError> {
        let job = self.jobs.get(key).ok_or(QueueError::NoSuchJob)?;
        match job.place {
            Place::Single { res, nonce, .. } => Ok((res, nonce)),
            Place::Collated => {
                let name = job
                    .collation
                    .as_ref()
                    .ok_or_else(|| QueueError::Corrupt("collated job without collation".into()))?;
                let coll = self
                    .collations
                    .get(name)
                    .ok_or_else(|| QueueError::Corrupt("job's collation missing".into()))?;
                let k =
                    coll.stack.iter().position(|j| j == key).ok_or_else(|| {
                        QueueError::Corrupt("job missing from its collation".into())
                    })?;
                coll.res
                    .iter()
                    .nth(k)
                    .map(|(r, n)| (*r, *n))
                    .ok_or_else(|| QueueError::Corrupt("collation has too few reservations".into()))
            }
        }
    }

    /// A queued job as clients see it.
    pub fn info(&self, key: &JobKey) -> Result<JobInfo<'_>, QueueError> {
        let job = self.jobs.get(key).ok_or(QueueError::NoSuchJob)?;
        let (res, nonce) = self.reservation_of(key)?;
        Ok(JobInfo {
            key: *key,
            collation: job.collation.as_deref().map(Cow::Borrowed),
            immediate: matches!(
                job.place,
                Place::Single {
                    immediate: true,
                    ..
                }
            ),
            nonce,
            created_at: job.created_at,
            release_at: res.score,
            attempts: job.attempts,
            payload: Cow::Borrowed(&job.payload),
        })
    }

    /// 1-based position of a queued job in pop order (that of the
    /// reservation it holds or is paired with).
    pub fn position(&self, key: &JobKey) -> Result<usize, QueueError> {
        let (res, _) = self.reservation_of(key)?;
        self.index
            .rank(&res)
            .map(|r| r + 1)
            .ok_or_else(|| QueueError::Corrupt("reservation missing from the order".into()))
    }

    /// Job keys in pop order (linear; for tests, checks and listings).
    pub fn pop_order(&self) -> Vec<JobKey> {
        let mut taken: HashMap<&str, usize> = HashMap::new();
        let mut out = Vec::with_capacity(self.jobs.len());
        for (_, res) in self.index.iter() {
            match &res.owner {
                Owner::Single(k) => out.push(*k),
                Owner::Collation(name) => {
                    let i = taken.entry(name).or_insert(0);
                    if let Some(k) = self.collations.get(name).and_then(|c| c.stack.get(*i)) {
                        out.push(*k);
                    }
                    *i += 1;
                }
            }
        }
        out
    }

    /// Rough heap footprint in bytes, for `MEMORY USAGE`.
    pub fn mem_usage(&self) -> usize {
        use std::mem::size_of;
        let jobs = self.jobs.capacity() * (size_of::<(JobKey, Job)>() + 1);
        let colls: usize = self
            .collations
            .iter()
            .map(|(name, c)| {
                name.len()
                    + 16
                    + size_of::<(Rc<str>, Collation)>()
                    + c.stack.capacity() * size_of::<JobKey>()
                    + c.res.len() * (size_of::<(ResKey, u64)>() + 16)
            })
            .sum();
        let work = (self.work.leases.len() + self.work.delayed.len() + self.work.dead.len())
            * (size_of::<super::worker::Lease>() + 48)
            + (self.work.results.len() + self.work.cancelled.len()) * 96;
        size_of::<Queue>()
            + jobs
            + colls
            + self.index.heap_bytes()
            + self.payload_bytes
            + work
            + self.work.bytes
    }
}

//! The Orca grading queue as one in-memory value.
//!
//! Nothing here knows about Redis: every operation takes the time (`now`, ms)
//! as an argument, so the queue is deterministic and can be tested and
//! replayed exactly. See docs/design.md for the model and its invariants.
//!
//! Layout (docs/design.md, "Memory"): jobs, reservations and collations are
//! records in slabs, linked by `u32` ids.
//! - A job (64 bytes + payload) is found by its orca key through `by_key`.
//! - Every reservation is a node of the global order (`index`): its key is
//!   (score, tie); `val` names its owner: a job (single reservation) or,
//!   tagged, a collation; `aux` is the immediate flag of a single
//!   reservation, or the next reservation of the same collation.
//! - A collation keeps its stack of jobs in pop order (a list through the
//!   jobs' `link`) and its reservations in key order (a list through the
//!   nodes' `aux`); the k-th job of the stack is paired with the k-th
//!   reservation.
//! - Nonces equal the tie for every reservation the queue creates itself,
//!   except those put at the very front; the others are kept aside.

use std::borrow::Cow;

use super::caps::{busiest_of, Caps};
use super::collation::Collations;
use super::config::{JobConfig, JobKey};
use super::containers::idmap::IdMap;
use super::containers::{IdTable, Slab};
use super::error::QueueError;
use super::gates::Gates;
use super::ids::{CollId, JobId, NodeId};
pub use super::job::JobInfo;
pub(crate) use super::job::LoadedJob;
use super::job::{CollRef, Job, JobLink};
use super::limits::{valid_time, MAX_TIME, SEQ_LIMIT};
pub use super::reservation::ResKey;
pub(crate) use super::reservation::{GlobalOrder, Owner, OwnerRef, ResLink};
pub use super::settings::{Order, Settings};
use super::window::Window;
use super::work::Parked;

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
    /// The queue's own settings (order, lifetime, auto delay, caps, bounds).
    pub(crate) settings: Settings,
    pub(crate) jobs: Slab<Job, JobId>,
    /// Job ids by orca key.
    pub(crate) by_key: IdTable<JobId>,
    /// The global order of reservations.
    pub(crate) index: GlobalOrder,
    /// The collations: names, stacks and their reservations.
    pub(crate) colls: Collations,
    /// Attempts of queued jobs that have had any (job id -> attempts).
    pub(crate) attempts: IdMap<JobId, u32>,
    /// Nonces that differ from their reservation's tie (node id -> nonce).
    pub(crate) nonces: IdMap<NodeId, u64>,
    /// Next sequence number (ties of ordinary reservations, and nonces). > 0.
    pub(crate) next_seq: i64,
    /// Tie of the last reservation put at the very front. <= 0.
    pub(crate) front_tie: i64,
    /// Sum of payload lengths of queued jobs (for memory accounting).
    pub(crate) payload_bytes: usize,
    /// Jobs handed out and not yet acked/nacked/expired (see worker.rs).
    pub(crate) work: super::work::Work,
    /// Closed gates and the jobs they hold (`gates.rs`, `held.rs`).
    pub(crate) gates: Gates,
    /// Recent submissions per collation, for auto delays (`window.rs`).
    pub(crate) window: Window,
    /// Running counts and the eligibility index of caps (`caps.rs`).
    pub(crate) caps: Caps,
}

/// What a put (ENQUEUE, IMMEDIATE, REENQUEUE) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Put {
    /// A new job (else an existing one was updated).
    pub created: bool,
    /// The automatic delay given to a new collation job (ms).
    pub delay: i64,
    /// The job is held behind a closed gate.
    pub held: bool,
}

/// A job just taken from the front of the queue: its record, removed, with
/// what the reservation it had said. It still holds its collation reference.
pub(crate) struct Popped {
    pub job: Job,
    pub attempts: u32,
    pub coll: Option<CollId>,
    pub nonce: u64,
    pub release: i64,
    pub immediate: bool,
}

pub(crate) use super::config::key_hash;

fn corrupt(msg: &str) -> QueueError {
    QueueError::Corrupt(msg.to_string())
}

impl Queue {
    pub fn new(order: Order) -> Self {
        Queue::with_settings(Settings {
            order,
            ..Settings::default()
        })
    }

    /// A new, empty queue with these settings (validated by the caller).
    pub fn with_settings(settings: Settings) -> Self {
        let mut caps = Caps::default();
        caps.set_max(
            settings.max_running,
            std::iter::empty(),
            std::iter::empty(),
            std::iter::empty(),
        );
        Queue {
            settings,
            jobs: Slab::default(),
            by_key: IdTable::default(),
            index: GlobalOrder::new(),
            colls: Collations::default(),
            attempts: IdMap::default(),
            nonces: IdMap::default(),
            next_seq: 1,
            front_tie: 0,
            payload_bytes: 0,
            work: Default::default(),
            gates: Gates::default(),
            window: Window::default(),
            caps,
        }
    }

    pub fn order(&self) -> Order {
        self.settings.order
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Change the queue's settings (`ORCA.SETTINGS`). Jobs already queued
    /// keep their places; a lower dead or result bound forgets the excess
    /// now; a new running cap rebuilds the eligibility index (O((singles +
    /// collations) log n)); turning the auto delay off forgets the window.
    pub fn set_settings(&mut self, new: Settings) -> Result<(), QueueError> {
        new.validate()?;
        let old = self.settings;
        self.settings = new;
        if new.max_running != old.max_running {
            self.rebuild_caps();
        }
        if !new.autodelay.on() {
            for c in self.window.clear() {
                self.colls.release(c);
            }
        } else {
            self.window.set_window(new.autodelay.window);
        }
        self.trim_dead();
        self.trim_results();
        Ok(())
    }

    /// Rebuild the eligibility index for the current cap.
    pub(crate) fn rebuild_caps(&mut self) {
        let max = self.settings.max_running;
        let singles: Vec<(ResKey, NodeId)> = self.singles().map(|(_, n)| (self.rk(n), n)).collect();
        let heads: Vec<(CollId, (ResKey, NodeId))> = self
            .colls
            .with_stack()
            .filter_map(|c| self.colls.first_res(c).map(|n| (c, (self.rk(n), n))))
            .collect();
        // Read by set_max only when a cap is set: no pass over the leases otherwise.
        let leased = self.work.leases().filter_map(|(_, l)| l.job.coll_id());
        self.caps
            .set_max(max, singles.into_iter(), heads.into_iter(), leased);
    }

    /// Keep collation `c`'s entry in the eligibility index right.
    pub(crate) fn sync_cap(&mut self, c: CollId) {
        if self.caps.on() {
            let first = self.colls.first_res(c).map(|n| (self.rk(n), n));
            self.caps.sync(c, first);
        }
    }

    /// Does the queued job under `key` wait only because its collation is
    /// at the running cap?
    pub fn waits_for_cap(&self, key: &JobKey) -> bool {
        self.caps.on()
            && self.job_id(key).is_some_and(|j| {
                let job = &self.jobs[j];
                job.collated() && job.coll_id().is_some_and(|c| self.caps.capped(c))
            })
    }

    /// Collations with leased jobs, most first: (name, running count).
    pub fn running_by_collation(&self, limit: usize) -> Vec<(Cow<'_, str>, u32)> {
        let busiest = if self.caps.on() {
            self.caps.busiest(limit)
        } else {
            // Without a cap nothing keeps counts: count the leases.
            busiest_of(self.running_counts().into_iter(), limit)
        };
        busiest
            .into_iter()
            .map(|(c, n)| (self.name_of(c), n))
            .collect()
    }

    /// Did a capped collation become eligible since the last call (blocked
    /// pops should be woken)?
    pub fn take_woken(&mut self) -> bool {
        self.caps.take_woken()
    }

    /// Change the collation order. Jobs already queued keep their places;
    /// the order decides where new jobs enter their collation's stack.
    pub fn set_order(&mut self, order: Order) {
        self.settings.order = order;
    }

    /// Is a job queued under `key`?
    pub fn contains(&self, key: &JobKey) -> bool {
        self.job_id(key).is_some()
    }

    /// Number of queued jobs (held jobs not included).
    pub fn len(&self) -> usize {
        self.jobs.len() - self.gates.held_count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Collations with queued jobs in their stack.
    pub fn collation_count(&self) -> usize {
        self.colls.active()
    }

    /// Jobs in collation stacks.
    pub(crate) fn stacked_jobs(&self) -> usize {
        self.colls.stacked()
    }

    /// Is a queued job placed as immediate?
    pub fn is_immediate(&self, key: &JobKey) -> bool {
        self.job_id(key).is_some_and(|j| self.job_immediate(j))
    }

    pub(crate) fn job_id(&self, key: &JobKey) -> Option<JobId> {
        let jobs = &self.jobs;
        self.by_key.find(key_hash(key), |id| {
            jobs.get(id).is_some_and(|j| j.key == *key)
        })
    }

    pub(crate) fn coll_id(&self, name: &str) -> Option<CollId> {
        self.colls.find(name)
    }

    /// Collation `c`'s name.
    pub(crate) fn name_of(&self, c: CollId) -> Cow<'_, str> {
        self.colls.name_of(c)
    }

    /// Is `name` a collation with jobs in its stack?
    pub(crate) fn has_collation(&self, name: &str) -> bool {
        self.colls.has_stack(name)
    }

    fn job_immediate(&self, j: JobId) -> bool {
        let job = &self.jobs[j];
        !job.collated() && !job.held() && self.index.aux(job.link.as_reservation()).immediate()
    }

    pub(crate) fn job_attempts(&self, j: JobId) -> u32 {
        self.attempts.get(&j).copied().unwrap_or(0)
    }

    pub(crate) fn coll_name(&self, job: &Job) -> Option<Cow<'_, str>> {
        job.coll_id().map(|c| self.name_of(c))
    }

    /// The reservation key of node `n`.
    pub(crate) fn rk(&self, n: NodeId) -> ResKey {
        (*self.index.key(n)).into()
    }

    pub(crate) fn nonce_of(&self, n: NodeId) -> u64 {
        match self.nonces.get(&n) {
            Some(v) => *v,
            None => self.rk(n).tie as u64,
        }
    }

    /// Refuse an operation (before it changes anything) when the sequence
    /// counters are near their limit, so every queue stays reloadable.
    pub(crate) fn seq_room(&self) -> Result<(), QueueError> {
        if self.next_seq > SEQ_LIMIT - 16 || self.front_tie < -SEQ_LIMIT + 16 {
            return Err(QueueError::Corrupt("sequence numbers exhausted".into()));
        }
        Ok(())
    }

    /// Refuse (before changing anything) when another job, reservation and
    /// collation could not be stored.
    pub(crate) fn room(&self) -> Result<(), QueueError> {
        if self.jobs.has_room() && self.index.has_room() && self.colls.has_room() {
            Ok(())
        } else {
            Err(QueueError::Full)
        }
    }

    pub(crate) fn alloc_seq(&mut self) -> i64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// Store a new job record (not placed yet) naming collation `coll`.
    pub(crate) fn new_job(
        &mut self,
        key: JobKey,
        payload: Box<[u8]>,
        created_at: i64,
        attempts: u32,
        collation: Option<&str>,
    ) -> Result<JobId, QueueError> {
        let coll = match collation {
            Some(name) => Some(self.colls.acquire(name)?),
            None => None,
        };
        self.new_job_ref(key, payload, created_at, attempts, coll)
    }

    /// `new_job` for a collation reference the caller already holds (if
    /// any); the reference moves to the job, or is released if the job
    /// cannot be stored.
    pub(crate) fn new_job_ref(
        &mut self,
        key: JobKey,
        payload: Box<[u8]>,
        created_at: i64,
        attempts: u32,
        coll: Option<CollId>,
    ) -> Result<JobId, QueueError> {
        let len = payload.len();
        let Some(j) = self.jobs.insert(Job {
            key,
            payload,
            created_at,
            skey: 0,
            coll: CollRef::new(coll),
            link: JobLink::NONE,
        }) else {
            if let Some(c) = coll {
                self.colls.release(c);
            }
            return Err(QueueError::Full);
        };
        let jobs = &self.jobs;
        self.by_key.insert_with(key_hash(&key), j, || {
            jobs.iter().map(|(id, job)| (key_hash(&job.key), id))
        });
        if attempts > 0 {
            self.attempts.insert(j, attempts);
        }
        self.payload_bytes += len;
        Ok(j)
    }

    /// Remove a job record that holds no reservation any more (and is not
    /// held). Returns it with its attempts and its collation id, whose
    /// reference the caller now holds.
    pub(crate) fn take_job(&mut self, j: JobId) -> Result<(Job, u32, Option<CollId>), QueueError> {
        let key = self.jobs.get(j).ok_or_else(|| corrupt("job missing"))?.key;
        let jobs = &self.jobs;
        self.by_key
            .remove(key_hash(&key), j, |id| key_hash(&jobs[id].key));
        let job = self.jobs.remove(j).ok_or_else(|| corrupt("job missing"))?;
        let attempts = self.attempts.remove(&j).unwrap_or(0);
        self.payload_bytes -= job.payload.len();
        let coll = job.coll_id();
        Ok((job, attempts, coll))
    }

    /// `take_job`, releasing the collation reference. Returns the job with
    /// its attempts and collation name.
    pub(crate) fn drop_job(&mut self, j: JobId) -> Result<(Job, u32, Option<String>), QueueError> {
        let (job, attempts, coll) = self.take_job(j)?;
        let name = coll.map(|c| {
            let name = self.name_of(c).into_owned();
            self.colls.release(c);
            name
        });
        Ok((job, attempts, name))
    }

    pub(crate) fn replace_payload(&mut self, j: JobId, payload: &[u8]) {
        let job = &mut self.jobs[j];
        self.payload_bytes = self.payload_bytes - job.payload.len() + payload.len();
        job.payload = payload.into();
    }

    /// Add a reservation node (a single job's goes into the eligibility
    /// index too; a collation's is synced by the caller once paired).
    fn add_res(
        &mut self,
        rk: ResKey,
        owner: Owner,
        link: ResLink,
        nonce: u64,
    ) -> Result<NodeId, QueueError> {
        let n = self
            .index
            .insert(rk.into(), owner, link)
            .ok_or_else(|| corrupt("duplicate reservation"))?;
        if nonce != rk.tie as u64 {
            self.nonces.insert(n, nonce);
        }
        if owner.as_job().is_some() {
            self.caps.single(rk, n, true);
        }
        Ok(n)
    }

    fn remove_res(&mut self, n: NodeId) {
        if self.index.val(n).as_job().is_some() {
            self.caps.single(self.rk(n), n, false);
        }
        self.index.remove(n);
        self.nonces.remove(&n);
    }

    /// Give job `j` a single reservation of its own.
    pub(crate) fn place_single(
        &mut self,
        j: JobId,
        rk: ResKey,
        nonce: u64,
        immediate: bool,
    ) -> Result<(), QueueError> {
        let n = self.add_res(rk, Owner::job(j), ResLink::single(immediate), nonce)?;
        let job = &mut self.jobs[j];
        job.link = JobLink::reservation(n);
        job.skey = 0;
        job.coll.set_collated(false);
        Ok(())
    }

    /// Give job `j` a single reservation at `score`, in arrival order among
    /// equal scores.
    fn add_single(&mut self, j: JobId, score: i64, immediate: bool) -> Result<(), QueueError> {
        let seq = self.alloc_seq();
        self.place_single(j, ResKey { score, tie: seq }, seq as u64, immediate)
    }

    /// Give job `j` an immediate reservation before every other one.
    fn add_front(&mut self, j: JobId, now: i64) -> Result<(), QueueError> {
        let score = match self.index.first() {
            Some(first) => self.rk(first).score.min(now),
            None => now,
        };
        self.front_tie -= 1;
        let nonce = self.alloc_seq() as u64;
        let tie = self.front_tie;
        self.place_single(j, ResKey { score, tie }, nonce, true)
    }

    /// Put job `j` (its `skey` set) into collation `c`: the job into the
    /// stack by its stack key, and reservation `rk` into the collation's
    /// reservations. The pairing is positional, so this pairs whatever job
    /// lands at the reservation's rank with it.
    pub(crate) fn collate(
        &mut self,
        c: CollId,
        j: JobId,
        rk: ResKey,
        nonce: u64,
    ) -> Result<(), QueueError> {
        let n = self.add_res(rk, Owner::collation(c), ResLink::NONE, nonce)?;
        self.colls.add_res(c, n, &mut self.index)?;
        self.colls.push(c, j, &mut self.jobs)?;
        self.colls.settle(c, &mut self.jobs, &mut self.index)?;
        self.sync_cap(c);
        Ok(())
    }

    /// Take a collated job out of its collation: out of the stack, and the
    /// reservation paired with it out of the collation and the global order.
    /// Every other job of the collation keeps its pairing. The job keeps
    /// naming the collation.
    pub(crate) fn detach_collated(&mut self, j: JobId) -> Result<(), QueueError> {
        let c = self.stack_coll(j)?;
        let k = self.colls.unlink(c, j, &mut self.jobs)?;
        let n = self.colls.unlink_res_at(c, k, &mut self.index)?;
        self.remove_res(n);
        self.colls.settle(c, &mut self.jobs, &mut self.index)?;
        self.sync_cap(c);
        Ok(())
    }

    /// Remove whatever reservation the job holds (single or paired), or
    /// take a held job out of its gate.
    pub(crate) fn detach(&mut self, j: JobId) -> Result<(), QueueError> {
        let job = &self.jobs[j];
        if job.collated() {
            self.detach_collated(j)
        } else if job.held() {
            self.unhold(j)
                .map(|_| ())
                .ok_or_else(|| corrupt("held job missing from its gate"))
        } else {
            let n = job.link.as_reservation();
            self.jobs[j].link = JobLink::NONE;
            self.remove_res(n);
            Ok(())
        }
    }

    /// The reservation node job `j` holds or is paired with.
    pub(crate) fn reservation_node(&self, j: JobId) -> Result<NodeId, QueueError> {
        let job = &self.jobs[j];
        if job.collated() {
            let c = self.stack_coll(j)?;
            let k = self.colls.position(c, j, &self.jobs)?;
            self.colls.res_at(c, k, &self.index)
        } else if job.held() {
            Err(QueueError::NotQueued)
        } else {
            Ok(job.link.as_reservation())
        }
    }

    /// The collation in whose stack job `j` is.
    fn stack_coll(&self, j: JobId) -> Result<CollId, QueueError> {
        self.jobs[j]
            .coll_id()
            .ok_or_else(|| corrupt("a stacked job names no collation"))
    }

    /// The stack key of a job arriving now in a collation stack.
    pub(crate) fn arrival_skey(&self, seq: i64) -> i64 {
        match self.settings.order {
            Order::Lifo => -seq,
            Order::Fifo => seq,
        }
    }

    /// `ORCA.ENQUEUE`: create-or-update. A new job gets a reservation at
    /// `now + priority` (+ the auto delay for a collation job, when the
    /// queue has one) and enters its collation's stack (front for LIFO,
    /// back for FIFO); if its config names a closed gate it is held instead.
    /// An existing job (queued or held) only has its payload replaced.
    pub fn enqueue(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        now: i64,
    ) -> Result<(JobInfo<'_>, Put), QueueError> {
        let key = cfg.job_key;
        if !valid_time(now) {
            return Err(QueueError::TimeOverflow);
        }
        if let Some(j) = self.job_id(&key) {
            self.replace_payload(j, payload);
            let held = self.jobs[j].held();
            let put = Put {
                created: false,
                delay: 0,
                held,
            };
            return Ok((self.info_of(j)?, put));
        }
        self.seq_room()?;
        self.room()?;
        let coll = cfg.collation.as_deref();
        let auto = self.settings.autodelay;
        let delay = match coll {
            Some(name) if auto.on() => self
                .colls
                .find(name)
                .map_or(0, |c| auto.delay(self.window.count(c, now, auto.window))),
            _ => 0,
        };
        let priority = cfg
            .priority
            .checked_add(delay)
            .filter(|p| valid_time(*p))
            .ok_or(QueueError::TimeOverflow)?;
        let release = now
            .checked_add(priority)
            .filter(|t| valid_time(*t))
            .ok_or(QueueError::TimeOverflow)?;
        let gate = cfg
            .gate
            .as_deref()
            .and_then(|g| self.gates.closed(g.as_bytes()));
        let j = self.new_job(key, payload.into(), now, 0, coll)?;
        let seq = self.alloc_seq();
        let c = self.jobs[j].coll_id();
        let rk = ResKey {
            score: release,
            tie: seq,
        };
        match (gate, c) {
            (Some(g), _) => {
                self.jobs[j].skey = if c.is_some() {
                    self.arrival_skey(seq)
                } else {
                    seq
                };
                self.hold(j, g, seq, priority, false);
            }
            (None, None) => self.place_single(j, rk, seq as u64, false)?,
            (None, Some(c)) => {
                self.jobs[j].skey = self.arrival_skey(seq);
                self.collate(c, j, rk, seq as u64)?;
            }
        }
        if let (Some(c), true) = (c, auto.on()) {
            if self.window.record(c, now, auto.window) {
                self.colls.add_ref(c)?;
            }
        }
        self.supersede(&key);
        let put = Put {
            created: true,
            delay,
            held: gate.is_some(),
        };
        Ok((self.info_of(j)?, put))
    }

    /// `ORCA.IMMEDIATE` (arrival = created = now) and `ORCA.REENQUEUE`
    /// (arrival = created = the job's original arrival time): create-or-update
    /// as an immediate job with a reservation at `arrival`. A waiting job that
    /// is not immediate is upgraded: the reservation paired with it is removed
    /// and an immediate one at `arrival` added. A held job becomes immediate
    /// where it waits (its arrival kept); a new job naming a closed gate is
    /// held.
    pub fn put_immediate(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        arrival: i64,
    ) -> Result<(JobInfo<'_>, Put), QueueError> {
        if !valid_time(arrival) {
            return Err(QueueError::TimeOverflow);
        }
        self.seq_room()?;
        self.room()?;
        let key = cfg.job_key;
        if let Some(j) = self.job_id(&key) {
            let held = self.jobs[j].held();
            if held {
                self.hold_as_immediate(j);
            } else if !self.job_immediate(j) {
                self.detach(j)?;
                self.add_single(j, arrival, true)?;
            }
            self.replace_payload(j, payload);
            let put = Put {
                created: false,
                delay: 0,
                held,
            };
            return Ok((self.info_of(j)?, put));
        }
        self.supersede(&key);
        let gate = cfg
            .gate
            .as_deref()
            .and_then(|g| self.gates.closed(g.as_bytes()));
        let j = self.new_job(key, payload.into(), arrival, 0, cfg.collation.as_deref())?;
        match gate {
            Some(g) => {
                let seq = self.alloc_seq();
                self.jobs[j].skey = seq;
                self.hold(j, g, seq, 0, true);
            }
            None => self.add_single(j, arrival, true)?,
        }
        let put = Put {
            created: true,
            delay: 0,
            held: gate.is_some(),
        };
        Ok((self.info_of(j)?, put))
    }

    /// Queue a job that comes back from a lease or a retry (worker.rs): a
    /// single reservation at `score`. `coll` is a collation reference the
    /// caller holds (if any); it moves to the job.
    pub(crate) fn insert_single(
        &mut self,
        job: LoadedJob,
        coll: Option<CollId>,
        score: i64,
        immediate: bool,
    ) -> Result<(), QueueError> {
        if let Err(e) = self.room() {
            if let Some(c) = coll {
                self.colls.release(c);
            }
            return Err(e);
        }
        let j = self.new_job_ref(job.key, job.payload, job.created_at, job.attempts, coll)?;
        self.add_single(j, score, immediate)
    }

    /// Why a key that is not queued cannot be moved: it is running, waiting
    /// for a retry, dead, held, or unknown.
    fn not_movable(&self, key: &JobKey) -> QueueError {
        if let Some(j) = self.job_id(key) {
            if let Some(g) = self.held_gate(j) {
                return QueueError::Held(String::from_utf8_lossy(g).into_owned());
            }
        }
        if self.work.has_lease_on(key) {
            QueueError::Leased
        } else if let Some(d) = self.work.delayed(key) {
            QueueError::Delayed(d.retry_at)
        } else if self.work.is_dead(key) {
            QueueError::Dead
        } else {
            QueueError::NoSuchJob
        }
    }

    /// `ORCA.MOVE`.
    pub fn move_job(
        &mut self,
        key: &JobKey,
        how: Move,
        now: i64,
    ) -> Result<JobInfo<'_>, QueueError> {
        let j = match self.job_id(key) {
            Some(j) if !self.jobs[j].held() => j,
            _ => return Err(self.not_movable(key)),
        };
        if self.job_immediate(j) {
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
                self.detach(j)?;
                self.add_front(j, now)?;
            }
            Move::Delay { buffer } => {
                let last = match self.index.last() {
                    Some(n) => self.rk(n).score,
                    None => now,
                };
                let score = last
                    .checked_add(buffer)
                    .filter(|t| (0..=MAX_TIME).contains(t))
                    .ok_or(QueueError::TimeOverflow)?;
                if self.jobs[j].collated() {
                    let c = self.stack_coll(j)?;
                    self.detach_collated(j)?;
                    // The back of the stack: a key above every key given so far.
                    let seq = self.alloc_seq();
                    self.jobs[j].skey = seq;
                    self.collate(c, j, ResKey { score, tie: seq }, seq as u64)?;
                } else {
                    self.detach(j)?;
                    self.add_single(j, score, false)?;
                }
            }
        }
        self.info_of(j)
    }

    /// `ORCA.DELETE`: remove the job and the reservation paired with it.
    pub fn delete(&mut self, key: &JobKey) -> Result<bool, QueueError> {
        let Some(j) = self.job_id(key) else {
            return Ok(false);
        };
        self.detach(j)?;
        self.drop_job(j)?;
        Ok(true)
    }

    /// `ORCA.POP`: the job of the lowest reservation (among those the
    /// running cap lets out), removed from the queue. Priority orders the
    /// queue; it does not hold jobs back, so the lowest reservation is taken
    /// even when its release time is in the future.
    pub fn pop(&mut self) -> Result<Option<JobInfo<'static>>, QueueError> {
        Ok(self.take_next()?.map(|p| self.finish_pop(p)))
    }

    /// Take the job the next pop hands out: this is a delivery, so its
    /// attempts count one more.
    pub(crate) fn take_next(&mut self) -> Result<Option<Popped>, QueueError> {
        let first = if self.caps.on() {
            self.caps.first()
        } else {
            self.index.first()
        };
        let mut p = first.map(|n| self.take_node(n)).transpose()?;
        if let Some(p) = p.as_mut() {
            p.attempts = p.attempts.saturating_add(1);
        }
        Ok(p)
    }

    /// Take reservation `n` and the job it serves out of the queue, with
    /// the attempts it had (not a delivery by itself: lifetimes take jobs
    /// out this way too).
    pub(crate) fn take_node(&mut self, n: NodeId) -> Result<Popped, QueueError> {
        let owner = self.index.val(n);
        let nonce = self.nonce_of(n);
        let rk = self.rk(n);
        let (j, immediate) = match owner.get() {
            // The collation's earliest reservation, paired with its stack's
            // front: detaching the front takes both (O(1) small, O(log m)
            // large).
            OwnerRef::Collation(c) => {
                let j = self
                    .colls
                    .front(c)
                    .ok_or_else(|| corrupt("reservation of unknown collation"))?;
                if self.colls.first_res(c) != Some(n) {
                    return Err(corrupt("collation out of step with the order"));
                }
                self.detach_collated(j)?;
                (j, false)
            }
            OwnerRef::Job(j) => {
                let immediate = self.index.aux(n).immediate();
                self.remove_res(n);
                (j, immediate)
            }
        };
        let (job, attempts, coll) = self.take_job(j)?;
        Ok(Popped {
            job,
            attempts,
            coll,
            nonce,
            release: rk.score,
            immediate,
        })
    }

    /// A popped job handed out for good (`LEASE 0`): its collation
    /// reference goes; the reply owns its payload.
    pub(crate) fn finish_pop(&mut self, p: Popped) -> JobInfo<'static> {
        let collation = p.coll.map(|c| {
            let name = self.name_of(c).into_owned();
            self.colls.release(c);
            Cow::Owned(name)
        });
        JobInfo {
            key: p.job.key,
            collation,
            immediate: p.immediate,
            nonce: p.nonce,
            created_at: p.job.created_at,
            release_at: p.release,
            attempts: p.attempts,
            payload: Cow::Owned(p.job.payload.into_vec()),
        }
    }

    /// A popped job as a parked one (with the collation reference).
    pub(crate) fn parked_from(p: Popped) -> (JobKey, Parked) {
        (
            p.job.key,
            Parked {
                payload: p.job.payload,
                created_at: p.job.created_at,
                attempts: p.attempts,
                coll: p.coll,
                immediate: p.immediate,
            },
        )
    }

    /// The reservation a job holds or is paired with, and its nonce.
    pub fn reservation_of(&self, key: &JobKey) -> Result<(ResKey, u64), QueueError> {
        let j = self.job_id(key).ok_or(QueueError::NoSuchJob)?;
        let n = self.reservation_node(j)?;
        Ok((self.rk(n), self.nonce_of(n)))
    }

    /// Job `j` as clients see it, given its reservation node.
    pub(crate) fn info_at(&self, j: JobId, n: NodeId) -> JobInfo<'_> {
        let job = &self.jobs[j];
        JobInfo {
            key: job.key,
            collation: self.coll_name(job),
            immediate: !job.collated() && self.index.aux(n).immediate(),
            nonce: self.nonce_of(n),
            created_at: job.created_at,
            release_at: self.rk(n).score,
            attempts: self.job_attempts(j),
            payload: Cow::Borrowed(&job.payload),
        }
    }

    fn info_of(&self, j: JobId) -> Result<JobInfo<'_>, QueueError> {
        if let Some(info) = self.held_info(j) {
            return Ok(info);
        }
        Ok(self.info_at(j, self.reservation_node(j)?))
    }

    /// A queued job as clients see it.
    pub fn info(&self, key: &JobKey) -> Result<JobInfo<'_>, QueueError> {
        self.info_of(self.job_id(key).ok_or(QueueError::NoSuchJob)?)
    }

    /// 1-based position of a queued job in pop order (that of the
    /// reservation it holds or is paired with).
    pub fn position(&self, key: &JobKey) -> Result<usize, QueueError> {
        let j = self.job_id(key).ok_or(QueueError::NoSuchJob)?;
        let n = self.reservation_node(j)?;
        self.index
            .rank(n)
            .map(|r| r + 1)
            .ok_or_else(|| corrupt("reservation missing from the order"))
    }

    /// Walks the global order and names the job each reservation serves:
    /// `(node, job)` pairs in pop order from position `start`. A collation
    /// met first mid-way is located once (its reservation's rank, then the
    /// job at that rank: O(m) small, O(log m) large), then followed along
    /// its stack.
    pub(crate) fn walk_from(&self, start: usize) -> impl Iterator<Item = (NodeId, JobId)> + '_ {
        // Per collation: the next job of its stack and its position.
        let mut cursor: IdMap<CollId, (JobId, usize)> = IdMap::default();
        self.index.iter_from(start).filter_map(move |n| {
            let c = match self.index.val(n).get() {
                OwnerRef::Job(j) => return Some((n, j)),
                OwnerRef::Collation(c) => c,
            };
            let (j, k) = match cursor.get(&c) {
                Some(&at) => at,
                None => {
                    let k = self.colls.res_rank(c, n, &self.index).ok()?;
                    (self.colls.job_at(c, k, &self.jobs)?, k)
                }
            };
            let next = if self.colls.is_large(c) {
                JobId::or_nil(self.colls.job_at(c, k + 1, &self.jobs))
            } else {
                self.jobs[j].link.as_next_job()
            };
            cursor.insert(c, (next, k + 1));
            j.some().map(|j| (n, j))
        })
    }

    /// Job keys in pop order (linear; for tests, checks and listings).
    pub fn pop_order(&self) -> Vec<JobKey> {
        self.walk_from(0).map(|(_, j)| self.jobs[j].key).collect()
    }

    /// Rough heap footprint in bytes, for `MEMORY USAGE`.
    pub fn mem_usage(&self) -> usize {
        use std::mem::size_of;
        let side = (self.attempts.capacity() + self.nonces.capacity()) * 24;
        size_of::<Queue>()
            + self.jobs.heap_bytes()
            + self.by_key.heap_bytes()
            + self.index.heap_bytes()
            + self.colls.heap_bytes()
            + side
            + self.payload_bytes
            + self.work.heap_bytes()
            + self.gates.heap_bytes()
            + self.window.heap_bytes()
            + self.caps.heap_bytes()
    }

    /// Add a loaded single job with its reservation (codec, import). Refused
    /// with nothing changed if the key or the reservation is taken.
    pub(crate) fn load_single(
        &mut self,
        job: LoadedJob,
        collation: Option<&str>,
        rk: ResKey,
        nonce: u64,
        immediate: bool,
    ) -> Result<(), QueueError> {
        if self.contains(&job.key) {
            return Err(corrupt("duplicate job key"));
        }
        if self.index.contains(&rk.into()) {
            return Err(corrupt("duplicate reservation"));
        }
        self.room()?;
        let j = self.new_job(
            job.key,
            job.payload,
            job.created_at,
            job.attempts,
            collation,
        )?;
        self.place_single(j, rk, nonce, immediate)
    }

    /// Add a loaded collation: its jobs (with strictly increasing stack
    /// keys, in stack order) and its reservations (any order). Refused with
    /// nothing changed if the collation has jobs here already, or a key or
    /// reservation is taken or repeated.
    pub(crate) fn load_collation(
        &mut self,
        name: &str,
        jobs: Vec<LoadedJob>,
        mut res: Vec<(ResKey, u64)>,
    ) -> Result<(), QueueError> {
        if jobs.is_empty() || jobs.len() != res.len() {
            return Err(corrupt("collation jobs and reservations do not pair"));
        }
        if self.has_collation(name) {
            return Err(corrupt("duplicate collation"));
        }
        if jobs.windows(2).any(|w| w[0].skey >= w[1].skey) {
            return Err(corrupt("collation stack keys out of order"));
        }
        let mut keys = std::collections::HashSet::with_capacity(jobs.len());
        if jobs
            .iter()
            .any(|j| !keys.insert(j.key) || self.contains(&j.key))
        {
            return Err(corrupt("duplicate job key"));
        }
        res.sort_unstable();
        if res.windows(2).any(|w| w[0].0 == w[1].0)
            || res.iter().any(|r| self.index.contains(&r.0.into()))
        {
            return Err(corrupt("duplicate reservation"));
        }
        if self.jobs.len() + jobs.len() >= super::containers::slab::MAX_ID as usize
            || self.index.len() + res.len() >= super::containers::slab::MAX_ID as usize
        {
            return Err(QueueError::Full);
        }
        self.room()?;
        let mut c = None;
        for job in jobs {
            let j = self.new_job(
                job.key,
                job.payload,
                job.created_at,
                job.attempts,
                Some(name),
            )?;
            let cj = self.jobs[j]
                .coll_id()
                .ok_or_else(|| corrupt("a loaded job lost its collation"))?;
            c = Some(cj);
            self.jobs[j].skey = job.skey;
            self.colls.push(cj, j, &mut self.jobs)?;
        }
        let c = c.ok_or_else(|| corrupt("collation jobs and reservations do not pair"))?;
        for (rk, nonce) in res {
            let n = self.add_res(rk, Owner::collation(c), ResLink::NONE, nonce)?;
            self.colls.add_res(c, n, &mut self.index)?;
        }
        self.colls.settle(c, &mut self.jobs, &mut self.index)
    }

    /// Single jobs in reservation order: (job id, its node).
    pub(crate) fn singles(&self) -> impl Iterator<Item = (JobId, NodeId)> + '_ {
        self.index
            .iter()
            .filter_map(|n| self.index.val(n).as_job().map(|j| (j, n)))
    }

    /// Ids of the collations with a stack, by name.
    pub(crate) fn collations_by_name(&self) -> Vec<CollId> {
        let ids: Vec<CollId> = self.colls.with_stack().collect();
        let mut named: Vec<(Cow<'_, str>, CollId)> =
            ids.into_iter().map(|c| (self.name_of(c), c)).collect();
        named.sort_unstable();
        named.into_iter().map(|(_, c)| c).collect()
    }

    /// Job ids of collation `c`'s stack, front first.
    pub(crate) fn stack(&self, c: CollId) -> impl Iterator<Item = JobId> + '_ {
        self.colls.stack(c, &self.jobs)
    }

    /// Reservation nodes of collation `c`, in key order.
    pub(crate) fn coll_reservations(&self, c: CollId) -> impl Iterator<Item = NodeId> + '_ {
        self.colls.reservations(c, &self.index)
    }
}

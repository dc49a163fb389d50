//! The records: every job waiting in the queue, every reservation of the
//! global order, and the collations that pair them (docs/design.md, "The
//! model" and "Memory"). One part, with its data behind private fields:
//!
//! - the jobs (`Job` records in a slab, found by orca key through `by_key`),
//!   their attempts and the sum of their payload bytes;
//! - the global order of reservations (`order`: a treap of 36-byte nodes,
//!   by (score, tie)), with the nonces that differ from their tie;
//! - the collations (`Collations`: names, stacks, reservation lists), whose
//!   k-th stacked job pairs with their k-th earliest reservation;
//! - the sequence counters every tie, nonce, stack key and token comes from.
//!
//! Its methods keep all of these in step: a job and its key, a reservation
//! and its owner (a single job or a collation), a collation's stack and its
//! reservations, each count and the records it counts (`check.rs` verifies
//! it). The rest of the core sees jobs by `JobId` and reservations by
//! `NodeId`, reads them through `job`, `rk`, `nonce_of`, and changes them
//! only through the operations here:
//!
//! - `mod.rs`: the jobs (store, find, take), the counters, collation names
//!   and references;
//! - `order.rs`: the global order (reading it, walking it in pop order) and
//!   `OrderWatch`, how a part that follows it (the running caps) is told of
//!   every change;
//! - `pairing.rs`: placing a job (single, at the front, into its
//!   collation), detaching it, taking the front (the pairing rule);
//! - `load.rs`: adding whole units (a single job with its reservation, a
//!   collation) from an encoding or another queue;
//! - `relocate.rs`: moving records while their slabs shrink;
//! - `check.rs`: the records' invariants (`ORCA.CHECK`).
//!
//! Held jobs (behind a closed gate) are records too, flagged held, with no
//! reservation; the gate's side of them is `Gates` (`held.rs`).

use std::borrow::Cow;

mod check;
mod load;
mod order;
mod pairing;
mod relocate;
#[cfg(test)]
mod tests;

pub(crate) use order::OrderWatch;
pub(crate) use pairing::Popped;

use super::collation::Collations;
use super::config::{key_hash, JobKey};
use super::containers::idmap::IdMap;
use super::containers::{IdTable, Slab};
use super::error::QueueError;
use super::ids::{CollId, JobId, NodeId};
use super::job::{CollRef, Job, JobInfo, JobLink};
use super::limits::SEQ_LIMIT;
use super::reservation::GlobalOrder;

fn corrupt(msg: &str) -> QueueError {
    QueueError::Corrupt(msg.to_string())
}

#[derive(Clone, Debug)]
pub(crate) struct Records {
    jobs: Slab<Job, JobId>,
    /// Job ids by orca key.
    by_key: IdTable<JobId>,
    /// The global order of reservations.
    order: GlobalOrder,
    /// The collations: names, stacks and their reservations.
    colls: Collations,
    /// Attempts of queued jobs that have had any (job id -> attempts).
    attempts: IdMap<JobId, u32>,
    /// Nonces that differ from their reservation's tie (node id -> nonce).
    nonces: IdMap<NodeId, u64>,
    /// Next sequence number (ties of ordinary reservations, nonces, stack
    /// keys, lease tokens, dead letters' order). > 0.
    next_seq: i64,
    /// Tie of the last reservation put at the very front. <= 0.
    front_tie: i64,
    /// Sum of payload lengths of the jobs (for memory accounting).
    payload_bytes: usize,
}

impl Default for Records {
    fn default() -> Self {
        Records {
            jobs: Slab::default(),
            by_key: IdTable::default(),
            order: GlobalOrder::new(),
            colls: Collations::default(),
            attempts: IdMap::default(),
            nonces: IdMap::default(),
            next_seq: 1,
            front_tie: 0,
            payload_bytes: 0,
        }
    }
}

impl Records {
    // ------------------------------------------------------------ counters

    /// The next sequence number (every number handed out is below it).
    pub fn next_seq(&self) -> i64 {
        self.next_seq
    }

    /// The tie of the last front reservation (every front tie is >= it).
    pub fn front_tie(&self) -> i64 {
        self.front_tie
    }

    /// Set both counters (a loaded header, or a merge: the caller keeps
    /// them ahead of everything loaded, within their ranges).
    pub fn set_counters(&mut self, next_seq: i64, front_tie: i64) {
        self.next_seq = next_seq;
        self.front_tie = front_tie;
    }

    /// Take the next sequence number.
    pub fn alloc_seq(&mut self) -> i64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// Refuse an operation (before it changes anything) when the sequence
    /// counters are near their limit, so every queue stays reloadable.
    pub fn seq_room(&self) -> Result<(), QueueError> {
        if self.next_seq > SEQ_LIMIT - 16 || self.front_tie < -SEQ_LIMIT + 16 {
            return Err(QueueError::Corrupt("sequence numbers exhausted".into()));
        }
        Ok(())
    }

    /// `seq_room`, and room for `count` more numbers below the limit.
    pub fn seq_room_for(&self, count: usize) -> Result<(), QueueError> {
        self.seq_room()?;
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        if self.next_seq.saturating_add(count) > SEQ_LIMIT {
            return Err(QueueError::Corrupt("sequence numbers exhausted".into()));
        }
        Ok(())
    }

    /// Refuse (before changing anything) when another job, reservation and
    /// collation could not be stored.
    pub fn room(&self) -> Result<(), QueueError> {
        if self.jobs.has_room() && self.order.has_room() && self.colls.has_room() {
            Ok(())
        } else {
            Err(QueueError::Full)
        }
    }

    // ---------------------------------------------------------------- jobs

    /// Jobs stored (queued and held).
    pub fn job_count(&self) -> usize {
        self.jobs.len()
    }

    pub fn job_id(&self, key: &JobKey) -> Option<JobId> {
        let jobs = &self.jobs;
        self.by_key.find(key_hash(key), |id| {
            jobs.get(id).is_some_and(|j| j.key == *key)
        })
    }

    pub fn contains(&self, key: &JobKey) -> bool {
        self.job_id(key).is_some()
    }

    /// Job `j`'s record (an id this part handed out, still stored).
    #[inline]
    pub fn job(&self, j: JobId) -> &Job {
        &self.jobs[j]
    }

    /// Job `j`'s record, if `j` is a stored job.
    pub fn get_job(&self, j: JobId) -> Option<&Job> {
        self.jobs.get(j)
    }

    /// The held jobs, with their ids.
    pub fn held_jobs(&self) -> impl Iterator<Item = (JobId, &Job)> {
        self.jobs.iter().filter(|(_, j)| j.held())
    }

    pub fn attempts(&self, j: JobId) -> u32 {
        self.attempts.get(&j).copied().unwrap_or(0)
    }

    /// Store a new job record (not placed yet) naming collation `name`.
    pub fn new_job(
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
    pub fn new_job_ref(
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
    pub fn take_job(&mut self, j: JobId) -> Result<(Job, u32, Option<CollId>), QueueError> {
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
    /// its attempts.
    pub fn drop_job(&mut self, j: JobId) -> Result<(Job, u32), QueueError> {
        let (job, attempts, coll) = self.take_job(j)?;
        if let Some(c) = coll {
            self.colls.release(c);
        }
        Ok((job, attempts))
    }

    pub fn replace_payload(&mut self, j: JobId, payload: &[u8]) {
        let job = &mut self.jobs[j];
        self.payload_bytes = self.payload_bytes - job.payload.len() + payload.len();
        job.payload = payload.into();
    }

    /// Flag job `j` (stored, not placed) as held, with stack key `skey`
    /// (its arrival: what its collation stack takes when released, or
    /// `+seq`).
    pub fn hold(&mut self, j: JobId, skey: i64) {
        let job = &mut self.jobs[j];
        job.skey = skey;
        job.coll.set_held(true);
    }

    /// Job `j` is no longer held (the caller places or takes it next).
    /// Returns its stack key.
    pub fn unhold(&mut self, j: JobId) -> i64 {
        let job = &mut self.jobs[j];
        job.coll.set_held(false);
        job.skey
    }

    /// Job `j` as clients see it, given where it waits.
    pub fn view(&self, j: JobId, immediate: bool, nonce: u64, release_at: i64) -> JobInfo<'_> {
        let job = &self.jobs[j];
        JobInfo {
            key: job.key,
            collation: self.coll_name(j),
            immediate,
            nonce,
            created_at: job.created_at,
            release_at,
            attempts: self.attempts(j),
            payload: Cow::Borrowed(&job.payload),
        }
    }

    // ---------------------------------------------------------- collations

    pub fn coll_id(&self, name: &str) -> Option<CollId> {
        self.colls.find(name)
    }

    /// Collation `c`'s name.
    pub fn name_of(&self, c: CollId) -> Cow<'_, str> {
        self.colls.name_of(c)
    }

    /// The name of the collation job `j` names.
    pub fn coll_name(&self, j: JobId) -> Option<Cow<'_, str>> {
        self.jobs[j].coll_id().map(|c| self.name_of(c))
    }

    /// Is `c` a stored collation record?
    pub fn coll_exists(&self, c: CollId) -> bool {
        self.colls.get(c).is_some()
    }

    /// Is `name` a collation with jobs in its stack?
    pub fn has_collation(&self, name: &str) -> bool {
        self.colls.has_stack(name)
    }

    /// Collations with queued jobs in their stack.
    pub fn collation_count(&self) -> usize {
        self.colls.active()
    }

    /// Jobs in collation stacks.
    pub fn stacked(&self) -> usize {
        self.colls.stacked()
    }

    /// Jobs in collation `c`'s stack.
    pub fn stack_len(&self, c: CollId) -> usize {
        self.colls.len_of(c)
    }

    /// The id of collation `name` with one more reference (for something
    /// outside the records that names it: a parked job, a window), created
    /// if needed.
    pub fn acquire_coll(&mut self, name: &str) -> Result<CollId, QueueError> {
        self.colls.acquire(name)
    }

    /// One more reference to existing collation `c`.
    pub fn add_coll_ref(&mut self, c: CollId) -> Result<(), QueueError> {
        self.colls.add_ref(c)
    }

    /// Drop one reference to collation `c`; the record goes with the last.
    pub fn release_coll(&mut self, c: CollId) {
        self.colls.release(c);
    }

    /// Ids of the collations with a stack, by name.
    pub fn collations_by_name(&self) -> Vec<CollId> {
        let ids: Vec<CollId> = self.colls.with_stack().collect();
        let mut named: Vec<(Cow<'_, str>, CollId)> =
            ids.into_iter().map(|c| (self.name_of(c), c)).collect();
        named.sort_unstable();
        named.into_iter().map(|(_, c)| c).collect()
    }

    /// Job ids of collation `c`'s stack, front first.
    pub fn stack(&self, c: CollId) -> impl Iterator<Item = JobId> + '_ {
        self.colls.stack(c, &self.jobs)
    }

    /// Reservation nodes of collation `c`, in key order.
    pub fn coll_reservations(&self, c: CollId) -> impl Iterator<Item = NodeId> + '_ {
        self.colls.reservations(c, &self.order)
    }

    /// Rough heap footprint in bytes, for `MEMORY USAGE`.
    pub fn heap_bytes(&self) -> usize {
        let side = (self.attempts.capacity() + self.nonces.capacity()) * 24;
        self.jobs.heap_bytes()
            + self.by_key.heap_bytes()
            + self.order.heap_bytes()
            + self.colls.heap_bytes()
            + side
            + self.payload_bytes
    }
}

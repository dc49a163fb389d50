//! The work state: everything the queue keeps outside its reservation
//! order, each part one `Expiring` map (entries by key, in time order, with
//! their bytes, kept in step by the map itself):
//!
//! | part | key | in order of | holds |
//! |---|---|---|---|
//! | `leases` | lease token | deadline | running deliveries (a slab found by token and by orca key: `leases.rs`) |
//! | `delayed` | orca key | retry time (and, for lifetimes, arrival) | NACKed jobs waiting for their retry |
//! | `dead` | orca key | death (time, sequence) | dead letters |
//! | `results` | orca key | expiry | ACK results kept for their TTL |
//! | `cancelled` | lease token | end of memory | leases whose job was deleted |
//!
//! `Work` owns these and its methods are the only way to change them; a
//! method that takes something out hands it back, so the queue
//! (`worker.rs`) can release the collation reference and the running count
//! a parked job held. The rules (when a lease expires, what a NACK does)
//! are the queue's, in `worker.rs`; here is only the bookkeeping.

mod expiring;
mod leases;

use std::collections::BTreeSet;

use super::config::{JobKey, KeyMap};
use super::containers::idmap::IdMap;
use super::ids::CollId;
use expiring::{Expiring, Timed};
pub use leases::Leases;

/// How long a cancelled lease is remembered after its deadline, so the
/// worker's late EXTEND/ACK is told "cancelled" rather than "unknown".
pub const CANCEL_MEMORY_MS: i64 = 600_000;

/// A job that is not in the queue order (leased, delayed or dead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parked {
    pub payload: Box<[u8]>,
    pub created_at: i64,
    pub attempts: u32,
    /// The collation its config named. The parked job holds a reference
    /// on that collation's record, so the id stays valid.
    pub coll: Option<CollId>,
    pub immediate: bool,
}

impl Parked {
    pub fn coll_id(&self) -> Option<CollId> {
        self.coll
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub key: JobKey,
    pub deadline: i64,
    pub job: Parked,
    /// The key was enqueued again (a regrade) after this delivery began:
    /// if this attempt fails or expires it is dropped, so only the newest
    /// config comes back. An ACK still completes it.
    pub superseded: bool,
    /// When this delivery was handed out (ms); 0 for a lease loaded from
    /// an encoding that did not keep it (unknown).
    pub started_at: i64,
    /// The name the worker gave with its pop (`WORKER <name>`), if any.
    pub worker: Option<Box<[u8]>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delayed {
    pub retry_at: i64,
    pub job: Parked,
    /// The text the failed attempt gave (`ORCA.NACK ... ERROR`), if any.
    pub error: Option<Box<[u8]>>,
}

/// Why a job is dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeathCause {
    /// NACKed on its last allowed attempt.
    Failed = 1,
    /// Its lease expired on its last allowed attempt.
    Expired = 2,
    /// It waited longer than the queue's lifetime without being handed out.
    Lifetime = 3,
}

impl DeathCause {
    pub fn name(self) -> &'static str {
        match self {
            DeathCause::Failed => "failed",
            DeathCause::Expired => "lease-expired",
            DeathCause::Lifetime => "expired",
        }
    }
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(DeathCause::Failed),
            2 => Some(DeathCause::Expired),
            3 => Some(DeathCause::Lifetime),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dead {
    pub died_at: i64,
    pub seq: i64,
    pub cause: DeathCause,
    pub job: Parked,
    /// The text the last failed attempt gave (`ORCA.NACK ... ERROR`): the
    /// failure that killed it, or for a retry that then ran out of time
    /// (`expired`) the one it was waiting on; `None` when it gave none (a
    /// lease that expired, a NACK without `ERROR`).
    pub error: Option<Box<[u8]>>,
}

/// A finished job's kept result (`ORCA.ACK ... RESULT`), with what is
/// known of the job that produced it (`ORCA.STATUS` state `done`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResult {
    pub expires_at: i64,
    pub payload: Box<[u8]>,
    /// When the ACK came (ms); 0 when loaded from an encoding that did not
    /// keep it (unknown).
    pub finished_at: i64,
    /// The lease token of the delivery that produced it (tokens grow with
    /// every hand-out); 0 when unknown.
    pub token: u64,
    /// The job's arrival and its deliveries, as its last lease had them.
    pub created_at: i64,
    pub attempts: u32,
    /// The collation the job's config named, by name (a kept result holds
    /// no reference on the collation's record).
    pub collation: Option<Box<str>>,
}

/// Heap bytes of an optional text.
fn len_of(b: &Option<Box<[u8]>>) -> usize {
    b.as_ref().map_or(0, |b| b.len())
}

impl Timed for Lease {
    type Order = i64;
    fn order(&self) -> i64 {
        self.deadline
    }
    fn bytes(&self) -> usize {
        self.job.payload.len() + len_of(&self.worker)
    }
}

impl Timed for Delayed {
    type Order = i64;
    fn order(&self) -> i64 {
        self.retry_at
    }
    fn bytes(&self) -> usize {
        self.job.payload.len() + len_of(&self.error)
    }
}

impl Timed for Dead {
    /// Death order: time, then the sequence number taken when it died.
    type Order = (i64, i64);
    fn order(&self) -> (i64, i64) {
        (self.died_at, self.seq)
    }
    fn bytes(&self) -> usize {
        self.job.payload.len() + len_of(&self.error)
    }
}

impl Timed for StoredResult {
    type Order = i64;
    fn order(&self) -> i64 {
        self.expires_at
    }
    fn bytes(&self) -> usize {
        self.payload.len() + self.collation.as_ref().map_or(0, |c| c.len())
    }
}

/// A cancelled lease: remembered until `until`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cancelled {
    pub until: i64,
}

impl Timed for Cancelled {
    type Order = i64;
    fn order(&self) -> i64 {
        self.until
    }
    fn bytes(&self) -> usize {
        0
    }
}

/// Everything outside the queue order (see the module's table).
#[derive(Clone, Debug, Default)]
pub struct Work {
    leases: Expiring<u64, Lease, Leases>,
    delayed: Expiring<JobKey, Delayed, KeyMap<Delayed>>,
    /// Delayed jobs by arrival (their release time once back in the
    /// queue), for lifetimes; changed only with `delayed`.
    delayed_by_arrival: BTreeSet<(i64, JobKey)>,
    dead: Expiring<JobKey, Dead, KeyMap<Dead>>,
    results: Expiring<JobKey, StoredResult, KeyMap<StoredResult>>,
    cancelled: Expiring<u64, Cancelled, IdMap<u64, Cancelled>>,
}

impl Work {
    /// Payload bytes held (leased, delayed, dead, results).
    pub fn bytes(&self) -> usize {
        self.leases.bytes() + self.delayed.bytes() + self.dead.bytes() + self.results.bytes()
    }

    /// Every parked job (leased, delayed, dead): each holds a collation
    /// reference.
    pub fn parked(&self) -> impl Iterator<Item = &Parked> {
        let leased = self.leases.ordered().map(|(_, l)| &l.job);
        let delayed = self.delayed.ordered().map(|(_, d)| &d.job);
        let dead = self.dead.ordered().map(|(_, d)| &d.job);
        leased.chain(delayed).chain(dead)
    }

    // ------------------------------------------------------------ leases

    pub fn lease_count(&self) -> usize {
        self.leases.len()
    }

    pub fn lease(&self, token: u64) -> Option<&Lease> {
        self.leases.get(&token)
    }

    /// Can another lease be stored?
    #[inline]
    pub fn lease_room(&self) -> bool {
        self.leases.store().has_room()
    }

    pub fn has_lease_on(&self, key: &JobKey) -> bool {
        self.leases.store().has_key(key)
    }

    /// The tokens of `key`'s running deliveries, oldest first.
    pub fn lease_tokens_of(&self, key: &JobKey) -> Vec<u64> {
        let mut tokens = self.leases.store().tokens_of(key);
        tokens.sort_unstable();
        tokens
    }

    /// Every lease with its token, in no particular order.
    pub fn leases(&self) -> impl Iterator<Item = (u64, &Lease)> {
        self.leases.store().iter()
    }

    /// Leases in deadline order, from `offset`, at most `limit`.
    pub fn lease_page(&self, offset: usize, limit: usize) -> impl Iterator<Item = (u64, &Lease)> {
        self.leases.page(offset, limit)
    }

    /// Add a lease; it comes back, nothing changed, when its token is
    /// taken or there is no room.
    #[inline]
    pub fn add_lease(&mut self, token: u64, lease: Lease) -> Result<(), Lease> {
        self.leases.insert(token, lease).map(|_| ())
    }

    pub fn take_lease(&mut self, token: u64) -> Option<Lease> {
        self.leases.remove(&token)
    }

    /// The lease now ends at `deadline`.
    pub fn extend_lease(&mut self, token: u64, deadline: i64) -> bool {
        self.leases.update(&token, |l| l.deadline = deadline)
    }

    /// Mark every lease on `key` superseded (a regrade).
    pub fn supersede_leases(&mut self, key: &JobKey) {
        for t in self.leases.store().tokens_of(key) {
            self.leases.update(&t, |l| l.superseded = true);
        }
    }

    /// The earliest lease whose deadline is at or before `now`, taken out.
    #[inline]
    pub fn pop_expired_lease(&mut self, now: i64) -> Option<(u64, Lease)> {
        self.leases.pop_first_if(|deadline| *deadline <= now)
    }

    pub fn next_lease_deadline(&self) -> Option<i64> {
        self.leases.first().map(|x| x.0)
    }

    /// One record move of the lease slab's shrink; false when none.
    pub fn move_one_lease(&mut self) -> bool {
        self.leases.compact_store(Leases::move_one)
    }

    // ------------------------------------------------------------ retries

    pub fn delayed_count(&self) -> usize {
        self.delayed.len()
    }

    pub fn delayed(&self, key: &JobKey) -> Option<&Delayed> {
        self.delayed.get(key)
    }

    pub fn is_delayed(&self, key: &JobKey) -> bool {
        self.delayed.contains(key)
    }

    /// Delayed jobs in retry order, from `offset`, at most `limit`.
    pub fn delayed_page(
        &self,
        offset: usize,
        limit: usize,
    ) -> impl Iterator<Item = (JobKey, &Delayed)> {
        self.delayed.page(offset, limit)
    }

    /// Park `d` under `key` (no job is delayed under it).
    pub fn park(&mut self, key: JobKey, d: Delayed) {
        let arrival = d.job.created_at;
        if let Ok(old) = self.delayed.insert(key, d) {
            if let Some(old) = old {
                self.delayed_by_arrival.remove(&(old.job.created_at, key));
            }
            self.delayed_by_arrival.insert((arrival, key));
        }
    }

    /// Take the delayed job of `key` out.
    pub fn unpark(&mut self, key: &JobKey) -> Option<Delayed> {
        let d = self.delayed.remove(key)?;
        self.delayed_by_arrival.remove(&(d.job.created_at, *key));
        Some(d)
    }

    /// The earliest retry due at `now`, taken out.
    #[inline]
    pub fn pop_due_retry(&mut self, now: i64) -> Option<(JobKey, Delayed)> {
        let (_, key) = self.delayed.first().filter(|(at, _)| *at <= now)?;
        self.unpark(&key).map(|d| (key, d))
    }

    pub fn next_retry(&self) -> Option<i64> {
        self.delayed.first().map(|x| x.0)
    }

    /// The delayed job that arrived first: (arrival, key).
    pub fn first_delayed_arrival(&self) -> Option<(i64, JobKey)> {
        self.delayed_by_arrival.first().copied()
    }

    // ------------------------------------------------------- dead letters

    pub fn dead_count(&self) -> usize {
        self.dead.len()
    }

    pub fn dead(&self, key: &JobKey) -> Option<&Dead> {
        self.dead.get(key)
    }

    pub fn is_dead(&self, key: &JobKey) -> bool {
        self.dead.contains(key)
    }

    /// Dead letters in the order they died, from `offset`, at most `limit`.
    pub fn dead_page(&self, offset: usize, limit: usize) -> impl Iterator<Item = (JobKey, &Dead)> {
        self.dead.page(offset, limit)
    }

    /// Make `d` the dead letter of `key`; returns the one it replaced.
    pub fn bury(&mut self, key: JobKey, d: Dead) -> Option<Dead> {
        self.dead.insert(key, d).unwrap_or(None)
    }

    pub fn forget_dead(&mut self, key: &JobKey) -> Option<Dead> {
        self.dead.remove(key)
    }

    /// The oldest dead letter, taken out if `due` says so (given when it
    /// died).
    pub fn pop_oldest_dead_if(&mut self, due: impl FnOnce(i64) -> bool) -> Option<(JobKey, Dead)> {
        self.dead.pop_first_if(|(died_at, _)| due(*died_at))
    }

    /// When the oldest dead letter died.
    pub fn oldest_death(&self) -> Option<i64> {
        self.dead.first().map(|((died_at, _), _)| died_at)
    }

    /// Every dead letter, taken out (in death order).
    pub fn purge_dead(&mut self) -> Vec<(JobKey, Dead)> {
        self.dead.drain()
    }

    // ------------------------------------------------------------ results

    pub fn result_count(&self) -> usize {
        self.results.len()
    }

    pub fn result(&self, key: &JobKey) -> Option<&StoredResult> {
        self.results.get(key)
    }

    /// Keep `r` as `key`'s result (replacing any).
    pub fn keep_result(&mut self, key: JobKey, r: StoredResult) {
        let _ = self.results.insert(key, r);
    }

    pub fn forget_result(&mut self, key: &JobKey) -> Option<StoredResult> {
        self.results.remove(key)
    }

    /// The result expiring first, taken out if `due` says so (given its
    /// expiry).
    #[inline]
    pub fn pop_first_result_if(&mut self, due: impl FnOnce(i64) -> bool) -> Option<JobKey> {
        self.results.pop_first_if(|at| due(*at)).map(|(k, _)| k)
    }

    pub fn next_result_expiry(&self) -> Option<i64> {
        self.results.first().map(|x| x.0)
    }

    /// Results in expiry order.
    pub fn results(&self) -> impl Iterator<Item = (JobKey, &StoredResult)> {
        self.results.ordered()
    }

    /// Kept results in expiry order, from `offset`, at most `limit`.
    pub fn result_page(
        &self,
        offset: usize,
        limit: usize,
    ) -> impl Iterator<Item = (JobKey, &StoredResult)> {
        self.results.page(offset, limit)
    }

    // ------------------------------------------------------ cancellations

    pub fn cancelled_count(&self) -> usize {
        self.cancelled.len()
    }

    pub fn is_cancelled(&self, token: u64) -> bool {
        self.cancelled.contains(&token)
    }

    /// Remember that lease `token` was cancelled, until `until`.
    pub fn remember_cancelled(&mut self, token: u64, until: i64) {
        let _ = self.cancelled.insert(token, Cancelled { until });
    }

    /// The cancellation record due first at `now`, forgotten.
    #[inline]
    pub fn pop_due_cancelled(&mut self, now: i64) -> bool {
        self.cancelled.pop_first_if(|until| *until <= now).is_some()
    }

    pub fn next_cancelled_expiry(&self) -> Option<i64> {
        self.cancelled.first().map(|x| x.0)
    }

    /// Cancellation records in expiry order: (token, until).
    pub fn cancelled(&self) -> impl Iterator<Item = (u64, i64)> + '_ {
        self.cancelled.ordered().map(|(t, c)| (t, c.until))
    }

    // ------------------------------------------------------- maintenance

    /// Shrink the maps when sparse.
    pub fn shrink_maps(&mut self) {
        self.leases.shrink();
        self.delayed.shrink();
        self.dead.shrink();
        self.results.shrink();
        self.cancelled.shrink();
    }

    /// Rough heap bytes (for `MEMORY USAGE`), payloads included.
    pub fn heap_bytes(&self) -> usize {
        let parked = self.leases.len() + self.delayed.len() + self.dead.len();
        parked * (std::mem::size_of::<Lease>() + 48)
            + (self.results.len() + self.cancelled.len()) * 96
            + self.bytes()
    }

    /// Each part agrees with its order and its byte count; the lease
    /// indexes agree with the leases; the arrival order holds exactly the
    /// delayed jobs. (What needs the queue, ranges of tokens and times, is
    /// `check.rs`'s.)
    pub fn check(&self) -> Result<(), String> {
        self.leases.check("leases")?;
        if !self.leases.store().indexes_agree() {
            return Err("lease index by key disagrees with the leases".into());
        }
        self.delayed.check("delayed jobs")?;
        if self.delayed_by_arrival.len() != self.delayed.len()
            || self
                .delayed
                .ordered()
                .any(|(k, d)| !self.delayed_by_arrival.contains(&(d.job.created_at, k)))
        {
            return Err("delayed jobs: the arrival order disagrees".into());
        }
        self.dead.check("dead letters")?;
        self.results.check("results")?;
        self.cancelled.check("cancellations")?;
        if self.leases().any(|(t, _)| self.is_cancelled(t)) {
            return Err("a lease is both held and cancelled".into());
        }
        Ok(())
    }
}

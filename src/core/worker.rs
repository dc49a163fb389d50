//! At-least-once delivery: leases, ack, nack with retry and backoff, dead
//! letters, kept results and cancellation; and every time-driven change
//! (`tick`).
//!
//! A popped job is *leased*: it leaves the queue order but is kept, with a
//! deadline, under a lease token unique to this delivery. ACK ends it; NACK
//! parks it as *delayed* until its retry time (it is not handed out before
//! then, whatever else is waiting) or, after `max_attempts` deliveries, moves
//! it to the *dead* list. A lease that passes its deadline puts the job back
//! as immediate at its original arrival time (the grading-queue design's
//! re-enqueue rule), or to the dead list when its attempts are used up.
//!
//! Time-driven changes happen only in `tick(now)`, which is deterministic:
//! the adapter runs it from a timer on the master and replicates it with
//! `now` pinned, and every pop runs it first. Besides leases and retries it
//! applies the queue's lifetime (`lifetime.rs`), forgets dead letters past
//! their age, results past their TTL, cancellation records and submission
//! windows.
//!
//! An orca key can be queued (or delayed) and leased at the same time: a
//! regrade while a job runs queues the new config, and the old delivery's
//! ACK only ends its own lease. A regrade *supersedes* what is older: the
//! running leases on the key are marked, and a pending retry of the key is
//! dropped. A superseded attempt that fails or expires is dropped, so only
//! the newest config comes back; it cannot displace the regrade.
//!
//! A parked job (leased, delayed, dead) holds a reference on the collation
//! its config names, so running counts per collation (`caps.rs`) follow it.

use std::borrow::Cow;

use super::config::JobKey;
use super::containers::idmap::IdMap;
use super::error::QueueError;
use super::ids::CollId;
use super::job::LoadedJob;
use super::limits::{lease_deadline, valid_time, MAX_TIME};
use super::queue::{JobInfo, Queue};
pub use super::work::{
    Dead, DeathCause, Delayed, Lease, Leases, Parked, StoredResult, Work, CANCEL_MEMORY_MS,
};

/// Retry and dead-letter policy, resolved by the adapter from module
/// settings (and replicated pinned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Deliveries after which a failing job is dead; 0 = never.
    pub max_attempts: u32,
    /// Backoff of the first retry (ms); doubles per attempt.
    pub retry_base: i64,
    /// Largest backoff (ms).
    pub retry_cap: i64,
}

impl Policy {
    /// Backoff before retrying after delivery number `attempts` (>= 1).
    pub fn backoff(&self, attempts: u32) -> i64 {
        let shift = attempts.saturating_sub(1).min(62);
        let factor = 1i64.checked_shl(shift).unwrap_or(i64::MAX);
        self.retry_base
            .saturating_mul(factor)
            .min(self.retry_cap)
            .clamp(0, MAX_TIME)
    }

    fn exhausted(&self, attempts: u32) -> bool {
        self.max_attempts > 0 && attempts >= self.max_attempts
    }
}

/// What `tick` did, for events and wake-ups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Leases that ended by expiry (requeued, dead, or dropped).
    pub expired: usize,
    /// Retries that came due (requeued or dropped).
    pub retried: usize,
    /// Jobs that became dead letters (attempts used up, or lifetime over).
    pub died: usize,
    /// Waiting jobs whose lifetime ran out (also counted in `died`).
    pub lifetime: usize,
    /// Results, dead letters past their age, cancellation records and
    /// submission windows forgotten.
    pub forgotten: usize,
    /// Jobs put back in the queue (they can be popped now).
    pub requeued: usize,
    /// A collation at its running cap came back below it.
    pub uncapped: bool,
}

impl TickReport {
    pub fn changed(&self) -> bool {
        *self != TickReport::default()
    }
    /// True when jobs became available to pop.
    pub fn requeued(&self) -> bool {
        self.requeued > 0 || self.uncapped
    }
}

/// A delivery handed to a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery<'a> {
    pub job: JobInfo<'a>,
    /// `None` for an at-most-once pop (`LEASE 0`).
    pub lease: Option<(u64, i64)>,
}

impl Delivery<'_> {
    pub fn into_owned(self) -> Delivery<'static> {
        Delivery {
            job: self.job.into_owned(),
            lease: self.lease,
        }
    }
}

/// What a pop handed out, before it is shown (`Queue::handout`): a leased
/// job stays in the queue's lease, so its view borrows the payload from
/// there instead of copying it; a job taken (`LEASE 0`) is owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handout {
    Leased {
        token: u64,
        deadline: i64,
        /// Of the reservation it was popped from.
        nonce: u64,
        release_at: i64,
    },
    Taken(JobInfo<'static>),
}

/// Outcome of a NACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NackOutcome {
    /// Parked until `retry_at` (or back in the queue already if that is now).
    Retry { retry_at: i64, attempts: u32 },
    /// Out of attempts: on the dead list.
    Dead { attempts: u32 },
    /// The key is already waiting again (a regrade): this attempt is dropped.
    Superseded,
}

/// Where a job (by orca key) is, for `ORCA.STATUS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State<'a> {
    Queued(JobInfo<'a>, usize),
    /// Held behind a closed gate (named).
    Held(JobInfo<'a>, Cow<'a, [u8]>),
    Delayed(JobKey, &'a Delayed),
    Leased(JobKey, u64, &'a Lease),
    Dead(JobKey, &'a Dead),
}

impl Queue {
    /// A parked job as clients see it.
    pub fn parked_info<'a>(&'a self, key: JobKey, p: &'a Parked, release_at: i64) -> JobInfo<'a> {
        JobInfo {
            key,
            collation: p.coll_id().map(|c| self.name_of(c)),
            immediate: p.immediate,
            nonce: 0,
            created_at: p.created_at,
            release_at,
            attempts: p.attempts,
            payload: Cow::Borrowed(&p.payload),
        }
    }

    /// Apply every time-driven change due at `now`: expired leases come
    /// back (or die), due retries come back, waiting jobs past the queue's
    /// lifetime die, old dead letters, results, cancellation records and
    /// submission windows are forgotten.
    pub fn tick(&mut self, now: i64, policy: &Policy) -> TickReport {
        // Every deadline is within 0..=MAX_TIME, so clamping changes nothing
        // that comes due, and keeps recorded times (died_at) in range.
        let now = now.clamp(0, MAX_TIME);
        let mut report = TickReport::default();
        while let Some((_, lease)) = self.work.pop_expired_lease(now) {
            self.lease_ended(&lease);
            // Every removal counts, so the report says whether anything
            // changed (the adapter replicates the tick only then).
            report.expired += 1;
            if lease.superseded {
                // A regrade replaced it: dropped.
                self.release_parked(lease.job);
            } else if policy.exhausted(lease.job.attempts) {
                self.bury(lease.key, lease.job, now, DeathCause::Expired, None);
                report.died += 1;
            } else if self.requeue_parked(lease.key, lease.job, now, DeathCause::Expired) {
                report.requeued += 1;
            }
        }
        while let Some((key, d)) = self.work.pop_due_retry(now) {
            report.retried += 1;
            if self.requeue_parked(key, d.job, now, DeathCause::Failed) {
                report.requeued += 1;
            }
        }
        self.expire_lifetimes(now, &mut report);
        let ttl = self.settings.dead_ttl;
        if ttl > 0 {
            while let Some((_, d)) = self
                .work
                .pop_oldest_dead_if(|died_at| died_at.saturating_add(ttl) <= now)
            {
                self.release_parked(d.job);
                report.forgotten += 1;
            }
        }
        while self.work.pop_first_result_if(|at| at <= now).is_some() {
            report.forgotten += 1;
        }
        while self.work.pop_due_cancelled(now) {
            report.forgotten += 1;
        }
        for c in self.window.expire(now) {
            self.records.release_coll(c);
            report.forgotten += 1;
        }
        report.uncapped = self.caps.take_woken();
        report
    }

    /// The earliest time at which `tick` has something to do.
    pub fn next_deadline(&self) -> Option<i64> {
        let ttl = self.settings.dead_ttl;
        [
            self.work.next_lease_deadline(),
            self.work.next_retry(),
            self.work.next_result_expiry(),
            self.work.next_cancelled_expiry(),
            self.lifetime_deadline(),
            (ttl > 0)
                .then(|| self.work.oldest_death().map(|t| t.saturating_add(ttl)))
                .flatten(),
            self.window.next_expiry(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// A parked job that leaves the queue for good: its collation reference
    /// goes.
    pub(crate) fn release_parked(&mut self, job: Parked) {
        if let Some(c) = job.coll_id() {
            self.records.release_coll(c);
        }
    }

    /// Put a returning attempt back as immediate at its original arrival
    /// time, unless its key is waiting already. Returns whether it was queued.
    fn requeue_parked(&mut self, key: JobKey, job: Parked, now: i64, cause: DeathCause) -> bool {
        if self.contains(&key) || self.work.is_delayed(&key) {
            self.release_parked(job);
            return false;
        }
        if self.records.room().is_err() {
            // No room for another record (a key holds at most 2^30 - 1):
            // keep the job as a dead letter rather than lose it.
            self.bury(key, job, now, cause, None);
            return false;
        }
        let score = job.created_at.clamp(0, MAX_TIME);
        self.queue_parked(key, job, score).is_ok()
    }

    /// Queue parked job `job` (its collation reference moves to the job) as
    /// an immediate single job at `score`.
    fn queue_parked(&mut self, key: JobKey, job: Parked, score: i64) -> Result<(), QueueError> {
        let loaded = LoadedJob {
            key,
            created_at: job.created_at,
            attempts: job.attempts,
            skey: 0,
            payload: job.payload,
        };
        self.insert_single(loaded, job.coll, score, true)
    }

    /// The sequence numbers ticks may take from now on without checking
    /// for room (writes check, ticks cannot refuse): a lease or a retry
    /// takes one to come back and one more to die of its lifetime later; a
    /// queued or held job one to die of its lifetime. A loaded queue must
    /// leave room for all of them below the load limit.
    pub(crate) fn tick_reserve(&self) -> i64 {
        let parked = self.work.lease_count() + self.work.delayed_count();
        (2 * parked + self.len()) as i64
    }

    /// Make `job` the dead letter of `key` (replacing an older one), then
    /// keep the dead list within the queue's bound.
    pub(crate) fn bury(
        &mut self,
        key: JobKey,
        job: Parked,
        now: i64,
        cause: DeathCause,
        error: Option<Box<[u8]>>,
    ) {
        let seq = self.records.alloc_seq();
        let dead = Dead {
            died_at: now,
            seq,
            cause,
            job,
            error,
        };
        if let Some(old) = self.work.bury(key, dead) {
            self.release_parked(old.job);
        }
        self.trim_dead();
    }

    /// Drop the oldest dead letters beyond `dead_max`.
    pub(crate) fn trim_dead(&mut self) {
        let max = self.settings.dead_max;
        while max > 0 && self.work.dead_count() as u64 > max {
            let Some((_, d)) = self.work.pop_oldest_dead_if(|_| true) else {
                break;
            };
            self.release_parked(d.job);
        }
    }

    /// Forget the dead letter of `key`; whether there was one.
    pub(crate) fn forget_dead(&mut self, key: &JobKey) -> bool {
        let Some(d) = self.work.forget_dead(key) else {
            return false;
        };
        self.release_parked(d.job);
        true
    }

    /// Drop the results expiring first beyond `result_max`.
    pub(crate) fn trim_results(&mut self) {
        let max = self.settings.result_max;
        while max > 0 && self.work.result_count() as u64 > max {
            if self.work.pop_first_result_if(|_| true).is_none() {
                break;
            }
        }
    }

    /// `ORCA.POP` with leases: run `tick(now)`, then hand out up to `count`
    /// jobs in queue order (under the queue's running cap). `lease_ms > 0`
    /// leases each (at-least-once); `lease_ms == 0` removes it (at-most-once,
    /// the design's pop).
    pub fn pop_deliveries(
        &mut self,
        now: i64,
        lease_ms: i64,
        count: usize,
        policy: &Policy,
    ) -> Result<(Vec<Delivery<'static>>, TickReport), QueueError> {
        let (hs, report) = self.pop_handouts(now, lease_ms, count, policy)?;
        let ds = hs
            .iter()
            .filter_map(|h| self.handout(h).map(Delivery::into_owned))
            .collect();
        Ok((ds, report))
    }

    /// What a handout shows: the job as it was popped, with its lease.
    /// `None` only for a lease that is gone (not right after the pop).
    pub fn handout<'a>(&'a self, h: &'a Handout) -> Option<Delivery<'a>> {
        match h {
            Handout::Taken(info) => Some(Delivery {
                job: JobInfo {
                    collation: info.collation.as_deref().map(Cow::Borrowed),
                    payload: Cow::Borrowed(&info.payload),
                    ..*info
                },
                lease: None,
            }),
            Handout::Leased {
                token,
                deadline,
                nonce,
                release_at,
            } => {
                let l = self.work.lease(*token)?;
                let mut job = self.parked_info(l.key, &l.job, *release_at);
                job.nonce = *nonce;
                Some(Delivery {
                    job,
                    lease: Some((*token, *deadline)),
                })
            }
        }
    }

    /// Would a pop at `now` certainly hand out a job, after the due
    /// changes it applies first? (The lowest eligible reservation's job
    /// survives its lifetime.) A blocked pop's wake-up asks before changing
    /// anything; a `false` can be wrong only the safe way: a lease or retry
    /// coming due would bring a job the timer's own tick then offers.
    pub fn can_hand_out(&self, now: i64) -> bool {
        let l = self.settings.lifetime;
        self.next_node()
            .is_some_and(|n| l == 0 || self.records.rk(n).score.saturating_add(l) > now)
    }

    /// `pop_deliveries` without showing them (see `Handout`).
    pub fn pop_handouts(
        &mut self,
        now: i64,
        lease_ms: i64,
        count: usize,
        policy: &Policy,
    ) -> Result<(Vec<Handout>, TickReport), QueueError> {
        self.pop_handouts_for(now, lease_ms, count, policy, None)
    }

    /// `pop_handouts` by a worker that named itself (`WORKER <name>`): each
    /// lease keeps the name, with the time it was handed out.
    pub fn pop_handouts_for(
        &mut self,
        now: i64,
        lease_ms: i64,
        count: usize,
        policy: &Policy,
        worker: Option<&[u8]>,
    ) -> Result<(Vec<Handout>, TickReport), QueueError> {
        let deadline = lease_deadline(now, lease_ms).ok_or(QueueError::TimeOverflow)?;
        self.records.seq_room_for(count)?;
        let report = self.tick(now, policy);
        let mut out = Vec::new();
        while out.len() < count {
            if lease_ms > 0 && !self.work.lease_room() {
                // No slot for another lease (2^30 held): hand out no more.
                break;
            }
            let Some(popped) = self.take_next()? else {
                break;
            };
            if lease_ms == 0 {
                out.push(Handout::Taken(self.records.finish_pop(popped)));
                continue;
            }
            let token = self.records.alloc_seq() as u64;
            let (nonce, release_at) = (popped.nonce, popped.release);
            let (key, job) = Queue::parked_from(popped);
            let lease = Lease {
                key,
                deadline,
                job,
                superseded: false,
                started_at: now,
                worker: worker.map(Box::from),
            };
            if let Err(l) = self.lease_insert(token, lease) {
                // Cannot happen (room checked above, tokens are new): the
                // job goes back rather than being lost.
                self.requeue_parked(l.key, l.job, now, DeathCause::Expired);
                break;
            }
            out.push(Handout::Leased {
                token,
                deadline,
                nonce,
                release_at,
            });
        }
        Ok((out, report))
    }

    /// The lease `token` if it is held for `key`; the error tells a
    /// cancelled job from a lease that is simply not held (the fencing of
    /// every finish: ACK, NACK, EXTEND, and their checks before a hand-off).
    pub(crate) fn held_lease(&self, key: &JobKey, token: u64) -> Result<&Lease, QueueError> {
        match self.work.lease(token) {
            Some(l) if l.key == *key => Ok(l),
            _ if self.work.is_cancelled(token) => Err(QueueError::Cancelled),
            _ => Err(QueueError::LeaseNotHeld),
        }
    }

    /// Add a lease (its token new); it comes back, nothing changed, when
    /// it cannot be stored (no room: every pop checks first).
    pub(crate) fn lease_insert(&mut self, token: u64, lease: Lease) -> Result<(), Lease> {
        let coll = lease.job.coll_id();
        self.work.add_lease(token, lease)?;
        if let Some(c) = coll {
            self.caps.add_running(c, 1);
            self.sync_cap(c);
        }
        Ok(())
    }

    /// Take lease `token` out; its collation's running count goes down.
    fn take_lease(&mut self, token: u64) -> Option<Lease> {
        let lease = self.work.take_lease(token)?;
        self.lease_ended(&lease);
        Some(lease)
    }

    /// A lease left the work state: its collation's running count goes
    /// down (the collation reference goes with the job, by the caller).
    fn lease_ended(&mut self, lease: &Lease) {
        if let Some(c) = lease.job.coll_id() {
            self.caps.add_running(c, -1);
            self.sync_cap(c);
        }
    }

    /// A new job was queued under `key` (a regrade): older attempts of it
    /// must not come back.
    pub(crate) fn supersede(&mut self, key: &JobKey) {
        self.work.supersede_leases(key);
        if let Some(d) = self.work.unpark(key) {
            self.release_parked(d.job);
        }
    }

    /// `ORCA.ACK`: the delivery is done. An optional result is kept until
    /// `now + result_ttl` (not kept when `result_ttl` is 0).
    pub fn ack(
        &mut self,
        key: &JobKey,
        token: u64,
        result: Option<&[u8]>,
        now: i64,
        result_ttl: i64,
    ) -> Result<(), QueueError> {
        self.held_lease(key, token)?;
        let expires_at = now.saturating_add(result_ttl).min(MAX_TIME);
        if result.is_some() && !valid_time(now) {
            return Err(QueueError::TimeOverflow);
        }
        let Some(lease) = self.take_lease(token) else {
            return Ok(());
        };
        let (created_at, attempts) = (lease.job.created_at, lease.job.attempts);
        let collation = lease.job.coll.map(|c| Box::from(&*self.name_of(c)));
        self.release_parked(lease.job);
        if let Some(payload) = result {
            if result_ttl > 0 {
                let kept = StoredResult {
                    expires_at,
                    payload: payload.into(),
                    finished_at: now,
                    token,
                    created_at,
                    attempts,
                    collation,
                };
                self.work.keep_result(*key, kept);
                self.trim_results();
            }
        }
        Ok(())
    }

    /// `ORCA.NACK`: the delivery failed. Retried after `delay` (default: the
    /// policy's exponential backoff), or dead after `max_attempts`.
    pub fn nack(
        &mut self,
        key: &JobKey,
        token: u64,
        delay: Option<i64>,
        now: i64,
        policy: &Policy,
    ) -> Result<NackOutcome, QueueError> {
        self.nack_with(key, token, delay, now, policy, None)
    }

    /// `nack` with the failure's text (`ERROR <text>`), kept with the job
    /// while it waits for its retry, or with its dead letter.
    pub fn nack_with(
        &mut self,
        key: &JobKey,
        token: u64,
        delay: Option<i64>,
        now: i64,
        policy: &Policy,
        error: Option<&[u8]>,
    ) -> Result<NackOutcome, QueueError> {
        let attempts = self.held_lease(key, token)?.job.attempts;
        if !valid_time(now) {
            return Err(QueueError::TimeOverflow);
        }
        let delay = delay.unwrap_or_else(|| policy.backoff(attempts));
        let retry_at = now
            .checked_add(delay)
            .filter(|t| valid_time(*t) && delay >= 0)
            .ok_or(QueueError::TimeOverflow)?;
        self.seq_room()?;
        let Some(lease) = self.take_lease(token) else {
            return Err(QueueError::LeaseNotHeld);
        };
        let error = error.map(Box::from);
        if lease.superseded {
            self.release_parked(lease.job);
            return Ok(NackOutcome::Superseded);
        }
        if policy.exhausted(attempts) {
            self.bury(*key, lease.job, now, DeathCause::Failed, error);
            return Ok(NackOutcome::Dead { attempts });
        }
        if self.contains(key) || self.work.is_delayed(key) {
            self.release_parked(lease.job);
            return Ok(NackOutcome::Superseded);
        }
        if retry_at <= now {
            self.requeue_parked(*key, lease.job, now, DeathCause::Failed);
        } else {
            let job = lease.job;
            self.work.park(
                *key,
                Delayed {
                    retry_at,
                    job,
                    error,
                },
            );
        }
        Ok(NackOutcome::Retry { retry_at, attempts })
    }

    /// `ORCA.EXTEND`: heartbeat; the lease now ends at `now + ms`.
    pub fn extend(
        &mut self,
        key: &JobKey,
        token: u64,
        ms: i64,
        now: i64,
    ) -> Result<i64, QueueError> {
        self.held_lease(key, token)?;
        let deadline = now
            .checked_add(ms)
            .filter(|t| valid_time(*t) && ms >= 0 && now >= 0)
            .ok_or(QueueError::TimeOverflow)?;
        self.work.extend_lease(token, deadline);
        Ok(deadline)
    }

    /// `ORCA.DELETE` of everything under an orca key: the queued (or held)
    /// job, a pending retry, a dead entry, and every lease on it (cancelled:
    /// the worker's next EXTEND/ACK/NACK is told so, and the job never
    /// comes back). Returns whether anything was removed.
    pub fn cancel(&mut self, key: &JobKey) -> Result<bool, QueueError> {
        let mut removed = self.delete(key)?;
        if let Some(d) = self.work.unpark(key) {
            self.release_parked(d.job);
            removed = true;
        }
        removed |= self.forget_dead(key);
        let tokens = self.work.lease_tokens_of(key);
        for token in tokens {
            if let Some(lease) = self.take_lease(token) {
                let until = lease
                    .deadline
                    .saturating_add(CANCEL_MEMORY_MS)
                    .min(MAX_TIME);
                self.work.remember_cancelled(token, until);
                self.release_parked(lease.job);
                removed = true;
            }
        }
        Ok(removed)
    }

    /// `ORCA.DEAD ... LIST`: dead jobs in the order they died.
    pub fn dead_list(&self, offset: usize, limit: usize) -> Vec<(JobKey, &Dead)> {
        self.work.dead_page(offset, limit).collect()
    }

    pub fn dead_len(&self) -> usize {
        self.work.dead_count()
    }

    /// Leased jobs in deadline order, from `offset`, at most `limit`.
    pub fn lease_list(&self, offset: usize, limit: usize) -> Vec<(u64, &Lease)> {
        self.work.lease_page(offset, limit).collect()
    }

    /// Delayed jobs in retry order, from `offset`, at most `limit`.
    pub fn delayed_list(&self, offset: usize, limit: usize) -> Vec<(JobKey, &Delayed)> {
        self.work.delayed_page(offset, limit).collect()
    }

    /// `ORCA.DEAD ... REQUEUE`: a dead job back in the queue as immediate at
    /// `now`, with a fresh set of attempts.
    pub fn dead_requeue(&mut self, key: &JobKey, now: i64) -> Result<JobInfo<'_>, QueueError> {
        if !valid_time(now) {
            return Err(QueueError::TimeOverflow);
        }
        if !self.work.is_dead(key) {
            return Err(QueueError::NoSuchJob);
        }
        if self.contains(key) || self.work.is_delayed(key) {
            return Err(QueueError::AlreadyQueued);
        }
        self.records.seq_room()?;
        self.records.room()?;
        let d = self.work.forget_dead(key).ok_or(QueueError::NoSuchJob)?;
        self.supersede(key);
        let job = Parked {
            attempts: 0,
            ..d.job
        };
        self.queue_parked(*key, job, now)?;
        self.info(key)
    }

    /// `ORCA.DEAD ... PURGE`: forget every dead job; returns how many.
    pub fn dead_purge(&mut self) -> usize {
        let dead = self.work.purge_dead();
        let n = dead.len();
        for (_, d) in dead {
            self.release_parked(d.job);
        }
        n
    }

    /// A finished job's kept result at `now` (`ORCA.STATUS` state `done`):
    /// the key's last ACK kept a result that has not expired.
    pub fn done(&self, key: &JobKey, now: i64) -> Option<&StoredResult> {
        self.work.result(key).filter(|r| r.expires_at > now)
    }

    /// Finished jobs whose result is kept (`ORCA.LIST ... STATE DONE`), in
    /// the order their results expire (the order they finished in, for one
    /// TTL), from `offset`, at most `limit`.
    pub fn done_list(&self, offset: usize, limit: usize) -> Vec<(JobKey, &StoredResult)> {
        self.work.result_page(offset, limit).collect()
    }

    /// `ORCA.RESULT`: a kept result, if it has not expired at `now`.
    pub fn result(&self, key: &JobKey, now: i64) -> Option<&[u8]> {
        self.work
            .result(key)
            .filter(|r| r.expires_at > now)
            .map(|r| &*r.payload)
    }

    /// Every state the orca key is in: queued (with its 1-based position) or
    /// held, delayed, leased (one entry per lease), dead.
    pub fn states(&self, key: &JobKey) -> Result<Vec<State<'_>>, QueueError> {
        let mut out = Vec::new();
        if let Some(j) = self.job_id(key) {
            match self.held_gate(j) {
                Some(gate) => out.push(State::Held(self.info(key)?, Cow::Borrowed(gate))),
                None => out.push(State::Queued(self.info(key)?, self.position(key)?)),
            }
        }
        if let Some(d) = self.work.delayed(key) {
            out.push(State::Delayed(*key, d));
        }
        let tokens = self.work.lease_tokens_of(key);
        for t in tokens {
            if let Some(l) = self.work.lease(t) {
                out.push(State::Leased(*key, t, l));
            }
        }
        if let Some(d) = self.work.dead(key) {
            out.push(State::Dead(*key, d));
        }
        Ok(out)
    }

    /// Counts by state: (queued, delayed, leased, dead). Held jobs count as
    /// queued here (they wait in the queue); `held_count` tells them apart.
    pub fn state_counts(&self) -> (usize, usize, usize, usize) {
        (
            self.len(),
            self.work.delayed_count(),
            self.work.lease_count(),
            self.work.dead_count(),
        )
    }

    /// Collation `c`'s running count (leased jobs naming it).
    pub fn running(&self, c: CollId) -> u32 {
        if self.caps.on() {
            self.caps.running(c)
        } else {
            self.running_counts().get(&c).copied().unwrap_or(0)
        }
    }

    /// Running counts per collation, counted from the leases: O(leases).
    pub(crate) fn running_counts(&self) -> IdMap<CollId, u32> {
        let mut running: IdMap<CollId, u32> = IdMap::default();
        for (_, l) in self.work.leases() {
            if let Some(c) = l.job.coll_id() {
                *running.entry(c).or_insert(0) += 1;
            }
        }
        running
    }
}

//! The reference model of the worker layer: leases, ack/nack, retries with
//! backoff, dead letters, kept results, cancellation and `tick`. What
//! `tests/props/worker_sequences/` checks the core against.
//!
//! An oracle only if it does not restate the code it checks. The model
//! keeps its own books: every job *instance* (a regrade is a new one) has an
//! id, and each key remembers its newest instance. The rules for a failed
//! or expired delivery are written from the documentation, quoted where
//! they are used, not from `src/core/worker.rs`:
//!
//! - the default NACK delay, `orca.retry-base` × 2^(attempts-1) at most
//!   `orca.retry-cap` (docs/commands.md, ORCA.NACK): `documented_backoff`;
//! - dead after `orca.max-attempts` deliveries, `0` = never (ORCA.NACK,
//!   Module settings): `attempts_used_up`;
//! - superseded attempts: a delivery is superseded when its key was
//!   enqueued again since it began (ORCA.NACK, ORCA.ACK "Regrades",
//!   docs/design.md "Workers"), i.e. when a newer instance of its key
//!   exists (`regraded_since`). The core keeps a `superseded` flag on the
//!   lease; the model derives the same fact from its instance ids, and
//!   `states()` compares the two;
//! - NACK: fencing, then the time, then superseded -> dropped whatever its
//!   attempts, used up -> dead, else parked until now + delay (`DELAY 0`:
//!   back at once) and back as immediate at its original arrival time
//!   (`nack`); an expired lease likewise (`tick`).

use std::collections::{BTreeMap, HashMap};

use orca::core::worker::{DeathCause, CANCEL_MEMORY_MS};
use orca::core::{JobKey, NackOutcome, Policy, QueueError, TickReport, MAX_TIME};

use crate::support::*;
use crate::worker_views::*;

/// The delay of a NACK without `DELAY` (docs/commands.md, ORCA.NACK):
/// "exponential backoff `orca.retry-base` × 2^(attempts-1), at most
/// `orca.retry-cap`", `attempts` being the deliveries so far (the first
/// retry waits the base). Exact: the product is taken in 128 bits and
/// saturates, the cap bounds it; like every time, at most 2^53-1.
pub fn documented_backoff(p: &Policy, attempts: u32) -> i64 {
    let doublings = attempts.max(1) - 1;
    let factor: u128 = if doublings >= 64 {
        u128::MAX
    } else {
        1 << doublings
    };
    let full = (p.retry_base.max(0) as u128).saturating_mul(factor);
    full.min(p.retry_cap.max(0) as u128).min(MAX_TIME as u128) as i64
}

/// "A job that has had `orca.max-attempts` deliveries goes to the queue's
/// dead list" (ORCA.NACK; an expired lease likewise, ORCA.POP); "0 = never"
/// (Module settings).
pub fn attempts_used_up(p: &Policy, attempts: u32) -> bool {
    p.max_attempts != 0 && attempts >= p.max_attempts
}

#[derive(Clone, Debug)]
pub struct MJob {
    /// Model-only identity of a job instance (a regrade is a new instance;
    /// a payload update of a queued job is not).
    pub id: u64,
    pub payload: Vec<u8>,
    pub created_at: i64,
    pub attempts: u32,
    pub collation: Option<String>,
    pub immediate: bool,
    /// The release time when it is known without modelling the order
    /// (single reservations: immediate jobs, requeued jobs, jobs without a
    /// collation); `None` for collated or moved jobs.
    pub release: Option<i64>,
}

impl MJob {
    pub fn pj(&self) -> PJ {
        PJ {
            payload: self.payload.clone(),
            created_at: self.created_at,
            attempts: self.attempts,
            collation: self.collation.clone(),
            immediate: self.immediate,
        }
    }
}

#[derive(Clone, Debug)]
pub struct MLease {
    pub key: JobKey,
    pub deadline: i64,
    /// The instance delivered; whether it is superseded follows from the
    /// newest instance of `key` (`Model::regraded_since`).
    pub job: MJob,
}

#[derive(Clone, Debug)]
pub struct MDead {
    pub died_at: i64,
    /// Order of burial (the core's tie-breaking sequence is increasing too).
    pub seq: u64,
    pub cause: DeathCause,
    pub job: MJob,
}

/// What becomes of a delivery that ends without success
/// (`Model::unsuccessful`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Superseded by a regrade: dropped, whatever its attempts.
    Dropped,
    /// Its attempts are used up: the dead list.
    Dies,
    /// Back in the queue (at once, or after its retry delay).
    ComesBack,
}

/// How a job instance left the system for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Acked,
    /// Handed out by a `LEASE 0` (at-most-once) pop.
    Consumed,
    /// Dropped for a newer job of its key: a pending retry dropped by a
    /// regrade, or a superseded delivery that was nacked or expired.
    Superseded,
    Cancelled,
    /// Queue-level `delete` (removes only the queued job).
    Deleted,
    Purged,
    /// Died again under the same key: the newer dead entry replaces it.
    DeadReplaced,
}

#[derive(Default)]
pub struct Model {
    pub queued: HashMap<JobKey, MJob>,
    pub delayed: HashMap<JobKey, (i64, MJob)>,
    pub leases: BTreeMap<u64, MLease>,
    pub dead: HashMap<JobKey, MDead>,
    pub dead_seq: u64,
    pub results: HashMap<JobKey, (i64, Vec<u8>)>,
    pub cancelled: BTreeMap<u64, i64>,
    /// Every token ever handed out, with its key.
    pub issued: HashMap<u64, JobKey>,
    pub issued_log: Vec<u64>,
    pub next_id: u64,
    pub fates: HashMap<u64, Fate>,
    /// Payloads of instances that ended (payloads are unique per write).
    pub ended_payloads: HashMap<Vec<u8>, Fate>,
    /// Attempts of each instance's last delivery.
    pub last_attempt: HashMap<u64, u32>,
    /// The newest instance of each key (the last one created, or brought
    /// back from the dead list): the only one that may be handed out.
    pub newest: HashMap<JobKey, u64>,
    pub events: BTreeMap<&'static str, usize>,
}

impl Model {
    pub fn ev(&mut self, name: &'static str) {
        *self.events.entry(name).or_insert(0) += 1;
    }

    pub fn new_job(
        &mut self,
        payload: &[u8],
        created_at: i64,
        collation: Option<String>,
        immediate: bool,
        release: Option<i64>,
    ) -> MJob {
        let id = self.next_id;
        self.next_id += 1;
        MJob {
            id,
            payload: payload.to_vec(),
            created_at,
            attempts: 0,
            collation,
            immediate,
            release,
        }
    }

    pub fn end(&mut self, job: &MJob, fate: Fate) {
        let prev = self.fates.insert(job.id, fate);
        assert!(prev.is_none(), "model: job instance {} ended twice", job.id);
        self.ended_payloads.insert(job.payload.clone(), fate);
        self.ev(match fate {
            Fate::Acked => "fate: acked",
            Fate::Consumed => "fate: consumed (LEASE 0)",
            Fate::Superseded => "fate: superseded (stale attempt dropped)",
            Fate::Cancelled => "fate: cancelled",
            Fate::Deleted => "fate: deleted",
            Fate::Purged => "fate: purged",
            Fate::DeadReplaced => "fate: dead entry replaced",
        });
    }

    pub fn waiting(&self, key: &JobKey) -> bool {
        self.queued.contains_key(key) || self.delayed.contains_key(key)
    }

    /// "If the orca key was enqueued again since this delivery began (a
    /// regrade), this attempt is dropped (`superseded`)" (ORCA.NACK): a newer
    /// instance of the key exists than the one this lease delivered.
    pub fn regraded_since(&self, l: &MLease) -> bool {
        self.newest.get(&l.key) != Some(&l.job.id)
    }

    /// A new job instance `id` under `key` (enqueued anew, or brought back
    /// from the dead list): from now on it is the one that may run. "A
    /// pending retry of the key is dropped" at once (ORCA.ACK, "Regrades");
    /// running deliveries of the key become superseded (`regraded_since`).
    pub fn new_instance(&mut self, key: &JobKey, id: u64) {
        let running = self
            .leases
            .values()
            .filter(|l| l.key == *key && !self.regraded_since(l))
            .count();
        self.newest.insert(*key, id);
        for _ in 0..running {
            self.ev("regrade: running lease superseded");
        }
        if let Some((_, j)) = self.delayed.remove(key) {
            self.end(&j, Fate::Superseded);
            self.ev("regrade: pending retry dropped");
        }
    }

    pub fn enqueue(
        &mut self,
        key: JobKey,
        coll: Option<&str>,
        priority: i64,
        payload: &[u8],
        now: i64,
    ) -> bool {
        if let Some(j) = self.queued.get_mut(&key) {
            j.payload = payload.to_vec();
            return false;
        }
        let release = if coll.is_none() {
            Some(now + priority)
        } else {
            None
        };
        let j = self.new_job(payload, now, coll.map(str::to_string), false, release);
        self.new_instance(&key, j.id);
        self.queued.insert(key, j);
        true
    }

    pub fn put_immediate(
        &mut self,
        key: JobKey,
        coll: Option<&str>,
        payload: &[u8],
        arrival: i64,
    ) -> bool {
        if let Some(j) = self.queued.get_mut(&key) {
            if !j.immediate {
                j.immediate = true;
                j.release = Some(arrival);
            }
            j.payload = payload.to_vec();
            return false;
        }
        let j = self.new_job(
            payload,
            arrival,
            coll.map(str::to_string),
            true,
            Some(arrival),
        );
        self.new_instance(&key, j.id);
        self.queued.insert(key, j);
        true
    }

    pub fn move_job(&mut self, key: &JobKey, release: bool) -> Result<(), QueueError> {
        // docs/commands.md, ORCA.MOVE: a key that exists but is not in the
        // queue order is refused with where it is instead ("job is running",
        // "waiting to be retried (at <ms>)", "a dead letter").
        if !self.queued.contains_key(key) {
            return Err(if self.leases.values().any(|l| l.key == *key) {
                QueueError::Leased
            } else if let Some((retry_at, _)) = self.delayed.get(key) {
                QueueError::Delayed(*retry_at)
            } else if self.dead.contains_key(key) {
                QueueError::Dead
            } else {
                QueueError::NoSuchJob
            });
        }
        let j = self.queued.get_mut(key).ok_or(QueueError::NoSuchJob)?;
        if j.immediate {
            return Err(QueueError::ImmediateNotMovable);
        }
        if release {
            j.immediate = true;
        }
        j.release = None;
        Ok(())
    }

    pub fn delete(&mut self, key: &JobKey) -> bool {
        match self.queued.remove(key) {
            Some(j) => {
                self.end(&j, Fate::Deleted);
                true
            }
            None => false,
        }
    }

    /// What becomes of a delivery that ends without success: NACKed, or
    /// its lease expired. In the documentation's order: a superseded one is
    /// "dropped instead of coming back" whatever its attempts (ORCA.ACK,
    /// "Regrades"); one whose attempts are used up goes to the dead list;
    /// any other comes back (ORCA.NACK; ORCA.POP for an expired lease).
    pub fn unsuccessful(&self, l: &MLease, policy: &Policy) -> Ending {
        if self.regraded_since(l) {
            Ending::Dropped
        } else if attempts_used_up(policy, l.job.attempts) {
            Ending::Dies
        } else {
            Ending::ComesBack
        }
    }

    /// "Comes back as immediate at its original arrival time" (ORCA.NACK;
    /// an expired lease likewise, ORCA.POP). Only the newest instance of a
    /// key comes back, and it is never waiting twice: a key found waiting
    /// here is a bug of the model's books.
    pub fn come_back(&mut self, key: JobKey, mut job: MJob) {
        assert!(
            !self.waiting(&key) && self.newest.get(&key) == Some(&job.id),
            "model: {} comes back while its key waits, or as a stale instance",
            kname(&key)
        );
        job.immediate = true;
        job.release = Some(job.created_at);
        self.queued.insert(key, job);
    }

    pub fn bury(&mut self, key: JobKey, job: MJob, now: i64, cause: DeathCause) {
        if let Some(old) = self.dead.remove(&key) {
            self.end(&old.job, Fate::DeadReplaced);
        }
        self.dead_seq += 1;
        let seq = self.dead_seq;
        self.dead.insert(
            key,
            MDead {
                died_at: now,
                seq,
                cause,
                job,
            },
        );
    }

    pub fn tick(&mut self, now: i64, policy: &Policy) -> TickReport {
        let mut report = TickReport::default();
        let mut due: Vec<(i64, u64)> = self
            .leases
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(t, l)| (l.deadline, *t))
            .collect();
        due.sort_unstable();
        for (_, token) in due {
            let l = self.leases.remove(&token).unwrap();
            // Every lease that ends by expiry counts, whatever becomes of it.
            report.expired += 1;
            match self.unsuccessful(&l, policy) {
                Ending::Dropped => {
                    self.end(&l.job, Fate::Superseded);
                    self.ev("tick: lease expired -> dropped (superseded)");
                }
                Ending::Dies => {
                    self.bury(l.key, l.job, now, DeathCause::Expired);
                    self.ev("tick: lease expired -> dead");
                    report.died += 1;
                }
                Ending::ComesBack => {
                    self.come_back(l.key, l.job);
                    self.ev("tick: lease expired -> requeued");
                    report.requeued += 1;
                }
            }
        }
        let mut due: Vec<(i64, JobKey)> = self
            .delayed
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(k, (at, _))| (*at, *k))
            .collect();
        due.sort_unstable();
        for (_, key) in due {
            let (_, job) = self.delayed.remove(&key).unwrap();
            // "When due it comes back as immediate at its original arrival
            // time" (docs/design.md, Workers); a regrade dropped it already.
            report.retried += 1;
            self.come_back(key, job);
            self.ev("tick: retry due -> requeued");
            report.requeued += 1;
        }
        let old: Vec<JobKey> = self
            .results
            .iter()
            .filter(|(_, (at, _))| *at <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in old {
            self.results.remove(&key);
            self.ev("tick: result forgotten");
            report.forgotten += 1;
        }
        let old: Vec<u64> = self
            .cancelled
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(t, _)| *t)
            .collect();
        for token in old {
            self.cancelled.remove(&token);
            self.ev("tick: cancellation forgotten");
            report.forgotten += 1;
        }
        report
    }

    pub fn held(&self, key: &JobKey, token: u64) -> Result<&MLease, QueueError> {
        match self.leases.get(&token) {
            Some(l) if l.key == *key => Ok(l),
            _ if self.cancelled.contains_key(&token) => Err(QueueError::Cancelled),
            _ => Err(QueueError::LeaseNotHeld),
        }
    }

    pub fn ack(
        &mut self,
        key: &JobKey,
        token: u64,
        result: Option<&[u8]>,
        now: i64,
        ttl: i64,
    ) -> Result<(), QueueError> {
        self.held(key, token)?;
        if result.is_some() && !(0..=MAX_TIME).contains(&now) {
            return Err(QueueError::TimeOverflow);
        }
        let l = self.leases.remove(&token).unwrap();
        self.end(&l.job, Fate::Acked);
        if let Some(r) = result {
            if ttl > 0 {
                let at = now.saturating_add(ttl).min(MAX_TIME);
                self.results.insert(*key, (at, r.to_vec()));
            }
        }
        Ok(())
    }

    pub fn nack(
        &mut self,
        key: &JobKey,
        token: u64,
        delay: Option<i64>,
        now: i64,
        policy: &Policy,
    ) -> Result<NackOutcome, QueueError> {
        // "Errors: as ORCA.ACK": only the worker holding the lease is heard.
        let attempts = self.held(key, token)?.job.attempts;
        // "ERR time out of range": the clock, and the retry time it gives
        // (times are 0..=2^53-1).
        if !(0..=MAX_TIME).contains(&now) {
            return Err(QueueError::TimeOverflow);
        }
        // "not handed out before now + DELAY (default: exponential backoff
        // ...)".
        let delay = delay.unwrap_or_else(|| documented_backoff(policy, attempts));
        if delay < 0 || delay > MAX_TIME - now {
            return Err(QueueError::TimeOverflow);
        }
        let l = self.leases.remove(&token).unwrap();
        Ok(match self.unsuccessful(&l, policy) {
            Ending::Dropped => {
                self.end(&l.job, Fate::Superseded);
                NackOutcome::Superseded
            }
            Ending::Dies => {
                self.bury(*key, l.job, now, DeathCause::Failed);
                NackOutcome::Dead { attempts }
            }
            // "`DELAY 0`: back in the queue at once".
            Ending::ComesBack if delay == 0 => {
                self.come_back(*key, l.job);
                NackOutcome::Retry {
                    retry_at: now,
                    attempts,
                }
            }
            // "parked (state `delayed`)" until then.
            Ending::ComesBack => {
                self.delayed.insert(*key, (now + delay, l.job));
                NackOutcome::Retry {
                    retry_at: now + delay,
                    attempts,
                }
            }
        })
    }

    pub fn extend(
        &mut self,
        key: &JobKey,
        token: u64,
        ms: i64,
        now: i64,
    ) -> Result<i64, QueueError> {
        self.held(key, token)?;
        if ms < 0 || now < 0 || ms > MAX_TIME - now {
            return Err(QueueError::TimeOverflow);
        }
        self.leases.get_mut(&token).unwrap().deadline = now + ms;
        Ok(now + ms)
    }

    pub fn cancel(&mut self, key: &JobKey) -> bool {
        let mut removed = false;
        if let Some(j) = self.queued.remove(key) {
            self.end(&j, Fate::Cancelled);
            removed = true;
        }
        if let Some((_, j)) = self.delayed.remove(key) {
            self.end(&j, Fate::Cancelled);
            removed = true;
        }
        if let Some(d) = self.dead.remove(key) {
            self.end(&d.job, Fate::Cancelled);
            removed = true;
        }
        let tokens: Vec<u64> = self
            .leases
            .iter()
            .filter(|(_, l)| l.key == *key)
            .map(|(t, _)| *t)
            .collect();
        for t in tokens {
            let l = self.leases.remove(&t).unwrap();
            self.end(&l.job, Fate::Cancelled);
            self.cancelled
                .insert(t, l.deadline.saturating_add(CANCEL_MEMORY_MS).min(MAX_TIME));
            removed = true;
        }
        removed
    }

    pub fn dead_requeue(&mut self, key: &JobKey, now: i64) -> Result<(), QueueError> {
        if !(0..=MAX_TIME).contains(&now) {
            return Err(QueueError::TimeOverflow);
        }
        if !self.dead.contains_key(key) {
            return Err(QueueError::NoSuchJob);
        }
        if self.waiting(key) {
            return Err(QueueError::AlreadyQueued);
        }
        let mut j = self.dead.remove(key).unwrap().job;
        j.attempts = 0;
        j.immediate = true;
        j.release = Some(now);
        self.last_attempt.remove(&j.id);
        self.new_instance(key, j.id);
        self.queued.insert(*key, j);
        Ok(())
    }

    pub fn dead_purge(&mut self) -> usize {
        let all: Vec<MDead> = self.dead.drain().map(|(_, d)| d).collect();
        for d in &all {
            self.end(&d.job, Fate::Purged);
        }
        all.len()
    }

    pub fn dead_list(&self) -> Vec<(JobKey, &MDead)> {
        let mut v: Vec<(JobKey, &MDead)> = self.dead.iter().map(|(k, d)| (*k, d)).collect();
        v.sort_by_key(|(_, d)| (d.died_at, d.seq));
        v
    }

    pub fn next_deadline(&self) -> Option<i64> {
        let leases = self.leases.values().map(|l| l.deadline);
        let delayed = self.delayed.values().map(|(at, _)| *at);
        let results = self.results.values().map(|(at, _)| *at);
        let cancelled = self.cancelled.values().copied();
        leases.chain(delayed).chain(results).chain(cancelled).min()
    }

    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.queued.len(),
            self.delayed.len(),
            self.leases.len(),
            self.dead.len(),
        )
    }

    /// What `states(key)` must say (queued position taken from the core's
    /// order, release time from the core when the model does not know it).
    pub fn states(&self, key: &JobKey, pos: Option<usize>, core_release: Option<i64>) -> Vec<S> {
        let mut out = Vec::new();
        if let Some(j) = self.queued.get(key) {
            out.push(S::Queued {
                pos: pos.unwrap_or(0),
                release_at: j.release.or(core_release).unwrap_or(-1),
                job: j.pj(),
            });
        }
        if let Some((at, j)) = self.delayed.get(key) {
            out.push(S::Delayed {
                retry_at: *at,
                job: j.pj(),
            });
        }
        for (t, l) in &self.leases {
            if l.key == *key {
                out.push(S::Leased {
                    token: *t,
                    deadline: l.deadline,
                    superseded: self.regraded_since(l),
                    job: l.job.pj(),
                });
            }
        }
        if let Some(d) = self.dead.get(key) {
            out.push(S::Dead {
                died_at: d.died_at,
                cause: d.cause,
                job: d.job.pj(),
            });
        }
        out
    }

    /// No job lost: every instance is in exactly one place or has exactly
    /// one fate.
    pub fn ledger(&self) -> Result<(), String> {
        let mut live: HashMap<u64, usize> = HashMap::new();
        let ids = self
            .queued
            .values()
            .chain(self.delayed.values().map(|(_, j)| j))
            .chain(self.leases.values().map(|l| &l.job))
            .chain(self.dead.values().map(|d| &d.job))
            .map(|j| j.id);
        for id in ids {
            *live.entry(id).or_insert(0) += 1;
        }
        // Only the newest instance of a key is current: per key at most one
        // of queued job, delayed retry and lease that is not superseded,
        // and that one is the newest instance.
        let mut current: HashMap<JobKey, Vec<u64>> = HashMap::new();
        let cur = self
            .queued
            .iter()
            .map(|(k, j)| (*k, j.id))
            .chain(self.delayed.iter().map(|(k, (_, j))| (*k, j.id)))
            .chain(
                self.leases
                    .values()
                    .filter(|l| !self.regraded_since(l))
                    .map(|l| (l.key, l.job.id)),
            );
        for (key, id) in cur {
            current.entry(key).or_default().push(id);
        }
        for (key, ids) in &current {
            if ids.len() > 1 || self.newest.get(key) != Some(&ids[0]) {
                return Err(format!(
                    "model: {} has current instances {ids:?}, newest {:?}",
                    kname(key),
                    self.newest.get(key)
                ));
            }
        }
        for id in 0..self.next_id {
            let n = live.get(&id).copied().unwrap_or(0) + self.fates.contains_key(&id) as usize;
            if n != 1 {
                return Err(format!(
                    "model ledger: job instance {id} is in {} places and has fate {:?}",
                    live.get(&id).copied().unwrap_or(0),
                    self.fates.get(&id)
                ));
            }
        }
        Ok(())
    }
}

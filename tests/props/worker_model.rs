//! The reference model of the worker layer: leases, ack/nack, retries with
//! backoff, dead letters, kept results, cancellation and `tick`, and the
//! queue's policies. What `tests/props/worker_sequences/` checks the core
//! against.
//!
//! An oracle only if it does not restate the code it checks. The model
//! keeps its own books: every job *instance* (a regrade is a new one) has an
//! id, and each key remembers its newest instance. Where queued and held
//! jobs are placed (reservations, stacks, pairing, gates, automatic delays)
//! is the order model's business (`queue_model.rs`, `gates_model.rs`,
//! `window_model.rs`), which this model composes (`order`), so pop order,
//! positions and release times are predicted, not read from the core. The
//! policies have a file each: lifetimes (`lifetime_model.rs`), running caps
//! (`caps_model.rs`), dead-letter and result bounds (`bounds_model.rs`);
//! what the model says the core must report is in `worker_observe.rs`.
//! The rules for a failed or expired delivery are written from the
//! documentation, quoted where they are used, not from
//! `src/core/worker.rs`:
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
//! - `ORCA.TICK`: "Applies the time-driven changes due now: expired leases
//!   come back (or die), due retries come back, waiting jobs past the
//!   queue's lifetime become dead letters, old dead letters (`DEADTTL`),
//!   results, cancellation records and submission windows are forgotten",
//!   in that order (`tick`).

use std::collections::{BTreeMap, HashMap};

use orca::core::worker::{DeathCause, CANCEL_MEMORY_MS};
use orca::core::{
    JobConfig, JobKey, Move, NackOutcome, Policy, Put, QueueError, Settings, TickReport, MAX_TIME,
};

use crate::caps_model::running_of;
use crate::queue_model::Model as OrderModel;
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
    /// A dead letter forgotten: beyond `DEADMAX`, or `DEADTTL` after it died.
    Forgotten,
    /// Held behind a gate that was dropped (`ORCA.GATE ... DROP`).
    GateDropped,
}

pub struct Model {
    /// Where queued and held jobs are: reservations, stacks, gates, the
    /// submission window (the order model).
    pub order: OrderModel,
    /// The queue's settings (`ORCA.SETTINGS`); the order and the automatic
    /// delay are the order model's.
    pub settings: Settings,
    /// Queued and held jobs (their placement is in `order`).
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
    /// Collations whose running count fell below the cap during the
    /// current operation (`caps_model.rs`).
    pub uncapped: Vec<String>,
}

impl Model {
    pub fn new(settings: Settings) -> Self {
        let mut order = OrderModel::new(settings.order);
        order.window.set(settings.autodelay);
        Model {
            order,
            settings,
            queued: HashMap::new(),
            delayed: HashMap::new(),
            leases: BTreeMap::new(),
            dead: HashMap::new(),
            dead_seq: 0,
            results: HashMap::new(),
            cancelled: BTreeMap::new(),
            issued: HashMap::new(),
            issued_log: Vec::new(),
            next_id: 0,
            fates: HashMap::new(),
            ended_payloads: HashMap::new(),
            last_attempt: HashMap::new(),
            newest: HashMap::new(),
            events: BTreeMap::new(),
            uncapped: Vec::new(),
        }
    }

    pub fn ev(&mut self, name: &'static str) {
        *self.events.entry(name).or_insert(0) += 1;
    }

    pub fn new_job(
        &mut self,
        payload: &[u8],
        created_at: i64,
        collation: Option<String>,
        immediate: bool,
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
            Fate::Forgotten => "fate: dead letter forgotten (DEADMAX/DEADTTL)",
            Fate::GateDropped => "fate: dropped with its gate",
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

    /// `ORCA.ENQUEUE` (placement, gates and automatic delay by the order
    /// model): a new instance, or the payload of the queued or held one
    /// replaced.
    pub fn enqueue(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        now: i64,
    ) -> Result<Put, QueueError> {
        let key = cfg.job_key;
        let (_, put) = self.order.enqueue(cfg, payload, now)?;
        if !put.created {
            self.queued.get_mut(&key).unwrap().payload = payload.to_vec();
            return Ok(put);
        }
        let j = self.new_job(payload, now, cfg.collation.clone(), false);
        self.new_instance(&key, j.id);
        self.queued.insert(key, j);
        Ok(put)
    }

    pub fn put_immediate(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        arrival: i64,
    ) -> Result<Put, QueueError> {
        let key = cfg.job_key;
        let (_, put) = self.order.put_immediate(cfg, payload, arrival)?;
        if !put.created {
            let j = self.queued.get_mut(&key).unwrap();
            j.immediate = true;
            j.payload = payload.to_vec();
            return Ok(put);
        }
        let j = self.new_job(payload, arrival, cfg.collation.clone(), true);
        self.new_instance(&key, j.id);
        self.queued.insert(key, j);
        Ok(put)
    }

    pub fn move_job(&mut self, key: &JobKey, how: Move, now: i64) -> Result<Info, QueueError> {
        // docs/commands.md, ORCA.MOVE: a key that exists but is not in the
        // queue order is refused with where it is instead ("job is running",
        // "waiting to be retried (at <ms>)", "a dead letter", "held behind
        // gate"; the last by the order model).
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
        let info = self.order.move_job(key, how, now)?;
        let j = self.queued.get_mut(key).unwrap();
        j.immediate = info.immediate;
        Ok(self.info(key).unwrap())
    }

    pub fn delete(&mut self, key: &JobKey) -> bool {
        match self.queued.remove(key) {
            Some(j) => {
                self.order.delete(key);
                self.end(&j, Fate::Deleted);
                true
            }
            None => false,
        }
    }

    /// A queued or held job as the core reports it: placement from the
    /// order model, attempts from the instance.
    pub fn info(&self, key: &JobKey) -> Option<Info> {
        let j = self.queued.get(key)?;
        let mut info = self.order.info(key)?;
        info.attempts = j.attempts;
        Some(info)
    }

    /// The gate holding `key`, if it is held.
    pub fn held_gate(&self, key: &JobKey) -> Option<&[u8]> {
        self.order
            .job(key)?
            .held
            .as_ref()
            .map(|h| h.gate.as_slice())
    }

    /// `ORCA.POP`'s next job: the lowest reservation among those the
    /// running cap lets out (`caps_model.rs`), taken out of the queue with
    /// its attempt counted. The caller leases or consumes it.
    pub fn pop_one(&mut self) -> Option<(JobKey, MJob, Info)> {
        let max = self.settings.max_running;
        let leases = &self.leases;
        let eligible = |c: &str| max == 0 || running_of(leases, c) < max;
        let mut info = self.order.pop_where(eligible)?;
        let mut j = self
            .queued
            .remove(&info.key)
            .expect("model: popped job unknown");
        j.attempts += 1;
        info.attempts = j.attempts;
        Some((info.key, j, info))
    }

    /// The key `pop_one` would hand out next (nothing changes).
    pub fn peek_pop(&self) -> Option<JobKey> {
        let max = self.settings.max_running;
        let leases = &self.leases;
        let mut order = self.order.clone();
        order
            .pop_where(|c| max == 0 || running_of(leases, c) < max)
            .map(|i| i.key)
    }

    /// `ORCA.GATE ... DROP`: the held jobs go (`Fate::GateDropped`); their
    /// configs in arrival order.
    pub fn drop_gate(&mut self, gate: &[u8]) -> Vec<Vec<u8>> {
        let keys = self.order.held_keys(gate);
        let out = self.order.drop_gate(gate);
        for k in keys.iter().filter(|_| !out.is_empty()) {
            let j = self.queued.remove(k).unwrap();
            self.end(&j, Fate::GateDropped);
        }
        out
    }

    /// `ORCA.SETTINGS`: "With options, changes those given (the others
    /// stay)". Bounds hold at once ("most dead letters kept", "most kept ACK
    /// results"); "`AUTODELAY 0 0` turns it off (and forgets the window)".
    pub fn set_settings(&mut self, s: Settings) {
        self.settings = s;
        self.order.order = s.order;
        self.order.window.set(s.autodelay);
        self.trim_dead();
        self.trim_results();
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
        let score = job.created_at.clamp(0, MAX_TIME);
        self.order.insert_immediate(
            key,
            &job.payload,
            job.created_at,
            job.collation.as_deref(),
            score,
        );
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
        self.trim_dead();
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
            let l = self.end_lease(token);
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
        self.expire_lifetimes(now, &mut report);
        self.forget_old_dead(now, &mut report);
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
        for _ in 0..self.order.window.forget(now) {
            self.ev("tick: submission window forgotten");
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
        let l = self.end_lease(token);
        self.end(&l.job, Fate::Acked);
        if let Some(r) = result {
            if ttl > 0 {
                let at = now.saturating_add(ttl).min(MAX_TIME);
                self.results.insert(*key, (at, r.to_vec()));
                self.trim_results();
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
        // "TIMERANGE time out of range": the clock, and the retry time it gives
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
        let l = self.end_lease(token);
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
            self.order.delete(key);
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
            let l = self.end_lease(t);
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
        // "`REQUEUE` puts one back as immediate at now with a fresh set of
        // attempts".
        let mut j = self.dead.remove(key).unwrap().job;
        j.attempts = 0;
        j.immediate = true;
        self.last_attempt.remove(&j.id);
        self.new_instance(key, j.id);
        self.order
            .insert_immediate(*key, &j.payload, j.created_at, j.collation.as_deref(), now);
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
}

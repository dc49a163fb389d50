//! The Orca grading queue as one in-memory value.
//!
//! Nothing here knows about Redis: every operation takes the time (`now`, ms)
//! as an argument, so the queue is deterministic and can be tested and
//! replayed exactly. See docs/design.md for the model and its invariants.
//!
//! `Queue` coordinates its parts (docs/design.md, "The map"): the records
//! (`records/`: jobs, the global order, collations and their pairing), the
//! work state (`work/`: leases, retries, dead letters, results), and the
//! policies (gates, the submission window, running caps, lifetimes). This
//! file holds the puts (ENQUEUE, IMMEDIATE, REENQUEUE), MOVE, DELETE, POP
//! and the views of queued jobs; the other commands are in `worker.rs`,
//! `held.rs`, `lifetime.rs`, `inspect.rs`, `compact.rs`, `check.rs` and
//! `codec/`.

use std::borrow::Cow;

use super::caps::{busiest_of, Caps};
use super::config::{JobConfig, JobKey};
use super::error::QueueError;
use super::gates::Gates;
use super::ids::{CollId, JobId, NodeId};
pub use super::job::JobInfo;
pub(crate) use super::job::LoadedJob;
use super::limits::{valid_time, MAX_TIME};
pub(crate) use super::records::{Popped, Records};
pub use super::reservation::ResKey;
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
    /// The jobs, the global order, the collations and the counters.
    pub(crate) records: Records,
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
            records: Records::default(),
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
                self.records.release_coll(c);
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
        let r = &self.records;
        // Read by set_max only when a cap is set: no pass otherwise.
        let singles = r.singles().map(|(_, n)| (r.rk(n), n));
        let leased = self.work.leases().filter_map(|(_, l)| l.job.coll_id());
        self.caps.set_max(max, singles, r.heads(), leased);
    }

    /// Keep collation `c`'s entry in the eligibility index right (its
    /// running count changed).
    pub(crate) fn sync_cap(&mut self, c: CollId) {
        if self.caps.on() {
            self.caps.sync(c, self.records.head(c));
        }
    }

    /// Does the queued job under `key` wait only because its collation is
    /// at the running cap?
    pub fn waits_for_cap(&self, key: &JobKey) -> bool {
        self.caps.on()
            && self.job_id(key).is_some_and(|j| {
                self.records
                    .stacked_in(j)
                    .is_some_and(|c| self.caps.capped(c))
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
        self.records.contains(key)
    }

    /// Number of queued jobs (held jobs not included).
    pub fn len(&self) -> usize {
        self.records.job_count() - self.gates.held_count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Collations with queued jobs in their stack.
    pub fn collation_count(&self) -> usize {
        self.records.collation_count()
    }

    /// Is a queued job placed as immediate?
    pub fn is_immediate(&self, key: &JobKey) -> bool {
        self.job_id(key)
            .is_some_and(|j| self.records.job_immediate(j))
    }

    pub(crate) fn job_id(&self, key: &JobKey) -> Option<JobId> {
        self.records.job_id(key)
    }

    /// Collation `c`'s name.
    pub(crate) fn name_of(&self, c: CollId) -> Cow<'_, str> {
        self.records.name_of(c)
    }

    /// Refuse an operation (before it changes anything) when the sequence
    /// counters are near their limit, so every queue stays reloadable.
    pub(crate) fn seq_room(&self) -> Result<(), QueueError> {
        self.records.seq_room()
    }

    /// The stack key of a job arriving now in a collation stack.
    fn arrival_skey(&self, seq: i64) -> i64 {
        match self.settings.order {
            Order::Lifo => -seq,
            Order::Fifo => seq,
        }
    }

    /// Remove whatever reservation the job holds (single or paired), or
    /// take a held job out of its gate.
    pub(crate) fn detach(&mut self, j: JobId) -> Result<(), QueueError> {
        if self.records.job(j).held() {
            self.unhold(j)
                .map(|_| ())
                .ok_or_else(|| corrupt("held job missing from its gate"))
        } else {
            self.records.detach(j, &mut self.caps)
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
            self.records.replace_payload(j, payload);
            let held = self.records.job(j).held();
            let put = Put {
                created: false,
                delay: 0,
                held,
            };
            return Ok((self.info_of(j)?, put));
        }
        self.records.seq_room()?;
        self.records.room()?;
        let coll = cfg.collation.as_deref();
        let auto = self.settings.autodelay;
        let delay = match coll {
            Some(name) if auto.on() => self
                .records
                .coll_id(name)
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
        let j = self.records.new_job(key, payload.into(), now, 0, coll)?;
        let seq = self.records.alloc_seq();
        let c = self.records.job(j).coll_id();
        let rk = ResKey {
            score: release,
            tie: seq,
        };
        match (gate, c) {
            (Some(g), _) => {
                let skey = if c.is_some() {
                    self.arrival_skey(seq)
                } else {
                    seq
                };
                self.hold(j, g, skey, priority, false);
            }
            (None, None) => self
                .records
                .place_single(j, rk, seq as u64, false, &mut self.caps)?,
            (None, Some(c)) => {
                let skey = self.arrival_skey(seq);
                self.records
                    .collate(c, j, skey, rk, seq as u64, &mut self.caps)?;
            }
        }
        if let (Some(c), true) = (c, auto.on()) {
            if self.window.record(c, now, auto.window) {
                self.records.add_coll_ref(c)?;
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
        self.records.seq_room()?;
        self.records.room()?;
        let key = cfg.job_key;
        if let Some(j) = self.job_id(&key) {
            let held = self.records.job(j).held();
            if held {
                self.hold_as_immediate(j);
            } else if !self.records.job_immediate(j) {
                self.records.detach(j, &mut self.caps)?;
                self.records.add_single(j, arrival, true, &mut self.caps)?;
            }
            self.records.replace_payload(j, payload);
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
        let j = self
            .records
            .new_job(key, payload.into(), arrival, 0, cfg.collation.as_deref())?;
        match gate {
            Some(g) => {
                let seq = self.records.alloc_seq();
                self.hold(j, g, seq, 0, true);
            }
            None => self.records.add_single(j, arrival, true, &mut self.caps)?,
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
        let r = &mut self.records;
        if let Err(e) = r.room() {
            if let Some(c) = coll {
                r.release_coll(c);
            }
            return Err(e);
        }
        let j = r.new_job_ref(job.key, job.payload, job.created_at, job.attempts, coll)?;
        r.add_single(j, score, immediate, &mut self.caps)
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
            Some(j) if !self.records.job(j).held() => j,
            _ => return Err(self.not_movable(key)),
        };
        if self.records.job_immediate(j) {
            return Err(QueueError::ImmediateNotMovable);
        }
        if let Move::Delay { buffer } = how {
            if !(0..=MAX_TIME).contains(&buffer) {
                return Err(QueueError::TimeOverflow);
            }
        }
        self.records.seq_room()?;
        let r = &mut self.records;
        match how {
            Move::Release => {
                if !(0..=MAX_TIME).contains(&now) {
                    return Err(QueueError::TimeOverflow);
                }
                r.detach(j, &mut self.caps)?;
                r.add_front(j, now, &mut self.caps)?;
            }
            Move::Delay { buffer } => {
                let last = r.last_score().unwrap_or(now);
                let score = last
                    .checked_add(buffer)
                    .filter(|t| (0..=MAX_TIME).contains(t))
                    .ok_or(QueueError::TimeOverflow)?;
                if let Some(c) = r.stacked_in(j) {
                    r.detach_collated(j, &mut self.caps)?;
                    // The back of the stack: a key above every key given so far.
                    let seq = r.alloc_seq();
                    let rk = ResKey { score, tie: seq };
                    r.collate(c, j, seq, rk, seq as u64, &mut self.caps)?;
                } else {
                    r.detach(j, &mut self.caps)?;
                    r.add_single(j, score, false, &mut self.caps)?;
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
        self.records.drop_job(j)?;
        Ok(true)
    }

    /// `ORCA.POP`: the job of the lowest reservation (among those the
    /// running cap lets out), removed from the queue. Priority orders the
    /// queue; it does not hold jobs back, so the lowest reservation is taken
    /// even when its release time is in the future.
    pub fn pop(&mut self) -> Result<Option<JobInfo<'static>>, QueueError> {
        Ok(self.take_next()?.map(|p| self.records.finish_pop(p)))
    }

    /// The reservation the next pop takes: the lowest of the order, or of
    /// the cap's eligibility index when a running cap is set.
    pub(crate) fn next_node(&self) -> Option<NodeId> {
        if self.caps.on() {
            self.caps.first()
        } else {
            self.records.first()
        }
    }

    /// Take the job the next pop hands out: this is a delivery, so its
    /// attempts count one more.
    pub(crate) fn take_next(&mut self) -> Result<Option<Popped>, QueueError> {
        let first = self.next_node();
        let mut p = first
            .map(|n| self.records.take_node(n, &mut self.caps))
            .transpose()?;
        if let Some(p) = p.as_mut() {
            p.attempts = p.attempts.saturating_add(1);
        }
        Ok(p)
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
        let n = self.records.reservation_node(j)?;
        Ok((self.records.rk(n), self.records.nonce_of(n)))
    }

    fn info_of(&self, j: JobId) -> Result<JobInfo<'_>, QueueError> {
        if let Some(info) = self.held_info(j) {
            return Ok(info);
        }
        Ok(self.records.info_at(j, self.records.reservation_node(j)?))
    }

    /// A queued job as clients see it.
    pub fn info(&self, key: &JobKey) -> Result<JobInfo<'_>, QueueError> {
        self.info_of(self.job_id(key).ok_or(QueueError::NoSuchJob)?)
    }

    /// 1-based position of a queued job in pop order (that of the
    /// reservation it holds or is paired with).
    pub fn position(&self, key: &JobKey) -> Result<usize, QueueError> {
        let j = self.job_id(key).ok_or(QueueError::NoSuchJob)?;
        let n = self.records.reservation_node(j)?;
        self.records.position_of(n)
    }

    /// Job keys in pop order (linear; for tests, checks and listings).
    pub fn pop_order(&self) -> Vec<JobKey> {
        self.records.pop_order()
    }

    /// Rough heap footprint in bytes, for `MEMORY USAGE`.
    pub fn mem_usage(&self) -> usize {
        std::mem::size_of::<Queue>()
            + self.records.heap_bytes()
            + self.work.heap_bytes()
            + self.gates.heap_bytes()
            + self.window.heap_bytes()
            + self.caps.heap_bytes()
    }
}

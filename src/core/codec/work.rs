//! The work state's units: a running delivery (lease), a job waiting for
//! its retry, a dead letter, a kept result, a cancelled lease remembered for
//! a late worker. Each parked job is written with its collation's name and
//! holds a reference on it once loaded. Written in canonical order (leases
//! by token, retries by time, dead letters in the order they died, ...).

use super::io::{RawParked, Reader, Writer};
use super::{
    corrupt, QueueBuilder, ENCODING_V3, UNIT_CANCELLED, UNIT_DEAD, UNIT_DELAYED, UNIT_LEASE,
    UNIT_RESULT,
};
use crate::core::error::QueueError;
use crate::core::ids::CollId;
use crate::core::limits::SEQ_LOAD_LIMIT;
use crate::core::queue::Queue;
use crate::core::work::{Dead, DeathCause, Delayed, Lease, Parked, StoredResult};

impl Queue {
    /// The lease, delayed, dead, result and cancelled units.
    pub(super) fn write_work_units(&self, w: &mut Writer, f: &mut impl FnMut(&[u8])) {
        let name = |c: Option<CollId>| c.map(|c| self.name_of(c));
        let work = &self.work;
        let mut leases: Vec<(u64, &Lease)> = work.leases().collect();
        leases.sort_unstable_by_key(|(t, _)| *t);
        for (token, l) in leases {
            w.0.clear();
            w.u8(UNIT_LEASE);
            w.u64(token);
            w.0.extend_from_slice(&l.key);
            w.i64(l.deadline);
            w.u8(l.superseded as u8);
            w.parked(&l.job, name(l.job.coll).as_deref());
            w.i64(l.started_at);
            w.optional_bytes(l.worker.as_deref());
            f(&w.0);
        }
        for (key, d) in work.delayed_page(0, usize::MAX) {
            w.0.clear();
            w.u8(UNIT_DELAYED);
            w.0.extend_from_slice(&key);
            w.i64(d.retry_at);
            w.parked(&d.job, name(d.job.coll).as_deref());
            w.optional_bytes(d.error.as_deref());
            f(&w.0);
        }
        for (key, d) in work.dead_page(0, usize::MAX) {
            w.0.clear();
            w.u8(UNIT_DEAD);
            w.0.extend_from_slice(&key);
            w.i64(d.died_at);
            w.i64(d.seq);
            w.u8(d.cause as u8);
            w.parked(&d.job, name(d.job.coll).as_deref());
            w.optional_bytes(d.error.as_deref());
            f(&w.0);
        }
        for (key, r) in work.results() {
            w.0.clear();
            w.u8(UNIT_RESULT);
            w.0.extend_from_slice(&key);
            w.i64(r.expires_at);
            w.bytes(&r.payload);
            w.i64(r.finished_at);
            w.u64(r.token);
            w.i64(r.created_at);
            w.u32(r.attempts);
            w.optional_name(r.collation.as_deref());
            f(&w.0);
        }
        for (token, until) in work.cancelled() {
            w.0.clear();
            w.u8(UNIT_CANCELLED);
            w.u64(token);
            w.i64(until);
            f(&w.0);
        }
    }
}

impl QueueBuilder {
    /// A parked job read from a unit: its collation is acquired (the parked
    /// job holds that reference).
    pub(super) fn parked(&mut self, raw: RawParked<'_>) -> Result<Parked, QueueError> {
        let (created_at, attempts, immediate, collation, payload) = raw;
        let coll = match collation {
            Some(name) => Some(self.q.records.acquire_coll(name)?),
            None => None,
        };
        Ok(Parked {
            payload: payload.into(),
            created_at,
            attempts,
            coll,
            immediate,
        })
    }

    /// A running delivery.
    pub(super) fn add_lease(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let token = r.token()?;
        let key = r.key()?;
        let deadline = r.time()?;
        let superseded = r.flag("superseded")?;
        let raw = r.parked()?;
        let (started_at, worker) = if self.version >= ENCODING_V3 {
            (r.time()?, r.optional_bytes("worker")?)
        } else {
            (0, None)
        };
        r.done()?;
        let w = &self.q.work;
        if w.lease(token).is_some() || w.is_cancelled(token) {
            return Err(corrupt("duplicate lease token"));
        }
        let job = self.parked(raw)?;
        self.max_seq = self.max_seq.max(token as i64);
        let lease = Lease {
            key,
            deadline,
            job,
            superseded,
            started_at,
            worker: worker.map(Box::from),
        };
        if let Err(l) = self.q.lease_insert(token, lease) {
            self.q.release_parked(l.job);
            return Err(corrupt("more leases than a queue can hold"));
        }
        Ok(())
    }

    /// A job waiting for its retry time.
    pub(super) fn add_delayed(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let key = r.key()?;
        let retry_at = r.time()?;
        let raw = r.parked()?;
        let error = r.error_text(self.version)?.map(Box::from);
        r.done()?;
        if self.q.work.is_delayed(&key) {
            return Err(corrupt("duplicate delayed job"));
        }
        let job = self.parked(raw)?;
        self.q.work.park(
            key,
            Delayed {
                retry_at,
                job,
                error,
            },
        );
        Ok(())
    }

    /// A dead letter.
    pub(super) fn add_dead(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let key = r.key()?;
        let died_at = r.time()?;
        let seq = r.i64()?;
        if !(1..SEQ_LOAD_LIMIT).contains(&seq) {
            return Err(corrupt("dead sequence out of range"));
        }
        let cause =
            DeathCause::from_u8(r.u8()?).ok_or_else(|| corrupt("unknown cause of death"))?;
        let raw = r.parked()?;
        let error = r.error_text(self.version)?.map(Box::from);
        r.done()?;
        if self.q.work.is_dead(&key) {
            return Err(corrupt("duplicate dead job"));
        }
        let job = self.parked(raw)?;
        self.max_seq = self.max_seq.max(seq);
        let dead = Dead {
            died_at,
            seq,
            cause,
            job,
            error,
        };
        self.q.work.bury(key, dead);
        Ok(())
    }

    /// A kept ACK result.
    pub(super) fn add_result(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let key = r.key()?;
        let expires_at = r.time()?;
        let payload = r.bytes()?;
        let (finished_at, token, created_at, attempts, collation) = if self.version >= ENCODING_V3 {
            let finished_at = r.time()?;
            let token = r.u64()?;
            if token as i64 >= SEQ_LOAD_LIMIT || (token as i64) < 0 {
                return Err(corrupt("result token out of range"));
            }
            (
                finished_at,
                token,
                r.time()?,
                r.u32()?,
                r.optional_collation()?,
            )
        } else {
            (0, 0, 0, 0, None)
        };
        r.done()?;
        let w = &mut self.q.work;
        if w.result(&key).is_some() {
            return Err(corrupt("duplicate result"));
        }
        self.max_seq = self.max_seq.max(token as i64);
        let kept = StoredResult {
            expires_at,
            payload: payload.into(),
            finished_at,
            token,
            created_at,
            attempts,
            collation: collation.map(Box::from),
        };
        w.keep_result(key, kept);
        Ok(())
    }

    /// A cancelled lease, remembered for a late worker.
    pub(super) fn add_cancelled(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let token = r.token()?;
        let until = r.time()?;
        r.done()?;
        let w = &mut self.q.work;
        if w.is_cancelled(token) || w.lease(token).is_some() {
            return Err(corrupt("duplicate cancelled lease"));
        }
        self.max_seq = self.max_seq.max(token as i64);
        w.remember_cancelled(token, until);
        Ok(())
    }
}

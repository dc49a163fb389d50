//! The records' units: a single job (immediate, or without a collation)
//! with its reservation, and one whole collation (its stack in pop order
//! with stack keys, then its reservations). Written in canonical order
//! (single jobs in reservation order, collations by name); each is loaded
//! through `Records::load_single` / `load_collation`, which refuse it whole
//! if it collides with what is loaded.

use super::io::{Reader, Writer};
use super::{corrupt, QueueBuilder, ENCODING_V2, UNIT_COLLATION, UNIT_SINGLE};
use crate::core::error::QueueError;
use crate::core::job::LoadedJob;
use crate::core::limits::SEQ_LOAD_LIMIT;
use crate::core::queue::Queue;
use std::collections::HashSet;

impl Queue {
    /// The single-job units, then the collation units.
    pub(super) fn write_record_units(&self, w: &mut Writer, f: &mut impl FnMut(&[u8])) {
        let r = &self.records;
        for (j, n) in r.singles() {
            let job = r.job(j);
            let rk = r.rk(n);
            w.0.clear();
            w.u8(UNIT_SINGLE);
            w.job(&job.key, job.created_at, r.attempts(j), &job.payload);
            w.optional_name(r.coll_name(j).as_deref());
            w.i64(rk.score);
            w.i64(rk.tie);
            w.u64(r.nonce_of(n));
            w.u8(r.is_immediate(n) as u8);
            f(&w.0);
        }
        for c in r.collations_by_name() {
            w.0.clear();
            w.u8(UNIT_COLLATION);
            w.bytes(r.name_of(c).as_bytes());
            w.u64(r.stack_len(c) as u64);
            for j in r.stack(c) {
                let job = r.job(j);
                w.job(&job.key, job.created_at, r.attempts(j), &job.payload);
                w.i64(job.skey);
            }
            for n in r.coll_reservations(c) {
                let rk = r.rk(n);
                w.i64(rk.score);
                w.i64(rk.tie);
                w.u64(r.nonce_of(n));
            }
            f(&w.0);
        }
    }
}

impl QueueBuilder {
    /// A single job (immediate, or without a collation) with its reservation.
    pub(super) fn add_single(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let (key, created_at, attempts, payload) = r.job()?;
        let collation = r.optional_collation()?;
        let (rk, nonce) = r.res()?;
        let immediate = r.flag("immediate")?;
        r.done()?;
        if rk.tie < 0 && !immediate {
            return Err(corrupt("front reservation of a job that is not immediate"));
        }
        self.note(rk, nonce);
        let q = &mut self.q;
        q.records.load_single(
            LoadedJob {
                key,
                created_at,
                attempts,
                skey: 0,
                payload: payload.into(),
            },
            collation,
            rk,
            nonce,
            immediate,
            &mut q.caps,
        )
    }

    /// A whole collation: its stack in pop order (with stack keys since
    /// version 2), then its reservations.
    pub(super) fn add_collation(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let name = r.collation_name()?;
        if self.q.records.has_collation(name) {
            return Err(corrupt("duplicate collation"));
        }
        let m = r.u64()?;
        if m == 0 {
            return Err(corrupt("empty collation"));
        }
        let mut jobs = Vec::new();
        for i in 0..m {
            let (key, created_at, attempts, payload) = r.job()?;
            let skey = if self.version >= ENCODING_V2 {
                r.skey()?
            } else {
                // Version 1 kept the stack's order only: keys below every
                // key a later arrival or move takes (those are +-seq).
                (i as i64).saturating_sub(m.min(SEQ_LOAD_LIMIT as u64) as i64)
            };
            self.check_skey(skey)?;
            jobs.push(LoadedJob {
                key,
                created_at,
                attempts,
                skey,
                payload: payload.into(),
            });
        }
        let mut res = Vec::new();
        let mut nonces = HashSet::new();
        for _ in 0..m {
            let (rk, nonce) = r.res()?;
            if rk.tie < 0 {
                return Err(corrupt("front reservation in a collation"));
            }
            if !nonces.insert(nonce) {
                return Err(corrupt("duplicate nonce in a collation"));
            }
            res.push((rk, nonce));
        }
        r.done()?;
        for (rk, nonce) in &res {
            self.note(*rk, *nonce);
        }
        let q = &mut self.q;
        q.records.load_collation(name, jobs, res, &mut q.caps)
    }
}

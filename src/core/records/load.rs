//! Adding whole units of records: a single job with its reservation, or a
//! collation with its stack and reservations, as read from an encoding
//! (`codec/`) or merged from another queue (`ORCA.IMPORT`). Each is refused
//! with nothing changed if it collides with what is stored.

use std::collections::HashSet;

use super::order::OrderWatch;
use super::{corrupt, Records};
use crate::core::containers::slab::MAX_ID;
use crate::core::error::QueueError;
use crate::core::job::LoadedJob;
use crate::core::reservation::{Owner, ResKey, ResLink};

impl Records {
    /// Add a loaded single job with its reservation. Refused with nothing
    /// changed if the key or the reservation is taken.
    pub fn load_single(
        &mut self,
        job: LoadedJob,
        collation: Option<&str>,
        rk: ResKey,
        nonce: u64,
        immediate: bool,
        watch: &mut impl OrderWatch,
    ) -> Result<(), QueueError> {
        if self.contains(&job.key) {
            return Err(corrupt("duplicate job key"));
        }
        if self.order.contains(&rk.into()) {
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
        self.place_single(j, rk, nonce, immediate, watch)
    }

    /// Add a loaded collation: its jobs (with strictly increasing stack
    /// keys, in stack order) and its reservations (any order). Refused with
    /// nothing changed if the collation has jobs here already, or a key or
    /// reservation is taken or repeated.
    pub fn load_collation(
        &mut self,
        name: &str,
        jobs: Vec<LoadedJob>,
        mut res: Vec<(ResKey, u64)>,
        watch: &mut impl OrderWatch,
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
        let mut keys = HashSet::with_capacity(jobs.len());
        if jobs
            .iter()
            .any(|j| !keys.insert(j.key) || self.contains(&j.key))
        {
            return Err(corrupt("duplicate job key"));
        }
        res.sort_unstable();
        if res.windows(2).any(|w| w[0].0 == w[1].0)
            || res.iter().any(|r| self.order.contains(&r.0.into()))
        {
            return Err(corrupt("duplicate reservation"));
        }
        if self.jobs.len() + jobs.len() >= MAX_ID as usize
            || self.order.len() + res.len() >= MAX_ID as usize
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
            let n = self.add_res(rk, Owner::collation(c), ResLink::NONE, nonce, watch)?;
            self.colls.add_res(c, n, &mut self.order)?;
        }
        self.colls.settle(c, &mut self.jobs, &mut self.order)
    }

    /// What a merge of `other`'s records into these must refuse before
    /// changing anything: a job key, a reservation or a collation stack on
    /// both sides.
    pub fn absorb_check(&self, other: &Records) -> Result<(), QueueError> {
        for (_, job) in other.jobs.iter() {
            if self.contains(&job.key) {
                return Err(corrupt("imported job already in the queue"));
            }
        }
        for n in other.order.iter() {
            if self.order.contains(other.order.key(n)) {
                return Err(corrupt("imported reservation already in the queue"));
            }
        }
        for c in other.collations_by_name() {
            if self.has_collation(&other.name_of(c)) {
                return Err(corrupt("imported collation already in the queue"));
            }
        }
        Ok(())
    }

    /// Would a merge of `other` repeat a nonce (in use, or promised to a
    /// held job)? Nonces are unique in the whole queue (invariant 4). O(n).
    pub fn nonces_collide(&self, other: &Records) -> bool {
        let theirs = other.nonce_set();
        !theirs.is_empty() && self.nonce_set().intersection(&theirs).next().is_some()
    }

    /// Is there room for `other`'s records next to these (held jobs take a
    /// reservation when their gate opens)?
    pub fn room_for(&self, other: &Records) -> bool {
        let max = MAX_ID as usize;
        let held = other.held_jobs().count();
        self.jobs.len() + other.jobs.len() < max
            && self.order.len() + other.order.len() + held < max
            && self.colls.records() + other.colls.records() < max
    }

    /// Every nonce in use or promised to a held job.
    fn nonce_set(&self) -> HashSet<u64> {
        let mut s: HashSet<u64> = self.nonces().collect();
        s.extend(self.held_jobs().map(|(_, j)| j.skey.unsigned_abs()));
        s
    }
}

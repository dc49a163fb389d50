//! Placing jobs in the order, and the pairing rule.
//!
//! A job waits in one of two places (docs/design.md, "The model"):
//! - **single**: it owns one reservation of its own (immediate jobs, jobs
//!   without a collation);
//! - **collated**: it is in its collation's stack and owns no reservation;
//!   the k-th job of the stack is paired with the collation's k-th earliest
//!   reservation. Pairing is positional, so it is never stored and never
//!   goes stale: putting a job in or taking one out (with the reservation
//!   at its rank) leaves every other job of the collation with its own.

use std::borrow::Cow;

use super::order::OrderWatch;
use super::{corrupt, Records};
use crate::core::error::QueueError;
use crate::core::ids::{CollId, JobId, NodeId};
use crate::core::job::{Job, JobInfo, JobLink};
use crate::core::reservation::{Owner, OwnerRef, ResKey, ResLink};

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

impl Records {
    /// Give job `j` a single reservation of its own.
    pub fn place_single(
        &mut self,
        j: JobId,
        rk: ResKey,
        nonce: u64,
        immediate: bool,
        watch: &mut impl OrderWatch,
    ) -> Result<(), QueueError> {
        let n = self.add_res(rk, Owner::job(j), ResLink::single(immediate), nonce, watch)?;
        let job = &mut self.jobs[j];
        job.link = JobLink::reservation(n);
        job.skey = 0;
        job.coll.set_collated(false);
        Ok(())
    }

    /// Give job `j` a single reservation at `score`, in arrival order among
    /// equal scores.
    pub fn add_single(
        &mut self,
        j: JobId,
        score: i64,
        immediate: bool,
        watch: &mut impl OrderWatch,
    ) -> Result<(), QueueError> {
        let seq = self.alloc_seq();
        self.place_single(j, ResKey { score, tie: seq }, seq as u64, immediate, watch)
    }

    /// Give job `j` an immediate reservation before every other one.
    pub fn add_front(
        &mut self,
        j: JobId,
        now: i64,
        watch: &mut impl OrderWatch,
    ) -> Result<(), QueueError> {
        let score = match self.order.first() {
            Some(first) => self.rk(first).score.min(now),
            None => now,
        };
        self.front_tie -= 1;
        let nonce = self.alloc_seq() as u64;
        let tie = self.front_tie;
        self.place_single(j, ResKey { score, tie }, nonce, true, watch)
    }

    /// Put job `j` into collation `c` with stack key `skey`: the job into
    /// the stack by its stack key, and reservation `rk` into the
    /// collation's reservations. The pairing is positional, so this pairs
    /// whatever job lands at the reservation's rank with it.
    pub fn collate(
        &mut self,
        c: CollId,
        j: JobId,
        skey: i64,
        rk: ResKey,
        nonce: u64,
        watch: &mut impl OrderWatch,
    ) -> Result<(), QueueError> {
        self.jobs[j].skey = skey;
        let n = self.add_res(rk, Owner::collation(c), ResLink::NONE, nonce, watch)?;
        self.colls.add_res(c, n, &mut self.order)?;
        self.colls.push(c, j, &mut self.jobs)?;
        self.colls.settle(c, &mut self.jobs, &mut self.order)?;
        self.sync_head(c, watch);
        Ok(())
    }

    /// Take a collated job out of its collation: out of the stack, and the
    /// reservation paired with it out of the collation and the global order.
    /// Every other job of the collation keeps its pairing. The job keeps
    /// naming the collation.
    pub fn detach_collated(
        &mut self,
        j: JobId,
        watch: &mut impl OrderWatch,
    ) -> Result<(), QueueError> {
        let c = self.stack_coll(j)?;
        let k = self.colls.unlink(c, j, &mut self.jobs)?;
        let n = self.colls.unlink_res_at(c, k, &mut self.order)?;
        self.remove_res(n, watch);
        self.colls.settle(c, &mut self.jobs, &mut self.order)?;
        self.sync_head(c, watch);
        Ok(())
    }

    /// Remove the reservation a placed job holds or is paired with (the
    /// job stays stored, placed nowhere). A held job is the caller's: it
    /// has no reservation.
    pub fn detach(&mut self, j: JobId, watch: &mut impl OrderWatch) -> Result<(), QueueError> {
        let job = &self.jobs[j];
        if job.collated() {
            self.detach_collated(j, watch)
        } else if job.held() {
            Err(corrupt("a held job has no reservation to detach"))
        } else {
            let n = job.link.as_reservation();
            self.jobs[j].link = JobLink::NONE;
            self.remove_res(n, watch);
            Ok(())
        }
    }

    /// The collation in whose stack job `j` is, if it is in one.
    pub fn stacked_in(&self, j: JobId) -> Option<CollId> {
        let job = &self.jobs[j];
        if job.collated() {
            job.coll_id()
        } else {
            None
        }
    }

    /// The collation in whose stack job `j` is.
    fn stack_coll(&self, j: JobId) -> Result<CollId, QueueError> {
        self.jobs[j]
            .coll_id()
            .ok_or_else(|| corrupt("a stacked job names no collation"))
    }

    /// The reservation node job `j` holds or is paired with.
    pub fn reservation_node(&self, j: JobId) -> Result<NodeId, QueueError> {
        let job = &self.jobs[j];
        if job.collated() {
            let c = self.stack_coll(j)?;
            let k = self.colls.position(c, j, &self.jobs)?;
            self.colls.res_at(c, k, &self.order)
        } else if job.held() {
            Err(QueueError::NotQueued)
        } else {
            Ok(job.link.as_reservation())
        }
    }

    /// Take reservation `n` and the job it serves out of the queue, with
    /// the attempts it had.
    pub fn take_node(
        &mut self,
        n: NodeId,
        watch: &mut impl OrderWatch,
    ) -> Result<Popped, QueueError> {
        let owner = self.order.val(n);
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
                self.detach_collated(j, watch)?;
                (j, false)
            }
            OwnerRef::Job(j) => {
                let immediate = self.order.aux(n).immediate();
                self.remove_res(n, watch);
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
    pub fn finish_pop(&mut self, p: Popped) -> JobInfo<'static> {
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
}

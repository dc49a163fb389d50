//! The global order: every reservation, by key (score, tie), with its owner
//! (a single job, or a collation that pairs it with the job at its rank)
//! and its nonce. Reading it, walking it in pop order, and telling the part
//! that follows it (`OrderWatch`) of each change.
//!
//! Every reservation enters and leaves the order here (`add_res`,
//! `remove_res`), so the kept nonces and the watcher never fall out of step
//! with it. (Priority bands would make the order one `GlobalOrder` per band,
//! or a band-major key: the change stays in this file and `first`.)

use super::{corrupt, Records};
use crate::core::config::JobKey;
use crate::core::containers::idmap::IdMap;
use crate::core::error::QueueError;
use crate::core::ids::{CollId, JobId, NodeId};
use crate::core::job::JobInfo;
use crate::core::reservation::{Owner, OwnerRef, ResKey, ResLink};

/// A part that follows the global order from outside the records (the
/// running caps' eligibility index, `caps.rs`): the records tell it of
/// every change to what it follows, in the same step, so no caller keeps it
/// in step by hand.
pub(crate) trait OrderWatch {
    /// A single job's reservation `(rk, n)` entered (`true`) or left the
    /// order.
    fn single(&mut self, rk: ResKey, n: NodeId, added: bool);
    /// Does it follow each collation's earliest reservation (`head`)?
    fn wants_heads(&self) -> bool;
    /// Collation `c`'s earliest reservation is now `first` (or it has none).
    fn head(&mut self, c: CollId, first: Option<(ResKey, NodeId)>);
    /// Compaction moved reservation `from` (key `rk`) to `to`; its owner is
    /// collation `owner`, or a single job (`None`).
    fn node_moved(&mut self, rk: ResKey, from: NodeId, to: NodeId, owner: Option<CollId>);
    /// Compaction moved collation record `from` to `to`.
    fn collation_moved(&mut self, from: CollId, to: CollId);
}

impl Records {
    /// The reservation key of node `n`.
    #[inline]
    pub fn rk(&self, n: NodeId) -> ResKey {
        (*self.order.key(n)).into()
    }

    pub fn nonce_of(&self, n: NodeId) -> u64 {
        match self.nonces.get(&n) {
            Some(v) => *v,
            None => self.rk(n).tie as u64,
        }
    }

    /// The lowest reservation.
    #[inline]
    pub fn first(&self) -> Option<NodeId> {
        self.order.first()
    }

    /// The score of the highest reservation.
    pub fn last_score(&self) -> Option<i64> {
        self.order.last().map(|n| self.rk(n).score)
    }

    /// Reservations in the order.
    pub fn order_len(&self) -> usize {
        self.order.len()
    }

    /// 1-based position of reservation `n` in pop order.
    pub fn position_of(&self, n: NodeId) -> Result<usize, QueueError> {
        self.order
            .rank(n)
            .map(|r| r + 1)
            .ok_or_else(|| corrupt("reservation missing from the order"))
    }

    /// Is `n` a single job's reservation, placed as immediate?
    pub fn is_immediate(&self, n: NodeId) -> bool {
        self.order.val(n).as_job().is_some() && self.order.aux(n).immediate()
    }

    /// Is job `j` placed as immediate (a single reservation flagged so)?
    pub fn job_immediate(&self, j: JobId) -> bool {
        let job = &self.jobs[j];
        !job.collated() && !job.held() && self.order.aux(job.link.as_reservation()).immediate()
    }

    /// Add a reservation node. A single job's is told to the watcher; a
    /// collation's head is synced by the caller once paired.
    pub(super) fn add_res(
        &mut self,
        rk: ResKey,
        owner: Owner,
        link: ResLink,
        nonce: u64,
        watch: &mut impl OrderWatch,
    ) -> Result<NodeId, QueueError> {
        let n = self
            .order
            .insert(rk.into(), owner, link)
            .ok_or_else(|| corrupt("duplicate reservation"))?;
        if nonce != rk.tie as u64 {
            self.nonces.insert(n, nonce);
        }
        if owner.as_job().is_some() {
            watch.single(rk, n, true);
        }
        Ok(n)
    }

    pub(super) fn remove_res(&mut self, n: NodeId, watch: &mut impl OrderWatch) {
        if self.order.val(n).as_job().is_some() {
            watch.single(self.rk(n), n, false);
        }
        self.order.remove(n);
        self.nonces.remove(&n);
    }

    /// Collation `c`'s earliest reservation with its key.
    pub fn head(&self, c: CollId) -> Option<(ResKey, NodeId)> {
        self.colls.first_res(c).map(|n| (self.rk(n), n))
    }

    /// Tell the watcher collation `c`'s earliest reservation (if it follows
    /// them).
    pub(super) fn sync_head(&self, c: CollId, watch: &mut impl OrderWatch) {
        if watch.wants_heads() {
            watch.head(c, self.head(c));
        }
    }

    /// Single jobs in reservation order: (job id, its node).
    pub fn singles(&self) -> impl Iterator<Item = (JobId, NodeId)> + '_ {
        self.order
            .iter()
            .filter_map(|n| self.order.val(n).as_job().map(|j| (j, n)))
    }

    /// Each collation with a stack, with its earliest reservation.
    pub fn heads(&self) -> impl Iterator<Item = (CollId, (ResKey, NodeId))> + '_ {
        self.colls
            .with_stack()
            .filter_map(|c| self.head(c).map(|h| (c, h)))
    }

    /// Every reservation's nonce, in key order.
    pub fn nonces(&self) -> impl Iterator<Item = u64> + '_ {
        self.order.iter().map(|n| self.nonce_of(n))
    }

    /// Walks the global order and names the job each reservation serves:
    /// `(node, job)` pairs in pop order from position `start`. A collation
    /// met first mid-way is located once (its reservation's rank, then the
    /// job at that rank: O(m) small, O(log m) large), then followed along
    /// its stack.
    pub fn walk_from(&self, start: usize) -> impl Iterator<Item = (NodeId, JobId)> + '_ {
        // Per collation: the next job of its stack and its position.
        let mut cursor: IdMap<CollId, (JobId, usize)> = IdMap::default();
        self.order.iter_from(start).filter_map(move |n| {
            let c = match self.order.val(n).get() {
                OwnerRef::Job(j) => return Some((n, j)),
                OwnerRef::Collation(c) => c,
            };
            let (j, k) = match cursor.get(&c) {
                Some(&at) => at,
                None => {
                    let k = self.colls.res_rank(c, n, &self.order).ok()?;
                    (self.colls.job_at(c, k, &self.jobs)?, k)
                }
            };
            let next = if self.colls.is_large(c) {
                JobId::or_nil(self.colls.job_at(c, k + 1, &self.jobs))
            } else {
                self.jobs[j].link.as_next_job()
            };
            cursor.insert(c, (next, k + 1));
            j.some().map(|j| (n, j))
        })
    }

    /// Job keys in pop order (linear; for tests, checks and listings).
    pub fn pop_order(&self) -> Vec<JobKey> {
        self.walk_from(0).map(|(_, j)| self.jobs[j].key).collect()
    }

    /// Job `j` as clients see it, given its reservation node.
    pub fn info_at(&self, j: JobId, n: NodeId) -> JobInfo<'_> {
        let immediate = !self.jobs[j].collated() && self.order.aux(n).immediate();
        self.view(j, immediate, self.nonce_of(n), self.rk(n).score)
    }
}

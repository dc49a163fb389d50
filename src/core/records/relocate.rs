//! The records' side of giving memory back after a rush (docs/design.md,
//! "Memory after a drain"; the queue's `maintain` in `compact.rs` runs it).
//!
//! A slab whose records fill less than a quarter of its slots shrinks to
//! twice its records: the records above that bound move, a few per
//! command, into free slots below it, and every link to a moved record is
//! fixed here; then the chunks above the bound are freed. Moving a record
//! changes its id only, never what any command can observe (the encoding,
//! replies and digests name jobs by key and collations by name).
//!
//! What links to what (and is fixed on a move):
//! - a job: the id table by key; its reservation node's `val` (single) or
//!   the previous job's `link` / the collation's head and tail (small
//!   stack) or its node in the collation's stack tree (large); its attempts
//!   entry; its gate (held: the caller's `held` hook).
//! - a reservation node: its job's `link` (single), the previous node's
//!   `aux` / the collation's `rhead` and `rtail` (small) or its node in the
//!   collation's reservation tree (large); its nonce entry; the watcher
//!   (the caps index).
//! - a collation: only collations whose every reference is a job of their
//!   own stack move (their jobs and reservations are found from the
//!   record); a collation also named by leased, delayed, dead, held or
//!   single jobs, or by the submission window, stays where it is.
//!
//! The trees of a large collation are rebuilt when they fall under a
//! quarter full; the id table and the side maps shrink when sparse.

use super::order::OrderWatch;
use super::Records;
use crate::core::config::key_hash;
use crate::core::containers::shrink_map;
use crate::core::ids::{CollId, JobId, NodeId};
use crate::core::job::JobLink;
use crate::core::reservation::{Owner, OwnerRef};

impl Records {
    /// Do up to `budget` record moves of the shrinks under way: jobs, then
    /// reservations, then collations. `held(from, to, seq)` is told of a
    /// held job that moved. Returns the moves done.
    pub fn move_records(
        &mut self,
        budget: usize,
        watch: &mut impl OrderWatch,
        mut held: impl FnMut(JobId, JobId, i64),
    ) -> usize {
        let mut done = 0;
        while done < budget {
            let Some((from, to)) = self.jobs.next_move() else {
                break;
            };
            self.relocate_job(from, to, &mut held);
            done += 1;
        }
        while done < budget {
            let Some((from, to)) = self.order.next_move() else {
                break;
            };
            self.relocate_node(from, to, watch);
            done += 1;
        }
        while done < budget {
            let Some((from, to)) = self.colls.next_move() else {
                break;
            };
            done += self.relocate_collation(from, to, watch);
        }
        done
    }

    /// Rebuild the trees of large collations that fell under a quarter
    /// full; returns the work done.
    pub fn compact_trees(&mut self) -> usize {
        self.colls
            .compact_large_trees(&mut self.jobs, &mut self.order)
    }

    /// Shrink the key table, the collations' tables and the side maps when
    /// sparse.
    pub fn shrink_tables(&mut self) {
        if self.by_key.wants_shrink() {
            let jobs = &self.jobs;
            self.by_key.shrink(|id| key_hash(&jobs[id].key));
        }
        self.colls.shrink_tables();
        shrink_map(&mut self.attempts);
        shrink_map(&mut self.nonces);
    }

    /// Job `from` moves to free slot `to`.
    fn relocate_job(&mut self, from: JobId, to: JobId, held: &mut impl FnMut(JobId, JobId, i64)) {
        let Some(job) = self.jobs.get(from) else {
            return;
        };
        let (key, skey, link) = (job.key, job.skey, job.link);
        let (is_held, collated, coll) = (job.held(), job.collated(), job.coll_id());
        self.by_key.replace(key_hash(&key), from, to);
        if let Some(a) = self.attempts.remove(&from) {
            self.attempts.insert(to, a);
        }
        if is_held {
            held(from, to, skey.abs());
        } else if collated {
            if let Some(c) = coll {
                self.colls.relocate_stack_job(c, from, to, &mut self.jobs);
            }
        } else if link != JobLink::NONE {
            self.order.set_val(link.as_reservation(), Owner::job(to));
        }
        let moved = self.jobs.move_record(from, to);
        debug_assert!(moved, "job {from:?} not moved to free slot {to:?}");
    }

    /// Reservation node `from` moves to free slot `to`.
    fn relocate_node(&mut self, from: NodeId, to: NodeId, watch: &mut impl OrderWatch) {
        if !self.order.is_live(from) {
            return;
        }
        let rk = self.rk(from);
        let owner = self.order.val(from);
        let Some(n) = self.order.relocate(from, to) else {
            return;
        };
        match owner.get() {
            OwnerRef::Collation(c) => {
                self.colls.relocate_res(c, from, n, &mut self.order);
                watch.node_moved(rk, from, n, Some(c));
            }
            OwnerRef::Job(j) => {
                if let Some(job) = self.jobs.get_mut(j) {
                    job.link = JobLink::reservation(n);
                }
                watch.node_moved(rk, from, n, None);
            }
        }
        if let Some(nonce) = self.nonces.remove(&from) {
            self.nonces.insert(n, nonce);
        }
    }

    /// Collation `from` (every reference a job of its stack) moves to free
    /// slot `to`; returns the work done (its jobs and reservations).
    fn relocate_collation(
        &mut self,
        from: CollId,
        to: CollId,
        watch: &mut impl OrderWatch,
    ) -> usize {
        let stack: Vec<JobId> = self.colls.stack(from, &self.jobs).collect();
        let res: Vec<NodeId> = self.colls.reservations(from, &self.order).collect();
        for &j in &stack {
            let job = &mut self.jobs[j];
            job.coll = job.coll.renamed(to);
        }
        for &n in &res {
            self.order.set_val(n, Owner::collation(to));
        }
        self.colls.relocate(from, to);
        // Its entry in the watcher (the cap's eligibility index) follows
        // it. Nothing else can name it: leases, retries, dead letters and
        // submission windows each hold a reference, and a collation with
        // any reference beyond its own stack's jobs never moves.
        watch.collation_moved(from, to);
        1 + stack.len() + res.len()
    }
}

//! Giving memory back after a rush: the queue's slabs, id tables and maps
//! shrink as they empty (docs/design.md, "Memory after a drain").
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
//!   stack) or its node in the collation's stack tree (large); its gate
//!   (held); its attempts entry.
//! - a reservation node: its job's `link` (single), the previous node's
//!   `aux` / the collation's `rhead` and `rtail` (small) or its node in the
//!   collation's reservation tree (large); its nonce entry; the caps index.
//! - a collation: only collations whose every reference is a job of their
//!   own stack move (their jobs and reservations are found from the
//!   record); a collation also named by leased, delayed, dead, held or
//!   single jobs, or by the submission window, stays where it is.
//!
//! The trees of a large collation are rebuilt when they fall under a
//! quarter full. Id tables are rebuilt at a quarter of their load or less,
//! hash maps shrink when under a quarter full. Everything waits until it is
//! a quarter full before shrinking to half, so a queue oscillating around a
//! size does not thrash.

use super::containers::shrink_map;
use super::ids::{CollId, JobId, NodeId};
use super::job::JobLink;
use super::queue::{key_hash, Queue};
use super::reservation::{Owner, OwnerRef};

/// Record moves a write does after its own work (each O(log n), or O(64)
/// in a small collation): a drain of n jobs needs fewer than n moves in
/// all, so this finishes every shrink long before the queue is drained.
pub const MOVES_PER_WRITE: usize = 32;

impl Queue {
    /// Do up to `budget` record moves of the shrinks under way, and shrink
    /// the tables and maps that are sparse. Returns the moves done.
    pub fn maintain(&mut self, budget: usize) -> usize {
        let mut done = 0;
        while done < budget {
            let Some((from, to)) = self.jobs.next_move() else {
                break;
            };
            self.relocate_job(from, to);
            done += 1;
        }
        while done < budget {
            let Some((from, to)) = self.index.next_move() else {
                break;
            };
            self.relocate_node(from, to);
            done += 1;
        }
        while done < budget {
            let Some((from, to)) = self.colls.next_move() else {
                break;
            };
            done += self.relocate_collation(from, to);
        }
        while done < budget && self.work.move_one_lease() {
            done += 1;
        }
        if done < budget {
            done += self
                .colls
                .compact_large_trees(&mut self.jobs, &mut self.index);
        }
        if self.by_key.wants_shrink() {
            let jobs = &self.jobs;
            self.by_key.shrink(|id| key_hash(&jobs[id].key));
        }
        self.colls.shrink_tables();
        shrink_map(&mut self.attempts);
        shrink_map(&mut self.nonces);
        self.work.shrink_maps();
        done
    }

    /// Job `from` moves to free slot `to`.
    fn relocate_job(&mut self, from: JobId, to: JobId) {
        let Some(job) = self.jobs.get(from) else {
            return;
        };
        let (key, skey, link) = (job.key, job.skey, job.link);
        let (held, collated, coll) = (job.held(), job.collated(), job.coll_id());
        self.by_key.replace(key_hash(&key), from, to);
        if let Some(a) = self.attempts.remove(&from) {
            self.attempts.insert(to, a);
        }
        if held {
            self.gates.relocate(from, to, skey.abs());
        } else if collated {
            if let Some(c) = coll {
                self.colls.relocate_stack_job(c, from, to, &mut self.jobs);
            }
        } else if link != JobLink::NONE {
            self.index.set_val(link.as_reservation(), Owner::job(to));
        }
        let moved = self.jobs.move_record(from, to);
        debug_assert!(moved, "job {from:?} not moved to free slot {to:?}");
    }

    /// Reservation node `from` moves to free slot `to`.
    fn relocate_node(&mut self, from: NodeId, to: NodeId) {
        if !self.index.is_live(from) {
            return;
        }
        let rk = self.rk(from);
        let owner = self.index.val(from);
        let Some(n) = self.index.relocate(from, to) else {
            return;
        };
        match owner.get() {
            OwnerRef::Collation(c) => {
                self.colls.relocate_res(c, from, n, &mut self.index);
                self.caps.relocate_node(rk, from, n, Some(c));
            }
            OwnerRef::Job(j) => {
                if let Some(job) = self.jobs.get_mut(j) {
                    job.link = JobLink::reservation(n);
                }
                self.caps.relocate_node(rk, from, n, None);
            }
        }
        if let Some(nonce) = self.nonces.remove(&from) {
            self.nonces.insert(n, nonce);
        }
    }

    /// Collation `from` (every reference a job of its stack) moves to free
    /// slot `to`; returns the work done (its jobs and reservations).
    fn relocate_collation(&mut self, from: CollId, to: CollId) -> usize {
        let stack: Vec<JobId> = self.colls.stack(from, &self.jobs).collect();
        let res: Vec<NodeId> = self.colls.reservations(from, &self.index).collect();
        for &j in &stack {
            let job = &mut self.jobs[j];
            job.coll = job.coll.renamed(to);
        }
        for &n in &res {
            self.index.set_val(n, Owner::collation(to));
        }
        self.colls.relocate(from, to);
        // Its entry in the cap's eligibility index follows it. Nothing
        // else can name it: leases, retries, dead letters and submission
        // windows each hold a reference, and a collation with any
        // reference beyond its own stack's jobs never moves.
        self.caps.relocate_collation(from, to);
        1 + stack.len() + res.len()
    }
}

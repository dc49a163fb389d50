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

use super::collation::{Collation, Collations, Large};
use super::collation::{ResTree, StackTree};
use super::containers::shrink_map;
use super::containers::Slab;
use super::ids::{CollId, JobId, NodeId};
use super::job::{Job, JobLink};
use super::queue::{key_hash, Queue};
use super::reservation::{GlobalOrder, NodeKey, Owner, OwnerRef, ResLink};

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
            let movable = |c: &Collation| !c.large() && c.refs.get() == c.len;
            let Some((from, to)) = self.colls.recs.next_move_where(movable) else {
                break;
            };
            done += self.relocate_collation(from, to);
        }
        while done < budget && self.work.move_one_lease() {
            done += 1;
        }
        if done < budget {
            done += self.compact_large_trees();
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

    /// Rebuild the trees of large collations that fell under a quarter
    /// full (flagged when jobs left them). Returns the work done.
    fn compact_large_trees(&mut self) -> usize {
        let mut done = 0;
        while let Some(c) = self.colls.sparse.pop() {
            let Some(large) = self.colls.large.get(&c) else {
                continue;
            };
            if !large.wants_compaction() {
                continue;
            }
            let stack: Vec<(i64, JobId)> = large
                .stack
                .iter()
                .map(|n| (*large.stack.key(n), large.stack.val(n)))
                .collect();
            let res: Vec<(NodeKey, NodeId)> = large
                .res
                .iter()
                .map(|n| (*large.res.key(n), large.res.val(n)))
                .collect();
            let mut fresh = Large {
                stack: StackTree::new(),
                res: ResTree::new(),
            };
            for (skey, j) in stack {
                if let Some(node) = fresh.stack.insert(skey, j, ()) {
                    self.jobs[j].link = JobLink::stack_node(node);
                }
            }
            for (key, n) in res {
                if let Some(rn) = fresh.res.insert(key, n, ()) {
                    self.index.set_aux(n, ResLink::tree_node(rn));
                }
            }
            done += 1 + fresh.stack.len() + fresh.res.len();
            self.colls.large.insert(c, Box::new(fresh));
        }
        done
    }
}

impl Large {
    /// Are the trees' slabs under a quarter full?
    pub(crate) fn wants_compaction(&self) -> bool {
        self.stack.wants_shrink() || self.res.wants_shrink()
    }
}

impl Collations {
    /// Job `from` of collation `c`'s stack now lives at `to` (its record is
    /// still at `from`: the caller moves it after).
    fn relocate_stack_job(
        &mut self,
        c: CollId,
        from: JobId,
        to: JobId,
        jobs: &mut Slab<Job, JobId>,
    ) {
        if self.is_large(c) {
            if let (Some(large), Some(job)) = (self.large.get_mut(&c), jobs.get(from)) {
                large.stack.set_val(job.link.as_stack_node(), to);
            }
            return;
        }
        let Some(rec) = self.recs.get_mut(c) else {
            return;
        };
        if rec.tail == from {
            rec.tail = to;
        }
        if rec.head == from {
            rec.head = to;
            return;
        }
        let mut p = rec.head;
        while p != JobId::NIL {
            let next = jobs[p].link.as_next_job();
            if next == from {
                jobs[p].link = JobLink::next_job(to);
                return;
            }
            p = next;
        }
    }

    /// Reservation `from` of collation `c` is now node `to` (already moved
    /// in the global order, its `aux` kept).
    fn relocate_res(&mut self, c: CollId, from: NodeId, to: NodeId, index: &mut GlobalOrder) {
        if self.is_large(c) {
            let rn = index.aux(to).as_tree_node();
            if let Some(large) = self.large.get_mut(&c) {
                large.res.set_val(rn, to);
            }
            return;
        }
        let Some(rec) = self.recs.get_mut(c) else {
            return;
        };
        if rec.rtail == from {
            rec.rtail = to;
        }
        if rec.rhead == from {
            rec.rhead = to;
            return;
        }
        let mut p = rec.rhead;
        while p != NodeId::NIL {
            let next = index.aux(p).as_next();
            if next == from {
                index.set_aux(p, ResLink::next(to));
                return;
            }
            p = next;
        }
    }

    /// Collation record `from` moves to free slot `to` (its jobs and
    /// reservations already name `to`).
    fn relocate(&mut self, from: CollId, to: CollId) {
        let h = self.stored_name_hash(from);
        self.by_name.replace(h, from, to);
        if let Some(name) = self.long_names.remove(&from) {
            self.long_names.insert(to, name);
        }
        if let Some(large) = self.large.remove(&from) {
            self.large.insert(to, large);
        }
        let moved = self.recs.move_record(from, to);
        debug_assert!(moved, "collation {from:?} not moved to free slot {to:?}");
    }

    /// Shrink the name table and maps when sparse.
    fn shrink_tables(&mut self) {
        if self.by_name.wants_shrink() {
            let mut table = std::mem::take(&mut self.by_name);
            table.shrink(|id| self.stored_name_hash(id));
            self.by_name = table;
        }
        shrink_map(&mut self.long_names);
        shrink_map(&mut self.large);
    }
}

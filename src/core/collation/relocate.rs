//! Compaction's side of collations (`compact.rs`): which collation
//! records may move, fixing the links to a moved job or reservation, and
//! rebuilding sparse trees of large collations.

use super::{Collations, Large, ResTree, StackTree};
use crate::core::containers::{shrink_map, Slab};
use crate::core::ids::{CollId, JobId, NodeId};
use crate::core::job::{Job, JobLink};
use crate::core::reservation::{GlobalOrder, NodeKey, ResLink};

impl Large {
    /// Are the trees' slabs under a quarter full?
    pub(crate) fn wants_compaction(&self) -> bool {
        self.stack.wants_shrink() || self.res.wants_shrink()
    }
}

impl Collations {
    /// The next collation record to move while the slab shrinks, and its
    /// free slot: only a small collation whose every reference is a job of
    /// its own stack moves (those are found from the record); one named by
    /// anything else stays.
    pub fn next_move(&mut self) -> Option<(CollId, CollId)> {
        self.recs
            .next_move_where(|c| !c.large() && c.refs.get() == c.len)
    }

    /// Rebuild the trees of large collations that fell under a quarter
    /// full (flagged when jobs left them). Returns the work done.
    pub fn compact_large_trees(
        &mut self,
        jobs: &mut Slab<Job, JobId>,
        index: &mut GlobalOrder,
    ) -> usize {
        let mut done = 0;
        while let Some(c) = self.sparse.pop() {
            let Some(large) = self.large.get(&c) else {
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
                    jobs[j].link = JobLink::stack_node(node);
                }
            }
            for (key, n) in res {
                if let Some(rn) = fresh.res.insert(key, n, ()) {
                    index.set_aux(n, ResLink::tree_node(rn));
                }
            }
            done += 1 + fresh.stack.len() + fresh.res.len();
            self.large.insert(c, Box::new(fresh));
        }
        done
    }

    /// Job `from` of collation `c`'s stack now lives at `to` (its record is
    /// still at `from`: the caller moves it after).
    pub fn relocate_stack_job(
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
    pub fn relocate_res(&mut self, c: CollId, from: NodeId, to: NodeId, index: &mut GlobalOrder) {
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
    pub fn relocate(&mut self, from: CollId, to: CollId) {
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
    pub fn shrink_tables(&mut self) {
        if self.by_name.wants_shrink() {
            let mut table = std::mem::take(&mut self.by_name);
            table.shrink(|id| self.stored_name_hash(id));
            self.by_name = table;
        }
        shrink_map(&mut self.long_names);
        shrink_map(&mut self.large);
    }
}

//! Running caps per collation (fairness between tenants): with
//! `max_running = n`, a pop never hands out a collation job while that
//! collation already has `n` leased jobs; it takes the lowest reservation
//! among the collations below their cap and the single (immediate) jobs,
//! which are never capped.
//!
//! The eligibility index next to the global order: only a collation's
//! earliest reservation can ever be the lowest of that collation, so the
//! index holds, for each collation below its cap, its earliest reservation,
//! plus every single reservation. A pop takes the index's first entry:
//! O(log n) however many reservations capped collations hold. A collation
//! reaching its cap leaves the index, and returns when a lease ends (ack,
//! nack, expiry, delete): O(log n) each. The index exists only while a cap
//! is set; turning one on builds it in O((singles + collations) log n).
//!
//! Running counts (leased jobs naming each collation, immediate ones
//! included) are kept while a cap is set: setting one counts the leases
//! (O(leases)); without a cap a lease costs no count update, and the
//! busiest collations (`ORCA.STATS`) are counted from the leases.

use std::collections::BTreeSet;

use super::containers::idmap::IdMap;
use super::ids::{CollId, NodeId};

use super::records::OrderWatch;
use super::reservation::ResKey;

/// Candidate reservations of the eligibility index: (key, node).
pub(crate) type Eligible = BTreeSet<(ResKey, NodeId)>;
/// The entry each collation has in the index.
pub(crate) type Heads = IdMap<CollId, (ResKey, NodeId)>;

#[derive(Clone, Debug, Default)]
pub(crate) struct Caps {
    /// Leased jobs naming each collation.
    running: IdMap<CollId, u32>,
    /// The cap (0: none, and no index).
    max: u32,
    /// Candidate reservations.
    eligible: Eligible,
    /// The entry each collation has in `eligible`.
    heads: Heads,
    /// A collation became eligible again since `take_woken`.
    woken: bool,
}

impl Caps {
    pub fn max(&self) -> u32 {
        self.max
    }

    pub fn on(&self) -> bool {
        self.max > 0
    }

    pub fn running(&self, c: CollId) -> u32 {
        self.running.get(&c).copied().unwrap_or(0)
    }

    /// Is collation `c` at its cap?
    pub fn capped(&self, c: CollId) -> bool {
        self.on() && self.running(c) >= self.max
    }

    /// Collations with leased jobs, most running first (then by id), from
    /// the counts kept while a cap is set.
    pub fn busiest(&self, limit: usize) -> Vec<(CollId, u32)> {
        busiest_of(self.running.iter().map(|(c, n)| (*c, *n)), limit)
    }

    /// A lease of a job naming `c` started (+1) or ended (-1); counted only
    /// while a cap is set.
    pub fn add_running(&mut self, c: CollId, delta: i32) {
        if !self.on() {
            return;
        }
        let n = self.running.entry(c).or_insert(0);
        *n = n.saturating_add_signed(delta);
        if *n == 0 {
            self.running.remove(&c);
        }
    }

    /// The lowest eligible reservation's node.
    pub fn first(&self) -> Option<NodeId> {
        self.eligible.first().map(|(_, n)| *n)
    }

    /// A single reservation came (`true`) or went.
    pub fn single(&mut self, rk: ResKey, n: NodeId, added: bool) {
        if !self.on() {
            return;
        }
        if added {
            self.eligible.insert((rk, n));
        } else {
            self.eligible.remove(&(rk, n));
        }
    }

    /// Collation `c`'s earliest reservation is now `first` (or it has
    /// none): keep its entry right, given its running count.
    pub fn sync(&mut self, c: CollId, first: Option<(ResKey, NodeId)>) {
        if !self.on() {
            return;
        }
        let want = if self.running(c) < self.max {
            first
        } else {
            None
        };
        let have = self.heads.get(&c).copied();
        if want == have {
            return;
        }
        if let Some(h) = have {
            self.eligible.remove(&h);
            self.heads.remove(&c);
        }
        if let Some(w) = want {
            self.eligible.insert(w);
            self.heads.insert(c, w);
            if have.is_none() {
                // A collation with jobs became eligible (back below its
                // cap, or its first job): wake blocked pops.
                self.woken = true;
            }
        }
    }

    /// Did a collation come back below its cap since the last call?
    pub fn take_woken(&mut self) -> bool {
        std::mem::take(&mut self.woken)
    }

    /// Set the cap and rebuild the index from `singles` and the collations'
    /// earliest reservations, and the running counts from `leased` (the
    /// collation of each leased job).
    pub fn set_max(
        &mut self,
        max: u32,
        singles: impl Iterator<Item = (ResKey, NodeId)>,
        heads: impl Iterator<Item = (CollId, (ResKey, NodeId))>,
        leased: impl Iterator<Item = CollId>,
    ) {
        self.max = max;
        self.eligible.clear();
        self.heads.clear();
        self.running = IdMap::default();
        if max == 0 {
            return;
        }
        for c in leased {
            *self.running.entry(c).or_insert(0) += 1;
        }
        self.eligible.extend(singles);
        for (c, h) in heads {
            if self.running(c) < max {
                self.eligible.insert(h);
                self.heads.insert(c, h);
            }
        }
        self.woken = true;
    }

    /// Reservation node `from` is now `to` (compaction).
    pub fn relocate_node(&mut self, rk: ResKey, from: NodeId, to: NodeId, owner: Option<CollId>) {
        if self.eligible.remove(&(rk, from)) {
            self.eligible.insert((rk, to));
            if let Some(c) = owner {
                self.heads.insert(c, (rk, to));
            }
        }
    }

    /// Collation `from` is now `to` (compaction).
    /// (A collation that moves has no leased job, so no running count.)
    pub fn relocate_collation(&mut self, from: CollId, to: CollId) {
        if let Some(h) = self.heads.remove(&from) {
            self.heads.insert(to, h);
        }
    }

    /// Running counts as a map (for the check; empty without a cap).
    pub fn running_counts(&self) -> &IdMap<CollId, u32> {
        &self.running
    }

    /// The index, for the check: its entries and each collation's.
    pub fn index(&self) -> (&Eligible, &Heads) {
        (&self.eligible, &self.heads)
    }

    pub fn heap_bytes(&self) -> usize {
        self.running.capacity() * 16 + self.eligible.len() * 40 + self.heads.capacity() * 32
    }
}

/// The running caps follow the global order (`records::OrderWatch`): the
/// records tell them of every single reservation and collation head that
/// changes, and of records moved by compaction.
impl OrderWatch for Caps {
    #[inline]
    fn single(&mut self, rk: ResKey, n: NodeId, added: bool) {
        Caps::single(self, rk, n, added);
    }

    #[inline]
    fn wants_heads(&self) -> bool {
        self.on()
    }

    #[inline]
    fn head(&mut self, c: CollId, first: Option<(ResKey, NodeId)>) {
        self.sync(c, first);
    }

    fn node_moved(&mut self, rk: ResKey, from: NodeId, to: NodeId, owner: Option<CollId>) {
        self.relocate_node(rk, from, to, owner);
    }

    fn collation_moved(&mut self, from: CollId, to: CollId) {
        self.relocate_collation(from, to);
    }
}

/// The `limit` collations with the most running jobs, most first (then by
/// id), from (collation, count) pairs.
pub(crate) fn busiest_of(
    counts: impl Iterator<Item = (CollId, u32)>,
    limit: usize,
) -> Vec<(CollId, u32)> {
    let mut v: Vec<(CollId, u32)> = counts.collect();
    v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(limit);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::containers::slab::SlabId;

    fn n(x: u32) -> NodeId {
        NodeId::from_raw(x)
    }

    fn c(x: u32) -> CollId {
        CollId::from_raw(x)
    }

    fn rk(score: i64, tie: i64) -> ResKey {
        ResKey { score, tie }
    }

    #[test]
    fn capped_collations_leave_the_index_and_wake_on_return() {
        let mut caps = Caps::default();
        caps.set_max(
            2,
            [(rk(50, 9), n(900))].into_iter(),
            std::iter::empty(),
            std::iter::empty(),
        );
        assert!(caps.take_woken());
        caps.sync(c(1), Some((rk(10, 1), n(100))));
        caps.sync(c(2), Some((rk(20, 2), n(200))));
        assert_eq!(caps.first(), Some(n(100)));
        // Collation 1 reaches its cap: its reservations wait.
        caps.add_running(c(1), 1);
        caps.add_running(c(1), 1);
        caps.sync(c(1), Some((rk(10, 1), n(100))));
        assert!(caps.capped(c(1)));
        assert_eq!(caps.first(), Some(n(200)));
        caps.take_woken();
        caps.sync(c(2), Some((rk(20, 2), n(200))));
        assert!(!caps.take_woken(), "no change, no wake");
        // A lease ends: eligible again, and blocked pops are woken.
        caps.add_running(c(1), -1);
        caps.sync(c(1), Some((rk(10, 1), n(100))));
        assert_eq!(caps.first(), Some(n(100)));
        assert!(caps.take_woken());
        // Singles are never capped.
        caps.single(rk(1, 3), n(300), true);
        assert_eq!(caps.first(), Some(n(300)));
        caps.single(rk(1, 3), n(300), false);
        // No cap: no index.
        caps.set_max(
            0,
            std::iter::empty(),
            std::iter::empty(),
            std::iter::empty(),
        );
        assert_eq!(caps.first(), None);
        caps.sync(c(1), Some((rk(10, 1), n(100))));
        assert_eq!(caps.first(), None);
        // No cap: no counts either; setting one counts the leases given.
        assert_eq!(caps.busiest(5), vec![]);
        caps.add_running(c(1), 1);
        assert_eq!(caps.running(c(1)), 0);
        caps.set_max(
            1,
            std::iter::empty(),
            std::iter::empty(),
            [c(1), c(1), c(2)].into_iter(),
        );
        assert_eq!(
            (caps.running(c(1)), caps.running(c(2)), caps.running(c(3))),
            (2, 1, 0)
        );
        assert!(caps.capped(c(1)) && caps.capped(c(2)));
        assert_eq!(caps.busiest(1), vec![(c(1), 2)]);
    }
}

//! Merging one queue into another (`ORCA.IMPORT` into an existing queue):
//! everything that could collide is checked first, then the other queue's
//! units go in through the loader, so a refusal changes nothing.

use std::collections::HashSet;

use super::{corrupt, QueueBuilder, ENCODING_CURRENT};
use crate::core::error::QueueError;
use crate::core::limits::SEQ_LOAD_LIMIT;
use crate::core::queue::{Order, Queue};

impl Queue {
    /// Merge `other` into `self` (for `ORCA.IMPORT` into an existing queue).
    /// Refused, with nothing changed, if anything of `other` collides with
    /// what `self` holds (a job key, a reservation, a nonce, a collation
    /// stack, a window, a lease token, a delayed/dead/result key). `self`'s
    /// settings are kept; closed gates merge.
    pub fn absorb(&mut self, other: Queue) -> Result<(), QueueError> {
        self.absorb_check(&other)?;
        // Apply `other` unit by unit through the loader, which cannot fail
        // now but for an internal error.
        // The merged counters, first: the units' sequence numbers (stack
        // keys, held arrivals) are below `other`'s.
        let (mine, theirs) = (&self.records, &other.records);
        let next_seq = mine.next_seq().max(theirs.next_seq());
        let front_tie = mine.front_tie().min(theirs.front_tie());
        self.records.set_counters(next_seq, front_tie);
        let mut b = QueueBuilder {
            q: std::mem::replace(self, Queue::new(Order::Lifo)),
            version: ENCODING_CURRENT,
            max_seq: other.records.next_seq().saturating_sub(1),
            min_tie: other.records.front_tie(),
            empty_gates: HashSet::new(),
            merging: true,
        };
        let mut failed = None;
        other.for_each_unit(|u| {
            if failed.is_none() {
                if let Err(e) = b.add_unit(u) {
                    failed = Some(e);
                }
            }
        });
        let result = match failed {
            Some(e) => Err(e),
            None => b.settle(),
        };
        *self = b.q;
        result
    }

    /// Everything `absorb` must refuse before changing anything.
    fn absorb_check(&self, other: &Queue) -> Result<(), QueueError> {
        self.records.absorb_check(&other.records)?;
        if !other.window.is_empty() && !self.settings.autodelay.on() {
            // Its loader would refuse it after the other units went in.
            return Err(corrupt(
                "imported submission window into a queue without an auto delay",
            ));
        }
        for (c, _) in other.window.records() {
            if self
                .records
                .coll_id(&other.name_of(c))
                .is_some_and(|mine| self.window.records().any(|(x, _)| x == mine))
            {
                return Err(corrupt("imported submission window already in the queue"));
            }
        }
        // The merged counters must leave room for every number ticks may
        // take without asking (`Queue::tick_reserve`), as a loaded queue's
        // do, so the result can always be saved and loaded again.
        let merged_next = self.records.next_seq().max(other.records.next_seq());
        let pending = self.tick_reserve().saturating_add(other.tick_reserve());
        if merged_next.saturating_add(pending) > SEQ_LOAD_LIMIT {
            return Err(corrupt("counters out of range"));
        }
        if self.records.nonces_collide(&other.records) {
            return Err(corrupt("imported nonces collide with the queue's"));
        }
        let (mine, theirs) = (&self.work, &other.work);
        let token_taken = |t: u64| mine.lease(t).is_some() || mine.is_cancelled(t);
        if theirs.leases().any(|(t, _)| token_taken(t))
            || theirs.cancelled().any(|(t, _)| token_taken(t))
            || theirs
                .delayed_page(0, usize::MAX)
                .any(|(k, _)| mine.is_delayed(&k))
            || theirs
                .dead_page(0, usize::MAX)
                .any(|(k, _)| mine.is_dead(&k))
            || theirs.results().any(|(k, _)| mine.result(&k).is_some())
        {
            return Err(corrupt(
                "imported leases, retries, dead jobs or results collide with the queue's",
            ));
        }
        // Room for every record (checked now: nothing may change on refusal).
        if !self.records.room_for(&other.records) {
            return Err(QueueError::Full);
        }
        Ok(())
    }
}

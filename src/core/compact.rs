//! Giving memory back after a rush: the queue's slabs, id tables and maps
//! shrink as they empty (docs/design.md, "Memory after a drain").
//!
//! Each part moves and shrinks its own records: the records part
//! (`records/relocate.rs`: jobs, reservations, collations, and what links
//! to them), the work state (the lease slab). This runs them a few moves
//! per write, so every shrink finishes long before the queue is drained.
//! Everything waits until it is a quarter full before shrinking to half,
//! so a queue oscillating around a size does not thrash.

use super::queue::Queue;

/// Record moves a write does after its own work (each O(log n), or O(64)
/// in a small collation): a drain of n jobs needs fewer than n moves in
/// all, so this finishes every shrink long before the queue is drained.
pub const MOVES_PER_WRITE: usize = 32;

impl Queue {
    /// Do up to `budget` record moves of the shrinks under way, and shrink
    /// the tables and maps that are sparse. Returns the moves done.
    pub fn maintain(&mut self, budget: usize) -> usize {
        let gates = &mut self.gates;
        let mut done = self
            .records
            .move_records(budget, &mut self.caps, |from, to, seq| {
                gates.relocate(from, to, seq)
            });
        while done < budget && self.work.move_one_lease() {
            done += 1;
        }
        if done < budget {
            done += self.records.compact_trees();
        }
        self.records.shrink_tables();
        self.work.shrink_maps();
        done
    }
}

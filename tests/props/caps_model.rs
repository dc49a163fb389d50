//! The model of running caps (docs/commands.md, `ORCA.SETTINGS ...
//! MAXRUNNING <n>`, `ORCA.POP`, `ORCA.STATUS`, `ORCA.STATS`):
//!
//! - "a pop never hands out a job of a collation that already has `n`
//!   leased jobs (leases of immediate jobs naming the collation count
//!   too); immediate jobs are never capped", 0 = no cap: `running`,
//!   `Model::pop_one` (`worker_model.rs`);
//! - "the lowest reservation among the collations below their cap and the
//!   immediate jobs (never capped) is taken" (ORCA.POP): the order model's
//!   `pop_where`, which also treats jobs without a collation as uncapped
//!   (they belong to no collation);
//! - "When a leased job of a capped collation ends (ACK, NACK, expiry,
//!   DELETE), blocked workers are woken" / POP `BLOCK` waits "until ... a
//!   lease ending under a running cap makes a job available": a
//!   collation that was at its cap, came below it during an operation and
//!   has queued jobs must raise the core's wake-up (`take_must_wake`). The
//!   harness checks only that direction: a spurious wake-up costs a retry,
//!   a missed one leaves a worker blocked;
//! - STATUS: "`capped` is `1` when the job waits only because its
//!   collation is at its cap", read as: a queued job of a collation stack
//!   whose collation is at the cap (`waits_for_cap`);
//! - STATS `running`: "the collations with leased jobs and how many"
//!   (`running_list`), whether or not a cap is set.
//!
//! A superseded delivery is still a leased job, so it counts.

use std::collections::BTreeMap;

use orca::core::JobKey;

use crate::worker_model::{MLease, Model};

/// Leased jobs naming collation `coll`.
pub fn running_of(leases: &BTreeMap<u64, MLease>, coll: &str) -> u32 {
    leases
        .values()
        .filter(|l| l.job.collation.as_deref() == Some(coll))
        .count() as u32
}

impl Model {
    pub fn running(&self, coll: &str) -> u32 {
        running_of(&self.leases, coll)
    }

    pub fn at_cap(&self, coll: &str) -> bool {
        let max = self.settings.max_running;
        max > 0 && self.running(coll) >= max
    }

    pub fn waits_for_cap(&self, key: &JobKey) -> bool {
        self.order.job(key).is_some_and(|j| {
            j.collated && j.held.is_none() && self.at_cap(j.collation.as_deref().unwrap())
        })
    }

    /// Collations with leased jobs and how many, by name.
    pub fn running_list(&self) -> Vec<(String, u32)> {
        let mut m: BTreeMap<String, u32> = BTreeMap::new();
        for l in self.leases.values() {
            if let Some(c) = &l.job.collation {
                *m.entry(c.clone()).or_insert(0) += 1;
            }
        }
        m.into_iter().collect()
    }

    /// End lease `token` (ack, nack, expiry, cancellation); note a
    /// collation it takes from its cap to below it.
    pub fn end_lease(&mut self, token: u64) -> MLease {
        let coll = self.leases[&token].job.collation.clone();
        let was = coll.as_deref().is_some_and(|c| self.at_cap(c));
        let l = self.leases.remove(&token).unwrap();
        if let Some(c) = coll {
            if was && !self.at_cap(&c) {
                self.uncapped.push(c);
            }
        }
        l
    }

    /// Must the core have raised a wake-up since the last call: a
    /// collation came below its cap and has queued jobs (and is still
    /// below it)?
    pub fn take_must_wake(&mut self) -> bool {
        let colls = std::mem::take(&mut self.uncapped);
        colls
            .iter()
            .any(|c| !self.at_cap(c) && !self.order.stack(c).is_empty())
    }
}

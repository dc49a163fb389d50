//! The model of the bounds on what a queue keeps (docs/commands.md,
//! `ORCA.SETTINGS`, `ORCA.DEAD`, `ORCA.TICK`):
//!
//! - `DEADMAX <n>`: "most dead letters kept; the oldest go first. 0 = no
//!   bound" / "The list is bounded by the queue's `DEADMAX` (the oldest go
//!   first)": after every burial and every settings change, the dead
//!   letters first in dead-list order ("the order they died") go until at
//!   most n are left (`trim_dead`). Not counted by the tick (its
//!   `forgotten` lists `DEADTTL` only);
//! - `DEADTTL <ms>`: "dead letters are forgotten this long after they
//!   died", 0 = kept: by the tick at or after died_at + ms, counted in
//!   `forgotten` ("old dead letters (`DEADTTL`) ... are forgotten")
//!   (`forget_old_dead`, `dead_ttl_deadline`);
//! - `RESULTMAX <n>`: "most kept ACK results; those expiring first go
//!   first. 0 = no bound (results also expire with their TTL)" (with equal
//!   expiry times, which the docs leave open, the smaller orca key goes
//!   first) (`trim_results`).

use orca::core::{JobKey, TickReport};

use crate::worker_model::{Fate, Model};

impl Model {
    pub fn trim_dead(&mut self) {
        let max = self.settings.dead_max;
        while max > 0 && self.dead.len() as u64 > max {
            let key = self.dead_list()[0].0;
            let d = self.dead.remove(&key).unwrap();
            self.end(&d.job, Fate::Forgotten);
            self.ev("dead letter over DEADMAX forgotten");
        }
    }

    pub fn dead_ttl_deadline(&self) -> Option<i64> {
        let ttl = self.settings.dead_ttl;
        if ttl == 0 {
            return None;
        }
        self.dead.values().map(|d| d.died_at + ttl).min()
    }

    pub fn forget_old_dead(&mut self, now: i64, report: &mut TickReport) {
        let ttl = self.settings.dead_ttl;
        if ttl == 0 {
            return;
        }
        let old: Vec<JobKey> = self
            .dead
            .iter()
            .filter(|(_, d)| d.died_at + ttl <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in old {
            let d = self.dead.remove(&key).unwrap();
            self.end(&d.job, Fate::Forgotten);
            self.ev("tick: dead letter past DEADTTL forgotten");
            report.forgotten += 1;
        }
    }

    pub fn trim_results(&mut self) {
        let max = self.settings.result_max;
        while max > 0 && self.results.len() as u64 > max {
            let key = *self
                .results
                .iter()
                .min_by_key(|(k, (at, _))| (*at, **k))
                .unwrap()
                .0;
            self.results.remove(&key);
            self.ev("result over RESULTMAX forgotten");
        }
    }
}

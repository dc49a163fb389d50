//! What the worker model says the core must report after every step
//! (`worker_sequences/verify.rs` compares): the dead list, the next
//! deadline, counts by state, the states of a key; and the model's own
//! ledger (no job lost, one current instance per key, the order model in
//! step with the instances).

use std::collections::HashMap;

use orca::core::JobKey;

use crate::support::*;
use crate::worker_model::{MDead, Model};
use crate::worker_views::*;

impl Model {
    pub fn dead_list(&self) -> Vec<(JobKey, &MDead)> {
        let mut v: Vec<(JobKey, &MDead)> = self.dead.iter().map(|(k, d)| (*k, d)).collect();
        v.sort_by_key(|(_, d)| (d.died_at, d.seq));
        v
    }

    /// The dead list as `core_dead_list` shows it.
    pub fn dead_views(&self) -> Vec<DeadView> {
        self.dead_list()
            .into_iter()
            .map(|(key, d)| DeadView {
                key: kname(&key),
                died_at: d.died_at,
                cause: d.cause,
                job: d.job.pj(),
            })
            .collect()
    }

    pub fn next_deadline(&self) -> Option<i64> {
        let leases = self.leases.values().map(|l| l.deadline);
        let delayed = self.delayed.values().map(|(at, _)| *at);
        let results = self.results.values().map(|(at, _)| *at);
        let cancelled = self.cancelled.values().copied();
        let policies = [
            self.lifetime_deadline(),
            self.dead_ttl_deadline(),
            self.order.window.next_expiry(),
        ];
        leases
            .chain(delayed)
            .chain(results)
            .chain(cancelled)
            .chain(policies.into_iter().flatten())
            .min()
    }

    /// Every pending deadline of the policies (each waiting job's lifetime,
    /// each dead letter's age, each submission record's end), for the
    /// harness's clock to jump to.
    pub fn policy_deadlines(&self) -> Vec<i64> {
        let mut v = Vec::new();
        let l = self.settings.lifetime;
        if l > 0 {
            for k in self.queued.keys() {
                v.push(self.info(k).unwrap().release_at + l);
            }
            v.extend(self.delayed.values().map(|(_, j)| j.created_at + l));
        }
        if self.settings.dead_ttl > 0 {
            v.extend(
                self.dead
                    .values()
                    .map(|d| d.died_at + self.settings.dead_ttl),
            );
        }
        v.extend(self.order.window.records().values().copied());
        v
    }

    /// (queued, delayed, leased, dead): "`ORCA.LEN`: Number of queued jobs
    /// (not counting held ...)".
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.order.len(),
            self.delayed.len(),
            self.leases.len(),
            self.dead.len(),
        )
    }

    /// What `states(key)` must say: "the queued (or delayed) job first,
    /// then a running one, then a dead one" (ORCA.STATUS); a held job where
    /// a queued one would be.
    pub fn states(&self, key: &JobKey) -> Vec<S> {
        let mut out = Vec::new();
        if let Some(j) = self.queued.get(key) {
            let info = self.info(key).unwrap();
            out.push(match self.held_gate(key) {
                Some(gate) => S::Held {
                    gate: gate.to_vec(),
                    release_at: info.release_at,
                    job: j.pj(),
                },
                None => S::Queued {
                    pos: self.order.position(key).unwrap(),
                    release_at: info.release_at,
                    capped: self.waits_for_cap(key),
                    job: j.pj(),
                },
            });
        }
        if let Some((at, j)) = self.delayed.get(key) {
            out.push(S::Delayed {
                retry_at: *at,
                job: j.pj(),
            });
        }
        for (t, l) in &self.leases {
            if l.key == *key {
                out.push(S::Leased {
                    token: *t,
                    deadline: l.deadline,
                    superseded: self.regraded_since(l),
                    job: l.job.pj(),
                });
            }
        }
        if let Some(d) = self.dead.get(key) {
            out.push(S::Dead {
                died_at: d.died_at,
                cause: d.cause,
                job: d.job.pj(),
            });
        }
        out
    }

    /// No job lost: every instance is in exactly one place or has exactly
    /// one fate; the order model places exactly the queued and held jobs.
    pub fn ledger(&self) -> Result<(), String> {
        self.order.self_check()?;
        ensure!(
            self.order.jobs.len() == self.queued.len()
                && self
                    .order
                    .jobs
                    .iter()
                    .all(|o| self
                        .queued
                        .get(&o.key)
                        .is_some_and(|j| j.immediate == o.immediate
                            && j.payload == o.payload
                            && j.created_at == o.created_at
                            && j.collation == o.collation)),
            "model: the order model and the instances disagree"
        );
        let mut live: HashMap<u64, usize> = HashMap::new();
        let ids = self
            .queued
            .values()
            .chain(self.delayed.values().map(|(_, j)| j))
            .chain(self.leases.values().map(|l| &l.job))
            .chain(self.dead.values().map(|d| &d.job))
            .map(|j| j.id);
        for id in ids {
            *live.entry(id).or_insert(0) += 1;
        }
        // Only the newest instance of a key is current: per key at most one
        // of queued job, delayed retry and lease that is not superseded,
        // and that one is the newest instance.
        let mut current: HashMap<JobKey, Vec<u64>> = HashMap::new();
        let cur = self
            .queued
            .iter()
            .map(|(k, j)| (*k, j.id))
            .chain(self.delayed.iter().map(|(k, (_, j))| (*k, j.id)))
            .chain(
                self.leases
                    .values()
                    .filter(|l| !self.regraded_since(l))
                    .map(|l| (l.key, l.job.id)),
            );
        for (key, id) in cur {
            current.entry(key).or_default().push(id);
        }
        for (key, ids) in &current {
            if ids.len() > 1 || self.newest.get(key) != Some(&ids[0]) {
                return Err(format!(
                    "model: {} has current instances {ids:?}, newest {:?}",
                    kname(key),
                    self.newest.get(key)
                ));
            }
        }
        for id in 0..self.next_id {
            let n = live.get(&id).copied().unwrap_or(0) + self.fates.contains_key(&id) as usize;
            if n != 1 {
                return Err(format!(
                    "model ledger: job instance {id} is in {} places and has fate {:?}",
                    live.get(&id).copied().unwrap_or(0),
                    self.fates.get(&id)
                ));
            }
        }
        Ok(())
    }
}

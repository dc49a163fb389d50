//! `ORCA.CHECK`: every invariant of the grading-queue design, plus the
//! pairing rule and the bookkeeping the implementation relies on. O(n log n);
//! meant for tests, operators and after loading untrusted data, not for every
//! command.
//!
//! One function per invariant of docs/design.md ("Invariants"); `check` runs
//! them in an order where each may rely on what the earlier ones proved.

use std::collections::{HashMap, HashSet};

use super::containers::idmap::IdMap;
use super::ids::{CollId, NodeId};
use super::limits::valid_time;
use super::queue::Queue;
use super::reservation::ResKey;

impl Queue {
    /// `Ok(())` when the queue is valid, or a message naming what is broken.
    pub fn check(&self) -> Result<(), String> {
        let outside = self.outside_refs()?;
        let held = self.records.check(&outside)?;
        self.check_held(held)?;
        self.check_policies()?;
        self.check_work()
    }

    /// The references to each collation from outside the records: parked
    /// jobs naming it, its submission window. Each names a live collation.
    fn outside_refs(&self) -> Result<HashMap<CollId, u32>, String> {
        let mut refs: HashMap<CollId, u32> = HashMap::new();
        for p in self.work.parked() {
            if let Some(c) = p.coll_id() {
                if !self.records.coll_exists(c) {
                    return Err("a parked job names a missing collation".into());
                }
                *refs.entry(c).or_insert(0) += 1;
            }
        }
        for (c, _) in self.window.records() {
            if !self.records.coll_exists(c) {
                return Err("a submission window names a missing collation".into());
            }
            *refs.entry(c).or_insert(0) += 1;
        }
        Ok(refs)
    }

    /// Invariant 8's queue side: the held jobs (`held` of them, as the
    /// records counted) are exactly the gates' members, each with the
    /// arrival and release time its gate records.
    fn check_held(&self, held: usize) -> Result<(), String> {
        if held != self.gates.held_count() {
            return Err(format!(
                "{held} held jobs but {} behind gates",
                self.gates.held_count()
            ));
        }
        for (j, job) in self.records.held_jobs() {
            let h = self.gates.get(j).ok_or("a held job is behind no gate")?;
            if job.skey < 0 && h.immediate {
                return Err("a held job is malformed or its arrival collides".into());
            }
            let release = if h.immediate {
                job.created_at
            } else {
                job.created_at.saturating_add(h.priority)
            };
            if release != h.release || !valid_time(release) {
                return Err("a held job's release time is wrong".into());
            }
        }
        Ok(())
    }

    /// Gates, the submission window and the running caps agree with the
    /// queue: every closed gate's members are held jobs; each window is
    /// sorted; running counts equal the leases per collation, and with a
    /// cap the eligibility index holds exactly every single reservation and
    /// the earliest reservation of each collation below its cap.
    fn check_policies(&self) -> Result<(), String> {
        self.gates.check()?;
        self.window.check()?;
        if !self.settings.autodelay.on() && !self.window.is_empty() {
            return Err("a submission window without an auto delay".into());
        }
        // Counts are kept while a cap is set (and none without).
        let running = if self.caps.on() {
            self.running_counts()
        } else {
            IdMap::default()
        };
        if &running != self.caps.running_counts() {
            return Err("running counts disagree with the leases".into());
        }
        if self.caps.max() != self.settings.max_running {
            return Err("the running cap disagrees with the settings".into());
        }
        let (eligible, heads) = self.caps.index();
        let mut want: HashSet<(ResKey, NodeId)> = HashSet::new();
        let mut want_heads: IdMap<CollId, (ResKey, NodeId)> = IdMap::default();
        if self.caps.on() {
            let r = &self.records;
            for (_, n) in r.singles() {
                want.insert((r.rk(n), n));
            }
            for (c, head) in r.heads() {
                if self.caps.running(c) < self.caps.max() {
                    want.insert(head);
                    want_heads.insert(c, head);
                }
            }
        }
        if eligible.len() != want.len()
            || eligible.iter().any(|e| !want.contains(e))
            || heads != &want_heads
        {
            return Err("the eligibility index of the running cap is stale".into());
        }
        Ok(())
    }

    /// Leases, retries, dead letters, results and cancellations: each part
    /// agrees with its time order and byte count (`Work::check`); here,
    /// what needs the queue: tokens and sequence numbers were handed out by
    /// it, times are in range.
    fn check_work(&self) -> Result<(), String> {
        let w = &self.work;
        w.check()?;
        let next = self.records.next_seq();
        let issued = |t: u64| t != 0 && t < next as u64;
        for (token, l) in w.leases() {
            if !issued(token) {
                return Err("a lease token is out of range".into());
            }
            if !valid_time(l.deadline) || !valid_time(l.job.created_at) {
                return Err("a lease holds an invalid job".into());
            }
        }
        for (_, d) in w.delayed_page(0, usize::MAX) {
            if !valid_time(d.retry_at) || !valid_time(d.job.created_at) {
                return Err("a delayed job is invalid".into());
            }
        }
        for (_, d) in w.dead_page(0, usize::MAX) {
            if d.seq <= 0 || d.seq >= next {
                return Err("a dead job's sequence is out of range".into());
            }
            if !valid_time(d.died_at) || !valid_time(d.job.created_at) {
                return Err("a dead job is invalid".into());
            }
        }
        if w.results().any(|(_, r)| !valid_time(r.expires_at)) {
            return Err("a result's expiry is out of range".into());
        }
        if w.cancelled()
            .any(|(t, until)| !issued(t) || !valid_time(until))
        {
            return Err("a cancellation is out of range".into());
        }
        Ok(())
    }
}

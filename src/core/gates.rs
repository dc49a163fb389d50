//! Gates: holding pens for jobs whose grader is not ready (Orca's image
//! builds). While a gate is closed, a new job naming it is *held*: it is a
//! job of the queue (found by its key, updated in place, deletable) but has
//! no reservation, so nothing hands it out. Opening the gate queues every
//! held job as if it had been enqueued at its own arrival; dropping it
//! removes them.
//!
//! This file keeps which gates are closed and which jobs each holds; the
//! queue (`held.rs`) moves jobs in and out. Costs: holding, releasing or
//! deleting one job O(log k) for k held jobs; OPEN/DROP of a gate with k
//! jobs O(k log n) in the queue.

use std::collections::{BTreeSet, HashMap};

use super::containers::idmap::IdMap;
use super::ids::JobId;

/// What a held job needs to be queued when its gate opens. Its arrival
/// sequence number is in the job's stack key (`|skey|`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    pub gate: u32,
    /// The delay its reservation gets: config priority plus any auto delay
    /// applied at arrival.
    pub priority: i64,
    pub immediate: bool,
    /// The release time its reservation will have (arrival + priority, or
    /// arrival for an immediate job).
    pub release: i64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Gate {
    name: Box<[u8]>,
    /// Held jobs in arrival order: (arrival sequence, job id).
    members: BTreeSet<(i64, JobId)>,
}

impl Gate {
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Its held jobs in arrival order.
    pub fn members(&self) -> impl Iterator<Item = JobId> + '_ {
        self.members.iter().map(|&(_, j)| j)
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Gates {
    /// Closed gates by id (ids are reused).
    gates: IdMap<u32, Gate>,
    by_name: HashMap<Box<[u8]>, u32>,
    next_id: u32,
    /// Held jobs (job id -> what their release needs).
    held: IdMap<JobId, Held>,
    /// Held jobs by release time (arrival + priority), then arrival
    /// sequence, for lifetimes: jobs expiring at one time go in arrival
    /// order, never in record-id order (ids differ between a queue and its
    /// loaded copy on a replica).
    by_release: BTreeSet<(i64, i64, JobId)>,
}

impl Gates {
    /// The id of closed gate `name`.
    pub fn closed(&self, name: &[u8]) -> Option<u32> {
        if self.by_name.is_empty() {
            return None;
        }
        self.by_name.get(name).copied()
    }

    /// Close gate `name` (no change if it is closed); its id.
    pub fn close(&mut self, name: &[u8]) -> u32 {
        if let Some(id) = self.closed(name) {
            return id;
        }
        let mut id = self.next_id;
        while self.gates.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_id = id.wrapping_add(1);
        self.gates.insert(
            id,
            Gate {
                name: name.into(),
                members: BTreeSet::new(),
            },
        );
        self.by_name.insert(name.into(), id);
        id
    }

    /// Forget gate `name`: returns its held jobs in arrival order with what
    /// each held, which the caller releases or removes.
    pub fn remove(&mut self, name: &[u8]) -> Option<Vec<(JobId, Held)>> {
        let id = self.by_name.remove(name)?;
        let gate = self.gates.remove(&id)?;
        let mut jobs = Vec::with_capacity(gate.members.len());
        for (seq, j) in gate.members {
            if let Some(h) = self.held.remove(&j) {
                self.by_release.remove(&(h.release, seq, j));
                jobs.push((j, h));
            }
        }
        Some(jobs)
    }

    /// Hold job `j` (arrival sequence `seq`) behind closed gate `held.gate`.
    pub fn hold(&mut self, j: JobId, seq: i64, held: Held) -> bool {
        let Some(g) = self.gates.get_mut(&held.gate) else {
            return false;
        };
        g.members.insert((seq, j));
        self.by_release.insert((held.release, seq, j));
        self.held.insert(j, held);
        true
    }

    /// Take job `j` (arrival sequence `seq`) out of its gate (deleted, or
    /// released); what it held.
    pub fn unhold(&mut self, j: JobId, seq: i64) -> Option<Held> {
        let h = self.held.remove(&j)?;
        if let Some(g) = self.gates.get_mut(&h.gate) {
            g.members.remove(&(seq, j));
        }
        self.by_release.remove(&(h.release, seq, j));
        Some(h)
    }

    pub fn get(&self, j: JobId) -> Option<&Held> {
        self.held.get(&j)
    }

    pub fn gate_name(&self, gate: u32) -> Option<&[u8]> {
        self.gates.get(&gate).map(|g| &*g.name)
    }

    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    /// Closed gates with their held counts, by name.
    pub fn list(&self) -> Vec<(&[u8], usize)> {
        let mut v: Vec<(&[u8], usize)> = self
            .gates
            .values()
            .map(|g| (&*g.name, g.members.len()))
            .collect();
        v.sort_unstable();
        v
    }

    /// Closed gates, each with its held jobs in arrival order.
    pub fn gates(&self) -> impl Iterator<Item = &Gate> {
        self.gates.values()
    }

    /// The held job released earliest: (release time, job id).
    pub fn first_release(&self) -> Option<(i64, JobId)> {
        self.by_release.first().map(|&(release, _, j)| (release, j))
    }

    pub fn heap_bytes(&self) -> usize {
        let names: usize = self.gates.values().map(|g| g.name.len() * 2 + 96).sum();
        names + self.held.capacity() * 24 + self.by_release.len() * 24 * 2
    }

    /// Job `from` (arrival sequence `seq`) now lives at id `to` (compaction).
    pub fn relocate(&mut self, from: JobId, to: JobId, seq: i64) {
        if let Some(h) = self.held.remove(&from) {
            if let Some(g) = self.gates.get_mut(&h.gate) {
                g.members.remove(&(seq, from));
                g.members.insert((seq, to));
            }
            self.by_release.remove(&(h.release, seq, from));
            self.by_release.insert((h.release, seq, to));
            self.held.insert(to, h);
        }
    }

    /// Every held job is in exactly one closed gate and in the release
    /// order; names map to their gates.
    pub fn check(&self) -> Result<(), String> {
        let mut members = 0usize;
        for (id, g) in &self.gates {
            if self.by_name.get(&g.name) != Some(id) {
                return Err("a closed gate cannot be found by its name".into());
            }
            for (_, j) in &g.members {
                if self.held.get(j).map(|h| h.gate) != Some(*id) {
                    return Err("a gate lists a job it does not hold".into());
                }
            }
            members += g.members.len();
        }
        if self.by_name.len() != self.gates.len()
            || members != self.held.len()
            || self.by_release.len() != self.held.len()
            || self
                .by_release
                .iter()
                .any(|(r, _, j)| self.held.get(j).map(|h| h.release) != Some(*r))
        {
            return Err("held jobs and gates disagree".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::containers::slab::SlabId;

    fn j(x: u32) -> JobId {
        JobId::from_raw(x)
    }

    fn held(gate: u32, release: i64) -> Held {
        Held {
            gate,
            priority: 5,
            immediate: false,
            release,
        }
    }

    #[test]
    fn hold_release_and_forget() {
        let mut g = Gates::default();
        assert_eq!(g.closed(b"img"), None);
        let a = g.close(b"img");
        assert_eq!(g.close(b"img"), a, "closing twice keeps the gate");
        let b = g.close(b"other");
        assert_ne!(a, b);
        assert!(g.hold(j(10), 7, held(a, 100)));
        assert!(g.hold(j(11), 3, held(a, 50)));
        assert!(g.hold(j(12), 9, held(b, 70)));
        assert!(!g.hold(j(13), 1, held(99, 1)), "no such gate");
        g.check().unwrap();
        assert_eq!(g.held_count(), 3);
        assert_eq!(g.first_release(), Some((50, j(11))));
        assert_eq!(g.list(), vec![(&b"img"[..], 2), (&b"other"[..], 1)]);
        // Deleting a held job.
        assert_eq!(g.unhold(j(12), 9), Some(held(b, 70)));
        assert_eq!(g.unhold(j(12), 9), None);
        g.check().unwrap();
        // Forgetting a gate hands back its jobs in arrival order.
        assert_eq!(
            g.remove(b"img"),
            Some(vec![(j(11), held(a, 50)), (j(10), held(a, 100))])
        );
        assert_eq!(g.remove(b"img"), None);
        assert_eq!(g.held_count(), 0);
        g.check().unwrap();
        assert_eq!(g.closed(b"other"), Some(b));
    }

    #[test]
    fn relocation_keeps_membership() {
        let mut g = Gates::default();
        let a = g.close(b"x");
        g.hold(j(40), 2, held(a, 9));
        g.relocate(j(40), j(4), 2);
        g.check().unwrap();
        assert_eq!(g.get(j(4)), Some(&held(a, 9)));
        assert_eq!(g.remove(b"x"), Some(vec![(j(4), held(a, 9))]));
    }
}

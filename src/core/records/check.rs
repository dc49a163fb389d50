//! The records' invariants (docs/design.md, "Invariants" 1-7), for
//! `ORCA.CHECK`: one function per invariant, run in an order where each may
//! rely on what the earlier ones proved. O(n log n).

use std::collections::{HashMap, HashSet};

use super::Records;
use crate::core::ids::CollId;
use crate::core::job::JobLink;
use crate::core::limits::valid_time;
use crate::core::reservation::OwnerRef;

/// What the walk over the global order counted, for the later checks.
struct Reservations {
    /// Reservations owned by each collation.
    per_collation: HashMap<CollId, usize>,
    /// Reservations owned by single jobs.
    singles: usize,
    /// Every nonce in use.
    nonces: HashSet<u64>,
}

/// What the walk over the jobs counted.
struct Jobs {
    /// References to each collation from jobs naming it (stacked, single,
    /// held).
    refs: HashMap<CollId, u32>,
    /// Jobs in a collation stack.
    collated: usize,
    /// Jobs held behind gates.
    held: usize,
}

impl Records {
    /// `Ok(held)` (the number of held jobs, whose gates are the caller's to
    /// check) when the records are valid, or a message naming what is
    /// broken. `outside` counts the references to each collation from
    /// outside the records (parked jobs, submission windows): with the
    /// jobs naming it, they must be its reference count.
    pub fn check(&self, outside: &HashMap<CollId, u32>) -> Result<usize, String> {
        self.order.check_structure()?;
        let res = self.check_reservation_owners()?;
        self.check_nonces()?;
        let jobs = self.check_jobs(&res)?;
        let stacked = self.check_collations(&res, &jobs, outside)?;
        self.check_totals(&res, &jobs, stacked)?;
        Ok(jobs.held)
    }

    /// Invariants 3, 4 and 7: every reservation in the global order belongs
    /// to exactly one owner that knows it (a single job holding it, or a
    /// live collation); nonces are unique; scores, ties and nonces are in
    /// their ranges.
    fn check_reservation_owners(&self) -> Result<Reservations, String> {
        let mut per_collation: HashMap<CollId, usize> = HashMap::new();
        let mut all_nonces: HashSet<u64> = HashSet::with_capacity(self.order.len());
        let mut singles = 0usize;
        for n in self.order.iter() {
            let rk = self.rk(n);
            let nonce = self.nonce_of(n);
            if !all_nonces.insert(nonce) {
                return Err(format!("nonce {nonce} used twice (invariant 4)"));
            }
            if !valid_time(rk.score) {
                return Err(format!("reservation score {} out of range", rk.score));
            }
            if rk.tie >= self.next_seq || rk.tie < self.front_tie || rk.tie == 0 {
                return Err("reservation tie outside the allocated range".into());
            }
            if nonce == 0 || nonce >= self.next_seq as u64 {
                return Err("nonce outside the allocated range".into());
            }
            match self.order.val(n).get() {
                OwnerRef::Job(j) => {
                    let job = self
                        .jobs
                        .get(j)
                        .ok_or("a reservation belongs to no job (invariant 3)")?;
                    if job.collated() || job.link != JobLink::reservation(n) {
                        return Err("a job does not hold its own reservation".into());
                    }
                    let aux = self.order.aux(n);
                    if !aux.is_single_word() || (rk.tie < 0 && !aux.immediate()) {
                        return Err("a single reservation has bad flags".into());
                    }
                    singles += 1;
                }
                OwnerRef::Collation(c) => {
                    if self.colls.get(c).is_none_or(|c| c.len() == 0) {
                        return Err("a reservation belongs to an unknown collation".into());
                    }
                    if rk.tie < 0 {
                        return Err("a collation holds a front reservation".into());
                    }
                    *per_collation.entry(c).or_insert(0) += 1;
                }
            }
        }
        Ok(Reservations {
            per_collation,
            singles,
            nonces: all_nonces,
        })
    }

    /// Invariant 4's bookkeeping: a nonce is kept aside only when it differs
    /// from its reservation's tie, and only for a live reservation.
    fn check_nonces(&self) -> Result<(), String> {
        for (n, nonce) in &self.nonces {
            if !self.order.is_live(*n) || *nonce == self.rk(*n).tie as u64 {
                return Err("a kept nonce is stale or redundant".into());
            }
        }
        Ok(())
    }

    /// Invariant 1 (and 2 for single and held jobs): every job is found by
    /// its key and names a live collation; a job outside a stack holds a
    /// reservation in the order, or is held (with an arrival sequence number
    /// no reservation uses, its gate being the caller's to check); attempts
    /// are kept only for live jobs. Also counts the references to each
    /// collation.
    fn check_jobs(&self, res: &Reservations) -> Result<Jobs, String> {
        let mut refs: HashMap<CollId, u32> = HashMap::new();
        let mut collated = 0usize;
        let mut held = 0usize;
        let mut held_seqs: HashSet<u64> = HashSet::new();
        for (j, job) in self.jobs.iter() {
            if self.job_id(&job.key) != Some(j) {
                return Err("a job cannot be found by its key".into());
            }
            if let Some(c) = job.coll_id() {
                if self.colls.get(c).is_none() {
                    return Err("a job names a missing collation".into());
                }
                *refs.entry(c).or_insert(0) += 1;
            }
            if job.held() {
                let seq = job.skey.unsigned_abs();
                if job.collated()
                    || job.link != JobLink::NONE
                    || seq == 0
                    || seq >= self.next_seq as u64
                    || (job.skey < 0 && job.coll_id().is_none())
                    || res.nonces.contains(&seq)
                    || !held_seqs.insert(seq)
                {
                    return Err("a held job is malformed or its arrival collides".into());
                }
                held += 1;
            } else if job.collated() {
                collated += 1;
            } else if !self.order.is_live(job.link.as_reservation())
                || self.order.val(job.link.as_reservation()).as_job() != Some(j)
            {
                return Err("a job's reservation is not in the order".into());
            }
        }
        if self.by_key.len() != self.jobs.len() {
            return Err("the key table and the jobs disagree".into());
        }
        if self
            .attempts
            .iter()
            .any(|(j, a)| *a == 0 || self.jobs.get(*j).is_none())
        {
            return Err("attempts kept for a missing job".into());
        }
        Ok(Jobs {
            refs,
            collated,
            held,
        })
    }

    /// Invariants 2 and 5: each collation is stored in its canonical form
    /// and found by its name, counts what names it, and has a stack and a
    /// reservation list of the same length that pair one to one (the
    /// reservations in strictly increasing key order). Returns the number of
    /// stacked jobs.
    fn check_collations(
        &self,
        res: &Reservations,
        jobs: &Jobs,
        outside: &HashMap<CollId, u32>,
    ) -> Result<usize, String> {
        self.colls.check()?;
        let mut stacked = 0usize;
        for (c, coll) in self.colls.iter() {
            let name = &*self.name_of(c);
            let refs =
                jobs.refs.get(&c).copied().unwrap_or(0) + outside.get(&c).copied().unwrap_or(0);
            if refs != coll.refs() {
                return Err(format!("collation {name} counts its jobs wrong"));
            }
            let len = coll.len();
            if res.per_collation.get(&c).copied().unwrap_or(0) != len {
                return Err(format!(
                    "collation {name} has {len} jobs but other reservations (invariant 5)"
                ));
            }
            self.colls.check_members(c, name, &self.jobs, &self.order)?;
            stacked += len;
        }
        Ok(stacked)
    }

    /// Invariants 2 and 6: every collated job is in a stack, the global
    /// reservation count is single jobs plus all collation reservations,
    /// and the payload accounting adds up.
    fn check_totals(&self, res: &Reservations, jobs: &Jobs, stacked: usize) -> Result<(), String> {
        if stacked != jobs.collated {
            return Err("a collated job is in no collation stack (invariant 2)".into());
        }
        if res.singles + jobs.collated + jobs.held != self.jobs.len()
            || res.singles + stacked != self.order.len()
        {
            return Err(format!(
                "{} reservations in the order for {} jobs",
                self.order.len(),
                self.jobs.len()
            ));
        }
        let payload: usize = self.jobs.iter().map(|(_, j)| j.payload.len()).sum();
        if payload != self.payload_bytes {
            return Err("payload accounting is off".into());
        }
        Ok(())
    }
}

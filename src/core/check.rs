//! `ORCA.CHECK`: every invariant of the grading-queue design, plus the
//! pairing rule and the bookkeeping the implementation relies on. O(n log n);
//! meant for tests, operators and after loading untrusted data, not for every
//! command.
//!
//! One function per invariant of docs/design.md ("Invariants"); `check` runs
//! them in an order where each may rely on what the earlier ones proved.

use std::collections::{HashMap, HashSet};

use super::containers::idmap::IdMap;
use super::ids::CollId;
use super::job::JobLink;
use super::limits::valid_time;
use super::queue::{OwnerRef, Queue};

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
    /// References to each collation: jobs naming it (stacked, single,
    /// held), parked jobs naming it, its submission window.
    refs: HashMap<CollId, u32>,
    /// Jobs in a collation stack.
    collated: usize,
    /// Jobs held behind gates.
    held: usize,
}

impl Queue {
    /// `Ok(())` when the queue is valid, or a message naming what is broken.
    pub fn check(&self) -> Result<(), String> {
        self.index.check_structure()?;
        let res = self.check_reservation_owners()?;
        self.check_nonces()?;
        let jobs = self.check_jobs(&res)?;
        let stacked = self.check_collations(&res, &jobs)?;
        self.check_totals(&res, &jobs, stacked)?;
        self.check_policies()?;
        self.check_work()
    }

    /// Invariants 3, 4 and 7: every reservation in the global order belongs
    /// to exactly one owner that knows it (a single job holding it, or a
    /// live collation); nonces are unique; scores, ties and nonces are in
    /// their ranges.
    fn check_reservation_owners(&self) -> Result<Reservations, String> {
        let mut per_collation: HashMap<CollId, usize> = HashMap::new();
        let mut all_nonces: HashSet<u64> = HashSet::with_capacity(self.index.len());
        let mut singles = 0usize;
        for n in self.index.iter() {
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
            match self.index.val(n).get() {
                OwnerRef::Job(j) => {
                    let job = self
                        .jobs
                        .get(j)
                        .ok_or("a reservation belongs to no job (invariant 3)")?;
                    if job.collated() || job.link != JobLink::reservation(n) {
                        return Err("a job does not hold its own reservation".into());
                    }
                    let aux = self.index.aux(n);
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
            if !self.index.is_live(*n) || *nonce == self.rk(*n).tie as u64 {
                return Err("a kept nonce is stale or redundant".into());
            }
        }
        Ok(())
    }

    /// Invariant 1 (and 2 for single and held jobs): every job is found by
    /// its key and names a live collation; a job outside a stack holds a
    /// reservation in the order, or is held (behind a closed gate, with an
    /// arrival sequence number no reservation uses); attempts are kept only
    /// for live jobs. Also counts the references to each collation.
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
                let h = self.gates.get(j).ok_or("a held job is behind no gate")?;
                if job.collated()
                    || job.link != JobLink::NONE
                    || seq == 0
                    || seq >= self.next_seq as u64
                    || (job.skey < 0 && (job.coll_id().is_none() || h.immediate))
                    || res.nonces.contains(&seq)
                    || !held_seqs.insert(seq)
                {
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
                held += 1;
            } else if job.collated() {
                collated += 1;
            } else if !self.index.is_live(job.link.as_reservation())
                || self.index.val(job.link.as_reservation()).as_job() != Some(j)
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
        for p in self.work.parked() {
            if let Some(c) = p.coll_id() {
                if self.colls.get(c).is_none() {
                    return Err("a parked job names a missing collation".into());
                }
                *refs.entry(c).or_insert(0) += 1;
            }
        }
        for (c, _) in self.window.records() {
            if self.colls.get(c).is_none() {
                return Err("a submission window names a missing collation".into());
            }
            *refs.entry(c).or_insert(0) += 1;
        }
        Ok(Jobs {
            refs,
            collated,
            held,
        })
    }

    /// Invariants 2 and 5: each collation is stored in its canonical form
    /// and found by its name, counts the jobs naming it, and has a stack and
    /// a reservation list of the same length that pair one to one (the
    /// reservations in strictly increasing key order). Returns the number of
    /// stacked jobs.
    fn check_collations(&self, res: &Reservations, jobs: &Jobs) -> Result<usize, String> {
        self.colls.check()?;
        let mut stacked = 0usize;
        for (c, coll) in self.colls.iter() {
            let name = &*self.name_of(c);
            if jobs.refs.get(&c).copied().unwrap_or(0) != coll.refs() {
                return Err(format!("collation {name} counts its jobs wrong"));
            }
            let len = coll.len();
            if res.per_collation.get(&c).copied().unwrap_or(0) != len {
                return Err(format!(
                    "collation {name} has {len} jobs but other reservations (invariant 5)"
                ));
            }
            self.colls.check_members(c, name, &self.jobs, &self.index)?;
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
            || jobs.held != self.gates.held_count()
            || res.singles + stacked != self.index.len()
        {
            return Err(format!(
                "{} reservations in the order for {} jobs",
                self.index.len(),
                self.jobs.len()
            ));
        }
        let payload: usize = self.jobs.iter().map(|(_, j)| j.payload.len()).sum();
        if payload != self.payload_bytes {
            return Err("payload accounting is off".into());
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
        let mut want: HashSet<(super::reservation::ResKey, super::ids::NodeId)> = HashSet::new();
        let mut want_heads: IdMap<CollId, (super::reservation::ResKey, super::ids::NodeId)> =
            IdMap::default();
        if self.caps.on() {
            for (_, n) in self.singles() {
                want.insert((self.rk(n), n));
            }
            for c in self.colls.with_stack() {
                if self.caps.running(c) < self.caps.max() {
                    if let Some(n) = self.colls.first_res(c) {
                        want.insert((self.rk(n), n));
                        want_heads.insert(c, (self.rk(n), n));
                    }
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
        let next = self.next_seq;
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

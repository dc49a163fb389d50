//! `ORCA.CHECK`: every invariant of seed 000, plus the pairing rule and the
//! bookkeeping the implementation relies on. O(n log n); meant for tests,
//! operators and after loading untrusted data, not for every command.

use std::collections::{HashMap, HashSet};

use super::config::valid_collation_name;
use super::queue::{Owner, Place, Queue};
use super::MAX_TIME;

impl Queue {
    /// `Ok(())` when the queue is valid, or a message naming what is broken.
    pub fn check(&self) -> Result<(), String> {
        self.index.check_structure()?;

        // Every reservation in the global order belongs to exactly one owner
        // that knows it, with the same nonce.
        let mut per_collation: HashMap<&str, usize> = HashMap::new();
        let mut all_nonces: HashSet<u64> = HashSet::with_capacity(self.index.len());
        for (rk, res) in self.index.iter() {
            if !all_nonces.insert(res.nonce) {
                return Err(format!("nonce {} used twice (invariant 4)", res.nonce));
            }
            if !(0..=MAX_TIME).contains(&rk.score) {
                return Err(format!("reservation score {} out of range", rk.score));
            }
            if rk.tie >= self.next_seq || rk.tie < self.front_tie || rk.tie == 0 {
                return Err("reservation tie outside the allocated range".into());
            }
            if res.nonce == 0 || res.nonce >= self.next_seq as u64 {
                return Err("nonce outside the allocated range".into());
            }
            match &res.owner {
                Owner::Single(key) => {
                    let job = self
                        .jobs
                        .get(key)
                        .ok_or("a reservation belongs to no job (invariant 3)")?;
                    match job.place {
                        Place::Single { res: r, nonce, .. } if r == *rk && nonce == res.nonce => {}
                        _ => return Err("a job does not hold its own reservation".into()),
                    }
                }
                Owner::Collation(name) => {
                    let coll = self
                        .collations
                        .get(name)
                        .ok_or("a reservation belongs to an unknown collation")?;
                    if coll.res.get(rk) != Some(&res.nonce) {
                        return Err(format!(
                            "collation {name} does not know its reservation (or its nonce)"
                        ));
                    }
                    *per_collation.entry(name).or_insert(0) += 1;
                }
            }
        }

        // Collations: stack and reservations pair one to one; nonces unique;
        // every reservation of the collation is in the global order.
        let mut stacked: HashSet<[u8; 32]> = HashSet::new();
        let mut singles = 0usize;
        for (name, coll) in &self.collations {
            if !valid_collation_name(name) {
                return Err(format!("invalid collation name {name:?}"));
            }
            if coll.stack.is_empty() {
                return Err(format!("collation {name} is empty but still present"));
            }
            if coll.stack.len() != coll.res.len() {
                return Err(format!(
                    "collation {name} has {} jobs but {} reservations (invariant 5)",
                    coll.stack.len(),
                    coll.res.len()
                ));
            }
            if per_collation.get(&**name).copied().unwrap_or(0) != coll.res.len() {
                return Err(format!(
                    "collation {name} has reservations missing from the global order"
                ));
            }
            let mut nonces = HashSet::new();
            for nonce in coll.res.values() {
                if !nonces.insert(*nonce) {
                    return Err(format!(
                        "collation {name} reuses nonce {nonce} (invariant 4)"
                    ));
                }
            }
            for key in &coll.stack {
                if !stacked.insert(*key) {
                    return Err("a job key appears twice in collation stacks (invariant 2)".into());
                }
                let job = self
                    .jobs
                    .get(key)
                    .ok_or("a collation stack names a missing job (invariant 1)")?;
                if job.place != Place::Collated || job.collation.as_deref() != Some(&**name) {
                    return Err(format!(
                        "a job in collation {name}'s stack does not say it is there"
                    ));
                }
            }
        }

        // Every job owns exactly one reservation.
        for (key, job) in &self.jobs {
            match job.place {
                Place::Single { res, .. } => {
                    singles += 1;
                    match self.index.get(&res) {
                        Some(r) if r.owner == Owner::Single(*key) => {}
                        _ => return Err("a job's reservation is not in the order".into()),
                    }
                }
                Place::Collated => {
                    if !stacked.contains(key) {
                        return Err("a collated job is in no collation stack".into());
                    }
                }
            }
        }
        if singles + stacked.len() != self.jobs.len() {
            return Err("job count does not match stacks and reservations".into());
        }
        let reservations: usize =
            singles + self.collations.values().map(|c| c.res.len()).sum::<usize>();
        if reservations != self.index.len() {
            return Err(format!(
                "{} reservations in the order for {} jobs",
                self.index.len(),
                reservations
            ));
        }
        let payload: usize = self.jobs.values().map(|j| j.payload.len()).sum();
        if payload != self.payload_bytes {
            return Err("payload accounting is off".into());
        }
        Ok(())
    }
}

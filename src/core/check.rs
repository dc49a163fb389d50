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
        self.check_work()
    }

    /// Leases, retries, dead letters, results and cancellations: each map
    /// agrees with its deadline order, counters are in range, bytes add up.
    fn check_work(&self) -> Result<(), String> {
        let w = &self.work;
        let seq = self.next_seq;
        let time_ok = |t: i64| (0..=MAX_TIME).contains(&t);
        let name_ok = |c: &Option<std::rc::Rc<str>>| c.as_deref().is_none_or(valid_collation_name);
        let mut bytes = 0usize;
        if w.leases.len() != w.lease_order.len() {
            return Err("lease order and leases disagree".into());
        }
        for (token, l) in &w.leases {
            if *token == 0 || *token >= seq as u64 || !w.lease_order.contains(&(l.deadline, *token))
            {
                return Err("a lease is out of range or missing from the lease order".into());
            }
            if !time_ok(l.deadline) || !time_ok(l.job.created_at) || !name_ok(&l.job.collation) {
                return Err("a lease holds an invalid job".into());
            }
            if w.cancelled.contains_key(token) {
                return Err("a lease is both held and cancelled".into());
            }
            bytes += l.job.payload.len();
        }
        let indexed: usize = w.lease_keys.values().map(Vec::len).sum();
        let index_ok = w.lease_keys.iter().all(|(k, ts)| {
            !ts.is_empty()
                && ts
                    .iter()
                    .all(|t| w.leases.get(t).is_some_and(|l| l.key == *k))
        });
        if indexed != w.leases.len() || !index_ok {
            return Err("lease index by key disagrees with the leases".into());
        }
        if w.delayed.len() != w.delayed_order.len() {
            return Err("retry order and delayed jobs disagree".into());
        }
        for (key, d) in &w.delayed {
            if !w.delayed_order.contains(&(d.retry_at, *key)) {
                return Err("a delayed job is missing from the retry order".into());
            }
            if !time_ok(d.retry_at) || !time_ok(d.job.created_at) || !name_ok(&d.job.collation) {
                return Err("a delayed job is invalid".into());
            }
            bytes += d.job.payload.len();
        }
        if w.dead.len() != w.dead_order.len() {
            return Err("dead order and dead jobs disagree".into());
        }
        for (key, d) in &w.dead {
            if !w.dead_order.contains(&(d.died_at, d.seq, *key)) || d.seq <= 0 || d.seq >= seq {
                return Err("a dead job is missing from the dead order or out of range".into());
            }
            if !time_ok(d.died_at) || !time_ok(d.job.created_at) || !name_ok(&d.job.collation) {
                return Err("a dead job is invalid".into());
            }
            bytes += d.job.payload.len();
        }
        if w.results.len() != w.result_order.len() {
            return Err("result order and results disagree".into());
        }
        for (key, r) in &w.results {
            if !w.result_order.contains(&(r.expires_at, *key)) || !time_ok(r.expires_at) {
                return Err("a result is missing from the result order".into());
            }
            bytes += r.payload.len();
        }
        if w.cancelled.len() != w.cancelled_order.len() {
            return Err("cancellation order and cancellations disagree".into());
        }
        for (token, until) in &w.cancelled {
            if *token == 0
                || *token >= seq as u64
                || !w.cancelled_order.contains(&(*until, *token))
                || !time_ok(*until)
            {
                return Err("a cancellation is out of range or missing from its order".into());
            }
        }
        if bytes != w.bytes {
            return Err("parked payload accounting is off".into());
        }
        Ok(())
    }
}

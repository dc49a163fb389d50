//! Job lifetime ("every job is created with the promise of eventual
//! removal"): with `lifetime = L`, a job still waiting `L` ms after its
//! release time becomes a dead letter with cause `expired`, replayable with
//! `ORCA.DEAD ... REQUEUE`.
//!
//! A waiting job's release time is:
//! - queued: the score of the reservation it holds or is paired with. The
//!   job with the earliest release time is the one of the lowest
//!   reservation, so the next lifetime deadline is the global order's first
//!   score plus `L`, and expiring takes jobs from the front: O(log n) each,
//!   nothing stored per job. (A job back from a failed attempt is queued at
//!   its original arrival, so its lifetime counts from there.)
//! - delayed for a retry: its original arrival, where the retry will queue
//!   it (so an old job that fails is not retried past its lifetime).
//! - held behind a gate: arrival + priority, the release time it will get.

use super::queue::Queue;
use super::worker::{DeathCause, TickReport};

impl Queue {
    /// When the next waiting job's lifetime runs out (none without a lifetime).
    pub(crate) fn lifetime_deadline(&self) -> Option<i64> {
        let l = self.settings.lifetime;
        if l == 0 {
            return None;
        }
        [
            self.records.first().map(|n| self.records.rk(n).score),
            self.work.first_delayed_arrival().map(|x| x.0),
            self.gates.first_release().map(|x| x.0),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|t| t.saturating_add(l))
    }

    /// Make every waiting job whose lifetime ran out by `now` a dead letter.
    pub(crate) fn expire_lifetimes(&mut self, now: i64, report: &mut TickReport) {
        let l = self.settings.lifetime;
        if l == 0 {
            return;
        }
        while let Some(n) = self.records.first() {
            if self.records.rk(n).score.saturating_add(l) > now {
                break;
            }
            let Ok(popped) = self.records.take_node(n, &mut self.caps) else {
                break;
            };
            let (key, job) = Queue::parked_from(popped);
            self.bury(key, job, now, DeathCause::Lifetime, None);
            report.died += 1;
            report.lifetime += 1;
        }
        while let Some((arrival, key)) = self.work.first_delayed_arrival() {
            if arrival.saturating_add(l) > now {
                break;
            }
            let Some(d) = self.work.unpark(&key) else {
                break;
            };
            self.bury(key, d.job, now, DeathCause::Lifetime, d.error);
            report.died += 1;
            report.lifetime += 1;
        }
        while let Some((release, j)) = self.gates.first_release() {
            if release.saturating_add(l) > now {
                break;
            }
            let Ok((key, job)) = self.take_held(j) else {
                break;
            };
            self.bury(key, job, now, DeathCause::Lifetime, None);
            report.died += 1;
            report.lifetime += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::core::config::{orca_key, JobConfig};
    use crate::core::settings::Settings;
    use crate::core::worker::{DeathCause, Policy};
    use crate::core::Queue;

    const POLICY: Policy = Policy {
        max_attempts: 5,
        retry_base: 10,
        retry_cap: 10,
    };

    fn cfg(name: &str, coll: Option<&str>) -> JobConfig {
        JobConfig {
            job_key: orca_key(name, ""),
            collation: coll.map(str::to_string),
            priority: 0,
            gate: None,
        }
    }

    /// Expiring is not a delivery: a dead letter by lifetime keeps the
    /// attempts the job had (docs/commands.md: attempts counts deliveries).
    #[test]
    fn expiry_keeps_the_attempts() {
        let mut q = Queue::with_settings(Settings {
            lifetime: 100,
            ..Settings::default()
        });
        q.enqueue(&cfg("fresh", Some("user.1")), b"a", 1_000)
            .unwrap();
        q.enqueue(&cfg("single", None), b"b", 1_000).unwrap();
        q.enqueue(&cfg("tried", None), b"c", 1_000).unwrap();
        // "tried" is handed out once and fails: back at its arrival.
        let (ds, _) = q.pop_deliveries(1_010, 1_000, 3, &POLICY).unwrap();
        let tried = ds
            .iter()
            .find(|d| d.job.key == orca_key("tried", ""))
            .unwrap();
        let (token, _) = tried.lease.unwrap();
        for d in &ds {
            if d.job.key != orca_key("tried", "") {
                let (t, _) = d.lease.unwrap();
                q.nack(&d.job.key, t, Some(0), 1_011, &POLICY).unwrap();
            }
        }
        q.nack(&orca_key("tried", ""), token, Some(0), 1_011, &POLICY)
            .unwrap();
        // Everything is past its lifetime by 1_200.
        let report = q.tick(1_200, &POLICY);
        assert_eq!(report.lifetime, 3);
        for (key, d) in q.dead_list(0, 10) {
            assert_eq!(d.cause, DeathCause::Lifetime);
            assert_eq!(d.job.attempts, 1, "{key:?}: one delivery, no more");
        }
        // A job never handed out dies with 0.
        q.enqueue(&cfg("never", None), b"d", 2_000).unwrap();
        q.tick(2_200, &POLICY);
        let never = q
            .dead_list(0, 10)
            .into_iter()
            .find(|(k, _)| *k == orca_key("never", ""))
            .unwrap();
        assert_eq!(never.1.job.attempts, 0);
        q.check().unwrap();
    }
}

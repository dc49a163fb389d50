//! The model of job lifetimes (docs/commands.md, `ORCA.SETTINGS ...
//! LIFETIME <ms>`), part of the worker model's `tick`:
//!
//! - "a waiting job not handed out `ms` after its release time becomes a
//!   dead letter with cause `expired` (replayable with `ORCA.DEAD ...
//!   REQUEUE`)", 0 = never;
//! - "Release time: a queued job's reservation score (a job back from a
//!   failed attempt is queued at its original arrival, so its lifetime
//!   counts from there); a delayed job's original arrival; a held job's
//!   arrival + priority" (ORCA.GATE: "They expire with the queue's
//!   lifetime like any waiting job (release time = arrival + priority)");
//!   for a held job the model takes the release time its reservation will
//!   have (`release_at` of ORCA.STATUS), which for a job made immediate
//!   while held is its arrival (the docs do not say which applies then);
//! - a job expires when a tick (or a pop, which ticks first) runs at or
//!   after release + lifetime, as every other deadline of `ORCA.TICK`
//!   ("the time-driven changes due now"); the tick's `lifetime` counts
//!   them, and `died` too ("attempts used up or lifetime over").
//!
//! The docs do not say in which order jobs that expire in the same tick
//! are buried (which decides their order on the dead list, and which ones
//! a `DEADMAX` bound keeps). The model buries queued jobs in pop order
//! (their release order), then delayed jobs by arrival (then orca key),
//! then held jobs by release time (then arrival).

use orca::core::worker::DeathCause;
use orca::core::{JobKey, TickReport};

use crate::worker_model::Model;

/// Waiting jobs with the release time their lifetime counts from: queued
/// (in pop order), delayed (by arrival, then key), held (by release, then
/// arrival sequence).
type Releases = (
    Vec<(i64, JobKey)>,
    Vec<(i64, JobKey)>,
    Vec<(i64, i64, JobKey)>,
);

/// The open core bug `worker_bug_lifetime_expiry_counts_a_delivery`
/// (`worker_rules/regressions.rs`): a queued job whose lifetime runs out is
/// buried with one more attempt than it had, as if it had been handed out.
/// The random sequences expect that until it is fixed (then set this to
/// `false`), so they keep looking for other bugs meanwhile.
pub const OPEN_BUG_QUEUED_EXPIRY_COUNTS_A_DELIVERY: bool = false;

impl Model {
    fn releases(&self) -> Releases {
        let queued = self
            .order
            .pop_order()
            .into_iter()
            .map(|k| (self.order.info(&k).unwrap().release_at, k))
            .collect();
        let mut delayed: Vec<(i64, JobKey)> = self
            .delayed
            .iter()
            .map(|(k, (_, j))| (j.created_at, *k))
            .collect();
        delayed.sort_unstable();
        let mut held: Vec<(i64, i64, JobKey)> = self
            .order
            .jobs
            .iter()
            .filter_map(|j| j.held.as_ref().map(|h| (h.release, h.seq, j.key)))
            .collect();
        held.sort_unstable();
        (queued, delayed, held)
    }

    /// When the next waiting job's lifetime runs out.
    pub fn lifetime_deadline(&self) -> Option<i64> {
        let l = self.settings.lifetime;
        if l == 0 {
            return None;
        }
        let (q, d, h) = self.releases();
        let first = [
            q.first().map(|x| x.0),
            d.first().map(|x| x.0),
            h.first().map(|x| x.0),
        ];
        first.into_iter().flatten().min().map(|t| t + l)
    }

    /// The lifetime step of a tick at `now`.
    pub fn expire_lifetimes(&mut self, now: i64, report: &mut TickReport) {
        let l = self.settings.lifetime;
        if l == 0 {
            return;
        }
        let (q, d, h) = self.releases();
        let due = q
            .into_iter()
            .chain(d)
            .chain(h.into_iter().map(|(r, _, k)| (r, k)));
        for (release, key) in due.collect::<Vec<_>>() {
            if release + l > now {
                continue;
            }
            let job = match self.delayed.remove(&key) {
                Some((_, j)) => {
                    self.ev("tick: lifetime over -> dead (delayed)");
                    j
                }
                None => {
                    let held = self.order.job(&key).unwrap().held.is_some();
                    self.order.delete(&key);
                    self.ev(if held {
                        "tick: lifetime over -> dead (held)"
                    } else {
                        "tick: lifetime over -> dead (queued)"
                    });
                    let mut j = self.queued.remove(&key).unwrap();
                    if !held && OPEN_BUG_QUEUED_EXPIRY_COUNTS_A_DELIVERY {
                        j.attempts += 1;
                    }
                    j
                }
            };
            self.bury(key, job, now, DeathCause::Lifetime);
            report.died += 1;
            report.lifetime += 1;
        }
    }
}

//! After every step: everything observable compared with the model; the
//! next deadline probed; the encode/decode round trip that makes the twin.

use orca::core::{Queue, TickReport};

use crate::support::*;
use crate::worker_views::*;

use super::*;

impl Harness {
    /// Compare everything observable with the model.
    pub(super) fn verify(&self) -> Result<(), String> {
        let q = &self.q;
        let m = &self.model;
        q.check().map_err(|e| format!("check() failed: {e}"))?;
        m.ledger()?;
        ensure!(
            q.state_counts() == m.counts(),
            "state_counts {:?}, model (queued, delayed, leased, dead) {:?}",
            q.state_counts(),
            m.counts()
        );
        ensure!(
            q.next_deadline() == m.next_deadline(),
            "next_deadline {:?}, model {:?}",
            q.next_deadline(),
            m.next_deadline()
        );
        let order = q.pop_order();
        ensure!(
            order.len() == m.queued.len() && order.iter().all(|k| m.queued.contains_key(k)),
            "queue holds {:?}, model {:?}",
            order.iter().map(kname).collect::<Vec<_>>(),
            m.queued.keys().map(kname).collect::<Vec<_>>()
        );
        for key in &self.keys {
            let got = core_states(q, key)?;
            let pos = order.iter().position(|k| k == key).map(|p| p + 1);
            let core_release = got.iter().find_map(|s| match s {
                S::Queued { release_at, .. } => Some(*release_at),
                _ => None,
            });
            let want = m.states(key, pos, core_release);
            ensure!(
                got == want,
                "states({}):\n    core:  {got:?}\n    model: {want:?}",
                kname(key)
            );
            let r = q.result(key, self.now).map(<[u8]>::to_vec);
            let want = m
                .results
                .get(key)
                .filter(|(at, _)| *at > self.now)
                .map(|(_, p)| p.clone());
            ensure!(
                r == want,
                "result({}, {}): {:?}, model {:?}",
                kname(key),
                self.now,
                r.as_deref().map(text),
                want.as_deref().map(text)
            );
        }
        let got = core_dead_list(q, 0, usize::MAX);
        let want: Vec<String> = m.dead_list().iter().map(|(k, _)| kname(k)).collect();
        let got_keys: Vec<String> = got.iter().map(|d| d.key.clone()).collect();
        ensure!(
            got_keys == want,
            "dead_list order {got_keys:?}, model {want:?}"
        );
        if self.policy_fixed {
            let max = self.policy.max_attempts;
            if max == 0 {
                ensure!(m.dead.is_empty(), "a job died with max_attempts 0");
            } else {
                for d in m.dead.values() {
                    ensure!(
                        d.job.attempts == max,
                        "dead after {} of {max} attempts",
                        d.job.attempts
                    );
                }
                for l in m.leases.values() {
                    ensure!(
                        (1..=max).contains(&l.job.attempts),
                        "leased at attempt {}",
                        l.job.attempts
                    );
                }
                for j in m.queued.values().chain(m.delayed.values().map(|(_, j)| j)) {
                    ensure!(
                        j.attempts < max,
                        "waiting with {} of {max} attempts",
                        j.attempts
                    );
                }
            }
        }
        Ok(())
    }

    /// `next_deadline()` is exact: a tick 1 ms before it changes nothing,
    /// a tick at it changes something and moves it later.
    pub(super) fn probe_next_deadline(&self) -> Result<(), String> {
        let Some(d) = self.q.next_deadline() else {
            return Ok(());
        };
        let mut c = self.q.clone();
        let before = c.encode();
        if d > 0 {
            let r = c.tick(d - 1, &self.policy);
            ensure!(
                r == TickReport::default() && c.encode() == before,
                "tick({}) one ms before next_deadline {d} changed something: {r:?}",
                d - 1
            );
        }
        c.tick(d, &self.policy);
        ensure!(
            c.encode() != before,
            "tick at next_deadline {d} changed nothing"
        );
        ensure!(
            c.next_deadline().is_none_or(|n| n > d),
            "after tick({d}) next_deadline is {:?}",
            c.next_deadline()
        );
        Ok(())
    }

    /// Encode/decode round trip; the decoded copy becomes the new twin.
    pub(super) fn sync(&mut self) -> Result<(), String> {
        let bytes = self.q.encode();
        ensure!(
            self.twin.encode() == bytes,
            "the twin's encoding drifted from the queue's since the last sync"
        );
        let d = Queue::decode(&bytes).map_err(|e| format!("decode(encode()) failed: {e}"))?;
        d.check()
            .map_err(|e| format!("decoded check failed: {e}"))?;
        ensure!(d.encode() == bytes, "decode/encode is not byte-identical");
        ensure!(
            d.pop_order() == self.q.pop_order(),
            "decoded pop_order differs"
        );
        ensure!(
            d.state_counts() == self.q.state_counts(),
            "decoded counts differ"
        );
        ensure!(
            d.next_deadline() == self.q.next_deadline(),
            "decoded next_deadline differs"
        );
        self.twin = d;
        Ok(())
    }
}

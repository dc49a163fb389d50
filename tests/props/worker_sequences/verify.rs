//! After every step: everything observable compared with the model; the
//! next deadline probed; the encode/decode round trip that makes the twin.

use orca::core::worker::DeathCause;
use orca::core::{Queue, TickReport, MAX_TIME};

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
        let want_order = m.order.pop_order();
        ensure!(
            order == want_order,
            "pop_order {:?}\n    model {:?}",
            names(&order),
            names(&want_order)
        );
        for key in &self.keys {
            let got = core_states(q, key)?;
            let want = m.states(key);
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
        let want = m.dead_views();
        ensure!(got == want, "dead_list {got:?}\n    model {want:?}");
        self.verify_policies()?;
        if self.policy_fixed {
            let max = self.policy.max_attempts;
            // Lifetime deaths have nothing to do with attempts.
            let failed = || m.dead.values().filter(|d| d.cause != DeathCause::Lifetime);
            if max == 0 {
                ensure!(failed().count() == 0, "a job died with max_attempts 0");
            } else {
                for d in failed() {
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

    /// Held jobs and gates, running counts, the statistics and the
    /// settings, as the model has them.
    pub(super) fn verify_policies(&self) -> Result<(), String> {
        let q = &self.q;
        let m = &self.model;
        compare_gates(q, &m.order)?;
        let mut running: Vec<(String, u32)> = q
            .running_by_collation(usize::MAX)
            .into_iter()
            .map(|(c, n)| (c.into_owned(), n))
            .collect();
        running.sort();
        ensure!(
            running == m.running_list(),
            "running_by_collation {running:?}, model {:?}",
            m.running_list()
        );
        ensure!(
            q.settings() == &m.settings,
            "settings {:?}, model {:?}",
            q.settings(),
            m.settings
        );
        // ORCA.STATS: "counts by state ..., `results` kept, `collations`,
        // `immediate` queued jobs, and wait-time statistics in ms ... (the
        // wait of a queued job is now minus its arrival time `created_at`):
        // `wait_all` over every queued job and `wait_released` over queued
        // jobs whose release time has passed".
        let st = q.stats(self.now);
        let (queued, delayed, leased, dead) = m.counts();
        let infos: Vec<Info> = m
            .order
            .pop_order()
            .iter()
            .map(|k| m.info(k).unwrap())
            .collect();
        let waits = |released: bool| {
            let w: Vec<i64> = infos
                .iter()
                .filter(|i| !released || i.release_at <= self.now)
                .map(|i| (self.now - i.created_at).max(0))
                .collect();
            let n = w.len() as i64;
            (
                n,
                w.iter().min().copied().unwrap_or(0),
                w.iter().max().copied().unwrap_or(0),
                if n == 0 { 0 } else { w.iter().sum::<i64>() / n },
            )
        };
        let got = (
            (st.queued, st.delayed, st.leased, st.dead),
            (st.results, st.collations, st.immediate),
            (
                st.wait_all.count as i64,
                st.wait_all.min,
                st.wait_all.max,
                st.wait_all.avg(),
            ),
            (
                st.wait_released.count as i64,
                st.wait_released.min,
                st.wait_released.max,
                st.wait_released.avg(),
            ),
        );
        let want = (
            (queued, delayed, leased, dead),
            (
                m.results.len(),
                m.order.stacks.len(),
                infos.iter().filter(|i| i.immediate).count(),
            ),
            waits(false),
            waits(true),
        );
        ensure!(got == want, "stats({}) {got:?}, model {want:?}", self.now);
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
        if d > MAX_TIME {
            // A dead letter's age or a job's lifetime that ends past the
            // last time a clock can show (2^53-1): due never.
            return Ok(());
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
        let mut d = d;
        // A loaded queue may announce a wake-up; the twin starts clean.
        d.take_woken();
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

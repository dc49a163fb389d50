//! The policies' units: a job held behind a closed gate (with the arrival
//! and priority its release will use), a closed gate holding no job, and a
//! collation's submission window. Written per gate by name (its held jobs
//! in arrival order, or the gate itself when empty), then windows by
//! collation name.

use std::borrow::Cow;
use std::collections::VecDeque;

use super::io::{Reader, Writer};
use super::{corrupt, QueueBuilder, UNIT_GATE, UNIT_HELD, UNIT_WINDOW};
use crate::core::error::QueueError;
use crate::core::gates::Gate;
use crate::core::limits::MAX_TIME;
use crate::core::queue::Queue;

impl Queue {
    /// The held-job and empty-gate units, gates by name.
    pub(super) fn write_gate_units(&self, w: &mut Writer, f: &mut impl FnMut(&[u8])) {
        let r = &self.records;
        let mut gates: Vec<&Gate> = self.gates.gates().collect();
        gates.sort_unstable_by(|a, b| a.name().cmp(b.name()));
        for g in &gates {
            for j in g.members() {
                let (Some(job), Some(h)) = (r.get_job(j), self.gates.get(j)) else {
                    continue;
                };
                w.0.clear();
                w.u8(UNIT_HELD);
                w.job(&job.key, job.created_at, r.attempts(j), &job.payload);
                w.optional_name(r.coll_name(j).as_deref());
                w.bytes(g.name());
                w.i64(job.skey);
                w.i64(h.priority);
                w.u8(h.immediate as u8);
                f(&w.0);
            }
            if g.is_empty() {
                w.0.clear();
                w.u8(UNIT_GATE);
                w.bytes(g.name());
                f(&w.0);
            }
        }
    }

    /// The submission-window units, by collation name.
    pub(super) fn write_window_units(&self, w: &mut Writer, f: &mut impl FnMut(&[u8])) {
        let mut windows: Vec<(Cow<'_, str>, &VecDeque<i64>)> = self
            .window
            .records()
            .map(|(c, t)| (self.name_of(c), t))
            .collect();
        windows.sort_unstable();
        for (coll, times) in windows {
            w.0.clear();
            w.u8(UNIT_WINDOW);
            w.bytes(coll.as_bytes());
            w.u64(times.len() as u64);
            for t in times {
                w.i64(*t);
            }
            f(&w.0);
        }
    }
}

impl QueueBuilder {
    /// A job held behind a closed gate (which the unit closes if needed).
    pub(super) fn add_held(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let (key, created_at, attempts, payload) = r.job()?;
        let collation = r.optional_collation()?;
        let gate = r.gate_name()?;
        let skey = r.skey()?;
        let priority = r.time()?;
        let immediate = r.flag("immediate")?;
        r.done()?;
        let seq = skey.saturating_abs();
        if seq == 0 || (skey < 0 && (collation.is_none() || immediate)) {
            return Err(corrupt("held job with a bad arrival"));
        }
        self.check_skey(skey)?;
        if !immediate
            && created_at
                .checked_add(priority)
                .is_none_or(|t| t > MAX_TIME)
        {
            return Err(corrupt("held job released out of range"));
        }
        if self.empty_gates.contains(gate) {
            return Err(corrupt("held job behind a gate declared empty"));
        }
        if self.q.records.contains(&key) {
            return Err(corrupt("duplicate job key"));
        }
        self.q.records.room()?;
        let g = self.q.gates.close(gate);
        let j = self
            .q
            .records
            .new_job(key, payload.into(), created_at, attempts, collation)?;
        self.q.hold(j, g, skey, priority, immediate);
        Ok(())
    }

    /// A closed gate holding no job.
    pub(super) fn add_gate(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let gate = r.gate_name()?;
        r.done()?;
        if self.q.gates.closed(gate).is_some() {
            if self.merging {
                // Closed on both sides: one closed gate (`absorb`).
                return Ok(());
            }
            return Err(corrupt("duplicate gate"));
        }
        self.q.gates.close(gate);
        self.empty_gates.insert(gate.to_vec());
        Ok(())
    }

    /// A collation's recent submissions (times ascending).
    pub(super) fn add_window(&mut self, r: &mut Reader<'_>) -> Result<(), QueueError> {
        let name = r.collation_name()?;
        let n = r.u64()?;
        if n == 0 || n > r.buf.len() as u64 / 8 {
            return Err(corrupt("submission window count out of range"));
        }
        let mut times = VecDeque::new();
        for _ in 0..n {
            let t = r.time()?;
            if times.back().is_some_and(|&b| b > t) {
                return Err(corrupt("submission window times out of order"));
            }
            times.push_back(t);
        }
        r.done()?;
        if !self.q.settings.autodelay.on() {
            return Err(corrupt("submission window without an auto delay"));
        }
        if self
            .q
            .records
            .coll_id(name)
            .is_some_and(|c| self.q.window.records().any(|(x, _)| x == c))
        {
            return Err(corrupt("duplicate submission window"));
        }
        let c = self.q.records.acquire_coll(name)?;
        let window = self.q.settings.autodelay.window;
        if !self.q.window.load(c, times, window) {
            self.q.records.release_coll(c);
            return Err(corrupt("duplicate submission window"));
        }
        Ok(())
    }
}

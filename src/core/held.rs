//! The queue's side of gates (`gates.rs`): holding a job at arrival, and
//! releasing or dropping every job of a gate in one step.
//!
//! A held job keeps everything its arrival decided: its arrival sequence
//! number (in `Job::skey`: the stack key a collation job will take, or
//! `+seq` for a single job), its priority (with any auto delay), and whether
//! it is immediate. Opening the gate gives each the reservation a direct
//! enqueue would have given it at that arrival, `(arrival + priority, seq)`,
//! and puts a collation job into its stack at its stack key, so the queue
//! ends as if the gate had never been closed (for jobs that arrived in
//! between too, since every reservation and stack key compares by the same
//! sequence).

use super::codec::MAX_GATE_NAME;
use super::config::JobKey;
use super::containers::slab::MAX_ID;
use super::error::QueueError;
use super::gates::Held;
use super::ids::JobId;
use super::job::JobInfo;
use super::queue::Queue;
use super::reservation::ResKey;
use super::work::Parked;

impl Queue {
    /// Jobs held behind closed gates.
    pub fn held_len(&self) -> usize {
        self.gates.held_count()
    }

    /// Closed gates with the number of jobs each holds, by name.
    pub fn gate_list(&self) -> Vec<(&[u8], usize)> {
        self.gates.list()
    }

    /// The gate holding job `j`, if it is held.
    pub(crate) fn held_gate(&self, j: JobId) -> Option<&[u8]> {
        let h = self.gates.get(j)?;
        self.gates.gate_name(h.gate)
    }

    /// The gate holding the job under `key`, if it is held.
    pub fn held_gate_of(&self, key: &JobKey) -> Option<&[u8]> {
        self.held_gate(self.job_id(key)?)
    }

    /// Is `gate` closed?
    pub fn gate_closed(&self, gate: &[u8]) -> bool {
        self.gates.closed(gate).is_some()
    }

    /// `ORCA.GATE ... CLOSE`: jobs naming `gate` are held from now on.
    /// Returns whether the gate was open. A name the queue could not save
    /// (empty, or longer than its loaders accept) is refused.
    pub fn close_gate(&mut self, gate: &[u8]) -> Result<bool, QueueError> {
        if gate.is_empty() || gate.len() > MAX_GATE_NAME {
            return Err(QueueError::BadSetting(format!(
                "gate names must be 1 to {MAX_GATE_NAME} bytes"
            )));
        }
        let was_open = self.gates.closed(gate).is_none();
        self.gates.close(gate);
        Ok(was_open)
    }

    /// Hold new job `j` behind closed gate `gate`, with stack key `skey`
    /// (its arrival: `-seq` or `+seq`, see `Job::skey`).
    pub(crate) fn hold(&mut self, j: JobId, gate: u32, skey: i64, priority: i64, immediate: bool) {
        let created_at = self.records.job(j).created_at;
        let release = if immediate {
            created_at
        } else {
            created_at.saturating_add(priority)
        };
        self.records.hold(j, skey);
        self.gates.hold(
            j,
            skey.abs(),
            Held {
                gate,
                priority,
                immediate,
                release,
            },
        );
    }

    /// A held job's view: the reservation it will get when released.
    pub(crate) fn held_info(&self, j: JobId) -> Option<JobInfo<'_>> {
        let h = self.gates.get(j)?;
        let nonce = self.records.job(j).skey.unsigned_abs();
        Some(self.records.view(j, h.immediate, nonce, h.release))
    }

    /// Take held job `j` out of its gate (not out of the queue).
    pub(crate) fn unhold(&mut self, j: JobId) -> Option<Held> {
        let seq = self.records.job(j).skey.abs();
        let h = self.gates.unhold(j, seq)?;
        self.records.unhold(j);
        Some(h)
    }

    /// Turn a held job whose key was put again as immediate into an
    /// immediate one (arrival kept).
    pub(crate) fn hold_as_immediate(&mut self, j: JobId) {
        if let Some(h) = self.unhold(j) {
            let seq = self.records.job(j).skey.abs();
            self.hold(j, h.gate, seq, 0, true);
        }
    }

    /// Take held job `j` out of the queue entirely, as a parked job (its
    /// collation reference moves with it).
    pub(crate) fn take_held(&mut self, j: JobId) -> Result<(JobKey, Parked), QueueError> {
        let h = self
            .unhold(j)
            .ok_or_else(|| QueueError::Corrupt("held job missing from its gate".into()))?;
        let (job, attempts, coll) = self.records.take_job(j)?;
        Ok((
            job.key,
            Parked {
                payload: job.payload,
                created_at: job.created_at,
                attempts,
                coll,
                immediate: h.immediate,
            },
        ))
    }

    /// `ORCA.GATE ... OPEN`: every held job of `gate` enters the queue as if
    /// enqueued at its own arrival; the gate is forgotten. Returns how many.
    /// O(k log n) for k held jobs.
    pub fn open_gate(&mut self, gate: &[u8]) -> Result<usize, QueueError> {
        let Some(id) = self.gates.closed(gate) else {
            return Ok(0);
        };
        let k = self
            .gates
            .list()
            .iter()
            .find(|(n, _)| *n == gate)
            .map_or(0, |g| g.1);
        if self.records.order_len() + k >= MAX_ID as usize {
            return Err(QueueError::Full);
        }
        let _ = id;
        let members = self.gates.remove(gate).unwrap_or_default();
        let n = members.len();
        let r = &mut self.records;
        for (j, h) in members {
            let skey = r.unhold(j);
            let seq = skey.abs();
            let rk = ResKey {
                score: h.release,
                tie: seq,
            };
            match r.job(j).coll_id() {
                Some(c) if !h.immediate => r.collate(c, j, skey, rk, seq as u64, &mut self.caps)?,
                _ => r.place_single(j, rk, seq as u64, h.immediate, &mut self.caps)?,
            }
        }
        Ok(n)
    }

    /// `ORCA.GATE ... DROP`: remove every held job of `gate` and forget the
    /// gate. Returns their configs as given, in arrival order.
    pub fn drop_gate(&mut self, gate: &[u8]) -> Result<Vec<Box<[u8]>>, QueueError> {
        let Some(members) = self.gates.remove(gate) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(members.len());
        for (j, _) in members {
            self.records.unhold(j);
            let (job, _) = self.records.drop_job(j)?;
            out.push(job.payload);
        }
        Ok(out)
    }

    /// Held jobs (of `gate`, or of every gate by name), in arrival order,
    /// from `offset`, at most `limit`.
    pub fn held_list(
        &self,
        gate: Option<&[u8]>,
        offset: usize,
        limit: usize,
    ) -> Vec<(JobInfo<'_>, &[u8])> {
        let mut gates: Vec<&super::gates::Gate> = self
            .gates
            .gates()
            .filter(|g| gate.is_none_or(|name| g.name() == name))
            .collect();
        gates.sort_unstable_by(|a, b| a.name().cmp(b.name()));
        gates
            .into_iter()
            .flat_map(|g| g.members().map(move |j| (j, g.name())))
            .skip(offset)
            .take(limit)
            .filter_map(|(j, name)| self.held_info(j).map(|i| (i, name)))
            .collect()
    }
}

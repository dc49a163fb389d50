//! The model of gates and held jobs (docs/commands.md, `ORCA.GATE`), an
//! extension of the order model (`queue_model.rs`, whose `enqueue`,
//! `put_immediate`, `move_job` and `delete` already treat held jobs as the
//! docs say). Written from the docs:
//!
//! - `CLOSE`: "from now on a new job ... whose config has `"gate":
//!   "<gate>"` is **held** ... Reply: `1` if the gate was open, `0` if it
//!   was already closed."
//! - `OPEN`: "every held job of the gate enters the queue exactly as if it
//!   had been enqueued at its own arrival time: its reservation is
//!   arrival + priority (with the automatic delay it got at arrival), ordered by
//!   its arrival among equal scores; a collation job takes the place in its
//!   collation's stack its arrival gives it (LIFO or FIFO, as the queue's
//!   order was when it arrived), so the k-th job / k-th reservation pairing
//!   comes out as if the gate had never been closed; immediate ones are
//!   immediate at their arrival. The gate is forgotten. Reply: the number
//!   of jobs released."
//! - `DROP`: "removes every held job of the gate and forgets the gate.
//!   Reply: their configs as given (an array of strings, in arrival
//!   order)".
//! - "`OPEN` and `DROP` of a gate that is not closed ... change nothing and
//!   reply `0` / an empty array."
//! - `ORCA.STATS`: `held`, and "`gates` (each closed gate with the number of
//!   jobs it holds)"; `ORCA.LIST ... STATE HELD`: "by gate name, then
//!   arrival".

use orca::core::{JobKey, Queue};

use crate::queue_model::{MOwner, MRes, Model};
use crate::support::*;

/// `ORCA.GATE <queue> <gate> CLOSE|OPEN|DROP`, as the sequences draw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateOp {
    Close,
    Open,
    Drop,
}

/// The core's held count and closed gates (with their held counts) are the
/// model's.
pub fn compare_gates(q: &Queue, m: &Model) -> Result<(), String> {
    ensure!(
        q.held_len() == m.held_len(),
        "held_len() = {}, model says {}",
        q.held_len(),
        m.held_len()
    );
    let got: Vec<(Vec<u8>, usize)> = q
        .gate_list()
        .into_iter()
        .map(|(g, n)| (g.to_vec(), n))
        .collect();
    ensure!(
        got == m.gate_list(),
        "gate_list() = {got:?}, model says {:?}",
        m.gate_list()
    );
    Ok(())
}

impl Model {
    /// `ORCA.GATE ... CLOSE`: whether the gate was open.
    pub fn close_gate(&mut self, gate: &[u8]) -> bool {
        self.gates.insert(gate.to_vec())
    }

    /// Keys held behind `gate`, in arrival order.
    pub fn held_keys(&self, gate: &[u8]) -> Vec<JobKey> {
        let mut v: Vec<(i64, JobKey)> = self
            .jobs
            .iter()
            .filter_map(|j| {
                j.held
                    .as_ref()
                    .filter(|h| h.gate == gate)
                    .map(|h| (h.seq, j.key))
            })
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, k)| k).collect()
    }

    pub fn held_len(&self) -> usize {
        self.jobs.iter().filter(|j| j.held.is_some()).count()
    }

    /// `ORCA.GATE ... OPEN`: the number of jobs released.
    pub fn open_gate(&mut self, gate: &[u8]) -> usize {
        if !self.gates.remove(gate) {
            return 0;
        }
        let keys = self.held_keys(gate);
        for key in &keys {
            let job = self.job_mut(key).unwrap();
            let h = job.held.take().unwrap();
            match (job.immediate, job.collation.clone()) {
                (false, Some(name)) => {
                    self.place_at_arrival(*key, &name, h.release, h.seq, h.front)
                }
                (immediate, _) => self.push_res(MRes {
                    score: h.release,
                    tie: h.seq,
                    nonce: h.seq as u64,
                    owner: MOwner::Single(*key),
                    immediate,
                }),
            }
        }
        keys.len()
    }

    /// A released collation job enters its stack where a push at its
    /// arrival would have put it. The stack is what pushing its jobs in
    /// the order of their pushes gives (LIFO: at the front; FIFO and
    /// DELAY: at the back), so that is how it is computed: every job of the
    /// stack, this one included, pushed again in sequence order.
    fn place_at_arrival(&mut self, key: JobKey, name: &str, release: i64, seq: i64, front: bool) {
        self.push_res(MRes {
            score: release,
            tie: seq,
            nonce: seq as u64,
            owner: MOwner::Coll(name.to_string()),
            immediate: false,
        });
        {
            let job = self.job_mut(&key).unwrap();
            job.collated = true;
            job.entry = (seq, front);
        }
        let mut members: Vec<(i64, bool, JobKey)> = self
            .stack(name)
            .iter()
            .chain(std::iter::once(&key))
            .map(|k| {
                let (s, f) = self.job(k).unwrap().entry;
                (s, f, *k)
            })
            .collect();
        members.sort_unstable_by_key(|m| m.0);
        let mut replay: std::collections::VecDeque<JobKey> = Default::default();
        for (_, f, k) in members {
            if f {
                replay.push_front(k);
            } else {
                replay.push_back(k);
            }
        }
        *self.stack_mut(name) = replay.into_iter().collect();
    }

    /// `ORCA.GATE ... DROP`: the held jobs' configs, in arrival order.
    pub fn drop_gate(&mut self, gate: &[u8]) -> Vec<Vec<u8>> {
        if !self.gates.remove(gate) {
            return Vec::new();
        }
        let keys = self.held_keys(gate);
        let out = keys
            .iter()
            .map(|k| self.job(k).unwrap().payload.clone())
            .collect();
        self.jobs.retain(|j| !keys.contains(&j.key));
        out
    }

    /// Closed gates with their held counts, by name.
    pub fn gate_list(&self) -> Vec<(Vec<u8>, usize)> {
        self.gates
            .iter()
            .map(|g| (g.clone(), self.held_keys(g).len()))
            .collect()
    }

    /// `ORCA.LIST ... STATE HELD [GATE <gate>]`: "by gate name, then
    /// arrival", each with its gate.
    pub fn held_list(&self, gate: Option<&[u8]>) -> Vec<(Info, Vec<u8>)> {
        self.gates
            .iter()
            .filter(|g| gate.is_none_or(|x| x == g.as_slice()))
            .flat_map(|g| {
                self.held_keys(g)
                    .into_iter()
                    .map(move |k| (self.info(&k).unwrap(), g.clone()))
            })
            .collect()
    }
}

//! Owned, comparable views of what the worker layer of the core reports
//! (`states(key)`, `dead_list`), in the vocabulary the worker model
//! (`worker_model.rs`) answers in.

use std::fmt;

use orca::core::worker::{DeathCause, Parked};
use orca::core::{JobKey, Queue, State};

use crate::support::*;

/// The fields of a job the model predicts (everything but nonce and,
/// sometimes, release time).
#[derive(Clone, PartialEq, Eq)]
pub struct PJ {
    pub payload: Vec<u8>,
    pub created_at: i64,
    pub attempts: u32,
    pub collation: Option<String>,
    pub immediate: bool,
}

impl fmt::Debug for PJ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{{:?} created={} attempts={} coll={:?} imm={}}}",
            text(&self.payload),
            self.created_at,
            self.attempts,
            self.collation,
            self.immediate
        )
    }
}

pub fn pj_parked(q: &Queue, p: &Parked) -> PJ {
    PJ {
        payload: p.payload.to_vec(),
        created_at: p.created_at,
        attempts: p.attempts,
        collation: q
            .parked_info([0; 32], p, 0)
            .collation
            .map(|c| c.into_owned()),
        immediate: p.immediate,
    }
}

pub fn pj_info(i: &Info) -> PJ {
    PJ {
        payload: i.payload.clone(),
        created_at: i.created_at,
        attempts: i.attempts,
        collation: i.collation.clone(),
        immediate: i.immediate,
    }
}

/// One entry of `states(key)`, owned and comparable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum S {
    Queued {
        pos: usize,
        release_at: i64,
        /// `ORCA.STATUS` `capped`: waits only because of the running cap.
        capped: bool,
        job: PJ,
    },
    Held {
        gate: Vec<u8>,
        release_at: i64,
        job: PJ,
    },
    Delayed {
        retry_at: i64,
        job: PJ,
    },
    Leased {
        token: u64,
        deadline: i64,
        superseded: bool,
        job: PJ,
    },
    Dead {
        died_at: i64,
        cause: DeathCause,
        job: PJ,
    },
}

pub fn core_states(q: &Queue, key: &JobKey) -> Result<Vec<S>, String> {
    let states = q
        .states(key)
        .map_err(|e| format!("states({}) failed: {e}", kname(key)))?;
    let mut out = Vec::new();
    for s in states {
        out.push(match s {
            State::Queued(info, pos) => {
                let i = conv(&info);
                S::Queued {
                    pos,
                    release_at: i.release_at,
                    capped: q.waits_for_cap(key),
                    job: pj_info(&i),
                }
            }
            State::Held(info, gate) => {
                let i = conv(&info);
                S::Held {
                    gate: gate.to_vec(),
                    release_at: i.release_at,
                    job: pj_info(&i),
                }
            }
            State::Delayed(k2, d) => {
                if k2 != *key {
                    return Err(format!("states({}) names another key", kname(key)));
                }
                S::Delayed {
                    retry_at: d.retry_at,
                    job: pj_parked(q, &d.job),
                }
            }
            State::Leased(k2, token, l) => {
                if k2 != *key || l.key != *key {
                    return Err(format!("states({}) names another key", kname(key)));
                }
                S::Leased {
                    token,
                    deadline: l.deadline,
                    superseded: l.superseded,
                    job: pj_parked(q, &l.job),
                }
            }
            State::Dead(k2, d) => {
                if k2 != *key {
                    return Err(format!("states({}) names another key", kname(key)));
                }
                S::Dead {
                    died_at: d.died_at,
                    cause: d.cause,
                    job: pj_parked(q, &d.job),
                }
            }
        });
    }
    Ok(out)
}

/// One entry of `dead_list`, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadView {
    pub key: String,
    pub died_at: i64,
    pub cause: DeathCause,
    pub job: PJ,
}

pub fn core_dead_list(q: &Queue, offset: usize, limit: usize) -> Vec<DeadView> {
    q.dead_list(offset, limit)
        .into_iter()
        .map(|(key, d)| DeadView {
            key: kname(&key),
            died_at: d.died_at,
            cause: d.cause,
            job: pj_parked(q, &d.job),
        })
        .collect()
}

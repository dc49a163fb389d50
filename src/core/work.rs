//! What the queue keeps outside its reservation order: jobs handed out
//! (leases), waiting to be retried (delayed), dead letters, kept results and
//! cancelled leases. Plain data; the operations on it are in `worker.rs`.

use std::collections::BTreeSet;

use super::config::{JobKey, KeyMap};
use super::idmap::IdMap;
use super::slab::NIL;

/// How long a cancelled lease is remembered after its deadline, so the
/// worker's late EXTEND/ACK is told "cancelled" rather than "unknown".
pub const CANCEL_MEMORY_MS: i64 = 600_000;

/// A job that is not in the queue order (leased, delayed or dead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parked {
    pub payload: Box<[u8]>,
    pub created_at: i64,
    pub attempts: u32,
    /// The collation its config named (`NIL`: none). The parked job holds
    /// a reference on that collation's record, so the id stays valid.
    pub coll: u32,
    pub immediate: bool,
}

impl Parked {
    pub fn coll_id(&self) -> Option<u32> {
        (self.coll != NIL).then_some(self.coll)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub key: JobKey,
    pub deadline: i64,
    pub job: Parked,
    /// The key was enqueued again (a regrade) after this delivery began:
    /// if this attempt fails or expires it is dropped, so only the newest
    /// config comes back. An ACK still completes it.
    pub superseded: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delayed {
    pub retry_at: i64,
    pub job: Parked,
}

/// Why a job is dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeathCause {
    /// NACKed on its last allowed attempt.
    Failed = 1,
    /// Its lease expired on its last allowed attempt.
    Expired = 2,
    /// It waited longer than the queue's lifetime without being handed out.
    Lifetime = 3,
}

impl DeathCause {
    pub fn name(self) -> &'static str {
        match self {
            DeathCause::Failed => "failed",
            DeathCause::Expired => "lease-expired",
            DeathCause::Lifetime => "expired",
        }
    }
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(DeathCause::Failed),
            2 => Some(DeathCause::Expired),
            3 => Some(DeathCause::Lifetime),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dead {
    pub died_at: i64,
    pub seq: i64,
    pub cause: DeathCause,
    pub job: Parked,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResult {
    pub expires_at: i64,
    pub payload: Box<[u8]>,
}

/// The lease tokens on one key: almost always one (a regrade while the job
/// runs makes two), kept without an allocation then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tokens {
    One(u64),
    Many(Vec<u64>),
}

impl Tokens {
    pub fn push(&mut self, t: u64) {
        match self {
            Tokens::One(a) => *self = Tokens::Many(vec![*a, t]),
            Tokens::Many(v) => v.push(t),
        }
    }

    /// Take `t` out; true if none are left.
    pub fn remove(&mut self, t: u64) -> bool {
        match self {
            Tokens::One(a) => *a == t,
            Tokens::Many(v) => {
                v.retain(|x| *x != t);
                match v.as_slice() {
                    [] => true,
                    [one] => {
                        *self = Tokens::One(*one);
                        false
                    }
                    _ => false,
                }
            }
        }
    }

    pub fn as_slice(&self) -> &[u64] {
        match self {
            Tokens::One(a) => std::slice::from_ref(a),
            Tokens::Many(v) => v,
        }
    }
}

/// Everything outside the queue order.
#[derive(Clone, Debug, Default)]
pub struct Work {
    pub(crate) leases: IdMap<u64, Lease>,
    /// Tokens of the leases on each key (derived from `leases`).
    pub(crate) lease_keys: KeyMap<Tokens>,
    pub(crate) lease_order: BTreeSet<(i64, u64)>,
    pub(crate) delayed: KeyMap<Delayed>,
    pub(crate) delayed_order: BTreeSet<(i64, JobKey)>,
    /// Delayed jobs by arrival (their release time once back in the queue),
    /// for lifetimes.
    pub(crate) delayed_by_arrival: BTreeSet<(i64, JobKey)>,
    pub(crate) dead: KeyMap<Dead>,
    pub(crate) dead_order: BTreeSet<(i64, i64, JobKey)>,
    pub(crate) results: KeyMap<StoredResult>,
    pub(crate) result_order: BTreeSet<(i64, JobKey)>,
    pub(crate) cancelled: IdMap<u64, i64>,
    pub(crate) cancelled_order: BTreeSet<(i64, u64)>,
    /// Bytes of payloads held here (leased, delayed, dead, results).
    pub(crate) bytes: usize,
}

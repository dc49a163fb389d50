//! A job record as the queue stores it, and the views of a job the rest of
//! the core and the clients see.

use std::borrow::Cow;

use super::config::JobKey;
use super::containers::slab::MAX_ID;

/// In `Job::coll`: the job is in its collation's stack.
pub(crate) const COLLATED: u32 = 1 << 31;
/// In `Job::coll`: the job is held behind a closed gate (no reservation).
pub(crate) const HELD: u32 = 1 << 30;
/// The flag bits of `Job::coll`.
const FLAGS: u32 = COLLATED | HELD;
/// In `Job::coll`'s id bits: the job names no collation (never an id:
/// slab ids stay below `MAX_ID`).
pub(crate) const NO_COLL: u32 = MAX_ID;

/// A job waiting in the queue (queued or held). 72 bytes plus its payload.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub key: JobKey,
    pub payload: Box<[u8]>,
    pub created_at: i64,
    /// The job's place in its collation's stack: stacks are ordered by it,
    /// front (next to pop) first. A LIFO arrival takes `-seq`, a FIFO
    /// arrival or a move to the back `+seq` (`seq` fresh from the queue's
    /// sequence), so pushes land at an end and a job released from a gate
    /// lands where its arrival puts it. A held job keeps the key its arrival
    /// gave it; a single job has 0.
    pub skey: i64,
    /// The collation's id (`NO_COLL` for none), with `COLLATED` set while the
    /// job is in that collation's stack and `HELD` while it is held; a
    /// single job's collation is the one its config named (informational).
    pub coll: u32,
    /// In a stack: the next job of the stack (`NIL` at its end), or for a
    /// large collation the job's node in the collation's stack index. A
    /// single job: its own reservation node. A held job: `NIL`.
    pub link: u32,
}

impl Job {
    pub fn collated(&self) -> bool {
        self.coll & COLLATED != 0
    }

    pub fn held(&self) -> bool {
        self.coll & HELD != 0
    }

    /// The collation id, if the job names one.
    pub fn coll_id(&self) -> Option<u32> {
        let c = self.coll & !FLAGS;
        (c != NO_COLL).then_some(c)
    }
}

/// What a job looks like to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo<'a> {
    pub key: JobKey,
    pub collation: Option<Cow<'a, str>>,
    pub immediate: bool,
    pub nonce: u64,
    pub created_at: i64,
    pub release_at: i64,
    pub attempts: u32,
    pub payload: Cow<'a, [u8]>,
}

impl JobInfo<'_> {
    /// The same view owning its data.
    pub fn into_owned(self) -> JobInfo<'static> {
        JobInfo {
            collation: self.collation.map(|c| Cow::Owned(c.into_owned())),
            payload: Cow::Owned(self.payload.into_owned()),
            ..self
        }
    }
}

/// A job as read from a serialized unit (codec) or another queue (import).
pub(crate) struct LoadedJob {
    pub key: JobKey,
    pub created_at: i64,
    pub attempts: u32,
    /// Its stack key, for a job of a collation's stack (else 0).
    pub skey: i64,
    pub payload: Box<[u8]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_record_is_compact() {
        // docs/design.md, "Memory": what a queued job costs beyond its payload.
        assert_eq!(std::mem::size_of::<Option<Job>>(), 72);
    }
}

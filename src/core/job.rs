//! A job record as the queue stores it, and the views of a job the rest of
//! the core and the clients see.

use std::borrow::Cow;

use super::config::JobKey;
use super::containers::slab::{SlabId, MAX_ID, NIL};
use super::ids::{CollId, JobId, NodeId, StackNode};

/// `Job::coll`: the collation a job names (if any), whether the job is in
/// that collation's stack, and whether it is held behind a gate, in one
/// word (the id in the low bits, two flags in the top two, which ids never
/// reach: slab ids stay below `MAX_ID`). The masks live here only.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CollRef(u32);

impl CollRef {
    /// The job is in its collation's stack.
    const COLLATED: u32 = 1 << 31;
    /// The job is held behind a closed gate (no reservation).
    const HELD: u32 = 1 << 30;
    const FLAGS: u32 = Self::COLLATED | Self::HELD;
    /// The id bits of a job that names no collation (never an id).
    const NO_COLL: u32 = MAX_ID;

    /// Naming `c` (or none), in no stack, not held.
    pub fn new(c: Option<CollId>) -> Self {
        CollRef(c.map_or(Self::NO_COLL, SlabId::raw))
    }

    /// The collation the job names.
    #[inline]
    pub fn coll(self) -> Option<CollId> {
        let c = self.0 & !Self::FLAGS;
        (c != Self::NO_COLL).then(|| CollId::from_raw(c))
    }

    #[inline]
    pub fn collated(self) -> bool {
        self.0 & Self::COLLATED != 0
    }

    #[inline]
    pub fn held(self) -> bool {
        self.0 & Self::HELD != 0
    }

    /// In the stack of `c` (and not held).
    pub fn in_stack_of(c: CollId) -> Self {
        CollRef(c.raw() | Self::COLLATED)
    }

    pub fn set_collated(&mut self, on: bool) {
        self.set(Self::COLLATED, on);
    }

    pub fn set_held(&mut self, on: bool) {
        self.set(Self::HELD, on);
    }

    /// The same flags, naming `c` instead (compaction moved the collation).
    pub fn renamed(self, c: CollId) -> Self {
        CollRef(c.raw() | (self.0 & Self::FLAGS))
    }

    fn set(&mut self, bit: u32, on: bool) {
        if on {
            self.0 |= bit;
        } else {
            self.0 &= !bit;
        }
    }
}

/// `Job::link`: one word whose meaning follows the job's state (which
/// `Job::coll` and its collation's form tell):
///
/// | the job is | `link` is | accessor |
/// |---|---|---|
/// | single (its own reservation) | that reservation's node | `reservation` |
/// | in a small collation's stack | the next job of the stack (`JobId::NIL` at its end) | `next_job` |
/// | in a large collation's stack | its node in the collation's stack tree | `stack_node` |
/// | held behind a gate | nothing (`NONE`) | |
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobLink(u32);

impl JobLink {
    pub const NONE: JobLink = JobLink(NIL);

    pub fn reservation(n: NodeId) -> Self {
        JobLink(n.raw())
    }

    pub fn next_job(j: JobId) -> Self {
        JobLink(j.raw())
    }

    pub fn stack_node(n: StackNode) -> Self {
        JobLink(n.raw())
    }

    /// A single job's reservation.
    #[inline]
    pub fn as_reservation(self) -> NodeId {
        NodeId::from_raw(self.0)
    }

    /// A small stack's next job (`JobId::NIL` at its end).
    #[inline]
    pub fn as_next_job(self) -> JobId {
        JobId::from_raw(self.0)
    }

    /// A large stack's tree node.
    #[inline]
    pub fn as_stack_node(self) -> StackNode {
        StackNode::from_raw(self.0)
    }
}

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
    /// The collation it names, in its stack or not, held or not; a single
    /// job's collation is the one its config named (informational).
    pub coll: CollRef,
    /// Its reservation, its neighbour in the stack, or its stack-tree node
    /// (see `JobLink`).
    pub link: JobLink,
}

impl Job {
    pub fn collated(&self) -> bool {
        self.coll.collated()
    }

    pub fn held(&self) -> bool {
        self.coll.held()
    }

    /// The collation id, if the job names one.
    pub fn coll_id(&self) -> Option<CollId> {
        self.coll.coll()
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

    #[test]
    fn coll_ref_keeps_id_and_flags_apart() {
        let c = CollId::from_raw(MAX_ID - 1);
        let mut r = CollRef::new(Some(c));
        assert_eq!((r.coll(), r.collated(), r.held()), (Some(c), false, false));
        r.set_held(true);
        assert_eq!((r.coll(), r.collated(), r.held()), (Some(c), false, true));
        r.set_held(false);
        r.set_collated(true);
        assert_eq!(r, CollRef::in_stack_of(c));
        let d = CollId::from_raw(7);
        assert_eq!(r.renamed(d), CollRef::in_stack_of(d));
        r.set_collated(false);
        assert_eq!(r, CollRef::new(Some(c)));
        let mut none = CollRef::new(None);
        none.set_held(true);
        assert_eq!((none.coll(), none.held()), (None, true));
    }
}

//! Reservations: a place in the global order, by score (release time, ms)
//! then tie; who owns one (`Owner`) and what its node's second word means
//! (`ResLink`).

use super::containers::slab::{SlabId, NIL};
use super::containers::{IndexKey, OrderIndex};
use super::ids::{CollId, JobId, NodeId, ResNode};

/// A reservation's place in the global order: by score (release time, ms),
/// then by tie. Ties of ordinary reservations are increasing sequence numbers
/// (arrival order); reservations put at the very front get decreasing
/// negative ties, so they sort before every reservation of the same score.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResKey {
    pub score: i64,
    pub tie: i64,
}

/// A `ResKey` as index nodes store it: four `u32` words, so a node needs
/// 4-byte alignment only and takes 36 bytes instead of 40.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeKey([u32; 4]);

impl From<ResKey> for NodeKey {
    fn from(k: ResKey) -> Self {
        let (s, t) = (k.score as u64, k.tie as u64);
        NodeKey([(s >> 32) as u32, s as u32, (t >> 32) as u32, t as u32])
    }
}

impl From<NodeKey> for ResKey {
    fn from(k: NodeKey) -> Self {
        let w = k.0;
        ResKey {
            score: ((w[0] as u64) << 32 | w[1] as u64) as i64,
            tie: ((w[2] as u64) << 32 | w[3] as u64) as i64,
        }
    }
}

impl IndexKey for NodeKey {
    fn words(&self) -> (u64, u64) {
        let w = self.0;
        (
            (w[0] as u64) << 32 | w[1] as u64,
            (w[2] as u64) << 32 | w[3] as u64,
        )
    }
}

impl Ord for NodeKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        ResKey::from(*self).cmp(&ResKey::from(*other))
    }
}

impl PartialOrd for NodeKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A reservation node's `val`: who owns the reservation, a single job or
/// a collation (the flag bit lives here only).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Owner(u32);

/// Who owns a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OwnerRef {
    /// A single job, which holds it (its `link` is the node).
    Job(JobId),
    /// A collation: it pairs with the job at its rank in the stack.
    Collation(CollId),
}

impl Owner {
    const COLLATION: u32 = 1 << 31;

    pub fn job(j: JobId) -> Self {
        Owner(j.raw())
    }

    pub fn collation(c: CollId) -> Self {
        Owner(c.raw() | Self::COLLATION)
    }

    #[inline]
    pub fn get(self) -> OwnerRef {
        if self.0 & Self::COLLATION != 0 {
            OwnerRef::Collation(CollId::from_raw(self.0 & !Self::COLLATION))
        } else {
            OwnerRef::Job(JobId::from_raw(self.0))
        }
    }

    /// The single job holding it, if a job does.
    #[inline]
    pub fn as_job(self) -> Option<JobId> {
        match self.get() {
            OwnerRef::Job(j) => Some(j),
            OwnerRef::Collation(_) => None,
        }
    }
}

/// A reservation node's `aux`: one word whose meaning follows its owner
/// (`Owner`) and, for a collation, the collation's form:
///
/// | owner | `aux` is | accessor |
/// |---|---|---|
/// | a single job | its flags: immediate or not | `immediate` |
/// | a small collation | the collation's next reservation (`NodeId::NIL` at the end) | `as_next` |
/// | a large collation | its node in the collation's reservation tree | `as_tree_node` |
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResLink(u32);

impl ResLink {
    /// A single reservation's flag: the job is immediate.
    const IMMEDIATE: u32 = 1;
    /// Not linked (a collation's reservation before it is listed).
    pub const NONE: ResLink = ResLink(NIL);

    /// A single job's reservation.
    pub fn single(immediate: bool) -> Self {
        ResLink(if immediate { Self::IMMEDIATE } else { 0 })
    }

    /// A small collation's list: the next reservation.
    pub fn next(n: NodeId) -> Self {
        ResLink(n.raw())
    }

    /// A large collation's tree node.
    pub fn tree_node(n: ResNode) -> Self {
        ResLink(n.raw())
    }

    /// A single reservation's job is immediate.
    #[inline]
    pub fn immediate(self) -> bool {
        self.0 & Self::IMMEDIATE != 0
    }

    /// Is this a single reservation's word (no bits but its flags)?
    pub fn is_single_word(self) -> bool {
        self.0 & !Self::IMMEDIATE == 0
    }

    #[inline]
    pub fn as_next(self) -> NodeId {
        NodeId::from_raw(self.0)
    }

    #[inline]
    pub fn as_tree_node(self) -> ResNode {
        ResNode::from_raw(self.0)
    }
}

/// The global order: every reservation, by key, with its owner and link.
pub(crate) type GlobalOrder = OrderIndex<NodeKey, Owner, ResLink, NodeId>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::limits::{MAX_TIME, SEQ_LIMIT};

    #[test]
    fn global_order_nodes_are_compact() {
        // docs/design.md, "Memory": a reservation node is 36 bytes; the
        // typed owner and link cost what the bare `u32`s did.
        assert_eq!(GlobalOrder::NODE_BYTES, 36);
    }

    #[test]
    fn node_keys_round_trip_and_order_like_res_keys() {
        for (score, tie) in [
            (0, 1),
            (MAX_TIME, -SEQ_LIMIT),
            (5, i64::MAX),
            (-1, i64::MIN),
        ] {
            let k = ResKey { score, tie };
            assert_eq!(ResKey::from(NodeKey::from(k)), k);
        }
        let (j, c) = (JobId::from_raw(5), CollId::from_raw(5));
        assert_eq!(Owner::job(j).get(), OwnerRef::Job(j));
        assert_eq!(Owner::collation(c).get(), OwnerRef::Collation(c));
        assert_ne!(Owner::job(j), Owner::collation(c));
        assert!(ResLink::single(true).immediate() && ResLink::single(true).is_single_word());
        assert!(!ResLink::single(false).immediate());
        assert!(!ResLink::next(NodeId::from_raw(6)).is_single_word());
        let keys = [
            (0, -3),
            (0, 5),
            (1, i64::MIN),
            (1, -1),
            (1, 0),
            (1, 7),
            (MAX_TIME, 2),
        ];
        for a in keys {
            for b in keys {
                let ka = ResKey {
                    score: a.0,
                    tie: a.1,
                };
                let kb = ResKey {
                    score: b.0,
                    tie: b.1,
                };
                assert_eq!(NodeKey::from(ka).cmp(&NodeKey::from(kb)), ka.cmp(&kb));
            }
        }
    }
}

//! Reservations: a place in the global order, by score (release time, ms)
//! then tie.

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

impl super::containers::treap::IndexKey for NodeKey {
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

/// In a node's `val`: the reservation belongs to a collation.
pub(crate) const OWNED_BY_COLLATION: u32 = 1 << 31;
/// In a single reservation's `aux`: the job is immediate.
pub(crate) const IMMEDIATE: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::limits::{MAX_TIME, SEQ_LIMIT};

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

//! The ids of the queue's records: `u32` newtypes, so a collation's id
//! cannot index the jobs, a job's id cannot name a reservation, and so on.
//! Each is `#[repr(transparent)]`: a record holding one is as small as it
//! was with a bare `u32`.
//!
//! Ids are handed out by the slabs (`containers::slab`) and never leave the
//! core: replies, encodings and digests name jobs by key and collations by
//! name. They change only when compaction moves a record
//! (`compact.rs`), which fixes every link to it.

use super::containers::slab::{SlabId, NIL};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
        pub struct $name(u32);

        impl $name {
            /// "None", where a record's field holds one (lists' ends).
            pub const NIL: $name = $name(NIL);

            /// `Some(self)` unless this is `NIL`.
            #[inline]
            pub fn some(self) -> Option<$name> {
                (self.0 != NIL).then_some(self)
            }

            /// `id`, or `NIL` for none.
            #[inline]
            pub fn or_nil(id: Option<$name>) -> $name {
                id.unwrap_or($name::NIL)
            }
        }

        impl SlabId for $name {
            #[inline]
            fn from_raw(raw: u32) -> Self {
                $name(raw)
            }
            #[inline]
            fn raw(self) -> u32 {
                self.0
            }
        }
    };
}

id_type!(
    /// A job record in the queue's `jobs` slab.
    JobId
);
id_type!(
    /// A collation record in `Collations`.
    CollId
);
id_type!(
    /// A reservation: a node of the global order.
    NodeId
);
id_type!(
    /// A node of a large collation's stack tree (it holds a `JobId`).
    StackNode
);
id_type!(
    /// A node of a large collation's reservation tree (it holds a `NodeId`).
    ResNode
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_cost_what_a_u32_costs() {
        use std::mem::size_of;
        assert_eq!(size_of::<JobId>(), 4);
        assert_eq!(size_of::<CollId>(), 4);
        assert_eq!(size_of::<NodeId>(), 4);
        assert_eq!(JobId::NIL.some(), None);
        assert_eq!(JobId(3).some(), Some(JobId(3)));
        assert_eq!(JobId::or_nil(None), JobId::NIL);
    }
}

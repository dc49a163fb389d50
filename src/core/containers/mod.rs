//! The containers the queue's parts store their records in. They know
//! nothing of jobs or reservations: records, ids, keys and hashes only.
//!
//! - `slab`: records addressed by `u32` ids, in chunks; shrinks by moving
//!   records down (the owner fixes its links)
//! - `id_table`: a set of ids found by a hash of their record's key
//! - `treap`: an ordered set with rank and select (the order-statistic
//!   treap behind the global order and a large collation's trees)
//! - `idmap`: hash maps keyed by the queue's own numbers, and hashing helpers

pub mod id_table;
pub mod idmap;
pub mod slab;
pub mod treap;

pub use id_table::IdTable;
pub use idmap::{shrink_map, IdMap};
pub use slab::{Slab, MAX_ID, NIL};
pub use treap::{IndexKey, OrderIndex};

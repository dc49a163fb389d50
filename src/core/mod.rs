//! The queue core: pure Rust, no Redis types, no `unsafe`, time passed in.
//!
//! - `config`: job config parsing and the orca key
//! - `scan`: the single-pass JSON scanner behind `config`
//! - `index`: the order-statistic tree behind the global reservation order
//! - `queue`: the queue and its operations
//! - `names`: collation names packed into their record
//! - `slab`: the compact record storage (slabs of `u32`-addressed records, id tables)
//! - `check`: the invariant check (`ORCA.CHECK`)
//! - `inspect`: ordered listing with positions and filters, statistics
//! - `worker`: leases, ack/nack, retries, dead letters, results, `tick`
//! - `codec`: the versioned serialized form (RDB, RESTORE, digests)

pub mod check;
pub mod codec;
pub mod config;
pub mod error;
pub mod index;
pub mod inspect;
pub mod names;
pub mod queue;
pub mod scan;
pub mod slab;
pub mod worker;

pub use config::{decode_key, encode_key, parse_config, JobConfig, JobKey};
pub use error::QueueError;
pub use queue::{JobInfo, Move, Order, Queue};
pub use worker::{Delivery, NackOutcome, Policy, State, TickReport};

/// Largest time (ms) the queue accepts anywhere: 2^53 - 1, the largest
/// integer every client language represents exactly.
pub const MAX_TIME: i64 = (1 << 53) - 1;

/// Bound of the sequence counters (ties and nonces): |value| <= 2^62.
/// Operations stop short of it and loaders refuse anything beyond it, so a
/// queue that loaded can always be saved and loaded again.
pub const SEQ_LIMIT: i64 = 1 << 62;

/// What loaders accept for the counters: above `SEQ_LIMIT` by a margin far
/// larger than any queue can consume once operations refuse (time-driven
/// requeues use at most one number per parked job), so every queue that
/// exists can be saved and loaded again.
pub const SEQ_LOAD_LIMIT: i64 = SEQ_LIMIT + SEQ_LIMIT / 2;

//! The queue core: pure Rust, no Redis types, no `unsafe`, time passed in.
//!
//! - `config`: job config parsing and the orca key
//! - `scan`: the single-pass JSON scanner behind `config`
//! - `idmap`: hash maps keyed by record ids and tokens (a fast, unkeyed hash)
//! - `index`: the order-statistic tree behind the global reservation order
//! - `queue`: the queue and its operations
//! - `job`, `reservation`: the records of jobs and reservations
//! - `collation`: collations, their stacks and reservations (small and large forms)
//! - `names`: collation names packed into their record
//! - `slab`: the compact record storage (slabs of `u32`-addressed records, id tables)
//! - `compact`: giving memory back as a queue empties (moving records, shrinking tables)
//! - `check`: the invariant check (`ORCA.CHECK`)
//! - `inspect`: ordered listing with positions and filters, statistics
//! - `work`: what is kept outside the order (leases, retries, dead letters, results)
//! - `worker`: leases, ack/nack, retries, dead letters, results, `tick`
//! - `settings`: a queue's own settings
//! - `gates` + `held`: holding pens (closed gates and the jobs they hold)
//! - `window`: the submission window behind automatic delays
//! - `lifetime`: waiting jobs past their lifetime become dead letters
//! - `caps`: running caps per collation and the eligibility index
//! - `codec`: the versioned serialized form (RDB, RESTORE, digests)
//! - `limits`: the bounds of times and sequence counters
//! - `flow`: parents waiting for their children, and what crosses between queues

pub mod caps;
pub mod check;
pub mod codec;
pub mod collation;
pub mod compact;
pub mod config;
pub mod error;
pub mod flow;
pub mod gates;
pub mod held;
pub mod idmap;
pub mod index;
pub mod inspect;
pub mod job;
pub mod lifetime;
pub mod limits;
pub mod names;
pub mod queue;
pub mod reservation;
pub mod scan;
pub mod settings;
pub mod slab;
pub mod window;
pub mod work;
pub mod worker;

pub use config::{decode_key, encode_key, parse_config, JobConfig, JobKey};
pub use error::QueueError;
pub use limits::{MAX_TIME, SEQ_LIMIT, SEQ_LOAD_LIMIT};
pub use queue::{JobInfo, Move, Order, Put, Queue, Settings};
pub use worker::{Delivery, Handout, NackOutcome, Policy, State, TickReport};

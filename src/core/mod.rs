//! The queue core: pure Rust, no Redis types, no `unsafe`, time passed in.
//!
//! - `config`: job config parsing and the orca key
//! - `scan`: the single-pass JSON scanner behind `config`
//! - `containers`: slab, id table, order-statistic treap, id maps (records
//!   and ids only; nothing of jobs)
//! - `queue`: the queue, coordinating its parts, and its puts, moves, pops
//! - `records`: the jobs, the global order of reservations, the collations
//!   and their pairing, the counters (one part, with its own check)
//! - `ids`: the typed ids of records (job, collation, node)
//! - `job`, `reservation`: the records of jobs and reservations
//! - `collation`: collations, their stacks and reservations (small and large forms)
//! - `names`: collation names packed into their record
//! - `compact`: giving memory back as a queue empties (each part moves and shrinks its own)
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
pub mod containers;
pub mod error;
pub mod flow;
pub mod gates;
pub mod held;
pub mod ids;
pub mod inspect;
pub mod job;
pub mod lifetime;
pub mod limits;
pub mod names;
pub mod queue;
pub mod records;
pub mod reservation;
pub mod scan;
pub mod settings;
pub mod window;
pub mod work;
pub mod worker;

pub use config::{decode_key, encode_key, parse_config, JobConfig, JobKey};
pub use error::QueueError;
pub use limits::{MAX_TIME, SEQ_LIMIT, SEQ_LOAD_LIMIT};
pub use queue::{JobInfo, Move, Order, Put, Queue, Settings};
pub use worker::{Delivery, Handout, NackOutcome, Policy, State, TickReport};

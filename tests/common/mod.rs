//! The helpers every test binary shares (`tests/integration`, `tests/props`;
//! `benches/clientside.rs` includes `server.rs` and `rng.rs` by path). One
//! module per concern; all of them are re-exported here, so a test module
//! starts with `use crate::common::*;`.
//!
//! | module | what |
//! |---|---|
//! | `server` | `Server`: a real `redis-server` with the module, on a free port in its own directory; replicas, restarts, `kill -9`; `INFO`. The server binary is chosen here (`REDIS_SERVER`) |
//! | `reply` | `args!`, `ok` / `fails` / `assert_err`, typed replies (`Fields`, `int`, `text`, ...) |
//! | `jobs` | configs and orca keys; enqueue, pop, ack, nack, status, dead list, settings |
//! | `checks` | shared assertions: job reply fields, pop order, "refused and nothing changed" |
//! | `state` | digests, `ORCA.CHECK` of every queue, comparing two observations |
//! | `fixtures` | ready-made queues (a bit of everything, every unit kind, a big one) |
//! | `workload` | a seeded workload of every command and what it observes of a server |
//! | `wait` | the server clock, pinned clocks, waiting with a limit |
//! | `blocking` | blocking clients on their own thread |
//! | `events` | keyspace notifications of one queue, in order |
//! | `policies` | gates, the policy settings, TICK, listings by state, MPOP, ACK/NACK ... NEXT, `INFO orca`, a queue's policy state |
//! | `aof` | AOF rewrites and the base file |
//! | `dump` | DUMP payloads and serialized units taken apart (CRC-64, RDB lengths) |
//! | `resp` | RESP by hand: raw sockets, AOF command streams |
//! | `rng` | the PRNG and the run parameters of random tests (`ORCA_PROP_SEED`, `ORCA_PROP_STEPS`) |

#![allow(dead_code, unused_imports)]

pub mod aof;
pub mod blocking;
pub mod checks;
pub mod dump;
pub mod events;
pub mod fixtures;
pub mod jobs;
pub mod policies;
pub mod reply;
pub mod resp;
pub mod rng;
pub mod server;
pub mod state;
pub mod wait;
pub mod workload;

pub use crate::args;
pub use aof::*;
pub use blocking::*;
pub use checks::*;
pub use dump::*;
pub use events::*;
pub use fixtures::*;
pub use jobs::*;
pub use policies::*;
pub use reply::*;
pub use resp::*;
pub use rng::*;
pub use server::*;
pub use state::*;
pub use wait::*;
pub use workload::*;

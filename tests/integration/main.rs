//! The integration suites: every feature a user relies on, against real
//! `redis-server` processes with the built module loaded (one binary, one
//! module per feature; see tests/README.md for which file specifies what).

#[path = "../common/mod.rs"]
mod common;

mod ack_next;
mod aof;
mod attempts;
mod autodelay;
mod bad_input;
mod blocking;
mod caps;
mod chaos;
mod cluster;
mod command_docs;
mod delete;
mod enqueue;
mod error_codes;
mod events;
mod format_values;
mod forward;
mod fuzz_live;
mod fuzz_regressions;
mod gates;
mod import;
mod key_ops;
mod leases;
mod lifetime;
mod limits;
mod mack;
mod move_job;
mod mpop;
mod panic_guard;
mod persistence;
mod policies_durability;
mod positions;
mod replication;
mod resp3;
mod restore;
mod retries;
mod settings;
mod stats;
mod tenants;
mod upgrade;

//! The property suites: the pure queue core (`orca::core`, no Redis) checked
//! against reference models written from the documented rules, scenario
//! tests one rule each, the codec, the config scanner against serde_json,
//! and the fuzz corpus replayed. No test-framework dependencies: the
//! deterministic PRNG of `tests/common/rng.rs` drives everything.
//!
//! - `ORCA_PROP_SEED=<u64>` (decimal or 0x-hex): run the random tests with
//!   only that seed (instead of their fixed lists); a failure prints the seed.
//! - `ORCA_PROP_STEPS=<n>`: steps per random sequence (documents per seed
//!   for the config tests).
//!
//! See tests/README.md for which file specifies what.

#[path = "../common/mod.rs"]
mod common;

mod bounds_model;
mod caps_model;
mod codec;
mod compaction;
mod config_diff;
mod fuzz_corpus;
mod gates_model;
mod lifetime_model;
mod queue_model;
mod queue_rules;
mod queue_sequences;
mod support;
mod window_model;
mod worker_model;
mod worker_observe;
mod worker_rules;
mod worker_sequences;
mod worker_views;

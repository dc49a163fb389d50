//! Orca: a job queue as a native Redis data type.
//!
//! `core` is the pure queue (no Redis, no `unsafe`, time passed in); `redis`
//! is the thin adapter that parses commands, calls the core, replies,
//! replicates and persists. The commands are declared in one table,
//! `redis::commands::COMMANDS`, and registered from it at load.

pub mod core;
pub mod redis;

use redis_module::configuration::ConfigurationFlags;
use redis_module::{redis_module, Context, RedisString};

use crate::core::MAX_TIME;
use crate::redis::datatype::QUEUE_TYPE;
use crate::redis::{guard, module_config};

redis_module! {
    name: "orca",
    version: 1,
    allocator: (crate::redis::alloc::OrcaAlloc, crate::redis::alloc::OrcaAlloc),
    data_types: [QUEUE_TYPE],
    init: redis_init,
    configurations: [
        i64: [
            ["move-to-back-buffer", &module_config::MOVE_TO_BACK_BUFFER, 10_000, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["lease-time", &module_config::LEASE_TIME, 300_000, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["max-attempts", &module_config::MAX_ATTEMPTS, 5, 0, u32::MAX as i64, ConfigurationFlags::DEFAULT, None],
            ["retry-base", &module_config::RETRY_BASE, 1_000, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["retry-cap", &module_config::RETRY_CAP, 300_000, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["result-ttl", &module_config::RESULT_TTL, 3_600_000, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["max-pop-count", &module_config::MAX_POP_COUNT, 1_000, 1, 1_000_000, ConfigurationFlags::DEFAULT, None],
            ["max-payload-bytes", &module_config::MAX_PAYLOAD_BYTES, 4 << 20, 1, 512 << 20, ConfigurationFlags::DEFAULT, None],
            ["max-queue-length", &module_config::MAX_QUEUE_LENGTH, 10_000_000, 1, 1 << 40, ConfigurationFlags::DEFAULT, None],
            ["max-key-length", &module_config::MAX_KEY_LENGTH, 1024, 1, 1 << 20, ConfigurationFlags::DEFAULT, None],
            ["max-collation-id-length", &module_config::MAX_COLLATION_ID_LENGTH, 256, 1, 1 << 20, ConfigurationFlags::DEFAULT, None],
            ["max-gate-length", &module_config::MAX_GATE_LENGTH, 256, 1, 1 << 20, ConfigurationFlags::DEFAULT, None],
            ["max-worker-length", &module_config::MAX_WORKER_LENGTH, 256, 1, 1 << 20, ConfigurationFlags::DEFAULT, None],
            ["max-error-length", &module_config::MAX_ERROR_LENGTH, 4096, 1, 1 << 20, ConfigurationFlags::DEFAULT, None],
            ["job-lifetime", &module_config::JOB_LIFETIME, 0, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["max-running", &module_config::MAX_RUNNING, 0, 0, u32::MAX as i64, ConfigurationFlags::DEFAULT, None],
            ["dead-max", &module_config::DEAD_MAX, 100_000, 0, u32::MAX as i64, ConfigurationFlags::DEFAULT, None],
            ["dead-ttl", &module_config::DEAD_TTL, 0, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["result-max", &module_config::RESULT_MAX, 100_000, 0, u32::MAX as i64, ConfigurationFlags::DEFAULT, None],
            ["autodelay-window", &module_config::AUTODELAY_WINDOW, 0, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["autodelay-step", &module_config::AUTODELAY_STEP, 0, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
            ["autodelay-cap", &module_config::AUTODELAY_CAP, 0, 0, MAX_TIME, ConfigurationFlags::DEFAULT, None],
        ],
        string: [
            ["debug-panic-in", &guard::PANIC_IN, "", ConfigurationFlags::IMMUTABLE | ConfigurationFlags::HIDDEN, None],
        ],
        bool: [
            ["trust-client-clock", &module_config::TRUST_CLIENT_CLOCK, false, ConfigurationFlags::DEFAULT, None],
        ],
        enum: [
            ["default-order", &module_config::DEFAULT_ORDER, module_config::OrderSetting::lifo, ConfigurationFlags::DEFAULT, None],
        ],
        module_args_as_configuration: true,
    ]
}

fn redis_init(ctx: &Context, args: &[RedisString]) -> redis_module::Status {
    crate::redis::init(ctx, args)
}

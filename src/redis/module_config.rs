//! Module-wide settings: `CONFIG SET/GET orca.<name>` and `loadmodule`
//! arguments. Every one is listed in redis.conf.example.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;

use redis_module::enum_configuration;

use crate::core::config::ConfigLimits;
use crate::core::settings::AutoDelay;
use crate::core::{Order, Policy, Settings};

enum_configuration! {
    #[allow(non_camel_case_types)]
    pub enum OrderSetting {
        lifo = 0,
        fifo = 1,
    }
}

/// `orca.move-to-back-buffer`: ms added to the last score by `ORCA.MOVE ... DELAY`.
pub static MOVE_TO_BACK_BUFFER: AtomicI64 = AtomicI64::new(10_000);
/// `orca.default-order`: collation order of queues created from now on.
pub static DEFAULT_ORDER: Mutex<OrderSetting> = Mutex::new(OrderSetting::lifo);

/// `orca.lease-time`: ms a popped job is leased for when POP gives no LEASE.
pub static LEASE_TIME: AtomicI64 = AtomicI64::new(300_000);
/// `orca.max-attempts`: deliveries after which a failing job is dead (0 = never).
pub static MAX_ATTEMPTS: AtomicI64 = AtomicI64::new(5);
/// `orca.retry-base`: backoff (ms) before the first retry; doubles per attempt.
pub static RETRY_BASE: AtomicI64 = AtomicI64::new(1_000);
/// `orca.retry-cap`: largest backoff (ms).
pub static RETRY_CAP: AtomicI64 = AtomicI64::new(300_000);
/// `orca.result-ttl`: ms an ACK's RESULT is kept (0 = not kept).
pub static RESULT_TTL: AtomicI64 = AtomicI64::new(3_600_000);
/// `orca.max-pop-count`: largest COUNT of one POP.
pub static MAX_POP_COUNT: AtomicI64 = AtomicI64::new(1_000);

/// `orca.max-payload-bytes`: largest job config or ACK result (bytes).
pub static MAX_PAYLOAD_BYTES: AtomicI64 = AtomicI64::new(4 << 20);
/// `orca.max-queue-length`: most jobs waiting (queued + delayed) in one queue.
pub static MAX_QUEUE_LENGTH: AtomicI64 = AtomicI64::new(10_000_000);
/// `orca.max-key-length`: longest config `key` (bytes).
pub static MAX_KEY_LENGTH: AtomicI64 = AtomicI64::new(1024);
/// `orca.max-collation-id-length`: longest collation id (bytes).
pub static MAX_COLLATION_ID_LENGTH: AtomicI64 = AtomicI64::new(256);

/// `orca.max-gate-length`: longest gate name (bytes), in configs and `ORCA.GATE`.
pub static MAX_GATE_LENGTH: AtomicI64 = AtomicI64::new(256);

/// `orca.max-worker-length`: longest worker name a pop may give (`WORKER`).
pub static MAX_WORKER_LENGTH: AtomicI64 = AtomicI64::new(256);
/// `orca.max-error-length`: the most of a NACK's `ERROR` text kept (bytes;
/// longer texts are cut).
pub static MAX_ERROR_LENGTH: AtomicI64 = AtomicI64::new(4096);

/// Defaults of the per-queue settings (`ORCA.SETTINGS`), given to a queue
/// when it is created: `orca.job-lifetime` (0 = never), `orca.max-running`
/// (0 = no cap), `orca.dead-max`, `orca.dead-ttl` (0 = kept),
/// `orca.result-max`, and `orca.autodelay-window` / `-step` / `-cap`
/// (window 0 = off).
pub static JOB_LIFETIME: AtomicI64 = AtomicI64::new(0);
pub static MAX_RUNNING: AtomicI64 = AtomicI64::new(0);
pub static DEAD_MAX: AtomicI64 = AtomicI64::new(100_000);
pub static DEAD_TTL: AtomicI64 = AtomicI64::new(0);
pub static RESULT_MAX: AtomicI64 = AtomicI64::new(100_000);
pub static AUTODELAY_WINDOW: AtomicI64 = AtomicI64::new(0);
pub static AUTODELAY_STEP: AtomicI64 = AtomicI64::new(0);
pub static AUTODELAY_CAP: AtomicI64 = AtomicI64::new(0);

/// `orca.trust-client-clock`: accept `NOW`/`MAXATTEMPTS` from clients on
/// worker commands (POP, ACK, NACK, EXTEND, TICK). Off by default.
pub static TRUST_CLIENT_CLOCK: AtomicBool = AtomicBool::new(false);

pub fn trust_client_clock() -> bool {
    TRUST_CLIENT_CLOCK.load(Ordering::Relaxed)
}

fn get(v: &AtomicI64) -> i64 {
    v.load(Ordering::Relaxed)
}

pub fn lease_time() -> i64 {
    get(&LEASE_TIME)
}

pub fn result_ttl() -> i64 {
    get(&RESULT_TTL)
}

pub fn max_pop_count() -> i64 {
    get(&MAX_POP_COUNT)
}

pub fn max_attempts() -> i64 {
    get(&MAX_ATTEMPTS)
}

/// The retry policy from the settings; `max_attempts` may be pinned by a
/// replicated command.
pub fn policy(max_attempts: Option<i64>) -> Policy {
    Policy {
        max_attempts: max_attempts
            .unwrap_or_else(self::max_attempts)
            .clamp(0, u32::MAX as i64) as u32,
        retry_base: get(&RETRY_BASE),
        retry_cap: get(&RETRY_CAP),
    }
}

pub fn move_to_back_buffer() -> i64 {
    MOVE_TO_BACK_BUFFER.load(Ordering::Relaxed)
}

pub fn default_order() -> Order {
    match DEFAULT_ORDER.lock().map(|g| g.clone()) {
        Ok(OrderSetting::fifo) => Order::Fifo,
        _ => Order::Lifo,
    }
}

pub fn max_worker_length() -> usize {
    get(&MAX_WORKER_LENGTH).max(0) as usize
}

pub fn max_error_length() -> usize {
    get(&MAX_ERROR_LENGTH).max(0) as usize
}

pub fn max_payload_bytes() -> usize {
    get(&MAX_PAYLOAD_BYTES).max(0) as usize
}

pub fn max_queue_length() -> usize {
    get(&MAX_QUEUE_LENGTH).max(0) as usize
}

pub fn max_gate_length() -> usize {
    get(&MAX_GATE_LENGTH).max(0) as usize
}

pub fn config_limits() -> ConfigLimits {
    ConfigLimits {
        max_key_len: get(&MAX_KEY_LENGTH).max(0) as usize,
        max_collation_id_len: get(&MAX_COLLATION_ID_LENGTH).max(0) as usize,
        max_gate_len: max_gate_length(),
    }
}

/// The settings a queue created now gets. An auto delay with a step but no
/// window (which `ORCA.SETTINGS` refuses) comes out off.
pub fn queue_defaults() -> Settings {
    let window = get(&AUTODELAY_WINDOW).max(0);
    let autodelay = if window > 0 {
        AutoDelay {
            window,
            step: get(&AUTODELAY_STEP).max(0),
            cap: get(&AUTODELAY_CAP).max(0),
        }
    } else {
        AutoDelay::default()
    };
    Settings {
        order: default_order(),
        lifetime: get(&JOB_LIFETIME).max(0),
        autodelay,
        max_running: get(&MAX_RUNNING).clamp(0, u32::MAX as i64) as u32,
        dead_max: get(&DEAD_MAX).max(0) as u64,
        dead_ttl: get(&DEAD_TTL).max(0),
        result_max: get(&RESULT_MAX).max(0) as u64,
    }
}

//! The few raw module API calls the wrapper crate does not cover.

use redis_module::{raw, Context};

/// The server's clock in ms (`RedisModule_Milliseconds`). Commands that use
/// it replicate the value they read, so replicas and AOF replay never read
/// their own clock.
pub fn now_ms() -> i64 {
    // SAFETY: a plain call of an API function set at module load.
    match unsafe { raw::RedisModule_Milliseconds } {
        Some(f) => unsafe { f() },
        None => 0,
    }
}

/// True when the command runs inside MULTI/EXEC or a script (where a client
/// cannot be blocked).
pub fn deny_blocking(ctx: &Context) -> bool {
    ctx.get_flags()
        .contains(redis_module::ContextFlags::DENY_BLOCKING)
}

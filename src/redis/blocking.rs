//! Callbacks of a blocking `ORCA.POP` (Redis calls them; see
//! `ffi::block_on_key`). Clients blocked on a queue are served in the order
//! they blocked, as Redis does for BLPOP.

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, Context, RedisValue};

use super::{clean_err, worker};

/// The queue was signalled: hand out a job, or stay blocked.
pub extern "C" fn pop_on_ready(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let args = redis_module::decode_args(ctx, argv, argc);
    match catch_unwind(AssertUnwindSafe(|| worker::pop_unblocked(&context, args))) {
        Ok(Some(Ok(reply))) => {
            super::reply::send(&context, &reply);
            raw::REDISMODULE_OK as c_int
        }
        Ok(Some(Err(e))) => {
            context.reply(Err(clean_err(e)));
            raw::REDISMODULE_OK as c_int
        }
        Ok(None) => raw::REDISMODULE_ERR as c_int,
        Err(_) => {
            context
                .reply_error_string("ERR internal error in the orca module (see the server log)");
            raw::REDISMODULE_OK as c_int
        }
    }
}

/// BLOCK ran out: reply nil, like BLPOP.
pub extern "C" fn pop_on_timeout(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    context.reply(Ok(RedisValue::Null));
    raw::REDISMODULE_OK as c_int
}

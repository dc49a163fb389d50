//! The C entry points Redis calls (commands, blocked-client callbacks, the
//! command filter, server events, INFO), each a thin trampoline that decodes
//! what Redis passed and runs the module's Rust function inside the panic
//! guard. The functions to run are handed in at registration (plain `fn`
//! pointers), so this file depends on nothing above it.
//!
//! Data type callbacks are in `datatype.rs`; the timer goes through the
//! wrapper crate (`timer.rs` guards its own body).

use std::os::raw::{c_int, c_void};
use std::sync::OnceLock;

use redis_module::{raw, Context, InfoContext, RedisString};

use super::reply::{self, CmdResult};
use super::{errors, ffi, guard};

const OK: c_int = raw::REDISMODULE_OK as c_int;
const ERR: c_int = raw::REDISMODULE_ERR as c_int;

/// What every command's handler is.
pub type Handler = for<'a> fn(&Context, &'a [RedisString]) -> CmdResult<'a>;

/// The reply to a panic contained in a command.
const INTERNAL_ERROR: &str = "INTERNAL internal error in the orca module (see the server log)";

// ---------------------------------------------------------------- commands

/// Most commands the table may hold (one entry point each).
pub const MAX_COMMANDS: usize = 32;

/// Where command `i`'s keys are in `args`: each key's position and access
/// flags (`REDISMODULE_CMD_KEY_*`) to `visit`, or an error when Redis
/// could not find them. It runs before every handler without a visitor
/// (an error is the reply, and the handler is not called) and answers
/// Redis's keys position requests (commands declared with `getkeys-api`).
pub type KeysOf = fn(
    usize,
    &[RedisString],
    Option<&mut dyn FnMut(usize, u32)>,
) -> Result<(), redis_module::RedisError>;

/// The handlers, by the index of their entry point, with their names.
static HANDLERS: OnceLock<Vec<(&'static str, Handler)>> = OnceLock::new();
static KEYS_OF: OnceLock<KeysOf> = OnceLock::new();

/// Install the handlers and where their keys are (once, at load). Entry
/// point `i` runs handler `i`.
pub fn install(handlers: Vec<(&'static str, Handler)>, keys_of: KeysOf) -> bool {
    handlers.len() <= MAX_COMMANDS && KEYS_OF.set(keys_of).is_ok() && HANDLERS.set(handlers).is_ok()
}

/// The C entry point of handler `i`.
pub fn entry(i: usize) -> raw::RedisModuleCmdFunc {
    ENTRIES.get(i).copied().flatten()
}

/// Run a command: decode its arguments, call the handler inside the guard,
/// write its reply or error.
fn dispatch(
    i: usize,
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let (Some((name, handler)), Some(keys_of)) = (
        HANDLERS.get().and_then(|h| h.get(i)).copied(),
        KEYS_OF.get().copied(),
    ) else {
        context.reply_error_string("INTERNAL orca command table not installed");
        return OK;
    };
    let args = redis_module::decode_args(ctx, argv, argc);
    if ffi::is_keys_position_request(&context) {
        // Cluster asks where the keys are: the positions only, no reply
        // (none where the arguments locate no keys: the command is then
        // refused when it runs).
        guard::contain(name, || {
            let _ = keys_of(
                i,
                &args,
                Some(&mut |pos, flags| ffi::key_at_pos(&context, pos, flags)),
            );
        });
        return OK;
    }
    let written = guard::contain(name, || {
        guard::inject("command");
        let checked = keys_of(i, &args, None);
        match checked.and_then(|()| handler(&context, &args)) {
            Ok(r) => reply::send(&context, &r),
            Err(e) => {
                errors::send_err(&context, e);
            }
        }
    });
    if written.is_none() {
        context.reply_error_string(INTERNAL_ERROR);
    }
    OK
}

extern "C" fn entry_at<const I: usize>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    dispatch(I, ctx, argv, argc)
}

macro_rules! entries {
    ($($i:literal)*) => { [$(Some(entry_at::<$i> as _)),*] };
}

const ENTRIES: [raw::RedisModuleCmdFunc; MAX_COMMANDS] = entries!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
);

// --------------------------------------------------------- blocked clients

/// Called when a key a client blocks on is signalled: `Some(reply)` answers
/// and unblocks the client, `None` keeps it blocked.
pub type OnReady = for<'a> fn(&Context, &'a [RedisString]) -> Option<CmdResult<'a>>;

/// Called when the block times out: the reply.
pub type OnTimeout = for<'a> fn(&Context, &'a [RedisString]) -> CmdResult<'a>;

struct Blocked {
    on_ready: OnReady,
    on_timeout: OnTimeout,
}

/// Block the client on `keys` until one is signalled ready or `timeout_ms`
/// passes (0 = forever), like BLPOP: Redis then calls `on_ready` with the
/// command's arguments (which may answer, or keep waiting) or `on_timeout`.
pub fn block_on_keys(
    ctx: &Context,
    keys: &[&RedisString],
    timeout_ms: i64,
    on_ready: OnReady,
    on_timeout: OnTimeout,
) -> bool {
    let Some(f) = (unsafe { raw::RedisModule_BlockClientOnKeys }) else {
        return false;
    };
    let mut ptrs: Vec<*mut raw::RedisModuleString> = keys.iter().map(|k| k.inner).collect();
    let privdata = Box::into_raw(Box::new(Blocked {
        on_ready,
        on_timeout,
    }));
    // SAFETY: valid context and keys (Redis copies the array and retains
    // the strings); `privdata` is freed by `free_blocked` when the client
    // is unblocked, or here if blocking failed.
    let bc = unsafe {
        f(
            ctx.ctx,
            Some(blocked_ready),
            Some(blocked_timeout),
            Some(free_blocked),
            timeout_ms,
            ptrs.as_mut_ptr(),
            ptrs.len() as c_int,
            privdata.cast::<c_void>(),
        )
    };
    if bc.is_null() {
        // SAFETY: Redis did not take it.
        drop(unsafe { Box::from_raw(privdata) });
        return false;
    }
    true
}

/// The key whose signal woke the blocked client, inside `on_ready`.
pub fn ready_key(ctx: &Context) -> Option<RedisString> {
    // SAFETY: valid context of a blocked-client callback; the string is
    // retained by `RedisString::new`.
    unsafe {
        let f = raw::RedisModule_GetBlockedClientReadyKey?;
        let k = f(ctx.ctx);
        (!k.is_null()).then(|| RedisString::new(std::ptr::NonNull::new(ctx.ctx), k))
    }
}

fn blocked(ctx: *mut raw::RedisModuleCtx) -> Option<&'static Blocked> {
    // SAFETY: the private data is the `Blocked` made by `block_on_keys`,
    // alive until `free_blocked`, which Redis calls after the last callback.
    unsafe {
        let p = raw::RedisModule_GetBlockedClientPrivateData?(ctx);
        (p as *const Blocked).as_ref()
    }
}

extern "C" fn blocked_ready(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let Some(b) = blocked(ctx) else {
        context.reply_error_string(INTERNAL_ERROR);
        return OK;
    };
    let args = redis_module::decode_args(ctx, argv, argc);
    let done = guard::contain("a blocked client's wake-up", || {
        guard::inject("blocked-ready");
        match (b.on_ready)(&context, &args) {
            None => false,
            Some(Ok(r)) => {
                reply::send(&context, &r);
                true
            }
            Some(Err(e)) => {
                errors::send_err(&context, e);
                true
            }
        }
    });
    match done {
        Some(true) => OK,
        Some(false) => ERR,
        None => {
            context.reply_error_string(INTERNAL_ERROR);
            OK
        }
    }
}

extern "C" fn blocked_timeout(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let args = redis_module::decode_args(ctx, argv, argc);
    let done = guard::contain("a blocked client's timeout", || {
        guard::inject("blocked-timeout");
        let b = blocked(ctx)?;
        match (b.on_timeout)(&context, &args) {
            Ok(r) => reply::send(&context, &r),
            Err(e) => {
                errors::send_err(&context, e);
            }
        }
        Some(())
    });
    if done.flatten().is_none() {
        context.reply_error_string(INTERNAL_ERROR);
    }
    OK
}

extern "C" fn free_blocked(_ctx: *mut raw::RedisModuleCtx, privdata: *mut c_void) {
    if !privdata.is_null() {
        // SAFETY: made by Box::into_raw in `block_on_keys`; Redis frees it
        // once.
        drop(unsafe { Box::from_raw(privdata.cast::<Blocked>()) });
    }
}

// ---------------------------------------------------------- command filter

/// The arguments of a command about to run, as the command filter sees them.
pub struct FilterArgs(*mut raw::RedisModuleCommandFilterCtx);

impl FilterArgs {
    pub fn len(&self) -> usize {
        match unsafe { raw::RedisModule_CommandFilterArgsCount } {
            // SAFETY: the filter context Redis passed to the running filter.
            Some(f) => unsafe { f(self.0) }.max(0) as usize,
            None => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Argument `i` (empty if absent). The slice does not outlive the filter call.
    pub fn arg(&self, i: usize) -> &[u8] {
        if i >= self.len() {
            return &[];
        }
        // SAFETY: the filter context Redis passed; `i` is in range; the
        // string lives as long as the command, which outlives `self`.
        unsafe {
            match raw::RedisModule_CommandFilterArgGet {
                Some(f) => {
                    let s = f(self.0, i as c_int);
                    if s.is_null() {
                        &[]
                    } else {
                        RedisString::string_as_slice(s)
                    }
                }
                None => &[],
            }
        }
    }

    /// Is argument `i` the keyword `kw` (ASCII case-insensitive)?
    pub fn is(&self, i: usize, kw: &str) -> bool {
        self.arg(i).eq_ignore_ascii_case(kw.as_bytes())
    }
}

static FILTER: OnceLock<fn(&FilterArgs)> = OnceLock::new();

extern "C" fn filter(f: *mut raw::RedisModuleCommandFilterCtx) {
    if let Some(run) = FILTER.get() {
        guard::contain("the command filter", || {
            guard::inject("filter");
            run(&FilterArgs(f))
        });
    }
}

/// See every command before it runs (not the module's own calls).
pub fn watch_commands(ctx: &Context, f: fn(&FilterArgs)) -> bool {
    if FILTER.set(f).is_err() {
        return false;
    }
    match unsafe { raw::RedisModule_RegisterCommandFilter } {
        // SAFETY: valid load-time context; a plain C callback.
        Some(reg) => unsafe {
            !reg(
                ctx.ctx,
                Some(filter),
                raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
            )
            .is_null()
        },
        None => false,
    }
}

// ------------------------------------------------------------ server events

static SWAPDB: OnceLock<fn(i32, i32)> = OnceLock::new();

unsafe extern "C" fn swapdb(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    _sub: u64,
    data: *mut c_void,
) {
    if data.is_null() {
        return;
    }
    // SAFETY: for the SwapDB event Redis passes a RedisModuleSwapDbInfo.
    let info = unsafe { &*(data as *const raw::RedisModuleSwapDbInfo) };
    let (a, b) = (info.dbnum_first, info.dbnum_second);
    if let Some(run) = SWAPDB.get() {
        guard::contain("the SWAPDB event", || {
            guard::inject("swapdb");
            run(a, b)
        });
    }
}

/// Follow SWAPDB (which sends no per-key events).
pub fn on_swapdb(ctx: &Context, f: fn(i32, i32)) -> bool {
    if SWAPDB.set(f).is_err() {
        return false;
    }
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_SWAPDB,
        dataver: 1,
    };
    match unsafe { raw::RedisModule_SubscribeToServerEvent } {
        // SAFETY: valid load-time context; a plain C callback.
        Some(sub) => unsafe { sub(ctx.ctx, event, Some(swapdb)) == OK },
        None => false,
    }
}

// --------------------------------------------------------------------- INFO

static INFO: OnceLock<fn(&InfoContext)> = OnceLock::new();

extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    if let Some(run) = INFO.get() {
        guard::contain("INFO orca", || {
            guard::inject("info");
            run(&InfoContext::new(ctx))
        });
    }
}

/// Install the `INFO orca` sections (replacing the wrapper crate's default).
pub fn on_info(ctx: &Context, f: fn(&InfoContext)) -> bool {
    if INFO.set(f).is_err() {
        return false;
    }
    match unsafe { raw::RedisModule_RegisterInfoFunc } {
        // SAFETY: valid context during module load.
        Some(reg) => unsafe { reg(ctx.ctx, Some(info)) == OK },
        None => false,
    }
}

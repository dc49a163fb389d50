//! The Redis adapter: module registration, commands, the data type.
//!
//! `unsafe` lives only in `alloc.rs`, `cmdinfo.rs`, `datatype.rs` and
//! `ffi.rs`, the files that touch the module API directly.

pub mod alloc;
pub mod args;
pub mod blocking;
pub mod cmdinfo;
pub mod commands;
pub mod datatype;
pub mod ffi;
pub mod inspect;
pub mod reply;
pub mod settings;
pub mod stats;
pub mod timer;
pub mod worker;

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

/// Did this command come from the master or the AOF (not from a client)?
/// Such commands carry their pinned values (`NOW`, `MAXATTEMPTS`, ...) and
/// must be applied as the master applied them, whatever this server's limits.
pub fn from_master_or_aof(ctx: &Context) -> bool {
    ctx.get_flags()
        .intersects(redis_module::ContextFlags::REPLICATED | redis_module::ContextFlags::LOADING)
}

/// May this command carry `NOW`/`MAXATTEMPTS` on a worker command? From the
/// master or the AOF always; from clients only with
/// `orca.trust-client-clock yes` (a client that moves the clock forward
/// could expire other workers' leases).
pub fn may_pin_clock(ctx: &Context) -> bool {
    from_master_or_aof(ctx) || settings::trust_client_clock()
}

/// What a command returns: a reply to send, or an error reply.
pub type CmdResult = Result<reply::Reply, RedisError>;

/// Last line of defence: a panic in a command becomes an error reply and a
/// log line instead of aborting the server. (It does not replace fixing it.)
pub fn guarded(
    ctx: &Context,
    args: Vec<RedisString>,
    f: fn(&Context, Vec<RedisString>) -> CmdResult,
) -> RedisResult {
    match catch_unwind(AssertUnwindSafe(|| f(ctx, args))) {
        Ok(Ok(reply)) => {
            reply::send(ctx, &reply);
            Ok(RedisValue::NoReply)
        }
        Ok(Err(e)) => Err(clean_err(e)),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            ctx.log_warning(&format!("orca: contained a panic in a command: {what}"));
            Err(RedisError::Str(
                "ERR internal error in the orca module (see the server log)",
            ))
        }
    }
}

pub fn init(ctx: &Context, _args: &[RedisString]) -> redis_module::Status {
    ctx.set_module_options(redis_module::raw::ModuleOptions::HANDLE_IO_ERRORS);
    timer::start(ctx);
    ffi::register_info(ctx);
    if !ffi::watch_pauses(ctx) {
        ctx.log_warning("orca: could not watch CLIENT PAUSE (lease timer may run during pauses)");
    }
    if !ffi::subscribe_swapdb(ctx) {
        ctx.log_warning("orca: could not subscribe to SWAPDB events");
    }
    if !cmdinfo::register(ctx) {
        ctx.log_warning("orca: could not set command metadata (arity, key specs)");
    }
    redis_module::Status::Ok
}

/// Errors as clients expect them: `WRONGTYPE ...` for another type, and
/// every other text cleaned (see `clean_error`).
pub fn clean_err(e: RedisError) -> RedisError {
    match e {
        RedisError::WrongType => {
            RedisError::Str("WRONGTYPE Operation against a key holding the wrong kind of value")
        }
        // The wrapper crate reports another key type with this text.
        RedisError::Str(s)
            if s.contains("wrong Redis type") || s.contains("wrong kind of value") =>
        {
            RedisError::Str("WRONGTYPE Operation against a key holding the wrong kind of value")
        }
        RedisError::Str(s) => RedisError::String(clean_error(s)),
        RedisError::String(s) => RedisError::String(clean_error(&s)),
        e => e,
    }
}

/// Error texts may quote client input (a JSON parser's message): keep them
/// to one printable line of bounded length, with no NUL (the reply path
/// builds a C string from it).
fn clean_error(s: &str) -> String {
    // Printable ASCII only: the wrapper crate sends each char of an error
    // as one byte (`c as u8`), so U+0100 would become a NUL (and its
    // CString::new(..).unwrap() would abort the server) and any non-ASCII
    // char invalid UTF-8.
    let mut out: String = s
        .chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .take(400)
        .collect();
    let known = ["ERR ", "WRONGTYPE ", "NOPERM ", "OOM ", "READONLY "];
    if !known.iter().any(|p| out.starts_with(p)) {
        out.insert_str(0, "ERR ");
    }
    out
}

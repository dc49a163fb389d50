//! The raw module API calls the wrapper crate does not cover, as safe
//! functions. This is the bottom layer of the adapter: it calls nothing
//! above it (callbacks Redis makes into the module live in `hooks.rs` and
//! `datatype.rs`).

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_long};

use redis_module::{raw, Context, RedisString};

/// Is this API function present on the running server?
macro_rules! api {
    ($name:ident) => {
        // SAFETY: a plain read of a function pointer that RedisModule_Init
        // wrote once, on the main thread, before any command ran.
        unsafe { raw::$name }
    };
}

/// The server's clock in ms (`RedisModule_Milliseconds`). Commands that use
/// it replicate the value they read, so replicas and AOF replay never read
/// their own clock.
pub fn now_ms() -> i64 {
    match api!(RedisModule_Milliseconds) {
        // SAFETY: no arguments; callable any time after load.
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

/// The database the context has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    match api!(RedisModule_GetSelectedDb) {
        // SAFETY: valid context from Redis.
        Some(f) => unsafe { f(ctx.ctx) },
        None => 0,
    }
}

/// Select a database on this context (timer contexts start on db 0).
pub fn select_db(ctx: &Context, db: i32) -> bool {
    match api!(RedisModule_SelectDb) {
        // SAFETY: valid context from Redis; Redis checks the id.
        Some(f) => unsafe { f(ctx.ctx, db) == raw::REDISMODULE_OK as c_int },
        None => false,
    }
}

/// A module keyspace event (`orca.*`) on `key`. Unlike the wrapper crate's
/// `notify_keyspace_event`, the event name is not copied into a CString.
pub fn notify(ctx: &Context, event: &CStr, key: &RedisString) {
    if let Some(f) = api!(RedisModule_NotifyKeyspaceEvent) {
        // SAFETY: valid context and key string from Redis; a NUL-terminated
        // event name that Redis reads during the call.
        unsafe {
            f(
                ctx.ctx,
                redis_module::NotifyEvent::MODULE.bits(),
                event.as_ptr(),
                key.inner,
            )
        };
    }
}

/// Wake clients blocked on `key` (a blocking `ORCA.POP`).
pub fn signal_ready(ctx: &Context, key: &RedisString) {
    if let Some(f) = api!(RedisModule_SignalKeyAsReady) {
        // SAFETY: valid context and key string from Redis.
        unsafe { f(ctx.ctx, key.inner) };
    }
}

/// Is Redis asking where this command's keys are (a command declared with
/// `getkeys-api`, asked by Cluster before running it) rather than running it?
pub fn is_keys_position_request(ctx: &Context) -> bool {
    match api!(RedisModule_IsKeysPositionRequest) {
        // SAFETY: the context Redis passed to the command.
        Some(f) => unsafe { f(ctx.ctx) != 0 },
        None => false,
    }
}

/// Answer a keys position request: argument `pos` is a key, accessed as
/// `flags` (`REDISMODULE_CMD_KEY_*`, the bits of the key spec's flags).
pub fn key_at_pos(ctx: &Context, pos: usize, flags: u32) {
    let Ok(pos) = c_int::try_from(pos) else {
        return;
    };
    if let Some(f) = api!(RedisModule_KeyAtPosWithFlags) {
        // SAFETY: the context of a keys position request; Redis checks `pos`.
        unsafe { f(ctx.ctx, pos, flags as c_int) };
    } else if let Some(f) = api!(RedisModule_KeyAtPos) {
        // SAFETY: as above.
        unsafe { f(ctx.ctx, pos) };
    }
}

/// A warning in the server log. The text is passed as an argument of a
/// `%s` format, so no byte of it is read as a format directive; NUL bytes
/// are replaced (the wrapper crate's logging would panic on them).
pub fn log_warning(msg: &str) {
    let text = std::ffi::CString::new(msg.replace('\0', "?")).unwrap_or_default();
    if let Some(f) = api!(RedisModule_Log) {
        // SAFETY: a NULL context is allowed (logged without a module
        // name); level and format are NUL-terminated; "%s" takes one C
        // string, which is NUL-terminated.
        unsafe {
            f(
                std::ptr::null_mut(),
                c"warning".as_ptr(),
                c"orca: %s".as_ptr(),
                text.as_ptr(),
            )
        };
    }
}

/// Key name and database of the value being loaded (RDB, RESTORE), if
/// Redis tells them.
///
/// # Safety
/// `io` must be the IO handle Redis passed to the running type callback.
pub unsafe fn io_key(io: *mut raw::RedisModuleIO) -> Option<(i32, Vec<u8>)> {
    // SAFETY: valid IO handle from Redis; the name is copied before return.
    unsafe {
        let name = raw::RedisModule_GetKeyNameFromIO?(io);
        if name.is_null() {
            return None;
        }
        let db = raw::RedisModule_GetDbIdFromIO.map(|f| f(io)).unwrap_or(0);
        Some((db, RedisString::string_as_slice(name).to_vec()))
    }
}

// ----------------------------------------------------------------- replies

/// Reply primitives on the client of a command context. Redis copies what
/// it is given.
pub mod reply {
    use super::*;

    pub fn map(ctx: &Context, len: usize) {
        if let Some(f) = api!(RedisModule_ReplyWithMap) {
            // SAFETY: valid context from Redis.
            unsafe { f(ctx.ctx, len as c_long) };
        }
    }

    pub fn array(ctx: &Context, len: usize) {
        if let Some(f) = api!(RedisModule_ReplyWithArray) {
            // SAFETY: valid context from Redis.
            unsafe { f(ctx.ctx, len as c_long) };
        }
    }

    pub fn bulk(ctx: &Context, b: &[u8]) {
        if let Some(f) = api!(RedisModule_ReplyWithStringBuffer) {
            // SAFETY: valid context; the buffer is passed with its length.
            unsafe { f(ctx.ctx, b.as_ptr().cast::<c_char>(), b.len()) };
        }
    }

    pub fn int(ctx: &Context, v: i64) {
        if let Some(f) = api!(RedisModule_ReplyWithLongLong) {
            // SAFETY: valid context from Redis.
            unsafe { f(ctx.ctx, v) };
        }
    }

    pub fn null(ctx: &Context) {
        if let Some(f) = api!(RedisModule_ReplyWithNull) {
            // SAFETY: valid context from Redis.
            unsafe { f(ctx.ctx) };
        }
    }

    pub fn status(ctx: &Context, s: &CStr) {
        if let Some(f) = api!(RedisModule_ReplyWithSimpleString) {
            // SAFETY: valid context; a NUL-terminated string.
            unsafe { f(ctx.ctx, s.as_ptr()) };
        }
    }

    /// An error reply: `s` starts with its code (`ERR `, `WRONGTYPE `, ...)
    /// and holds no CR or LF. Unlike the wrapper crate's error replies,
    /// the bytes go as they are (UTF-8 stays UTF-8).
    pub fn error(ctx: &Context, s: &CStr) {
        if let Some(f) = api!(RedisModule_ReplyWithError) {
            // SAFETY: valid context; a NUL-terminated string.
            unsafe { f(ctx.ctx, s.as_ptr()) };
        }
    }
}

// ------------------------------------------------------------- replication

/// Keywords of replicated commands. Each is created once as a Redis string
/// and shared by every replicated command (Redis strings are reference
/// counted; a propagated command takes its own reference).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kw {
    Now,
    Lease,
    Count,
    MaxAttempts,
    Delay,
    Ttl,
    Result,
    Buffer,
    Requeue,
    Order,
    Results,
    Worker,
    Error,
}

impl Kw {
    const COUNT: usize = 13;

    pub fn text(self) -> &'static str {
        match self {
            Kw::Now => "NOW",
            Kw::Lease => "LEASE",
            Kw::Count => "COUNT",
            Kw::MaxAttempts => "MAXATTEMPTS",
            Kw::Delay => "DELAY",
            Kw::Ttl => "TTL",
            Kw::Result => "RESULT",
            Kw::Buffer => "BUFFER",
            Kw::Requeue => "REQUEUE",
            Kw::Order => "ORDER",
            Kw::Results => "RESULTS",
            Kw::Worker => "WORKER",
            Kw::Error => "ERROR",
        }
    }
}

thread_local! {
    /// The keyword strings made so far (NULL: not yet). Commands, timers
    /// and replication all run on Redis's main thread.
    static KEYWORDS: [std::cell::Cell<*mut raw::RedisModuleString>; Kw::COUNT] =
        const { [const { std::cell::Cell::new(std::ptr::null_mut()) }; Kw::COUNT] };
}

/// The shared string of `k` (NULL only if Redis lacks the API).
fn keyword(k: Kw) -> *mut raw::RedisModuleString {
    KEYWORDS.with(|cells| {
        let Some(cell) = cells.get(k as usize) else {
            return std::ptr::null_mut();
        };
        if cell.get().is_null() {
            let t = k.text();
            if let Some(f) = api!(RedisModule_CreateString) {
                // SAFETY: a NULL context makes a string the module owns;
                // this one is kept (never freed) for the life of the process.
                cell.set(unsafe { f(std::ptr::null_mut(), t.as_ptr().cast(), t.len()) });
            }
        }
        cell.get()
    })
}

/// An argument of a replicated command.
#[derive(Clone, Copy)]
pub enum Arg<'a> {
    /// A client's argument, passed on without copying (Redis takes a reference).
    Client(&'a RedisString),
    /// A keyword (`NOW`, `LEASE`, ...), shared, never copied.
    Keyword(Kw),
    /// Bytes, copied into a new string.
    Bytes(&'a [u8]),
    /// An integer in decimal.
    Int(i64),
}

/// How many recently replicated integers are kept as shared strings.
const INT_SLOTS: usize = 8;

/// Recently replicated integers as shared strings: the values of `LEASE`,
/// `COUNT`, `MAXATTEMPTS` and `NOW` (within a millisecond) repeat from one
/// command to the next. Each slot holds one reference to its string; the
/// least recently used slot is reused, never one the running `replicate`
/// call has handed out.
struct IntStrings {
    /// (value, string or NULL, last call that used it)
    slots: [(i64, *mut raw::RedisModuleString, u64); INT_SLOTS],
    call: u64,
}

thread_local! {
    static INTS: std::cell::RefCell<IntStrings> = const {
        std::cell::RefCell::new(IntStrings {
            slots: [(0, std::ptr::null_mut(), 0); INT_SLOTS],
            call: 0,
        })
    };
}

impl IntStrings {
    /// The shared string of `v` (NULL if none can be had).
    fn get(&mut self, v: i64) -> *mut raw::RedisModuleString {
        let call = self.call;
        if let Some(s) = self.slots.iter_mut().find(|s| s.0 == v && !s.1.is_null()) {
            s.2 = call;
            return s.1;
        }
        let Some(slot) = self
            .slots
            .iter_mut()
            .filter(|s| s.2 != call)
            .min_by_key(|s| s.2)
        else {
            return std::ptr::null_mut();
        };
        let (Some(create), Some(free)) = (
            api!(RedisModule_CreateStringFromLongLong),
            api!(RedisModule_FreeString),
        ) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a NULL context makes a string the module owns (this
        // slot's reference). The string it replaces is not among the
        // running call's arguments (its slot was not used by this call),
        // and Redis holds its own references to the strings of commands it
        // has yet to propagate, so dropping ours is fine.
        unsafe {
            let s = create(std::ptr::null_mut(), v);
            if !slot.1.is_null() {
                free(std::ptr::null_mut(), slot.1);
            }
            *slot = (v, s, call);
            s
        }
    }
}

/// Arguments a replicated command has at most without a heap array.
const INLINE_ARGS: usize = 12;

/// Replicate `cmd args...` to replicas and the AOF. Unlike the wrapper
/// crate's `replicate`, client arguments (payloads) and keywords are not
/// copied, recent integers are reused, and no heap array is built.
pub fn replicate(ctx: &Context, cmd: &CStr, args: &[Arg]) {
    let run = |ints: Option<&mut IntStrings>| replicate_with(ctx, cmd, args, ints);
    let done = INTS.try_with(|cell| match cell.try_borrow_mut() {
        Ok(mut ints) => {
            ints.call = ints.call.wrapping_add(1);
            run(Some(&mut ints))
        }
        Err(_) => run(None),
    });
    if done.is_err() {
        run(None);
    }
}

fn replicate_with(ctx: &Context, cmd: &CStr, args: &[Arg], mut ints: Option<&mut IntStrings>) {
    let c = ctx.ctx;
    let n = args.len();
    let mut inline = [std::ptr::null_mut::<raw::RedisModuleString>(); INLINE_ARGS];
    let mut inline_owned = [false; INLINE_ARGS];
    let (mut heap, mut heap_owned) = (Vec::new(), Vec::new());
    let (ptrs, owned): (&mut [*mut raw::RedisModuleString], &mut [bool]) =
        match (inline.get_mut(..n), inline_owned.get_mut(..n)) {
            (Some(p), Some(o)) => (p, o),
            _ => {
                heap.resize(n, std::ptr::null_mut());
                heap_owned.resize(n, false);
                (&mut heap, &mut heap_owned)
            }
        };
    for ((p, o), a) in ptrs.iter_mut().zip(owned.iter_mut()).zip(args) {
        *p = match a {
            Arg::Client(s) => s.inner,
            Arg::Keyword(k) => keyword(*k),
            Arg::Int(i) => ints
                .as_deref_mut()
                .map_or(std::ptr::null_mut(), |c| c.get(*i)),
            Arg::Bytes(_) => std::ptr::null_mut(),
        };
        if p.is_null() && matches!(a, Arg::Bytes(_) | Arg::Int(_)) {
            // SAFETY: valid context from Redis; buffers are passed with
            // their lengths. Freed below.
            *p = unsafe {
                match (
                    a,
                    raw::RedisModule_CreateString,
                    raw::RedisModule_CreateStringFromLongLong,
                ) {
                    (Arg::Bytes(b), Some(f), _) => f(c, b.as_ptr().cast(), b.len()),
                    (Arg::Int(i), _, Some(f)) => f(c, *i),
                    _ => std::ptr::null_mut(),
                }
            };
            *o = true;
        }
    }
    // SAFETY: "v" takes an array of RedisModuleString pointers and its
    // length; Redis increments their reference counts, so freeing ours
    // afterwards is fine. Never called with a NULL string.
    unsafe {
        if let Some(f) = raw::RedisModule_Replicate {
            if ptrs.iter().all(|p| !p.is_null()) {
                f(c, cmd.as_ptr(), c"v".as_ptr(), ptrs.as_ptr(), ptrs.len());
            }
        }
        if let Some(free) = raw::RedisModule_FreeString {
            for (p, o) in ptrs.iter().zip(owned.iter()) {
                if *o && !p.is_null() {
                    free(c, *p);
                }
            }
        }
    }
}

// ----------------------------------------------------- command registration

/// `RedisModule_CreateCommand` (load time only).
pub fn create_command(
    ctx: &Context,
    name: &CStr,
    entry: raw::RedisModuleCmdFunc,
    flags: &CStr,
    keys: (c_int, c_int, c_int),
) -> bool {
    match api!(RedisModule_CreateCommand) {
        // SAFETY: load-time context; NUL-terminated name and flags, which
        // Redis copies.
        Some(f) => unsafe {
            f(
                ctx.ctx,
                name.as_ptr(),
                entry,
                flags.as_ptr(),
                keys.0,
                keys.1,
                keys.2,
            ) == raw::REDISMODULE_OK as c_int
        },
        None => false,
    }
}

/// The metadata `COMMAND INFO/DOCS/GETKEYS` shows for a command: Redis 7.0
/// reads arity and key specs only from `RedisModule_SetCommandInfo`.
pub struct CommandInfo<'a> {
    pub summary: &'a CStr,
    pub complexity: &'a CStr,
    pub since: &'a CStr,
    pub arity: i32,
    pub key_specs: Vec<redis_module::commands::KeySpec>,
}

/// Set a command's metadata (load time only). Returns false if Redis lacks
/// the API or refused it (the command works; metadata is then the default).
pub fn set_command_info(ctx: &Context, name: &CStr, info: CommandInfo) -> bool {
    let (Some(get), Some(set)) = (
        api!(RedisModule_GetCommand),
        api!(RedisModule_SetCommandInfo),
    ) else {
        return false;
    };
    // Redis copies what it needs during the call; the version block and the
    // key spec array are leaked once at load time so they outlive it anyway.
    let version: &'static raw::RedisModuleCommandInfoVersion =
        Box::leak(Box::new(raw::RedisModuleCommandInfoVersion {
            version: 1,
            sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
            sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
            sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
        }));
    let specs = redis_module::commands::get_redis_key_spec(info.key_specs);
    let specs: &'static mut [raw::RedisModuleCommandKeySpec] = Box::leak(specs.into_boxed_slice());
    // SAFETY: valid load-time context; a NUL-terminated name.
    let cmd = unsafe { get(ctx.ctx, name.as_ptr()) };
    if cmd.is_null() {
        return false;
    }
    let raw_info = raw::RedisModuleCommandInfo {
        version,
        summary: info.summary.as_ptr(),
        complexity: info.complexity.as_ptr(),
        since: info.since.as_ptr(),
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: info.arity,
        key_specs: specs.as_mut_ptr(),
        args: std::ptr::null_mut(),
    };
    // SAFETY: every pointer in `raw_info` is valid for the call (Redis
    // copies the strings and specs).
    unsafe { set(cmd, &raw_info) == raw::REDISMODULE_OK as c_int }
}

/// Add a module ACL category (Redis 7.4+); false where unsupported.
pub fn add_acl_category(ctx: &Context, name: &CStr) -> bool {
    match api!(RedisModule_AddACLCategory) {
        // SAFETY: load-time context; a NUL-terminated name Redis copies.
        Some(f) => unsafe { f(ctx.ctx, name.as_ptr()) == raw::REDISMODULE_OK as c_int },
        None => false,
    }
}

/// Set a command's ACL categories (Redis 7.2+, Valkey); false where
/// unsupported or refused.
pub fn set_acl_categories(ctx: &Context, name: &CStr, categories: &CStr) -> bool {
    let (Some(get), Some(set)) = (
        api!(RedisModule_GetCommand),
        api!(RedisModule_SetCommandACLCategories),
    ) else {
        return false;
    };
    // SAFETY: load-time context and NUL-terminated strings.
    unsafe {
        let cmd = get(ctx.ctx, name.as_ptr());
        !cmd.is_null() && set(cmd, categories.as_ptr()) == raw::REDISMODULE_OK as c_int
    }
}

// ------------------------------------------------------------- server state

/// Is a shutdown waiting for replicas (writes paused)? Redis 7.0 shows
/// `shutdown_in_milliseconds` in INFO server only then; this also covers a
/// shutdown started by SIGTERM, which no command filter sees.
pub fn shutdown_pending(ctx: &Context) -> bool {
    let (Some(get), Some(field), Some(free)) = (
        api!(RedisModule_GetServerInfo),
        api!(RedisModule_ServerInfoGetFieldC),
        api!(RedisModule_FreeServerInfo),
    ) else {
        return false;
    };
    // SAFETY: valid context; the info data is freed before returning and
    // the field pointer is only tested for NULL.
    unsafe {
        let data = get(ctx.ctx, c"server".as_ptr());
        if data.is_null() {
            return false;
        }
        let pending = !field(data, c"shutdown_in_milliseconds".as_ptr()).is_null();
        free(ctx.ctx, data);
        pending
    }
}

/// True while Redis wants no replication traffic (writes paused).
pub fn avoid_replica_traffic() -> bool {
    match api!(RedisModule_AvoidReplicaTraffic) {
        // SAFETY: no arguments.
        Some(f) => unsafe { f() != 0 },
        None => false,
    }
}

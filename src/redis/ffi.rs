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

/// The database the context has selected.
pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: valid context from Redis.
    match unsafe { raw::RedisModule_GetSelectedDb } {
        Some(f) => unsafe { f(ctx.ctx) },
        None => 0,
    }
}

/// Select a database on this context (timer contexts start on db 0).
pub fn select_db(ctx: &Context, db: i32) -> bool {
    // SAFETY: valid context from Redis; Redis checks the id.
    match unsafe { raw::RedisModule_SelectDb } {
        Some(f) => unsafe { f(ctx.ctx, db) == raw::REDISMODULE_OK as i32 },
        None => false,
    }
}

/// A module keyspace event (`orca.*`) on `key`. Unlike the wrapper crate's
/// `notify_keyspace_event`, the event name is not copied into a CString.
pub fn notify(ctx: &Context, event: &std::ffi::CStr, key: &redis_module::RedisString) {
    // SAFETY: valid context and key string from Redis; a NUL-terminated
    // event name that Redis reads during the call.
    if let Some(f) = unsafe { raw::RedisModule_NotifyKeyspaceEvent } {
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
pub fn signal_ready(ctx: &Context, key: &redis_module::RedisString) {
    // SAFETY: valid context and key string from Redis.
    if let Some(f) = unsafe { raw::RedisModule_SignalKeyAsReady } {
        unsafe { f(ctx.ctx, key.inner) };
    }
}

/// Key name and database of the value being loaded (RDB, RESTORE), if
/// Redis tells them.
///
/// # Safety
/// `rdb` must be the IO handle Redis passed to the running type callback.
pub unsafe fn io_key(rdb: *mut raw::RedisModuleIO) -> Option<(i32, Vec<u8>)> {
    // SAFETY: valid IO handle from Redis; the name is copied before return.
    unsafe {
        let name = raw::RedisModule_GetKeyNameFromIO?(rdb);
        if name.is_null() {
            return None;
        }
        let db = raw::RedisModule_GetDbIdFromIO.map(|f| f(rdb)).unwrap_or(0);
        Some((
            db,
            redis_module::RedisString::string_as_slice(name).to_vec(),
        ))
    }
}

/// Block the client until `key` is signalled ready or `timeout_ms` passes
/// (0 = forever), like BLPOP. Redis then calls `on_ready` (which may reply,
/// or return an error status to keep waiting) or `on_timeout`.
pub fn block_on_key(
    ctx: &Context,
    key: &redis_module::RedisString,
    timeout_ms: i64,
    on_ready: raw::RedisModuleCmdFunc,
    on_timeout: raw::RedisModuleCmdFunc,
) -> bool {
    let mut keys = [key.inner];
    // SAFETY: valid context and key; the keys array is copied by Redis.
    match unsafe { raw::RedisModule_BlockClientOnKeys } {
        Some(f) => unsafe {
            !f(
                ctx.ctx,
                on_ready,
                on_timeout,
                None,
                timeout_ms,
                keys.as_mut_ptr(),
                1,
                std::ptr::null_mut(),
            )
            .is_null()
        },
        None => false,
    }
}

extern "C" fn info_func(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: std::os::raw::c_int) {
    let _ = std::panic::catch_unwind(|| super::stats::info(&redis_module::InfoContext::new(ctx)));
}

/// Install the `INFO orca` handler (replacing the wrapper crate's default).
pub fn register_info(ctx: &Context) {
    // SAFETY: valid context during module load.
    if let Some(f) = unsafe { raw::RedisModule_RegisterInfoFunc } {
        unsafe { f(ctx.ctx, Some(info_func)) };
    }
}

/// The client of a command context, as a reply sink.
pub struct Client(*mut raw::RedisModuleCtx);

impl Client {
    pub fn new(ctx: &Context) -> Self {
        Client(ctx.ctx)
    }
}

impl super::reply::Sink for Client {
    fn map(&mut self, len: usize) {
        // SAFETY: a valid context from Redis; Redis copies what it is given.
        if let Some(f) = unsafe { raw::RedisModule_ReplyWithMap } {
            unsafe { f(self.0, len as std::os::raw::c_long) };
        }
    }

    fn array(&mut self, len: usize) {
        // SAFETY: a valid context from Redis; Redis copies what it is given.
        if let Some(f) = unsafe { raw::RedisModule_ReplyWithArray } {
            unsafe { f(self.0, len as std::os::raw::c_long) };
        }
    }

    fn bulk(&mut self, b: &[u8]) {
        // SAFETY: a valid context from Redis; the buffer is passed with its
        // length and Redis copies it.
        if let Some(f) = unsafe { raw::RedisModule_ReplyWithStringBuffer } {
            unsafe { f(self.0, b.as_ptr().cast(), b.len()) };
        }
    }

    fn int(&mut self, v: i64) {
        // SAFETY: a valid context from Redis; Redis copies what it is given.
        if let Some(f) = unsafe { raw::RedisModule_ReplyWithLongLong } {
            unsafe { f(self.0, v) };
        }
    }

    fn null(&mut self) {
        // SAFETY: a valid context from Redis; Redis copies what it is given.
        if let Some(f) = unsafe { raw::RedisModule_ReplyWithNull } {
            unsafe { f(self.0) };
        }
    }

    fn status(&mut self, s: &'static std::ffi::CStr) {
        // SAFETY: a valid context from Redis; a NUL-terminated string that
        // Redis copies.
        if let Some(f) = unsafe { raw::RedisModule_ReplyWithSimpleString } {
            unsafe { f(self.0, s.as_ptr()) };
        }
    }
}

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
}

impl Kw {
    const COUNT: usize = 10;

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
            // SAFETY: a NULL context makes a string the module owns; this one
            // is kept (never freed) for the life of the process.
            if let Some(f) = unsafe { raw::RedisModule_CreateString } {
                cell.set(unsafe { f(std::ptr::null_mut(), t.as_ptr().cast(), t.len()) });
            }
        }
        cell.get()
    })
}

/// An argument of a replicated command.
pub enum Arg<'a> {
    /// A client's argument, passed on without copying (Redis takes a reference).
    S(&'a redis_module::RedisString),
    /// A keyword (`NOW`, `LEASE`, ...), shared, never copied.
    K(Kw),
    /// Bytes, copied into a new string.
    B(&'a [u8]),
    /// An integer in decimal.
    I(i64),
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
        // SAFETY: a NULL context makes a string the module owns (this
        // slot's reference). The string it replaces is not among the
        // running call's arguments (its slot was not used by this call),
        // and Redis holds its own references to the strings of commands it
        // has yet to propagate, so dropping ours is fine.
        unsafe {
            let (Some(create), Some(free)) = (
                raw::RedisModule_CreateStringFromLongLong,
                raw::RedisModule_FreeString,
            ) else {
                return std::ptr::null_mut();
            };
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
pub fn replicate(ctx: &Context, cmd: &std::ffi::CStr, args: &[Arg]) {
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

fn replicate_with(
    ctx: &Context,
    cmd: &std::ffi::CStr,
    args: &[Arg],
    mut ints: Option<&mut IntStrings>,
) {
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
            Arg::S(s) => s.inner,
            Arg::K(k) => keyword(*k),
            Arg::I(i) => ints
                .as_deref_mut()
                .map_or(std::ptr::null_mut(), |c| c.get(*i)),
            Arg::B(_) => std::ptr::null_mut(),
        };
        if p.is_null() && matches!(a, Arg::B(_) | Arg::I(_)) {
            // SAFETY: valid context from Redis; buffers are passed with
            // their lengths. Freed below.
            *p = unsafe {
                match (
                    a,
                    raw::RedisModule_CreateString,
                    raw::RedisModule_CreateStringFromLongLong,
                ) {
                    (Arg::B(b), Some(f), _) => f(c, b.as_ptr().cast(), b.len()),
                    (Arg::I(i), _, Some(f)) => f(c, *i),
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

unsafe extern "C" fn on_swapdb(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    _sub: u64,
    data: *mut std::os::raw::c_void,
) {
    if data.is_null() {
        return;
    }
    // SAFETY: for the SwapDB event Redis passes a RedisModuleSwapDbInfo.
    let info = unsafe { &*(data as *const raw::RedisModuleSwapDbInfo) };
    let (a, b) = (info.dbnum_first, info.dbnum_second);
    let _ = std::panic::catch_unwind(|| super::timer::on_swapdb(a, b));
}

/// Follow SWAPDB (which sends no per-key events) so leases of queues in the
/// swapped databases keep expiring on time.
pub fn subscribe_swapdb(ctx: &Context) -> bool {
    let event = raw::RedisModuleEvent {
        id: raw::REDISMODULE_EVENT_SWAPDB,
        dataver: 1,
    };
    // SAFETY: valid load-time context; a plain C callback.
    match unsafe { raw::RedisModule_SubscribeToServerEvent } {
        Some(f) => unsafe { f(ctx.ctx, event, Some(on_swapdb)) == raw::REDISMODULE_OK as i32 },
        None => false,
    }
}

unsafe extern "C" fn pause_filter(f: *mut raw::RedisModuleCommandFilterCtx) {
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the filter context Redis passed; arguments are read, not
        // kept (the slices do not outlive this callback).
        let (Some(count), Some(get)) =
            (unsafe { raw::RedisModule_CommandFilterArgsCount }, unsafe {
                raw::RedisModule_CommandFilterArgGet
            })
        else {
            return;
        };
        let n = unsafe { count(f) };
        // Runs before every command: no allocation, case-insensitive compares.
        let arg = |i: i32| -> &[u8] {
            if i >= n {
                return &[];
            }
            let s = unsafe { get(f, i) };
            if s.is_null() {
                &[]
            } else {
                redis_module::RedisString::string_as_slice(s)
            }
        };
        let is = |i: i32, kw: &str| arg(i).eq_ignore_ascii_case(kw.as_bytes());
        let num = |i: i32| {
            std::str::from_utf8(arg(i))
                .ok()
                .and_then(|t| t.parse::<i64>().ok())
        };
        if is(0, "CLIENT") {
            if is(1, "PAUSE") {
                super::timer::paused_for(num(2).unwrap_or(0));
            } else if is(1, "UNPAUSE") {
                super::timer::paused_for(0);
            }
        } else if is(0, "SHUTDOWN") {
            // A master waiting for its replicas before shutting down pauses
            // writes (up to shutdown-timeout); ABORT cancels the shutdown.
            let abort = (1..n).any(|i| is(i, "ABORT"));
            super::timer::paused_for(if abort { 0 } else { i64::MAX / 4 });
        } else if is(0, "FAILOVER") {
            // FAILOVER pauses writes while it hands over (until done or its
            // TIMEOUT); the server then is a replica and its timer idles.
            let mut ms = 60_000;
            for i in 1..n {
                if is(i, "TIMEOUT") {
                    if let Some(t) = num(i + 1) {
                        ms = t;
                    }
                }
            }
            super::timer::paused_for(ms);
        }
    });
}

/// Watch for CLIENT PAUSE / UNPAUSE / FAILOVER / SHUTDOWN: while writes are paused the
/// timer must not change (and replicate) anything, or Redis 7.0 asserts in
/// its propagation code. Redis 7.0 gives modules no other way to know.
pub fn watch_pauses(ctx: &Context) -> bool {
    // SAFETY: valid load-time context; a plain C callback.
    match unsafe { raw::RedisModule_RegisterCommandFilter } {
        Some(f) => unsafe {
            !f(
                ctx.ctx,
                Some(pause_filter),
                raw::REDISMODULE_CMDFILTER_NOSELF as i32,
            )
            .is_null()
        },
        None => false,
    }
}

/// Is a shutdown waiting for replicas (writes paused)? Redis 7.0 shows
/// `shutdown_in_milliseconds` in INFO server only then; this also covers a
/// shutdown started by SIGTERM, which no command filter sees.
pub fn shutdown_pending(ctx: &Context) -> bool {
    // SAFETY: valid context; the info data is freed before returning and
    // the field pointer is only tested for NULL.
    unsafe {
        let (Some(get), Some(field), Some(free)) = (
            raw::RedisModule_GetServerInfo,
            raw::RedisModule_ServerInfoGetFieldC,
            raw::RedisModule_FreeServerInfo,
        ) else {
            return false;
        };
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
    // SAFETY: a plain call of an API function set at module load.
    match unsafe { raw::RedisModule_AvoidReplicaTraffic } {
        Some(f) => unsafe { f() != 0 },
        None => false,
    }
}

//! Command metadata for `COMMAND INFO/DOCS/GETKEYS` on Redis 7.0: arity,
//! summary, complexity and key specs, set with `RedisModule_SetCommandInfo`
//! (the wrapper crate's command table cannot). Cluster-aware clients route
//! every command by its queue key (the first argument), and ACL key patterns
//! apply to it.

use std::ffi::CString;
use std::mem::size_of;

use redis_module::commands::{get_redis_key_spec, BeginSearch, FindKeys, KeySpec, KeySpecFlags};
use redis_module::{raw, Context};

struct Info {
    name: &'static str,
    arity: i32,
    write: bool,
    summary: &'static str,
    complexity: &'static str,
}

const fn w(
    name: &'static str,
    arity: i32,
    summary: &'static str,
    complexity: &'static str,
) -> Info {
    Info {
        name,
        arity,
        write: true,
        summary,
        complexity,
    }
}

const fn r(
    name: &'static str,
    arity: i32,
    summary: &'static str,
    complexity: &'static str,
) -> Info {
    Info {
        name,
        arity,
        write: false,
        summary,
        complexity,
    }
}

const LOG: &str = "O(log N) with N the queued jobs, plus the length of the job's collation";

const COMMANDS: &[Info] = &[
    w(
        "orca.enqueue",
        -3,
        "Create or update a job (PUT) in its collation",
        LOG,
    ),
    w(
        "orca.immediate",
        -3,
        "Create or update an immediate job, upgrading a waiting one",
        LOG,
    ),
    w(
        "orca.reenqueue",
        4,
        "Hand a job back as immediate at its original arrival time",
        LOG,
    ),
    w(
        "orca.move",
        -4,
        "Release a job to the front or delay it to the back",
        LOG,
    ),
    w(
        "orca.delete",
        3,
        "Delete a job in any state, cancelling running leases",
        LOG,
    ),
    w(
        "orca.pop",
        -2,
        "Lease (or take) the next job; optionally block",
        "O(log N) per job",
    ),
    w(
        "orca.ack",
        -4,
        "Complete a leased job, optionally keeping a result",
        "O(log N)",
    ),
    w(
        "orca.nack",
        -4,
        "Fail a leased job: retry after backoff or dead-letter it",
        "O(log N)",
    ),
    w("orca.extend", -5, "Extend a lease (heartbeat)", "O(log N)"),
    r(
        "orca.result",
        3,
        "Get the kept result of a completed job",
        "O(1)",
    ),
    w(
        "orca.dead",
        -3,
        "List, requeue or purge dead-lettered jobs",
        "O(page) / O(log N)",
    ),
    w(
        "orca.tick",
        -2,
        "Apply due time-driven changes (expiries, retries)",
        "O(due items * log N)",
    ),
    r("orca.len", 2, "Number of queued jobs", "O(1)"),
    r(
        "orca.check",
        2,
        "Verify every queue invariant",
        "O(N log N)",
    ),
    r("orca.status", 3, "A job's state and position", LOG),
    r(
        "orca.list",
        -2,
        "Queued jobs in pop order with positions, paged and filtered",
        "O(log N + page)",
    ),
    r(
        "orca.stats",
        2,
        "Counts by state and wait-time statistics",
        "O(N)",
    ),
    w(
        "orca.settings",
        -2,
        "Read or set a queue's settings (collation order)",
        "O(1)",
    ),
    w(
        "orca.import",
        3,
        "Add the jobs of a serialized queue (AOF rewrite form)",
        "O(M log N)",
    ),
];

fn leak(s: &str) -> *const std::os::raw::c_char {
    CString::new(s).unwrap_or_default().into_raw()
}

/// Set arity, docs and key specs of every command. Returns false if Redis
/// refused any (the module still works; metadata is then the default).
pub fn register(ctx: &Context) -> bool {
    let (Some(get), Some(set)) = (unsafe { raw::RedisModule_GetCommand }, unsafe {
        raw::RedisModule_SetCommandInfo
    }) else {
        return false;
    };
    // Redis copies what it needs; the version block and strings are leaked
    // once at load time so they outlive the call regardless.
    let version: &'static raw::RedisModuleCommandInfoVersion =
        Box::leak(Box::new(raw::RedisModuleCommandInfoVersion {
            version: 1,
            sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
            sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
            sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
        }));
    let mut ok = true;
    for c in COMMANDS {
        let flags = if c.write {
            KeySpecFlags::READ_WRITE | KeySpecFlags::UPDATE | KeySpecFlags::ACCESS
        } else {
            KeySpecFlags::READ_ONLY | KeySpecFlags::ACCESS
        };
        let specs = get_redis_key_spec(vec![KeySpec::new(
            None,
            flags,
            BeginSearch::new_index(1),
            FindKeys::new_range(0, 1, 0),
        )]);
        let specs: &'static mut [raw::RedisModuleCommandKeySpec] =
            Box::leak(specs.into_boxed_slice());
        let name = CString::new(c.name).unwrap_or_default();
        // SAFETY: valid load-time context; name is a NUL-terminated string.
        let cmd = unsafe { get(ctx.ctx, name.as_ptr()) };
        if cmd.is_null() {
            ok = false;
            continue;
        }
        let info = raw::RedisModuleCommandInfo {
            version,
            summary: leak(c.summary),
            complexity: leak(c.complexity),
            since: leak("0.1.0"),
            history: std::ptr::null_mut(),
            tips: std::ptr::null(),
            arity: c.arity,
            key_specs: specs.as_mut_ptr(),
            args: std::ptr::null_mut(),
        };
        // SAFETY: every pointer in `info` is valid for 'static.
        if unsafe { set(cmd, &info) } != raw::REDISMODULE_OK as i32 {
            ok = false;
        }
    }
    ok
}

//! The `orcaqueue` Redis data type: RDB save/load, AOF rewrite, digest,
//! memory usage, copy and free. Every callback runs inside the panic guard
//! (a panic must never unwind into Redis) and treats loaded bytes as hostile.
//!
//! A panic contained while saving must not leave a save that looks
//! complete: in a forked child (BGSAVE, a replica's full sync) the child is
//! aborted, so Redis reports the background save as failed and keeps the
//! previous RDB; in the main process (SAVE, SHUTDOWN) the queue is written
//! with the `SAVE_FAILED` mark, which every loader refuses with a clear
//! error. An AOF rewrite is failed through Redis's own error path.

use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use redis_module::native_types::RedisType;
use redis_module::raw;

use super::{ffi, guard, stats, tracking};
use crate::core::codec::{QueueBuilder, ENCODING_CURRENT, SAVE_FAILED};
use crate::core::Queue;

/// RDB encoding version of the type (`encver`). Loaders accept every
/// version up to this one and refuse newer ones.
pub const RDB_ENCVER: i32 = ENCODING_CURRENT as i32;

/// Most units one AOF-rewrite command carries, and the byte budget per
/// command, so no single rewritten command grows without bound.
const AOF_UNITS_PER_COMMAND: usize = 512;
const AOF_BYTES_PER_COMMAND: usize = 4 << 20;

pub static QUEUE_TYPE: RedisType = RedisType::new(
    "orcaqueue",
    RDB_ENCVER,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: Some(free_effort),
        unlink: None,
        copy: Some(copy),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    },
);

/// The server's process id, recorded at load: a different id means this is
/// a forked child (BGSAVE, BGREWRITEAOF, a full sync to a replica).
static MAIN_PID: AtomicU32 = AtomicU32::new(0);

/// Record the server's process id (called once, at load).
pub fn remember_main_process() {
    MAIN_PID.store(std::process::id(), Ordering::Relaxed);
}

fn in_forked_child() -> bool {
    let main = MAIN_PID.load(Ordering::Relaxed);
    main != 0 && main != std::process::id()
}

fn log_io(io: *mut raw::RedisModuleIO, msg: &str) {
    let text = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    if let Some(f) = unsafe { raw::RedisModule_LogIOError } {
        // SAFETY: valid IO handle from Redis; "%s" with a NUL-free C string.
        unsafe { f(io, c"warning".as_ptr(), c"%s".as_ptr(), text.as_ptr()) };
    }
}

fn save_buf(rdb: *mut raw::RedisModuleIO, bytes: &[u8]) {
    raw::save_slice(rdb, bytes);
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    let saved = guard::contain("rdb_save", || {
        // SAFETY: Redis passes the value it stored for this type.
        let q = unsafe { &*(value as *const Queue) };
        save_buf(rdb, &q.encode_header());
        raw::save_unsigned(rdb, q.unit_count() as u64);
        // Armed by the tests: a save cut short after its header.
        guard::inject("rdb_save");
        q.for_each_unit(|u| save_buf(rdb, u));
    });
    if saved.is_none() {
        if in_forked_child() {
            ffi::log_warning(
                "saving a queue failed (internal error): aborting this background save, the previous RDB stays",
            );
            std::process::abort();
        }
        ffi::log_warning(
            "saving a queue failed (internal error): the queue is saved marked as failed and will not load",
        );
        save_buf(rdb, SAVE_FAILED);
    }
}

fn load_queue(rdb: *mut raw::RedisModuleIO, encver: c_int) -> Result<Queue, String> {
    if !(1..=RDB_ENCVER).contains(&encver) {
        return Err(format!(
            "orcaqueue: RDB encoding version {encver} is newer than this module supports ({RDB_ENCVER}); upgrade the module"
        ));
    }
    let header = raw::load_string_buffer(rdb).map_err(|e| format!("orcaqueue: {e}"))?;
    let mut builder = QueueBuilder::new(header.as_ref()).map_err(|e| format!("orcaqueue: {e}"))?;
    let n = raw::load_unsigned(rdb).map_err(|e| format!("orcaqueue: {e}"))?;
    guard::inject("rdb_load");
    for _ in 0..n {
        let unit = raw::load_string_buffer(rdb).map_err(|e| format!("orcaqueue: {e}"))?;
        builder
            .add_unit(unit.as_ref())
            .map_err(|e| format!("orcaqueue: {e}"))?;
    }
    builder.finish().map_err(|e| format!("orcaqueue: {e}"))
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    match guard::contain("rdb_load", || load_queue(rdb, encver)) {
        Some(Ok(q)) => {
            // Leases and retries loaded with the queue must still come due.
            // SAFETY: the handle Redis passed to this callback.
            if let Some((db, name)) = unsafe { ffi::io_key(rdb) } {
                tracking::track(db, &name, q.next_deadline());
            }
            stats::queue_added(&q);
            Box::into_raw(Box::new(q)).cast::<c_void>()
        }
        Some(Err(msg)) => {
            log_io(rdb, &msg);
            ptr::null_mut()
        }
        None => {
            log_io(rdb, "orcaqueue: internal error while loading a queue");
            ptr::null_mut()
        }
    }
}

/// AOF rewrite without an RDB preamble: the queue is rebuilt by
/// `ORCA.IMPORT <key> <blob>` commands, each carrying the header and a batch
/// of whole units (see `ORCA.IMPORT` in docs/commands.md).
unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    let emit = |cmd: &std::ffi::CStr, blob: &[u8]| {
        if let Some(f) = unsafe { raw::RedisModule_EmitAOF } {
            // SAFETY: "sb" = RedisModuleString + (buffer, length).
            unsafe {
                f(
                    aof,
                    cmd.as_ptr(),
                    c"sb".as_ptr(),
                    key,
                    blob.as_ptr(),
                    blob.len(),
                )
            };
        }
    };
    let written = guard::contain("aof_rewrite", || {
        // SAFETY: Redis passes the value it stored for this type.
        let q = unsafe { &*(value as *const Queue) };
        let header = q.encode_header();
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut bytes = 0usize;
        let flush = |batch: &mut Vec<Vec<u8>>| {
            let blob = Queue::encode_parts(&header, batch.iter().map(|u| u.as_slice()));
            emit(c"ORCA.IMPORT", &blob);
            batch.clear();
        };
        let mut emitted = false;
        q.for_each_unit(|u| {
            bytes += u.len();
            batch.push(u.to_vec());
            if batch.len() >= AOF_UNITS_PER_COMMAND || bytes >= AOF_BYTES_PER_COMMAND {
                flush(&mut batch);
                bytes = 0;
                emitted = true;
            }
        });
        if !batch.is_empty() || !emitted {
            // An empty queue is still a key with settings: emit the header.
            flush(&mut batch);
        }
        // Armed by the tests: a rewrite that failed after writing.
        guard::inject("aof_rewrite");
    });
    if written.is_none() {
        ffi::log_warning("rewriting the AOF failed (internal error): the rewrite is aborted, the previous AOF stays");
        // A command Redis does not know makes it mark the rewrite failed
        // (its own error path); the partial file is discarded.
        emit(c"ORCA.REWRITE-FAILED", SAVE_FAILED);
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    guard::contain("mem_usage", || {
        guard::inject("mem_usage");
        // SAFETY: Redis passes the value it stored for this type.
        let q = unsafe { &*(value as *const Queue) };
        q.mem_usage()
    })
    .unwrap_or(0)
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    let (Some(add), Some(end)) = (unsafe { raw::RedisModule_DigestAddStringBuffer }, unsafe {
        raw::RedisModule_DigestEndSequence
    }) else {
        return;
    };
    let done = guard::contain("digest", || {
        // SAFETY: Redis passes the value it stored for this type.
        let q = unsafe { &*(value as *const Queue) };
        let header = q.encode_header();
        // SAFETY: valid digest handle; buffers live across each call.
        unsafe {
            add(md, header.as_ptr().cast(), header.len());
            end(md);
        }
        guard::inject("digest");
        q.for_each_unit(|u| unsafe {
            add(md, u.as_ptr().cast(), u.len());
            end(md);
        });
    });
    if done.is_none() {
        // A digest that cannot match a queue's.
        // SAFETY: as above.
        unsafe {
            add(md, SAVE_FAILED.as_ptr().cast(), SAVE_FAILED.len());
            end(md);
        }
    }
}

unsafe extern "C" fn free(value: *mut c_void) {
    if value.is_null() {
        return;
    }
    guard::contain("free", || {
        // SAFETY: the value was made by Box::into_raw of a Queue (set_value
        // or rdb_load/copy) and Redis frees it exactly once.
        let q = unsafe { Box::from_raw(value as *mut Queue) };
        stats::queue_removed(&q);
        guard::inject("free");
        drop(q);
    });
}

/// Lets Redis free big queues in the background (lazyfree) instead of
/// blocking: the effort is the number of jobs.
unsafe extern "C" fn free_effort(_key: *mut raw::RedisModuleString, value: *const c_void) -> usize {
    guard::contain("free_effort", || {
        guard::inject("free_effort");
        // SAFETY: Redis passes the value it stored for this type.
        let q = unsafe { &*(value as *const Queue) };
        q.len() + q.collation_count() + 1
    })
    .unwrap_or(usize::MAX)
}

/// `COPY`: a deep copy. Queues never share memory (collation names are
/// reference-counted inside one queue only), so each can be freed on its own
/// thread by lazyfree.
unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard::contain("copy", || {
        guard::inject("copy");
        // SAFETY: Redis passes the value it stored for this type.
        let q = unsafe { &*(value as *const Queue) };
        match q.deep_copy() {
            Ok(c) => {
                stats::queue_added(&c);
                Box::into_raw(Box::new(c)).cast::<c_void>()
            }
            Err(_) => ptr::null_mut(),
        }
    })
    .unwrap_or(ptr::null_mut())
}

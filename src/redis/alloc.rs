//! The global allocator: Redis's own allocator inside the server (so queues
//! count in `used_memory` and `maxmemory` applies), the system allocator
//! everywhere else (unit tests, property tests, benches).
//!
//! The choice is made per call from whether the module API is initialised.
//! `RedisModule_Alloc` is set by `RedisModule_Init`, the first thing
//! `RedisModule_OnLoad` does, before the module allocates anything, and it is
//! never unset; outside Redis it is never set. So every pointer is freed by
//! the allocator that made it.

use std::alloc::{GlobalAlloc, Layout, System};

use redis_module::alloc::RedisAlloc;
use redis_module::raw;

pub struct OrcaAlloc;

#[inline]
fn in_redis() -> bool {
    // SAFETY: a plain read of a function pointer that is written once, by
    // RedisModule_Init on the main thread, before any allocation of ours.
    unsafe { (*std::ptr::addr_of!(raw::RedisModule_Alloc)).is_some() }
}

unsafe impl GlobalAlloc for OrcaAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe {
            if in_redis() {
                RedisAlloc.alloc(layout)
            } else {
                System.alloc(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees; see the module doc
        // for why the same allocator made `ptr`.
        unsafe {
            if in_redis() {
                RedisAlloc.dealloc(ptr, layout)
            } else {
                System.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe {
            if in_redis() {
                RedisAlloc.realloc(ptr, layout, new_size)
            } else {
                System.realloc(ptr, layout, new_size)
            }
        }
    }
}

//! The Redis adapter: module registration, commands, the data type.
//!
//! Layers, each using only those below it (no import loops):
//! - `ffi` raw module API calls as safe functions; `alloc` the allocator.
//! - `guard` the one panic guard; `hooks` the C entry points (commands,
//!   blocked clients, command filter, server events, INFO), which run the
//!   functions handed to them inside the guard; `datatype` the type callbacks.
//! - `errors` (error replies: a code, its fields, one clean line), `reply`,
//!   `args`, `module_config`, `stats`, `tracking` (queues with pending
//!   deadlines); `access` opens keys as queues; `keyspec` where each
//!   command's keys are (declared to Redis, found as Redis finds them).
//! - The commands: `jobs`, `pop`, `worker`, `inspect`, `admin`, `gates`; `timer`
//!   ticks due queues; `commands` is the command table.
//!
//! `unsafe` lives only in `alloc.rs`, `ffi.rs`, `hooks.rs` and
//! `datatype.rs`, the files that touch the module API directly.

pub mod access;
pub mod admin;
pub mod alloc;
pub mod args;
pub mod commands;
pub mod datatype;
pub mod errors;
pub mod ffi;
pub mod finish;
pub mod gates;
pub mod guard;
pub mod hooks;
pub mod inspect;
pub mod jobs;
pub mod keyspec;
pub mod mack;
pub mod module_config;
pub mod pop;
pub mod reply;
pub mod stats;
pub mod timer;
pub mod tracking;
pub mod worker;

use redis_module::{Context, RedisString, Status};

pub fn init(ctx: &Context, _args: &[RedisString]) -> Status {
    ctx.set_module_options(redis_module::raw::ModuleOptions::HANDLE_IO_ERRORS);
    datatype::remember_main_process();
    guard::arm_from_setting();
    match commands::register(ctx) {
        Ok(warnings) => {
            for w in warnings {
                ffi::log_warning(&w);
            }
        }
        Err(e) => {
            ffi::log_warning(&format!("cannot load: {e}"));
            return Status::Err;
        }
    }
    timer::start(ctx);
    if !hooks::on_info(ctx, stats::info) {
        ffi::log_warning("could not register INFO orca");
    }
    if !hooks::watch_commands(ctx, timer::on_command) {
        ffi::log_warning("could not watch commands (lease timer may run during pauses)");
    }
    if !hooks::on_swapdb(ctx, tracking::swap_dbs) {
        ffi::log_warning("could not subscribe to SWAPDB events");
    }
    Status::Ok
}

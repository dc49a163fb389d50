//! Access to queues for the commands: open a key as a queue for reading or
//! writing (keeping `INFO orca` counts and the timer's tracking current),
//! turn core errors into replies, and the checks every write applies to
//! client input.

use redis_module::{Context, RedisError, RedisString};

use super::datatype::QUEUE_TYPE;
use super::errors::coded;
use super::ffi::{self, selected_db, Arg, Kw};
use super::{module_config, stats, tracking};
use crate::core::compact::MOVES_PER_WRITE;
use crate::core::config::ConfigLimits;
use crate::core::error::ErrorCode;
use crate::core::{decode_key, JobKey, Queue, QueueError, Settings, TickReport};

pub use super::errors::core_err;

/// Refuse a payload over `orca.max-payload-bytes`: a config (`BADCONFIG`,
/// as every refused config) or a result (`TOOLARGE`).
pub fn check_payload(len: usize, what: Payload) -> Result<(), RedisError> {
    let max = module_config::max_payload_bytes();
    if len > max {
        let (code, what) = match what {
            Payload::Config => (ErrorCode::BadConfig, "config"),
            Payload::Result => (ErrorCode::TooLarge, "result"),
        };
        return Err(coded(
            code,
            &[],
            format!("{what} is {len} bytes; the limit is {max} (orca.max-payload-bytes)"),
        ));
    }
    Ok(())
}

/// What `check_payload` checks.
#[derive(Clone, Copy)]
pub enum Payload {
    Config,
    Result,
}

/// Config limits for client input; none for what the master or the AOF
/// replays (the master already applied its own limits).
pub fn limits_for(client: bool) -> ConfigLimits {
    if client {
        module_config::config_limits()
    } else {
        ConfigLimits::NONE
    }
}

/// Refuse a new job when the queue holds `orca.max-queue-length` waiting
/// jobs (queued, held and delayed).
pub fn check_room(q: &Queue, key: &JobKey) -> Result<(), RedisError> {
    let max = module_config::max_queue_length();
    let (queued, delayed, _, _) = q.state_counts();
    let waiting = queued + q.held_len() + delayed;
    if !q.contains(key) && waiting >= max {
        return Err(coded(
            ErrorCode::QueueFull,
            &[],
            format!("queue is full ({waiting} waiting jobs; orca.max-queue-length is {max})"),
        ));
    }
    Ok(())
}

/// A job key given by a client; `None` if it cannot be an orca key.
pub fn job_key_arg(arg: &RedisString) -> Option<JobKey> {
    decode_key(arg.as_slice())
}

/// A job key given by a client, or `e` if it cannot be an orca key, after
/// the type check a well-formed key would get: a malformed key on a key
/// holding another type answers `WRONGTYPE` too.
pub fn job_key_or(
    ctx: &Context,
    name: &RedisString,
    arg: &RedisString,
    e: QueueError,
) -> Result<JobKey, RedisError> {
    match job_key_arg(arg) {
        Some(k) => Ok(k),
        None => {
            read_queue(ctx, name, |_| Ok(()))?;
            Err(core_err(e))
        }
    }
}

fn track(ctx: &Context, name: &RedisString, q: &Queue) {
    tracking::track(selected_db(ctx), name.as_slice(), q.next_deadline());
}

/// Record moves after a write that took the queue from `before` to
/// `after` jobs: a few always, and two per job removed, so a write that
/// removes many (POP COUNT 1000, MPOP, a TICK expiring a backlog) keeps the
/// shrinks in step with the drain (docs/design.md, "Memory after a drain").
fn compaction_budget(before: usize, after: usize) -> usize {
    MOVES_PER_WRITE + 2 * before.saturating_sub(after)
}

/// Run `op` on the queue at `name`, creating it (with the module's default
/// settings) if the key is empty and `create` is set. A new queue is stored
/// only if `op` succeeds, so a failed command leaves no empty key behind.
/// Returns op's value (`None`: no queue) and, for a queue just created, the
/// settings it was created with (to replicate before the command).
pub fn write_queue<T>(
    ctx: &Context,
    name: &RedisString,
    create: bool,
    op: impl FnOnce(&mut Queue) -> Result<T, RedisError>,
) -> Result<(Option<T>, Option<Settings>), RedisError> {
    let key = ctx.open_key_writable(name);
    match key.get_value::<Queue>(&QUEUE_TYPE)? {
        Some(q) => {
            let before = stats::counts(q);
            let len = q.len();
            let v = op(q);
            if v.is_ok() {
                q.maintain(compaction_budget(len, q.len()));
            }
            stats::changed(before, stats::counts(q));
            let v = v?;
            track(ctx, name, q);
            Ok((Some(v), None))
        }
        None if create => {
            let created = module_config::queue_defaults();
            let mut q = Queue::with_settings(created);
            let v = op(&mut q)?;
            stats::queue_added(&q);
            track(ctx, name, &q);
            key.set_value(&QUEUE_TYPE, q)?;
            Ok((Some(v), Some(created)))
        }
        None => Ok((None, None)),
    }
}

/// Run `op` on the queue at `name` for reading; `None` if there is no key.
pub fn read_queue<T>(
    ctx: &Context,
    name: &RedisString,
    op: impl FnOnce(&Queue) -> Result<T, RedisError>,
) -> Result<Option<T>, RedisError> {
    let key = ctx.open_key(name);
    match key.get_value::<Queue>(&QUEUE_TYPE)? {
        Some(q) => Ok(Some(op(q)?)),
        None => Ok(None),
    }
}

/// The timer's access: run `tick` on the queue at `name` (in the selected
/// db), keeping the counts; its report and the queue's next deadline, or
/// `None` if the key holds no queue.
pub fn open_for_tick(
    ctx: &Context,
    name: &RedisString,
    tick: impl FnOnce(&mut Queue) -> TickReport,
) -> Option<(TickReport, Option<i64>)> {
    let key = ctx.open_key_writable(name);
    let q = key.get_value::<Queue>(&QUEUE_TYPE).ok().flatten()?;
    let before = stats::counts(q);
    let len = q.len();
    let report = tick(q);
    q.maintain(compaction_budget(len, q.len()));
    stats::changed(before, stats::counts(q));
    Some((report, q.next_deadline()))
}

/// A queue created by a write replicates the settings it was created with
/// first (the defaults are module settings, which a replica or the AOF's
/// next reader may have set differently).
pub fn replicate_created_settings(ctx: &Context, name: &RedisString, created: Option<Settings>) {
    if let Some(s) = created {
        replicate_settings(ctx, name, &s);
    }
}

/// Replicate `ORCA.SETTINGS <queue>` with every setting pinned.
pub fn replicate_settings(ctx: &Context, name: &RedisString, s: &Settings) {
    let a = s.autodelay;
    ffi::replicate(
        ctx,
        c"ORCA.SETTINGS",
        &[
            Arg::Client(name),
            Arg::Keyword(Kw::Order),
            Arg::Bytes(s.order.name().as_bytes()),
            Arg::Bytes(b"LIFETIME"),
            Arg::Int(s.lifetime),
            Arg::Bytes(b"AUTODELAY"),
            Arg::Int(a.window),
            Arg::Int(a.step),
            Arg::Bytes(b"CAP"),
            Arg::Int(a.cap),
            Arg::Bytes(b"MAXRUNNING"),
            Arg::Int(s.max_running as i64),
            Arg::Bytes(b"DEADMAX"),
            Arg::Int(s.dead_max as i64),
            Arg::Bytes(b"DEADTTL"),
            Arg::Int(s.dead_ttl),
            Arg::Bytes(b"RESULTMAX"),
            Arg::Int(s.result_max as i64),
        ],
    );
}

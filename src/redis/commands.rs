//! The `ORCA.*` commands: parse arguments, call the core, reply, replicate
//! and notify. No `unsafe` here; no logic beyond the adapter's job.
//!
//! Replication rule: a command that reads the clock or a module setting
//! replicates a form with that value pinned (`NOW <ms>`, `BUFFER <ms>`,
//! `ORCA.SETTINGS ... ORDER`), so replicas and AOF replay reach the same state.

use std::borrow::Cow;

use redis_module::{Context, RedisError, RedisString};

use super::args::{err, is_kw, parse_ms, Options};
use super::datatype::QUEUE_TYPE;
use super::ffi::{self, now_ms, signal_ready, Arg, Kw};
use super::reply::{self, Fields, Reply, Val};
use super::settings;
use super::CmdResult;
use super::{stats, timer};
use crate::core::config::parse_config_limited;
use crate::core::{decode_key, JobInfo, JobKey, Move, Order, Queue, QueueError, State};

/// Refuse a payload (config or result) over `orca.max-payload-bytes`.
pub(crate) fn check_payload(len: usize, what: &str) -> Result<(), RedisError> {
    let max = settings::max_payload_bytes();
    if len > max {
        return Err(err(format!(
            "{what} is {len} bytes; the limit is {max} (orca.max-payload-bytes)"
        )));
    }
    Ok(())
}

/// Config limits for client input; none for what the master or the AOF
/// replays (the master already applied its own limits).
fn limits_for(client: bool) -> crate::core::config::ConfigLimits {
    if client {
        settings::config_limits()
    } else {
        crate::core::config::ConfigLimits::NONE
    }
}

/// Refuse a new job when the queue holds `orca.max-queue-length` waiting jobs.
fn check_room(q: &Queue, key: &JobKey) -> Result<(), RedisError> {
    let max = settings::max_queue_length();
    let (queued, delayed, _, _) = q.state_counts();
    if !q.contains(key) && queued + delayed >= max {
        return Err(err(format!(
            "queue is full ({} waiting jobs; orca.max-queue-length is {max})",
            queued + delayed
        )));
    }
    Ok(())
}

pub(crate) fn core_err(e: QueueError) -> RedisError {
    err(e.to_string())
}

pub(crate) fn notify(ctx: &Context, event: &std::ffi::CStr, key: &RedisString) {
    ffi::notify(ctx, event, key);
}

fn order_arg(arg: &RedisString) -> Result<Order, RedisError> {
    if is_kw(arg, "LIFO") {
        Ok(Order::Lifo)
    } else if is_kw(arg, "FIFO") {
        Ok(Order::Fifo)
    } else {
        Err(err("order must be LIFO or FIFO"))
    }
}

/// Run `op` on the queue at `name`, creating it (with the default order) if
/// the key is empty. A new queue is stored only if `op` succeeds, so a failed
/// command leaves no empty key behind. Returns op's value and whether the
/// queue was created.
pub(crate) fn write_queue<T>(
    ctx: &Context,
    name: &RedisString,
    create: bool,
    op: impl FnOnce(&mut Queue) -> Result<T, RedisError>,
) -> Result<(Option<T>, Option<Order>), RedisError> {
    let key = ctx.open_key_writable(name);
    match key.get_value::<Queue>(&QUEUE_TYPE)? {
        Some(q) => {
            let before = stats::counts(q);
            let v = op(q);
            stats::changed(before, stats::counts(q));
            let v = v?;
            timer::track(ctx, name, q);
            Ok((Some(v), None))
        }
        None if create => {
            let mut q = Queue::new(settings::default_order());
            let v = op(&mut q)?;
            let order = q.order();
            stats::queue_added(&q);
            timer::track(ctx, name, &q);
            key.set_value(&QUEUE_TYPE, q)?;
            Ok((Some(v), Some(order)))
        }
        None => Ok((None, None)),
    }
}

/// Run `op` on the queue at `name` for reading; `None` if there is no key.
pub(crate) fn read_queue<T>(
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

pub(crate) fn replicate_created_order(ctx: &Context, name: &RedisString, order: Option<Order>) {
    if let Some(order) = order {
        ffi::replicate(
            ctx,
            c"ORCA.SETTINGS",
            &[
                Arg::S(name),
                Arg::K(Kw::Order),
                Arg::B(order.name().as_bytes()),
            ],
        );
    }
}

/// A job key given by a client; `None` if it cannot be an orca key.
pub(crate) fn job_key_arg(arg: &RedisString) -> Option<JobKey> {
    decode_key(arg.as_slice())
}

#[derive(Clone, Copy)]
enum PutKind {
    Enqueue,
    Immediate,
}

fn put(ctx: &Context, args: Vec<RedisString>, kind: PutKind) -> CmdResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    let (name, json) = (&args[1], &args[2]);
    let opts = Options::parse(&args[3..], &["NOW"])?;
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let client = !super::from_master_or_aof(ctx);
    if client {
        check_payload(json.len(), "config")?;
    }
    let cfg = parse_config_limited(json.as_slice(), &limits_for(client)).map_err(core_err)?;
    let payload = json.as_slice();
    let (job, order) = write_queue(ctx, name, true, |q| {
        if client {
            check_room(q, &cfg.job_key)?;
        }
        let (info, created) = match kind {
            PutKind::Enqueue => q.enqueue(&cfg, payload, now),
            PutKind::Immediate => q.put_immediate(&cfg, payload, now),
        }
        .map_err(core_err)?;
        Ok((detach(&info, cfg.collation.as_deref()), created))
    })?;
    let (info, created) = job.ok_or_else(|| err("queue missing"))?;
    replicate_created_order(ctx, name, order);
    let cmd = match kind {
        PutKind::Enqueue => c"ORCA.ENQUEUE",
        PutKind::Immediate => c"ORCA.IMMEDIATE",
    };
    ffi::replicate(
        ctx,
        cmd,
        &[Arg::S(name), Arg::S(json), Arg::K(Kw::Now), Arg::I(now)],
    );
    if created {
        stats::add(&stats::ENQUEUED, 1);
    }
    let event = match (kind, created) {
        (_, false) => c"orca.update",
        (PutKind::Enqueue, true) => c"orca.enqueue",
        (PutKind::Immediate, true) => c"orca.immediate",
    };
    notify(ctx, event, name);
    signal_ready(ctx, name);
    // Last: nothing may fail or reply after this.
    reply::write_job(
        &mut ffi::Client::new(ctx),
        &info,
        false,
        &mut [("created", Val::Int(created as i64))],
    );
    Ok(Reply::Sent)
}

/// The reply's view of a job just put, borrowing the client's arguments
/// instead of the queue (which the reply outlives): the collation is the
/// config's unless the job kept an earlier one (then copied). The payload is
/// not part of this reply (`reply::job_meta`).
fn detach<'a>(info: &JobInfo<'_>, collation: Option<&'a str>) -> JobInfo<'a> {
    JobInfo {
        key: info.key,
        collation: info.collation.as_deref().map(|c| match collation {
            Some(given) if given == c => Cow::Borrowed(given),
            _ => Cow::Owned(c.to_owned()),
        }),
        immediate: info.immediate,
        nonce: info.nonce,
        created_at: info.created_at,
        release_at: info.release_at,
        attempts: info.attempts,
        payload: Cow::Borrowed(&[]),
    }
}

/// `ORCA.ENQUEUE <queue> <config-json> [NOW <ms>]`
pub fn enqueue(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    put(ctx, args, PutKind::Enqueue)
}

/// `ORCA.IMMEDIATE <queue> <config-json> [NOW <ms>]`
pub fn immediate(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    put(ctx, args, PutKind::Immediate)
}

/// `ORCA.REENQUEUE <queue> <config-json> <created_at-ms>`
pub fn reenqueue(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() != 4 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let created_at = parse_ms(&args[3], "created_at")?;
    let client = !super::from_master_or_aof(ctx);
    if client {
        check_payload(args[2].len(), "config")?;
    }
    let cfg = parse_config_limited(args[2].as_slice(), &limits_for(client)).map_err(core_err)?;
    let payload = args[2].as_slice();
    let (reply, order) = write_queue(ctx, name, true, |q| {
        if client {
            check_room(q, &cfg.job_key)?;
        }
        let (info, created) = q
            .put_immediate(&cfg, payload, created_at)
            .map_err(core_err)?;
        Ok(reply::job_meta(&info)
            .int("created", created as i64)
            .build())
    })?;
    replicate_created_order(ctx, name, order);
    ctx.replicate_verbatim();
    notify(ctx, c"orca.reenqueue", name);
    signal_ready(ctx, name);
    reply.ok_or_else(|| err("queue missing"))
}

/// `ORCA.MOVE <queue> <orca-key> RELEASE|DELAY [NOW <ms>] [BUFFER <ms>]`
pub fn move_job(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let release = if is_kw(&args[3], "RELEASE") {
        true
    } else if is_kw(&args[3], "DELAY") {
        false
    } else {
        return Err(err("move must be RELEASE or DELAY"));
    };
    let opts = Options::parse(&args[4..], &["NOW", "BUFFER"])?;
    if release && opts.get("BUFFER").is_some() {
        return Err(err("BUFFER applies to DELAY only"));
    }
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let buffer = opts
        .ms("BUFFER")?
        .unwrap_or_else(settings::move_to_back_buffer);
    let key = job_key_arg(&args[2]).ok_or_else(|| core_err(QueueError::NoSuchJob))?;
    let how = if release {
        Move::Release
    } else {
        Move::Delay { buffer }
    };
    let (reply, _) = write_queue(ctx, name, false, |q| {
        let info = q.move_job(&key, how, now).map_err(core_err)?;
        Ok(reply::job_meta(&info).build())
    })?;
    let reply = reply.ok_or_else(|| core_err(QueueError::NoSuchJob))?;
    let (pin_name, pin_value) = if release {
        (Kw::Now, now)
    } else {
        (Kw::Buffer, buffer)
    };
    ffi::replicate(
        ctx,
        c"ORCA.MOVE",
        &[
            Arg::S(name),
            Arg::S(&args[2]),
            Arg::S(&args[3]),
            Arg::K(pin_name),
            Arg::I(pin_value),
        ],
    );
    notify(
        ctx,
        if release {
            c"orca.release"
        } else {
            c"orca.delay"
        },
        name,
    );
    Ok(reply)
}

/// `ORCA.DELETE <queue> <orca-key>`
pub fn delete(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let Some(key) = job_key_arg(&args[2]) else {
        // Not an orca key, so certainly not in the queue; still a type check.
        read_queue(ctx, name, |_| Ok(()))?;
        return Ok(Reply::Int(0));
    };
    let (removed, _) = write_queue(ctx, name, false, |q| q.cancel(&key).map_err(core_err))?;
    let removed = removed.unwrap_or(false);
    if removed {
        ctx.replicate_verbatim();
        notify(ctx, c"orca.delete", name);
    }
    Ok(Reply::Int(removed as i64))
}

/// `ORCA.LEN <queue>`
pub fn len(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let n = read_queue(ctx, &args[1], |q| Ok(q.len()))?.unwrap_or(0);
    Ok(Reply::Int(n as i64))
}

/// `ORCA.CHECK <queue>`
pub fn check(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    read_queue(ctx, &args[1], |q| {
        q.check()
            .map_err(|e| RedisError::String(format!("ERR queue invariant broken: {e}")))
    })?;
    Ok(Reply::Status(c"OK"))
}

/// `ORCA.STATUS <queue> <orca-key>`
pub fn status(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let key = job_key_arg(&args[2]);
    let reply = read_queue(ctx, &args[1], |q| {
        let Some(key) = key else { return Ok(None) };
        let states = q.states(&key).map_err(core_err)?;
        // The job that will run next for this key: queued or delayed first,
        // then a running delivery, then the dead entry. Every lease on the
        // key is listed under `leases`.
        let mut main: Option<Fields> = None;
        let mut leases = Vec::new();
        for st in &states {
            match st {
                State::Queued(info, pos) => {
                    main.get_or_insert_with(|| {
                        reply::job(info)
                            .str("state", "queued")
                            .int("position", *pos as i64)
                    });
                }
                State::Delayed(k, d) => {
                    main.get_or_insert_with(|| {
                        reply::job(&d.job.info(*k, d.retry_at))
                            .str("state", "delayed")
                            .int("retry_at", d.retry_at)
                    });
                }
                State::Leased(k, token, l) => {
                    leases.push(
                        Fields::new()
                            .str("lease", token.to_string())
                            .int("deadline", l.deadline)
                            .int("attempts", l.job.attempts as i64)
                            .build(),
                    );
                    main.get_or_insert_with(|| {
                        reply::job(&l.job.info(*k, l.deadline))
                            .str("state", "leased")
                            .str("lease", token.to_string())
                            .int("deadline", l.deadline)
                    });
                }
                State::Dead(k, d) => {
                    main.get_or_insert_with(|| {
                        reply::job(&d.job.info(*k, d.died_at))
                            .str("state", "dead")
                            .int("died_at", d.died_at)
                            .str("cause", d.cause.name())
                    });
                }
            }
        }
        Ok(main.map(|m| m.value("leases", Reply::Array(leases)).build()))
    })?;
    Ok(reply.flatten().unwrap_or(Reply::Null))
}

fn settings_reply(q: &Queue) -> Reply {
    Fields::new()
        .str("order", q.order().name())
        .int("jobs", q.len() as i64)
        .int("collations", q.collation_count() as i64)
        .build()
}

/// `ORCA.SETTINGS <queue> [ORDER LIFO|FIFO]`
pub fn queue_settings(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let opts = Options::parse(&args[2..], &["ORDER"])?;
    let order = opts.get("ORDER").map(order_arg).transpose()?;
    match order {
        None => Ok(read_queue(ctx, name, |q| Ok(settings_reply(q)))?
            .unwrap_or_else(|| settings_reply(&Queue::new(settings::default_order())))),
        Some(order) => {
            let (reply, _) = write_queue(ctx, name, true, |q| {
                q.set_order(order);
                Ok(settings_reply(q))
            })?;
            ctx.replicate_verbatim();
            notify(ctx, c"orca.settings", name);
            reply.ok_or_else(|| err("queue missing"))
        }
    }
}

/// `ORCA.IMPORT <queue> <blob>`: adds the units of a serialized queue (the
/// form AOF rewrite emits). Refused whole if the blob is malformed, violates
/// an invariant, or collides with what the queue holds.
pub fn import(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let incoming = Queue::decode(args[2].as_slice()).map_err(core_err)?;
    let key = ctx.open_key_writable(name);
    let n = incoming.len();
    let existing = key
        .get_value::<Queue>(&QUEUE_TYPE)?
        .map(|q| q.state_counts())
        .map(|c| c.0 + c.1)
        .unwrap_or(0);
    let (iq, id, _, _) = incoming.state_counts();
    if !super::from_master_or_aof(ctx) && existing + iq + id > settings::max_queue_length() {
        return Err(err("import would exceed orca.max-queue-length"));
    }
    match key.get_value::<Queue>(&QUEUE_TYPE)? {
        Some(q) => {
            let before = stats::counts(q);
            q.absorb(incoming).map_err(core_err)?;
            stats::changed(before, stats::counts(q));
            timer::track(ctx, name, q);
        }
        None => {
            stats::queue_added(&incoming);
            timer::track(ctx, name, &incoming);
            key.set_value(&QUEUE_TYPE, incoming)?;
        }
    }
    ctx.replicate_verbatim();
    notify(ctx, c"orca.import", name);
    signal_ready(ctx, name);
    Ok(Reply::Int(n as i64))
}

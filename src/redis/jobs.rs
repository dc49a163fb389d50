//! The commands that put, move and delete jobs: `ORCA.ENQUEUE`,
//! `ORCA.IMMEDIATE`, `ORCA.REENQUEUE`, `ORCA.MOVE`, `ORCA.DELETE`.
//!
//! Replication rule: a command that reads the clock or a module setting
//! replicates a form with that value pinned (`NOW <ms>`, `BUFFER <ms>`,
//! `ORCA.SETTINGS ... ORDER`), so replicas and AOF replay reach the same state.

use std::borrow::Cow;

use redis_module::{Context, RedisError, RedisString};

use super::access::{
    check_payload, check_room, core_err, job_key_arg, job_key_or, limits_for, read_queue,
    replicate_created_settings, write_queue, Payload,
};
use super::args::{err, from_master_or_aof, is_kw, parse_ms, Options};
use super::errors::queue_missing;
use super::ffi::{self, now_ms, signal_ready, Arg, Kw};
use super::reply::{CmdResult, JobReply, Reply, Val};
use super::{module_config, stats};
use crate::core::config::parse_config_limited;
use crate::core::{JobConfig, JobInfo, Move, Put, QueueError, Settings};

#[derive(Clone, Copy)]
enum PutKind {
    Enqueue,
    Immediate,
}

/// Parse a client's (or the master's) config argument.
pub fn config_arg(ctx: &Context, json: &RedisString) -> Result<(JobConfig, bool), RedisError> {
    let client = !from_master_or_aof(ctx);
    if client {
        check_payload(json.len(), Payload::Config)?;
    }
    let cfg = parse_config_limited(json.as_slice(), &limits_for(client)).map_err(core_err)?;
    Ok((cfg, client))
}

/// A put done, to replicate and publish once its command succeeded.
pub struct Putted {
    pub reply: Reply<'static>,
    /// The settings of the queue it created (replicated first).
    pub created_with: Option<Settings>,
    created: bool,
    held: bool,
    kind: PutKind,
}

/// Put the parsed config `cfg` (from `json`) into the queue `name` at
/// `now`, creating the queue if missing; nothing changes on an error.
fn put_into(
    ctx: &Context,
    name: &RedisString,
    mut cfg: JobConfig,
    client: bool,
    json: &RedisString,
    now: i64,
    kind: PutKind,
) -> Result<Putted, RedisError> {
    let payload = json.as_slice();
    let (job, created_with) = write_queue(ctx, name, true, |q| {
        if client {
            check_room(q, &cfg.job_key)?;
        }
        let key = cfg.job_key;
        let (info, put) = match kind {
            PutKind::Enqueue => q.enqueue(&cfg, payload, now),
            PutKind::Immediate => q.put_immediate(&cfg, payload, now),
        }
        .map_err(core_err)?;
        let info = detach(&info, cfg.collation.take());
        let autodelay = q.settings().autodelay.on();
        let gate = put
            .held
            .then(|| q.held_gate_of(&key).map(|g| g.to_vec()))
            .flatten();
        Ok((info, put, autodelay, gate))
    })?;
    let (info, put, autodelay, gate) = job.ok_or_else(queue_missing)?;
    Ok(Putted {
        reply: write_reply(info, put, autodelay, gate),
        created_with,
        created: put.created,
        held: put.held,
        kind,
    })
}

/// `ORCA.ENQUEUE <name> <json>` at `now` inside another command (the
/// successor of a hand-off): reply, replication and events are the
/// caller's (`publish_put` for the events).
pub fn enqueue_into(
    ctx: &Context,
    name: &RedisString,
    cfg: JobConfig,
    client: bool,
    json: &RedisString,
    now: i64,
) -> Result<Putted, RedisError> {
    put_into(ctx, name, cfg, client, json, now, PutKind::Enqueue)
}

/// Counts, the keyspace event and the wake-up of a put.
pub fn publish_put(ctx: &Context, name: &RedisString, p: &Putted) {
    if p.created {
        stats::add(&stats::ENQUEUED, 1);
    }
    let event = match (p.kind, p.created, p.held) {
        (_, false, _) => c"orca.update",
        (_, true, true) => c"orca.held",
        (PutKind::Enqueue, true, false) => c"orca.enqueue",
        (PutKind::Immediate, true, false) => c"orca.immediate",
    };
    ffi::notify(ctx, event, name);
    if !p.held {
        signal_ready(ctx, name);
    }
}

fn put<'a>(ctx: &Context, args: &'a [RedisString], kind: PutKind) -> CmdResult<'a> {
    let [_, name, json, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let opts = Options::parse(rest, &["NOW"])?;
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let (cfg, client) = config_arg(ctx, json)?;
    let p = put_into(ctx, name, cfg, client, json, now, kind)?;
    replicate_created_settings(ctx, name, p.created_with);
    let cmd = match kind {
        PutKind::Enqueue => c"ORCA.ENQUEUE",
        PutKind::Immediate => c"ORCA.IMMEDIATE",
    };
    ffi::replicate(
        ctx,
        cmd,
        &[
            Arg::Client(name),
            Arg::Client(json),
            Arg::Keyword(Kw::Now),
            Arg::Int(now),
        ],
    );
    publish_put(ctx, name, &p);
    Ok(p.reply)
}

/// The write reply of a put: the job reply without payload, `created`,
/// `delay` when the queue has an auto delay, `state` and `gate` when the job
/// is held.
fn write_reply<'a>(
    info: JobInfo<'a>,
    put: Put,
    autodelay: bool,
    gate: Option<Vec<u8>>,
) -> Reply<'a> {
    let mut r = JobReply::meta(info).with("created", Val::Int(put.created as i64));
    if autodelay {
        r = r.with("delay", Val::Int(put.delay));
    }
    if let Some(g) = gate {
        r = r
            .with("state", Val::Bytes(b"held"))
            .with("gate", Val::Owned(g));
    }
    r.reply()
}

/// The reply's view of a job just put, owning what it needs instead of
/// borrowing the queue (which the reply outlives): the collation is the
/// config's own string unless the job kept an earlier one (then copied).
/// The payload is not part of the write reply.
fn detach(info: &JobInfo<'_>, given: Option<String>) -> JobInfo<'static> {
    JobInfo {
        key: info.key,
        collation: info.collation.as_deref().map(|c| match given {
            Some(g) if g == c => Cow::Owned(g),
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
pub fn enqueue<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    put(ctx, args, PutKind::Enqueue)
}

/// `ORCA.IMMEDIATE <queue> <config-json> [NOW <ms>]`
pub fn immediate<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    put(ctx, args, PutKind::Immediate)
}

/// `ORCA.REENQUEUE <queue> <config-json> <created_at-ms>`
pub fn reenqueue<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, json, created_at] = args else {
        return Err(RedisError::WrongArity);
    };
    let created_at = parse_ms(created_at, "created_at")?;
    let (cfg, client) = config_arg(ctx, json)?;
    let payload = json.as_slice();
    let (reply, created_with) = write_queue(ctx, name, true, |q| {
        if client {
            check_room(q, &cfg.job_key)?;
        }
        let (info, put) = q
            .put_immediate(&cfg, payload, created_at)
            .map_err(core_err)?;
        let info = detach(&info, None);
        let autodelay = q.settings().autodelay.on();
        let gate = put
            .held
            .then(|| q.held_gate_of(&cfg.job_key).map(|g| g.to_vec()))
            .flatten();
        Ok((write_reply(info, put, autodelay, gate), put.held))
    })?;
    let (reply, held) = reply.ok_or_else(|| err("queue missing"))?;
    replicate_created_settings(ctx, name, created_with);
    ctx.replicate_verbatim();
    ffi::notify(ctx, c"orca.reenqueue", name);
    if !held {
        signal_ready(ctx, name);
    }
    Ok(reply)
}

/// `ORCA.MOVE <queue> <orca-key> RELEASE|DELAY [NOW <ms>] [BUFFER <ms>]`
pub fn move_job<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, key_arg, how_arg, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let release = if is_kw(how_arg, "RELEASE") {
        true
    } else if is_kw(how_arg, "DELAY") {
        false
    } else {
        return Err(err("move must be RELEASE or DELAY"));
    };
    let opts = Options::parse(rest, &["NOW", "BUFFER"])?;
    if release && opts.get("BUFFER").is_some() {
        return Err(err("BUFFER applies to DELAY only"));
    }
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let buffer = opts
        .ms("BUFFER")?
        .unwrap_or_else(module_config::move_to_back_buffer);
    let key = job_key_or(ctx, name, key_arg, QueueError::NoSuchJob)?;
    let how = if release {
        Move::Release
    } else {
        Move::Delay { buffer }
    };
    let (reply, _) = write_queue(ctx, name, false, |q| {
        let info = q.move_job(&key, how, now).map_err(core_err)?;
        Ok(JobReply::meta(detach(&info, None)).reply())
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
            Arg::Client(name),
            Arg::Client(key_arg),
            Arg::Client(how_arg),
            Arg::Keyword(pin_name),
            Arg::Int(pin_value),
        ],
    );
    let event = if release {
        c"orca.release"
    } else {
        c"orca.delay"
    };
    ffi::notify(ctx, event, name);
    Ok(reply)
}

/// `ORCA.DELETE <queue> <orca-key>`
pub fn delete<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, key_arg] = args else {
        return Err(RedisError::WrongArity);
    };
    let Some(key) = job_key_arg(key_arg) else {
        // Not an orca key, so certainly not in the queue; still a type check.
        read_queue(ctx, name, |_| Ok(()))?;
        return Ok(Reply::Int(0));
    };
    let (removed, _) = write_queue(ctx, name, false, |q| {
        let removed = q.cancel(&key).map_err(core_err)?;
        Ok((removed, q.take_woken()))
    })?;
    let (removed, woken) = removed.unwrap_or((false, false));
    if removed {
        ctx.replicate_verbatim();
        ffi::notify(ctx, c"orca.delete", name);
    }
    if woken {
        // A cancelled lease let a capped collation through.
        signal_ready(ctx, name);
    }
    Ok(Reply::Int(removed as i64))
}

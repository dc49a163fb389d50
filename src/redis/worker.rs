//! Worker commands besides POP: `ORCA.ACK`, `ORCA.NACK`, `ORCA.EXTEND`,
//! `ORCA.RESULT`, `ORCA.DEAD`, `ORCA.TICK`.
//!
//! Every one that reads the clock or a setting that changes the outcome
//! replicates with it pinned (`NOW`, `MAXATTEMPTS`, `DELAY`, `TTL`).

use std::borrow::Cow;

use redis_module::{Context, RedisError, RedisString};

use super::access::{
    check_payload, core_err, job_key_arg, job_key_or, read_queue, replicate_created_settings,
    write_queue, Payload,
};
use super::args::{
    check_pins, err, format, from_master_or_aof, is_kw, max_attempts, page_limit, parse_int,
    parse_ms, worker, Options,
};
use super::ffi::{self, now_ms, signal_ready, Arg, Kw};
use super::finish;
use super::jobs::{config_arg, enqueue_into, publish_put, Putted};
use super::pop::{take, Next, PopArgs};
use super::reply::{self, owned, CmdResult, Fields, JobReply, Reply, Val};
use super::{module_config, stats, timer};
use crate::core::limits::lease_deadline;
use crate::core::worker::Dead;
use crate::core::{JobConfig, JobKey, NackOutcome, QueueError};

/// A dead letter's reply: the job reply with `state`, `died_at`, `cause`
/// and `error` (the last failure's text, or nil).
pub fn dead_reply<'a>(j: JobReply<'a>, d: &Dead) -> Reply<'a> {
    let error = d
        .error
        .as_deref()
        .map_or(Val::Null, |e| Val::Owned(e.to_vec()));
    j.with("state", Val::Bytes(b"dead"))
        .with("died_at", Val::Int(d.died_at))
        .with("cause", Val::Bytes(d.cause.name().as_bytes()))
        .with("error", error)
        .reply()
}

fn lease_arg(arg: &RedisString) -> Result<u64, RedisError> {
    match parse_int(arg, "lease") {
        Ok(v) if v > 0 => Ok(v as u64),
        _ => Err(core_err(QueueError::LeaseNotHeld)),
    }
}

/// The orca key and lease token of an ACK, NACK or EXTEND. Neither can be
/// malformed in a lease the queue holds, so either is "lease not held",
/// after the type check (`WRONGTYPE` first, as for well-formed ones).
fn parse_lease_args(
    ctx: &Context,
    name: &RedisString,
    key_arg: &RedisString,
    token_arg: &RedisString,
) -> Result<(JobKey, u64), RedisError> {
    let token = lease_arg(token_arg);
    let key = job_key_or(ctx, name, key_arg, QueueError::LeaseNotHeld)?;
    if token.is_err() {
        read_queue(ctx, name, |_| Ok(()))?;
    }
    Ok((key, token?))
}

/// The pop after `NEXT`: the lease of the job it takes (`LEASE ms`, or the
/// module default), how it is written (`FORMAT`) and the worker's name
/// (`WORKER`).
fn next_lease<'a>(ctx: &Context, after: &'a [RedisString]) -> Result<Next<'a>, RedisError> {
    let opts = Options::parse(after, &["LEASE", "FORMAT", "WORKER"])?;
    Ok(Next {
        lease: opts.ms("LEASE")?.unwrap_or_else(module_config::lease_time),
        format: format(&opts)?,
        worker: worker(ctx, &opts)?,
    })
}

/// Refuse a `NEXT` whose lease cannot be taken at `now` before the ACK/NACK
/// runs: an error must leave the queue as it was, so the pop half cannot
/// be the first to find out.
fn check_next_lease(next: Option<Next>, now: i64) -> Result<(), RedisError> {
    match next {
        Some(n) if lease_deadline(now, n.lease).is_none() => {
            Err(core_err(QueueError::TimeOverflow))
        }
        _ => Ok(()),
    }
}

/// The job after an ACK/NACK ... NEXT: popped as a pop would be (and
/// replicated as one), at the same pinned time; nil if none.
fn next_job<'a>(
    ctx: &Context,
    name: &'a RedisString,
    next: Next<'a>,
    now: i64,
    max_attempts: i64,
) -> CmdResult<'a> {
    let p = PopArgs::next(next, now, max_attempts);
    Ok(take(ctx, name, &p, false)?.unwrap_or(Reply::Null))
}

/// Wake blocked pops if a capped collation came back below its cap.
fn wake_if_uncapped(ctx: &Context, name: &RedisString, woken: bool) {
    if woken {
        signal_ready(ctx, name);
    }
}

/// The successor of a hand-off (`FORWARD <queue2> <config>`): its config,
/// parsed before anything changes.
struct Forward<'a> {
    queue: &'a RedisString,
    json: &'a RedisString,
    cfg: JobConfig,
    client: bool,
}

fn forward_arg<'a>(
    ctx: &Context,
    f: Option<(&'a RedisString, &'a RedisString)>,
) -> Result<Option<Forward<'a>>, RedisError> {
    let Some((queue, json)) = f else {
        return Ok(None);
    };
    let (cfg, client) = config_arg(ctx, json)?;
    Ok(Some(Forward {
        queue,
        json,
        cfg,
        client,
    }))
}

/// Enqueue a hand-off's successor (before the finish: the half that may
/// refuse, and refuses without changing anything).
fn forward_put(ctx: &Context, f: Forward, now: i64) -> Result<Putted, RedisError> {
    enqueue_into(ctx, f.queue, f.cfg, f.client, f.json, now)
}

/// After a hand-off: the successor queue's settings if the forward created
/// it (replicated before the command), then its events once the command
/// replicated.
fn forward_done(ctx: &Context, queue: &RedisString, p: &Putted) {
    stats::add(&stats::FORWARDED, 1);
    publish_put(ctx, queue, p);
}

/// The reply of a finish: `first` (its own reply), or with `NEXT` the next
/// job; with `FORWARD` (`successor` is `Some`) a two-element array of that
/// and the successor's write reply (nil if nothing was forwarded).
fn finish_reply<'a>(
    ctx: &Context,
    name: &'a RedisString,
    next: Option<Next<'a>>,
    (now, max_attempts): (i64, i64),
    first: Reply<'a>,
    successor: Option<Option<Putted>>,
) -> CmdResult<'a> {
    let Some(successor) = successor else {
        return match next {
            Some(next) => next_job(ctx, name, next, now, max_attempts),
            None => Ok(first),
        };
    };
    let second = successor.map_or(Reply::Null, |p| p.reply);
    let Some(next) = next else {
        return Ok(Reply::Array(vec![first, second]));
    };
    // The next job is written by the pop itself (its payload borrowed from
    // the queue), so the array around it is written piece by piece.
    ffi::reply::array(ctx, 2);
    let p = PopArgs::next(next, now, max_attempts);
    match take(ctx, name, &p, false) {
        Ok(Some(r)) => reply::send(ctx, &r),
        Ok(None) => reply::send(ctx, &Reply::Null),
        Err(e) => super::errors::send_err(ctx, e),
    }
    reply::send(ctx, &second);
    Ok(Reply::Sent)
}

/// Check a finish before a hand-off changes anything: run `check` on the
/// queue; a missing queue holds no lease.
fn finish_check(
    ctx: &Context,
    name: &RedisString,
    check: impl FnOnce(&crate::core::Queue) -> Result<bool, QueueError>,
) -> Result<bool, RedisError> {
    read_queue(ctx, name, |q| check(q).map_err(core_err))?
        .ok_or_else(|| core_err(QueueError::LeaseNotHeld))
}

/// `ORCA.ACK <queue> <orca-key> <lease> [RESULT payload] [TTL ms] [STOP]
/// [FORWARD <queue2> <config>] [NEXT [LEASE ms] [FORMAT MAP|VALUES]]`
pub fn ack<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, key_arg, token_arg, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let f = finish::parse(finish::ACK, rest)?;
    let next_lease = f.next.map(|a| next_lease(ctx, a)).transpose()?;
    let opts = &f.opts;
    check_pins(ctx, opts)?;
    let ttl = opts.ms("TTL")?.unwrap_or_else(module_config::result_ttl);
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    check_next_lease(next_lease, now)?;
    let result_arg = opts.get("RESULT");
    let result = result_arg.map(|r| r.as_slice());
    if let Some(r) = result {
        if !from_master_or_aof(ctx) {
            check_payload(r.len(), Payload::Result)?;
        }
    }
    let forward = forward_arg(ctx, f.forward)?;
    let (key, token) = parse_lease_args(ctx, name, key_arg, token_arg)?;
    // A hand-off: the ACK cannot refuse once checked, so the successor
    // (which refuses before changing anything) goes first.
    let successor = match forward {
        Some(fw) => {
            finish_check(ctx, name, |q| {
                q.ack_check(&key, token, result.is_some(), now)
                    .map(|_| true)
            })?;
            let q2 = fw.queue;
            Some((q2, forward_put(ctx, fw, now)?))
        }
        None => None,
    };
    let (done, _) = write_queue(ctx, name, false, |q| {
        q.ack(&key, token, result, now, ttl).map_err(core_err)?;
        Ok(q.take_woken())
    })?;
    let woken = done.ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    if let Some((q2, p)) = &successor {
        replicate_created_settings(ctx, q2, p.created_with);
    }
    let mut rep: Vec<Arg> = vec![
        Arg::Client(name),
        Arg::Client(key_arg),
        Arg::Client(token_arg),
    ];
    if let Some(r) = result_arg {
        rep.extend([Arg::Keyword(Kw::Result), Arg::Client(r)]);
    }
    rep.extend([
        Arg::Keyword(Kw::Ttl),
        Arg::Int(ttl),
        Arg::Keyword(Kw::Now),
        Arg::Int(now),
    ]);
    if f.stop {
        rep.push(Arg::Bytes(b"STOP"));
    }
    if let (Some((q2, _)), Some((_, json))) = (&successor, f.forward) {
        rep.extend([Arg::Bytes(b"FORWARD"), Arg::Client(q2), Arg::Client(json)]);
    }
    ffi::replicate(ctx, c"ORCA.ACK", &rep);
    stats::add(&stats::ACKED, 1);
    ffi::notify(ctx, c"orca.ack", name);
    wake_if_uncapped(ctx, name, woken);
    if let Some((q2, p)) = &successor {
        forward_done(ctx, q2, p);
    }
    let successor = successor.map(|(_, p)| Some(p));
    let pins = (now, module_config::max_attempts());
    finish_reply(ctx, name, next_lease, pins, Reply::Int(1), successor)
}

/// `ORCA.NACK <queue> <orca-key> <lease> [DELAY ms] [FORWARD <queue2> <config>]
/// [NEXT [LEASE ms] [FORMAT MAP|VALUES]]`
pub fn nack<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, key_arg, token_arg, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let f = finish::parse(finish::NACK, rest)?;
    let next_lease = f.next.map(|a| next_lease(ctx, a)).transpose()?;
    let opts = &f.opts;
    check_pins(ctx, opts)?;
    let delay = opts.ms("DELAY")?;
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    check_next_lease(next_lease, now)?;
    let max_attempts = max_attempts(opts)?;
    // The failure's text, cut to `orca.max-error-length` (a failure is never
    // refused for its text: the worker would have to fail it again).
    let error = opts.get("ERROR").map(|e| {
        let e = e.as_slice();
        &e[..e.len().min(module_config::max_error_length())]
    });
    let policy = module_config::policy(Some(max_attempts));
    let forward = forward_arg(ctx, f.forward)?;
    let (key, token) = parse_lease_args(ctx, name, key_arg, token_arg)?;
    // The successor goes only with a death, known before anything changes.
    let forward_to = f.forward.map(|(q2, _)| q2);
    let successor = match forward {
        Some(fw) => {
            let dies = finish_check(ctx, name, |q| {
                q.nack_check(&key, token, delay, now, &policy)
            })?;
            match dies {
                true => Some(forward_put(ctx, fw, now)?),
                false => None,
            }
        }
        None => None,
    };
    let (outcome, _) = write_queue(ctx, name, false, |q| {
        let o = q
            .nack_with(&key, token, delay, now, &policy, error)
            .map_err(core_err)?;
        Ok((o, q.take_woken()))
    })?;
    let (outcome, woken) = outcome.ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    let pinned_delay = match outcome {
        NackOutcome::Retry { retry_at, .. } => retry_at - now,
        _ => 0,
    };
    if let (Some(q2), Some(p)) = (forward_to, &successor) {
        replicate_created_settings(ctx, q2, p.created_with);
    }
    let mut rep: Vec<Arg> = vec![
        Arg::Client(name),
        Arg::Client(key_arg),
        Arg::Client(token_arg),
        Arg::Keyword(Kw::Delay),
        Arg::Int(pinned_delay),
        Arg::Keyword(Kw::Now),
        Arg::Int(now),
        Arg::Keyword(Kw::MaxAttempts),
        Arg::Int(max_attempts),
    ];
    if let Some(e) = error {
        rep.extend([Arg::Keyword(Kw::Error), Arg::Bytes(e)]);
    }
    if let (Some((q2, json)), Some(_)) = (f.forward, &successor) {
        rep.extend([Arg::Bytes(b"FORWARD"), Arg::Client(q2), Arg::Client(json)]);
    }
    ffi::replicate(ctx, c"ORCA.NACK", &rep);
    stats::add(&stats::NACKED, 1);
    ffi::notify(ctx, c"orca.nack", name);
    wake_if_uncapped(ctx, name, woken);
    if let (Some(q2), Some(p)) = (forward_to, &successor) {
        forward_done(ctx, q2, p);
    }
    let reply = match outcome {
        NackOutcome::Retry { retry_at, attempts } => {
            if retry_at <= now {
                signal_ready(ctx, name);
            }
            Fields::new()
                .str("outcome", "retry")
                .int("retry_at", retry_at)
                .int("attempts", attempts as i64)
                .build()
        }
        NackOutcome::Dead { attempts } => {
            stats::add(&stats::DIED, 1);
            ffi::notify(ctx, c"orca.dead", name);
            Fields::new()
                .str("outcome", "dead")
                .int("attempts", attempts as i64)
                .build()
        }
        NackOutcome::Superseded => Fields::new().str("outcome", "superseded").build(),
    };
    let successor = forward_to.map(|_| successor);
    finish_reply(ctx, name, next_lease, (now, max_attempts), reply, successor)
}

/// `ORCA.EXTEND <queue> <orca-key> <lease> <ms>`
pub fn extend<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    if args.len() < 5 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let ms = parse_ms(&args[4], "lease time")?;
    let opts = Options::parse(&args[5..], &["NOW"])?;
    check_pins(ctx, &opts)?;
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let (key, token) = parse_lease_args(ctx, name, &args[2], &args[3])?;
    let (deadline, _) = write_queue(ctx, name, false, |q| {
        q.extend(&key, token, ms, now).map_err(core_err)
    })?;
    let deadline = deadline.ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    ffi::replicate(
        ctx,
        c"ORCA.EXTEND",
        &[
            Arg::Client(name),
            Arg::Client(&args[2]),
            Arg::Client(&args[3]),
            Arg::Client(&args[4]),
            Arg::Keyword(Kw::Now),
            Arg::Int(now),
        ],
    );
    ffi::notify(ctx, c"orca.extend", name);
    Ok(Reply::Int(deadline))
}

/// `ORCA.RESULT <queue> <orca-key>`
pub fn result<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let now = now_ms();
    let key = job_key_arg(&args[2]);
    let r = read_queue(ctx, &args[1], |q| {
        Ok(key.and_then(|k| q.result(&k, now).map(|r| r.to_vec())))
    })?;
    Ok(match r.flatten() {
        Some(v) => Reply::Bulk(Cow::Owned(v)),
        None => Reply::Null,
    })
}

/// `ORCA.DEAD <queue> LIST [OFFSET n] [LIMIT n] | REQUEUE <orca-key> | PURGE`
pub fn dead<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    if is_kw(&args[2], "LIST") {
        let opts = Options::parse(&args[3..], &["OFFSET", "LIMIT"])?;
        let offset = opts.ms("OFFSET")?.unwrap_or(0) as usize;
        let limit = page_limit(&opts)?;
        let list = read_queue(ctx, name, |q| {
            Ok(q.dead_list(offset, limit)
                .into_iter()
                .map(|(k, d)| {
                    dead_reply(
                        JobReply::full(owned(q.parked_info(k, &d.job, d.died_at))),
                        d,
                    )
                })
                .collect::<Vec<_>>())
        })?;
        return Ok(Reply::Array(list.unwrap_or_default()));
    }
    if is_kw(&args[2], "PURGE") {
        if args.len() != 3 {
            return Err(RedisError::WrongArity);
        }
        let (n, _) = write_queue(ctx, name, false, |q| Ok(q.dead_purge()))?;
        let n = n.unwrap_or(0);
        if n > 0 {
            ctx.replicate_verbatim();
            ffi::notify(ctx, c"orca.purge", name);
        }
        return Ok(Reply::Int(n as i64));
    }
    if is_kw(&args[2], "REQUEUE") {
        if args.len() < 4 {
            return Err(RedisError::WrongArity);
        }
        let opts = Options::parse(&args[4..], &["NOW"])?;
        let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
        let key = job_key_or(ctx, name, &args[3], QueueError::NoSuchJob)?;
        let (r, _) = write_queue(ctx, name, false, |q| {
            let info = q.dead_requeue(&key, now).map_err(core_err)?;
            Ok(JobReply::full(owned(info)).reply())
        })?;
        let r = r.ok_or_else(|| core_err(QueueError::NoSuchJob))?;
        ffi::replicate(
            ctx,
            c"ORCA.DEAD",
            &[
                Arg::Client(name),
                Arg::Keyword(Kw::Requeue),
                Arg::Client(&args[3]),
                Arg::Keyword(Kw::Now),
                Arg::Int(now),
            ],
        );
        ffi::notify(ctx, c"orca.requeue", name);
        signal_ready(ctx, name);
        return Ok(r);
    }
    Err(err("ORCA.DEAD subcommand must be LIST, REQUEUE or PURGE"))
}

/// `ORCA.TICK <queue> [NOW ms] [MAXATTEMPTS n]`: apply the time-driven
/// changes due now (what the server's timer does on its own).
pub fn tick<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let opts = Options::parse(&args[2..], &["NOW", "MAXATTEMPTS"])?;
    check_pins(ctx, &opts)?;
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let max_attempts = max_attempts(&opts)?;
    let policy = module_config::policy(Some(max_attempts));
    let (report, _) = write_queue(ctx, name, false, |q| Ok(q.tick(now, &policy)))?;
    let report = report.unwrap_or_default();
    if report.changed() {
        ffi::replicate(
            ctx,
            c"ORCA.TICK",
            &[
                Arg::Client(name),
                Arg::Keyword(Kw::Now),
                Arg::Int(now),
                Arg::Keyword(Kw::MaxAttempts),
                Arg::Int(max_attempts),
            ],
        );
        timer::publish(ctx, name, &report);
    }
    Ok(Fields::new()
        .int("expired", report.expired as i64)
        .int("retried", report.retried as i64)
        .int("died", report.died as i64)
        .int("lifetime", report.lifetime as i64)
        .int("forgotten", report.forgotten as i64)
        .build())
}

//! Worker commands: `ORCA.POP` (leases, COUNT, BLOCK), `ORCA.ACK`,
//! `ORCA.NACK`, `ORCA.EXTEND`, `ORCA.RESULT`, `ORCA.DEAD`, `ORCA.TICK`.
//!
//! Every one that reads the clock or a setting that changes the outcome
//! replicates with it pinned (`NOW`, `MAXATTEMPTS`, `DELAY`, `TTL`).

use redis_module::{Context, RedisError, RedisString};

use super::args::{err, is_kw, parse_int, parse_ms, Options};
use super::blocking;
use super::commands::{core_err, job_key_arg, notify, read_queue, write_queue};
use super::ffi::{self, block_on_key, deny_blocking, now_ms, signal_ready, Arg, Kw};
use super::reply::{self, Fields, Reply};
use super::settings;
use super::CmdResult;
use super::{stats, timer};
use crate::core::{NackOutcome, QueueError};

fn lease_arg(arg: &RedisString) -> Result<u64, RedisError> {
    match parse_int(arg, "lease") {
        Ok(v) if v > 0 => Ok(v as u64),
        _ => Err(core_err(QueueError::LeaseNotHeld)),
    }
}

fn max_attempts_opt(opts: &Options) -> Result<i64, RedisError> {
    match opts.get("MAXATTEMPTS") {
        None => Ok(settings::max_attempts()),
        Some(v) => {
            let n = parse_int(v, "MAXATTEMPTS")?;
            if !(0..=u32::MAX as i64).contains(&n) {
                return Err(err("MAXATTEMPTS must be between 0 and 4294967295"));
            }
            Ok(n)
        }
    }
}

struct PopArgs {
    lease: i64,
    block: Option<i64>,
    count: Option<i64>,
    now: Option<i64>,
    max_attempts: i64,
}

/// `NOW`/`MAXATTEMPTS` on a worker command: honoured from the master and
/// the AOF, from clients only with `orca.trust-client-clock yes`.
fn check_pins(ctx: &Context, opts: &Options) -> Result<(), RedisError> {
    if (opts.get("NOW").is_some() || opts.get("MAXATTEMPTS").is_some())
        && !super::may_pin_clock(ctx)
    {
        return Err(err(
            "NOW and MAXATTEMPTS on worker commands are for replication (CONFIG SET orca.trust-client-clock yes allows them from clients)",
        ));
    }
    Ok(())
}

fn parse_pop(ctx: &Context, args: &[RedisString]) -> Result<PopArgs, RedisError> {
    let opts = Options::parse(
        &args[2..],
        &["LEASE", "BLOCK", "COUNT", "NOW", "MAXATTEMPTS"],
    )?;
    check_pins(ctx, &opts)?;
    let count = match opts.get("COUNT") {
        None => None,
        Some(v) => {
            let n = parse_int(v, "COUNT")?;
            let max = if super::from_master_or_aof(ctx) {
                i64::MAX
            } else {
                settings::max_pop_count()
            };
            if !(1..=max).contains(&n) {
                return Err(err(format!("COUNT must be between 1 and {max}")));
            }
            Some(n)
        }
    };
    Ok(PopArgs {
        lease: opts.ms("LEASE")?.unwrap_or_else(settings::lease_time),
        block: opts.ms("BLOCK")?,
        count,
        now: opts.ms("NOW")?,
        max_attempts: max_attempts_opt(&opts)?,
    })
}

/// Pop what is there now. `None` when nothing was handed out.
fn try_pop(ctx: &Context, name: &RedisString, p: &PopArgs) -> Result<Option<Reply>, RedisError> {
    let now = p.now.unwrap_or_else(now_ms);
    let policy = settings::policy(Some(p.max_attempts));
    let count = p.count.unwrap_or(1) as usize;
    let (res, _) = write_queue(ctx, name, false, |q| {
        q.pop_deliveries(now, p.lease, count, &policy)
            .map_err(core_err)
    })?;
    let Some((ds, report)) = res else {
        return Ok(None);
    };
    if !ds.is_empty() || report.changed() {
        ffi::replicate(
            ctx,
            c"ORCA.POP",
            &[
                Arg::S(name),
                Arg::K(Kw::Lease),
                Arg::I(p.lease),
                Arg::K(Kw::Count),
                Arg::I(count as i64),
                Arg::K(Kw::Now),
                Arg::I(now),
                Arg::K(Kw::MaxAttempts),
                Arg::I(p.max_attempts),
            ],
        );
        timer::publish(ctx, name, &report);
    }
    if ds.is_empty() {
        return Ok(None);
    }
    stats::add(&stats::POPPED, ds.len());
    notify(ctx, c"orca.pop", name);
    Ok(Some(Reply::Deliveries {
        ds,
        array: p.count.is_some(),
    }))
}

/// `ORCA.POP <queue> [LEASE ms] [BLOCK ms] [COUNT n]`
pub fn pop(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    let p = parse_pop(ctx, &args)?;
    if p.block.is_some() && deny_blocking(ctx) {
        return Err(err(
            "BLOCK is not allowed inside MULTI/EXEC or scripts; pop without BLOCK",
        ));
    }
    if let Some(v) = try_pop(ctx, &args[1], &p)? {
        return Ok(v);
    }
    match p.block {
        None => Ok(Reply::Null),
        Some(timeout) => {
            if block_on_key(
                ctx,
                &args[1],
                timeout,
                Some(blocking::pop_on_ready),
                Some(blocking::pop_on_timeout),
            ) {
                Ok(Reply::Blocked)
            } else {
                Err(err("could not block the client"))
            }
        }
    }
}

/// Called when the key of a blocked POP is signalled: `None` keeps the
/// client blocked (nothing to hand out yet).
pub fn pop_unblocked(ctx: &Context, args: Vec<RedisString>) -> Option<CmdResult> {
    if args.len() < 2 {
        return Some(Err(RedisError::WrongArity));
    }
    let p = match parse_pop(ctx, &args) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    match try_pop(ctx, &args[1], &p) {
        Ok(Some(v)) => Some(Ok(v)),
        Ok(None) => None,
        Err(e) => Some(Err(e)),
    }
}

/// `ORCA.ACK <queue> <orca-key> <lease> [RESULT payload] [TTL ms]`
pub fn ack(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let opts = Options::parse(&args[4..], &["RESULT", "TTL", "NOW"])?;
    check_pins(ctx, &opts)?;
    let ttl = opts.ms("TTL")?.unwrap_or_else(settings::result_ttl);
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let result_arg = opts.get("RESULT");
    let result = result_arg.map(|r| r.as_slice());
    if let Some(r) = result {
        if !super::from_master_or_aof(ctx) {
            super::commands::check_payload(r.len(), "result")?;
        }
    }
    let token = lease_arg(&args[3])?;
    let key = job_key_arg(&args[2]).ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    let (done, _) = write_queue(ctx, name, false, |q| {
        q.ack(&key, token, result, now, ttl).map_err(core_err)
    })?;
    done.ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    let (key_arg, token_arg) = (Arg::S(&args[2]), Arg::S(&args[3]));
    match result_arg {
        Some(r) => ffi::replicate(
            ctx,
            c"ORCA.ACK",
            &[
                Arg::S(name),
                key_arg,
                token_arg,
                Arg::K(Kw::Result),
                Arg::S(r),
                Arg::K(Kw::Ttl),
                Arg::I(ttl),
                Arg::K(Kw::Now),
                Arg::I(now),
            ],
        ),
        None => ffi::replicate(
            ctx,
            c"ORCA.ACK",
            &[
                Arg::S(name),
                key_arg,
                token_arg,
                Arg::K(Kw::Ttl),
                Arg::I(ttl),
                Arg::K(Kw::Now),
                Arg::I(now),
            ],
        ),
    }
    stats::add(&stats::ACKED, 1);
    notify(ctx, c"orca.ack", name);
    Ok(Reply::Int(1))
}

/// `ORCA.NACK <queue> <orca-key> <lease> [DELAY ms]`
pub fn nack(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let opts = Options::parse(&args[4..], &["DELAY", "NOW", "MAXATTEMPTS"])?;
    check_pins(ctx, &opts)?;
    let delay = opts.ms("DELAY")?;
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let max_attempts = max_attempts_opt(&opts)?;
    let policy = settings::policy(Some(max_attempts));
    let token = lease_arg(&args[3])?;
    let key = job_key_arg(&args[2]).ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    let (outcome, _) = write_queue(ctx, name, false, |q| {
        q.nack(&key, token, delay, now, &policy).map_err(core_err)
    })?;
    let outcome = outcome.ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    let pinned_delay = match outcome {
        NackOutcome::Retry { retry_at, .. } => retry_at - now,
        _ => 0,
    };
    ffi::replicate(
        ctx,
        c"ORCA.NACK",
        &[
            Arg::S(name),
            Arg::S(&args[2]),
            Arg::S(&args[3]),
            Arg::K(Kw::Delay),
            Arg::I(pinned_delay),
            Arg::K(Kw::Now),
            Arg::I(now),
            Arg::K(Kw::MaxAttempts),
            Arg::I(max_attempts),
        ],
    );
    stats::add(&stats::NACKED, 1);
    notify(ctx, c"orca.nack", name);
    Ok(match outcome {
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
            notify(ctx, c"orca.dead", name);
            Fields::new()
                .str("outcome", "dead")
                .int("attempts", attempts as i64)
                .build()
        }
        NackOutcome::Superseded => Fields::new().str("outcome", "superseded").build(),
    })
}

/// `ORCA.EXTEND <queue> <orca-key> <lease> <ms>`
pub fn extend(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 5 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let ms = parse_ms(&args[4], "lease time")?;
    let opts = Options::parse(&args[5..], &["NOW"])?;
    check_pins(ctx, &opts)?;
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let token = lease_arg(&args[3])?;
    let key = job_key_arg(&args[2]).ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    let (deadline, _) = write_queue(ctx, name, false, |q| {
        q.extend(&key, token, ms, now).map_err(core_err)
    })?;
    let deadline = deadline.ok_or_else(|| core_err(QueueError::LeaseNotHeld))?;
    ffi::replicate(
        ctx,
        c"ORCA.EXTEND",
        &[
            Arg::S(name),
            Arg::S(&args[2]),
            Arg::S(&args[3]),
            Arg::S(&args[4]),
            Arg::K(Kw::Now),
            Arg::I(now),
        ],
    );
    notify(ctx, c"orca.extend", name);
    Ok(Reply::Int(deadline))
}

/// `ORCA.RESULT <queue> <orca-key>`
pub fn result(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() != 3 {
        return Err(RedisError::WrongArity);
    }
    let now = now_ms();
    let key = job_key_arg(&args[2]);
    let r = read_queue(ctx, &args[1], |q| {
        Ok(key.and_then(|k| q.result(&k, now).map(|r| r.to_vec())))
    })?;
    Ok(match r.flatten() {
        Some(v) => Reply::Bulk(v),
        None => Reply::Null,
    })
}

/// `ORCA.DEAD <queue> LIST [OFFSET n] [LIMIT n] | REQUEUE <orca-key> | PURGE`
pub fn dead(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    if is_kw(&args[2], "LIST") {
        let opts = Options::parse(&args[3..], &["OFFSET", "LIMIT"])?;
        let offset = opts.ms("OFFSET")?.unwrap_or(0) as usize;
        let limit = super::args::page_limit(&opts)?;
        let list = read_queue(ctx, name, |q| {
            Ok(q.dead_list(offset, limit)
                .into_iter()
                .map(|(k, d)| {
                    reply::job(&d.job.info(k, d.died_at))
                        .str("state", "dead")
                        .int("died_at", d.died_at)
                        .str("cause", d.cause.name())
                        .build()
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
            notify(ctx, c"orca.purge", name);
        }
        return Ok(Reply::Int(n as i64));
    }
    if is_kw(&args[2], "REQUEUE") {
        if args.len() < 4 {
            return Err(RedisError::WrongArity);
        }
        let opts = Options::parse(&args[4..], &["NOW"])?;
        let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
        let key = job_key_arg(&args[3]).ok_or_else(|| core_err(QueueError::NoSuchJob))?;
        let (r, _) = write_queue(ctx, name, false, |q| {
            let info = q.dead_requeue(&key, now).map_err(core_err)?;
            Ok(reply::job(&info).build())
        })?;
        let r = r.ok_or_else(|| core_err(QueueError::NoSuchJob))?;
        ffi::replicate(
            ctx,
            c"ORCA.DEAD",
            &[
                Arg::S(name),
                Arg::K(Kw::Requeue),
                Arg::S(&args[3]),
                Arg::K(Kw::Now),
                Arg::I(now),
            ],
        );
        notify(ctx, c"orca.requeue", name);
        signal_ready(ctx, name);
        return Ok(r);
    }
    Err(err("ORCA.DEAD subcommand must be LIST, REQUEUE or PURGE"))
}

/// `ORCA.TICK <queue> [NOW ms] [MAXATTEMPTS n]`: apply the time-driven
/// changes due now (what the server's timer does on its own).
pub fn tick(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    let name = &args[1];
    let opts = Options::parse(&args[2..], &["NOW", "MAXATTEMPTS"])?;
    check_pins(ctx, &opts)?;
    let now = opts.ms("NOW")?.unwrap_or_else(now_ms);
    let max_attempts = max_attempts_opt(&opts)?;
    let policy = settings::policy(Some(max_attempts));
    let (report, _) = write_queue(ctx, name, false, |q| Ok(q.tick(now, &policy)))?;
    let report = report.unwrap_or_default();
    if report.changed() {
        ffi::replicate(
            ctx,
            c"ORCA.TICK",
            &[
                Arg::S(name),
                Arg::K(Kw::Now),
                Arg::I(now),
                Arg::K(Kw::MaxAttempts),
                Arg::I(max_attempts),
            ],
        );
        timer::publish(ctx, name, &report);
    }
    Ok(Fields::new()
        .int("expired", report.expired as i64)
        .int("retried", report.retried as i64)
        .int("died", report.died as i64)
        .int("forgotten", report.forgotten as i64)
        .build())
}

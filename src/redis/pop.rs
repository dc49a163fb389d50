//! `ORCA.POP`: hand out the next jobs, leased (at-least-once) or taken
//! (`LEASE 0`), optionally blocking like BLPOP until a job can be had.
//!
//! Every pop runs the queue's due time-driven changes first, and
//! replicates as `ORCA.POP <q> LEASE <ms> COUNT <n> NOW <ms> MAXATTEMPTS <n>`
//! (the clock and the retry policy pinned).

use redis_module::{Context, RedisError, RedisString};

use super::access::{core_err, write_queue};
use super::args::{check_pins, err, from_master_or_aof, max_attempts, parse_int, Options};
use super::ffi::{self, deny_blocking, now_ms, Arg, Kw};
use super::hooks;
use super::reply::{CmdResult, Reply};
use super::{settings, stats, timer};

struct PopArgs {
    lease: i64,
    block: Option<i64>,
    count: Option<i64>,
    now: Option<i64>,
    max_attempts: i64,
}

fn parse_pop(ctx: &Context, rest: &[RedisString]) -> Result<PopArgs, RedisError> {
    let opts = Options::parse(rest, &["LEASE", "BLOCK", "COUNT", "NOW", "MAXATTEMPTS"])?;
    check_pins(ctx, &opts)?;
    let count = match opts.get("COUNT") {
        None => None,
        Some(v) => {
            let n = parse_int(v, "COUNT")?;
            let max = if from_master_or_aof(ctx) {
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
        max_attempts: max_attempts(&opts)?,
    })
}

/// Pop what is there now. `None` when nothing was handed out.
fn try_pop<'a>(
    ctx: &Context,
    name: &RedisString,
    p: &PopArgs,
) -> Result<Option<Reply<'a>>, RedisError> {
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
                Arg::Client(name),
                Arg::Keyword(Kw::Lease),
                Arg::Int(p.lease),
                Arg::Keyword(Kw::Count),
                Arg::Int(count as i64),
                Arg::Keyword(Kw::Now),
                Arg::Int(now),
                Arg::Keyword(Kw::MaxAttempts),
                Arg::Int(p.max_attempts),
            ],
        );
        timer::publish(ctx, name, &report);
    }
    if ds.is_empty() {
        return Ok(None);
    }
    stats::add(&stats::POPPED, ds.len());
    ffi::notify(ctx, c"orca.pop", name);
    Ok(Some(Reply::Deliveries {
        ds,
        array: p.count.is_some(),
        queue: None,
    }))
}

/// `ORCA.POP <queue> [LEASE ms] [BLOCK ms] [COUNT n]`
pub fn pop<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let p = parse_pop(ctx, rest)?;
    if p.block.is_some() && deny_blocking(ctx) {
        return Err(err(
            "BLOCK is not allowed inside MULTI/EXEC or scripts; pop without BLOCK",
        ));
    }
    if let Some(v) = try_pop(ctx, name, &p)? {
        return Ok(v);
    }
    match p.block {
        None => Ok(Reply::Null),
        Some(timeout) => {
            if hooks::block_on_keys(ctx, &[name], timeout, pop_on_ready, pop_on_timeout) {
                Ok(Reply::Blocked)
            } else {
                Err(err("could not block the client"))
            }
        }
    }
}

/// The queue of a blocked POP was signalled: hand out a job, or stay
/// blocked (`None`) when there is nothing yet.
fn pop_on_ready<'a>(ctx: &Context, args: &'a [RedisString]) -> Option<CmdResult<'a>> {
    let [_, name, rest @ ..] = args else {
        return Some(Err(RedisError::WrongArity));
    };
    let p = match parse_pop(ctx, rest) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    try_pop(ctx, name, &p).transpose()
}

/// BLOCK ran out: nil, like BLPOP.
fn pop_on_timeout<'a>(_ctx: &Context, _args: &'a [RedisString]) -> CmdResult<'a> {
    Ok(Reply::Null)
}

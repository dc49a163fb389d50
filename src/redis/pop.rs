//! `ORCA.POP` and `ORCA.MPOP`: hand out the next jobs, leased
//! (at-least-once) or taken (`LEASE 0`), optionally blocking like BLPOP /
//! BLMPOP until a job can be had. `take` is also the second half of
//! `ORCA.ACK ... NEXT` and `ORCA.NACK ... NEXT` (`worker.rs`).
//!
//! Every pop runs the queue's due time-driven changes first, and
//! replicates as `ORCA.POP <q> LEASE <ms> NOW <ms> MAXATTEMPTS <n> [COUNT <n>]`
//! (the clock and the retry policy pinned), whichever command it came from.

use redis_module::{Context, RedisError, RedisString};

use super::access::{core_err, write_queue};
use super::args::{
    check_pins, err, format, from_master_or_aof, max_attempts, over_max, parse_int, worker, Options,
};
use super::errors::coded;
use super::ffi::{self, deny_blocking, now_ms, signal_ready, Arg, Kw};
use super::reply::{self, CmdResult, Format, Reply};
use super::{hooks, keyspec};
use super::{module_config, stats, timer};
use crate::core::error::ErrorCode;
use crate::core::TickReport;

/// What a pop asks for.
pub struct PopArgs<'a> {
    pub lease: i64,
    pub block: Option<i64>,
    pub count: Option<i64>,
    pub now: Option<i64>,
    pub max_attempts: i64,
    /// A blocked pop's wake-up: it may only change the queue if it hands
    /// out a job (see `take`).
    pub waking: bool,
    /// How the deliveries are written (`FORMAT`).
    pub format: Format,
    /// The worker's name its leases keep (`WORKER`).
    pub worker: Option<&'a RedisString>,
}

/// The pop after `NEXT` on ACK, NACK and MACK: `[LEASE ms] [FORMAT
/// MAP|VALUES] [WORKER name]` (and MACK's `COUNT`).
#[derive(Clone, Copy)]
pub struct Next<'a> {
    pub lease: i64,
    pub format: Format,
    pub worker: Option<&'a RedisString>,
}

impl<'a> PopArgs<'a> {
    /// The pop after `NEXT`: one job, leased for `next.lease` ms, at `now`.
    pub fn next(next: Next<'a>, now: i64, max_attempts: i64) -> Self {
        PopArgs {
            lease: next.lease,
            block: None,
            count: None,
            now: Some(now),
            max_attempts,
            waking: false,
            format: next.format,
            worker: next.worker,
        }
    }
}

fn parse_pop<'a>(ctx: &Context, rest: &'a [RedisString]) -> Result<PopArgs<'a>, RedisError> {
    let opts = Options::parse(
        rest,
        &[
            "LEASE",
            "BLOCK",
            "COUNT",
            "NOW",
            "MAXATTEMPTS",
            "FORMAT",
            "WORKER",
        ],
    )?;
    check_pins(ctx, &opts)?;
    let count = match opts.get("COUNT") {
        None => None,
        Some(v) => {
            let n = parse_int(v, "COUNT")?;
            let max = if from_master_or_aof(ctx) {
                i64::MAX
            } else {
                module_config::max_pop_count()
            };
            if !(1..=max).contains(&n) {
                return Err(over_max(
                    n > max,
                    max,
                    format!("COUNT must be between 1 and {max}"),
                ));
            }
            Some(n)
        }
    };
    Ok(PopArgs {
        lease: opts.ms("LEASE")?.unwrap_or_else(module_config::lease_time),
        block: opts.ms("BLOCK")?,
        count,
        now: opts.ms("NOW")?,
        max_attempts: max_attempts(&opts)?,
        waking: false,
        format: format(&opts)?,
        worker: worker(ctx, &opts)?,
    })
}

/// Pop what `name` can hand out now. `None` when nothing was handed out.
/// `queue` names the queue in each job of the reply (MPOP).
pub fn take<'a>(
    ctx: &Context,
    name: &'a RedisString,
    p: &PopArgs,
    queue: bool,
) -> Result<Option<Reply<'a>>, RedisError> {
    let now = p.now.unwrap_or_else(now_ms);
    let policy = module_config::policy(Some(p.max_attempts));
    let count = p.count.unwrap_or(1) as usize;
    let (res, _) = write_queue(ctx, name, false, |q| {
        if p.waking && !q.can_hand_out(now) {
            // A wake-up that would only apply due changes (say, jobs
            // past their lifetime) and hand out nothing leaves the queue
            // to the timer: Redis 7.0 cannot take a replicated change from
            // a client that stays blocked (it asserts), and the timer
            // applies and replicates them anyway, then wakes us again.
            return Ok((0, TickReport::default(), false));
        }
        let (hs, report) = q
            .pop_handouts_for(now, p.lease, count, &policy, p.worker.map(|w| w.as_slice()))
            .map_err(core_err)?;
        // Written now, while the jobs' payloads can be borrowed from
        // their leases (no copy).
        let queue_name = queue.then(|| name.as_slice());
        if !hs.is_empty() && p.count.is_none() {
            let d = hs.first().and_then(|h| q.handout(h));
            reply::send_delivery(ctx, d.as_ref(), queue_name, p.format);
        } else if !hs.is_empty() {
            let ds = hs.iter().filter_map(|h| q.handout(h)).collect();
            reply::send(
                ctx,
                &Reply::Deliveries {
                    ds,
                    array: true,
                    queue: queue_name,
                    format: p.format,
                },
            );
        }
        Ok((hs.len(), report, q.take_woken()))
    })?;
    let Some((handed, report, woken)) = res else {
        return Ok(None);
    };
    if handed > 0 || report.changed() {
        // COUNT only when above 1: two arguments fewer on every
        // single-job pop's way to replicas and the AOF.
        // COUNT only when above 1, WORKER only when named and a job was
        // handed out: fewer arguments on every plain pop's way to replicas
        // and the AOF, and no allocation (the arguments stay on the stack).
        let mut a = [Arg::Int(0); 11];
        a[..7].copy_from_slice(&[
            Arg::Client(name),
            Arg::Keyword(Kw::Lease),
            Arg::Int(p.lease),
            Arg::Keyword(Kw::Now),
            Arg::Int(now),
            Arg::Keyword(Kw::MaxAttempts),
            Arg::Int(p.max_attempts),
        ]);
        let mut n = 7;
        if count > 1 {
            a[n..n + 2].copy_from_slice(&[Arg::Keyword(Kw::Count), Arg::Int(count as i64)]);
            n += 2;
        }
        if let Some(w) = p.worker.filter(|_| handed > 0) {
            a[n..n + 2].copy_from_slice(&[Arg::Keyword(Kw::Worker), Arg::Client(w)]);
            n += 2;
        }
        ffi::replicate(ctx, c"ORCA.POP", &a[..n]);
        timer::publish(ctx, name, &report);
    }
    if woken {
        signal_ready(ctx, name);
    }
    if handed == 0 {
        return Ok(None);
    }
    stats::add(&stats::POPPED, handed);
    ffi::notify(ctx, c"orca.pop", name);
    Ok(Some(Reply::Sent))
}

/// Refuse BLOCK where a client cannot be blocked.
fn check_block(ctx: &Context, p: &PopArgs) -> Result<(), RedisError> {
    if p.block.is_some() && deny_blocking(ctx) {
        return Err(err(
            "BLOCK is not allowed inside MULTI/EXEC or scripts; pop without BLOCK",
        ));
    }
    Ok(())
}

/// `ORCA.POP <queue> [LEASE ms] [BLOCK ms] [COUNT n] [FORMAT MAP|VALUES]`
pub fn pop<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let p = parse_pop(ctx, rest)?;
    check_block(ctx, &p)?;
    if let Some(v) = take(ctx, name, &p, false)? {
        return Ok(v);
    }
    match p.block {
        None => Ok(Reply::Null),
        Some(timeout) => block(ctx, &[name], timeout, pop_on_ready),
    }
}

fn block<'a>(
    ctx: &Context,
    keys: &[&RedisString],
    timeout: i64,
    on_ready: hooks::OnReady,
) -> CmdResult<'a> {
    if hooks::block_on_keys(ctx, keys, timeout, on_ready, on_timeout) {
        Ok(Reply::Blocked)
    } else {
        Err(coded(
            ErrorCode::Internal,
            &[],
            "could not block the client",
        ))
    }
}

/// The queue of a blocked POP was signalled: hand out a job, or stay
/// blocked (`None`) when there is nothing yet.
fn pop_on_ready<'a>(ctx: &Context, args: &'a [RedisString]) -> Option<CmdResult<'a>> {
    let [_, name, rest @ ..] = args else {
        return Some(Err(RedisError::WrongArity));
    };
    let p = match parse_pop(ctx, rest) {
        Ok(p) => PopArgs { waking: true, ..p },
        Err(e) => return Some(Err(e)),
    };
    take(ctx, name, &p, false).transpose()
}

/// BLOCK ran out: nil, like BLPOP.
fn on_timeout<'a>(_ctx: &Context, _args: &'a [RedisString]) -> CmdResult<'a> {
    Ok(Reply::Null)
}

/// `ORCA.MPOP <numkeys> <queue> [<queue> ...] ...`: the queues and the rest.
/// The queues are where Redis's key extraction found them (the count read
/// as Redis reads it), so each is one that ACL and Cluster checked.
fn mpop_args(args: &[RedisString]) -> Result<(&[RedisString], &[RedisString]), RedisError> {
    let at = keyspec::Keys::Specs(keyspec::COUNTED_QUEUES).positions(args)?;
    match (at.first(), at.last()) {
        (Some(&first), Some(&last)) if last + 1 - first == at.len() => {
            let queues = args.get(first..=last).ok_or(RedisError::WrongArity)?;
            Ok((queues, args.get(last + 1..).unwrap_or_default()))
        }
        _ => Err(err("numkeys must be at least 1")),
    }
}

/// The first queue, in argument order, that can hand out jobs does.
fn take_first<'a>(
    ctx: &Context,
    queues: &'a [RedisString],
    p: &PopArgs,
) -> Result<Option<Reply<'a>>, RedisError> {
    for q in queues {
        if let Some(r) = take(ctx, q, p, true)? {
            return Ok(Some(r));
        }
    }
    Ok(None)
}

/// `ORCA.MPOP <numkeys> <queue> [<queue> ...] [LEASE ms] [BLOCK ms] [COUNT n]
/// [FORMAT MAP|VALUES]`
pub fn mpop<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let (queues, rest) = mpop_args(args)?;
    let p = parse_pop(ctx, rest)?;
    check_block(ctx, &p)?;
    if let Some(v) = take_first(ctx, queues, &p)? {
        return Ok(v);
    }
    match p.block {
        None => Ok(Reply::Null),
        Some(timeout) => {
            let keys: Vec<&RedisString> = queues.iter().collect();
            block(ctx, &keys, timeout, mpop_on_ready)
        }
    }
}

/// One of the queues of a blocked MPOP was signalled: the first queue in
/// argument order that can hand out jobs does; else keep waiting.
fn mpop_on_ready<'a>(ctx: &Context, args: &'a [RedisString]) -> Option<CmdResult<'a>> {
    let (queues, rest) = match mpop_args(args) {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    let p = match parse_pop(ctx, rest) {
        Ok(p) => PopArgs { waking: true, ..p },
        Err(e) => return Some(Err(e)),
    };
    take_first(ctx, queues, &p).transpose()
}

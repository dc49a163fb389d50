//! `ORCA.MACK`: finish several leases of one queue in one command, each
//! with its own outcome, and (`NEXT`) take the jobs that refill them in
//! the same atomic step. A worker whose handlers finish in batches sends
//! one command per batch instead of one ACK per job and a pop.
//!
//! Replicates the ACKs that took effect as `ORCA.MACK <q> <m> <key> <lease>
//! ... [RESULTS ...] TTL <ms> NOW <ms>` and the pop half as `ORCA.POP`
//! (`pop::take`), both with the time pinned.

use redis_module::{Context, RedisError, RedisString};

use super::access::{check_payload, core_err, job_key_arg, read_queue, write_queue, Payload};
use super::args::{
    check_pins, err, format, from_master_or_aof, is_kw, parse_int, strict_count, worker, Options,
};
use super::errors;
use super::ffi::{self, now_ms, signal_ready, Arg, Kw};
use super::pop::{take, Next, PopArgs};
use super::reply::{self, CmdResult, Reply};
use super::{module_config, stats};
use crate::core::limits::lease_deadline;
use crate::core::{JobKey, QueueError};

/// What `ORCA.MACK` was given.
struct MackArgs<'a> {
    /// `<orca-key> <lease>` pairs.
    pairs: &'a [RedisString],
    /// One result per pair, in order (`RESULTS`).
    results: Option<&'a [RedisString]>,
    ttl: i64,
    now: i64,
    /// `NEXT`: the lease and count of the jobs to take after the ACKs, and
    /// how they are written.
    next: Option<(Next<'a>, i64)>,
}

/// The options after the pairs: the `RESULTS` run, the runs of `NAME value`
/// options before and after it, and what follows `NEXT`.
struct Split<'a> {
    results: Option<&'a [RedisString]>,
    runs: [&'a [RedisString]; 2],
    next: Option<&'a [RedisString]>,
}

fn split(rest: &[RedisString], n: usize) -> Result<Split<'_>, RedisError> {
    let mut s = Split {
        results: None,
        runs: [&rest[..0]; 2],
        next: None,
    };
    let (mut run, mut start, mut i) = (0, 0, 0);
    while i < rest.len() {
        if is_kw(&rest[i], "RESULTS") {
            if s.results.is_some() {
                return Err(err("option RESULTS given twice"));
            }
            let values = rest.get(i + 1..i + 1 + n).ok_or_else(|| {
                err(format!(
                    "RESULTS needs one payload per lease ({n}); leave RESULTS out for none"
                ))
            })?;
            s.runs[run] = &rest[start..i];
            run = 1;
            s.results = Some(values);
            i += 1 + n;
            start = i;
        } else if is_kw(&rest[i], "NEXT") {
            s.runs[run] = &rest[start..i];
            s.next = rest.get(i + 1..);
            return Ok(s);
        } else {
            // A `NAME value` option: its value is never taken for a keyword.
            i += 2;
        }
    }
    s.runs[run] = rest.get(start..).unwrap_or(&[]);
    Ok(s)
}

const OPTIONS: &[&str] = &["TTL", "NOW"];
const ALSO: &[&str] = &["RESULTS", "NEXT"];

fn parse<'a>(ctx: &Context, args: &'a [RedisString]) -> Result<MackArgs<'a>, RedisError> {
    let [_, _, numleases, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let n = strict_count(
        numleases.as_slice(),
        "numleases",
        rest.len() / 2,
        "<orca-key> <lease> pairs",
    )?;
    let (pairs, rest) = rest.split_at(2 * n);
    let Split {
        results,
        runs: [before, after],
        next,
    } = split(rest, n)?;
    let a = Options::parse_also(before, OPTIONS, ALSO)?;
    let b = Options::parse_also(after, OPTIONS, ALSO).map_err(|e| match (&e, results) {
        // `RESULTS a b` for one lease: say why `b` is read as an option.
        (RedisError::String(m), Some(_)) => {
            RedisError::String(format!("{m}; RESULTS takes one payload per lease ({n})"))
        }
        _ => e,
    })?;
    let one = |name: &'static str| -> Result<Option<i64>, RedisError> {
        match (a.ms(name)?, b.ms(name)?) {
            (Some(_), Some(_)) => Err(err(format!("option {name} given twice"))),
            (x, y) => Ok(x.or(y)),
        }
    };
    check_pins(ctx, &a)?;
    check_pins(ctx, &b)?;
    let ttl = one("TTL")?.unwrap_or_else(module_config::result_ttl);
    let now = one("NOW")?.unwrap_or_else(now_ms);
    let next = match next {
        None => None,
        Some(after) => {
            let opts = Options::parse(after, &["LEASE", "COUNT", "FORMAT", "WORKER"])?;
            let lease = opts.ms("LEASE")?.unwrap_or_else(module_config::lease_time);
            if lease_deadline(now, lease).is_none() {
                // Refused before the ACKs: an error leaves the queue as it was.
                return Err(core_err(QueueError::TimeOverflow));
            }
            let max = if from_master_or_aof(ctx) {
                i64::MAX
            } else {
                module_config::max_pop_count()
            };
            // "Up to n jobs": a COUNT above orca.max-pop-count takes that many (a
            // client refilling its slots need not know the server's limit).
            let count = match opts.get("COUNT") {
                None => n as i64,
                Some(v) => parse_int(v, "COUNT")?,
            };
            if count < 1 {
                return Err(err("COUNT must be at least 1"));
            }
            let next = Next {
                lease,
                format: format(&opts)?,
                worker: worker(ctx, &opts)?,
            };
            Some((next, count.min(max)))
        }
    };
    if let Some(rs) = results {
        if !from_master_or_aof(ctx) {
            for r in rs {
                check_payload(r.len(), Payload::Result)?;
            }
        }
    }
    Ok(MackArgs {
        pairs,
        results,
        ttl,
        now,
        next,
    })
}

/// A pair's key and token; neither can be malformed in a lease the queue
/// holds, so either is "lease not held" (as for `ORCA.ACK`).
fn lease_of(key: &RedisString, token: &RedisString) -> Option<(JobKey, u64)> {
    let token = parse_int(token, "lease").ok().filter(|t| *t > 0)?;
    Some((job_key_arg(key)?, token as u64))
}

/// `ORCA.MACK <queue> <numleases> <orca-key> <lease> [<orca-key> <lease> ...]
/// [RESULTS <payload> ...] [TTL ms] [NEXT [LEASE ms] [COUNT n] [FORMAT MAP|VALUES]]`
pub fn mack<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let m = parse(ctx, args)?;
    let name = &args[1];
    // The type check first, as for ORCA.ACK: on a key of another type,
    // WRONGTYPE and nothing else.
    read_queue(ctx, name, |_| Ok(()))?;
    let leases: Vec<Option<(JobKey, u64)>> = m
        .pairs
        .chunks_exact(2)
        .map(|p| lease_of(&p[0], &p[1]))
        .collect();
    let (done, _) = write_queue(ctx, name, false, |q| {
        let outcomes: Vec<Result<(), QueueError>> = leases
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let (key, token) = l.ok_or(QueueError::LeaseNotHeld)?;
                let result = m.results.and_then(|r| r.get(i)).map(|r| r.as_slice());
                q.ack(&key, token, result, m.now, m.ttl)
            })
            .collect();
        Ok((outcomes, q.take_woken()))
    })?;
    let (outcomes, woken) = done.unwrap_or_else(|| {
        let none = leases.iter().map(|_| Err(QueueError::LeaseNotHeld));
        (none.collect(), false)
    });
    let acked = outcomes.iter().filter(|o| o.is_ok()).count();
    if acked > 0 {
        replicate(ctx, name, &m, &outcomes, acked);
        stats::add(&stats::ACKED, acked);
        ffi::notify(ctx, c"orca.ack", name);
    }
    if woken {
        signal_ready(ctx, name);
    }
    let Some((next, count)) = m.next else {
        send_outcomes(ctx, &outcomes);
        return Ok(Reply::Sent);
    };
    ffi::reply::array(ctx, 2);
    send_outcomes(ctx, &outcomes);
    let p = PopArgs {
        count: Some(count),
        ..PopArgs::next(next, m.now, module_config::max_attempts())
    };
    match take(ctx, name, &p, false) {
        Ok(Some(r)) => reply::send(ctx, &r),
        Ok(None) => ffi::reply::array(ctx, 0),
        Err(e) => errors::send_err(ctx, e),
    }
    Ok(Reply::Sent)
}

/// One entry per lease: `1`, or the error `ORCA.ACK` would have replied.
fn send_outcomes(ctx: &Context, outcomes: &[Result<(), QueueError>]) {
    ffi::reply::array(ctx, outcomes.len());
    for o in outcomes {
        match o {
            Ok(()) => ffi::reply::int(ctx, 1),
            Err(e) => errors::send_err(ctx, core_err(e.clone())),
        }
    }
}

/// The ACKs that took effect, with the time and the TTL pinned.
fn replicate(
    ctx: &Context,
    name: &RedisString,
    m: &MackArgs,
    outcomes: &[Result<(), QueueError>],
    acked: usize,
) {
    let took = |i: usize| matches!(outcomes.get(i), Some(Ok(())));
    let mut a = Vec::with_capacity(6 + 3 * acked);
    a.push(Arg::Client(name));
    a.push(Arg::Int(acked as i64));
    for (i, p) in m.pairs.chunks_exact(2).enumerate() {
        if took(i) {
            a.push(Arg::Client(&p[0]));
            a.push(Arg::Client(&p[1]));
        }
    }
    if let Some(rs) = m.results {
        a.push(Arg::Keyword(Kw::Results));
        a.extend(
            rs.iter()
                .enumerate()
                .filter(|(i, _)| took(*i))
                .map(|(_, r)| Arg::Client(r)),
        );
    }
    a.extend([
        Arg::Keyword(Kw::Ttl),
        Arg::Int(m.ttl),
        Arg::Keyword(Kw::Now),
        Arg::Int(m.now),
    ]);
    ffi::replicate(ctx, c"ORCA.MACK", &a);
}

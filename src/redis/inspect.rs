//! Read-only inspection: `ORCA.LEN`, `ORCA.STATUS`, `ORCA.LIST`,
//! `ORCA.STATS`, `ORCA.CHECK`.

use redis_module::{Context, RedisError, RedisString};

use super::access::{core_err, job_key_arg, read_queue};
use super::args::{err, is_kw, page_limit, parse_int, Options};
use super::ffi::now_ms;
use super::reply::{job_fields, owned, CmdResult, Fields, JobReply, Reply, Val};
use super::settings;
use crate::core::inspect::WaitStats;
use crate::core::State;

/// `ORCA.LEN <queue>`
pub fn len<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name] = args else {
        return Err(RedisError::WrongArity);
    };
    let n = read_queue(ctx, name, |q| Ok(q.len()))?.unwrap_or(0);
    Ok(Reply::Int(n as i64))
}

/// `ORCA.CHECK <queue>`
pub fn check<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name] = args else {
        return Err(RedisError::WrongArity);
    };
    read_queue(ctx, name, |q| {
        q.check()
            .map_err(|e| RedisError::String(format!("ERR queue invariant broken: {e}")))
    })?;
    Ok(Reply::Status(c"OK"))
}

/// `ORCA.STATUS <queue> <orca-key>`
pub fn status<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, key_arg] = args else {
        return Err(RedisError::WrongArity);
    };
    let key = job_key_arg(key_arg);
    let reply = read_queue(ctx, name, |q| {
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
                        job_fields(info)
                            .str("state", "queued")
                            .int("position", *pos as i64)
                    });
                }
                State::Delayed(k, d) => {
                    main.get_or_insert_with(|| {
                        job_fields(&d.job.info(*k, d.retry_at))
                            .str("state", "delayed")
                            .int("retry_at", d.retry_at)
                    });
                }
                State::Leased(k, token, l) => {
                    leases.push(
                        Fields::new()
                            .value("lease", Reply::Token(*token))
                            .int("deadline", l.deadline)
                            .int("attempts", l.job.attempts as i64)
                            .build(),
                    );
                    main.get_or_insert_with(|| {
                        job_fields(&l.job.info(*k, l.deadline))
                            .str("state", "leased")
                            .value("lease", Reply::Token(*token))
                            .int("deadline", l.deadline)
                    });
                }
                State::Dead(k, d) => {
                    main.get_or_insert_with(|| {
                        job_fields(&d.job.info(*k, d.died_at))
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

/// `ORCA.LIST <queue> [OFFSET n] [LIMIT n] [FILTER <metadata-field> <value>]`
pub fn list<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    // FILTER takes two values; split it off before the NAME value options.
    let mut others: Vec<RedisString> = Vec::new();
    let mut filter: Option<(String, String)> = None;
    let mut i = 0;
    while i < rest.len() {
        if is_kw(&rest[i], "FILTER") {
            if filter.is_some() {
                return Err(err("option FILTER given twice"));
            }
            let (Some(f), Some(v)) = (rest.get(i + 1), rest.get(i + 2)) else {
                return Err(err("FILTER needs a metadata field and a value"));
            };
            let text = |s: &RedisString| {
                std::str::from_utf8(s.as_slice())
                    .map(str::to_owned)
                    .map_err(|_| err("FILTER field and value must be UTF-8"))
            };
            filter = Some((text(f)?, text(v)?));
            i += 3;
        } else {
            others.push(rest[i].safe_clone(ctx));
            i += 1;
        }
    }
    let opts = Options::parse(&others, &["OFFSET", "LIMIT"])?;
    let offset = match opts.get("OFFSET") {
        None => 0,
        Some(v) => {
            let n = parse_int(v, "OFFSET")?;
            if n < 0 {
                return Err(err("OFFSET must be >= 0"));
            }
            n as usize
        }
    };
    let limit = page_limit(&opts)?;
    let page = read_queue(ctx, name, |q| {
        let f = filter.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
        Ok(q.list(offset, limit, f)
            .into_iter()
            .map(|(info, pos)| {
                JobReply::full(owned(info))
                    .with("state", Val::Bytes(b"queued"))
                    .with("position", Val::Int(pos as i64))
                    .reply()
            })
            .collect::<Vec<_>>())
    })?;
    Ok(Reply::Array(page.unwrap_or_default()))
}

fn wait(w: &WaitStats) -> Reply<'static> {
    let f = Fields::new().int("count", w.count as i64);
    if w.count == 0 {
        f.value("avg", Reply::Null)
            .value("min", Reply::Null)
            .value("max", Reply::Null)
    } else {
        f.int("avg", w.avg()).int("min", w.min).int("max", w.max)
    }
    .build()
}

/// `ORCA.STATS <queue>`
pub fn stats<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name] = args else {
        return Err(RedisError::WrongArity);
    };
    let now = now_ms();
    let (s, order) = read_queue(ctx, name, |q| Ok((q.stats(now), q.order())))?
        .unwrap_or_else(|| (Default::default(), settings::default_order()));
    Ok(Fields::new()
        .str("order", order.name())
        .int("queued", s.queued as i64)
        .int("delayed", s.delayed as i64)
        .int("leased", s.leased as i64)
        .int("dead", s.dead as i64)
        .int("results", s.results as i64)
        .int("collations", s.collations as i64)
        .int("immediate", s.immediate as i64)
        .value("wait_all", wait(&s.wait_all))
        .value("wait_released", wait(&s.wait_released))
        .build())
}

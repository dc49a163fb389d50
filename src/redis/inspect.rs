//! Inspection commands: `ORCA.LIST` and `ORCA.STATS` (read-only).

use redis_module::{Context, RedisError, RedisString};

use super::args::{err, parse_int, Options};
use super::commands::read_queue;
use super::ffi::now_ms;
use super::reply::{self, Fields, Reply};
use super::settings;
use super::CmdResult;
use crate::core::inspect::WaitStats;

/// `ORCA.LIST <queue> [OFFSET n] [LIMIT n] [FILTER <metadata-field> <value>]`
pub fn list(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    // FILTER takes two values; split it off before the NAME value options.
    let mut rest: Vec<RedisString> = Vec::new();
    let mut filter: Option<(String, String)> = None;
    let mut i = 2;
    while i < args.len() {
        if super::args::is_kw(&args[i], "FILTER") {
            if filter.is_some() {
                return Err(err("option FILTER given twice"));
            }
            let (Some(f), Some(v)) = (args.get(i + 1), args.get(i + 2)) else {
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
            rest.push(args[i].safe_clone(ctx));
            i += 1;
        }
    }
    let opts = Options::parse(&rest, &["OFFSET", "LIMIT"])?;
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
    let limit = super::args::page_limit(&opts)?;
    let page = read_queue(ctx, &args[1], |q| {
        let f = filter.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
        Ok(q.list(offset, limit, f)
            .into_iter()
            .map(|(info, pos)| {
                reply::job(&info)
                    .str("state", "queued")
                    .int("position", pos as i64)
                    .build()
            })
            .collect::<Vec<_>>())
    })?;
    Ok(Reply::Array(page.unwrap_or_default()))
}

fn wait(w: &WaitStats) -> Reply {
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
pub fn stats(ctx: &Context, args: Vec<RedisString>) -> CmdResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let now = now_ms();
    let (s, order) = read_queue(ctx, &args[1], |q| Ok((q.stats(now), q.order())))?
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

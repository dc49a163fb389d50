//! Queue administration: `ORCA.SETTINGS` (per-queue settings) and
//! `ORCA.IMPORT` (the form AOF rewrite emits).

use redis_module::{Context, RedisError, RedisString};

use super::access::{core_err, read_queue, replicate_created_settings, write_queue};
use super::args::{err, from_master_or_aof, is_kw, parse_int, parse_ms};
use super::datatype::QUEUE_TYPE;
use super::errors::{coded, queue_missing};
use super::ffi::{self, selected_db, signal_ready};
use super::inspect::settings_map;
use super::reply::{CmdResult, Reply};
use super::{module_config, stats, tracking};
use crate::core::error::ErrorCode;
use crate::core::settings::{AutoDelay, MAX_COUNT_SETTING};
use crate::core::{Order, Queue, Settings};

fn order_arg(arg: &RedisString) -> Result<Order, RedisError> {
    if is_kw(arg, "LIFO") {
        Ok(Order::Lifo)
    } else if is_kw(arg, "FIFO") {
        Ok(Order::Fifo)
    } else {
        Err(err("order must be LIFO or FIFO"))
    }
}

fn count_arg(arg: &RedisString, what: &str) -> Result<u64, RedisError> {
    let n = parse_int(arg, what)?;
    if !(0..=MAX_COUNT_SETTING as i64).contains(&n) {
        return Err(err(format!(
            "{what} must be between 0 and {MAX_COUNT_SETTING}"
        )));
    }
    Ok(n as u64)
}

/// The changes `ORCA.SETTINGS` asks for, each at most once.
#[derive(Default)]
struct Changes {
    order: Option<Order>,
    lifetime: Option<i64>,
    autodelay: Option<(i64, i64)>,
    cap: Option<i64>,
    max_running: Option<u64>,
    dead_max: Option<u64>,
    dead_ttl: Option<i64>,
    result_max: Option<u64>,
}

impl Changes {
    fn parse(args: &[RedisString]) -> Result<Self, RedisError> {
        let mut c = Changes::default();
        let mut i = 0;
        let need = |n: usize, i: usize, name: &str| -> Result<(), RedisError> {
            if args.len() < i + 1 + n {
                return Err(err(format!("option {name} needs {n} value(s)")));
            }
            Ok(())
        };
        fn once<T>(slot: &mut Option<T>, v: T, name: &str) -> Result<(), RedisError> {
            if slot.is_some() {
                return Err(err(format!("option {name} given twice")));
            }
            *slot = Some(v);
            Ok(())
        }
        while i < args.len() {
            let a = &args[i];
            if is_kw(a, "AUTODELAY") {
                need(2, i, "AUTODELAY")?;
                let window = parse_ms(&args[i + 1], "AUTODELAY window")?;
                let step = parse_ms(&args[i + 2], "AUTODELAY step")?;
                once(&mut c.autodelay, (window, step), "AUTODELAY")?;
                i += 3;
                continue;
            }
            const ONE_VALUE: [&str; 7] = [
                "ORDER",
                "LIFETIME",
                "CAP",
                "MAXRUNNING",
                "DEADMAX",
                "DEADTTL",
                "RESULTMAX",
            ];
            if !ONE_VALUE.iter().any(|n| is_kw(a, n)) {
                return Err(err(format!(
                    "unknown option '{}' (allowed: ORDER, LIFETIME, AUTODELAY, CAP, MAXRUNNING, DEADMAX, DEADTTL, RESULTMAX)",
                    super::args::printable(a)
                )));
            }
            need(1, i, &super::args::printable(a))?;
            let v = &args[i + 1];
            if is_kw(a, "ORDER") {
                once(&mut c.order, order_arg(v)?, "ORDER")?;
            } else if is_kw(a, "LIFETIME") {
                once(&mut c.lifetime, parse_ms(v, "LIFETIME")?, "LIFETIME")?;
            } else if is_kw(a, "CAP") {
                once(&mut c.cap, parse_ms(v, "CAP")?, "CAP")?;
            } else if is_kw(a, "MAXRUNNING") {
                once(
                    &mut c.max_running,
                    count_arg(v, "MAXRUNNING")?,
                    "MAXRUNNING",
                )?;
            } else if is_kw(a, "DEADMAX") {
                once(&mut c.dead_max, count_arg(v, "DEADMAX")?, "DEADMAX")?;
            } else if is_kw(a, "DEADTTL") {
                once(&mut c.dead_ttl, parse_ms(v, "DEADTTL")?, "DEADTTL")?;
            } else {
                once(&mut c.result_max, count_arg(v, "RESULTMAX")?, "RESULTMAX")?;
            }
            i += 2;
        }
        if c.cap.is_some() && c.autodelay.is_none() {
            return Err(err(
                "CAP belongs to AUTODELAY: AUTODELAY <window> <step> CAP <ms>",
            ));
        }
        Ok(c)
    }

    fn any(&self) -> bool {
        self.order.is_some()
            || self.lifetime.is_some()
            || self.autodelay.is_some()
            || self.max_running.is_some()
            || self.dead_max.is_some()
            || self.dead_ttl.is_some()
            || self.result_max.is_some()
    }

    fn apply(&self, mut s: Settings) -> Settings {
        if let Some(o) = self.order {
            s.order = o;
        }
        if let Some(l) = self.lifetime {
            s.lifetime = l;
        }
        if let Some((window, step)) = self.autodelay {
            s.autodelay = AutoDelay {
                window,
                step,
                cap: self.cap.unwrap_or(0),
            };
        }
        if let Some(n) = self.max_running {
            s.max_running = n as u32;
        }
        if let Some(n) = self.dead_max {
            s.dead_max = n;
        }
        if let Some(t) = self.dead_ttl {
            s.dead_ttl = t;
        }
        if let Some(n) = self.result_max {
            s.result_max = n;
        }
        s
    }
}

fn settings_reply(q: &Queue) -> Reply<'static> {
    settings_map(q.settings())
        .int("jobs", q.len() as i64)
        .int("held", q.held_len() as i64)
        .int("collations", q.collation_count() as i64)
        .build()
}

/// `ORCA.SETTINGS <queue> [ORDER LIFO|FIFO] [LIFETIME ms] [AUTODELAY window step [CAP ms]]
/// [MAXRUNNING n] [DEADMAX n] [DEADTTL ms] [RESULTMAX n]`
pub fn queue_settings<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let changes = Changes::parse(rest)?;
    if !changes.any() {
        return Ok(
            read_queue(ctx, name, |q| Ok(settings_reply(q)))?.unwrap_or_else(|| {
                settings_reply(&Queue::with_settings(module_config::queue_defaults()))
            }),
        );
    }
    let (reply, created_with) = write_queue(ctx, name, true, |q| {
        let new = changes.apply(*q.settings());
        q.set_settings(new).map_err(core_err)?;
        Ok(settings_reply(q))
    })?;
    replicate_created_settings(ctx, name, created_with);
    ctx.replicate_verbatim();
    ffi::notify(ctx, c"orca.settings", name);
    // A new cap (or none) may let blocked pops through.
    signal_ready(ctx, name);
    reply.ok_or_else(queue_missing)
}

/// `ORCA.IMPORT <queue> <blob>`: adds the units of a serialized queue (the
/// form AOF rewrite emits). Refused whole if the blob is malformed, violates
/// an invariant, or collides with what the queue holds.
pub fn import<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, blob] = args else {
        return Err(RedisError::WrongArity);
    };
    let incoming = Queue::decode(blob.as_slice()).map_err(core_err)?;
    let key = ctx.open_key_writable(name);
    let n = incoming.len();
    let waiting = |q: &Queue| {
        let c = q.state_counts();
        c.0 + c.1 + q.held_len()
    };
    let existing = key
        .get_value::<Queue>(&QUEUE_TYPE)?
        .map(|q| waiting(q))
        .unwrap_or(0);
    if !from_master_or_aof(ctx) && existing + waiting(&incoming) > module_config::max_queue_length()
    {
        return Err(coded(
            ErrorCode::QueueFull,
            &[],
            "import would exceed orca.max-queue-length",
        ));
    }
    let db = selected_db(ctx);
    match key.get_value::<Queue>(&QUEUE_TYPE)? {
        Some(q) => {
            let before = stats::counts(q);
            q.absorb(incoming).map_err(core_err)?;
            stats::changed(before, stats::counts(q));
            tracking::track(db, name.as_slice(), q.next_deadline());
        }
        None => {
            stats::queue_added(&incoming);
            tracking::track(db, name.as_slice(), incoming.next_deadline());
            key.set_value(&QUEUE_TYPE, incoming)?;
        }
    }
    ctx.replicate_verbatim();
    ffi::notify(ctx, c"orca.import", name);
    signal_ready(ctx, name);
    Ok(Reply::Int(n as i64))
}

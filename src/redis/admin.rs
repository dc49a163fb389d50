//! Queue administration: `ORCA.SETTINGS` (per-queue settings) and
//! `ORCA.IMPORT` (the form AOF rewrite emits).

use redis_module::{Context, RedisError, RedisString};

use super::access::{core_err, read_queue, write_queue};
use super::args::{err, from_master_or_aof, is_kw, Options};
use super::datatype::QUEUE_TYPE;
use super::ffi::{self, selected_db, signal_ready};
use super::reply::{CmdResult, Fields, Reply};
use super::{settings, stats, tracking};
use crate::core::{Order, Queue};

fn order_arg(arg: &RedisString) -> Result<Order, RedisError> {
    if is_kw(arg, "LIFO") {
        Ok(Order::Lifo)
    } else if is_kw(arg, "FIFO") {
        Ok(Order::Fifo)
    } else {
        Err(err("order must be LIFO or FIFO"))
    }
}

fn settings_reply(q: &Queue) -> Reply<'static> {
    Fields::new()
        .str("order", q.order().name())
        .int("jobs", q.len() as i64)
        .int("collations", q.collation_count() as i64)
        .build()
}

/// `ORCA.SETTINGS <queue> [ORDER LIFO|FIFO]`
pub fn queue_settings<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    let opts = Options::parse(rest, &["ORDER"])?;
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
            ffi::notify(ctx, c"orca.settings", name);
            reply.ok_or_else(|| err("queue missing"))
        }
    }
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
    let existing = key
        .get_value::<Queue>(&QUEUE_TYPE)?
        .map(|q| q.state_counts())
        .map(|c| c.0 + c.1)
        .unwrap_or(0);
    let (iq, id, _, _) = incoming.state_counts();
    if !from_master_or_aof(ctx) && existing + iq + id > settings::max_queue_length() {
        return Err(err("import would exceed orca.max-queue-length"));
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

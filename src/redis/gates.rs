//! `ORCA.GATE <queue> <gate> CLOSE|OPEN|DROP`: holding pens for jobs whose
//! grader is not ready (see `core/gates.rs`). Each is deterministic given
//! the queue, so it replicates verbatim.

use std::borrow::Cow;

use redis_module::{Context, RedisError, RedisString};

use super::access::{core_err, replicate_created_settings, write_queue};
use super::args::{err, from_master_or_aof, is_kw};
use super::ffi::{self, signal_ready};
use super::module_config;
use super::reply::{CmdResult, Reply};

enum GateOp {
    Close,
    Open,
    Drop,
}

/// A gate name given by a client: not empty, at most `orca.max-gate-length`.
fn gate_arg<'a>(ctx: &Context, arg: &'a RedisString) -> Result<&'a [u8], RedisError> {
    let g = arg.as_slice();
    if g.is_empty() {
        return Err(err("gate name must not be empty"));
    }
    let max = module_config::max_gate_length();
    if !from_master_or_aof(ctx) && g.len() > max {
        return Err(err(format!(
            "gate name is {} bytes; the limit is {max} (orca.max-gate-length)",
            g.len()
        )));
    }
    Ok(g)
}

/// `ORCA.GATE <queue> <gate> CLOSE|OPEN|DROP`
pub fn gate<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name, gate, op] = args else {
        return Err(RedisError::WrongArity);
    };
    let op = if is_kw(op, "CLOSE") {
        GateOp::Close
    } else if is_kw(op, "OPEN") {
        GateOp::Open
    } else if is_kw(op, "DROP") {
        GateOp::Drop
    } else {
        return Err(err("gate operation must be CLOSE, OPEN or DROP"));
    };
    let gate = gate_arg(ctx, gate)?;
    match op {
        GateOp::Close => {
            let (closed, created_with) =
                write_queue(ctx, name, true, |q| q.close_gate(gate).map_err(core_err))?;
            let closed = closed.unwrap_or(false);
            replicate_created_settings(ctx, name, created_with);
            if closed {
                ctx.replicate_verbatim();
                ffi::notify(ctx, c"orca.gate", name);
            }
            Ok(Reply::Int(closed as i64))
        }
        GateOp::Open => {
            let (done, _) = write_queue(ctx, name, false, |q| {
                let was_closed = q.gate_closed(gate);
                Ok((was_closed, q.open_gate(gate).map_err(core_err)?))
            })?;
            let (was_closed, n) = done.unwrap_or((false, 0));
            if was_closed {
                ctx.replicate_verbatim();
                ffi::notify(ctx, c"orca.gate", name);
            }
            if n > 0 {
                signal_ready(ctx, name);
            }
            Ok(Reply::Int(n as i64))
        }
        GateOp::Drop => {
            let (done, _) = write_queue(ctx, name, false, |q| {
                let was_closed = q.gate_closed(gate);
                Ok((was_closed, q.drop_gate(gate).map_err(core_err)?))
            })?;
            let (was_closed, dropped) = done.unwrap_or_default();
            if was_closed {
                ctx.replicate_verbatim();
                ffi::notify(ctx, c"orca.gate", name);
            }
            Ok(Reply::Array(
                dropped
                    .into_iter()
                    .map(|p| Reply::Bulk(Cow::Owned(p.into_vec())))
                    .collect(),
            ))
        }
    }
}

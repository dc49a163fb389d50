//! Read-only inspection: `ORCA.LEN`, `ORCA.STATUS`, `ORCA.LIST`,
//! `ORCA.STATS`, `ORCA.CHECK`.

use std::borrow::Cow;

use redis_module::{Context, RedisError, RedisString};

use super::access::{core_err, job_key_arg, read_queue};
use super::args::{err, is_kw, page_limit, parse_int, Options};
use super::errors::coded;
use super::ffi::now_ms;
use super::module_config;
use super::reply::{job_fields, owned, CmdResult, Fields, JobReply, Reply, Val};
use crate::core::error::ErrorCode;
use crate::core::inspect::{metadata_matches, WaitStats};
use crate::core::worker::{Lease, StoredResult};
use crate::core::{JobKey, Queue, Settings, State};

/// How many collations `ORCA.STATS` lists under `running`.
const RUNNING_SHOWN: usize = 100;

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
        q.check().map_err(|e| {
            coded(
                ErrorCode::Invariant,
                &[],
                format!("queue invariant broken: {e}"),
            )
        })
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
        // The job that will run next for this key: queued, held or delayed
        // first, then a running delivery, then the dead entry. Every lease
        // on the key is listed under `leases`.
        let mut main: Option<Fields> = None;
        let mut leases = Vec::new();
        for st in &states {
            match st {
                State::Queued(info, pos) => {
                    main.get_or_insert_with(|| {
                        let f = job_fields(info)
                            .str("state", "queued")
                            .int("position", *pos as i64);
                        if q.settings().max_running > 0 {
                            f.int("capped", q.waits_for_cap(&key) as i64)
                        } else {
                            f
                        }
                    });
                }
                State::Held(info, gate) => {
                    main.get_or_insert_with(|| {
                        job_fields(info)
                            .str("state", "held")
                            .value("gate", Reply::Bulk(Cow::Owned(gate.to_vec())))
                    });
                }
                State::Delayed(k, d) => {
                    main.get_or_insert_with(|| {
                        job_fields(&q.parked_info(*k, &d.job, d.retry_at))
                            .str("state", "delayed")
                            .int("retry_at", d.retry_at)
                            .value("error", opt_bytes(d.error.as_deref()))
                    });
                }
                State::Leased(k, token, l) => {
                    leases.push(
                        attempt_fields(Fields::new(), l)
                            .value("lease", Reply::Token(*token))
                            .int("deadline", l.deadline)
                            .int("attempts", l.job.attempts as i64)
                            .build(),
                    );
                    main.get_or_insert_with(|| {
                        attempt_fields(job_fields(&q.parked_info(*k, &l.job, l.deadline)), l)
                            .str("state", "leased")
                            .value("lease", Reply::Token(*token))
                            .int("deadline", l.deadline)
                    });
                }
                State::Dead(k, d) => {
                    main.get_or_insert_with(|| {
                        job_fields(&q.parked_info(*k, &d.job, d.died_at))
                            .str("state", "dead")
                            .int("died_at", d.died_at)
                            .str("cause", d.cause.name())
                            .value("error", opt_bytes(d.error.as_deref()))
                    });
                }
            }
        }
        // Nothing waits, runs or died under the key, but it finished and
        // its result is kept: `done` (so "finished" and "never existed"
        // differ).
        if main.is_none() {
            main = q.done(&key, now_ms()).map(|r| done_fields(key, r));
        }
        Ok(main.map(|m| m.value("leases", Reply::Array(leases)).build()))
    })?;
    Ok(reply.flatten().unwrap_or(Reply::Null))
}

/// Bytes, or nil.
fn opt_bytes<'a>(b: Option<&[u8]>) -> Reply<'a> {
    b.map_or(Reply::Null, |b| Reply::Bulk(Cow::Owned(b.to_vec())))
}

/// A time, or nil when unknown (0: loaded from an older encoding).
fn opt_time<'a>(t: i64) -> Reply<'a> {
    if t > 0 {
        Reply::Int(t)
    } else {
        Reply::Null
    }
}

/// What a lease tells of its attempt: `worker` (the name its pop gave, or
/// nil) and `started_at` (when it was handed out, or nil if unknown).
fn attempt_fields<'a>(f: Fields<'a>, l: &Lease) -> Fields<'a> {
    f.value("worker", opt_bytes(l.worker.as_deref()))
        .value("started_at", opt_time(l.started_at))
}

/// A finished job whose result is kept (state `done`): what is known of
/// it without its config.
fn done_fields<'a>(key: JobKey, r: &StoredResult) -> Fields<'a> {
    Fields::new()
        .value("key", Reply::Key(key))
        .str("state", "done")
        .value("finished_at", opt_time(r.finished_at))
        .int("expires_at", r.expires_at)
        .value("created_at", opt_time(r.created_at))
        .int("attempts", r.attempts as i64)
        .value(
            "collation",
            r.collation.as_deref().map_or(Reply::Null, Reply::text),
        )
}

/// The `Val` of optional bytes, for a job reply's extras.
fn opt_val<'a>(b: Option<&[u8]>) -> Val<'a> {
    b.map_or(Val::Null, |b| Val::Owned(b.to_vec()))
}

/// Which jobs `ORCA.LIST` lists.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ListState {
    Queued,
    Held,
    Leased,
    Delayed,
    Dead,
    Done,
}

fn list_state(arg: &RedisString) -> Result<ListState, RedisError> {
    for (kw, s) in [
        ("QUEUED", ListState::Queued),
        ("HELD", ListState::Held),
        ("LEASED", ListState::Leased),
        ("DELAYED", ListState::Delayed),
        ("DEAD", ListState::Dead),
        ("DONE", ListState::Done),
    ] {
        if is_kw(arg, kw) {
            return Ok(s);
        }
    }
    Err(err(
        "STATE must be QUEUED, HELD, LEASED, DELAYED, DEAD or DONE",
    ))
}

/// `ORCA.LIST <queue> [STATE s] [GATE g] [OFFSET n] [LIMIT n] [FILTER <metadata-field> <value>]`
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
    let opts = Options::parse_also(&others, &["OFFSET", "LIMIT", "STATE", "GATE"], &["FILTER"])?;
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
    let state = opts
        .get("STATE")
        .map(list_state)
        .transpose()?
        .unwrap_or(ListState::Queued);
    let gate = opts.get("GATE").map(|g| g.as_slice().to_vec());
    if gate.is_some() && state != ListState::Held {
        return Err(err("GATE applies to STATE HELD only"));
    }
    let page = read_queue(ctx, name, |q| {
        let f = filter.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
        Ok(match state {
            ListState::Queued => q
                .list(offset, limit, f)
                .into_iter()
                .map(|(info, pos)| {
                    JobReply::full(owned(info))
                        .with("state", Val::Bytes(b"queued"))
                        .with("position", Val::Int(pos as i64))
                        .reply()
                })
                .collect(),
            _ => list_parked(q, state, gate.as_deref(), offset, limit, f),
        })
    })?;
    Ok(Reply::Array(page.unwrap_or_default()))
}

/// A page of held, leased, delayed or dead jobs. Without a filter O(offset
/// + page); with one, a scan of that state's jobs.
fn list_parked<'a>(
    q: &Queue,
    state: ListState,
    gate: Option<&[u8]>,
    offset: usize,
    limit: usize,
    filter: Option<(&str, &str)>,
) -> Vec<Reply<'a>> {
    let (from, take) = match filter {
        Some(_) => (0, usize::MAX),
        None => (offset, limit),
    };
    let keep = |payload: &[u8]| filter.is_none_or(|(f, v)| metadata_matches(payload, f, v));
    let page: Vec<Reply<'a>> = match state {
        ListState::Held => q
            .held_list(gate, from, take)
            .into_iter()
            .filter(|(info, _)| keep(&info.payload))
            .map(|(info, g)| {
                JobReply::full(owned(info))
                    .with("state", Val::Bytes(b"held"))
                    .with("gate", Val::Owned(g.to_vec()))
                    .reply()
            })
            .collect(),
        ListState::Leased => q
            .lease_list(from, take)
            .into_iter()
            .filter(|(_, l)| keep(&l.job.payload))
            .map(|(token, l)| {
                JobReply::full(owned(q.parked_info(l.key, &l.job, l.deadline)))
                    .with("state", Val::Bytes(b"leased"))
                    .with("lease", Val::Token(token))
                    .with("deadline", Val::Int(l.deadline))
                    .with("worker", opt_val(l.worker.as_deref()))
                    .with(
                        "started_at",
                        if l.started_at > 0 {
                            Val::Int(l.started_at)
                        } else {
                            Val::Null
                        },
                    )
                    .reply()
            })
            .collect(),
        ListState::Delayed => q
            .delayed_list(from, take)
            .into_iter()
            .filter(|(_, d)| keep(&d.job.payload))
            .map(|(k, d)| {
                JobReply::full(owned(q.parked_info(k, &d.job, d.retry_at)))
                    .with("state", Val::Bytes(b"delayed"))
                    .with("retry_at", Val::Int(d.retry_at))
                    .with("error", opt_val(d.error.as_deref()))
                    .reply()
            })
            .collect(),
        ListState::Dead | ListState::Queued => q
            .dead_list(from, take)
            .into_iter()
            .filter(|(_, d)| keep(&d.job.payload))
            .map(|(k, d)| {
                super::worker::dead_reply(
                    JobReply::full(owned(q.parked_info(k, &d.job, d.died_at))),
                    d,
                )
            })
            .collect(),
        // Finished jobs have no config left: FILTER matches none of them.
        ListState::Done => q
            .done_list(from, take)
            .into_iter()
            .filter(|_| filter.is_none())
            .map(|(k, r)| done_fields(k, r).build())
            .collect(),
    };
    match filter {
        Some(_) => page.into_iter().skip(offset).take(limit).collect(),
        None => page,
    }
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

/// A queue's settings as a reply map (also the `settings` of `ORCA.STATS`).
pub fn settings_map(s: &Settings) -> Fields<'static> {
    Fields::new()
        .str("order", s.order.name())
        .int("lifetime", s.lifetime)
        .int("autodelay_window", s.autodelay.window)
        .int("autodelay_step", s.autodelay.step)
        .int("autodelay_cap", s.autodelay.cap)
        .int("maxrunning", s.max_running as i64)
        .int("deadmax", s.dead_max as i64)
        .int("deadttl", s.dead_ttl)
        .int("resultmax", s.result_max as i64)
}

/// `ORCA.STATS <queue>`
pub fn stats<'a>(ctx: &Context, args: &'a [RedisString]) -> CmdResult<'a> {
    let [_, name] = args else {
        return Err(RedisError::WrongArity);
    };
    let now = now_ms();
    let reply = read_queue(ctx, name, |q| {
        let s = q.stats(now);
        let gates = q
            .gate_list()
            .into_iter()
            .map(|(g, n)| (Reply::Bulk(Cow::Owned(g.to_vec())), Reply::Int(n as i64)))
            .collect();
        let running = q
            .running_by_collation(RUNNING_SHOWN)
            .into_iter()
            .map(|(c, n)| (Reply::text(c.into_owned()), Reply::Int(n as i64)))
            .collect();
        Ok(stats_reply(&s, q.settings(), q.held_len(), gates, running))
    })?;
    Ok(reply.unwrap_or_else(|| {
        stats_reply(
            &Default::default(),
            &module_config::queue_defaults(),
            0,
            Vec::new(),
            Vec::new(),
        )
    }))
}

fn stats_reply<'a>(
    s: &crate::core::inspect::QueueStats,
    settings: &Settings,
    held: usize,
    gates: Vec<(Reply<'a>, Reply<'a>)>,
    running: Vec<(Reply<'a>, Reply<'a>)>,
) -> Reply<'a> {
    Fields::new()
        .str("order", settings.order.name())
        .int("queued", s.queued as i64)
        .int("held", held as i64)
        .int("delayed", s.delayed as i64)
        .int("leased", s.leased as i64)
        .int("dead", s.dead as i64)
        .int("results", s.results as i64)
        .int("collations", s.collations as i64)
        .int("immediate", s.immediate as i64)
        .value("wait_all", wait(&s.wait_all))
        .value("wait_released", wait(&s.wait_released))
        .value("gates", Reply::Pairs(gates))
        .value("running", Reply::Pairs(running))
        .value("settings", settings_map(settings).build())
        .build()
}

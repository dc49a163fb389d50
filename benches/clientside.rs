//! Bench client for `make bench` (benches/run.py drives it; `harness = false`).
//!
//! It measures what `redis-benchmark` cannot:
//!
//! - `protocol`: the seed-000 *client-side* protocol (a `SET NX PX` lock
//!   around every operation, reads, a MULTI/EXEC transaction, the reads a
//!   rollback needs, unlock) against `ORCA.ENQUEUE` / `ORCA.POP LEASE 0`
//!   driven by this same client with the same connections, for a fair ratio;
//! - `cycle`: enqueue -> pop (leased) -> ack, where the ack needs the lease
//!   token the pop returned (no Lua);
//! - `mix`: enqueue+pop pairs (queue depth stays constant) for the depth table;
//! - `delete`: `ORCA.DELETE` of existing jobs (their orca keys are computed
//!   here), and `set`, the same client's `SET` of the same payload as baseline;
//! - `load`: a pipelined loader that fills a queue (module) or the seed-000
//!   native keys (through the Lua enqueue script) with deterministic jobs;
//! - `pop`: pops exactly n jobs (one per command, or `COUNT` per command):
//!   the drain of the memory-after-a-drain row;
//! - `worker`: a worker's loop on queued jobs, `POP` + `ACK` (two round
//!   trips per job) or `POP` then `ACK ... NEXT` (one);
//! - `collation`: one collation fed new jobs with increasing priorities
//!   (each reservation appends) or random ones (each lands mid-list).
//!
//! Every subcommand prints one JSON line: `{"ops":..,"secs":..,"rate":..}`.
//! Jobs come from a template (the `--template` file): its `__rand_int__`
//! placeholders are filled with 12-digit numbers, the second one with the
//! collation id and every other one with the job number, so every payload has
//! the template's length.
//!
//! `cargo bench --bench clientside` without a subcommand starts its own
//! redis-server with the module (free port, temp dir) and runs a short
//! `protocol` comparison.

use std::collections::HashMap;
use std::fs;
use std::ops::Range;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Connection, Value};

// The test suites' server harness (free port, own directory, the binary
// from REDIS_SERVER, killed by pid on drop) and PRNG.
#[path = "../tests/common/rng.rs"]
mod rng;
#[path = "../tests/common/server.rs"]
mod server;

use rng::Rng;
use server::Server;

type Res<T> = Result<T, String>;

fn e2s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

// ---------------------------------------------------------------- options

struct Opts(HashMap<String, String>);

impl Opts {
    fn parse(args: &[String]) -> Res<Opts> {
        let mut m = HashMap::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let Some(k) = a.strip_prefix("--") else {
                return Err(format!("unexpected argument {a}"));
            };
            let v = it.next().ok_or_else(|| format!("--{k} needs a value"))?;
            m.insert(k.to_string(), v.clone());
        }
        Ok(Opts(m))
    }
    fn s(&self, k: &str, d: &str) -> String {
        self.0.get(k).cloned().unwrap_or_else(|| d.to_string())
    }
    fn n(&self, k: &str, d: u64) -> Res<u64> {
        match self.0.get(k) {
            None => Ok(d),
            Some(v) => v.parse().map_err(|_| format!("--{k} must be a number")),
        }
    }
    fn req(&self, k: &str) -> Res<String> {
        self.0
            .get(k)
            .cloned()
            .ok_or_else(|| format!("--{k} is required"))
    }
}

/// The options of every subcommand that works on jobs, in this order:
/// `--port`, `--template`, the jobs `--start`..`--start + --n` over
/// `--collations`, on `--conns` connections, in `--queue` (the defaults of
/// `n`, `conns` and `queue` are the subcommand's).
type JobOpts = (u16, Template, u64, u64, u64, usize, String);

fn job_opts(o: &Opts, n: u64, conns: u64, queue: &str) -> Res<JobOpts> {
    Ok((
        o.n("port", 0)? as u16,
        Template::load(&o.req("template")?)?,
        o.n("start", 0)?,
        o.n("n", n)?,
        o.n("collations", 0)?,
        o.n("conns", conns)?.max(1) as usize,
        o.s("queue", queue),
    ))
}

/// The options of the subcommands that take `--n` (default 1000) queued
/// jobs out of `--queue` (default `q`): `--port`, `--queue`, `--n`, `--conns`
/// and the `--lease` of each pop (the defaults of `conns` and `lease` are the
/// subcommand's).
fn take_opts(o: &Opts, conns: u64, lease: u64) -> Res<(u16, String, usize, usize, u64)> {
    Ok((
        o.n("port", 0)? as u16,
        o.s("queue", "q"),
        o.n("n", 1000)? as usize,
        o.n("conns", conns)?.max(1) as usize,
        o.n("lease", lease)?,
    ))
}

// ---------------------------------------------------------------- jobs

/// The job template split at its `__rand_int__` placeholders.
#[derive(Clone)]
struct Template {
    parts: Vec<Vec<u8>>,
}

impl Template {
    fn load(path: &str) -> Res<Template> {
        let text = fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
        Ok(Template::new(text.trim()))
    }
    fn new(text: &str) -> Template {
        Template {
            parts: text
                .split("__rand_int__")
                .map(|p| p.as_bytes().to_vec())
                .collect(),
        }
    }
    /// `ORCA.ENQUEUE queue <job id>` (its collation out of `collations`)
    /// added to the pipeline `p`.
    fn enqueue(&self, p: &mut redis::Pipeline, queue: &str, id: u64, collations: u64) {
        p.cmd("ORCA.ENQUEUE")
            .arg(queue)
            .arg(self.job(id, collation_of(id, collations)));
    }
    /// The config of job `i` in collation `c` (12-digit numbers, as
    /// redis-benchmark writes `__rand_int__`).
    fn job(&self, i: u64, c: u64) -> Vec<u8> {
        let (ni, nc) = (format!("{i:012}"), format!("{c:012}"));
        let mut out = Vec::with_capacity(self.parts.iter().map(|p| p.len() + 12).sum());
        for (k, p) in self.parts.iter().enumerate() {
            if k > 0 {
                out.extend_from_slice(if k == 2 { nc.as_bytes() } else { ni.as_bytes() });
            }
            out.extend_from_slice(p);
        }
        out
    }
}

/// `json` with its `"priority":<digits>` (the first one: the template's
/// top-level field) replaced by `p`.
fn with_priority(json: &[u8], p: u64) -> Res<Vec<u8>> {
    let pat = b"\"priority\":";
    let from = json
        .windows(pat.len())
        .position(|w| w == pat)
        .map(|at| at + pat.len())
        .ok_or("the template has no \"priority\":<digits> field")?;
    let to = from
        + json[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
    if to == from {
        return Err("the template's priority is not a plain integer".into());
    }
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(&json[..from]);
    out.extend_from_slice(p.to_string().as_bytes());
    out.extend_from_slice(&json[to..]);
    Ok(out)
}

/// A job as the clients see it: the config, its orca key and what the
/// client-side protocol needs (collation `user.<id>`, priority).
struct Job {
    json: Vec<u8>,
    key: String,
    task: Option<String>,
    priority: i64,
}

fn collation_of(i: u64, collations: u64) -> u64 {
    if collations == 0 {
        i
    } else {
        i % collations
    }
}

fn make_job(t: &Template, i: u64, collations: u64) -> Res<Job> {
    let json = t.job(i, collation_of(i, collations));
    let cfg = orca::core::parse_config(&json).map_err(|e| format!("template: {e}"))?;
    Ok(Job {
        key: orca::core::encode_key(&cfg.job_key),
        task: cfg.collation,
        priority: cfg.priority,
        json,
    })
}

fn make_jobs(t: &Template, start: u64, n: u64, collations: u64) -> Res<Vec<Job>> {
    (start..start + n)
        .map(|i| make_job(t, i, collations))
        .collect()
}

// ---------------------------------------------------------------- redis

fn connect(port: u16) -> Res<Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).map_err(e2s)?;
    client
        .get_connection_with_timeout(Duration::from_secs(10))
        .map_err(e2s)
}

fn q(con: &mut Connection, c: &redis::Cmd) -> Res<Value> {
    c.query::<Value>(con).map_err(e2s)
}

fn qp(con: &mut Connection, p: &redis::Pipeline) -> Res<Vec<Value>> {
    p.query::<Vec<Value>>(con).map_err(e2s)
}

fn bulk(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        _ => None,
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// A field of a job reply (flat array under RESP2, map under RESP3).
fn field(v: &Value, name: &str) -> Option<String> {
    match v {
        Value::Array(a) => a
            .chunks(2)
            .find(|kv| bulk(&kv[0]) == Some(name.as_bytes()))
            .and_then(|kv| kv.get(1).and_then(text)),
        Value::Map(m) => m
            .iter()
            .find(|(k, _)| bulk(k) == Some(name.as_bytes()))
            .and_then(|(_, v)| text(v)),
        _ => None,
    }
}

/// The orca key and lease token of a leased job reply; an error for nil
/// (the queue ran dry) or any other reply.
fn key_and_lease(v: &Value, cmd: &str) -> Res<(String, String)> {
    match (field(v, "key"), field(v, "lease")) {
        (Some(k), Some(l)) => Ok((k, l)),
        _ if *v == Value::Nil => Err(format!("{cmd} handed out nothing: the queue ran dry")),
        _ => Err(format!("unexpected {cmd} reply {v:?}")),
    }
}

/// `calls` and `usec` of a command in `INFO commandstats` (0, 0 before its
/// first call): the server's own time, without the network and the client.
fn command_stats(con: &mut Connection, name: &str) -> Res<(u64, u64)> {
    let info = text(&q(con, redis::cmd("INFO").arg("commandstats"))?).unwrap_or_default();
    let prefix = format!("cmdstat_{name}:");
    let Some(line) = info.lines().find_map(|l| l.strip_prefix(&prefix)) else {
        return Ok((0, 0));
    };
    let num = |k: &str| -> Res<u64> {
        line.split(',')
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .ok_or_else(|| format!("no {k} in {line}"))?
            .parse()
            .map_err(e2s)
    };
    Ok((num("calls")?, num("usec")?))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------- runner

/// Run `work(thread, con)` on `conns` threads, each with its own connection,
/// started together; returns the wall time from start to the last finish.
fn run_threads<F>(port: u16, conns: usize, work: F) -> Res<f64>
where
    F: Fn(usize, &mut Connection) -> Res<()> + Send + Sync + 'static,
{
    let work = Arc::new(work);
    let barrier = Arc::new(Barrier::new(conns + 1));
    let mut handles = Vec::new();
    for t in 0..conns {
        let mut con = connect(port)?;
        let (work, barrier) = (work.clone(), barrier.clone());
        handles.push(std::thread::spawn(move || {
            barrier.wait();
            work(t, &mut con)
        }));
    }
    barrier.wait();
    let start = Instant::now();
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some("a bench thread panicked".to_string())),
        }
    }
    let secs = start.elapsed().as_secs_f64();
    match first_err {
        Some(e) => Err(e),
        None => Ok(secs),
    }
}

/// Thread `t`'s share of `n` items (`share`), in consecutive ranges of at
/// most `size`: the pipelines it sends.
fn batches(n: usize, conns: usize, t: usize, size: usize) -> impl Iterator<Item = Range<usize>> {
    let (lo, hi) = share(n, conns, t);
    (lo..hi).step_by(size).map(move |i| i..(i + size).min(hi))
}

/// The share `[lo, hi)` of `n` items that thread `t` of `conns` works on.
fn share(n: usize, conns: usize, t: usize) -> (usize, usize) {
    (n * t / conns, n * (t + 1) / conns)
}

fn report(op: &str, ops: u64, secs: f64, extra: &[(&str, String)]) {
    let mut s = format!(
        "{{\"op\":\"{op}\",\"ops\":{ops},\"secs\":{secs:.6},\"rate\":{:.1}",
        ops as f64 / secs.max(1e-9)
    );
    for (k, v) in extra {
        s.push_str(&format!(",\"{k}\":{v}"));
    }
    s.push('}');
    println!("{s}");
}

// ---------------------------------------------------------------- load

/// Fill a queue (`--what module`, ORCA.ENQUEUE) or seed 000's native keys
/// with jobs `start..start+n`, pipelined (`--batch` jobs per pipeline) on
/// `--conns` connections, each owning whole collations. `--what lua` goes
/// through the Lua enqueue script (`--lua-sha`); `--what native` writes the
/// same layout with plain commands (LPUSH, ZADD, SADD, SET: what the script
/// does, without its per-call cost), the orca key being seed 000's
/// base64(sha256) and the nonce the release time, bumped past the
/// collation's last one.
fn cmd_load(o: &Opts) -> Res<()> {
    let (port, t, start, n, coll, conns, queue) = job_opts(o, 1000, 2, "q")?;
    let t = Arc::new(t);
    let batch = o.n("batch", 256)?.max(1) as usize;
    let what = o.s("what", "module");
    let sha = o.s("lua-sha", "");
    let ns = o.s("ns", "{n}");
    if what == "lua" && sha.is_empty() {
        return Err("load --what lua needs --lua-sha".into());
    }
    if !["module", "lua", "native"].contains(&what.as_str()) {
        return Err(format!("unknown --what {what} (module, lua, native)"));
    }
    let payload = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = payload.clone();
    let secs = run_threads(port, conns, move |th, con| {
        let mut last_nonce: HashMap<String, i64> = HashMap::new();
        let mut bytes = 0u64;
        // This connection's jobs: those whose collation it owns.
        let mut mine =
            (start..start + n).filter(|&j| collation_of(j, coll) % conns as u64 == th as u64);
        loop {
            let chunk: Vec<u64> = mine.by_ref().take(batch).collect();
            if chunk.is_empty() {
                break;
            }
            let mut p = redis::pipe();
            for j in chunk {
                if what == "native" {
                    let job = make_job(&t, j, coll)?;
                    bytes += job.json.len() as u64;
                    let release = now_ms() + job.priority;
                    let res = format!("{ns}:Reservations");
                    match &job.task {
                        Some(task) => {
                            let last = last_nonce.entry(task.clone()).or_insert(i64::MIN);
                            let nonce = release.max(last.saturating_add(1));
                            *last = nonce;
                            p.cmd("LPUSH")
                                .arg(format!("{ns}:SubmitterInfo.{task}"))
                                .arg(&job.key)
                                .ignore();
                            p.cmd("ZADD")
                                .arg(&res)
                                .arg(release)
                                .arg(format!("{task}.{nonce}"))
                                .ignore();
                            p.cmd("SADD")
                                .arg(format!("{ns}:Nonces.{task}"))
                                .arg(nonce)
                                .ignore();
                        }
                        None => {
                            p.cmd("ZADD")
                                .arg(&res)
                                .arg(release)
                                .arg(format!("immediate.{}", job.key))
                                .ignore();
                        }
                    }
                    p.cmd("SET")
                        .arg(format!("{ns}:job:{}", job.key))
                        .arg(job.json);
                } else {
                    let json = t.job(j, collation_of(j, coll));
                    bytes += json.len() as u64;
                    if what == "lua" {
                        p.cmd("EVALSHA").arg(&sha).arg(1).arg(&ns).arg(json);
                    } else {
                        p.cmd("ORCA.ENQUEUE").arg(&queue).arg(json);
                    }
                }
            }
            qp(con, &p)?;
        }
        total.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    })?;
    report(
        "load",
        n,
        secs,
        &[(
            "payload_bytes",
            payload
                .load(std::sync::atomic::Ordering::Relaxed)
                .to_string(),
        )],
    );
    Ok(())
}

// ---------------------------------------------------------------- set / delete

/// The same client's `SET` of the template payload: the baseline for rows
/// this client measures.
fn cmd_set(o: &Opts) -> Res<()> {
    let port = o.n("port", 0)? as u16;
    let t = Arc::new(Template::load(&o.req("template")?)?);
    let n = o.n("n", 10_000)? as usize;
    let conns = o.n("conns", 4)?.max(1) as usize;
    let pl = o.n("pipeline", 1)?.max(1) as usize;
    let start = o.n("start", 0)?;
    let secs = run_threads(port, conns, move |th, con| {
        for r in batches(n, conns, th, pl) {
            let mut p = redis::pipe();
            for j in r.clone() {
                let id = start + j as u64;
                p.cmd("SET").arg(format!("set:{id:012}")).arg(t.job(id, id));
            }
            qp(con, &p)?;
        }
        Ok(())
    })?;
    report("set", n as u64, secs, &[]);
    Ok(())
}

/// `ORCA.DELETE` of jobs `start..start+n` (loaded before with the same
/// template and collations), each exactly once.
fn cmd_delete(o: &Opts) -> Res<()> {
    let (port, t, start, n, coll, conns, queue) = job_opts(o, 1000, 4, "q")?;
    let pl = o.n("pipeline", 1)?.max(1) as usize;
    let keys: Arc<Vec<String>> = Arc::new(
        make_jobs(&t, start, n, coll)?
            .into_iter()
            .map(|j| j.key)
            .collect(),
    );
    let k2 = keys.clone();
    let secs = run_threads(port, conns, move |th, con| {
        for r in batches(k2.len(), conns, th, pl) {
            let mut p = redis::pipe();
            for k in &k2[r.clone()] {
                p.cmd("ORCA.DELETE").arg(&queue).arg(k);
            }
            for v in qp(con, &p)? {
                if v != Value::Int(1) {
                    return Err(format!("ORCA.DELETE of a queued job replied {v:?}"));
                }
            }
        }
        Ok(())
    })?;
    report("delete", keys.len() as u64, secs, &[]);
    Ok(())
}

// ---------------------------------------------------------------- mix / cycle

/// Enqueue+pop pairs: each pipeline holds `pipeline/2` ENQUEUE and as many
/// `POP LEASE 0`, interleaved, so the queue's depth stays where it was.
fn cmd_mix(o: &Opts) -> Res<()> {
    let (port, t, start, n, coll, conns, queue) = job_opts(o, 10_000, 4, "q")?;
    let t = Arc::new(t);
    let pairs_per_batch = (o.n("pipeline", 16)? / 2).max(1) as usize;
    let secs = run_threads(port, conns, move |th, con| {
        for r in batches(n as usize, conns, th, pairs_per_batch) {
            let mut p = redis::pipe();
            for j in r.clone() {
                t.enqueue(&mut p, &queue, start + j as u64, coll);
                p.cmd("ORCA.POP").arg(&queue).arg("LEASE").arg(0);
            }
            for (k, v) in qp(con, &p)?.iter().enumerate() {
                if k % 2 == 1 && *v == Value::Nil {
                    return Err("ORCA.POP found the queue empty during mix".into());
                }
            }
        }
        Ok(())
    })?;
    report("mix", n, secs, &[("ops_per_pair", "2".into())]);
    Ok(())
}

/// The full worker cycle: ENQUEUE, POP with a lease, ACK with the token the
/// pop returned. With `--pipeline P` each step is a pipeline of P commands.
fn cmd_cycle(o: &Opts) -> Res<()> {
    let (port, t, start, n, coll, conns, queue) = job_opts(o, 10_000, 4, "q")?;
    let t = Arc::new(t);
    let pl = o.n("pipeline", 1)?.max(1) as usize;
    let secs = run_threads(port, conns, move |th, con| {
        for r in batches(n as usize, conns, th, pl) {
            let mut p = redis::pipe();
            for j in r.clone() {
                t.enqueue(&mut p, &queue, start + j as u64, coll);
            }
            qp(con, &p)?;
            let mut p = redis::pipe();
            for _ in r.clone() {
                p.cmd("ORCA.POP").arg(&queue).arg("LEASE").arg(600_000);
            }
            let popped = qp(con, &p)?;
            let mut p = redis::pipe();
            let mut acks = 0;
            for v in &popped {
                if *v == Value::Nil {
                    continue; // another connection took it first
                }
                let (k, l) = key_and_lease(v, "ORCA.POP")?;
                p.cmd("ORCA.ACK").arg(&queue).arg(k).arg(l);
                acks += 1;
            }
            if acks > 0 {
                for v in qp(con, &p)? {
                    if v != Value::Int(1) {
                        return Err(format!("ORCA.ACK replied {v:?}"));
                    }
                }
            }
        }
        Ok(())
    })?;
    report("cycle", n, secs, &[("ops_per_cycle", "3".into())]);
    Ok(())
}

// ---------------------------------------------------------------- pop / worker

/// Pop exactly `--n` jobs of `--queue` with `ORCA.POP q LEASE <--lease>`
/// (default 0: the job is removed), one job per command or, with `--count
/// k`, up to k per command (`COUNT k`, one write for k jobs), in pipelines of
/// `--pipeline` commands on `--conns` connections. Fails if the queue runs
/// dry first.
fn cmd_pop(o: &Opts) -> Res<()> {
    let (port, queue, n, conns, lease) = take_opts(o, 4, 0)?;
    let pl = o.n("pipeline", 16)?.max(1) as usize;
    let count = o.0.get("count").map(|_| o.n("count", 1)).transpose()?;
    let per_cmd = count.unwrap_or(1).max(1) as usize;
    let secs = run_threads(port, conns, move |th, con| {
        for r in batches(n, conns, th, pl * per_cmd) {
            let mut p = redis::pipe();
            let mut asked = Vec::new();
            let mut left = r.len();
            while left > 0 {
                let k = left.min(per_cmd);
                p.cmd("ORCA.POP").arg(&queue).arg("LEASE").arg(lease);
                if count.is_some() {
                    p.arg("COUNT").arg(k);
                }
                asked.push(k);
                left -= k;
            }
            for (v, k) in qp(con, &p)?.iter().zip(asked) {
                let got = match v {
                    Value::Nil => 0,
                    Value::Array(a) if count.is_some() => a.len(),
                    Value::Array(_) | Value::Map(_) => 1,
                    other => return Err(format!("unexpected ORCA.POP reply {other:?}")),
                };
                if got != k {
                    return Err(format!(
                        "ORCA.POP handed out {got} jobs where {k} were asked: the queue ran dry"
                    ));
                }
            }
        }
        Ok(())
    })?;
    report("pop", n as u64, secs, &[]);
    Ok(())
}

/// A worker's loop on `--n` jobs already queued in `--queue`, one job at a
/// time on each of `--conns` connections (each its share), every job leased
/// for `--lease` ms and acked. `--mode ack`: `ORCA.POP`, then `ORCA.ACK`
/// (two round trips per job). `--mode next`: one `ORCA.POP`, then `ORCA.ACK
/// ... NEXT LEASE <ms>`, which finishes the job and leases the next in one
/// round trip; the connection's last job gets a plain `ORCA.ACK`.
fn cmd_worker(o: &Opts) -> Res<()> {
    let (port, queue, n, conns, lease) = take_opts(o, 8, 600_000)?;
    let next = match o.s("mode", "ack").as_str() {
        "ack" => false,
        "next" => true,
        m => return Err(format!("unknown --mode {m} (ack, next)")),
    };
    let trips = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let total = trips.clone();
    let secs = run_threads(port, conns, move |th, con| {
        let (lo, hi) = share(n, conns, th);
        let mut pop = redis::cmd("ORCA.POP");
        pop.arg(&queue).arg("LEASE").arg(lease);
        let mut rt = 0;
        let mut job = None;
        for i in lo..hi {
            let v = match job.take() {
                Some(v) => v,
                None => {
                    rt += 1;
                    q(con, &pop)?
                }
            };
            let (k, l) = key_and_lease(
                &v,
                if i == lo || !next {
                    "ORCA.POP"
                } else {
                    "ORCA.ACK NEXT"
                },
            )?;
            let mut ack = redis::cmd("ORCA.ACK");
            ack.arg(&queue).arg(k).arg(l);
            let take_next = next && i + 1 < hi;
            if take_next {
                ack.arg("NEXT").arg("LEASE").arg(lease);
            }
            rt += 1;
            let r = q(con, &ack)?;
            if take_next {
                job = Some(r);
            } else if r != Value::Int(1) {
                return Err(format!("ORCA.ACK replied {r:?}"));
            }
        }
        total.fetch_add(rt, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    })?;
    let rt = trips.load(std::sync::atomic::Ordering::Relaxed);
    report(
        &format!("worker-{}", if next { "next" } else { "ack" }),
        n as u64,
        secs,
        &[(
            "round_trips_per_job",
            format!("{:.3}", rt as f64 / n.max(1) as f64),
        )],
    );
    Ok(())
}

/// A pipeline stage's loop on `--n` jobs already queued in `--queue`, one
/// job at a time on each of `--conns` connections: each job is leased,
/// finished and handed on to `<queue>:next` (its own config as the
/// successor's). `--mode forward`: `ORCA.POP`, then `ORCA.ACK ... FORWARD
/// <queue>:next <config>` (two round trips, one atomic hand-off).
/// `--mode two-step`: `ORCA.POP`, `ORCA.ACK`, then `ORCA.ENQUEUE
/// <queue>:next <config>` (three round trips; a crash between the last two
/// would lose the job).
fn cmd_handoff(o: &Opts) -> Res<()> {
    let (port, queue, n, conns, lease) = take_opts(o, 8, 600_000)?;
    let forward = match o.s("mode", "forward").as_str() {
        "forward" => true,
        "two-step" => false,
        m => return Err(format!("unknown --mode {m} (forward, two-step)")),
    };
    let next_queue = format!("{queue}:next");
    let secs = run_threads(port, conns, move |th, con| {
        let (lo, hi) = share(n, conns, th);
        let mut pop = redis::cmd("ORCA.POP");
        pop.arg(&queue).arg("LEASE").arg(lease);
        for _ in lo..hi {
            let v = q(con, &pop)?;
            let (k, l) = key_and_lease(&v, "ORCA.POP")?;
            let payload = field(&v, "payload").ok_or_else(|| format!("no payload in {v:?}"))?;
            let mut ack = redis::cmd("ORCA.ACK");
            ack.arg(&queue).arg(&k).arg(&l);
            if forward {
                ack.arg("FORWARD").arg(&next_queue).arg(&payload);
                match q(con, &ack)? {
                    Value::Array(a) if a.len() == 2 && a[0] == Value::Int(1) => {}
                    r => return Err(format!("ORCA.ACK ... FORWARD replied {r:?}")),
                }
            } else {
                let r = q(con, &ack)?;
                if r != Value::Int(1) {
                    return Err(format!("ORCA.ACK replied {r:?}"));
                }
                q(
                    con,
                    redis::cmd("ORCA.ENQUEUE").arg(&next_queue).arg(&payload),
                )?;
            }
        }
        Ok(())
    })?;
    let name = if forward { "forward" } else { "two-step" };
    report(&format!("handoff-{name}"), n as u64, secs, &[]);
    Ok(())
}

// ---------------------------------------------------------------- collation

/// Lowest priority `collation` gives, and the width of its range: 7-digit
/// numbers (ms), so every payload has the same length whatever the order.
const PRIO_LO: u64 = 1_000_000;
const PRIO_SPAN: u64 = 8_000_000;

/// One collation (`--collation`, a number: `user.<12 digits>`) of `--queue`
/// fed new jobs (`--start`..), `ORCA.ENQUEUE` in pipelines of `--pipeline`
/// on `--conns` connections: first `--prefill` jobs (not timed), then the
/// `--n` jobs the rate is measured on. `--priorities increasing`: each job
/// gets a priority above every earlier one, so its reservation (arrival +
/// priority) goes at the end of the collation's list; `random` (`--seed`):
/// uniform over ~2 hours, so each lands mid-list. The configs are built
/// before the clock starts. With one connection the increasing order is
/// exact; with several, the pipelines in flight at once may land a few
/// places before the end.
fn cmd_collation(o: &Opts) -> Res<()> {
    let (port, t, start, n, _, conns, queue) = job_opts(o, 30_000, 1, "mc")?;
    let pl = o.n("pipeline", 16)?.max(1) as usize;
    let coll = o.n("collation", 0)?;
    let prefill = o.n("prefill", 0)?;
    let all = prefill + n;
    if all > PRIO_SPAN {
        return Err(format!(
            "--prefill + --n is {all}: at most {PRIO_SPAN} jobs"
        ));
    }
    let mut rng = Rng::new(o.n("seed", 1)?);
    let random = match o.s("priorities", "increasing").as_str() {
        "increasing" => false,
        "random" => true,
        p => return Err(format!("unknown --priorities {p} (increasing, random)")),
    };
    let step = PRIO_SPAN / all.max(1);
    let jobs: Vec<Vec<u8>> = (0..all)
        .map(|k| {
            let p = PRIO_LO
                + if random {
                    rng.below(PRIO_SPAN)
                } else {
                    k * step
                };
            with_priority(&t.job(start + k, coll), p)
        })
        .collect::<Res<_>>()?;
    let jobs = Arc::new(jobs);
    let feed = |range: Range<usize>| {
        let (jobs, queue) = (jobs.clone(), queue.clone());
        run_threads(port, conns, move |th, con| {
            // Pipelines dealt out in turn, so the connections advance
            // together through the order.
            for b in range.clone().step_by(pl).skip(th).step_by(conns) {
                let mut p = redis::pipe();
                for json in &jobs[b..(b + pl).min(range.end)] {
                    p.cmd("ORCA.ENQUEUE").arg(&queue).arg(json);
                }
                for v in qp(con, &p)? {
                    if field(&v, "created").as_deref() != Some("1") {
                        return Err(format!("ORCA.ENQUEUE did not create a new job: {v:?}"));
                    }
                }
            }
            Ok(())
        })
    };
    feed(0..prefill as usize)?;
    let mut con = connect(port)?;
    let before = command_stats(&mut con, "orca.enqueue")?;
    let secs = feed(prefill as usize..all as usize)?;
    let after = command_stats(&mut con, "orca.enqueue")?;
    let calls = after.0.saturating_sub(before.0).max(1);
    report(
        "collation",
        n,
        secs,
        &[
            ("random", random.to_string()),
            ("prefill", prefill.to_string()),
            (
                "usec_per_call",
                format!(
                    "{:.3}",
                    after.1.saturating_sub(before.1) as f64 / calls as f64
                ),
            ),
        ],
    );
    Ok(())
}

// ---------------------------------------------------------------- protocol

/// Redlock's release: delete the lock only if it still holds our token.
const UNLOCK_LUA: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

struct Proto {
    ns: String,
    lock_key: String,
    unlock_sha: String,
    /// Upper bound of the random wait before retrying a taken lock (µs).
    retry_us: u64,
    lock_ttl_ms: u64,
}

struct ProtoStats {
    lock_retries: u64,
    round_trips: u64,
    /// Simulated network: every round trip also waits this long (µs), as a
    /// client on another host would (0 = loopback only).
    rtt_us: u64,
}

impl ProtoStats {
    /// Count a round trip (and wait the simulated network time).
    fn trip(&mut self) {
        self.round_trips += 1;
        if self.rtt_us > 0 {
            std::thread::sleep(Duration::from_micros(self.rtt_us));
        }
    }
}

impl Proto {
    fn k(&self, s: &str) -> String {
        format!("{}{}", self.ns, s)
    }

    fn lock(
        &self,
        con: &mut Connection,
        token: &str,
        rng: &mut Rng,
        st: &mut ProtoStats,
    ) -> Res<()> {
        loop {
            st.trip();
            let r = q(
                con,
                redis::cmd("SET")
                    .arg(&self.lock_key)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(self.lock_ttl_ms),
            )?;
            if r == Value::Okay {
                return Ok(());
            }
            st.lock_retries += 1;
            let wait = if self.retry_us == 0 {
                0
            } else {
                rng.below(self.retry_us)
            };
            if wait == 0 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(wait));
            }
        }
    }

    fn unlock(&self, con: &mut Connection, token: &str, st: &mut ProtoStats) -> Res<()> {
        st.trip();
        let r = q(
            con,
            redis::cmd("EVALSHA")
                .arg(&self.unlock_sha)
                .arg(1)
                .arg(&self.lock_key)
                .arg(token),
        )?;
        if r != Value::Int(1) {
            return Err("lock lost before unlock (critical section outlived the lock TTL)".into());
        }
        Ok(())
    }

    /// Seed 000's createOrUpdateGradingJob under the protocol.
    fn enqueue(
        &self,
        con: &mut Connection,
        job: &Job,
        token: &str,
        rng: &mut Rng,
        st: &mut ProtoStats,
    ) -> Res<()> {
        self.lock(con, token, rng, st)?;
        let jk = self.k(&format!("job:{}", job.key));
        // Reads: does the job exist, and its current payload (the pre-image a
        // rollback of the SET restores).
        st.trip();
        let r = qp(
            con,
            redis::pipe().cmd("EXISTS").arg(&jk).cmd("GET").arg(&jk),
        )?;
        let exists = r.first() == Some(&Value::Int(1));
        let pre_image = r.get(1).and_then(bulk).map(<[u8]>::to_vec);
        let result = if exists {
            st.trip();
            match qp(
                con,
                redis::pipe().atomic().cmd("SET").arg(&jk).arg(&job.json),
            ) {
                Ok(_) => Ok(()),
                Err(e) => {
                    // Rollback: restore the pre-image.
                    if let Some(old) = &pre_image {
                        let _ = qp(con, redis::pipe().atomic().cmd("SET").arg(&jk).arg(old));
                    }
                    Err(e)
                }
            }
        } else {
            let release = now_ms() + job.priority;
            let (task, member, nonces, stack) = match &job.task {
                Some(task) => {
                    let nonces = self.k(&format!("Nonces.{task}"));
                    // generateNonce: release time, incremented while taken.
                    let mut nonce = release;
                    loop {
                        st.trip();
                        let taken = q(con, redis::cmd("SISMEMBER").arg(&nonces).arg(nonce))?;
                        if taken != Value::Int(1) {
                            break;
                        }
                        nonce += 1;
                    }
                    (
                        Some((task.clone(), nonce)),
                        format!("{task}.{nonce}"),
                        Some(nonces),
                        Some(self.k(&format!("SubmitterInfo.{task}"))),
                    )
                }
                None => (None, format!("immediate.{}", job.key), None, None),
            };
            let mut p = redis::pipe();
            p.atomic();
            if let (Some(stack), Some(nonces), Some((_, nonce))) = (&stack, &nonces, &task) {
                p.cmd("LPUSH").arg(stack).arg(&job.key);
                p.cmd("ZADD")
                    .arg(self.k("Reservations"))
                    .arg(release)
                    .arg(&member);
                p.cmd("SADD").arg(nonces).arg(*nonce);
            } else {
                p.cmd("ZADD")
                    .arg(self.k("Reservations"))
                    .arg(release)
                    .arg(&member);
            }
            p.cmd("SET").arg(&jk).arg(&job.json);
            st.trip();
            match qp(con, &p) {
                Ok(_) => Ok(()),
                Err(e) => {
                    // Rollback steps, grouped in a MULTI of their own.
                    let mut rb = redis::pipe();
                    rb.atomic();
                    if let (Some(stack), Some(nonces), Some((_, nonce))) = (&stack, &nonces, &task)
                    {
                        rb.cmd("LREM").arg(stack).arg(1).arg(&job.key);
                        rb.cmd("SREM").arg(nonces).arg(*nonce);
                    }
                    rb.cmd("ZREM").arg(self.k("Reservations")).arg(&member);
                    rb.cmd("DEL").arg(&jk);
                    let _ = qp(con, &rb);
                    Err(e)
                }
            }
        };
        self.unlock(con, token, st)?;
        result
    }

    /// Seed 000's getNextJob under the protocol. Returns whether a job came.
    fn pop(
        &self,
        con: &mut Connection,
        token: &str,
        rng: &mut Rng,
        st: &mut ProtoStats,
    ) -> Res<bool> {
        self.lock(con, token, rng, st)?;
        let res_key = self.k("Reservations");
        // Read the next reservation (the pre-image for a rollback ZADD).
        st.trip();
        let r = q(
            con,
            redis::cmd("ZRANGE")
                .arg(&res_key)
                .arg(0)
                .arg(0)
                .arg("WITHSCORES"),
        )?;
        let (member, score) = match &r {
            Value::Array(a) if a.len() == 2 => (
                text(&a[0]).unwrap_or_default(),
                text(&a[1]).unwrap_or_default(),
            ),
            _ => {
                self.unlock(con, token, st)?;
                return Ok(false);
            }
        };
        let (orca_key, coll) = if let Some(k) = member.strip_prefix("immediate.") {
            (k.to_string(), None)
        } else {
            let (task, nonce) = member
                .rsplit_once('.')
                .ok_or_else(|| format!("bad reservation {member}"))?;
            let stack = self.k(&format!("SubmitterInfo.{task}"));
            st.trip();
            let k = q(con, redis::cmd("LINDEX").arg(&stack).arg(0))?;
            let k = text(&k).ok_or_else(|| format!("empty stack for {member}"))?;
            (
                k,
                Some((stack, self.k(&format!("Nonces.{task}")), nonce.to_string())),
            )
        };
        let jk = self.k(&format!("job:{orca_key}"));
        // The job itself: what the worker gets, and the pre-image to restore.
        st.trip();
        let payload = q(con, redis::cmd("GET").arg(&jk))?;
        let mut p = redis::pipe();
        p.atomic();
        p.cmd("ZREM").arg(&res_key).arg(&member);
        if let Some((stack, nonces, nonce)) = &coll {
            p.cmd("SREM").arg(nonces).arg(nonce);
            p.cmd("LPOP").arg(stack);
        }
        p.cmd("DEL").arg(&jk);
        st.trip();
        let result = match qp(con, &p) {
            Ok(_) => Ok(true),
            Err(e) => {
                let mut rb = redis::pipe();
                rb.atomic();
                rb.cmd("ZADD").arg(&res_key).arg(&score).arg(&member);
                if let Some((stack, nonces, nonce)) = &coll {
                    rb.cmd("SADD").arg(nonces).arg(nonce);
                    rb.cmd("LPUSH").arg(stack).arg(&orca_key);
                }
                if let Some(b) = bulk(&payload) {
                    rb.cmd("SET").arg(&jk).arg(b);
                }
                let _ = qp(con, &rb);
                Err(e)
            }
        };
        self.unlock(con, token, st)?;
        result
    }
}

/// `protocol --impl clientside|module --op enqueue|pop`: each of `conns`
/// threads runs its share of `n` operations one after the other.
fn cmd_protocol(o: &Opts) -> Res<()> {
    let (port, t, start, n, coll, conns, queue) = job_opts(o, 2000, 4, "pq")?;
    let imp = o.s("impl", "clientside");
    let op = o.s("op", "enqueue");
    let rtt_us = o.n("rtt-us", 0)?;
    let mut con = connect(port)?;
    let unlock_sha = text(&q(
        &mut con,
        redis::cmd("SCRIPT").arg("LOAD").arg(UNLOCK_LUA),
    )?)
    .ok_or("SCRIPT LOAD failed")?;
    let proto = Arc::new(Proto {
        ns: o.s("ns", "cs:"),
        lock_key: o.s("lock", "cs:lock"),
        unlock_sha,
        retry_us: o.n("retry-us", 1000)?,
        lock_ttl_ms: o.n("lock-ttl-ms", 10_000)?,
    });
    let jobs = Arc::new(if op == "enqueue" {
        make_jobs(&t, start, n, coll)?
    } else {
        Vec::new()
    });
    let totals = Arc::new(std::sync::Mutex::new((0u64, 0u64, 0u64)));
    let (p2, j2, t2) = (proto.clone(), jobs.clone(), totals.clone());
    let imp2 = imp.clone();
    let op2 = op.clone();
    let secs = run_threads(port, conns, move |th, con| {
        let (lo, hi) = share(n as usize, conns, th);
        let mut rng = Rng::new(th as u64 + 1);
        let mut st = ProtoStats {
            lock_retries: 0,
            round_trips: 0,
            rtt_us,
        };
        let mut empty = 0u64;
        for i in lo..hi {
            let token = format!("{th}:{i}");
            match (imp2.as_str(), op2.as_str()) {
                ("clientside", "enqueue") => p2.enqueue(con, &j2[i], &token, &mut rng, &mut st)?,
                ("clientside", "pop") => {
                    if !p2.pop(con, &token, &mut rng, &mut st)? {
                        empty += 1;
                    }
                }
                ("module", "enqueue") => {
                    st.trip();
                    q(con, redis::cmd("ORCA.ENQUEUE").arg(&queue).arg(&j2[i].json))?;
                }
                ("module", "pop") => {
                    st.trip();
                    if q(con, redis::cmd("ORCA.POP").arg(&queue).arg("LEASE").arg(0))? == Value::Nil
                    {
                        empty += 1;
                    }
                }
                (i, o) => return Err(format!("unknown --impl {i} / --op {o}")),
            }
        }
        let mut tt = t2.lock().map_err(|_| "poisoned")?;
        tt.0 += st.lock_retries;
        tt.1 += st.round_trips;
        tt.2 += empty;
        Ok(())
    })?;
    let (retries, trips, empty) = *totals.lock().map_err(|_| "poisoned")?;
    if empty > 0 {
        return Err(format!("{empty} pops found the queue empty: fill it first"));
    }
    report(
        &format!("{imp}-{op}"),
        n,
        secs,
        &[
            ("lock_retries", retries.to_string()),
            (
                "round_trips_per_op",
                format!("{:.2}", trips as f64 / n.max(1) as f64),
            ),
            ("conns", conns.to_string()),
            ("rtt_us", rtt_us.to_string()),
        ],
    );
    Ok(())
}

// ---------------------------------------------------------------- standalone

const DEFAULT_TEMPLATE: &str = include_str!("job.json");

fn standalone() -> Res<()> {
    let s = Server::start(&[]);
    let tpl = s.dir.join("job.json");
    fs::write(&tpl, DEFAULT_TEMPLATE).map_err(e2s)?;
    let (port, tpl) = (s.port.to_string(), tpl.display().to_string());
    eprintln!("redis-server with the module on port {port}; 4 connections each");
    for (imp, op) in [
        ("module", "enqueue"),
        ("clientside", "enqueue"),
        ("module", "pop"),
        ("clientside", "pop"),
    ] {
        let a: Vec<String> = [
            "--port",
            &port,
            "--template",
            &tpl,
            "--impl",
            imp,
            "--op",
            op,
            "--n",
            "4000",
            "--conns",
            "4",
            "--collations",
            "1000",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        cmd_protocol(&Opts::parse(&a)?)?;
    }
    Ok(())
}

fn main() {
    // `cargo bench` appends `--bench`; ignore it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let result = match args.first().map(String::as_str) {
        None => standalone(),
        Some(sub) => Opts::parse(&args[1..]).and_then(|o| match sub {
            "load" => cmd_load(&o),
            "set" => cmd_set(&o),
            "delete" => cmd_delete(&o),
            "mix" => cmd_mix(&o),
            "cycle" => cmd_cycle(&o),
            "protocol" => cmd_protocol(&o),
            "pop" => cmd_pop(&o),
            "worker" => cmd_worker(&o),
            "handoff" => cmd_handoff(&o),
            "collation" => cmd_collation(&o),
            other => Err(format!(
                "unknown subcommand {other} (load, set, delete, mix, cycle, protocol, pop, worker, handoff, collation)"
            )),
        }),
    };
    if let Err(e) = result {
        eprintln!("clientside: {e}");
        std::process::exit(1);
    }
}

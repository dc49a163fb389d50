//! Jobs and the commands that move them: configs and orca keys, enqueue,
//! pop, ack/nack, status, the dead list, settings. Each helper runs one
//! command that must succeed and returns its reply typed (`Fields` for a
//! job reply), so a test reads as the steps a user takes.

use std::collections::HashMap;

use redis::Value;

use super::reply::*;
use crate::args;

/// 2^53 - 1: the largest time (ms) the module accepts.
pub const MAX_TIME: i64 = (1 << 53) - 1;

/// A lease long enough never to expire during a test (ms).
pub const LONG: i64 = 600_000;

// ---------------------------------------------------------------------------
// Configs and keys
// ---------------------------------------------------------------------------

/// The orca key of a config: base64(sha256(key + response_url)).
pub fn orca_key(key: &str, response_url: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(key.as_bytes());
    h.update(response_url.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// A job config: `key`, `response_url` = "http://cb/<key>", optional
/// collation (`"user.7"` -> `{"type":"user","id":"7"}`), priority (ms).
pub fn config(key: &str, collation: Option<&str>, priority: i64) -> String {
    let coll = match collation {
        None => String::new(),
        Some(c) => {
            let (t, id) = c.split_once('.').expect("collation as type.id");
            format!(r#","collation":{{"type":"{t}","id":"{id}"}}"#)
        }
    };
    format!(
        r#"{{"key":"{key}","response_url":"http://cb/{key}"{coll},"priority":{priority},"script":["make","test"]}}"#
    )
}

/// A config with the same orca key as `config(key, ..)` but another payload
/// (a regrade of the same job, told apart by `rev`).
pub fn revised(key: &str, rev: i64) -> String {
    format!(r#"{{"key":"{key}","response_url":"http://cb/{key}","rev":{rev}}}"#)
}

/// The orca key of a `config(key, ..)`.
pub fn key_of(key: &str) -> String {
    orca_key(key, &format!("http://cb/{key}"))
}

/// The orca keys of `config(name, ..)` for each name.
pub fn keys_of(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| key_of(n)).collect()
}

/// The `key` field of each job reply.
pub fn reply_keys(v: &[Fields]) -> Vec<String> {
    v.iter().map(|f| text(f, "key")).collect()
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------------------
// Writing jobs
// ---------------------------------------------------------------------------

/// `ORCA.ENQUEUE q cfg` on the server clock.
pub fn enqueue(c: &mut Con, q: &str, cfg: &str) -> Fields {
    fields(ok(c, &args!["ORCA.ENQUEUE", q, cfg]))
}

/// `ORCA.ENQUEUE q cfg NOW now`.
pub fn enqueue_at(c: &mut Con, q: &str, cfg: &str, now: i64) -> Fields {
    fields(ok(c, &args!["ORCA.ENQUEUE", q, cfg, "NOW", now]))
}

/// `ORCA.ENQUEUE` of `config(name, coll, priority)` on the server clock.
pub fn enqueue_job(c: &mut Con, q: &str, name: &str, coll: Option<&str>, priority: i64) -> Fields {
    enqueue(c, q, &config(name, coll, priority))
}

/// `ORCA.IMMEDIATE q cfg NOW now`.
pub fn immediate_at(c: &mut Con, q: &str, cfg: &str, now: i64) -> Fields {
    fields(ok(c, &args!["ORCA.IMMEDIATE", q, cfg, "NOW", now]))
}

/// `ORCA.IMMEDIATE` of `config(name, coll, 0)` on the server clock.
pub fn immediate_job(c: &mut Con, q: &str, name: &str, coll: Option<&str>) -> Fields {
    fields(ok(c, &args!["ORCA.IMMEDIATE", q, config(name, coll, 0)]))
}

/// `ORCA.REENQUEUE q cfg created_at`.
pub fn reenqueue(c: &mut Con, q: &str, cfg: &str, created_at: i64) -> Fields {
    fields(ok(c, &args!["ORCA.REENQUEUE", q, cfg, created_at]))
}

/// `ORCA.MOVE q key RELEASE|DELAY NOW now`.
pub fn move_at(c: &mut Con, q: &str, key: &str, action: &str, now: i64) -> Fields {
    fields(ok(c, &args!["ORCA.MOVE", q, key, action, "NOW", now]))
}

// ---------------------------------------------------------------------------
// Reading jobs
// ---------------------------------------------------------------------------

/// `ORCA.STATUS q key`, or `None` for nil.
pub fn status(c: &mut Con, q: &str, key: &str) -> Option<Fields> {
    match ok(c, &args!["ORCA.STATUS", q, key]) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

/// `ORCA.STATUS q key`, which must not be nil.
pub fn must_status(c: &mut Con, q: &str, key: &str) -> Fields {
    status(c, q, key).unwrap_or_else(|| panic!("ORCA.STATUS {q} {key} is nil"))
}

/// `ORCA.STATUS q key` while the job is still to run (queued, held,
/// leased, delayed or dead): `None` when it is unknown or finished
/// (state `done`, its result kept).
pub fn pending_status(c: &mut Con, q: &str, key: &str) -> Option<Fields> {
    status(c, q, key).filter(|f| text(f, "state") != "done")
}

/// The `state` of a job (`queued`, `leased`, ...), or `None` if unknown.
pub fn state(c: &mut Con, q: &str, key: &str) -> Option<String> {
    status(c, q, key).map(|f| text(&f, "state"))
}

/// `ORCA.LIST q opts...` as job replies.
pub fn list(c: &mut Con, q: &str, opts: &[&str]) -> Vec<Fields> {
    let mut a = args!["ORCA.LIST", q];
    a.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
    match ok(c, &a) {
        Value::Array(items) => items.into_iter().map(fields).collect(),
        other => panic!("ORCA.LIST {q} {opts:?}: expected an array, got {other:?}"),
    }
}

/// The whole listing (the queues here hold fewer than 1000 jobs).
pub fn list_all(c: &mut Con, q: &str) -> Vec<Fields> {
    list(c, q, &["LIMIT", "1000"])
}

/// `ORCA.STATS q`.
pub fn stats(c: &mut Con, q: &str) -> Fields {
    fields(ok(c, &args!["ORCA.STATS", q]))
}

/// `ORCA.SETTINGS q`.
pub fn settings(c: &mut Con, q: &str) -> Fields {
    fields(ok(c, &args!["ORCA.SETTINGS", q]))
}

/// The collation order of `q` (`lifo` / `fifo`).
pub fn order_of(c: &mut Con, q: &str) -> String {
    text(&settings(c, q), "order")
}

/// `EXISTS key` is 1.
pub fn exists(c: &mut Con, key: &str) -> bool {
    as_int(&ok(c, &args!["EXISTS", key])) == 1
}

// ---------------------------------------------------------------------------
// Workers: pop, ack, nack
// ---------------------------------------------------------------------------

/// `ORCA.POP q opts...`: the job reply, or `None` for nil.
pub fn pop_with(c: &mut Con, q: &str, opts: &[Vec<u8>]) -> Option<Fields> {
    let mut a = args!["ORCA.POP", q];
    a.extend(opts.iter().cloned());
    match ok(c, &a) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

/// `ORCA.POP q LEASE lease` (`LEASE 0`: seed 000's pop, the job leaves).
pub fn pop(c: &mut Con, q: &str, lease: i64) -> Option<Fields> {
    pop_with(c, q, &args!["LEASE", lease])
}

/// `ORCA.POP q LEASE lease`, which must hand out a job.
pub fn must_pop(c: &mut Con, q: &str, lease: i64) -> Fields {
    pop(c, q, lease).unwrap_or_else(|| panic!("ORCA.POP {q} handed out nothing"))
}

/// Pinned pop with a lease: `ORCA.POP q LEASE lease NOW now`.
pub fn pop_at(c: &mut Con, q: &str, lease: i64, now: i64) -> Option<Fields> {
    pop_with(c, q, &args!["LEASE", lease, "NOW", now])
}

/// `pop_at` that must hand out a job.
pub fn must_pop_at(c: &mut Con, q: &str, lease: i64, now: i64) -> Fields {
    pop_at(c, q, lease, now).unwrap_or_else(|| panic!("POP {q} at {now} gave nil"))
}

/// Job `name` (no collation) enqueued into an empty `q` on the server clock
/// and leased for `lease` ms at once: the pop reply.
pub fn leased(c: &mut Con, q: &str, name: &str, lease: i64) -> Fields {
    enqueue(c, q, &config(name, None, 0));
    must_pop(c, q, lease)
}

/// Job `name` (no collation) enqueued into an empty `q` at `now` and leased
/// for `lease` ms at once: the pop reply.
pub fn leased_at(c: &mut Con, q: &str, name: &str, lease: i64, now: i64) -> Fields {
    enqueue_at(c, q, &config(name, None, 0), now);
    must_pop_at(c, q, lease, now)
}

/// `ORCA.POP ... LEASE 0` (seed 000's pop: the job leaves) until nil; the
/// replies in order.
pub fn pop_all(con: &mut Con, key: &str) -> Vec<Fields> {
    let mut out = Vec::new();
    loop {
        match ok(con, &args!["ORCA.POP", key, "LEASE", "0"]) {
            Value::Nil => return out,
            v => out.push(fields(v)),
        }
        assert!(out.len() < 1_000_000, "ORCA.POP never returns nil");
    }
}

/// Pop everything; the orca keys in pop order.
pub fn pop_keys(c: &mut Con, q: &str) -> Vec<String> {
    reply_keys(&pop_all(c, q))
}

/// The lease token of a pop reply, which must not be nil.
pub fn lease(f: &Fields) -> String {
    opt_text(f, "lease").unwrap_or_else(|| panic!("reply has a nil lease: {f:?}"))
}

/// The `leases` field of a STATUS reply, each entry parsed.
pub fn leases(f: &Fields) -> Vec<Fields> {
    match get(f, "leases") {
        Value::Array(items) => items.iter().cloned().map(fields).collect(),
        other => panic!("leases is not an array: {other:?}"),
    }
}

/// `ORCA.ACK q key lease`: the raw reply (1 or an error).
pub fn ack(c: &mut Con, q: &str, key: &str, lease: &str) -> Value {
    raw(c, &args!["ORCA.ACK", q, key, lease])
}

/// `ORCA.ACK q key lease` must answer 1.
pub fn must_ack(c: &mut Con, q: &str, key: &str, lease: &str) {
    assert_eq!(ack(c, q, key, lease), Value::Int(1), "ACK {key} {lease}");
}

/// `ORCA.ACK` of the delivery `job` (a pop reply) with options `extra`,
/// which must answer 1.
pub fn ack_job(c: &mut Con, q: &str, job: &Fields, extra: &[&str]) {
    let mut a = args!["ORCA.ACK", q, text(job, "key"), text(job, "lease")];
    a.extend(extra.iter().map(|s| s.as_bytes().to_vec()));
    assert_eq!(as_int(&ok(c, &a)), 1);
}

/// `ORCA.NACK q key lease opts...`.
pub fn nack_with(c: &mut Con, q: &str, key: &str, lease: &str, opts: &[Vec<u8>]) -> Fields {
    let mut a = args!["ORCA.NACK", q, key, lease];
    a.extend(opts.iter().cloned());
    fields(ok(c, &a))
}

/// `ORCA.NACK q key lease NOW now`.
pub fn nack_at(c: &mut Con, q: &str, key: &str, lease: &str, now: i64) -> Fields {
    nack_with(c, q, key, lease, &args!["NOW", now])
}

/// `ORCA.NACK` of the delivery `job` (a pop reply) with options `extra`.
pub fn nack_job(c: &mut Con, q: &str, job: &Fields, extra: &[&str]) -> Fields {
    let opts = str_args(extra);
    nack_with(c, q, &text(job, "key"), &text(job, "lease"), &opts)
}

/// A delivery a worker holds.
#[derive(Clone, Debug)]
pub struct Held {
    pub q: String,
    pub key: String,
    pub lease: String,
}

/// The delivery of a pop reply from `q`.
pub fn held(q: &str, f: &Fields) -> Held {
    Held {
        q: q.to_string(),
        key: text(f, "key"),
        lease: text(f, "lease"),
    }
}

/// `ORCA.ACK` of a held delivery: the raw reply.
pub fn ack_held(c: &mut Con, h: &Held) -> Value {
    ack(c, &h.q, &h.key, &h.lease)
}

/// `ORCA.DEAD q LIST extra...` as job replies.
pub fn dead_list(c: &mut Con, q: &str, extra: &[Vec<u8>]) -> Vec<Fields> {
    let mut a = args!["ORCA.DEAD", q, "LIST"];
    a.extend(extra.iter().cloned());
    match ok(c, &a) {
        Value::Array(items) => items.into_iter().map(fields).collect(),
        other => panic!("DEAD LIST reply {other:?}"),
    }
}

/// `ORCA.RESULT q key`, or `None` for nil.
pub fn result(c: &mut Con, q: &str, key: &str) -> Option<Vec<u8>> {
    match ok(c, &args!["ORCA.RESULT", q, key]) {
        Value::Nil => None,
        v => Some(as_bytes(&v)),
    }
}

// ---------------------------------------------------------------------------
// Server settings
// ---------------------------------------------------------------------------

/// An ACL user `worker` with `password`, limited to the worker commands
/// (POP, ACK, NACK, EXTEND) on keys `queue:*`.
pub fn add_worker_user(c: &mut Con, password: &str) {
    ok(
        c,
        &args![
            "ACL",
            "SETUSER",
            "worker",
            "on",
            format!(">{password}"),
            "resetkeys",
            "~queue:*",
            "resetchannels",
            "-@all",
            "+orca.pop",
            "+orca.ack",
            "+orca.nack",
            "+orca.extend"
        ],
    );
}

/// `CONFIG SET name value`, which must answer OK.
pub fn config_set(c: &mut Con, name: &str, value: impl Arg) {
    let v = ok(c, &args!["CONFIG", "SET", name, value]);
    assert!(matches!(v, Value::Okay), "CONFIG SET {name}: {v:?}");
}

/// `CONFIG GET pattern` as a map.
pub fn config_get(c: &mut Con, pattern: &str) -> HashMap<String, String> {
    fields(ok(c, &args!["CONFIG", "GET", pattern]))
        .into_iter()
        .map(|(k, v)| (k, as_string(&v)))
        .collect()
}

//! The grading policies and fair workers as a test uses them: configs
//! naming a gate, `ORCA.GATE`, the policy settings, `ORCA.TICK`, listings by
//! state, `ORCA.MPOP`, `ACK`/`NACK ... NEXT`, `INFO orca` counters, and what
//! a server shows of a queue's policy state (to compare two servers, or one
//! server before and after a reload).

use std::collections::BTreeMap;
use std::time::Duration;

use redis::Value;

use super::checks::assert_rejected;
use super::jobs::*;
use super::reply::*;
use super::server::info_int;
use super::wait::wait_for;
use crate::args;

// ---------------------------------------------------------------------------
// Configs and gates
// ---------------------------------------------------------------------------

/// `config(name, coll, priority)` with `"gate": <gate>` (same orca key).
pub fn gated(name: &str, coll: Option<&str>, priority: i64, gate: &str) -> String {
    let c = config(name, coll, priority);
    format!("{},\"gate\":{}}}", &c[..c.len() - 1], json_str(gate))
}

/// `ORCA.GATE q g op`, which must succeed: the raw reply.
pub fn gate_op(c: &mut Con, q: &str, g: impl Arg, op: &str) -> Value {
    ok(c, &args!["ORCA.GATE", q, g, op])
}

/// `ORCA.GATE q g CLOSE`: 1 if it was open, 0 if already closed.
pub fn close_gate(c: &mut Con, q: &str, g: &str) -> i64 {
    as_int(&gate_op(c, q, g, "CLOSE"))
}

/// `ORCA.GATE q g OPEN`: the number of jobs released.
pub fn open_gate(c: &mut Con, q: &str, g: &str) -> i64 {
    as_int(&gate_op(c, q, g, "OPEN"))
}

/// `ORCA.GATE q g DROP`: the configs of the dropped jobs, as given.
pub fn drop_gate(c: &mut Con, q: &str, g: &str) -> Vec<String> {
    match gate_op(c, q, g, "DROP") {
        Value::Array(items) => items.iter().map(as_string).collect(),
        other => panic!("GATE DROP reply {other:?}"),
    }
}

/// The `gates` map of an `ORCA.STATS` reply: gate name -> held jobs.
pub fn gates_of(stats: &Fields) -> BTreeMap<Vec<u8>, i64> {
    count_map(get(stats, "gates"))
}

/// The `running` map of an `ORCA.STATS` reply: collation -> leased jobs.
pub fn running_of(stats: &Fields) -> BTreeMap<String, i64> {
    count_map(get(stats, "running"))
        .into_iter()
        .map(|(k, v)| (String::from_utf8(k).expect("utf-8 collation"), v))
        .collect()
}

fn count_map(v: &Value) -> BTreeMap<Vec<u8>, i64> {
    let pairs: Vec<(Value, Value)> = match v {
        Value::Array(items) => items
            .chunks(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
        Value::Map(m) => m.clone(),
        other => panic!("expected a map, got {other:?}"),
    };
    pairs
        .into_iter()
        .map(|(k, v)| (as_bytes(&k), as_int(&v)))
        .collect()
}

// ---------------------------------------------------------------------------
// Settings, ticks, listings
// ---------------------------------------------------------------------------

/// `ORCA.SETTINGS q opts...` (a change, which must succeed): the reply.
pub fn set(c: &mut Con, q: &str, opts: &[&str]) -> Fields {
    let mut a = args!["ORCA.SETTINGS", q];
    a.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
    fields(ok(c, &a))
}

/// Each `ORCA.SETTINGS q opts...` is refused with exactly its error, and
/// changes nothing.
pub fn assert_settings_refused(c: &mut Con, q: &str, cases: &[(Vec<&str>, &str)]) {
    for (opts, want) in cases {
        let mut a = args!["ORCA.SETTINGS", q];
        a.extend(opts.iter().map(|o| o.as_bytes().to_vec()));
        let e = assert_rejected(c, q, &a, &["ERR "]);
        assert_eq!(&e, want, "ORCA.SETTINGS {q} {opts:?}");
    }
}

/// `ORCA.TICK q NOW now`: the counts it reports.
pub fn tick_at(c: &mut Con, q: &str, now: i64) -> Fields {
    fields(ok(c, &args!["ORCA.TICK", q, "NOW", now]))
}

/// `ORCA.LIST q STATE state extra...` as job replies.
pub fn list_state(c: &mut Con, q: &str, state: &str, extra: &[&str]) -> Vec<Fields> {
    let mut opts = vec!["STATE", state, "LIMIT", "1000"];
    opts.extend_from_slice(extra);
    list(c, q, &opts)
}

/// Every job reply of a listing, fields in their debug form (to compare
/// two listings field by field).
pub fn shown(items: &[Fields]) -> Vec<BTreeMap<String, String>> {
    items
        .iter()
        .map(|f| {
            f.iter()
                .map(|(k, v)| (k.clone(), format!("{v:?}")))
                .collect()
        })
        .collect()
}

/// The whole queue order of `q` (`ORCA.LIST ... LIMIT 1000`), every field.
pub fn listing(c: &mut Con, q: &str) -> Vec<BTreeMap<String, String>> {
    shown(&list_all(c, q))
}

/// `(key, release_at)` of each job reply, in order.
pub fn keys_and_releases(items: &[Fields]) -> Vec<(String, i64)> {
    items
        .iter()
        .map(|f| (text(f, "key"), int(f, "release_at")))
        .collect()
}

/// Everything `ORCA.STATS`, `ORCA.SETTINGS` (through STATS, so replicas
/// answer it too) and the listings of every state show of each queue,
/// without the wait-time statistics (they move with the server clock).
pub fn policy_state(c: &mut Con, queues: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for q in queues {
        let mut st = stats(c, q);
        st.remove("wait_all");
        st.remove("wait_released");
        for (k, v) in st {
            out.insert(format!("{q} stats {k}"), format!("{v:?}"));
        }
        for state in ["QUEUED", "HELD", "LEASED", "DELAYED", "DEAD"] {
            out.insert(
                format!("{q} list {state}"),
                format!("{:?}", shown(&list_state(c, q, state, &[]))),
            );
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Workers: MPOP, NEXT
// ---------------------------------------------------------------------------

/// `ORCA.MPOP <n> queues... opts...` with n = the number of queues.
pub fn mpop_args(queues: &[&str], opts: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut a = args!["ORCA.MPOP", queues.len()];
    a.extend(queues.iter().map(|q| q.as_bytes().to_vec()));
    a.extend(opts.iter().cloned());
    a
}

/// `ORCA.MPOP` over `queues` (must succeed): the job reply, or `None`.
pub fn mpop(c: &mut Con, queues: &[&str], opts: &[Vec<u8>]) -> Option<Fields> {
    match ok(c, &mpop_args(queues, opts)) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

/// `cmd q key lease before... NEXT after...` for the delivery `job` (a pop
/// reply), `cmd` being `ORCA.ACK` or `ORCA.NACK`: the args.
pub fn next_args(
    cmd: &str,
    q: &str,
    job: &Fields,
    before: &[Vec<u8>],
    after: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let mut a = args![cmd, q, text(job, "key"), text(job, "lease")];
    a.extend(before.iter().cloned());
    a.push(b"NEXT".to_vec());
    a.extend(after.iter().cloned());
    a
}

/// `ORCA.ACK`/`ORCA.NACK ... NEXT ...` (must succeed): the next job's pop
/// reply, or `None`.
pub fn finish_next(
    c: &mut Con,
    cmd: &str,
    q: &str,
    job: &Fields,
    before: &[Vec<u8>],
    after: &[Vec<u8>],
) -> Option<Fields> {
    match ok(c, &next_args(cmd, q, job, before, after)) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

// ---------------------------------------------------------------------------
// INFO orca
// ---------------------------------------------------------------------------

/// A counter of `INFO orca`.
pub fn orca_info(c: &mut Con, field: &str) -> i64 {
    info_int(c, "orca", field)
}

/// Wait (at most `secs`) until the `INFO orca` counter `field` reaches
/// `at_least`: something only the server's timer does, observed without
/// touching any queue.
pub fn wait_orca_info(c: &mut Con, field: &str, at_least: i64, secs: u64) {
    wait_for(
        &format!("INFO orca {field} >= {at_least}"),
        Duration::from_secs(secs),
        || orca_info(c, field) >= at_least,
    );
}

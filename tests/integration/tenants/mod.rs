//! No tenant reaches another's queue. ACL (`~`, `%R~`, `%W~`) and Cluster
//! (`CROSSSLOT`, slots not served) check the keys Redis extracts with each
//! command's key specs; the module must touch exactly those keys, whatever
//! the spelling of a count (`02`, `+2`, ` 2`, `-0`, 2^32 + 2, ...) and the
//! order of the options. For every command of the module's table
//! (`orca::redis::commands::COMMANDS`, so a new command without
//! invocations here fails every test of this module):
//!
//! - `getkeys.rs`: `COMMAND GETKEYS` names exactly the queues each
//!   invocation names, and what the command reads (secrets of payloads and
//!   results in its reply) or changes (digests of every key) is among
//!   them; where Redis extracts no keys, the command is refused and changes
//!   nothing;
//! - `acl.rs`: users restricted to `t1:*` (with every command, worker-only,
//!   with `%R~t2:*`, with `%W~t2:*`) never change `t2:*` and never read it
//!   without read rights, in any spelling, directly, in MULTI and in
//!   scripts;
//! - `cluster.rs`: a queue in a slot the node does not serve is never
//!   served, queues of two slots get `CROSSSLOT`, in any spelling;
//! - `mirror.rs`: the module's mirror of Redis's key extraction finds what
//!   the server finds (`COMMAND GETKEYS`) for every kind of key spec.
//!
//! (The issue's probe: `ORCA.MPOP 02 course1:q course2:q LEASE 0 COUNT 100`
//! let a worker limited to `~course1:*` read and remove every job of
//! `course2:q`: Redis's extraction refused `02`, so ACL checked no key,
//! while the module read it as 2.)

mod acl;
mod cluster;
mod getkeys;
mod mirror;

use std::collections::BTreeMap;

use crate::common::*;
use redis::Value;

/// One tenant's queue as the invocations need it: a queued job, a running
/// lease, a kept result, a dead letter, a held job behind gate `g`. Every
/// payload carries `SECRET-<queue>`, the result is `RESULT-<queue>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    pub q: String,
    pub queued: String,
    pub leased: (String, String),
    pub result: String,
    pub dead: String,
}

/// A config of queue `q` named `name`, carrying `q`'s secret.
pub fn secret_config(q: &str, name: &str, priority: i64, gate: Option<&str>) -> String {
    let gate = gate
        .map(|g| format!(r#","gate":"{g}""#))
        .unwrap_or_default();
    format!(
        r#"{{"key":"{name}","response_url":"http://cb/{name}","priority":{priority},"secret":"SECRET-{q}"{gate}}}"#
    )
}

/// Build tenant queue `q` (on a dataset without it).
pub fn tenant(c: &mut Con, q: &str) -> Tenant {
    ok(c, &args!["ORCA.GATE", q, "g", "CLOSE"]);
    ok(
        c,
        &args!["ORCA.ENQUEUE", q, secret_config(q, "held", 0, Some("g"))],
    );
    for (i, name) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        ok(
            c,
            &args!["ORCA.ENQUEUE", q, secret_config(q, name, i as i64, None)],
        );
    }
    let a = held(q, &pop(c, q, LONG).expect("a"));
    ok(
        c,
        &args![
            "ORCA.ACK",
            q,
            &a.key,
            &a.lease,
            "RESULT",
            format!("RESULT-{q}")
        ],
    );
    let b = held(q, &pop(c, q, LONG).expect("b"));
    let d = held(q, &pop(c, q, LONG).expect("c"));
    ok(c, &args!["ORCA.NACK", q, &d.key, &d.lease, "DELAY", LONG]);
    config_set(c, "orca.max-attempts", 1);
    let dead = held(q, &pop(c, q, LONG).expect("d"));
    ok(c, &args!["ORCA.NACK", q, &dead.key, &dead.lease]);
    config_set(c, "orca.max-attempts", 5);
    Tenant {
        q: q.to_string(),
        queued: key_of("e"),
        leased: (b.key, b.lease),
        result: a.key,
        dead: dead.key,
    }
}

/// A command to run, with the keys it names (what `COMMAND GETKEYS` must
/// list when Redis can read it) and whether its counts are spelled as Redis
/// reads them.
#[derive(Clone, Debug)]
pub struct Invocation {
    pub args: Vec<Vec<u8>>,
    pub keys: Vec<String>,
    pub canonical: bool,
}

impl Invocation {
    fn new(args: Vec<Vec<u8>>, keys: &[&str]) -> Self {
        Invocation {
            args,
            keys: keys.iter().map(|k| k.to_string()).collect(),
            canonical: true,
        }
    }

    pub fn show(&self) -> String {
        show_args(&self.args)
    }
}

/// Every spelling of the count `n` to try: Redis reads the first alone
/// (`4294967296 + n` it reads as `n` after a 32-bit cast); the module must
/// refuse the others, and that one too when it exceeds what follows.
pub fn spellings(n: usize) -> Vec<(Vec<u8>, bool)> {
    let mut out = vec![(n.to_string().into_bytes(), true)];
    for s in [
        format!("0{n}"),
        format!("00{n}"),
        format!("+{n}"),
        format!(" {n}"),
        format!("{n} "),
        format!("{n}\0"),
        format!("-0{n}"),
        "-0".to_string(),
        "0".to_string(),
        format!("-{n}"),
        format!("{n}.0"),
        format!("0x{n}"),
        format!("{}", 4_294_967_296u64 + n as u64),
        format!("{}", 2_147_483_648u64 + n as u64),
        "99999999999999999999".to_string(),
        i64::MAX.to_string(),
        i64::MIN.to_string(),
    ] {
        out.push((s.into_bytes(), false));
    }
    out
}

/// An `ORCA.IMPORT` blob of one job carrying `q`'s secret (the form an AOF
/// rewrite writes, made by the module's own core), whose reservation nonce
/// is past those of a tenant's queue (nonces are unique in a queue).
fn import_blob(q: &str) -> Vec<u8> {
    use orca::core::{parse_config, Order, Queue};
    let mut other = Queue::new(Order::Lifo);
    let mut add = |name: &str| {
        let cfg = secret_config(q, name, 0, None);
        let c = parse_config(cfg.as_bytes()).unwrap();
        other.enqueue(&c, cfg.as_bytes(), 1000).unwrap();
        c.job_key
    };
    let pads: Vec<_> = (0..40).map(|i| add(&format!("pad-{i}"))).collect();
    add("imported");
    for k in &pads {
        other.delete(k).unwrap();
    }
    other.encode()
}

/// The invocations of command `name` aimed at tenant `x`; `own` is the
/// caller's tenant (for commands of several queues, in both orders, and
/// next to `empty`, a queue of the caller's with nothing to hand out).
pub fn invocations(name: &str, x: &Tenant, own: &Tenant, empty: &str) -> Vec<Invocation> {
    let q = x.q.as_str();
    let (lk, lt) = (&x.leased.0, &x.leased.1);
    let one = |a: Vec<Vec<u8>>| vec![Invocation::new(a, &[q])];
    let many = |v: Vec<Vec<Vec<u8>>>| -> Vec<Invocation> {
        v.into_iter().map(|a| Invocation::new(a, &[q])).collect()
    };
    match name {
        "orca.enqueue" => many(vec![
            args!["ORCA.ENQUEUE", q, secret_config(q, "new", 0, None)],
            args!["ORCA.ENQUEUE", q, secret_config(q, "e", 0, None), "NOW", 5],
        ]),
        "orca.immediate" => one(args!["ORCA.IMMEDIATE", q, secret_config(q, "i", 0, None)]),
        "orca.reenqueue" => one(args![
            "ORCA.REENQUEUE",
            q,
            secret_config(q, "r", 0, None),
            1000
        ]),
        "orca.move" => many(vec![
            args!["ORCA.MOVE", q, &x.queued, "DELAY"],
            args!["ORCA.MOVE", q, &x.queued, "RELEASE"],
        ]),
        "orca.delete" => many(vec![
            args!["ORCA.DELETE", q, &x.queued],
            args!["ORCA.DELETE", q, lk],
        ]),
        "orca.pop" => many(vec![
            args!["ORCA.POP", q, "LEASE", 0, "COUNT", 100],
            args!["ORCA.POP", q, "COUNT", 100, "FORMAT", "VALUES", "LEASE", 0],
            args!["ORCA.POP", q],
        ]),
        "orca.mpop" => {
            let mut out = Vec::new();
            let orders: [&[&str]; 3] = [&[q, &own.q], &[&own.q, q], &[empty, q]];
            let options: [Vec<Vec<u8>>; 3] = [
                args!["LEASE", 0, "COUNT", 100],
                args!["COUNT", 100, "FORMAT", "VALUES", "LEASE", 0],
                vec![],
            ];
            for queues in orders {
                for opts in &options {
                    for (n, canonical) in spellings(queues.len()) {
                        let mut a = args!["ORCA.MPOP", n];
                        a.extend(queues.iter().map(|k| k.as_bytes().to_vec()));
                        a.extend(opts.iter().cloned());
                        out.push(Invocation {
                            canonical,
                            ..Invocation::new(a, queues)
                        });
                    }
                }
            }
            out
        }
        "orca.ack" => {
            let mut out = many(vec![
                args!["ORCA.ACK", q, lk, lt, "RESULT", "r", "TTL", 1000],
                args!["ORCA.ACK", q, lk, lt, "TTL", 1000, "NEXT", "LEASE", 0],
            ]);
            out.extend(forwards("ORCA.ACK", x, own));
            out
        }
        "orca.mack" => {
            let mut out = Vec::new();
            let tails: [Vec<Vec<u8>>; 3] = [
                args!["RESULTS", "r", "TTL", 1000],
                args!["TTL", 1000, "RESULTS", "r", "NEXT", "LEASE", 0, "COUNT", 10],
                args!["NEXT", "COUNT", 10, "LEASE", 0, "FORMAT", "VALUES"],
            ];
            for tail in &tails {
                for (n, canonical) in spellings(1) {
                    let mut a = args!["ORCA.MACK", q, n, lk, lt];
                    a.extend(tail.iter().cloned());
                    out.push(Invocation {
                        canonical,
                        ..Invocation::new(a, &[q])
                    });
                }
            }
            out
        }
        "orca.nack" => {
            let mut out = many(vec![
                args!["ORCA.NACK", q, lk, lt, "DELAY", 1000],
                args!["ORCA.NACK", q, lk, lt, "NEXT", "LEASE", 0],
            ]);
            out.extend(forwards("ORCA.NACK", x, own));
            out
        }
        "orca.extend" => one(args!["ORCA.EXTEND", q, lk, lt, LONG]),
        "orca.result" => one(args!["ORCA.RESULT", q, &x.result]),
        "orca.dead" => many(vec![
            args!["ORCA.DEAD", q, "LIST"],
            args!["ORCA.DEAD", q, "REQUEUE", &x.dead],
            args!["ORCA.DEAD", q, "PURGE"],
        ]),
        "orca.tick" => one(args!["ORCA.TICK", q]),
        "orca.gate" => many(vec![
            args!["ORCA.GATE", q, "g", "OPEN"],
            args!["ORCA.GATE", q, "g", "DROP"],
            args!["ORCA.GATE", q, "g2", "CLOSE"],
        ]),
        "orca.len" => one(args!["ORCA.LEN", q]),
        "orca.check" => one(args!["ORCA.CHECK", q]),
        "orca.status" => many(vec![
            args!["ORCA.STATUS", q, &x.queued],
            args!["ORCA.STATUS", q, lk],
        ]),
        "orca.list" => many(vec![
            args!["ORCA.LIST", q],
            args!["ORCA.LIST", q, "STATE", "DEAD", "LIMIT", 10],
            args!["ORCA.LIST", q, "LIMIT", 10, "STATE", "HELD", "GATE", "g"],
        ]),
        "orca.stats" => one(args!["ORCA.STATS", q]),
        "orca.settings" => many(vec![
            args!["ORCA.SETTINGS", q],
            args!["ORCA.SETTINGS", q, "ORDER", "FIFO", "MAXRUNNING", 3],
        ]),
        "orca.import" => one(args!["ORCA.IMPORT", q, import_blob(q)]),
        other => panic!(
            "{other} is in the command table but not in tests/integration/tenants: \
             add its invocations (every spelling of its counts, every order of its options)"
        ),
    }
}

/// The hand-off spellings of `ORCA.ACK`/`ORCA.NACK` (`FORWARD <queue2>
/// <config>`), both ways between `x` and `own`: the second queue is a key
/// exactly when `FORWARD` stands as an option with its values and the
/// options are accepted (`RESULT FORWARD` is a result; `FORWARD` twice,
/// without its values, before a NUL byte or after `NEXT` names no second
/// queue, and all but the last are refused).
fn forwards(cmd: &str, x: &Tenant, own: &Tenant) -> Vec<Invocation> {
    let ack = cmd == "ORCA.ACK";
    let mut out = Vec::new();
    for (from, to) in [(x, own), (own, x), (x, x)] {
        let (q, q2) = (from.q.as_str(), to.q.as_str());
        let (k, l) = (&from.leased.0, &from.leased.1);
        let cfg = secret_config(q2, "fwd", 0, None);
        let head = || args![cmd, q, k, l];
        let with = |tail: Vec<Vec<u8>>| {
            let mut a = head();
            a.extend(tail);
            a
        };
        let both = |tail: Vec<Vec<u8>>| Invocation::new(with(tail), &[q, q2]);
        let first = |tail: Vec<Vec<u8>>| Invocation::new(with(tail), &[q]);
        // Aimed at `x`: a spelling that runs names `x`'s queue.
        let aimed = std::ptr::eq(from, x);
        let refused = |tail: Vec<Vec<u8>>| Invocation {
            canonical: false,
            ..first(tail)
        };
        // A value option of each: ACK's result and its time to live,
        // NACK's retry delay.
        let valued = if ack { "RESULT" } else { "DELAY" };
        let kept = if ack { "TTL" } else { "DELAY" };
        out.extend([
            both(args!["FORWARD", q2, &cfg]),
            both(args!["forward", q2, &cfg]),
            both(args!["FoRwArD", q2, &cfg, "NEXT", "LEASE", 0]),
            both(args![kept, 5, "FORWARD", q2, &cfg, "NEXT", "LEASE", 0]),
            refused(args!["FORWARD", q2, &cfg, "FORWARD", q2, &cfg]),
            refused(args!["FORWARD", q2]),
            refused(args!["FORWARD"]),
            refused(args![b"FORWARD\0".to_vec(), q2, &cfg]),
            refused(args![b"FORWARD\0x".to_vec(), q2, &cfg]),
            refused(args!["FORWARD", q2, &cfg, "BOGUS", 1]),
            refused(args![valued, 1, valued, 1, "FORWARD", q2, &cfg]),
        ]);
        if ack && aimed {
            out.extend([
                first(args!["RESULT", "FORWARD"]),
                first(args!["RESULT", "FORWARD", "TTL", 5]),
            ]);
        }
        if ack {
            out.extend([
                both(args!["RESULT", "FORWARD", "FORWARD", q2, &cfg]),
                both(args!["STOP", "RESULT", "r", "FORWARD", q2, &cfg, "TTL", 5]),
                // After NEXT, FORWARD is a pop option: refused, no key.
                refused(args!["NEXT", "FORWARD", q2, &cfg]),
            ]);
        } else {
            out.extend([
                both(args![
                    "DELAY", 1000, "FORWARD", q2, &cfg, "NEXT", "LEASE", 0
                ]),
                // NACK takes no STOP; a DELAY of `FORWARD` is no integer.
                refused(args!["STOP", "FORWARD", q2, &cfg]),
                refused(args!["DELAY", "FORWARD", q2, &cfg]),
            ]);
        }
    }
    out
}

/// Every command of the module's table.
pub fn command_names() -> Vec<String> {
    orca::redis::commands::COMMANDS
        .iter()
        .map(|c| c.name.to_str().expect("ASCII name").to_string())
        .collect()
}

/// Every text of a reply, errors included, flattened.
pub fn reply_text(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::BulkString(b) => out.extend_from_slice(b),
        Value::SimpleString(s) => out.extend_from_slice(s.as_bytes()),
        Value::VerbatimString { text, .. } => out.extend_from_slice(text.as_bytes()),
        Value::Array(items) | Value::Set(items) => items.iter().for_each(|i| reply_text(i, out)),
        Value::Map(m) => m.iter().for_each(|(k, v)| {
            reply_text(k, out);
            reply_text(v, out);
        }),
        Value::ServerError(_) => out.extend(error_text(v).unwrap_or_default().into_bytes()),
        Value::Int(i) => out.extend(i.to_string().into_bytes()),
        _ => {}
    }
    out.push(b'\n');
}

/// The tenants whose secrets (payload or result) a reply shows.
pub fn secrets_read(v: &Value, tenants: &[&str]) -> Vec<String> {
    let mut text = Vec::new();
    reply_text(v, &mut text);
    let has = |needle: &str| text.windows(needle.len()).any(|w| w == needle.as_bytes());
    tenants
        .iter()
        .filter(|t| has(&format!("SECRET-{t}")) || has(&format!("RESULT-{t}")))
        .map(|t| t.to_string())
        .collect()
}

/// `COMMAND GETKEYS` of an invocation: the keys, or `None` where Redis
/// extracts none (it then checks none).
pub fn getkeys(c: &mut Con, a: &[Vec<u8>]) -> Option<Vec<String>> {
    let mut g = args!["COMMAND", "GETKEYS"];
    g.extend(a.iter().cloned());
    match raw(c, &g) {
        Value::Array(keys) => Some(keys.iter().map(as_string).collect()),
        v => {
            let e = error_text(&v).unwrap_or_else(|| panic!("GETKEYS {v:?}"));
            assert!(
                e.contains("Invalid arguments") || e.contains("no key arguments"),
                "{}: GETKEYS {e}",
                show_args(a)
            );
            None
        }
    }
}

/// The digest of every key of the dataset, by key.
pub fn key_digests(c: &mut Con) -> BTreeMap<String, String> {
    let mut d = dataset_digests(c);
    d.remove("*");
    d
}

/// The keys whose digest differs (or that appeared or went).
pub fn changed(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// A dataset of tenants `t1:q`, `t2:q`, `t3:q` (in db 0, after FLUSHALL),
/// rebuilt identically whenever a command changed it.
pub struct Dataset {
    pub tenants: Vec<Tenant>,
    names: [String; 3],
    pub digests: BTreeMap<String, String>,
}

impl Dataset {
    pub fn new(c: &mut Con, names: [&str; 3]) -> Dataset {
        let mut d = Dataset {
            tenants: Vec::new(),
            names: names.map(str::to_string),
            digests: BTreeMap::new(),
        };
        d.rebuild(c);
        d
    }

    pub fn rebuild(&mut self, c: &mut Con) {
        ok(c, &args!["FLUSHALL"]);
        let tenants: Vec<Tenant> = self.names.iter().map(|q| tenant(c, q)).collect();
        if !self.tenants.is_empty() {
            assert_eq!(tenants, self.tenants, "the rebuilt tenants differ");
        }
        self.tenants = tenants;
        self.digests = key_digests(c);
    }

    /// After a command: the keys it changed (the dataset is rebuilt if any).
    pub fn settle(&mut self, c: &mut Con) -> Vec<String> {
        let now = key_digests(c);
        let ch = changed(&self.digests, &now);
        if !ch.is_empty() {
            self.rebuild(c);
        }
        ch
    }
}

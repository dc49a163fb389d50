//! A seeded workload of every write command (plus reads, refused input,
//! MULTI/EXEC and scripts) over several queues, and what it observes of a
//! server: existence, type, digest, settings and the STATUS of every job
//! name it uses, and the full pop order (popped on a `COPY`). Two servers
//! that ran the same pinned workload must observe the same; a replica must
//! observe what its master does (`assert_replica_equal`).

use std::collections::BTreeMap;

use redis::Value;

use super::checks::JOB_FIELDS;
use super::jobs::*;
use super::reply::*;
use super::rng::Rng;
use super::server::{sync_replica, Server};
use super::state::*;
use crate::args;

/// Job names the workload uses (`j0` .. `j{NAMES-1}`).
pub const NAMES: u64 = 60;

pub const COLLATIONS: [Option<&str>; 6] = [
    Some("user.1"),
    Some("user.2"),
    Some("user.3"),
    Some("team.1"),
    Some("team.2"),
    None,
];

/// A seeded mix of every write command (plus reads, refused input,
/// MULTI/EXEC and scripts) over several queues.
pub struct Workload {
    pub rng: Rng,
    pub clock: i64,
    /// Every time and buffer is given explicitly and no setting is changed,
    /// so two servers running the same workload reach the same state.
    pub pinned: bool,
    pub queues: Vec<String>,
    pub log: Vec<String>,
    /// Effective operations by kind (a DELETE that removed a job, a POP
    /// that returned one, a MOVE that moved, ...).
    pub effective: BTreeMap<String, usize>,
    /// Orca keys put into each queue so far (some popped or deleted since):
    /// MOVE and DELETE mostly aim at these.
    pub known: BTreeMap<String, Vec<String>>,
}

impl Workload {
    pub fn new(seed: u64, pinned: bool, queues: &[&str]) -> Self {
        Workload {
            rng: Rng::new(seed),
            clock: 1_000_000,
            pinned,
            queues: queues.iter().map(|q| q.to_string()).collect(),
            log: Vec::new(),
            effective: BTreeMap::new(),
            known: BTreeMap::new(),
        }
    }

    pub fn count(&mut self, a: &[Vec<u8>], v: &Value) {
        let mut kind = String::from_utf8_lossy(&a[0]).to_uppercase();
        let q = a
            .get(1)
            .map(|q| String::from_utf8_lossy(q).into_owned())
            .unwrap_or_default();
        let known = self.known.entry(q).or_default();
        match (kind.as_str(), v) {
            (
                "ORCA.ENQUEUE" | "ORCA.IMMEDIATE" | "ORCA.REENQUEUE" | "ORCA.POP",
                Value::Array(_),
            ) => {
                let k = as_string(get(&fields(v.clone()), "key"));
                known.retain(|x| *x != k);
                if kind != "ORCA.POP" {
                    known.push(k);
                }
            }
            ("ORCA.DELETE", Value::Int(1)) => {
                let k = String::from_utf8_lossy(&a[2]).into_owned();
                known.retain(|x| *x != k);
            }
            ("DEL", _) => known.clear(),
            _ => {}
        }
        if kind == "ORCA.MOVE" {
            kind = format!("{kind} {}", String::from_utf8_lossy(&a[3]).to_uppercase());
        }
        let effective = match v {
            Value::Nil | Value::ServerError(_) | Value::Int(0) => false,
            Value::Array(items) if kind == "EXEC" => {
                !items.iter().all(|i| matches!(i, Value::ServerError(_)))
            }
            _ => true,
        };
        if effective {
            *self.effective.entry(kind).or_default() += 1;
        }
    }

    /// The workload did exercise every kind of write.
    pub fn assert_varied(&self) {
        eprintln!("workload: effective operations {:?}", self.effective);
        for kind in [
            "ORCA.ENQUEUE",
            "ORCA.IMMEDIATE",
            "ORCA.REENQUEUE",
            "ORCA.MOVE RELEASE",
            "ORCA.MOVE DELAY",
            "ORCA.DELETE",
            "ORCA.POP",
            "ORCA.SETTINGS",
            "EXEC",
            "EVAL",
        ] {
            assert!(
                self.effective.get(kind).copied().unwrap_or(0) > 0,
                "workload never did an effective {kind}: {:?}",
                self.effective
            );
        }
    }

    pub fn run(&mut self, c: &mut redis::Connection, steps: usize) {
        for _ in 0..steps {
            self.step(c);
        }
        for q in self.queues.clone() {
            self.check(c, &q);
        }
        if steps >= 300 {
            self.assert_varied();
        }
    }

    pub fn fail(&self, msg: &str) -> ! {
        let tail = &self.log[self.log.len().saturating_sub(25)..];
        panic!("{msg}\nlast operations:\n  {}", tail.join("\n  "));
    }

    pub fn check(&self, c: &mut redis::Connection, q: &str) {
        let v = raw(c, &args!["ORCA.CHECK", q]);
        if !matches!(v, Value::Okay) && !matches!(&v, Value::SimpleString(s) if s == "OK") {
            self.fail(&format!("ORCA.CHECK {q}: {v:?}"));
        }
    }

    /// Run a command that must succeed.
    pub fn must(&mut self, c: &mut redis::Connection, a: Vec<Vec<u8>>) -> Value {
        self.log.push(show_args(&a));
        let v = raw(c, &a);
        if let Some(e) = error_text(&v) {
            self.fail(&format!("{} failed: {e}", show_args(&a)));
        }
        self.count(&a, &v);
        v
    }

    /// Run a command that may be refused with one of `allowed` errors.
    pub fn may(&mut self, c: &mut redis::Connection, a: Vec<Vec<u8>>, allowed: &[&str]) {
        self.log.push(show_args(&a));
        let v = raw(c, &a);
        if let Some(e) = error_text(&v) {
            if !allowed.iter().any(|p| e.starts_with(p)) {
                self.fail(&format!("{} failed: {e}", show_args(&a)));
            }
        }
        self.count(&a, &v);
    }

    /// Run a command that must be refused with the error code `code`.
    pub fn refused(&mut self, c: &mut redis::Connection, a: Vec<Vec<u8>>, code: &str) {
        self.log.push(show_args(&a));
        let v = raw(c, &a);
        match error_code(&v) {
            Some(e) if e == code => {}
            _ => self.fail(&format!("{} should be refused, got {v:?}", show_args(&a))),
        }
    }

    pub fn config(&mut self) -> String {
        self.named_config().1
    }

    /// A job config and the orca key of its job.
    pub fn named_config(&mut self) -> (String, String) {
        let name = format!("j{}", self.rng.below(NAMES));
        let coll = *self.rng.pick(&COLLATIONS);
        let prio = match self.rng.below(4) {
            0 => 0,
            1 => self.rng.below(5000) as i64,
            2 => 60_000,
            _ => 300_000,
        };
        let mut cfg = config(&name, coll, prio);
        if self.rng.chance(20) {
            // Vary the payload so updates are visible.
            cfg.insert_str(1, &format!("\"rev\":{},", self.rng.below(1000)));
        }
        (key_of(&name), cfg)
    }

    pub fn now_args(&mut self) -> Vec<Vec<u8>> {
        if self.pinned || self.rng.chance(50) {
            args!["NOW", self.clock]
        } else {
            vec![]
        }
    }

    pub fn step(&mut self, c: &mut redis::Connection) {
        let q = self.rng.pick(&self.queues).clone();
        self.clock += self.rng.below(2000) as i64;
        let known = self.known.get(&q).filter(|k| !k.is_empty()).cloned();
        let key = match known {
            Some(k) if self.rng.chance(80) => self.rng.pick(&k).clone(),
            _ => key_of(&format!("j{}", self.rng.below(NAMES))),
        };
        // A key that exists but is not in the queue order says why (its
        // code; docs/commands.md, "Error codes").
        let moved = ["NOJOB ", "IMMEDIATE ", "LEASED ", "DELAYED ", "DEAD "];
        match self.rng.below(100) {
            0..=33 => {
                let mut a = args!["ORCA.ENQUEUE", &q, self.config()];
                a.extend(self.now_args());
                self.must(c, a);
            }
            34..=39 => {
                let mut a = args!["ORCA.IMMEDIATE", &q, self.config()];
                a.extend(self.now_args());
                self.must(c, a);
            }
            40..=44 => {
                let at = (self.clock - self.rng.below(100_000) as i64).max(0);
                let a = args!["ORCA.REENQUEUE", &q, self.config(), at];
                self.must(c, a);
            }
            45..=51 => {
                let mut a = args!["ORCA.MOVE", &q, &key, "RELEASE"];
                a.extend(self.now_args());
                self.may(c, a, &moved);
            }
            52..=58 => {
                let mut a = args!["ORCA.MOVE", &q, &key, "DELAY"];
                if self.rng.chance(40) {
                    a.extend(args!["BUFFER", self.rng.below(20_000)]);
                }
                if self.rng.chance(30) {
                    a.extend(args!["NOW", self.clock]);
                }
                self.may(c, a, &moved);
            }
            59..=66 => {
                self.must(c, args!["ORCA.DELETE", &q, &key]);
            }
            67..=79 => {
                // At-most-once pops and leased ones (leases persist too).
                // The workload's pinned clock starts in 1970: a lease of
                // ~127 years ends in the future, so no server's timer
                // expires it mid-comparison.
                let lease = if self.rng.chance(50) {
                    "0"
                } else {
                    "4000000000000"
                };
                let mut a = args!["ORCA.POP", &q, "LEASE", lease];
                a.extend(self.now_args());
                self.must(c, a);
            }
            80..=82 => {
                let o = if self.rng.chance(50) { "LIFO" } else { "FIFO" };
                self.must(c, args!["ORCA.SETTINGS", &q, "ORDER", o]);
            }
            83 => {
                // A queue goes away; the next command recreates it.
                self.must(c, args!["DEL", &q]);
            }
            84..=85 if !self.pinned => {
                if self.rng.chance(50) {
                    let b = self.rng.below(30_000);
                    self.must(c, args!["CONFIG", "SET", "orca.move-to-back-buffer", b]);
                } else {
                    let o = if self.rng.chance(50) { "lifo" } else { "fifo" };
                    self.must(c, args!["CONFIG", "SET", "orca.default-order", o]);
                }
            }
            86..=88 => {
                let bad = *self.rng.pick(&[
                    "{",
                    "[]",
                    r#"{"key":1}"#,
                    r#"{"key":"j1","priority":-1}"#,
                    r#"{"key":"j2","collation":{"type":"group","id":"1"}}"#,
                ]);
                self.refused(c, args!["ORCA.ENQUEUE", &q, bad], "BADCONFIG");
                self.refused(c, args!["ORCA.MOVE", &q, &key, "SIDEWAYS"], "ERR");
                let cfg = self.config();
                self.refused(c, args!["ORCA.ENQUEUE", &q, cfg, "NOW", "-1"], "ERR");
            }
            89..=92 => {
                self.must(c, args!["ORCA.STATUS", &q, &key]);
                self.must(c, args!["ORCA.LEN", &q]);
                self.must(c, args!["ORCA.SETTINGS", &q]);
            }
            93..=95 => {
                // A transaction: two puts, a refused command, a pop.
                self.must(c, args!["MULTI"]);
                let mut a = args!["ORCA.ENQUEUE", &q, self.config()];
                a.extend(self.now_args());
                self.must(c, a);
                let mut a = args!["ORCA.IMMEDIATE", &q, self.config()];
                a.extend(self.now_args());
                self.must(c, a);
                self.must(c, args!["ORCA.ENQUEUE", &q, "{"]);
                let mut a = args!["ORCA.POP", &q, "LEASE", "4000000000000"];
                a.extend(self.now_args());
                self.must(c, a);
                self.must(c, args!["EXEC"]);
            }
            _ => {
                // The same commands from a script.
                let script = if self.pinned {
                    "redis.call('ORCA.ENQUEUE', KEYS[1], ARGV[1], 'NOW', ARGV[2]); \
                     return redis.call('ORCA.MOVE', KEYS[1], ARGV[3], 'DELAY', 'BUFFER', '1000')"
                } else {
                    "redis.call('ORCA.ENQUEUE', KEYS[1], ARGV[1]); \
                     return redis.call('ORCA.MOVE', KEYS[1], ARGV[3], 'DELAY')"
                };
                let (k, cfg) = self.named_config();
                let k = if self.rng.chance(50) { k } else { key.clone() };
                // A script passes the MOVE's code on (or ERR, as Redis
                // words a script's error).
                let mut allowed = moved.to_vec();
                allowed.push("ERR ");
                self.may(
                    c,
                    args!["EVAL", script, "1", &q, cfg, self.clock, k],
                    &allowed,
                );
            }
        }
    }
}

/// Everything observable about the queues: existence, type, digest,
/// settings and the STATUS of every job name the workload uses.
pub fn workload_state(c: &mut redis::Connection, queues: &[&str]) -> BTreeMap<String, String> {
    state_with(c, queues, true)
}

/// `state` without ORCA.SETTINGS, which a read-only replica refuses (see
/// `settings_read_form_works_on_a_replica`); the digest covers the order.
pub fn replica_state(c: &mut redis::Connection, queues: &[&str]) -> BTreeMap<String, String> {
    state_with(c, queues, false)
}

pub fn state_with(
    c: &mut redis::Connection,
    queues: &[&str],
    settings: bool,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for q in queues {
        if as_int(&ok(c, &args!["EXISTS", *q])) == 0 {
            out.insert(format!("{q} exists"), "no".into());
            continue;
        }
        out.insert(format!("{q} type"), as_string(&ok(c, &args!["TYPE", *q])));
        out.insert(format!("{q} digest"), digest(c, q));
        out.insert(
            format!("{q} len"),
            as_int(&ok(c, &args!["ORCA.LEN", *q])).to_string(),
        );
        if settings {
            let st = fields(ok(c, &args!["ORCA.SETTINGS", *q]));
            out.insert(format!("{q} settings"), format!("{:?}", sorted(&st)));
        }
        for n in 0..NAMES + 5 {
            let name = format!("j{n}");
            let v = ok(c, &args!["ORCA.STATUS", *q, key_of(&name)]);
            let s = match v {
                Value::Nil => "nil".to_string(),
                v => format!("{:?}", sorted(&fields(v))),
            };
            out.insert(format!("{q} {name}"), s);
        }
    }
    out
}

/// The job fields of a POP reply: what identifies the job and its place.
/// (Fields a later version may add for the hand-out itself, such as a lease
/// deadline from the server clock, legitimately differ between two pops.)
pub fn job_fields(f: &Fields) -> BTreeMap<String, String> {
    JOB_FIELDS
        .iter()
        .map(|k| (k.to_string(), format!("{:?}", get(f, k))))
        .collect()
}

/// The full pop order of `q`, popped on a copy (`q` is left as it is).
pub fn pops_via_copy(c: &mut redis::Connection, q: &str) -> Vec<BTreeMap<String, String>> {
    let tmp = format!("{q}:popcopy");
    if as_int(&ok(c, &args!["EXISTS", q])) == 0 {
        return vec![];
    }
    assert_eq!(as_int(&ok(c, &args!["COPY", q, &tmp, "REPLACE"])), 1);
    assert_eq!(digest(c, &tmp), digest(c, q), "COPY of {q} differs");
    let out = pop_all(c, &tmp).iter().map(job_fields).collect();
    ok(c, &args!["DEL", &tmp]);
    out
}

pub const WORKLOAD_QUEUES: [&str; 4] = ["q0", "q1", "q2", "q3"];

pub fn setup_orders(c: &mut redis::Connection) {
    ok(c, &args!["ORCA.SETTINGS", "q1", "ORDER", "FIFO"]);
    ok(c, &args!["ORCA.SETTINGS", "q3", "ORDER", "FIFO"]);
}

/// Everything a server shows of the workload's queues: `workload_state`,
/// `dataset_digests`, and the pop order of each queue (popped on a copy,
/// which leaves the dataset as it was).
pub struct Observed {
    pub state: BTreeMap<String, String>,
    pub digests: BTreeMap<String, String>,
    pub pops: Vec<Vec<BTreeMap<String, String>>>,
}

pub fn observe(c: &mut Con, queues: &[&str]) -> Observed {
    Observed {
        state: workload_state(c, queues),
        digests: dataset_digests(c),
        pops: queues.iter().map(|q| pops_via_copy(c, q)).collect(),
    }
}

/// The server shows exactly `before` again (`what`: when, e.g. "across
/// reload"), and every queue passes ORCA.CHECK.
pub fn assert_observes(c: &mut Con, queues: &[&str], before: &Observed, what: &str) {
    assert_same(
        &format!("state {what}"),
        &before.state,
        &workload_state(c, queues),
    );
    assert_same(
        &format!("digests {what}"),
        &before.digests,
        &dataset_digests(c),
    );
    for (q, pops) in queues.iter().zip(&before.pops) {
        assert_check(c, q);
        assert_eq!(&pops_via_copy(c, q), pops, "pop order of {q} {what}");
    }
}

/// Every key of the master has the same digest on the replica, the datasets
/// are equal and every queue passes ORCA.CHECK on both.
pub fn assert_replica_equal(master: &Server, replica: &Server) {
    sync_replica(master, replica);
    let (mut m, mut r) = (master.conn(), replica.conn());
    assert_same(
        "replica digests",
        &dataset_digests(&mut m),
        &dataset_digests(&mut r),
    );
    let queues = orca_queues(&mut m);
    assert!(!queues.is_empty());
    assert_eq!(orca_queues(&mut r), queues);
    let names: Vec<&str> = queues.iter().map(String::as_str).collect();
    assert_same(
        "replica state",
        &replica_state(&mut m, &names),
        &replica_state(&mut r, &names),
    );
    for q in &queues {
        assert_check(&mut m, q);
        assert_check(&mut r, q);
    }
}

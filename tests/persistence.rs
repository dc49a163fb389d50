//! Queues must survive persistence and replication exactly: DEBUG RELOAD,
//! RDB restart, AOF replay after `kill -9` (with and without the RDB
//! preamble, i.e. through `ORCA.IMPORT`), and master -> replica streams,
//! including replicas whose module settings differ from the master's.
//!
//! "Exactly" is checked three ways: `DEBUG DIGEST-VALUE` of every queue,
//! `ORCA.STATUS` of every job (nonce, release time, position, ...) and
//! the full pop order (popped on a `COPY`, so the original stays).
//! A random but seeded workload of every command drives the state.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use redis::Value;

/// Job names the workload uses (`j0` .. `j{NAMES-1}`).
const NAMES: u64 = 60;
const COLLATIONS: [Option<&str>; 6] = [
    Some("user.1"),
    Some("user.2"),
    Some("user.3"),
    Some("team.1"),
    Some("team.2"),
    None,
];

/// A seeded mix of every write command (plus reads, refused input,
/// MULTI/EXEC and scripts) over several queues.
struct Workload {
    rng: Rng,
    clock: i64,
    /// Every time and buffer is given explicitly and no setting is changed,
    /// so two servers running the same workload reach the same state.
    pinned: bool,
    queues: Vec<String>,
    log: Vec<String>,
    /// Effective operations by kind (a DELETE that removed a job, a POP
    /// that returned one, a MOVE that moved, ...).
    effective: BTreeMap<String, usize>,
    /// Orca keys put into each queue so far (some popped or deleted since):
    /// MOVE and DELETE mostly aim at these.
    known: BTreeMap<String, Vec<String>>,
}

impl Workload {
    fn new(seed: u64, pinned: bool, queues: &[&str]) -> Self {
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

    fn count(&mut self, a: &[Vec<u8>], v: &Value) {
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
    fn assert_varied(&self) {
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

    fn run(&mut self, c: &mut redis::Connection, steps: usize) {
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

    fn fail(&self, msg: &str) -> ! {
        let tail = &self.log[self.log.len().saturating_sub(25)..];
        panic!("{msg}\nlast operations:\n  {}", tail.join("\n  "));
    }

    fn check(&self, c: &mut redis::Connection, q: &str) {
        let v = raw(c, &args!["ORCA.CHECK", q]);
        if !matches!(v, Value::Okay) && !matches!(&v, Value::SimpleString(s) if s == "OK") {
            self.fail(&format!("ORCA.CHECK {q}: {v:?}"));
        }
    }

    /// Run a command that must succeed.
    fn must(&mut self, c: &mut redis::Connection, a: Vec<Vec<u8>>) -> Value {
        self.log.push(show_args(&a));
        let v = raw(c, &a);
        if let Some(e) = error_text(&v) {
            self.fail(&format!("{} failed: {e}", show_args(&a)));
        }
        self.count(&a, &v);
        v
    }

    /// Run a command that may be refused with one of `allowed` errors.
    fn may(&mut self, c: &mut redis::Connection, a: Vec<Vec<u8>>, allowed: &[&str]) {
        self.log.push(show_args(&a));
        let v = raw(c, &a);
        if let Some(e) = error_text(&v) {
            if !allowed.iter().any(|p| e.starts_with(p)) {
                self.fail(&format!("{} failed: {e}", show_args(&a)));
            }
        }
        self.count(&a, &v);
    }

    /// Run a command that must be refused.
    fn refused(&mut self, c: &mut redis::Connection, a: Vec<Vec<u8>>) {
        self.log.push(show_args(&a));
        let v = raw(c, &a);
        match error_text(&v) {
            Some(e) if e.starts_with("ERR ") => {}
            _ => self.fail(&format!("{} should be refused, got {v:?}", show_args(&a))),
        }
    }

    fn config(&mut self) -> String {
        self.named_config().1
    }

    /// A job config and the orca key of its job.
    fn named_config(&mut self) -> (String, String) {
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

    fn now_args(&mut self) -> Vec<Vec<u8>> {
        if self.pinned || self.rng.chance(50) {
            args!["NOW", self.clock]
        } else {
            vec![]
        }
    }

    fn step(&mut self, c: &mut redis::Connection) {
        let q = self.rng.pick(&self.queues).clone();
        self.clock += self.rng.below(2000) as i64;
        let known = self.known.get(&q).filter(|k| !k.is_empty()).cloned();
        let key = match known {
            Some(k) if self.rng.chance(80) => self.rng.pick(&k).clone(),
            _ => key_of(&format!("j{}", self.rng.below(NAMES))),
        };
        // A key that exists but is not in the queue order says why.
        let moved = [
            "ERR no such job",
            "ERR immediate jobs cannot be moved",
            "ERR job is running",
            "ERR job is waiting to be retried",
            "ERR job is a dead letter",
        ];
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
                self.refused(c, args!["ORCA.ENQUEUE", &q, bad]);
                self.refused(c, args!["ORCA.MOVE", &q, &key, "SIDEWAYS"]);
                let cfg = self.config();
                self.refused(c, args!["ORCA.ENQUEUE", &q, cfg, "NOW", "-1"]);
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
                self.may(
                    c,
                    args!["EVAL", script, "1", &q, cfg, self.clock, k],
                    &["ERR "],
                );
            }
        }
    }
}

/// Everything observable about the queues: existence, type, digest,
/// settings and the STATUS of every job name the workload uses.
fn state(c: &mut redis::Connection, queues: &[&str]) -> BTreeMap<String, String> {
    state_with(c, queues, true)
}

/// `state` without ORCA.SETTINGS, which a read-only replica refuses (see
/// `settings_read_form_works_on_a_replica`); the digest covers the order.
fn replica_state(c: &mut redis::Connection, queues: &[&str]) -> BTreeMap<String, String> {
    state_with(c, queues, false)
}

fn state_with(
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
fn job_fields(f: &Fields) -> BTreeMap<String, String> {
    const JOB: [&str; 8] = [
        "key",
        "collation",
        "immediate",
        "nonce",
        "created_at",
        "release_at",
        "attempts",
        "payload",
    ];
    JOB.iter()
        .map(|k| (k.to_string(), format!("{:?}", get(f, k))))
        .collect()
}

fn sorted(f: &Fields) -> BTreeMap<String, String> {
    f.iter()
        .map(|(k, v)| (k.clone(), format!("{v:?}")))
        .collect()
}

/// Digests of every key and of the whole dataset.
fn digests(c: &mut redis::Connection) -> BTreeMap<String, String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    let mut out: BTreeMap<String, String> =
        keys.iter().map(|k| (k.clone(), digest(c, k))).collect();
    out.insert("*".into(), as_string(&ok(c, &args!["DEBUG", "DIGEST"])));
    out
}

/// The full pop order of `q`, popped on a copy (`q` is left as it is).
fn pops_via_copy(c: &mut redis::Connection, q: &str) -> Vec<BTreeMap<String, String>> {
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

fn assert_same(what: &str, a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) {
    if a == b {
        return;
    }
    let mut diffs = Vec::new();
    for k in a.keys().chain(b.keys()) {
        if a.get(k) != b.get(k) && !diffs.iter().any(|(d, _, _)| d == k) {
            diffs.push((k.clone(), a.get(k).cloned(), b.get(k).cloned()));
        }
    }
    let shown: Vec<String> = diffs
        .iter()
        .take(10)
        .map(|(k, x, y)| format!("{k}:\n    before {x:?}\n    after  {y:?}"))
        .collect();
    panic!(
        "{what}: {} differences\n  {}",
        diffs.len(),
        shown.join("\n  ")
    );
}

const QUEUES: [&str; 4] = ["q0", "q1", "q2", "q3"];

fn setup_orders(c: &mut redis::Connection) {
    ok(c, &args!["ORCA.SETTINGS", "q1", "ORDER", "FIFO"]);
    ok(c, &args!["ORCA.SETTINGS", "q3", "ORDER", "FIFO"]);
}

/// Run the same pinned workload on `a` and on a control server, reload `a`
/// with `reload`, and check that `a` is unchanged by it and keeps behaving
/// exactly like the control afterwards.
fn reload_is_invisible(seed: u64, reload: impl FnOnce(&mut Server)) {
    let mut a = Server::start(&[]);
    let b = Server::start(&[]);
    let (mut ca, mut cb) = (a.conn(), b.conn());
    setup_orders(&mut ca);
    setup_orders(&mut cb);
    Workload::new(seed, true, &QUEUES).run(&mut ca, 400);
    Workload::new(seed, true, &QUEUES).run(&mut cb, 400);
    let before = state(&mut ca, &QUEUES);
    assert_same(
        "two servers, same workload",
        &before,
        &state(&mut cb, &QUEUES),
    );
    let pops_before: Vec<_> = QUEUES.iter().map(|q| pops_via_copy(&mut ca, q)).collect();
    assert!(
        pops_before.iter().map(Vec::len).sum::<usize>() > 20,
        "workload too small"
    );
    let digests_before = digests(&mut ca);

    drop(ca);
    reload(&mut a);
    let mut ca = a.conn();

    assert_same("state across reload", &before, &state(&mut ca, &QUEUES));
    assert_same("digests across reload", &digests_before, &digests(&mut ca));
    for (q, pops) in QUEUES.iter().zip(&pops_before) {
        assert_check(&mut ca, q);
        assert_eq!(
            &pops_via_copy(&mut ca, q),
            pops,
            "pop order of {q} across reload"
        );
    }

    // Hidden state (sequence numbers, front ties) must survive too: the
    // reloaded server keeps behaving exactly like the control.
    Workload::new(seed + 1000, true, &QUEUES).run(&mut ca, 300);
    Workload::new(seed + 1000, true, &QUEUES).run(&mut cb, 300);
    assert_same(
        "reloaded server vs control after more work",
        &state(&mut cb, &QUEUES),
        &state(&mut ca, &QUEUES),
    );
    for q in QUEUES {
        let pa: Vec<_> = pop_all(&mut ca, q).iter().map(job_fields).collect();
        let pb: Vec<_> = pop_all(&mut cb, q).iter().map(job_fields).collect();
        assert_eq!(pa, pb, "final pops of {q}");
    }
}

#[test]
fn debug_reload_is_invisible() {
    reload_is_invisible(11, |s| {
        let mut c = s.conn();
        ok(&mut c, &args!["DEBUG", "RELOAD"]);
    });
}

#[test]
fn rdb_restart_is_invisible() {
    reload_is_invisible(12, |s| s.restart());
}

#[test]
fn rdb_save_then_kill9_is_invisible() {
    reload_is_invisible(13, |s| {
        let mut c = s.conn();
        ok(&mut c, &args!["SAVE"]);
        drop(c);
        s.kill();
        s.start_again();
    });
}

#[test]
fn dump_restore_roundtrip() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    setup_orders(&mut c);
    Workload::new(21, true, &QUEUES).run(&mut c, 300);
    for q in QUEUES {
        if as_int(&ok(&mut c, &args!["EXISTS", q])) == 0 {
            continue;
        }
        let blob = as_bytes(&ok(&mut c, &args!["DUMP", q]));
        let copy = format!("{q}:restored");
        ok(&mut c, &args!["RESTORE", &copy, "0", blob]);
        assert_eq!(digest(&mut c, &copy), digest(&mut c, q));
        assert_check(&mut c, &copy);
        let a: Vec<_> = pop_all(&mut c, &copy).iter().map(job_fields).collect();
        let b: Vec<_> = pop_all(&mut c, q).iter().map(job_fields).collect();
        assert_eq!(a, b, "pops of {q}");
    }
}

// ---------------------------------------------------------------------------
// Replication
// ---------------------------------------------------------------------------

fn orca_keys(c: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    let mut keys: Vec<String> = keys
        .into_iter()
        .filter(|k| as_string(&ok(c, &args!["TYPE", k])) == "orcaqueue")
        .collect();
    keys.sort();
    keys
}

/// Every key of the master has the same digest on the replica, the datasets
/// are equal and every queue passes ORCA.CHECK on both.
fn assert_replica_equal(master: &Server, replica: &Server) {
    sync_replica(master, replica);
    let (mut m, mut r) = (master.conn(), replica.conn());
    assert_same("replica digests", &digests(&mut m), &digests(&mut r));
    let queues = orca_keys(&mut m);
    assert!(!queues.is_empty());
    assert_eq!(orca_keys(&mut r), queues);
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

#[test]
fn replica_matches_master_random_workload() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    setup_orders(&mut m);
    // Some state before the replica attaches (it arrives by RDB).
    Workload::new(31, false, &QUEUES).run(&mut m, 100);
    let replica = master.start_replica(&[], &[]);
    assert_replica_equal(&master, &replica);
    // Then a stream of commands, unpinned: the server clock, the master's
    // settings (changed on the way) and scripts / transactions.
    let mut w = Workload::new(32, false, &["q0", "q1", "q2", "q3", "q4"]);
    w.run(&mut m, 400);
    assert_replica_equal(&master, &replica);
    // The replica refuses writes.
    let mut r = replica.conn();
    let e = fails(&mut r, &args!["ORCA.ENQUEUE", "q0", config("x", None, 0)]);
    assert!(e.starts_with("READONLY"), "{e}");
    // A second replica started now gets everything by full sync.
    let late = master.start_replica(&[], &[]);
    assert_replica_equal(&master, &late);
}

#[test]
fn replica_with_other_settings_matches_master() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    enq_now(&mut m, "early", "a", Some("user.1"));
    let replica = master.start_replica(
        &["move-to-back-buffer", "5000", "default-order", "fifo"],
        &[],
    );
    let mut r = replica.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("orca.*")
        .query(&mut r)
        .unwrap();
    let got: BTreeMap<_, _> = got
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    assert_eq!(
        got.get("orca.move-to-back-buffer").map(String::as_str),
        Some("5000"),
        "{got:?}"
    );
    assert_eq!(
        got.get("orca.default-order").map(String::as_str),
        Some("fifo"),
        "{got:?}"
    );

    // Queues created after the replica attached, by each kind of put, with
    // the master's default order (LIFO) and DELAY with the master's buffer.
    for (i, cmd) in ["ORCA.ENQUEUE", "ORCA.IMMEDIATE"].iter().enumerate() {
        let q = format!("new{i}");
        for n in ["a", "b", "c"] {
            ok(&mut m, &args![*cmd, &q, config(n, Some("user.1"), 10)]);
        }
    }
    ok(
        &mut m,
        &args![
            "ORCA.REENQUEUE",
            "new2",
            config("a", Some("user.1"), 0),
            "5"
        ],
    );
    for n in ["b", "c", "d"] {
        enq_now(&mut m, "new2", n, Some("user.1"));
    }
    ok(&mut m, &args!["ORCA.MOVE", "new2", key_of("b"), "DELAY"]);
    ok(&mut m, &args!["ORCA.MOVE", "new2", key_of("c"), "RELEASE"]);
    enq_now(&mut m, "early", "b", Some("user.1"));
    ok(&mut m, &args!["ORCA.MOVE", "early", key_of("a"), "DELAY"]);
    assert_replica_equal(&master, &replica);

    // And a random workload on top.
    setup_orders(&mut m);
    Workload::new(41, false, &["q0", "q1", "q2", "q3", "new0", "new2"]).run(&mut m, 400);
    assert_replica_equal(&master, &replica);
}

/// Inspection works on replicas: `ORCA.SETTINGS <queue>` without `ORDER`
/// only reads, like ORCA.STATUS / ORCA.LEN / ORCA.CHECK.
#[test]
fn settings_are_readable_on_a_replica() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    ok(&mut m, &args!["ORCA.SETTINGS", "q", "ORDER", "FIFO"]);
    enq_now(&mut m, "q", "a", Some("user.1"));
    let replica = master.start_replica(&[], &[]);
    let mut r = replica.conn();
    assert_eq!(as_int(&ok(&mut r, &args!["ORCA.LEN", "q"])), 1);
    assert_check(&mut r, "q");
    assert!(ok(&mut r, &args!["ORCA.STATUS", "q", key_of("a")]) != Value::Nil);
    // ORCA.SETTINGS is a write command (it sets and may create a queue),
    // so a replica refuses it like any write; the read-only ORCA.STATS
    // carries the order there.
    let e = fails(&mut r, &args!["ORCA.SETTINGS", "q"]);
    assert!(e.contains("READONLY"), "{e}");
    let st = fields(ok(&mut r, &args!["ORCA.STATS", "q"]));
    assert_eq!(as_string(get(&st, "order")), "fifo");
    assert_eq!(as_int(get(&st, "queued")), 1);
}

fn enq_now(c: &mut redis::Connection, q: &str, name: &str, coll: Option<&str>) {
    ok(c, &args!["ORCA.ENQUEUE", q, config(name, coll, 0)]);
}

// ---------------------------------------------------------------------------
// AOF
// ---------------------------------------------------------------------------

fn wait_aof_rewrite_idle(c: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let p = info(c, "persistence");
        if p.get("aof_rewrite_in_progress").map(String::as_str) == Some("0")
            && p.get("aof_rewrite_scheduled").map(String::as_str) == Some("0")
        {
            assert_eq!(
                p.get("aof_last_bgrewrite_status").map(String::as_str),
                Some("ok"),
                "{p:?}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "AOF rewrite did not finish: {p:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Record everything, `kill -9`, start again on the same directory and
/// compare.
fn kill9_and_compare(s: &mut Server, queues: &[&str]) {
    let mut c = s.conn();
    let before = state(&mut c, queues);
    let digests_before = digests(&mut c);
    let pops_before: Vec<_> = queues.iter().map(|q| pops_via_copy(&mut c, q)).collect();
    // The copies were written to the AOF too; they are gone again.
    assert_eq!(digests(&mut c), digests_before);
    drop(c);
    s.kill();
    s.start_again();
    let mut c = s.conn();
    assert_same("state after AOF replay", &before, &state(&mut c, queues));
    assert_same(
        "digests after AOF replay",
        &digests_before,
        &digests(&mut c),
    );
    for (q, pops) in queues.iter().zip(&pops_before) {
        assert_check(&mut c, q);
        assert_eq!(
            &pops_via_copy(&mut c, q),
            pops,
            "pop order of {q} after AOF replay"
        );
    }
}

#[test]
fn aof_replay_after_kill9() {
    let mut s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    wait_aof_rewrite_idle(&mut c);
    setup_orders(&mut c);
    Workload::new(51, false, &QUEUES).run(&mut c, 400);
    drop(c);
    kill9_and_compare(&mut s, &QUEUES);
}

/// Without the RDB preamble an AOF rewrite stores queues as `ORCA.IMPORT`
/// commands (several per queue when it is large); replaying them and the
/// commands after them must give the same queues.
#[test]
fn aof_rewrite_without_preamble_replays_identically() {
    let mut s = Server::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "no",
    ]);
    let mut c = s.conn();
    wait_aof_rewrite_idle(&mut c);
    setup_orders(&mut c);
    Workload::new(61, false, &QUEUES).run(&mut c, 300);
    // A big queue: more units (single jobs, each collation) than one
    // rewritten command carries. Batched in transactions: one fsync each.
    for batch in 0..13 {
        ok(&mut c, &args!["MULTI"]);
        for i in batch * 100..(batch + 1) * 100 {
            let coll = match i % 4 {
                0 | 2 => None,
                1 => Some("user.9"),
                _ => Some("team.9"),
            };
            let name = format!("big{i}");
            let a = if i % 7 == 0 {
                args!["ORCA.IMMEDIATE", "big", config(&name, coll, i), "NOW", i]
            } else {
                args!["ORCA.ENQUEUE", "big", config(&name, coll, i), "NOW", i]
            };
            ok(&mut c, &a);
        }
        ok(&mut c, &args!["EXEC"]);
    }
    // Two payloads of 3 MB: more bytes than one rewritten command carries.
    for name in ["huge1", "huge2"] {
        let cfg = format!(r#"{{"key":"{name}","blob":"{}"}}"#, "z".repeat(3 << 20));
        ok(&mut c, &args!["ORCA.ENQUEUE", "big", cfg, "NOW", "5"]);
    }
    assert_eq!(qlen(&mut c, "big"), 1302);
    let mem = as_int(&ok(&mut c, &args!["MEMORY", "USAGE", "big"]));
    assert!(mem > 6 << 20, "MEMORY USAGE big = {mem}");
    let big_before = big_state(&mut c);
    ok(&mut c, &args!["BGREWRITEAOF"]);
    wait_aof_rewrite_idle(&mut c);
    let base = std::fs::read_dir(s.dir.join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().contains(".base.aof"))
        .expect("a base AOF file");
    let text = std::fs::read(base.path()).unwrap();
    assert!(text.starts_with(b"*"), "base AOF is not in command form");
    let pat = b"ORCA.IMPORT\r\n$3\r\nbig\r\n";
    let imports = text.windows(pat.len()).filter(|w| w == pat).count();
    assert!(
        imports >= 2,
        "expected several ORCA.IMPORT commands for big, found {imports}"
    );
    // More work after the rewrite, then kill -9.
    Workload::new(62, false, &QUEUES).run(&mut c, 200);
    drop(c);
    kill9_and_compare(&mut s, &QUEUES);
    let mut c = s.conn();
    assert_same("big queue", &big_before, &big_state(&mut c));
    assert_check(&mut c, "big");
}

/// Digest, settings and a sample of job statuses of the queue "big"
/// (popping 1300 jobs with fsync always would be slow; the digest covers
/// the whole queue).
fn big_state(c: &mut redis::Connection) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("digest".into(), digest(c, "big"));
    let st = fields(ok(c, &args!["ORCA.SETTINGS", "big"]));
    out.insert("settings".into(), format!("{:?}", sorted(&st)));
    for i in (0..1300).step_by(7).chain((1..1300).step_by(11)) {
        let name = format!("big{i}");
        let v = ok(c, &args!["ORCA.STATUS", "big", key_of(&name)]);
        out.insert(name, format!("{:?}", sorted(&fields(v))));
    }
    for name in ["huge1", "huge2"] {
        let f = fields(ok(c, &args!["ORCA.STATUS", "big", orca_key(name, "")]));
        let payload = as_bytes(get(&f, "payload"));
        assert_eq!(payload.len(), (3 << 20) + 20 + name.len());
        out.insert(
            name.into(),
            format!("{} {}", int(&f, "position"), int(&f, "nonce")),
        );
    }
    out
}

// ---------------------------------------------------------------------------
// ORCA.IMPORT: the AOF-rewrite form
// ---------------------------------------------------------------------------

/// The commands of a RESP command stream (an AOF file without preamble).
fn parse_commands(mut buf: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line<'a>(buf: &mut &'a [u8]) -> &'a [u8] {
        let end = buf.windows(2).position(|w| w == b"\r\n").expect("CRLF");
        let l = &buf[..end];
        *buf = &buf[end + 2..];
        l
    }
    let num = |l: &[u8]| -> usize { std::str::from_utf8(l).unwrap().parse().unwrap() };
    let mut out = Vec::new();
    while !buf.is_empty() {
        let head = line(&mut buf);
        assert_eq!(head[0], b'*', "not a RESP array");
        let n = num(&head[1..]);
        let mut cmd = Vec::with_capacity(n);
        for _ in 0..n {
            let h = line(&mut buf);
            assert_eq!(h[0], b'$');
            let len = num(&h[1..]);
            cmd.push(buf[..len].to_vec());
            buf = &buf[len + 2..];
        }
        out.push(cmd);
    }
    out
}

fn mutate(rng: &mut Rng, blob: &[u8]) -> Vec<u8> {
    let mut b = blob.to_vec();
    let at = |rng: &mut Rng, b: &Vec<u8>| rng.below(b.len().max(1) as u64) as usize;
    for _ in 0..1 + rng.below(3) {
        if b.is_empty() {
            b.push(1);
        }
        match rng.below(7) {
            0 => {
                let i = at(rng, &b);
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = at(rng, &b);
                b[i] = *rng.pick(&[0u8, 1, 2, 0x7f, 0x80, 0xff]);
            }
            2 => {
                let i = at(rng, &b);
                b.truncate(i);
            }
            3 => {
                let i = at(rng, &b);
                let extra: Vec<u8> = (0..rng.below(40)).map(|_| rng.below(256) as u8).collect();
                b.splice(i..i, extra);
            }
            4 => {
                // An 8-byte little-endian field set to an extreme value.
                if b.len() >= 8 {
                    let i = rng.below((b.len() - 7) as u64) as usize;
                    let v: u64 = *rng.pick(&[
                        0,
                        1,
                        u64::MAX,
                        i64::MAX as u64,
                        i64::MIN as u64,
                        1 << 53,
                        (1 << 53) - 1,
                        u32::MAX as u64 + 1,
                    ]);
                    b[i..i + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            5 => {
                // Duplicate a segment (repeated units, keys, reservations).
                let i = at(rng, &b);
                let j = (i + 1 + rng.below(200) as usize).min(b.len());
                let seg = b[i..j].to_vec();
                b.splice(j..j, seg);
            }
            _ => {
                let i = at(rng, &b);
                let j = (i + 1 + rng.below(64) as usize).min(b.len());
                b.drain(i..j);
            }
        }
    }
    b
}

/// The blobs an AOF rewrite emits rebuild the queue exactly on another
/// server; importing one twice is refused; corrupted blobs are refused or
/// give a queue that passes ORCA.CHECK and works; nothing panics.
#[test]
fn import_roundtrip_and_fuzz() {
    let src = Server::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "no",
        "--aof-use-rdb-preamble",
        "no",
    ]);
    let mut s = src.conn();
    wait_aof_rewrite_idle(&mut s);
    setup_orders(&mut s);
    let mut w = Workload::new(71, true, &QUEUES);
    w.run(&mut s, 400);
    ok(&mut s, &args!["BGREWRITEAOF"]);
    wait_aof_rewrite_idle(&mut s);
    let base = std::fs::read_dir(src.dir.join("appendonlydir"))
        .expect("appendonlydir")
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().contains(".base.aof"))
        .expect("a base AOF file");
    let imports: Vec<(String, Vec<u8>)> = parse_commands(&std::fs::read(base.path()).unwrap())
        .into_iter()
        .filter(|c| c[0].eq_ignore_ascii_case(b"ORCA.IMPORT"))
        .map(|c| (String::from_utf8(c[1].clone()).unwrap(), c[2].clone()))
        .collect();
    let queues = orca_keys(&mut s);
    assert!(!imports.is_empty());

    let dst = Server::start(&[]);
    let mut d = dst.conn();
    for (key, blob) in &imports {
        let n = as_int(&ok(&mut d, &args!["ORCA.IMPORT", key, blob.as_slice()]));
        assert!(n >= 0);
    }
    for q in &queues {
        assert_eq!(digest(&mut d, q), digest(&mut s, q), "imported {q}");
        assert_check(&mut d, q);
    }
    // The same units again collide with what is there: refused whole.
    for (key, blob) in &imports {
        if qlen(&mut d, key) > 0 {
            let before = digest(&mut d, key);
            let e = fails(&mut d, &args!["ORCA.IMPORT", key, blob.as_slice()]);
            assert!(e.starts_with("ERR "), "{e}");
            assert_eq!(digest(&mut d, key), before);
        }
    }

    let mut rng = Rng::new(72);
    let mut accepted = Vec::new();
    for i in 0..600 {
        let (_, blob) = rng.pick(&imports);
        let bad = mutate(&mut rng, blob);
        let fresh = format!("fz{i}");
        let v = raw(&mut d, &args!["ORCA.IMPORT", &fresh, bad.as_slice()]);
        match error_text(&v) {
            Some(e) => {
                assert!(e.starts_with("ERR "), "{e}");
                assert!(!e.contains("internal error"), "contained panic: {e}");
                assert_eq!(as_int(&ok(&mut d, &args!["EXISTS", &fresh])), 0);
            }
            None => {
                assert_check(&mut d, &fresh);
                accepted.push(fresh);
            }
        }
        // Into an existing queue: refused with nothing changed, or merged
        // into a queue that still passes the check.
        let target = rng.pick(&queues).clone();
        let before = digest(&mut d, &target);
        let v = raw(&mut d, &args!["ORCA.IMPORT", &target, bad.as_slice()]);
        match error_text(&v) {
            Some(e) => {
                assert!(
                    e.starts_with("ERR ") && !e.contains("internal error"),
                    "{e}"
                );
                assert_eq!(digest(&mut d, &target), before);
            }
            None => assert_check(&mut d, &target),
        }
    }
    eprintln!(
        "import fuzz: {} of 600 corrupted blobs accepted",
        accepted.len()
    );
    // Whatever was accepted is a working queue, also after a reload: every
    // job pops, unless a forged counter left the queue's sequence numbers
    // exhausted (accepted so that any saved queue reloads; operations then
    // refuse with a clear error, nothing changes).
    ok(&mut d, &args!["DEBUG", "RELOAD"]);
    for q in accepted.iter().chain(&queues) {
        assert_check(&mut d, q);
        let n = qlen(&mut d, q);
        let mut popped = 0;
        loop {
            let v = raw(&mut d, &args!["ORCA.POP", q, "LEASE", "0"]);
            match error_text(&v) {
                Some(e) if accepted.contains(q) && e.contains("sequence numbers exhausted") => {
                    break
                }
                Some(e) => panic!("POP of {q}: {e}"),
                None if matches!(v, Value::Nil) => {
                    assert_eq!(popped, n, "pops of {q}");
                    break;
                }
                None => popped += 1,
            }
        }
        assert_check(&mut d, q);
    }
    let log = dst.log();
    assert!(
        !log.contains("contained a panic"),
        "a command panicked:\n{log}"
    );
}

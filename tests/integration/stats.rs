//! Counting: `ORCA.STATS` (states, waits) against hand-computed values, and
//! the module's `INFO orca` section.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::*;
use redis::Value;

/// (count, avg, min, max) of a `wait_*` map; `None` for nil.
fn wait_of(f: &Fields, name: &str) -> (i64, Option<i64>, Option<i64>, Option<i64>) {
    let w = fields(get(f, name).clone());
    let opt = |n: &str| match get(&w, n) {
        Value::Nil => None,
        v => Some(as_int(v)),
    };
    assert_eq!(w.len(), 4, "{name} has fields count/avg/min/max: {w:?}");
    (int(&w, "count"), opt("avg"), opt("min"), opt("max"))
}

/// Check a `wait_*` map against the waits expected at the time `TIME` was
/// read: the server's clock moved on by some `d` (0..=2000 ms) when it ran
/// STATS, and every wait grows by that same `d`. Returns `d`.
fn check_waits(f: &Fields, name: &str, expected: &[i64]) -> Option<i64> {
    let (count, avg, min, max) = wait_of(f, name);
    assert_eq!(count, expected.len() as i64, "{name} count: {f:?}");
    if expected.is_empty() {
        assert_eq!((avg, min, max), (None, None, None), "{name} of nothing");
        return None;
    }
    let emin = *expected.iter().min().unwrap();
    let emax = *expected.iter().max().unwrap();
    let sum: i64 = expected.iter().sum();
    let eavg = sum.div_euclid(expected.len() as i64);
    let (avg, min, max) = (avg.unwrap(), min.unwrap(), max.unwrap());
    let d = min - emin;
    assert!(
        (0..=2000).contains(&d),
        "{name} min {min}, expected {emin} + 0..2000: {f:?}"
    );
    assert_eq!(max - emax, d, "{name} max {max} vs {emax} (+{d}): {f:?}");
    assert_eq!(avg - eavg, d, "{name} avg {avg} vs {eavg} (+{d}): {f:?}");
    Some(d)
}

#[test]
fn stats_hand_computed() {
    let (_s, mut c) = start_server();
    let q = "s";
    // Missing key: zero counts, empty waits.
    let f = stats(&mut c, "nokey");
    for name in [
        "queued",
        "delayed",
        "leased",
        "dead",
        "results",
        "collations",
        "immediate",
    ] {
        assert_eq!(int(&f, name), 0, "{name} of a missing key");
    }
    check_waits(&f, "wait_all", &[]);
    check_waits(&f, "wait_released", &[]);
    // Every documented field (later features may add more).
    for name in ["wait_all", "wait_released"] {
        assert!(f.contains_key(name), "STATS lacks {name}: {f:?}");
    }

    let t = server_ms(&mut c);
    let enq =
        |c: &mut redis::Connection,
         cmd: &str,
         key: &str,
         coll: Option<&str>,
         now: i64,
         prio: i64| { fields(ok(c, &args![cmd, q, config(key, coll, prio), "NOW", now])) };
    // job: (arrival, release) — see the pairing notes.
    enq(&mut c, "ORCA.ENQUEUE", "a", None, t - 10_000, 0); // rel t-10000
    enq(&mut c, "ORCA.ENQUEUE", "b", None, t - 5_000, 60_000); // rel t+55000
    enq(&mut c, "ORCA.ENQUEUE", "c", Some("user.1"), t - 9_000, 0); // res t-9000
    enq(
        &mut c,
        "ORCA.ENQUEUE",
        "d",
        Some("user.1"),
        t - 3_000,
        100_000,
    ); // res t+97000
    enq(&mut c, "ORCA.IMMEDIATE", "e", Some("user.2"), t - 7_000, 0); // rel t-7000
    enq(
        &mut c,
        "ORCA.ENQUEUE",
        "f",
        Some("team.x"),
        t - 2_000,
        1_000,
    ); // res t-1000
    enq(&mut c, "ORCA.ENQUEUE", "g", Some("team.x"), t - 20_000, 0); // res t-20000
                                                                     // LIFO pairing: d (newest of user.1) holds t-9000 (released) and c holds
                                                                     // t+97000 (not released); g (newest of team.x) holds t-20000, f t-1000.
    let rel: HashMap<String, i64> = list_all(&mut c, q)
        .iter()
        .map(|f| (text(f, "key"), int(f, "release_at")))
        .collect();
    let want_rel = [
        ("a", t - 10_000),
        ("b", t + 55_000),
        ("c", t + 97_000),
        ("d", t - 9_000),
        ("e", t - 7_000),
        ("f", t - 1_000),
        ("g", t - 20_000),
    ];
    for (k, r) in want_rel {
        assert_eq!(rel[&key_of(k)], r, "release_at of {k}");
    }

    let f = stats(&mut c, q);
    assert_eq!(int(&f, "queued"), 7);
    assert_eq!(int(&f, "delayed"), 0);
    assert_eq!(int(&f, "leased"), 0);
    assert_eq!(int(&f, "dead"), 0);
    assert_eq!(int(&f, "results"), 0);
    assert_eq!(int(&f, "collations"), 2);
    assert_eq!(int(&f, "immediate"), 1);
    let d1 = check_waits(
        &f,
        "wait_all",
        &[10_000, 5_000, 9_000, 3_000, 7_000, 2_000, 20_000],
    );
    let d2 = check_waits(&f, "wait_released", &[10_000, 3_000, 7_000, 2_000, 20_000]);
    assert_eq!(d1, d2, "one clock for the whole STATS");

    // Lease one: the lowest reservation, g.
    let g = must_pop(&mut c, q, 60_000);
    assert_eq!(text(&g, "key"), key_of("g"));
    let f = stats(&mut c, q);
    assert_eq!(
        (int(&f, "queued"), int(&f, "leased"), int(&f, "delayed")),
        (6, 1, 0)
    );
    assert_eq!(int(&f, "collations"), 2);
    check_waits(&f, "wait_all", &[10_000, 5_000, 9_000, 3_000, 7_000, 2_000]);
    check_waits(&f, "wait_released", &[10_000, 3_000, 7_000, 2_000]);

    // NACK it with a long delay: delayed.
    let r = nack_job(&mut c, q, &g, &["DELAY", "60000"]);
    assert_eq!(text(&r, "outcome"), "retry");
    let f = stats(&mut c, q);
    assert_eq!(
        (int(&f, "queued"), int(&f, "leased"), int(&f, "delayed")),
        (6, 0, 1)
    );
    check_waits(&f, "wait_all", &[10_000, 5_000, 9_000, 3_000, 7_000, 2_000]);

    // ACK the next (a) with a result: results 1.
    let a = must_pop(&mut c, q, 60_000);
    assert_eq!(text(&a, "key"), key_of("a"));
    ack_job(&mut c, q, &a, &["RESULT", "97"]);
    let f = stats(&mut c, q);
    assert_eq!((int(&f, "queued"), int(&f, "results")), (5, 1));

    // max-attempts 1: the next (d, on user.1's t-9000) dies on its NACK.
    config_set(&mut c, "orca.max-attempts", "1");
    let d = must_pop(&mut c, q, 60_000);
    assert_eq!(text(&d, "key"), key_of("d"));
    let r = nack_job(&mut c, q, &d, &[]);
    assert_eq!(text(&r, "outcome"), "dead");
    config_set(&mut c, "orca.max-attempts", "5");
    let f = stats(&mut c, q);
    assert_eq!(int(&f, "queued"), 4);
    assert_eq!(int(&f, "delayed"), 1);
    assert_eq!(int(&f, "leased"), 0);
    assert_eq!(int(&f, "dead"), 1);
    assert_eq!(int(&f, "results"), 1);
    assert_eq!(int(&f, "collations"), 2, "user.1 (c) and team.x (f)");
    assert_eq!(int(&f, "immediate"), 1);
    // b 5000 (t+55000), c 9000 (t+97000), e 7000 (t-7000), f 2000 (t-1000).
    check_waits(&f, "wait_all", &[5_000, 9_000, 7_000, 2_000]);
    check_waits(&f, "wait_released", &[7_000, 2_000]);

    // Released jobs count as immediate; an emptied collation is not counted.
    ok(&mut c, &args!["ORCA.MOVE", q, key_of("c"), "RELEASE"]);
    let f = stats(&mut c, q);
    assert_eq!(int(&f, "immediate"), 2);
    assert_eq!(int(&f, "collations"), 1);
    // c now released at min(now, lowest score) <= now.
    check_waits(&f, "wait_released", &[7_000, 2_000, 9_000]);

    // Only future jobs: wait_released empty.
    let q2 = "future";
    ok(
        &mut c,
        &args![
            "ORCA.ENQUEUE",
            q2,
            config("x", None, 600_000),
            "NOW",
            t - 4_000
        ],
    );
    let f = stats(&mut c, q2);
    check_waits(&f, "wait_all", &[4_000]);
    check_waits(&f, "wait_released", &[]);
    // Emptied queue: zero counts.
    ok(&mut c, &args!["ORCA.POP", q2, "LEASE", "0"]);
    let f = stats(&mut c, q2);
    assert_eq!(int(&f, "queued"), 0);
    check_waits(&f, "wait_all", &[]);

    // Errors.
    assert!(fails(&mut c, &args!["ORCA.STATS"]).starts_with("ERR wrong number of arguments"));
    assert!(
        fails(&mut c, &args!["ORCA.STATS", q, "x"]).starts_with("ERR wrong number of arguments")
    );
}

const INFO_FIELDS: [&str; 12] = [
    "orca_queues",
    "orca_jobs_queued",
    "orca_jobs_delayed",
    "orca_jobs_leased",
    "orca_jobs_dead",
    "orca_enqueued",
    "orca_popped",
    "orca_acked",
    "orca_nacked",
    "orca_expired",
    "orca_retried",
    "orca_dead",
];

fn orca_info(c: &mut redis::Connection) -> HashMap<String, i64> {
    let i = info(c, "orca");
    INFO_FIELDS
        .iter()
        .map(|&name| {
            let v = i
                .get(name)
                .unwrap_or_else(|| panic!("INFO orca has no {name}: {i:?}"));
            (name.to_string(), v.parse().expect("INFO orca value"))
        })
        .collect()
}

/// Expected `INFO orca` values.
struct Expect(HashMap<String, i64>);

impl Expect {
    fn add(&mut self, name: &str, d: i64) -> &mut Self {
        *self.0.get_mut(&format!("orca_{name}")).expect(name) += d;
        self
    }

    fn check(&self, c: &mut redis::Connection, step: &str) {
        assert_eq!(orca_info(c), self.0, "INFO orca after {step}");
    }

    /// Wait until INFO shows the expected values (timer-driven changes,
    /// background frees).
    fn wait(&self, c: &mut redis::Connection, step: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let got = orca_info(c);
            if got == self.0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "INFO orca after {step}: {got:?}, expected {:?}",
                self.0
            );
            sleep_ms(10);
        }
    }
}

#[test]
fn info_orca_counts() {
    let (_s, mut c) = start_server();
    let mut e = Expect(INFO_FIELDS.iter().map(|n| (n.to_string(), 0)).collect());
    e.check(&mut c, "start");
    // Both sections are there, also in INFO everything.
    let everything: String = redis::cmd("INFO")
        .arg("everything")
        .query(&mut c)
        .expect("INFO everything");
    assert!(everything.contains("# orca_queues") || everything.contains("# Orca_queues"));
    assert!(everything.contains("orca_jobs_queued:0"));
    assert!(everything.contains("orca_enqueued:0"));

    for k in ["a", "b", "c"] {
        ok(&mut c, &args!["ORCA.ENQUEUE", "q1", config(k, None, 0)]);
    }
    for k in ["d", "e"] {
        ok(
            &mut c,
            &args!["ORCA.ENQUEUE", "q2", config(k, Some("user.1"), 0)],
        );
    }
    e.add("queues", 2).add("jobs_queued", 5).add("enqueued", 5);
    e.check(&mut c, "5 enqueues");
    // An update is not a new job; an immediate one is.
    ok(&mut c, &args!["ORCA.ENQUEUE", "q1", config("a", None, 5)]);
    e.check(&mut c, "an update");
    ok(&mut c, &args!["ORCA.IMMEDIATE", "q1", config("f", None, 0)]);
    e.add("jobs_queued", 1).add("enqueued", 1);
    e.check(&mut c, "an immediate");
    // A failed write on a missing key creates no queue.
    fails(&mut c, &args!["ORCA.ENQUEUE", "q3", "{bad json"]);
    assert_eq!(as_int(&ok(&mut c, &args!["EXISTS", "q3"])), 0);
    e.check(&mut c, "a failed enqueue");

    // q1: f, a, b, c  (f immediate at now, then by arrival)
    let j = must_pop(&mut c, "q1", 60_000);
    e.add("popped", 1)
        .add("jobs_queued", -1)
        .add("jobs_leased", 1);
    e.check(&mut c, "a pop");
    ack_job(&mut c, "q1", &j, &[]);
    e.add("acked", 1).add("jobs_leased", -1);
    e.check(&mut c, "an ack");

    let j = must_pop(&mut c, "q1", 60_000);
    let delayed_key = text(&j, "key");
    nack_job(&mut c, "q1", &j, &["DELAY", "60000"]);
    e.add("popped", 1).add("jobs_queued", -1).add("nacked", 1);
    e.add("jobs_delayed", 1);
    e.check(&mut c, "pop + nack with delay");

    ok(&mut c, &args!["ORCA.POP", "q2", "LEASE", "0"]);
    e.add("popped", 1).add("jobs_queued", -1);
    e.check(&mut c, "pop LEASE 0");

    // A retry due at once: the timer brings it back.
    let j = must_pop(&mut c, "q1", 60_000);
    nack_job(&mut c, "q1", &j, &["DELAY", "100"]);
    e.add("popped", 1).add("nacked", 1).add("jobs_queued", -1);
    e.add("jobs_delayed", 1);
    e.check(&mut c, "nack DELAY 100");
    e.add("retried", 1)
        .add("jobs_queued", 1)
        .add("jobs_delayed", -1);
    e.wait(&mut c, "the retry coming due");

    // A lease that expires (the job comes back: queued again).
    must_pop(&mut c, "q1", 50);
    e.add("popped", 1).add("expired", 1);
    e.wait(&mut c, "an expired lease");

    // Dead by NACK and dead by expiry with max-attempts 1.
    config_set(&mut c, "orca.max-attempts", "1");
    let j = must_pop(&mut c, "q2", 60_000);
    assert_eq!(text(&nack_job(&mut c, "q2", &j, &[]), "outcome"), "dead");
    e.add("popped", 1).add("nacked", 1).add("dead", 1);
    e.add("jobs_queued", -1).add("jobs_dead", 1);
    e.check(&mut c, "a NACK to the dead list");
    // A lease that expires on its last attempt ended by expiry and was
    // buried: it counts in both orca_expired and orca_dead.
    let j = must_pop(&mut c, "q1", 50);
    e.add("popped", 1)
        .add("expired", 1)
        .add("dead", 1)
        .add("jobs_queued", -1)
        .add("jobs_dead", 1);
    e.wait(&mut c, "an expiry to the dead list");
    assert_eq!(
        state(&mut c, "q1", &text(&j, "key")).as_deref(),
        Some("dead")
    );
    config_set(&mut c, "orca.max-attempts", "5");

    // Regrades (q4, deleted afterwards). A regrade of a running job
    // supersedes its lease: when that lease expires it is dropped, not
    // requeued, and still counts as expired.
    ok(&mut c, &args!["ORCA.ENQUEUE", "q4", config("r", None, 0)]);
    e.add("queues", 1).add("jobs_queued", 1).add("enqueued", 1);
    e.check(&mut c, "an enqueue in q4");
    must_pop(&mut c, "q4", 1_000);
    e.add("popped", 1)
        .add("jobs_queued", -1)
        .add("jobs_leased", 1);
    ok(&mut c, &args!["ORCA.ENQUEUE", "q4", config("r", None, 1)]);
    e.add("enqueued", 1).add("jobs_queued", 1);
    e.check(&mut c, "a regrade of a leased job");
    e.add("expired", 1).add("jobs_leased", -1);
    e.wait(&mut c, "the superseded lease expiring (dropped)");
    assert_eq!(state(&mut c, "q4", &key_of("r")).as_deref(), Some("queued"));
    // A regrade drops a pending retry at once; it never comes due, so it is
    // not counted as retried.
    let j = must_pop(&mut c, "q4", 60_000);
    nack_job(&mut c, "q4", &j, &["DELAY", "60000"]);
    e.add("popped", 1).add("nacked", 1).add("jobs_queued", -1);
    e.add("jobs_delayed", 1);
    e.check(&mut c, "pop + nack with delay in q4");
    ok(&mut c, &args!["ORCA.ENQUEUE", "q4", config("r", None, 2)]);
    e.add("enqueued", 1)
        .add("jobs_delayed", -1)
        .add("jobs_queued", 1);
    e.check(&mut c, "a regrade of a delayed job (retry dropped at once)");
    // NACK of a superseded lease on its last attempt: superseded, not dead.
    config_set(&mut c, "orca.max-attempts", "1");
    let j = must_pop(&mut c, "q4", 60_000);
    e.add("popped", 1)
        .add("jobs_queued", -1)
        .add("jobs_leased", 1);
    ok(&mut c, &args!["ORCA.ENQUEUE", "q4", config("r", None, 3)]);
    e.add("enqueued", 1).add("jobs_queued", 1);
    assert_eq!(
        text(&nack_job(&mut c, "q4", &j, &[]), "outcome"),
        "superseded"
    );
    e.add("nacked", 1).add("jobs_leased", -1);
    e.check(&mut c, "a superseded NACK on the last attempt");
    config_set(&mut c, "orca.max-attempts", "5");
    assert_eq!(as_int(&ok(&mut c, &args!["DEL", "q4"])), 1);
    e.add("queues", -1).add("jobs_queued", -1);
    e.check(&mut c, "DEL q4");

    // Purge and delete.
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DEAD", "q1", "PURGE"])), 1);
    e.add("jobs_dead", -1);
    e.check(&mut c, "DEAD PURGE");
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q1", &delayed_key])),
        1
    );
    e.add("jobs_delayed", -1);
    e.check(&mut c, "DELETE of a delayed job");

    // Gauges follow the sum of every queue's STATS.
    let sum = |c: &mut redis::Connection, field: &str| -> i64 {
        ["q1", "q2"].iter().map(|q| int(&stats(c, q), field)).sum()
    };
    let cur = orca_info(&mut c);
    for (g, field) in [
        ("orca_jobs_queued", "queued"),
        ("orca_jobs_delayed", "delayed"),
        ("orca_jobs_leased", "leased"),
        ("orca_jobs_dead", "dead"),
    ] {
        assert_eq!(cur[g], sum(&mut c, field), "{g} vs STATS");
    }
    let q1_queued = int(&stats(&mut c, "q1"), "queued");
    let q2_dead = int(&stats(&mut c, "q2"), "dead");
    assert_eq!((q1_queued, q2_dead), (1, 1));

    // COPY / DEL / RESTORE / EXPIRE / RENAME / MOVE / DEBUG RELOAD.
    ok(&mut c, &args!["COPY", "q1", "q9"]);
    e.add("queues", 1).add("jobs_queued", q1_queued);
    e.check(&mut c, "COPY");
    assert_eq!(as_int(&ok(&mut c, &args!["DEL", "q9"])), 1);
    e.add("queues", -1).add("jobs_queued", -q1_queued);
    e.check(&mut c, "DEL");
    let dump = as_bytes(&ok(&mut c, &args!["DUMP", "q2"]));
    ok(&mut c, &args!["RESTORE", "q2r", "0", dump]);
    e.add("queues", 1).add("jobs_dead", q2_dead);
    e.check(&mut c, "RESTORE");
    ok(&mut c, &args!["PEXPIRE", "q2r", "20"]);
    e.add("queues", -1).add("jobs_dead", -q2_dead);
    wait_for("q2r to expire", Duration::from_secs(5), || {
        as_int(&ok(&mut c, &args!["EXISTS", "q2r"])) == 0
    });
    e.check(&mut c, "an expired key");
    ok(&mut c, &args!["RENAME", "q2", "q2b"]);
    e.check(&mut c, "RENAME");
    assert_eq!(as_int(&ok(&mut c, &args!["MOVE", "q2b", "1"])), 1);
    e.check(&mut c, "MOVE to db 1");
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    e.check(&mut c, "DEBUG RELOAD");
    // An empty queue made by SETTINGS counts as a queue.
    ok(&mut c, &args!["ORCA.SETTINGS", "empty", "ORDER", "FIFO"]);
    e.add("queues", 1);
    e.check(&mut c, "SETTINGS creating a queue");
    // An emptied queue is still a queue.
    let left = qlen(&mut c, "q1");
    for _ in 0..left {
        ok(&mut c, &args!["ORCA.POP", "q1", "LEASE", "0"]);
    }
    e.add("popped", left).add("jobs_queued", -left);
    e.check(&mut c, "emptying q1");
    assert_eq!(as_int(&ok(&mut c, &args!["EXISTS", "q1"])), 1);

    // FLUSHALL: gauges to zero, totals kept.
    ok(&mut c, &args!["FLUSHALL"]);
    for g in [
        "queues",
        "jobs_queued",
        "jobs_delayed",
        "jobs_leased",
        "jobs_dead",
    ] {
        let cur = e.0[&format!("orca_{g}")];
        e.add(g, -cur);
    }
    // Valkey 8 frees on FLUSHALL in the background by default
    // (lazyfree-lazy-user-flush yes): wait for the counts.
    e.wait(&mut c, "FLUSHALL");

    // Big queues freed in the background (lazyfree): UNLINK, FLUSHALL ASYNC.
    for q in ["big1", "big2"] {
        for i in 0..300 {
            ok(
                &mut c,
                &args![
                    "ORCA.ENQUEUE",
                    q,
                    config(&format!("{q}-{i}"), Some("user.9"), 0)
                ],
            );
        }
    }
    e.add("queues", 2)
        .add("jobs_queued", 600)
        .add("enqueued", 600);
    e.check(&mut c, "600 enqueues");
    assert_eq!(as_int(&ok(&mut c, &args!["UNLINK", "big1"])), 1);
    e.add("queues", -1).add("jobs_queued", -300);
    e.wait(&mut c, "UNLINK of a big queue");
    ok(&mut c, &args!["FLUSHALL", "ASYNC"]);
    e.add("queues", -1).add("jobs_queued", -300);
    e.wait(&mut c, "FLUSHALL ASYNC");
}

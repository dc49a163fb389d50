//! Encoding version 2 (commit eb5f3c2, the last release before this one):
//! `tests/fixtures/v2/`. Every kind of state that release saved: LIFO and
//! FIFO collations in both forms (a small list and a large tree), released
//! and delayed moves, immediates and re-enqueues, held jobs behind a closed
//! gate and an empty closed gate, submission windows of automatic delays,
//! running caps, lifetimes and bounds, leases (one superseded by a regrade),
//! a retry, dead letters of every cause, a kept result and a cancelled lease.

use std::collections::BTreeMap;

use redis::Value;

use super::*;
use crate::common::*;

const QUEUES: [&str; 3] = ["policies", "large", "expired"];

const LEASE: i64 = 600_000;

fn collation(i: i64) -> Option<&'static str> {
    match i % 6 {
        0 => None,
        1 => Some("user.1"),
        2 => Some("user.2"),
        3 => Some("team.a"),
        4 => Some("user.1"),
        _ => Some("user.4"),
    }
}

/// Builds the dataset; returns the cancelled lease's key and token.
fn build_dataset(c: &mut Con) -> BTreeMap<String, String> {
    // Policies: every per-queue setting, windows, gates, caps, the worker states.
    let q = "policies";
    set(
        c,
        q,
        &[
            "LIFETIME",
            "1000000000",
            "AUTODELAY",
            "900000",
            "60000",
            "CAP",
            "300000",
            "MAXRUNNING",
            "2",
            "DEADMAX",
            "50",
            "DEADTTL",
            "1000000000",
            "RESULTMAX",
            "20",
        ],
    );
    for i in 0..30 {
        let cfg = config(&format!("p{i}"), collation(i), (i * 53 % 7) * 1000);
        enqueue_at(c, q, &cfg, T + i * 1000);
    }
    immediate_at(c, q, &config("p30", Some("user.2"), 0), T + 30_500);
    assert_eq!(close_gate(c, q, "img"), 1);
    assert_eq!(close_gate(c, q, "idle"), 1);
    for i in 0..6 {
        let cfg = gated(&format!("g{i}"), collation(i), i * 100, "img");
        if i == 5 {
            immediate_at(c, q, &cfg, T + 31_000 + i);
        } else {
            enqueue_at(c, q, &cfg, T + 31_000 + i);
        }
    }
    move_at(c, q, &key_of("p7"), "RELEASE", T + 32_000);
    ok(
        c,
        &args!["ORCA.MOVE", q, key_of("p8"), "DELAY", "BUFFER", 5000],
    );
    // Leases: the cap holds user.1 at 2 running; one is regraded while it runs.
    let running: Vec<Fields> = (0..6)
        .map(|_| must_pop_at(c, q, LEASE, T + 40_000))
        .collect();
    let regraded = text(&running[0], "key");
    let name = (0..31)
        .map(|i| format!("p{i}"))
        .find(|n| key_of(n) == regraded)
        .expect("a dataset job");
    let i: i64 = name[1..].parse().unwrap();
    enqueue_at(c, q, &config(&name, collation(i), 0), T + 40_500);
    // A retry, a failed dead letter, a result, a cancelled lease.
    ok(
        c,
        &args![
            "ORCA.NACK",
            q,
            text(&running[1], "key"),
            lease(&running[1]),
            "DELAY",
            500_000,
            "NOW",
            T + 41_000
        ],
    );
    ok(
        c,
        &args![
            "ORCA.NACK",
            q,
            text(&running[2], "key"),
            lease(&running[2]),
            "MAXATTEMPTS",
            1,
            "NOW",
            T + 41_000
        ],
    );
    ok(
        c,
        &args![
            "ORCA.ACK",
            q,
            text(&running[3], "key"),
            lease(&running[3]),
            "RESULT",
            "{\"score\":97}",
            "TTL",
            3_600_000_000i64,
            "NOW",
            T + 41_000
        ],
    );
    ok(c, &args!["ORCA.DELETE", q, text(&running[4], "key")]);
    let meta = BTreeMap::from([
        ("cancelled key".to_string(), text(&running[4], "key")),
        ("cancelled lease".to_string(), lease(&running[4])),
    ]);
    ok(
        c,
        &args![
            "ORCA.REENQUEUE",
            q,
            config("p11", collation(11), 0),
            T + 11_000
        ],
    );

    // A large FIFO collation (tree form) beside a small one.
    let q = "large";
    set(c, q, &["ORDER", "FIFO"]);
    for i in 0..120 {
        let coll = if i % 6 == 5 { "user.small" } else { "user.big" };
        enqueue_at(
            c,
            q,
            &config(&format!("l{i}"), Some(coll), (i * 7 % 5) * 100),
            T + i,
        );
    }
    for i in [3, 50, 77, 101] {
        ok(c, &args!["ORCA.DELETE", q, key_of(&format!("l{i}"))]);
    }
    move_at(c, q, &key_of("l60"), "RELEASE", T + 500);
    ok(
        c,
        &args!["ORCA.MOVE", q, key_of("l61"), "DELAY", "BUFFER", 100],
    );
    must_pop_at(c, q, LEASE, T + 600);

    // Dead letters by lifetime and by an expired lease.
    let q = "expired";
    set(c, q, &["LIFETIME", "1000"]);
    enqueue_at(c, q, &config("e0", Some("user.1"), 0), T);
    enqueue_at(c, q, &config("e1", None, 0), T + 1);
    tick_at(c, q, T + 5_000);
    enqueue_at(c, q, &config("e2", None, 0), T + 6_000);
    must_pop_at(c, q, 1_000, T + 6_000);
    ok(
        c,
        &args!["ORCA.TICK", q, "NOW", T + 10_000, "MAXATTEMPTS", 1],
    );
    enqueue_at(c, q, &config("e3", Some("team.z"), 0), T + 10_001);
    meta
}

fn names() -> Vec<String> {
    (0..31)
        .map(|i| format!("p{i}"))
        .chain((0..6).map(|i| format!("g{i}")))
        .chain((0..120).map(|i| format!("l{i}")))
        .chain((0..4).map(|i| format!("e{i}")))
        .collect()
}

fn observe(c: &mut Con) -> BTreeMap<String, String> {
    observations(c, &QUEUES, &names(), true)
}

/// What the old release did next with the saved state (run after the
/// observations, so they change nothing observed): the lease cancelled by
/// DELETE is told so; a new job of a collation with a recent window gets
/// its automatic delay; opening the gate queues the held jobs where their
/// arrival put them; time running on expires, retries and forgets as it
/// did.
fn observe_then_probe(c: &mut Con) -> BTreeMap<String, String> {
    let mut out = observe(c);
    let q = "policies";
    let cancelled: Vec<Fields> = list_state(c, q, "LEASED", &[]);
    out.insert(format!("{q} probe leases"), cancelled.len().to_string());
    let w = enqueue_at(c, q, &config("probe", Some("user.1"), 0), T + 60_000);
    out.insert(format!("{q} probe delay"), text_or_int(&w, "delay"));
    out.insert(
        format!("{q} probe release_at"),
        text_or_int(&w, "release_at"),
    );
    out.insert(
        format!("{q} probe opened"),
        open_gate(c, q, "img").to_string(),
    );
    for (i, job) in pops_via_copy(c, q).iter().enumerate() {
        for k in ["key", "release_at", "nonce", "immediate"] {
            out.insert(format!("{q} probe pop {i:03} {k}"), job[k].clone());
        }
    }
    for (qq, at) in [
        ("policies", T + 1_100_000_000),
        ("large", T + 700_000),
        ("expired", T + 2_000_000),
    ] {
        let report = tick_at(c, qq, at);
        for (k, v) in sorted(&report) {
            out.insert(format!("{qq} probe tick {k}"), v);
        }
        out.insert(format!("{qq} probe len"), qlen(c, qq).to_string());
        let Value::Array(dead) = ok(c, &args!["ORCA.DEAD", qq, "LIST"]) else {
            panic!("DEAD LIST")
        };
        out.insert(format!("{qq} probe dead"), dead.len().to_string());
        assert_check(c, qq);
    }
    out
}

fn text_or_int(f: &Fields, name: &str) -> String {
    format!("{:?}", get(f, name))
}

/// The cancelled lease: DELETE cancelled the fifth of the six leases the
/// dataset took; the old release kept its token to tell the worker.
fn cancelled_lease_is_still_told(c: &mut Con, expected: &BTreeMap<String, String>) {
    let key = expected
        .get("meta cancelled key")
        .expect("the fixture names the cancelled lease");
    let token = &expected["meta cancelled lease"];
    let err = fails(c, &args!["ORCA.ACK", "policies", key, token]);
    assert!(err.contains("cancel"), "ACK of the cancelled lease: {err}");
}

#[test]
fn v2_rdb_loads_and_shows_what_it_showed() {
    if write_fixture("v2", build_dataset, observe_then_probe) {
        return;
    }
    let (s, expected) = load_fixture("v2", &QUEUES);
    let mut c = s.conn();
    let got = observe(&mut c);
    // A save and reload in the current encoding keeps all of it.
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_eq!(render(&observe(&mut c)), render(&got));
    cancelled_lease_is_still_told(&mut c, &expected);
    let mut got = observe_then_probe(&mut c);
    for (k, v) in &expected {
        if k.starts_with("meta ") {
            got.insert(k.clone(), v.clone());
        }
    }
    assert_unchanged("v2", &expected, &got);
}

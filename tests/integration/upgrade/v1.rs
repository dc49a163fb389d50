//! Encoding version 1 (commit 308584e: before stack keys, gates and
//! per-queue policy settings): `tests/fixtures/v1/`.

use std::collections::BTreeMap;

use redis::Value;

use super::*;
use crate::common::*;

const QUEUES: [&str; 3] = ["grading", "fifo", "workers"];

/// The dataset, built with pinned clocks: LIFO and FIFO collations, single
/// and immediate jobs, moves (front nonces), re-enqueues, and the worker
/// states (leased, waiting for a retry, dead, acked with a result).
fn build_dataset(c: &mut Con) {
    ok(c, &args!["ORCA.SETTINGS", "fifo", "ORDER", "FIFO"]);
    for q in ["grading", "fifo"] {
        for i in 0..40 {
            let coll = match i % 4 {
                0 => None,
                1 => Some(format!("user.{}", i % 7)),
                2 => Some(format!("team.{}", i % 3)),
                _ => Some("user.many".to_string()),
            };
            let cfg = config(&format!("j{i}"), coll.as_deref(), (i * 37 % 11) * 1000);
            enqueue_at(c, q, &cfg, T + i * 10);
        }
        for i in 0..5 {
            immediate_at(
                c,
                q,
                &config(&format!("i{i}"), Some("user.1"), 0),
                T + 5 + i * 100,
            );
        }
        move_at(c, q, &key_of("j7"), "RELEASE", T + 1_000);
        ok(
            c,
            &args!["ORCA.MOVE", q, key_of("j9"), "DELAY", "BUFFER", 50],
        );
        ok(c, &args!["ORCA.DELETE", q, key_of("j11")]);
        ok(
            c,
            &args!["ORCA.REENQUEUE", q, config("j2", Some("team.2"), 0), T + 20],
        );
    }
    // Worker states.
    let q = "workers";
    for i in 0..12 {
        enqueue_at(
            c,
            q,
            &config(&format!("w{i}"), Some("user.9"), i * 10),
            T + i,
        );
    }
    must_pop_at(c, q, 600_000, T + 100); // stays leased
    let retry = must_pop_at(c, q, 600_000, T + 100);
    ok(
        c,
        &args![
            "ORCA.NACK",
            q,
            text(&retry, "key"),
            lease(&retry),
            "DELAY",
            500_000,
            "NOW",
            T + 200
        ],
    );
    let dead = must_pop_at(c, q, 600_000, T + 100);
    ok(
        c,
        &args![
            "ORCA.NACK",
            q,
            text(&dead, "key"),
            lease(&dead),
            "MAXATTEMPTS",
            1,
            "NOW",
            T + 300
        ],
    );
    let acked = must_pop_at(c, q, 600_000, T + 100);
    ok(
        c,
        &args![
            "ORCA.ACK",
            q,
            text(&acked, "key"),
            lease(&acked),
            "RESULT",
            "{\"score\":97}",
            "TTL",
            3_600_000_000i64
        ],
    );
}

/// Every job name of the dataset.
fn names() -> Vec<String> {
    (0..40)
        .map(|i| format!("j{i}"))
        .chain((0..5).map(|i| format!("i{i}")))
        .chain((0..12).map(|i| format!("w{i}")))
        .collect()
}

fn observe(c: &mut Con) -> BTreeMap<String, String> {
    observations(c, &QUEUES, &names(), false)
}

#[test]
fn v1_rdb_loads_and_shows_what_it_showed() {
    if write_fixture(
        "v1",
        |c| {
            build_dataset(c);
            BTreeMap::new()
        },
        observe,
    ) {
        return;
    }
    let (s, expected) = load_fixture("v1", &QUEUES);
    let mut c = s.conn();
    assert_unchanged("v1", &expected, &observe(&mut c));
    // And the loaded queues keep working: a new job, the worker cycle.
    enqueue_at(
        &mut c,
        "grading",
        &config("new", Some("user.many"), 0),
        T + 2_000,
    );
    let p = must_pop_at(&mut c, "workers", 600_000, T + 3_000);
    ok(
        &mut c,
        &args![
            "ORCA.ACK",
            "workers",
            text(&p, "key"),
            lease(&p),
            "NOW",
            T + 3_001
        ],
    );
    let Value::Array(dead) = ok(&mut c, &args!["ORCA.DEAD", "workers", "LIST"]) else {
        panic!("DEAD LIST")
    };
    let dead = text(&fields(dead[0].clone()), "key");
    ok(&mut c, &args!["ORCA.DEAD", "workers", "REQUEUE", dead]);
    for q in QUEUES {
        assert_check(&mut c, q);
    }
    // A save and reload in the current encoding keeps all of it.
    let before = observe(&mut c);
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_eq!(render(&observe(&mut c)), render(&before));
}

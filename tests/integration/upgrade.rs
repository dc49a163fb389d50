//! Upgrades: an RDB written by an earlier release of the module (encoding
//! version 1, before stack keys, gates and per-queue policy settings) loads
//! into this one, and the queues show exactly what they showed before, then
//! keep working.
//!
//! The fixture `tests/fixtures/v1/` holds `dump.rdb`, saved by the module
//! as of commit 308584e (the last release with encoding 1) after
//! `build_dataset` below, and `expected.txt`, what that module showed of it
//! (`observations`). To write them again with an old module:
//!
//!     ORCA_MODULE=/path/to/old/liborca.so ORCA_WRITE_V1_FIXTURE=1 \
//!         cargo test --release --test integration upgrade::
//!
//! Fields a later release adds to a reply are not compared; every field
//! the old release showed must be the same.

use std::collections::BTreeMap;
use std::path::PathBuf;

use redis::Value;

use crate::common::*;

/// Far in the future, so no lease or retry falls due while the test runs.
const T: i64 = 4_102_444_800_000;

const QUEUES: [&str; 3] = ["grading", "fifo", "workers"];

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

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

/// What a server shows of the dataset, as sorted `name<TAB>value` lines.
fn observations(c: &mut Con) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for q in QUEUES {
        out.insert(format!("{q} len"), qlen(c, q).to_string());
        let st = fields(ok(c, &args!["ORCA.SETTINGS", q]));
        out.insert(format!("{q} order"), text(&st, "order"));
        for (i, job) in pops_via_copy(c, q).iter().enumerate() {
            for (k, v) in job {
                out.insert(format!("{q} pop {i:03} {k}"), v.clone());
            }
        }
        let names = (0..40)
            .map(|i| format!("j{i}"))
            .chain((0..5).map(|i| format!("i{i}")))
            .chain((0..12).map(|i| format!("w{i}")));
        for name in names {
            let v = ok(c, &args!["ORCA.STATUS", q, key_of(&name)]);
            if v == Value::Nil {
                continue;
            }
            for (k, v) in sorted(&fields(v)) {
                out.insert(format!("{q} status {name} {k}"), v);
            }
            let r = ok(c, &args!["ORCA.RESULT", q, key_of(&name)]);
            if r != Value::Nil {
                out.insert(format!("{q} result {name}"), as_string(&r));
            }
        }
        let Value::Array(dead) = ok(c, &args!["ORCA.DEAD", q, "LIST"]) else {
            panic!("DEAD LIST")
        };
        for (i, d) in dead.into_iter().enumerate() {
            for (k, v) in sorted(&fields(d)) {
                out.insert(format!("{q} dead {i} {k}"), v);
            }
        }
    }
    out
}

fn render(obs: &BTreeMap<String, String>) -> String {
    obs.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect()
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn v1_rdb_loads_and_shows_what_it_showed() {
    let dir = fixture_dir();
    if std::env::var_os("ORCA_WRITE_V1_FIXTURE").is_some() {
        let (s, mut c) = start_server();
        build_dataset(&mut c);
        ok(&mut c, &args!["SAVE"]);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(s.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
        std::fs::write(dir.join("expected.txt"), render(&observations(&mut c))).unwrap();
        return;
    }
    let expected = parse(&std::fs::read_to_string(dir.join("expected.txt")).expect("fixture"));
    assert!(
        expected.len() > 500,
        "the fixture is too small to mean much"
    );
    let mut s = Server::start(&[]);
    s.kill();
    std::fs::copy(dir.join("dump.rdb"), s.dir.join("dump.rdb"))
        .expect("tests/fixtures/v1/dump.rdb is part of the repository");
    s.start_again();
    let mut c = s.conn();
    for q in QUEUES {
        assert_check(&mut c, q);
    }
    let got = observations(&mut c);
    let mut diffs = Vec::new();
    for (k, want) in &expected {
        match got.get(k) {
            Some(v) if v == want => {}
            other => diffs.push(format!("{k}: was {want}, now {other:?}")),
        }
    }
    // Nothing the old release showed is missing or changed, and no job or
    // pop appeared.
    for k in got.keys() {
        let is_new_field = k.contains(" status ") || k.contains(" dead ");
        if !expected.contains_key(k) && !is_new_field {
            diffs.push(format!("{k}: new {}", got[k]));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences after loading the v1 RDB:\n{}",
        diffs.len(),
        diffs[..diffs.len().min(40)].join("\n")
    );
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
    let before = observations(&mut c);
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_eq!(render(&observations(&mut c)), render(&before));
}

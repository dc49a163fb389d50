//! Integration tests of the inspection features against a real redis-server
//! with the built module (see `tests/common/mod.rs`): `ORCA.STATUS`
//! positions and `ORCA.LIST` order against a brute force (pop everything from
//! a `COPY`), `ORCA.LIST` paging and filtering, `ORCA.STATS` against
//! hand-computed values, `INFO orca`, the module settings, RESP3 replies and
//! keyspace events.

mod common;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use redis::Value;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// The server's clock (ms), from `TIME`.
fn server_ms(c: &mut redis::Connection) -> i64 {
    match ok(c, &args!["TIME"]) {
        Value::Array(v) if v.len() == 2 => {
            let s: i64 = as_string(&v[0]).parse().expect("TIME seconds");
            let us: i64 = as_string(&v[1]).parse().expect("TIME micros");
            s * 1000 + us / 1000
        }
        other => panic!("unexpected TIME reply {other:?}"),
    }
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Poll `f` until it holds (at most 5 s).
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        sleep_ms(10);
    }
}

/// `ORCA.LIST <q> <opts...>` as parsed job replies.
fn list(c: &mut redis::Connection, q: &str, opts: &[&str]) -> Vec<Fields> {
    let mut a = args!["ORCA.LIST", q];
    a.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
    match ok(c, &a) {
        Value::Array(items) => items.into_iter().map(fields).collect(),
        other => panic!("ORCA.LIST {q} {opts:?}: expected an array, got {other:?}"),
    }
}

/// The whole listing (the queues here hold fewer than 1000 jobs).
fn list_all(c: &mut redis::Connection, q: &str) -> Vec<Fields> {
    list(c, q, &["LIMIT", "1000"])
}

fn keys(v: &[Fields]) -> Vec<String> {
    v.iter().map(|f| text(f, "key")).collect()
}

/// The pop order of `q`, by brute force: copy it and `ORCA.POP ... LEASE 0`
/// the copy until nil. The queue itself is untouched.
fn brute_order(c: &mut redis::Connection, q: &str) -> Vec<Fields> {
    let tmp = format!("{q}:bruteforce");
    ok(c, &args!["COPY", q, &tmp, "REPLACE"]);
    let mut out = Vec::new();
    loop {
        match ok(c, &args!["ORCA.POP", &tmp, "LEASE", "0"]) {
            Value::Nil => break,
            v => out.push(fields(v)),
        }
        assert!(out.len() <= 10_000, "ORCA.POP of the copy never ends");
    }
    ok(c, &args!["DEL", &tmp]);
    out
}

fn status(c: &mut redis::Connection, q: &str, key: &str) -> Option<Fields> {
    match ok(c, &args!["ORCA.STATUS", q, key]) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

fn state_of(c: &mut redis::Connection, q: &str, key: &str) -> Option<String> {
    status(c, q, key).map(|f| text(&f, "state"))
}

fn stats(c: &mut redis::Connection, q: &str) -> Fields {
    fields(ok(c, &args!["ORCA.STATS", q]))
}

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

/// A job config with an optional `metadata_table` (raw JSON).
fn meta_config(key: &str, collation: Option<&str>, priority: i64, meta: Option<&str>) -> String {
    let coll = match collation {
        None => String::new(),
        Some(c) => {
            let (t, id) = c.split_once('.').expect("collation as type.id");
            format!(r#","collation":{{"type":"{t}","id":"{id}"}}"#)
        }
    };
    let meta = match meta {
        None => String::new(),
        Some(m) => format!(r#","metadata_table":{m}"#),
    };
    format!(
        r#"{{"key":"{key}","response_url":"http://cb/{key}"{coll},"priority":{priority}{meta},"script":[]}}"#
    )
}

/// `ORCA.POP q LEASE <ms>` that must hand out a job.
fn pop_lease(c: &mut redis::Connection, q: &str, lease: i64) -> Fields {
    match ok(c, &args!["ORCA.POP", q, "LEASE", lease]) {
        Value::Nil => panic!("ORCA.POP {q} handed out nothing"),
        v => fields(v),
    }
}

fn nack(c: &mut redis::Connection, q: &str, job: &Fields, extra: &[&str]) -> Fields {
    let mut a = args!["ORCA.NACK", q, text(job, "key"), text(job, "lease")];
    a.extend(extra.iter().map(|s| s.as_bytes().to_vec()));
    fields(ok(c, &a))
}

fn ack(c: &mut redis::Connection, q: &str, job: &Fields, extra: &[&str]) {
    let mut a = args!["ORCA.ACK", q, text(job, "key"), text(job, "lease")];
    a.extend(extra.iter().map(|s| s.as_bytes().to_vec()));
    assert_eq!(as_int(&ok(c, &a)), 1);
}

fn config_set(c: &mut redis::Connection, name: &str, value: &str) {
    let v = ok(c, &args!["CONFIG", "SET", name, value]);
    assert!(matches!(v, Value::Okay), "CONFIG SET {name} {value}: {v:?}");
}

fn config_get(c: &mut redis::Connection, pattern: &str) -> HashMap<String, String> {
    fields(ok(c, &args!["CONFIG", "GET", pattern]))
        .into_iter()
        .map(|(k, v)| (k, as_string(&v)))
        .collect()
}

fn order_of(c: &mut redis::Connection, q: &str) -> String {
    text(&fields(ok(c, &args!["ORCA.SETTINGS", q])), "order")
}

// ---------------------------------------------------------------------------
// 1. Positions against brute force
// ---------------------------------------------------------------------------

/// Compare ORCA.LIST, ORCA.STATUS, ORCA.LEN with the brute-force pop order
/// and with the model (queued orca key -> immediate?).
fn check_against_brute_force(
    c: &mut redis::Connection,
    q: &str,
    model: &HashMap<String, bool>,
    pool_keys: &[String],
    ctx: &str,
) {
    let listing = list_all(c, q);
    let brute = brute_order(c, q);
    assert_eq!(
        keys(&listing),
        keys(&brute),
        "{ctx}: ORCA.LIST order differs from the pop order"
    );
    assert_eq!(qlen(c, q) as usize, listing.len(), "{ctx}: ORCA.LEN");
    let listed: HashSet<String> = keys(&listing).into_iter().collect();
    assert_eq!(listed.len(), listing.len(), "{ctx}: a key listed twice");
    let expected: HashSet<String> = model.keys().cloned().collect();
    assert_eq!(listed, expected, "{ctx}: queued keys differ from the model");
    for (i, (f, b)) in listing.iter().zip(&brute).enumerate() {
        let key = text(f, "key");
        assert_eq!(int(f, "position"), i as i64 + 1, "{ctx}: LIST position");
        assert_eq!(text(f, "state"), "queued", "{ctx}");
        assert_eq!(
            int(f, "immediate") == 1,
            model[&key],
            "{ctx}: immediate flag of {key}: {f:?}"
        );
        // The listed job is the one the pop hands out at that place.
        for name in [
            "collation",
            "created_at",
            "immediate",
            "key",
            "nonce",
            "payload",
            "release_at",
        ] {
            assert_eq!(
                get(f, name),
                get(b, name),
                "{ctx}: field {name} at position {} differs between LIST and POP",
                i + 1
            );
        }
        assert_eq!(int(b, "attempts"), int(f, "attempts") + 1, "{ctx}");
        // STATUS: the same job reply, state and position.
        let st = status(c, q, &key).unwrap_or_else(|| panic!("{ctx}: no STATUS for {key}"));
        for (name, v) in f {
            assert_eq!(get(&st, name), v, "{ctx}: STATUS {name} of {key}");
        }
        assert_eq!(get(&st, "leases"), &Value::Array(vec![]), "{ctx}");
        assert_eq!(st.len(), f.len() + 1, "{ctx}: STATUS fields {st:?}");
    }
    for k in pool_keys {
        if !listed.contains(k) {
            assert!(status(c, q, k).is_none(), "{ctx}: STATUS of absent {k}");
        }
    }
    assert_check(c, q);
}

fn random_positions(seed: u64, order: &str) {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = "q";
    ok(&mut c, &args!["ORCA.SETTINGS", q, "ORDER", order]);
    let pool: Vec<String> = (0..36).map(|i| format!("job{i}")).collect();
    let pool_keys: Vec<String> = pool.iter().map(|k| key_of(k)).collect();
    let colls = [
        Some("user.1"),
        Some("user.2"),
        Some("user.3"),
        Some("team.a"),
        Some("team.b"),
        None,
    ];
    let mut model: HashMap<String, bool> = HashMap::new();
    let mut rng = Rng::new(seed);
    let mut clock = server_ms(&mut c);
    let mut log: Vec<String> = Vec::new();
    for batch in 0..30 {
        for _ in 0..20 {
            // Often the same ms (ties), sometimes a jump.
            clock += (rng.below(3) * rng.below(40)) as i64;
            let i = rng.below(pool.len() as u64) as usize;
            let (name, okey) = (&pool[i], &pool_keys[i]);
            let mut now_opt: Vec<Vec<u8>> = Vec::new();
            if rng.chance(85) {
                now_opt = args!["NOW", clock];
            }
            let op = rng.below(100);
            match op {
                0..=49 => {
                    let coll = *rng.pick(&colls);
                    let prio = *rng.pick(&[0, 0, 0, 7, 1000, 5000, 60_000]);
                    let prio = if rng.chance(20) {
                        rng.below(200_000) as i64
                    } else {
                        prio
                    };
                    let cmd = if op < 40 {
                        "ORCA.ENQUEUE"
                    } else {
                        "ORCA.IMMEDIATE"
                    };
                    let mut a = args![cmd, q, config(name, coll, prio)];
                    a.extend(now_opt);
                    log.push(show_args(&a));
                    let f = fields(ok(&mut c, &a));
                    let existed = model.contains_key(okey);
                    assert_eq!(int(&f, "created"), (!existed) as i64, "{log:?}");
                    let imm = if cmd == "ORCA.IMMEDIATE" {
                        true
                    } else {
                        existed && model[okey]
                    };
                    model.insert(okey.clone(), imm);
                    assert_eq!(int(&f, "immediate") == 1, imm, "{log:?}");
                }
                50..=69 => {
                    let mut a = args!["ORCA.MOVE", q, okey];
                    if op < 60 {
                        a.extend(args!["RELEASE"]);
                        a.extend(now_opt);
                    } else {
                        a.extend(args!["DELAY"]);
                        if rng.chance(50) {
                            a.extend(args!["BUFFER", rng.below(20_000)]);
                        }
                    }
                    log.push(show_args(&a));
                    let v = raw(&mut c, &a);
                    match model.get(okey) {
                        None => assert_eq!(
                            error_text(&v).as_deref(),
                            Some("ERR no such job"),
                            "{log:?}"
                        ),
                        Some(true) => assert_eq!(
                            error_text(&v).as_deref(),
                            Some("ERR immediate jobs cannot be moved"),
                            "{log:?}"
                        ),
                        Some(false) => {
                            assert!(error_text(&v).is_none(), "{log:?}: {v:?}");
                            let f = fields(v);
                            if op < 60 {
                                model.insert(okey.clone(), true);
                            }
                            assert_eq!(int(&f, "immediate") == 1, model[okey], "{log:?}");
                        }
                    }
                }
                70..=79 => {
                    let a = args!["ORCA.DELETE", q, okey];
                    log.push(show_args(&a));
                    let removed = as_int(&ok(&mut c, &a));
                    assert_eq!(removed, model.remove(okey).is_some() as i64, "{log:?}");
                }
                80..=95 => {
                    let a = args!["ORCA.POP", q, "LEASE", "0"];
                    log.push(show_args(&a));
                    match ok(&mut c, &a) {
                        Value::Nil => assert!(model.is_empty(), "{log:?}"),
                        v => {
                            let k = text(&fields(v), "key");
                            assert!(model.remove(&k).is_some(), "{log:?}: popped {k}");
                        }
                    }
                }
                _ => {
                    let o = if rng.chance(50) { "LIFO" } else { "FIFO" };
                    let a = args!["ORCA.SETTINGS", q, "ORDER", o];
                    log.push(show_args(&a));
                    let f = fields(ok(&mut c, &a));
                    assert_eq!(text(&f, "order"), o.to_lowercase());
                    assert_eq!(int(&f, "jobs"), model.len() as i64);
                }
            }
        }
        let ctx = format!(
            "seed {seed} order {order} batch {batch}; last ops: {:?}",
            &log[log.len().saturating_sub(25)..]
        );
        check_against_brute_force(&mut c, q, &model, &pool_keys, &ctx);
    }
}

#[test]
fn positions_match_brute_force_lifo() {
    for seed in [1, 2] {
        random_positions(seed, "LIFO");
    }
}

#[test]
fn positions_match_brute_force_fifo() {
    for seed in [3, 4] {
        random_positions(seed, "FIFO");
    }
}

// ---------------------------------------------------------------------------
// 2. ORCA.LIST pages and filters
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Meta {
    Str(&'static str),
    Arr(&'static [&'static str]),
    Num(i64),
}

/// The metadata tables used, as (field, value) lists; `None` = no table.
fn meta_tables() -> Vec<Option<Vec<(&'static str, Meta)>>> {
    use Meta::*;
    vec![
        Some(vec![
            ("course", Str("cs2500")),
            ("graders", Arr(&["ann", "bob"])),
        ]),
        Some(vec![("course", Str("cs3500")), ("graders", Arr(&["bob"]))]),
        Some(vec![("course", Str("cs2500")), ("graders", Arr(&[]))]),
        Some(vec![("course", Str("cs2500"))]),
        Some(vec![("graders", Arr(&["ann"])), ("n", Num(3))]),
        None,
        Some(vec![("course", Arr(&["cs2500", "cs3500"]))]),
        Some(vec![("course", Num(2500))]),
        Some(vec![("course", Str("réseaux")), ("graders", Arr(&["zoé"]))]),
        Some(vec![]),
    ]
}

fn meta_json(m: &[(&str, Meta)]) -> String {
    let parts: Vec<String> = m
        .iter()
        .map(|(k, v)| {
            let v = match v {
                Meta::Str(s) => format!("{s:?}"),
                Meta::Arr(a) => format!(
                    "[{}]",
                    a.iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Meta::Num(n) => n.to_string(),
            };
            format!("{k:?}:{v}")
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

fn meta_matches(m: &Option<Vec<(&str, Meta)>>, field: &str, value: &str) -> bool {
    let Some(m) = m else { return false };
    m.iter().any(|(k, v)| {
        *k == field
            && match v {
                Meta::Str(s) => *s == value,
                Meta::Arr(a) => a.contains(&value),
                Meta::Num(_) => false,
            }
    })
}

/// `items[offset..offset+limit]`, clamped.
fn window(items: &[Fields], offset: usize, limit: usize) -> Vec<Fields> {
    let a = offset.min(items.len());
    let b = offset.saturating_add(limit).min(items.len());
    items[a..b].to_vec()
}

#[test]
fn list_pages_and_filters() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = "p";
    let tables = meta_tables();
    let colls = [Some("user.1"), Some("user.2"), Some("team.t"), None];
    let mut rng = Rng::new(77);
    let base = server_ms(&mut c);
    // orca key -> metadata table
    let mut meta_of: HashMap<String, Option<Vec<(&str, Meta)>>> = HashMap::new();
    let n = 130;
    for i in 0..n {
        let name = format!("m{i}");
        let t = rng.below(tables.len() as u64) as usize;
        let meta = tables[t].as_ref().map(|m| meta_json(m));
        let coll = *rng.pick(&colls);
        let prio = *rng.pick(&[0i64, 0, 100, 5000, 60_000]);
        let cfg = meta_config(&name, coll, prio, meta.as_deref());
        let cmd = if rng.chance(15) {
            "ORCA.IMMEDIATE"
        } else {
            "ORCA.ENQUEUE"
        };
        ok(
            &mut c,
            &args![cmd, q, cfg, "NOW", base + rng.below(1000) as i64],
        );
        meta_of.insert(key_of(&name), tables[t].clone());
    }
    // A few moves, so positions are not arrival order.
    for i in (0..n).step_by(11) {
        let k = key_of(&format!("m{i}"));
        let mv = if i % 2 == 0 { "RELEASE" } else { "DELAY" };
        let _ = raw(&mut c, &args!["ORCA.MOVE", q, k, mv]);
    }
    assert_check(&mut c, q);
    let digest_before = digest(&mut c, q);

    let full = list_all(&mut c, q);
    assert_eq!(full.len(), n);
    assert_eq!(keys(&full), keys(&brute_order(&mut c, q)));
    for (i, f) in full.iter().enumerate() {
        assert_eq!(int(f, "position"), i as i64 + 1);
    }
    // Default LIMIT is 100.
    assert_eq!(list(&mut c, q, &[]), window(&full, 0, 100));
    assert_eq!(list(&mut c, q, &["OFFSET", "120"]), window(&full, 120, 100));

    // Pages.
    let offsets = [0usize, 1, 2, 5, 17, 99, 100, 129, 130, 131, 1000, 1 << 40];
    let limits = [0usize, 1, 2, 3, 10, 129, 130, 1000];
    for &o in &offsets {
        for &l in &limits {
            let page = list(
                &mut c,
                q,
                &["OFFSET", &o.to_string(), "LIMIT", &l.to_string()],
            );
            assert_eq!(page, window(&full, o, l), "OFFSET {o} LIMIT {l}");
        }
    }
    // Options in either order.
    assert_eq!(
        list(&mut c, q, &["LIMIT", "7", "OFFSET", "33"]),
        window(&full, 33, 7)
    );
    // Pages stitched together give the whole listing.
    for size in [1usize, 2, 3, 7, 10, 64, 129, 130, 131] {
        let mut all = Vec::new();
        let mut off = 0;
        loop {
            let page = list(
                &mut c,
                q,
                &["OFFSET", &off.to_string(), "LIMIT", &size.to_string()],
            );
            assert!(page.len() <= size);
            if page.is_empty() {
                break;
            }
            off += page.len();
            all.extend(page);
        }
        assert_eq!(all, full, "stitched with page size {size}");
    }

    // Filters: OFFSET/LIMIT count matching jobs, positions stay true queue
    // positions.
    let filters = [
        ("course", "cs2500"),
        ("course", "cs3500"),
        ("graders", "ann"),
        ("graders", "bob"),
        ("graders", "zoé"),
        ("course", "réseaux"),
        ("n", "3"),
        ("course", "2500"),
        ("course", "nope"),
        ("missing", "x"),
    ];
    let mut nonempty = 0;
    for (field, value) in filters {
        let expected: Vec<Fields> = full
            .iter()
            .filter(|f| meta_matches(&meta_of[&text(f, "key")], field, value))
            .cloned()
            .collect();
        if !expected.is_empty() {
            nonempty += 1;
        }
        let got = list(&mut c, q, &["FILTER", field, value, "LIMIT", "1000"]);
        assert_eq!(
            keys(&got),
            keys(&expected),
            "FILTER {field} {value}: matching jobs"
        );
        assert_eq!(got, expected, "FILTER {field} {value}");
        // Default LIMIT 100 with a filter too.
        assert_eq!(
            list(&mut c, q, &["FILTER", field, value]),
            window(&expected, 0, 100)
        );
        for &o in &[0usize, 1, 3, 10, 40, 200] {
            for &l in &[0usize, 1, 2, 5, 1000] {
                let (os, ls) = (o.to_string(), l.to_string());
                let want = window(&expected, o, l);
                assert_eq!(
                    list(
                        &mut c,
                        q,
                        &["FILTER", field, value, "OFFSET", &os, "LIMIT", &ls]
                    ),
                    want,
                    "FILTER {field} {value} OFFSET {o} LIMIT {l}"
                );
                assert_eq!(
                    list(
                        &mut c,
                        q,
                        &["OFFSET", &os, "FILTER", field, value, "LIMIT", &ls]
                    ),
                    want,
                    "OFFSET {o} FILTER {field} {value} LIMIT {l}"
                );
            }
        }
        // Stitched filtered pages.
        let mut all = Vec::new();
        let mut off = 0;
        loop {
            let page = list(
                &mut c,
                q,
                &[
                    "FILTER",
                    field,
                    value,
                    "OFFSET",
                    &off.to_string(),
                    "LIMIT",
                    "4",
                ],
            );
            if page.is_empty() {
                break;
            }
            off += page.len();
            all.extend(page);
        }
        assert_eq!(all, expected, "stitched FILTER {field} {value}");
    }
    assert!(nonempty >= 6, "the filters should match something");

    // Bad inputs.
    let bad: Vec<(Vec<&str>, &str)> = vec![
        (vec!["OFFSET", "-1"], "ERR OFFSET must be >= 0"),
        (vec!["LIMIT", "-1"], "ERR LIMIT must be between 0 and 1000"),
        (
            vec!["LIMIT", "1001"],
            "ERR LIMIT must be between 0 and 1000",
        ),
        (
            vec!["FILTER", "course"],
            "ERR FILTER needs a metadata field and a value",
        ),
        (
            vec!["FILTER"],
            "ERR FILTER needs a metadata field and a value",
        ),
        (
            vec!["LIMIT", "5", "FILTER", "course"],
            "ERR FILTER needs a metadata field and a value",
        ),
        (
            vec!["FILTER", "course", "cs2500", "FILTER", "graders", "ann"],
            "ERR option FILTER given twice",
        ),
        (
            vec![
                "FILTER", "course", "cs2500", "LIMIT", "1", "filter", "a", "b",
            ],
            "ERR option FILTER given twice",
        ),
        (vec!["OFFSET"], "ERR option OFFSET needs a value"),
        (
            vec!["OFFSET", "1", "OFFSET", "2"],
            "ERR option OFFSET given twice",
        ),
    ];
    for (opts, want) in bad {
        let mut a = args!["ORCA.LIST", q];
        a.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
        assert_eq!(fails(&mut c, &a), want, "ORCA.LIST {opts:?}");
    }
    for opts in [
        vec!["OFFSET", "x"],
        vec!["LIMIT", "1.5"],
        vec!["BOGUS", "1"],
        vec!["OFFSET", "99999999999999999999999"],
    ] {
        let mut a = args!["ORCA.LIST", q];
        a.extend(opts.iter().map(|s| s.as_bytes().to_vec()));
        let e = fails(&mut c, &a);
        assert!(e.starts_with("ERR "), "ORCA.LIST {opts:?}: {e}");
    }
    let bad_utf8: &[u8] = b"\xff\xfe";
    assert_eq!(
        fails(&mut c, &args!["ORCA.LIST", q, "FILTER", "course", bad_utf8]),
        "ERR FILTER field and value must be UTF-8"
    );
    assert_eq!(
        fails(&mut c, &args!["ORCA.LIST", q, "FILTER", bad_utf8, "x"]),
        "ERR FILTER field and value must be UTF-8"
    );
    assert!(fails(&mut c, &args!["ORCA.LIST"]).starts_with("ERR wrong number of arguments"));
    // Missing key: empty; another type: WRONGTYPE.
    assert_eq!(list(&mut c, "nokey", &[]), Vec::<Fields>::new());
    assert_eq!(
        list(&mut c, "nokey", &["FILTER", "course", "cs2500"]),
        Vec::<Fields>::new()
    );
    // Reading changed nothing.
    assert_eq!(digest(&mut c, q), digest_before);
    assert_eq!(list_all(&mut c, q), full);
}

// ---------------------------------------------------------------------------
// 3. ORCA.STATS against hand-computed values
// ---------------------------------------------------------------------------

#[test]
fn stats_hand_computed() {
    let s = Server::start(&[]);
    let mut c = s.conn();
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
    let g = pop_lease(&mut c, q, 60_000);
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
    let r = nack(&mut c, q, &g, &["DELAY", "60000"]);
    assert_eq!(text(&r, "outcome"), "retry");
    let f = stats(&mut c, q);
    assert_eq!(
        (int(&f, "queued"), int(&f, "leased"), int(&f, "delayed")),
        (6, 0, 1)
    );
    check_waits(&f, "wait_all", &[10_000, 5_000, 9_000, 3_000, 7_000, 2_000]);

    // ACK the next (a) with a result: results 1.
    let a = pop_lease(&mut c, q, 60_000);
    assert_eq!(text(&a, "key"), key_of("a"));
    ack(&mut c, q, &a, &["RESULT", "97"]);
    let f = stats(&mut c, q);
    assert_eq!((int(&f, "queued"), int(&f, "results")), (5, 1));

    // max-attempts 1: the next (d, on user.1's t-9000) dies on its NACK.
    config_set(&mut c, "orca.max-attempts", "1");
    let d = pop_lease(&mut c, q, 60_000);
    assert_eq!(text(&d, "key"), key_of("d"));
    let r = nack(&mut c, q, &d, &[]);
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

/// The contract: `WRONGTYPE` when the key holds another type.
#[test]
fn inspection_commands_reply_wrongtype() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &args!["SET", "str", "x"]);
    for cmd in [
        args!["ORCA.LIST", "str"],
        args!["ORCA.LIST", "str", "FILTER", "course", "cs2500"],
        args!["ORCA.STATS", "str"],
        args!["ORCA.STATUS", "str", key_of("a")],
        args!["ORCA.SETTINGS", "str"],
    ] {
        let e = fails(&mut c, &cmd);
        assert!(
            e.starts_with("WRONGTYPE"),
            "{}: expected a WRONGTYPE error, got {e:?}",
            show_args(&cmd)
        );
    }
}

// ---------------------------------------------------------------------------
// 4. INFO orca
// ---------------------------------------------------------------------------

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
    let s = Server::start(&[]);
    let mut c = s.conn();
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
    let j = pop_lease(&mut c, "q1", 60_000);
    e.add("popped", 1)
        .add("jobs_queued", -1)
        .add("jobs_leased", 1);
    e.check(&mut c, "a pop");
    ack(&mut c, "q1", &j, &[]);
    e.add("acked", 1).add("jobs_leased", -1);
    e.check(&mut c, "an ack");

    let j = pop_lease(&mut c, "q1", 60_000);
    let delayed_key = text(&j, "key");
    nack(&mut c, "q1", &j, &["DELAY", "60000"]);
    e.add("popped", 1).add("jobs_queued", -1).add("nacked", 1);
    e.add("jobs_delayed", 1);
    e.check(&mut c, "pop + nack with delay");

    ok(&mut c, &args!["ORCA.POP", "q2", "LEASE", "0"]);
    e.add("popped", 1).add("jobs_queued", -1);
    e.check(&mut c, "pop LEASE 0");

    // A retry due at once: the timer brings it back.
    let j = pop_lease(&mut c, "q1", 60_000);
    nack(&mut c, "q1", &j, &["DELAY", "100"]);
    e.add("popped", 1).add("nacked", 1).add("jobs_queued", -1);
    e.add("jobs_delayed", 1);
    e.check(&mut c, "nack DELAY 100");
    e.add("retried", 1)
        .add("jobs_queued", 1)
        .add("jobs_delayed", -1);
    e.wait(&mut c, "the retry coming due");

    // A lease that expires (the job comes back: queued again).
    pop_lease(&mut c, "q1", 50);
    e.add("popped", 1).add("expired", 1);
    e.wait(&mut c, "an expired lease");

    // Dead by NACK and dead by expiry with max-attempts 1.
    config_set(&mut c, "orca.max-attempts", "1");
    let j = pop_lease(&mut c, "q2", 60_000);
    assert_eq!(text(&nack(&mut c, "q2", &j, &[]), "outcome"), "dead");
    e.add("popped", 1).add("nacked", 1).add("dead", 1);
    e.add("jobs_queued", -1).add("jobs_dead", 1);
    e.check(&mut c, "a NACK to the dead list");
    // A lease that expires on its last attempt ended by expiry and was
    // buried: it counts in both orca_expired and orca_dead.
    let j = pop_lease(&mut c, "q1", 50);
    e.add("popped", 1)
        .add("expired", 1)
        .add("dead", 1)
        .add("jobs_queued", -1)
        .add("jobs_dead", 1);
    e.wait(&mut c, "an expiry to the dead list");
    assert_eq!(
        state_of(&mut c, "q1", &text(&j, "key")).as_deref(),
        Some("dead")
    );
    config_set(&mut c, "orca.max-attempts", "5");

    // Regrades (q4, deleted afterwards). A regrade of a running job
    // supersedes its lease: when that lease expires it is dropped, not
    // requeued, and still counts as expired.
    ok(&mut c, &args!["ORCA.ENQUEUE", "q4", config("r", None, 0)]);
    e.add("queues", 1).add("jobs_queued", 1).add("enqueued", 1);
    e.check(&mut c, "an enqueue in q4");
    pop_lease(&mut c, "q4", 1_000);
    e.add("popped", 1)
        .add("jobs_queued", -1)
        .add("jobs_leased", 1);
    ok(&mut c, &args!["ORCA.ENQUEUE", "q4", config("r", None, 1)]);
    e.add("enqueued", 1).add("jobs_queued", 1);
    e.check(&mut c, "a regrade of a leased job");
    e.add("expired", 1).add("jobs_leased", -1);
    e.wait(&mut c, "the superseded lease expiring (dropped)");
    assert_eq!(
        state_of(&mut c, "q4", &key_of("r")).as_deref(),
        Some("queued")
    );
    // A regrade drops a pending retry at once; it never comes due, so it is
    // not counted as retried.
    let j = pop_lease(&mut c, "q4", 60_000);
    nack(&mut c, "q4", &j, &["DELAY", "60000"]);
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
    let j = pop_lease(&mut c, "q4", 60_000);
    e.add("popped", 1)
        .add("jobs_queued", -1)
        .add("jobs_leased", 1);
    ok(&mut c, &args!["ORCA.ENQUEUE", "q4", config("r", None, 3)]);
    e.add("enqueued", 1).add("jobs_queued", 1);
    assert_eq!(text(&nack(&mut c, "q4", &j, &[]), "outcome"), "superseded");
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
    wait_until("q2r to expire", || {
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
    e.check(&mut c, "FLUSHALL");

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

// ---------------------------------------------------------------------------
// 5. Module settings
// ---------------------------------------------------------------------------

/// Every setting as test servers run with it: the module's defaults, except
/// `orca.trust-client-clock`, which the harness turns on so tests may pin
/// the clock (its real default, no, is checked in
/// `trust_client_clock_is_off_by_default`).
const DEFAULTS: [(&str, &str); 22] = [
    ("orca.trust-client-clock", "yes"),
    ("orca.move-to-back-buffer", "10000"),
    ("orca.default-order", "lifo"),
    ("orca.lease-time", "300000"),
    ("orca.max-attempts", "5"),
    ("orca.retry-base", "1000"),
    ("orca.retry-cap", "300000"),
    ("orca.result-ttl", "3600000"),
    ("orca.max-pop-count", "1000"),
    ("orca.max-payload-bytes", "4194304"),
    ("orca.max-queue-length", "10000000"),
    ("orca.max-key-length", "1024"),
    ("orca.max-collation-id-length", "256"),
    ("orca.max-gate-length", "256"),
    ("orca.job-lifetime", "0"),
    ("orca.max-running", "0"),
    ("orca.dead-max", "100000"),
    ("orca.dead-ttl", "0"),
    ("orca.result-max", "100000"),
    ("orca.autodelay-window", "0"),
    ("orca.autodelay-step", "0"),
    ("orca.autodelay-cap", "0"),
];

fn defaults_with(changes: &[(&str, &str)]) -> HashMap<String, String> {
    let mut m: HashMap<String, String> = DEFAULTS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in changes {
        assert!(m.insert(k.to_string(), v.to_string()).is_some(), "{k}");
    }
    m
}

#[test]
fn settings_listed_and_change_behaviour() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "orca.*"), defaults_with(&[]));
    let t = server_ms(&mut c);

    // move-to-back-buffer: DELAY scores.
    let q = "m";
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", q, config("a", None, 0), "NOW", t],
    );
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", q, config("b", None, 500), "NOW", t],
    );
    let f = fields(ok(&mut c, &args!["ORCA.MOVE", q, key_of("a"), "DELAY"]));
    assert_eq!(int(&f, "release_at"), t + 500 + 10_000);
    config_set(&mut c, "orca.move-to-back-buffer", "2500");
    assert_eq!(
        config_get(&mut c, "orca.move-to-back-buffer")["orca.move-to-back-buffer"],
        "2500"
    );
    let f = fields(ok(&mut c, &args!["ORCA.MOVE", q, key_of("b"), "DELAY"]));
    assert_eq!(int(&f, "release_at"), t + 10_500 + 2_500);
    let f = fields(ok(
        &mut c,
        &args!["ORCA.MOVE", q, key_of("a"), "DELAY", "BUFFER", "7"],
    ));
    assert_eq!(
        int(&f, "release_at"),
        t + 13_000 + 7,
        "BUFFER overrides the setting"
    );
    assert_eq!(keys(&list_all(&mut c, q)), vec![key_of("b"), key_of("a")]);

    // default-order: new queues only.
    let pop_keys = |c: &mut redis::Connection, q: &str| -> Vec<String> {
        pop_all(c, q).iter().map(|f| text(f, "key")).collect()
    };
    ok(
        &mut c,
        &args![
            "ORCA.ENQUEUE",
            "old",
            config("o1", Some("user.1"), 0),
            "NOW",
            t
        ],
    );
    config_set(&mut c, "orca.default-order", "fifo");
    assert_eq!(order_of(&mut c, "old"), "lifo");
    assert_eq!(
        order_of(&mut c, "missing"),
        "fifo",
        "defaults of a missing key"
    );
    ok(
        &mut c,
        &args![
            "ORCA.ENQUEUE",
            "old",
            config("o2", Some("user.1"), 0),
            "NOW",
            t + 1
        ],
    );
    ok(
        &mut c,
        &args![
            "ORCA.ENQUEUE",
            "new",
            config("n1", Some("user.1"), 0),
            "NOW",
            t
        ],
    );
    ok(
        &mut c,
        &args![
            "ORCA.ENQUEUE",
            "new",
            config("n2", Some("user.1"), 0),
            "NOW",
            t + 1
        ],
    );
    assert_eq!(order_of(&mut c, "new"), "fifo");
    assert_eq!(pop_keys(&mut c, "old"), vec![key_of("o2"), key_of("o1")]);
    assert_eq!(pop_keys(&mut c, "new"), vec![key_of("n1"), key_of("n2")]);
    config_set(&mut c, "orca.default-order", "LIFO");
    assert_eq!(
        config_get(&mut c, "orca.default-order")["orca.default-order"],
        "lifo"
    );
    assert_eq!(
        order_of(&mut c, "new"),
        "fifo",
        "an existing queue keeps its order"
    );

    // lease-time: the deadline of a POP without LEASE.
    config_set(&mut c, "orca.lease-time", "1234");
    for k in ["l1", "l2"] {
        ok(
            &mut c,
            &args!["ORCA.ENQUEUE", "lt", config(k, None, 0), "NOW", t],
        );
    }
    let f = fields(ok(&mut c, &args!["ORCA.POP", "lt", "NOW", t + 5]));
    assert_eq!(int(&f, "deadline"), t + 5 + 1234);
    let t0 = server_ms(&mut c);
    let f = fields(ok(&mut c, &args!["ORCA.POP", "lt"]));
    let t1 = server_ms(&mut c);
    let dl = int(&f, "deadline");
    assert!(
        (t0 + 1234..=t1 + 1234).contains(&dl),
        "deadline {dl} not within [{t0}, {t1}] + 1234"
    );
    let st = status(&mut c, "lt", &text(&f, "key")).unwrap();
    assert_eq!(int(&st, "deadline"), dl);

    // max-pop-count: COUNT and LIMIT bounds.
    config_set(&mut c, "orca.max-pop-count", "3");
    for i in 0..5 {
        ok(
            &mut c,
            &args!["ORCA.ENQUEUE", "mp", config(&format!("p{i}"), None, 0)],
        );
    }
    assert_eq!(
        fails(&mut c, &args!["ORCA.POP", "mp", "COUNT", "4"]),
        "ERR COUNT must be between 1 and 3"
    );
    assert_eq!(
        fails(&mut c, &args!["ORCA.LIST", "mp", "LIMIT", "4"]),
        "ERR LIMIT must be between 0 and 3"
    );
    assert_eq!(
        fails(&mut c, &args!["ORCA.DEAD", "mp", "LIST", "LIMIT", "4"]),
        "ERR LIMIT must be between 0 and 3"
    );
    assert_eq!(
        list(&mut c, "mp", &[]).len(),
        3,
        "default LIMIT capped by the setting"
    );
    match ok(&mut c, &args!["ORCA.POP", "mp", "COUNT", "3", "LEASE", "0"]) {
        Value::Array(items) => assert_eq!(items.len(), 3),
        other => panic!("POP COUNT 3: {other:?}"),
    }
    config_set(&mut c, "orca.max-pop-count", "1000");
    match ok(&mut c, &args!["ORCA.POP", "mp", "COUNT", "4", "LEASE", "0"]) {
        Value::Array(items) => assert_eq!(items.len(), 2),
        other => panic!("POP COUNT 4: {other:?}"),
    }

    // retry-base / retry-cap: NACK backoff base * 2^(attempts-1), capped.
    config_set(&mut c, "orca.retry-base", "100");
    config_set(&mut c, "orca.retry-cap", "250");
    ok(&mut c, &args!["ORCA.ENQUEUE", "rb", config("r", None, 0)]);
    let rk = key_of("r");
    for (attempt, backoff) in [(1, 100), (2, 200), (3, 250)] {
        let j = pop_lease(&mut c, "rb", 60_000);
        assert_eq!(int(&j, "attempt"), attempt);
        let now = server_ms(&mut c);
        let r = nack(&mut c, "rb", &j, &["NOW", &now.to_string()]);
        assert_eq!(text(&r, "outcome"), "retry");
        assert_eq!(int(&r, "retry_at"), now + backoff, "attempt {attempt}");
        wait_until("the retry", || {
            state_of(&mut c, "rb", &rk).as_deref() == Some("queued")
        });
    }

    // max-attempts: the 2nd failed delivery dies.
    config_set(&mut c, "orca.max-attempts", "2");
    ok(&mut c, &args!["ORCA.ENQUEUE", "ma", config("x", None, 0)]);
    let j = pop_lease(&mut c, "ma", 60_000);
    assert_eq!(
        text(&nack(&mut c, "ma", &j, &["DELAY", "0"]), "outcome"),
        "retry"
    );
    wait_until("the retry", || {
        state_of(&mut c, "ma", &key_of("x")).as_deref() == Some("queued")
    });
    let j = pop_lease(&mut c, "ma", 60_000);
    assert_eq!(text(&nack(&mut c, "ma", &j, &[]), "outcome"), "dead");
    config_set(&mut c, "orca.max-attempts", "5");

    // result-ttl: kept by default, not kept with 0, forgotten after the TTL.
    let ack_result = |c: &mut redis::Connection, name: &str| -> Value {
        ok(c, &args!["ORCA.ENQUEUE", "rt", config(name, None, 0)]);
        let j = pop_lease(c, "rt", 60_000);
        ack(c, "rt", &j, &["RESULT", "done"]);
        ok(c, &args!["ORCA.RESULT", "rt", key_of(name)])
    };
    assert_eq!(as_string(&ack_result(&mut c, "r1")), "done");
    config_set(&mut c, "orca.result-ttl", "0");
    assert_eq!(ack_result(&mut c, "r2"), Value::Nil);
    config_set(&mut c, "orca.result-ttl", "150");
    assert_eq!(as_string(&ack_result(&mut c, "r3")), "done");
    wait_until("the result to be forgotten", || {
        ok(&mut c, &args!["ORCA.RESULT", "rt", key_of("r3")]) == Value::Nil
    });
    assert_eq!(
        as_string(&ok(&mut c, &args!["ORCA.RESULT", "rt", key_of("r1")])),
        "done"
    );

    // Bad values are refused and change nothing.
    let before = config_get(&mut c, "orca.*");
    for (name, v) in [
        ("orca.max-pop-count", "0"),
        ("orca.max-pop-count", "abc"),
        ("orca.default-order", "random"),
        ("orca.lease-time", "-1"),
        ("orca.move-to-back-buffer", "9007199254740992"),
    ] {
        let e = fails(&mut c, &args!["CONFIG", "SET", name, v]);
        assert!(e.starts_with("ERR"), "CONFIG SET {name} {v}: {e}");
    }
    assert_eq!(config_get(&mut c, "orca.*"), before);
    // Every setting is also listed one by one.
    for (k, _) in DEFAULTS {
        assert!(config_get(&mut c, k).contains_key(k), "CONFIG GET {k}");
    }
}

#[test]
fn settings_from_module_args_and_command_line() {
    // loadmodule arguments.
    let s = Server::start_with(
        &[
            "lease-time",
            "1234",
            "default-order",
            "fifo",
            "max-pop-count",
            "7",
        ],
        &[],
    );
    let mut c = s.conn();
    assert_eq!(
        config_get(&mut c, "orca.*"),
        defaults_with(&[
            ("orca.lease-time", "1234"),
            ("orca.default-order", "fifo"),
            ("orca.max-pop-count", "7"),
        ])
    );
    let t = server_ms(&mut c);
    ok(
        &mut c,
        &args![
            "ORCA.ENQUEUE",
            "q",
            config("a", Some("user.1"), 0),
            "NOW",
            t
        ],
    );
    ok(
        &mut c,
        &args![
            "ORCA.ENQUEUE",
            "q",
            config("b", Some("user.1"), 0),
            "NOW",
            t + 1
        ],
    );
    assert_eq!(order_of(&mut c, "q"), "fifo");
    assert_eq!(
        fails(&mut c, &args!["ORCA.POP", "q", "COUNT", "8"]),
        "ERR COUNT must be between 1 and 7"
    );
    let f = fields(ok(&mut c, &args!["ORCA.POP", "q", "NOW", t + 10]));
    assert_eq!(text(&f, "key"), key_of("a"), "FIFO");
    assert_eq!(int(&f, "deadline"), t + 10 + 1234);
    drop(c);
    drop(s);

    // Config directives on the command line.
    let s = Server::start(&[
        "--orca.move-to-back-buffer",
        "4321",
        "--orca.max-attempts",
        "2",
        "--orca.result-ttl",
        "0",
    ]);
    let mut c = s.conn();
    assert_eq!(
        config_get(&mut c, "orca.*"),
        defaults_with(&[
            ("orca.move-to-back-buffer", "4321"),
            ("orca.max-attempts", "2"),
            ("orca.result-ttl", "0"),
        ])
    );
    let t = server_ms(&mut c);
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", config("a", None, 0), "NOW", t],
    );
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", config("b", None, 0), "NOW", t],
    );
    let f = fields(ok(&mut c, &args!["ORCA.MOVE", "q", key_of("a"), "DELAY"]));
    assert_eq!(int(&f, "release_at"), t + 4321);
}

#[test]
fn queue_order_persists_across_reload() {
    let mut s = Server::start(&[]);
    let mut c = s.conn();
    let t = server_ms(&mut c);
    // a: made FIFO by SETTINGS (created empty); b: LIFO by default; c:
    // created FIFO by a changed default, then set to LIFO; d: FIFO by the
    // changed default.
    let f = fields(ok(&mut c, &args!["ORCA.SETTINGS", "a", "ORDER", "FIFO"]));
    assert_eq!(
        (text(&f, "order"), int(&f, "jobs"), int(&f, "collations")),
        ("fifo".to_string(), 0, 0)
    );
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "b", config("b0", None, 0), "NOW", t],
    );
    config_set(&mut c, "orca.default-order", "fifo");
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "c", config("c0", None, 0), "NOW", t],
    );
    ok(&mut c, &args!["ORCA.SETTINGS", "c", "ORDER", "lifo"]);
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "d", config("d0", None, 0), "NOW", t],
    );
    config_set(&mut c, "orca.default-order", "lifo");
    let want = [("a", "fifo"), ("b", "lifo"), ("c", "lifo"), ("d", "fifo")];
    let check = |c: &mut redis::Connection, when: &str| {
        for (q, o) in want {
            assert_eq!(order_of(c, q), o, "order of {q} {when}");
            assert_eq!(as_int(&ok(c, &args!["EXISTS", q])), 1, "{q} {when}");
        }
    };
    check(&mut c, "before reload");
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    check(&mut c, "after DEBUG RELOAD");
    // The order still decides where new jobs go.
    for (q, o) in want {
        for (i, k) in ["x1", "x2"].iter().enumerate() {
            let name = format!("{q}-{k}");
            ok(
                &mut c,
                &args![
                    "ORCA.ENQUEUE",
                    q,
                    config(&name, Some("user.1"), 0),
                    "NOW",
                    t + 10 + i as i64
                ],
            );
        }
        let order: Vec<String> = pop_all(&mut c, q)
            .iter()
            .map(|f| text(f, "key"))
            .filter(|k| *k == key_of(&format!("{q}-x1")) || *k == key_of(&format!("{q}-x2")))
            .collect();
        let (first, second) = if o == "fifo" {
            ("x1", "x2")
        } else {
            ("x2", "x1")
        };
        assert_eq!(
            order,
            vec![
                key_of(&format!("{q}-{first}")),
                key_of(&format!("{q}-{second}"))
            ],
            "collation order of {q} ({o}) after reload"
        );
    }
    // And across a restart (the default setting is not saved, the queues are).
    config_set(&mut c, "orca.default-order", "fifo");
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(
        config_get(&mut c, "orca.default-order")["orca.default-order"],
        "lifo"
    );
    check(&mut c, "after a restart");
}

// ---------------------------------------------------------------------------
// 6. RESP3
// ---------------------------------------------------------------------------

/// A reply as redis-cli would show it under RESP2: maps become flat arrays.
fn flatten(v: &Value) -> Value {
    match v {
        Value::Map(m) => Value::Array(
            m.iter()
                .flat_map(|(k, v)| [flatten(k), flatten(v)])
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(flatten).collect()),
        Value::SimpleString(s) => Value::BulkString(s.clone().into_bytes()),
        other => other.clone(),
    }
}

fn assert_map(v: &Value, what: &str) -> Fields {
    assert!(
        matches!(v, Value::Map(_)),
        "{what}: expected a RESP3 map, got {v:?}"
    );
    fields(v.clone())
}

/// A RESP2 field/value reply: a flat array, string keys in alphabetical order.
fn assert_flat_sorted(v: &Value, what: &str) -> Fields {
    let Value::Array(items) = v else {
        panic!("{what}: expected a flat array, got {v:?}");
    };
    let names: Vec<String> = items.iter().step_by(2).map(as_string).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "{what}: fields in alphabetical order");
    fields(v.clone())
}

#[test]
fn resp3_replies_are_maps() {
    let s = Server::start(&[]);
    let mut c2 = s.conn();
    let mut c3 = s.conn_resp3();
    // Also switch a plain connection by sending HELLO 3 ourselves.
    let mut h3 = s.conn();
    let hello = raw(&mut h3, &args!["HELLO", "3"]);
    let hf = assert_map(&hello, "HELLO 3");
    assert_eq!(int(&hf, "proto"), 3);

    let q = "r";
    let t = server_ms(&mut c2);
    let v = ok(
        &mut c3,
        &args![
            "ORCA.ENQUEUE",
            q,
            config("a", Some("user.1"), 0),
            "NOW",
            t - 1000
        ],
    );
    let f = assert_map(&v, "ENQUEUE");
    assert_eq!(int(&f, "created"), 1);
    let v = ok(
        &mut c2,
        &args!["ORCA.ENQUEUE", q, config("b", None, 50), "NOW", t - 900],
    );
    let f = assert_flat_sorted(&v, "ENQUEUE (RESP2)");
    assert_eq!(get(&f, "collation"), &Value::Nil);
    ok(
        &mut c2,
        &args![
            "ORCA.IMMEDIATE",
            q,
            config("c", Some("team.t"), 0),
            "NOW",
            t - 800
        ],
    );
    ok(
        &mut c2,
        &args!["ORCA.ENQUEUE", q, config("d", None, 0), "NOW", t - 700],
    );

    // Same content under both protocols, for every read command.
    let reads = [
        args!["ORCA.STATUS", q, key_of("a")],
        args!["ORCA.STATUS", q, key_of("b")],
        args!["ORCA.SETTINGS", q],
        args!["ORCA.LIST", q],
        args!["ORCA.LIST", q, "FILTER", "x", "y"],
    ];
    for cmd in &reads {
        let r2 = ok(&mut c2, cmd);
        let r3 = ok(&mut c3, cmd);
        let r3h = ok(&mut h3, cmd);
        assert_eq!(flatten(&r3), r2, "{}", show_args(cmd));
        assert_eq!(r3h, r3, "{} over HELLO 3", show_args(cmd));
    }
    let st = assert_map(
        &ok(&mut c3, &args!["ORCA.STATUS", q, key_of("a")]),
        "STATUS",
    );
    assert_eq!(text(&st, "state"), "queued");
    assert_eq!(get(&st, "leases"), &Value::Array(vec![]));
    assert_flat_sorted(
        &ok(&mut c2, &args!["ORCA.STATUS", q, key_of("a")]),
        "STATUS (RESP2)",
    );
    assert_map(&ok(&mut c3, &args!["ORCA.SETTINGS", q]), "SETTINGS");
    assert_flat_sorted(&ok(&mut c2, &args!["ORCA.SETTINGS", q]), "SETTINGS (RESP2)");
    assert_map(
        &ok(&mut c3, &args!["ORCA.SETTINGS", q, "ORDER", "LIFO"]),
        "SETTINGS ORDER",
    );
    match ok(&mut c3, &args!["ORCA.LIST", q]) {
        Value::Array(items) => {
            assert_eq!(items.len(), 4);
            for it in &items {
                assert_map(it, "LIST item");
            }
        }
        other => panic!("LIST: {other:?}"),
    }
    match ok(&mut c2, &args!["ORCA.LIST", q]) {
        Value::Array(items) => {
            for it in &items {
                assert_flat_sorted(it, "LIST item (RESP2)");
            }
        }
        other => panic!("LIST: {other:?}"),
    }

    // STATS: a map with maps inside; RESP2 nested flat arrays.
    let st3 = assert_map(&ok(&mut c3, &args!["ORCA.STATS", q]), "STATS");
    assert_map(get(&st3, "wait_all"), "STATS wait_all");
    assert_map(get(&st3, "wait_released"), "STATS wait_released");
    let st2 = assert_flat_sorted(&ok(&mut c2, &args!["ORCA.STATS", q]), "STATS (RESP2)");
    assert_flat_sorted(get(&st2, "wait_all"), "STATS wait_all (RESP2)");
    assert_eq!(int(&st3, "queued"), 4);

    // POP (job reply + lease), STATUS of a leased job with its leases.
    let p3 = assert_map(&ok(&mut c3, &args!["ORCA.POP", q, "LEASE", "60000"]), "POP");
    let p2 = assert_flat_sorted(
        &ok(&mut c2, &args!["ORCA.POP", q, "LEASE", "60000"]),
        "POP (RESP2)",
    );
    let st = assert_map(
        &ok(&mut c3, &args!["ORCA.STATUS", q, text(&p3, "key")]),
        "STATUS",
    );
    assert_eq!(text(&st, "state"), "leased");
    match get(&st, "leases") {
        Value::Array(ls) => {
            assert_eq!(ls.len(), 1);
            let l = assert_map(&ls[0], "a lease");
            assert_eq!(text(&l, "lease"), text(&p3, "lease"));
        }
        other => panic!("leases: {other:?}"),
    }
    let st2 = assert_flat_sorted(
        &ok(&mut c2, &args!["ORCA.STATUS", q, text(&p3, "key")]),
        "STATUS",
    );
    match get(&st2, "leases") {
        Value::Array(ls) => {
            assert_flat_sorted(&ls[0], "a lease (RESP2)");
        }
        other => panic!("leases: {other:?}"),
    }
    // POP COUNT: an array of maps.
    match ok(
        &mut c3,
        &args!["ORCA.POP", q, "COUNT", "1", "LEASE", "60000"],
    ) {
        Value::Array(items) => {
            assert_eq!(items.len(), 1);
            assert_map(&items[0], "POP COUNT item");
        }
        other => panic!("POP COUNT: {other:?}"),
    }

    // NACK replies: map / flat array; the delayed job's STATUS.
    let k3 = text(&p3, "key");
    let n3 = assert_map(
        &ok(
            &mut c3,
            &args!["ORCA.NACK", q, &k3, text(&p3, "lease"), "DELAY", "60000"],
        ),
        "NACK",
    );
    assert_eq!(text(&n3, "outcome"), "retry");
    let n2 = assert_flat_sorted(
        &ok(
            &mut c2,
            &args![
                "ORCA.NACK",
                q,
                text(&p2, "key"),
                text(&p2, "lease"),
                "DELAY",
                "60000"
            ],
        ),
        "NACK (RESP2)",
    );
    assert_eq!(text(&n2, "outcome"), "retry");
    let st = assert_map(
        &ok(&mut c3, &args!["ORCA.STATUS", q, &k3]),
        "STATUS delayed",
    );
    assert_eq!(text(&st, "state"), "delayed");
    assert_map(&ok(&mut c3, &args!["ORCA.TICK", q]), "TICK");
    assert_flat_sorted(&ok(&mut c2, &args!["ORCA.TICK", q]), "TICK (RESP2)");

    // A dead NACK, DEAD LIST, STATUS of a dead job, DEAD REQUEUE.
    config_set(&mut c2, "orca.max-attempts", "1");
    let p = assert_map(&ok(&mut c3, &args!["ORCA.POP", q, "LEASE", "60000"]), "POP");
    let kd = text(&p, "key");
    let nd = assert_map(
        &ok(&mut c3, &args!["ORCA.NACK", q, &kd, text(&p, "lease")]),
        "NACK dead",
    );
    assert_eq!(text(&nd, "outcome"), "dead");
    match ok(&mut c3, &args!["ORCA.DEAD", q, "LIST"]) {
        Value::Array(items) => {
            assert_eq!(items.len(), 1);
            assert_map(&items[0], "DEAD LIST item");
        }
        other => panic!("DEAD LIST: {other:?}"),
    }
    match ok(&mut c2, &args!["ORCA.DEAD", q, "LIST"]) {
        Value::Array(items) => {
            assert_flat_sorted(&items[0], "DEAD LIST item (RESP2)");
        }
        other => panic!("DEAD LIST: {other:?}"),
    }
    let st = assert_map(&ok(&mut c3, &args!["ORCA.STATUS", q, &kd]), "STATUS dead");
    assert_eq!(text(&st, "state"), "dead");
    assert_map(
        &ok(&mut c3, &args!["ORCA.DEAD", q, "REQUEUE", &kd]),
        "DEAD REQUEUE",
    );
    config_set(&mut c2, "orca.max-attempts", "5");
    // Nil stays nil.
    assert_eq!(
        ok(&mut c3, &args!["ORCA.STATUS", q, key_of("nope")]),
        Value::Nil
    );

    // On the wire: `%` maps under RESP3, `*` arrays under RESP2, `_` nulls.
    let mut w3 = Wire::connect(s.port);
    assert_eq!(w3.call(&["HELLO", "3"]).kind, b'%');
    let kd_s = key_of("d");
    let st = w3.call(&["ORCA.STATUS", q, &kd_s]);
    assert_eq!(st.kind, b'%', "STATUS on the wire: {st:?}");
    assert_eq!(st.field("collation").kind, b'_');
    assert_eq!(st.field("position").kind, b':');
    let stats3 = w3.call(&["ORCA.STATS", q]);
    assert_eq!(stats3.kind, b'%');
    assert_eq!(stats3.field("wait_all").kind, b'%');
    assert_eq!(w3.call(&["ORCA.SETTINGS", q]).kind, b'%');
    let l = w3.call(&["ORCA.LIST", q, "LIMIT", "1"]);
    assert_eq!((l.kind, l.kids.len()), (b'*', 1));
    assert_eq!(l.kids[0].kind, b'%');
    assert_eq!(w3.call(&["ORCA.STATUS", q, "nope"]).kind, b'_');
    let mut w2 = Wire::connect(s.port);
    let st = w2.call(&["ORCA.STATUS", q, &kd_s]);
    assert_eq!(st.kind, b'*', "STATUS on the wire (RESP2): {st:?}");
    assert_eq!(st.kids.len() % 2, 0);
    let coll = st.field("collation");
    assert!(
        coll.kind == b'$' && coll.null,
        "nil collation under RESP2: {coll:?}"
    );
    let stats2 = w2.call(&["ORCA.STATS", q]);
    assert_eq!((stats2.kind, stats2.field("wait_all").kind), (b'*', b'*'));
    assert_eq!(w2.call(&["ORCA.SETTINGS", q]).kind, b'*');
}

/// One reply as it came over the wire.
#[derive(Debug)]
struct Node {
    kind: u8,
    data: Vec<u8>,
    null: bool,
    kids: Vec<Node>,
}

impl Node {
    /// The value after the key `name` in a map / flat field array.
    fn field(&self, name: &str) -> &Node {
        assert!(
            matches!(self.kind, b'%' | b'*'),
            "not a field reply: {self:?}"
        );
        self.kids
            .chunks(2)
            .find(|kv| kv[0].data == name.as_bytes())
            .map(|kv| &kv[1])
            .unwrap_or_else(|| panic!("no field {name} in {self:?}"))
    }
}

/// A raw RESP2/RESP3 connection.
struct Wire {
    r: BufReader<TcpStream>,
}

impl Wire {
    fn connect(port: u16) -> Wire {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Wire {
            r: BufReader::new(s),
        }
    }

    fn call(&mut self, args: &[&str]) -> Node {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend(format!("${}\r\n", a.len()).into_bytes());
            out.extend(a.as_bytes());
            out.extend(b"\r\n");
        }
        self.r.get_mut().write_all(&out).expect("write");
        self.read()
    }

    fn line(&mut self) -> Vec<u8> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l).expect("read");
        assert!(l.ends_with(b"\r\n"), "truncated reply line {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    fn read(&mut self) -> Node {
        let l = self.line();
        let kind = l[0];
        let rest = l[1..].to_vec();
        let num = || -> i64 { String::from_utf8_lossy(&rest).parse().expect("length") };
        let mut node = Node {
            kind,
            data: Vec::new(),
            null: false,
            kids: Vec::new(),
        };
        match kind {
            b'+' | b'-' | b':' | b',' | b'#' | b'(' => node.data = rest,
            b'_' => node.null = true,
            b'$' | b'=' | b'!' => {
                let n = num();
                if n < 0 {
                    node.null = true;
                } else {
                    let mut b = vec![0u8; n as usize + 2];
                    self.r.read_exact(&mut b).expect("read");
                    b.truncate(n as usize);
                    node.data = b;
                }
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n = num();
                if n < 0 {
                    node.null = true;
                } else {
                    let n = if matches!(kind, b'%' | b'|') {
                        2 * n
                    } else {
                        n
                    };
                    for _ in 0..n {
                        node.kids.push(self.read());
                    }
                }
            }
            other => panic!("unknown RESP type byte {:?}", other as char),
        }
        node
    }
}

// ---------------------------------------------------------------------------
// 7. Keyspace events
// ---------------------------------------------------------------------------

struct Events<'a> {
    ps: redis::PubSub<'a>,
}

impl Events<'_> {
    /// The next (keyspace event, keyevent key) pair for key `q`.
    fn next(&mut self) -> String {
        let m = self.ps.get_message().expect("an event in time");
        assert_eq!(m.get_channel_name(), "__keyspace@0__:q", "{m:?}");
        let ev: String = m.get_payload().unwrap();
        let m2 = self.ps.get_message().expect("the keyevent message");
        assert_eq!(m2.get_channel_name(), format!("__keyevent@0__:{ev}"));
        let key: String = m2.get_payload().unwrap();
        assert_eq!(key, "q");
        ev
    }

    fn expect(&mut self, want: &[&str], step: &str) {
        for w in want {
            let got = self.next();
            assert_eq!(got, *w, "event after {step}");
        }
    }
}

#[test]
fn keyspace_events_in_order() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    config_set(&mut c, "notify-keyspace-events", "KEd");
    let mut sub = s.conn();
    let mut ps = sub.as_pubsub();
    ps.psubscribe("__keyspace@0__:q").unwrap();
    ps.psubscribe("__keyevent@0__:orca.*").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ev = Events { ps };
    let q = "q";
    let (k1, k3, k4) = (key_of("j1"), key_of("j3"), key_of("j4"));

    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", q, config("j1", Some("user.1"), 0)],
    );
    ev.expect(&["orca.enqueue"], "ENQUEUE");
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", q, config("j1", Some("user.1"), 5)],
    );
    ev.expect(&["orca.update"], "ENQUEUE of an existing job");
    ok(&mut c, &args!["ORCA.IMMEDIATE", q, config("j2", None, 0)]);
    ev.expect(&["orca.immediate"], "IMMEDIATE");

    // Reads and failures publish nothing (checked by the next event).
    ok(&mut c, &args!["ORCA.LIST", q]);
    ok(&mut c, &args!["ORCA.STATUS", q, &k1]);
    ok(&mut c, &args!["ORCA.STATS", q]);
    ok(&mut c, &args!["ORCA.LEN", q]);
    ok(&mut c, &args!["ORCA.SETTINGS", q]);
    fails(&mut c, &args!["ORCA.ACK", q, &k1, "12345"]);
    fails(&mut c, &args!["ORCA.MOVE", q, key_of("zz"), "RELEASE"]);
    fails(&mut c, &args!["ORCA.ENQUEUE", q, "{}"]);

    let j = pop_lease(&mut c, q, 60_000);
    ev.expect(&["orca.pop"], "POP");
    ok(
        &mut c,
        &args![
            "ORCA.EXTEND",
            q,
            text(&j, "key"),
            text(&j, "lease"),
            "60000"
        ],
    );
    ev.expect(&["orca.extend"], "EXTEND");
    ack(&mut c, q, &j, &[]);
    ev.expect(&["orca.ack"], "ACK");

    // NACK, and the retry brought back by the server timer.
    let j = pop_lease(&mut c, q, 60_000);
    let kj = text(&j, "key");
    ev.expect(&["orca.pop"], "POP");
    nack(&mut c, q, &j, &["DELAY", "100"]);
    ev.expect(&["orca.nack"], "NACK");
    wait_until("the retry", || {
        state_of(&mut c, q, &kj).as_deref() == Some("queued")
    });
    ev.expect(&["orca.retry"], "a due retry");

    // A lease the server timer expires.
    let j = pop_lease(&mut c, q, 100);
    assert_eq!(text(&j, "key"), kj);
    ev.expect(&["orca.pop"], "POP LEASE 100");
    wait_until("the expiry", || {
        state_of(&mut c, q, &kj).as_deref() == Some("queued")
    });
    ev.expect(&["orca.expire"], "an expired lease");

    // Third delivery fails with max-attempts 3: dead.
    config_set(&mut c, "orca.max-attempts", "3");
    let j = pop_lease(&mut c, q, 60_000);
    assert_eq!(int(&j, "attempt"), 3);
    ev.expect(&["orca.pop"], "POP");
    assert_eq!(text(&nack(&mut c, q, &j, &[]), "outcome"), "dead");
    ev.expect(&["orca.nack", "orca.dead"], "a NACK to the dead list");
    ok(&mut c, &args!["ORCA.DEAD", q, "REQUEUE", &kj]);
    ev.expect(&["orca.requeue"], "DEAD REQUEUE");

    // Moves.
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", q, config("j3", Some("user.2"), 0)],
    );
    ev.expect(&["orca.enqueue"], "ENQUEUE");
    ok(&mut c, &args!["ORCA.MOVE", q, &k3, "DELAY"]);
    ev.expect(&["orca.delay"], "MOVE DELAY");
    ok(&mut c, &args!["ORCA.MOVE", q, &k3, "RELEASE"]);
    ev.expect(&["orca.release"], "MOVE RELEASE");

    // A lease expiring on its last attempt: dead by the timer.
    config_set(&mut c, "orca.max-attempts", "1");
    let j = pop_lease(&mut c, q, 100);
    assert_eq!(text(&j, "key"), k3, "the released job is first");
    ev.expect(&["orca.pop"], "POP");
    wait_until("the expiry to the dead list", || {
        state_of(&mut c, q, &k3).as_deref() == Some("dead")
    });
    // The lease expired, then the job died: both, in that order.
    ev.expect(
        &["orca.expire", "orca.dead"],
        "a lease expiring into the dead list",
    );
    config_set(&mut c, "orca.max-attempts", "5");
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DEAD", q, "PURGE"])), 1);
    ev.expect(&["orca.purge"], "DEAD PURGE");

    let t = server_ms(&mut c);
    ok(
        &mut c,
        &args!["ORCA.REENQUEUE", q, config("j4", None, 0), t - 5],
    );
    ev.expect(&["orca.reenqueue"], "REENQUEUE");
    ok(&mut c, &args!["ORCA.SETTINGS", q, "ORDER", "FIFO"]);
    ev.expect(&["orca.settings"], "SETTINGS ORDER");

    // DELETE of a queued job and of a running one.
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", q, &k4])), 1);
    ev.expect(&["orca.delete"], "DELETE");
    let j = pop_lease(&mut c, q, 60_000);
    ev.expect(&["orca.pop"], "POP");
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", q, text(&j, "key")])),
        1
    );
    ev.expect(&["orca.delete"], "DELETE of a leased job");

    // Pop LEASE 0 of the last jobs, then a pop of an empty queue (nothing).
    while qlen(&mut c, q) > 0 {
        ok(&mut c, &args!["ORCA.POP", q, "LEASE", "0"]);
        ev.expect(&["orca.pop"], "POP LEASE 0");
    }
    assert_eq!(ok(&mut c, &args!["ORCA.POP", q]), Value::Nil);
    // A DELETE that removes nothing, then the sentinel.
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", q, &k1])), 0);
    ok(&mut c, &args!["ORCA.ENQUEUE", q, config("j2", None, 0)]);
    ev.expect(&["orca.enqueue"], "the final ENQUEUE");
    ev.ps
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    if let Ok(m) = ev.ps.get_message() {
        panic!("unexpected event after the script: {m:?}");
    }
}

#[test]
fn trust_client_clock_is_off_by_default() {
    let s = Server::start(&["--orca.trust-client-clock", "no"]);
    let mut c = s.conn();
    let cfg = ok(&mut c, &args!["CONFIG", "GET", "orca.trust-client-clock"]);
    assert!(format!("{cfg:?}").contains("no"), "{cfg:?}");
    ok(&mut c, &args!["ORCA.ENQUEUE", "q", r#"{"key":"a"}"#]);
    // Worker commands refuse a client's pinned clock and dead-letter threshold...
    for a in [
        args!["ORCA.POP", "q", "NOW", "5"],
        args!["ORCA.POP", "q", "MAXATTEMPTS", "1"],
        args!["ORCA.TICK", "q", "NOW", "5"],
    ] {
        let e = fails(&mut c, &a);
        assert!(e.contains("orca.trust-client-clock"), "{e}");
    }
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.LEN", "q"])), 1);
    // ...until allowed; enqueue-side NOW stays open to clients.
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", r#"{"key":"b"}"#, "NOW", "5"],
    );
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.trust-client-clock", "yes"],
    );
    ok(&mut c, &args!["ORCA.TICK", "q", "NOW", "5"]);
}

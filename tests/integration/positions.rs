//! Where a job stands: `ORCA.STATUS` positions, `ORCA.LIST` order and
//! `ORCA.LEN` against a brute force (pop everything from a `COPY`) after
//! random workloads; `ORCA.LIST` paging and metadata filters.

use std::collections::{HashMap, HashSet};

use crate::common::*;
use redis::Value;

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
        reply_keys(&listing),
        reply_keys(&brute),
        "{ctx}: ORCA.LIST order differs from the pop order"
    );
    assert_eq!(qlen(c, q) as usize, listing.len(), "{ctx}: ORCA.LEN");
    let listed: HashSet<String> = reply_keys(&listing).into_iter().collect();
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
    let (_s, mut c) = start_server();
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
                        None => assert_eq!(error_code(&v).as_deref(), Some("NOJOB"), "{log:?}"),
                        Some(true) => {
                            assert_eq!(error_code(&v).as_deref(), Some("IMMEDIATE"), "{log:?}")
                        }
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

/// A random mix of commands on several collations; after each step the
/// STATUS positions of all queued jobs are exactly 1..n and POP agrees with
/// the job at position 1 (same nonce, release time, payload, ...).
#[test]
fn status_positions_agree_with_pop() {
    let (_s, mut c) = start_server();
    let mut rng = Rng::new(7);
    let mut queued: HashSet<String> = HashSet::new();
    let colls = [Some("user.1"), Some("user.2"), Some("team.1"), None];
    let mut now = 10_000i64;
    ok(&mut c, &args!["ORCA.SETTINGS", "q", "ORDER", "FIFO"]);
    for step in 0..300 {
        now += rng.below(500) as i64;
        let name = format!("j{}", rng.below(40));
        let key = key_of(&name);
        match rng.below(10) {
            0..=3 => {
                let f = enqueue_at(
                    &mut c,
                    "q",
                    &config(&name, *rng.pick(&colls), rng.below(5000) as i64),
                    now,
                );
                assert_eq!(int(&f, "created") == 1, !queued.contains(&key));
                queued.insert(key);
            }
            4 => {
                immediate_at(&mut c, "q", &config(&name, *rng.pick(&colls), 0), now);
                queued.insert(key);
            }
            5 => {
                let action = if rng.chance(50) { "RELEASE" } else { "DELAY" };
                let v = raw(&mut c, &args!["ORCA.MOVE", "q", &key, action, "NOW", now]);
                if let Some(e) = error_text(&v) {
                    let st = status(&mut c, "q", &key);
                    match st {
                        None => assert_eq!(e, "NOJOB no such job"),
                        Some(st) => {
                            assert_eq!(int(&st, "immediate"), 1);
                            assert_eq!(e, "IMMEDIATE immediate jobs cannot be moved");
                        }
                    }
                }
            }
            6 => {
                let n = as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", &key]));
                assert_eq!(n == 1, queued.remove(&key), "step {step}");
            }
            7 => {
                if rng.chance(30) {
                    let o = if rng.chance(50) { "LIFO" } else { "FIFO" };
                    ok(&mut c, &args!["ORCA.SETTINGS", "q", "ORDER", o]);
                }
            }
            _ => {
                // Check all positions, then pop.
                let mut at: HashMap<i64, Fields> = HashMap::new();
                for k in &queued {
                    let st = must_status(&mut c, "q", k);
                    assert_eq!(&text(&st, "key"), k);
                    assert!(
                        at.insert(int(&st, "position"), st).is_none(),
                        "duplicate position"
                    );
                }
                let n = queued.len() as i64;
                assert_eq!(qlen(&mut c, "q"), n);
                assert!(
                    (1..=n).all(|p| at.contains_key(&p)),
                    "positions not 1..{n}, step {step}"
                );
                match pop(&mut c, "q", 0) {
                    None => assert!(queued.is_empty()),
                    Some(p) => {
                        let first = &at[&1];
                        for field in [
                            "key",
                            "nonce",
                            "release_at",
                            "created_at",
                            "collation",
                            "immediate",
                            "payload",
                        ] {
                            assert_eq!(get(&p, field), get(first, field), "step {step}: {field}");
                        }
                        assert_eq!(int(&p, "attempts"), int(first, "attempts") + 1);
                        queued.remove(&text(&p, "key"));
                    }
                }
            }
        }
        assert_check(&mut c, "q");
    }
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
    let (_s, mut c) = start_server();
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
    assert_eq!(reply_keys(&full), reply_keys(&brute_order(&mut c, q)));
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
            reply_keys(&got),
            reply_keys(&expected),
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
            "TOOMANY 1000 LIMIT must be between 0 and 1000",
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

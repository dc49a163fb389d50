//! Integration tests of every `ORCA.*` command against a real redis-server
//! with the built module loaded (see `tests/common/mod.rs`).
//!
//! Replies are read as RESP2 flat field/value arrays and parsed into maps.
//! Times are pinned with `NOW <ms>` wherever the expected values depend on
//! them; one test checks the server clock is used when `NOW` is absent.

mod common;

use std::collections::{HashMap, HashSet};

use common::*;
use redis::Value;

/// 2^53 - 1: the largest time (ms) the module accepts.
const MAX_TIME: i64 = (1 << 53) - 1;

/// Fields of every job reply.
const JOB_FIELDS: [&str; 8] = [
    "key",
    "collation",
    "immediate",
    "nonce",
    "created_at",
    "release_at",
    "attempts",
    "payload",
];

/// The reply of a command that writes a job (ENQUEUE, IMMEDIATE, REENQUEUE,
/// MOVE): every field of a job reply but `payload`, plus `extra`.
fn assert_write_fields(f: &Fields, extra: &[&str]) {
    let got: HashSet<&str> = f.keys().map(String::as_str).collect();
    let want: HashSet<&str> = JOB_FIELDS
        .iter()
        .filter(|k| **k != "payload")
        .chain(extra)
        .copied()
        .collect();
    let missing: Vec<&&str> = want.difference(&got).collect();
    assert!(missing.is_empty(), "reply lacks fields {missing:?}: {f:?}");
    assert!(
        !got.contains("payload"),
        "write reply carries the payload: {f:?}"
    );
}

/// The payload stored for `key` (from ORCA.STATUS).
fn stored_payload(c: &mut redis::Connection, q: &str, f: &Fields) -> Vec<u8> {
    as_bytes(get(&must_status(c, q, &text(f, "key")), "payload")).to_vec()
}

/// The reply has every field of a job reply plus `extra` (further fields,
/// e.g. of later features, are allowed).
fn assert_field_names(f: &Fields, extra: &[&str]) {
    let got: HashSet<&str> = f.keys().map(String::as_str).collect();
    let want: HashSet<&str> = JOB_FIELDS.iter().chain(extra).copied().collect();
    let missing: Vec<&&str> = want.difference(&got).collect();
    assert!(missing.is_empty(), "reply lacks fields {missing:?}: {f:?}");
}

fn enq(c: &mut redis::Connection, q: &str, cfg: &str, now: i64) -> Fields {
    fields(ok(c, &args!["ORCA.ENQUEUE", q, cfg, "NOW", now]))
}

fn imm(c: &mut redis::Connection, q: &str, cfg: &str, now: i64) -> Fields {
    fields(ok(c, &args!["ORCA.IMMEDIATE", q, cfg, "NOW", now]))
}

fn reenq(c: &mut redis::Connection, q: &str, cfg: &str, created_at: i64) -> Fields {
    fields(ok(c, &args!["ORCA.REENQUEUE", q, cfg, created_at]))
}

fn mv(c: &mut redis::Connection, q: &str, key: &str, action: &str, now: i64) -> Fields {
    fields(ok(c, &args!["ORCA.MOVE", q, key, action, "NOW", now]))
}

fn status(c: &mut redis::Connection, q: &str, key: &str) -> Option<Fields> {
    match ok(c, &args!["ORCA.STATUS", q, key]) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

fn must_status(c: &mut redis::Connection, q: &str, key: &str) -> Fields {
    status(c, q, key).unwrap_or_else(|| panic!("job {key} not queued in {q}"))
}

/// Seed 000's pop: the job leaves the queue (`LEASE 0`).
fn pop(c: &mut redis::Connection, q: &str) -> Option<Fields> {
    match ok(c, &args!["ORCA.POP", q, "LEASE", "0"]) {
        Value::Nil => None,
        v => Some(fields(v)),
    }
}

/// Pop everything; the orca keys in pop order.
fn pop_keys(c: &mut redis::Connection, q: &str) -> Vec<String> {
    pop_all(c, q).iter().map(|f| text(f, "key")).collect()
}

fn keys(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| key_of(n)).collect()
}

fn exists(c: &mut redis::Connection, k: &str) -> i64 {
    as_int(&ok(c, &args!["EXISTS", k]))
}

fn settings(c: &mut redis::Connection, q: &str) -> Fields {
    fields(ok(c, &args!["ORCA.SETTINGS", q]))
}

/// What must not change when a command is refused.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    exists: i64,
    digest: Option<String>,
    len: i64,
}

fn snapshot(c: &mut redis::Connection, q: &str) -> Snapshot {
    let exists = exists(c, q);
    let digest = (exists == 1).then(|| digest(c, q));
    let len = if exists == 1 { qlen(c, q) } else { 0 };
    Snapshot {
        exists,
        digest,
        len,
    }
}

/// Run `args`, which must be refused with an error starting with one of
/// `prefixes`, leave `q` unchanged (existence, digest, length), leave
/// ORCA.CHECK OK and the server answering. Returns the error text.
fn assert_rejected(
    c: &mut redis::Connection,
    q: &str,
    args: &[Vec<u8>],
    prefixes: &[&str],
) -> String {
    let before = snapshot(c, q);
    let e = fails(c, args);
    assert!(
        prefixes.iter().any(|p| e.starts_with(p)),
        "{}: error {e:?} should start with one of {prefixes:?}",
        show_args(args)
    );
    assert!(
        !e.contains('\n') && !e.contains('\r'),
        "multi-line error {e:?}"
    );
    assert_eq!(snapshot(c, q), before, "{} changed {q}", show_args(args));
    if before.exists == 1 {
        assert_check(c, q);
    }
    assert_eq!(as_string(&ok(c, &args!["PING"])), "PONG");
    e
}

const ERR: &[&str] = &["ERR "];

// ---------------------------------------------------------------------------
// ORCA.ENQUEUE
// ---------------------------------------------------------------------------

#[test]
fn enqueue_reply_fields() {
    let s = Server::start(&[]);
    let mut c = s.conn();

    // sha256("a" + "bc") = sha256("abc"), a well-known vector.
    let cfg = r#"{"key":"a","response_url":"bc"}"#;
    let f = enq(&mut c, "q", cfg, 1000);
    assert_write_fields(&f, &["created"]);
    assert_eq!(
        text(&f, "key"),
        "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
    );
    assert_eq!(opt_text(&f, "collation"), None);
    assert_eq!(int(&f, "immediate"), 0);
    assert_eq!(int(&f, "created_at"), 1000);
    assert_eq!(int(&f, "release_at"), 1000);
    assert_eq!(int(&f, "attempts"), 0);
    assert_eq!(stored_payload(&mut c, "q", &f), cfg.as_bytes());
    assert_eq!(int(&f, "created"), 1);
    let mut nonces = vec![int(&f, "nonce")];

    // No response_url: sha256("").
    let f = enq(&mut c, "q", r#"{"key":""}"#, 1000);
    assert_eq!(
        text(&f, "key"),
        "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    );
    nonces.push(int(&f, "nonce"));

    // JSON escapes: the decoded text is hashed, as the web server does.
    let f = enq(&mut c, "q", r#"{"key":"\u00e9","response_url":"u"}"#, 1000);
    assert_eq!(text(&f, "key"), orca_key("é", "u"));
    assert_eq!(
        text(&f, "key"),
        "5g1e0cNT9+GI6hqX+tuDqXvfddpHqVOo6JAjDCwkkxU="
    );
    nonces.push(int(&f, "nonce"));

    // User collation and priority; payload returned byte for byte (spacing,
    // field order, unknown fields, unicode, escapes).
    let cfg = "  {\"script\": {\"nested\": [1, 2.5, null, \"\u{fc}\"]},\n \"priority\": 60000, \
               \"collation\": {\"id\": \"7\", \"type\": \"user\"}, \"key\": \"k1\", \
               \"response_url\": \"http://x/1\", \"extra\": \"\\n\"}  ";
    let f = enq(&mut c, "q", cfg, 5000);
    assert_eq!(text(&f, "key"), orca_key("k1", "http://x/1"));
    assert_eq!(opt_text(&f, "collation").as_deref(), Some("user.7"));
    assert_eq!(int(&f, "created_at"), 5000);
    assert_eq!(int(&f, "release_at"), 65000);
    assert_eq!(int(&f, "immediate"), 0);
    assert_eq!(int(&f, "attempts"), 0);
    assert_eq!(int(&f, "created"), 1);
    assert_eq!(stored_payload(&mut c, "q", &f), cfg.as_bytes());
    nonces.push(int(&f, "nonce"));

    // Team collation with an integer id.
    let f = enq(
        &mut c,
        "q",
        r#"{"key":"k2","collation":{"type":"team","id":12},"priority":5}"#,
        7000,
    );
    assert_eq!(opt_text(&f, "collation").as_deref(), Some("team.12"));
    assert_eq!(int(&f, "release_at"), 7005);
    nonces.push(int(&f, "nonce"));

    // Explicit nulls mean "absent".
    let f = enq(
        &mut c,
        "q",
        r#"{"key":"k3","collation":null,"priority":null}"#,
        8000,
    );
    assert_eq!(opt_text(&f, "collation"), None);
    assert_eq!(int(&f, "release_at"), 8000);
    nonces.push(int(&f, "nonce"));

    // Largest release time: priority + NOW = 2^53 - 1.
    let f = enq(
        &mut c,
        "q",
        &format!(r#"{{"key":"k4","priority":{MAX_TIME}}}"#),
        0,
    );
    assert_eq!(int(&f, "release_at"), MAX_TIME);
    nonces.push(int(&f, "nonce"));

    let unique: HashSet<i64> = nonces.iter().copied().collect();
    assert_eq!(unique.len(), nonces.len(), "nonces {nonces:?}");
    assert_eq!(qlen(&mut c, "q"), 7);
    assert_check(&mut c, "q");
    assert_eq!(as_string(&ok(&mut c, &args!["TYPE", "q"])), "orcaqueue");
    for f in pop_all(&mut c, "q") {
        let k = text(&f, "key");
        assert_eq!(k.len(), 44);
        assert!(!k.contains('.'));
    }
}

#[test]
fn enqueue_uses_the_server_clock() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let time = |c: &mut redis::Connection| -> i64 {
        let t: Vec<String> = redis::cmd("TIME").query(c).expect("TIME");
        t[0].parse::<i64>().unwrap() * 1000 + t[1].parse::<i64>().unwrap() / 1000
    };
    let before = time(&mut c);
    let f = fields(ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", config("a", Some("user.1"), 250)],
    ));
    let g = fields(ok(
        &mut c,
        &args!["ORCA.IMMEDIATE", "q", config("b", None, 0)],
    ));
    let after = time(&mut c);
    for (f, prio) in [(&f, 250), (&g, 0)] {
        let t = int(f, "created_at");
        assert!(
            (before..=after).contains(&t),
            "created_at {t} not in [{before}, {after}]"
        );
        assert_eq!(int(f, "release_at"), t + prio);
    }
    // Priority orders the queue but does not hold a job back: POP hands out
    // the lowest reservation even if its release time is far in the future.
    let h = fields(ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "r", config("late", None, 3_600_000)],
    ));
    assert!(int(&h, "release_at") > time(&mut c));
    let p = pop(&mut c, "r").expect("a job");
    assert_eq!(text(&p, "key"), key_of("late"));
}

#[test]
fn enqueue_existing_job_replaces_payload_only() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    enq(&mut c, "q", &config("a", Some("user.1"), 100), 1000);
    enq(&mut c, "q", &config("b", Some("user.1"), 100), 1100);
    enq(&mut c, "q", &config("n", None, 0), 1050);
    imm(&mut c, "q", &config("i", Some("user.1"), 0), 1200);
    let names = ["a", "b", "n", "i"];
    let before: HashMap<&str, Fields> = names
        .iter()
        .map(|n| (*n, must_status(&mut c, "q", &key_of(n))))
        .collect();

    // Same key + response_url, different everything else.
    let new_a = r#"{"key":"a","response_url":"http://cb/a","priority":999999,"collation":{"type":"team","id":"9"},"v":2}"#;
    let f = enq(&mut c, "q", new_a, 50_000);
    assert_write_fields(&f, &["created"]);
    assert_eq!(int(&f, "created"), 0);
    assert_eq!(stored_payload(&mut c, "q", &f), new_a.as_bytes());
    for field in [
        "key",
        "collation",
        "immediate",
        "nonce",
        "created_at",
        "release_at",
        "attempts",
    ] {
        assert_eq!(get(&f, field), get(&before["a"], field), "field {field}");
    }

    // Updating an immediate job keeps it immediate and in place.
    let new_i = r#"{"key":"i","response_url":"http://cb/i","priority":5,"v":3}"#;
    let f = enq(&mut c, "q", new_i, 60_000);
    assert_eq!(int(&f, "created"), 0);
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&f, "release_at"), int(&before["i"], "release_at"));
    assert_eq!(stored_payload(&mut c, "q", &f), new_i.as_bytes());

    assert_eq!(qlen(&mut c, "q"), 4);
    assert_check(&mut c, "q");
    for n in names {
        let now = must_status(&mut c, "q", &key_of(n));
        for field in [
            "nonce",
            "release_at",
            "created_at",
            "position",
            "immediate",
            "collation",
        ] {
            assert_eq!(
                get(&now, field),
                get(&before[n], field),
                "job {n} field {field}"
            );
        }
    }
    let popped = pop_all(&mut c, "q");
    let mut by_pos: Vec<(i64, &str)> = names
        .iter()
        .map(|n| (int(&before[n], "position"), *n))
        .collect();
    by_pos.sort();
    let want: Vec<String> = by_pos.iter().map(|(_, n)| key_of(n)).collect();
    let got: Vec<String> = popped.iter().map(|f| text(f, "key")).collect();
    assert_eq!(got, want);
    let a = popped
        .iter()
        .find(|f| text(f, "key") == key_of("a"))
        .unwrap();
    assert_eq!(as_bytes(get(a, "payload")), new_a.as_bytes());
}

// ---------------------------------------------------------------------------
// Collations: pairing, LIFO / FIFO, ORCA.SETTINGS
// ---------------------------------------------------------------------------

/// user.1: a@0, b@10, c@20 (priority 100 -> reservations 100, 110, 120);
/// team.2: x@5 (105); no collation: n@0 with priority 112 (112).
/// Returns the release_at of each ENQUEUE reply.
fn pairing_setup(c: &mut redis::Connection, q: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for (name, coll, prio, now) in [
        ("a", Some("user.1"), 100, 0),
        ("x", Some("team.2"), 100, 5),
        ("b", Some("user.1"), 100, 10),
        ("n", None, 112, 0),
        ("c", Some("user.1"), 100, 20),
    ] {
        let f = enq(c, q, &config(name, coll, prio), now);
        assert_eq!(int(&f, "created"), 1);
        assert_eq!(opt_text(&f, "collation").as_deref(), coll);
        out.push(int(&f, "release_at"));
    }
    out
}

fn assert_order(c: &mut redis::Connection, q: &str, expect: &[(&str, i64)]) {
    for (i, (name, release)) in expect.iter().enumerate() {
        let f = must_status(c, q, &key_of(name));
        assert_field_names(&f, &["state", "position"]);
        assert_eq!(text(&f, "state"), "queued");
        assert_eq!(int(&f, "position"), i as i64 + 1, "position of {name}");
        assert_eq!(int(&f, "release_at"), *release, "release_at of {name}");
    }
    assert_eq!(qlen(c, q), expect.len() as i64);
    assert_check(c, q);
    let statuses: Vec<Fields> = expect
        .iter()
        .map(|(n, _)| must_status(c, q, &key_of(n)))
        .collect();
    for (i, (name, release)) in expect.iter().enumerate() {
        let p = pop(c, q).unwrap_or_else(|| panic!("queue empty before {name}"));
        assert_field_names(&p, &[]);
        assert_eq!(text(&p, "key"), key_of(name), "pop #{}", i + 1);
        assert_eq!(
            int(&p, "release_at"),
            *release,
            "popped release_at of {name}"
        );
        assert_eq!(int(&p, "attempts"), 1);
        for field in ["nonce", "created_at", "collation", "immediate", "payload"] {
            assert_eq!(get(&p, field), get(&statuses[i], field), "{name}: {field}");
        }
    }
    assert!(pop(c, q).is_none());
    let st = settings(c, q);
    assert_eq!((int(&st, "jobs"), int(&st, "collations")), (0, 0), "{st:?}");
}

#[test]
fn lifo_is_the_default_and_pairs_jobs_with_reservations() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let settings_before = settings(&mut c, "q");
    assert_eq!(text(&settings_before, "order"), "lifo");
    // LIFO: each new job of user.1 takes the collation's earliest reservation.
    assert_eq!(pairing_setup(&mut c, "q"), vec![100, 105, 100, 112, 100]);
    let st = settings(&mut c, "q");
    assert_eq!(text(&st, "order"), "lifo");
    assert_eq!(int(&st, "jobs"), 5);
    assert_eq!(int(&st, "collations"), 2);
    assert_order(
        &mut c,
        "q",
        &[("c", 100), ("x", 105), ("b", 110), ("n", 112), ("a", 120)],
    );
}

#[test]
fn fifo_order_per_queue() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let st = fields(ok(&mut c, &args!["ORCA.SETTINGS", "q", "ORDER", "FIFO"]));
    assert_eq!(text(&st, "order"), "fifo");
    assert_eq!(int(&st, "jobs"), 0);
    assert_eq!(int(&st, "collations"), 0);
    assert_eq!(pairing_setup(&mut c, "q"), vec![100, 105, 110, 112, 120]);
    // Another queue of the same server keeps the default.
    pairing_setup(&mut c, "other");
    assert_order(
        &mut c,
        "q",
        &[("a", 100), ("x", 105), ("b", 110), ("n", 112), ("c", 120)],
    );
    assert_order(
        &mut c,
        "other",
        &[("c", 100), ("x", 105), ("b", 110), ("n", 112), ("a", 120)],
    );
}

#[test]
fn a_later_job_with_lower_priority_takes_the_earlier_reservation() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    // Reservations of user.1: 1000 (a) and 10 (b). LIFO: b is first in the
    // stack and is paired with the earliest reservation, 10.
    let a = enq(&mut c, "q", &config("a", Some("user.1"), 1000), 0);
    assert_eq!(int(&a, "release_at"), 1000);
    let b = enq(&mut c, "q", &config("b", Some("user.1"), 0), 10);
    assert_eq!(int(&b, "release_at"), 10);
    enq(&mut c, "q", &config("m", None, 500), 0);
    assert_order(&mut c, "q", &[("b", 10), ("m", 500), ("a", 1000)]);
}

#[test]
fn settings_reply_defaults_and_persistence() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    // Reading the settings of a missing queue creates nothing.
    let st = settings(&mut c, "missing");
    assert_eq!(text(&st, "order"), "lifo");
    assert_eq!(int(&st, "jobs"), 0);
    assert_eq!(int(&st, "collations"), 0);
    assert_eq!(int(&st, "held"), 0);
    assert_eq!(int(&st, "lifetime"), 0);
    assert_eq!(int(&st, "maxrunning"), 0);
    assert_eq!(int(&st, "deadmax"), 100_000);
    assert_eq!(st.len(), 12, "{st:?}");
    assert_eq!(exists(&mut c, "missing"), 0);

    // Keyword case does not matter.
    let st = fields(ok(&mut c, &args!["ORCA.SETTINGS", "f", "order", "fifo"]));
    assert_eq!(text(&st, "order"), "fifo");
    assert_eq!(exists(&mut c, "f"), 1);
    enq(&mut c, "l", &config("a", Some("user.1"), 0), 1);

    // The default for new queues; existing queues keep their order.
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("orca.default-order")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        got,
        vec!["orca.default-order".to_string(), "lifo".to_string()]
    );
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.default-order", "fifo"],
    );
    enq(&mut c, "newq", &config("a", Some("user.1"), 0), 1);
    assert_eq!(text(&settings(&mut c, "newq"), "order"), "fifo");
    assert_eq!(text(&settings(&mut c, "l"), "order"), "lifo");
    assert_eq!(text(&settings(&mut c, "missing"), "order"), "fifo");
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.default-order", "lifo"],
    );
    assert_eq!(text(&settings(&mut c, "newq"), "order"), "fifo");
    let st = fields(ok(&mut c, &args!["ORCA.SETTINGS", "l", "ORDER", "FIFO"]));
    assert_eq!(text(&st, "order"), "fifo");
    assert_eq!(int(&st, "jobs"), 1);
    assert_eq!(int(&st, "collations"), 1);
    ok(&mut c, &args!["ORCA.SETTINGS", "newq", "ORDER", "LIFO"]);

    // Orders persist across DEBUG RELOAD, whatever the default is then.
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.default-order", "fifo"],
    );
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_eq!(text(&settings(&mut c, "f"), "order"), "fifo");
    assert_eq!(text(&settings(&mut c, "l"), "order"), "fifo");
    assert_eq!(text(&settings(&mut c, "newq"), "order"), "lifo");
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.default-order", "lifo"],
    );
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_eq!(text(&settings(&mut c, "f"), "order"), "fifo");
    assert_eq!(text(&settings(&mut c, "newq"), "order"), "lifo");

    // The order chosen after jobs were queued applies to new jobs: newq is
    // LIFO now, so b (newer) is popped before a.
    enq(&mut c, "newq", &config("b", Some("user.1"), 0), 2);
    assert_eq!(pop_keys(&mut c, "newq"), keys(&["b", "a"]));
}

// ---------------------------------------------------------------------------
// ORCA.IMMEDIATE, ORCA.REENQUEUE
// ---------------------------------------------------------------------------

#[test]
fn immediate_job_is_scored_at_arrival() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    enq(&mut c, "q", &config("a", None, 0), 1000);
    enq(&mut c, "q", &config("b", None, 0), 3000);
    enq(&mut c, "q", &config("u", Some("user.5"), 5000), 500);
    let cfg = config("i", Some("user.5"), 99_999);
    let f = imm(&mut c, "q", &cfg, 2000);
    assert_write_fields(&f, &["created"]);
    assert_eq!(text(&f, "key"), key_of("i"));
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&f, "created"), 1);
    assert_eq!(int(&f, "created_at"), 2000);
    assert_eq!(int(&f, "release_at"), 2000);
    assert_eq!(int(&f, "attempts"), 0);
    assert_eq!(opt_text(&f, "collation").as_deref(), Some("user.5"));
    assert_eq!(stored_payload(&mut c, "q", &f), cfg.as_bytes());

    // Updating an immediate job: payload replaced, reservation kept.
    let cfg2 = r#"{"key":"i","response_url":"http://cb/i","v":2}"#;
    let g = imm(&mut c, "q", cfg2, 2500);
    assert_eq!(int(&g, "created"), 0);
    assert_eq!(int(&g, "immediate"), 1);
    assert_eq!(int(&g, "release_at"), 2000);
    assert_eq!(int(&g, "created_at"), 2000);
    assert_eq!(int(&g, "nonce"), int(&f, "nonce"));
    assert_eq!(stored_payload(&mut c, "q", &g), cfg2.as_bytes());

    // An immediate job without a collation.
    let h = imm(&mut c, "q", &config("j", None, 0), 4000);
    assert_eq!(opt_text(&h, "collation"), None);
    assert_order(
        &mut c,
        "q",
        &[
            ("a", 1000),
            ("i", 2000),
            ("b", 3000),
            ("j", 4000),
            ("u", 5500),
        ],
    );
}

#[test]
fn immediate_upgrades_a_waiting_collation_job() {
    for order in ["LIFO", "FIFO"] {
        let s = Server::start(&[]);
        let mut c = s.conn();
        ok(&mut c, &args!["ORCA.SETTINGS", "q", "ORDER", order]);
        // user.1 reservations 100, 110, 120; another collation in between.
        enq(&mut c, "q", &config("a", Some("user.1"), 100), 0);
        enq(&mut c, "q", &config("b", Some("user.1"), 100), 10);
        enq(&mut c, "q", &config("y", Some("team.3"), 100), 15);
        enq(&mut c, "q", &config("c", Some("user.1"), 100), 20);
        let b_before = must_status(&mut c, "q", &key_of("b"));
        assert_eq!(int(&b_before, "release_at"), 110, "{order}");

        let cfg = r#"{"key":"b","response_url":"http://cb/b","v":"upgraded"}"#;
        let f = imm(&mut c, "q", cfg, 50);
        assert_eq!(int(&f, "created"), 0, "{order}");
        assert_eq!(int(&f, "immediate"), 1);
        assert_eq!(int(&f, "release_at"), 50);
        assert_eq!(
            int(&f, "created_at"),
            10,
            "created_at is the original arrival"
        );
        assert_eq!(stored_payload(&mut c, "q", &f), cfg.as_bytes());
        // b's paired reservation (110) is gone; a and c keep theirs.
        let expect: &[(&str, i64)] = if order == "LIFO" {
            &[("b", 50), ("c", 100), ("y", 115), ("a", 120)]
        } else {
            &[("b", 50), ("a", 100), ("y", 115), ("c", 120)]
        };
        // An immediate job cannot be upgraded twice or moved.
        let g = imm(&mut c, "q", cfg, 60);
        assert_eq!(int(&g, "release_at"), 50);
        assert_eq!(qlen(&mut c, "q"), 4);
        assert_eq!(int(&settings(&mut c, "q"), "collations"), 2);
        assert_order(&mut c, "q", expect);
    }
}

#[test]
fn immediate_upgrades_a_job_without_collation() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    enq(&mut c, "q", &config("a", None, 0), 100);
    enq(&mut c, "q", &config("late", None, 10_000), 100);
    let f = imm(&mut c, "q", &config("late", None, 0), 200);
    assert_eq!(int(&f, "created"), 0);
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&f, "release_at"), 200);
    assert_order(&mut c, "q", &[("a", 100), ("late", 200)]);
}

#[test]
fn reenqueue_is_immediate_at_created_at() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    enq(&mut c, "q", &config("a", None, 0), 1000);
    enq(&mut c, "q", &config("b", Some("user.1"), 0), 2000);
    enq(&mut c, "q", &config("w", Some("user.2"), 0), 3000);
    // A worker hands its job back: it arrived at 1500, before b.
    let cfg = config("r", Some("user.1"), 60_000);
    let f = reenq(&mut c, "q", &cfg, 1500);
    assert_write_fields(&f, &["created"]);
    assert_eq!(int(&f, "created"), 1);
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&f, "created_at"), 1500);
    assert_eq!(int(&f, "release_at"), 1500);
    assert_eq!(int(&f, "attempts"), 0);
    assert_eq!(opt_text(&f, "collation").as_deref(), Some("user.1"));
    assert_eq!(stored_payload(&mut c, "q", &f), cfg.as_bytes());
    // Arrived at 0: before everything.
    let g = reenq(&mut c, "q", &config("z", None, 0), 0);
    assert_eq!(int(&g, "release_at"), 0);
    // Re-enqueue of a job that is still waiting: upgraded to immediate at
    // the given time, arrival kept.
    let h = reenq(&mut c, "q", &config("w", Some("user.2"), 0), 2500);
    assert_eq!(int(&h, "created"), 0);
    assert_eq!(int(&h, "immediate"), 1);
    assert_eq!(int(&h, "release_at"), 2500);
    assert_eq!(int(&h, "created_at"), 3000);
    assert_order(
        &mut c,
        "q",
        &[("z", 0), ("a", 1000), ("r", 1500), ("b", 2000), ("w", 2500)],
    );
    // Re-enqueue creates the queue if needed.
    reenq(&mut c, "fresh", &config("k", None, 0), 5);
    assert_eq!(qlen(&mut c, "fresh"), 1);
}

// ---------------------------------------------------------------------------
// ORCA.MOVE
// ---------------------------------------------------------------------------

#[test]
fn move_release_seed_example() {
    // Variant 1: independent jobs (each its own collation or none).
    let s = Server::start(&[]);
    let mut c = s.conn();
    let colls = [Some("user.1"), None, Some("team.1"), Some("user.2"), None];
    for (i, coll) in colls.iter().enumerate() {
        let name = format!("j{}", i + 1);
        enq(&mut c, "q", &config(&name, *coll, 0), 1000 * (i as i64 + 1));
    }
    let f = mv(&mut c, "q", &key_of("j1"), "RELEASE", 10_000);
    assert_write_fields(&f, &[]);
    assert_eq!(text(&f, "key"), key_of("j1"));
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&f, "created_at"), 1000);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j1")), "position"), 1);
    let f = mv(&mut c, "q", &key_of("j2"), "release", 10_001);
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j2")), "position"), 1);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j1")), "position"), 2);
    for (i, n) in ["j3", "j4", "j5"].iter().enumerate() {
        let st = must_status(&mut c, "q", &key_of(n));
        assert_eq!(int(&st, "position"), i as i64 + 3);
        assert_eq!(
            int(&st, "release_at"),
            1000 * (i as i64 + 3),
            "{n} kept its time"
        );
    }
    assert_check(&mut c, "q");
    assert_eq!(pop_keys(&mut c, "q"), keys(&["j2", "j1", "j3", "j4", "j5"]));

    // Variant 2: all jobs in one LIFO collation (stack j1..j5), released
    // at a time earlier than every reservation.
    let mut c2 = s.conn();
    for (i, n) in ["j5", "j4", "j3", "j2", "j1"].iter().enumerate() {
        enq(
            &mut c2,
            "c",
            &config(n, Some("user.1"), 0),
            1000 * (i as i64 + 1),
        );
    }
    let f = mv(&mut c2, "c", &key_of("j1"), "RELEASE", 10);
    assert_eq!(int(&f, "immediate"), 1);
    assert!(int(&f, "release_at") <= 10);
    let f = mv(&mut c2, "c", &key_of("j2"), "RELEASE", 20);
    assert!(int(&f, "release_at") <= 10);
    // j1 and j2's paired reservations (1000, 2000) are gone; j3..j5 keep theirs.
    for (n, t) in [("j3", 3000), ("j4", 4000), ("j5", 5000)] {
        assert_eq!(
            int(&must_status(&mut c2, "c", &key_of(n)), "release_at"),
            t,
            "{n}"
        );
    }
    assert_eq!(int(&settings(&mut c2, "c"), "collations"), 1);
    assert_check(&mut c2, "c");
    assert_eq!(
        pop_keys(&mut c2, "c"),
        keys(&["j2", "j1", "j3", "j4", "j5"])
    );
}

#[test]
fn move_delay_seed_example() {
    // Variant 1: independent jobs.
    let s = Server::start(&[]);
    let mut c = s.conn();
    let colls = [Some("user.1"), None, Some("team.1"), Some("user.2"), None];
    for (i, coll) in colls.iter().enumerate() {
        let name = format!("j{}", i + 1);
        enq(&mut c, "q", &config(&name, *coll, 0), 1000 * (i as i64 + 1));
    }
    let f = mv(&mut c, "q", &key_of("j1"), "DELAY", 9000);
    assert_write_fields(&f, &[]);
    assert_eq!(int(&f, "immediate"), 0);
    assert_eq!(int(&f, "release_at"), 5000 + 10_000);
    assert_eq!(int(&f, "created_at"), 1000);
    let f = mv(&mut c, "q", &key_of("j2"), "delay", 9000);
    assert_eq!(int(&f, "release_at"), 15_000 + 10_000);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j1")), "position"), 4);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("j2")), "position"), 5);
    assert_check(&mut c, "q");
    assert_eq!(pop_keys(&mut c, "q"), keys(&["j3", "j4", "j5", "j1", "j2"]));

    // Variant 2: one LIFO collation; the delayed jobs go to the back of the
    // stack, the others keep their reservations.
    for (i, n) in ["j5", "j4", "j3", "j2", "j1"].iter().enumerate() {
        enq(
            &mut c,
            "c",
            &config(n, Some("user.1"), 0),
            1000 * (i as i64 + 1),
        );
    }
    assert_eq!(
        int(&mv(&mut c, "c", &key_of("j1"), "DELAY", 1), "release_at"),
        15_000
    );
    assert_eq!(
        int(&mv(&mut c, "c", &key_of("j2"), "DELAY", 1), "release_at"),
        25_000
    );
    for (n, t) in [("j3", 3000), ("j4", 4000), ("j5", 5000)] {
        assert_eq!(
            int(&must_status(&mut c, "c", &key_of(n)), "release_at"),
            t,
            "{n}"
        );
    }
    // The last score counts immediate jobs too.
    imm(&mut c, "c", &config("z", None, 0), 100_000);
    assert_eq!(
        int(&mv(&mut c, "c", &key_of("j3"), "DELAY", 1), "release_at"),
        110_000
    );
    assert_check(&mut c, "c");
    assert_eq!(
        pop_keys(&mut c, "c"),
        keys(&["j4", "j5", "j1", "j2", "z", "j3"])
    );
}

#[test]
fn move_delay_buffer_setting_and_option() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("orca.move-to-back-buffer")
        .query(&mut c)
        .unwrap();
    assert_eq!(got[1], "10000");
    for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
        enq(
            &mut c,
            "q",
            &config(n, Some("user.1"), 0),
            1000 * (i as i64 + 1),
        );
    }
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.move-to-back-buffer", "2500"],
    );
    let f = fields(ok(&mut c, &args!["ORCA.MOVE", "q", key_of("a"), "DELAY"]));
    assert_eq!(int(&f, "release_at"), 4000 + 2500);
    let f = fields(ok(
        &mut c,
        &args!["ORCA.MOVE", "q", key_of("b"), "DELAY", "BUFFER", "7"],
    ));
    assert_eq!(int(&f, "release_at"), 6500 + 7);
    // BUFFER 0: same score as the last one, still after it.
    let f = fields(ok(
        &mut c,
        &args![
            "ORCA.MOVE",
            "q",
            key_of("c"),
            "DELAY",
            "buffer",
            "0",
            "now",
            "5"
        ],
    ));
    assert_eq!(int(&f, "release_at"), 6507);
    assert_check(&mut c, "q");
    assert_eq!(pop_keys(&mut c, "q"), keys(&["d", "a", "b", "c"]));
}

#[test]
fn move_errors() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    enq(&mut c, "q", &config("a", Some("user.1"), 0), 1000);
    enq(&mut c, "q", &config("b", None, 0), 1000);
    imm(&mut c, "q", &config("i", Some("user.1"), 0), 1000);
    mv(&mut c, "q", &key_of("b"), "RELEASE", 2000);
    for k in ["i", "b"] {
        for action in ["RELEASE", "DELAY"] {
            let e = assert_rejected(
                &mut c,
                "q",
                &args!["ORCA.MOVE", "q", key_of(k), action],
                ERR,
            );
            assert_eq!(e, "ERR immediate jobs cannot be moved");
        }
    }
    // Unknown jobs: a well-formed key not in the queue, junk, a missing queue.
    let absent = key_of("absent");
    for key in [
        absent.as_str(),
        "nope",
        "",
        "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",
    ] {
        for action in ["RELEASE", "DELAY"] {
            let e = assert_rejected(&mut c, "q", &args!["ORCA.MOVE", "q", key, action], ERR);
            assert_eq!(e, "ERR no such job");
        }
    }
    let e = assert_rejected(
        &mut c,
        "missing",
        &args!["ORCA.MOVE", "missing", key_of("a"), "RELEASE"],
        ERR,
    );
    assert_eq!(e, "ERR no such job");
    assert_eq!(exists(&mut c, "missing"), 0);
}

// ---------------------------------------------------------------------------
// ORCA.DELETE, ORCA.POP, ORCA.STATUS, ORCA.LEN, ORCA.CHECK
// ---------------------------------------------------------------------------

#[test]
fn delete_removes_the_job_and_its_paired_reservation() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
        enq(&mut c, "q", &config(n, Some("user.1"), 100), 10 * i as i64);
    }
    enq(&mut c, "q", &config("n", None, 0), 105);
    imm(&mut c, "q", &config("i", None, 0), 1);
    // LIFO stack d c b a paired with 100 110 120 130.
    assert_eq!(
        int(&must_status(&mut c, "q", &key_of("c")), "release_at"),
        110
    );
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", key_of("c")])),
        1
    );
    assert!(status(&mut c, "q", &key_of("c")).is_none());
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", key_of("c")])),
        0
    );
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", key_of("i")])),
        1
    );
    // Not a key / not queued / no queue: 0, nothing created.
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", "junk"])), 0);
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "q", key_of("zz")])),
        0
    );
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "none", key_of("a")])),
        0
    );
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", "none", "junk"])),
        0
    );
    assert_eq!(exists(&mut c, "none"), 0);
    assert_order(
        &mut c,
        "q",
        &[("d", 100), ("n", 105), ("b", 120), ("a", 130)],
    );
}

#[test]
fn pop_hands_out_lowest_reservation() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    assert!(pop(&mut c, "missing").is_none());
    assert_eq!(exists(&mut c, "missing"), 0);
    let cfg = config("a", Some("team.4"), 30);
    enq(&mut c, "q", &cfg, 70);
    imm(&mut c, "q", &config("i", None, 0), 99);
    let p = pop(&mut c, "q").expect("job");
    assert_field_names(&p, &[]);
    assert_eq!(text(&p, "key"), key_of("i"));
    assert_eq!(int(&p, "immediate"), 1);
    assert_eq!(int(&p, "attempts"), 1);
    assert_eq!(int(&p, "release_at"), 99);
    let st = must_status(&mut c, "q", &key_of("a"));
    let p = pop(&mut c, "q").expect("job");
    assert_eq!(text(&p, "key"), key_of("a"));
    assert_eq!(opt_text(&p, "collation").as_deref(), Some("team.4"));
    assert_eq!(int(&p, "immediate"), 0);
    assert_eq!(int(&p, "created_at"), 70);
    assert_eq!(int(&p, "release_at"), 100);
    assert_eq!(int(&p, "nonce"), int(&st, "nonce"));
    assert_eq!(int(&p, "attempts"), 1);
    assert_eq!(as_bytes(get(&p, "payload")), cfg.as_bytes());
    assert!(pop(&mut c, "q").is_none());
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_check(&mut c, "q");
    // The emptied queue still works.
    enq(&mut c, "q", &config("b", None, 0), 1);
    assert_eq!(pop_keys(&mut c, "q"), keys(&["b"]));
}

#[test]
fn status_len_check_on_missing_or_absent() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    assert_eq!(qlen(&mut c, "missing"), 0);
    assert_check(&mut c, "missing");
    assert!(status(&mut c, "missing", &key_of("a")).is_none());
    assert!(status(&mut c, "missing", "junk").is_none());
    assert_eq!(exists(&mut c, "missing"), 0);
    enq(&mut c, "q", &config("a", None, 0), 1);
    assert!(status(&mut c, "q", &key_of("b")).is_none());
    assert!(status(&mut c, "q", "junk").is_none());
    assert!(status(&mut c, "q", "").is_none());
    let st = must_status(&mut c, "q", &key_of("a"));
    assert_field_names(&st, &["state", "position"]);
    assert_eq!(int(&st, "position"), 1);
    assert_eq!(qlen(&mut c, "q"), 1);
}

/// A random mix of commands on several collations; after each step the
/// STATUS positions of all queued jobs are exactly 1..n and POP agrees with
/// the job at position 1 (same nonce, release time, payload, ...).
#[test]
fn status_positions_agree_with_pop() {
    let s = Server::start(&[]);
    let mut c = s.conn();
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
                let f = enq(
                    &mut c,
                    "q",
                    &config(&name, *rng.pick(&colls), rng.below(5000) as i64),
                    now,
                );
                assert_eq!(int(&f, "created") == 1, !queued.contains(&key));
                queued.insert(key);
            }
            4 => {
                imm(&mut c, "q", &config(&name, *rng.pick(&colls), 0), now);
                queued.insert(key);
            }
            5 => {
                let action = if rng.chance(50) { "RELEASE" } else { "DELAY" };
                let v = raw(&mut c, &args!["ORCA.MOVE", "q", &key, action, "NOW", now]);
                if let Some(e) = error_text(&v) {
                    let st = status(&mut c, "q", &key);
                    match st {
                        None => assert_eq!(e, "ERR no such job"),
                        Some(st) => {
                            assert_eq!(int(&st, "immediate"), 1);
                            assert_eq!(e, "ERR immediate jobs cannot be moved");
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
                match pop(&mut c, "q") {
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

#[test]
fn resp3_job_reply_is_a_map() {
    let s = Server::start(&[]);
    let mut c = s.conn_resp3();
    let v = ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "q", config("a", None, 0), "NOW", "5"],
    );
    assert!(matches!(v, Value::Map(_)), "{v:?}");
    let f = fields(v);
    assert_write_fields(&f, &["created"]);
    assert_eq!(get(&f, "collation"), &Value::Nil);
    assert_eq!(int(&f, "release_at"), 5);
    let st = ok(&mut c, &args!["ORCA.STATUS", "q", key_of("a")]);
    assert!(matches!(st, Value::Map(_)), "{st:?}");
    assert_eq!(
        ok(&mut c, &args!["ORCA.STATUS", "q", key_of("b")]),
        Value::Nil
    );
    let p = ok(&mut c, &args!["ORCA.POP", "q"]);
    assert!(matches!(p, Value::Map(_)), "{p:?}");
    assert_eq!(ok(&mut c, &args!["ORCA.POP", "q"]), Value::Nil);
}

// ---------------------------------------------------------------------------
// Bad input: an error reply, nothing changed, server alive
// ---------------------------------------------------------------------------

/// A queue with a bit of everything; returns its name.
fn populated(c: &mut redis::Connection) -> &'static str {
    enq(c, "q", &config("a", Some("user.1"), 100), 1000);
    enq(c, "q", &config("b", Some("user.1"), 100), 1001);
    enq(c, "q", &config("n", None, 50), 1002);
    imm(c, "q", &config("i", Some("team.2"), 0), 1003);
    "q"
}

fn bad_configs() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        // malformed JSON
        "",
        " ",
        "{",
        r#"{"key":"k""#,
        r#"{"key":"k",}"#,
        "not json",
        r#"{"key":"k"} trailing"#,
        r#"{"key":"k"}{"key":"j"}"#,
        // not an object
        "[]",
        r#"["k"]"#,
        r#""k""#,
        "42",
        "null",
        "true",
        // key missing / not a string
        "{}",
        r#"{"response_url":"http://x"}"#,
        r#"{"key":1}"#,
        r#"{"key":null}"#,
        r#"{"key":["k"]}"#,
        r#"{"key":{"k":1}}"#,
        r#"{"key":true}"#,
        r#"{"key":"k","key":"j"}"#,
        r#"{"key":"k","response_url":5}"#,
        // priority
        r#"{"key":"k","priority":-1}"#,
        r#"{"key":"k","priority":-9223372036854775808}"#,
        r#"{"key":"k","priority":1.5}"#,
        r#"{"key":"k","priority":0.1}"#,
        r#"{"key":"k","priority":"5"}"#,
        r#"{"key":"k","priority":true}"#,
        r#"{"key":"k","priority":[1]}"#,
        r#"{"key":"k","priority":9007199254740992}"#,
        r#"{"key":"k","priority":18446744073709551615}"#,
        r#"{"key":"k","priority":18446744073709551616}"#,
        r#"{"key":"k","priority":1e300}"#,
        r#"{"key":"k","priority":123456789012345678901234567890}"#,
        // collation
        r#"{"key":"k","collation":{"type":"group","id":"1"}}"#,
        r#"{"key":"k","collation":{"type":"","id":"1"}}"#,
        r#"{"key":"k","collation":{"type":"immediate","id":"1"}}"#,
        r#"{"key":"k","collation":{"type":1,"id":"1"}}"#,
        r#"{"key":"k","collation":{"id":"1"}}"#,
        r#"{"key":"k","collation":{"type":"user"}}"#,
        r#"{"key":"k","collation":{"type":"user","id":null}}"#,
        r#"{"key":"k","collation":{"type":"user","id":""}}"#,
        r#"{"key":"k","collation":{"type":"team","id":1.5}}"#,
        r#"{"key":"k","collation":{"type":"team","id":true}}"#,
        r#"{"key":"k","collation":{"type":"team","id":["1"]}}"#,
        r#"{"key":"k","collation":"user.1"}"#,
        // the key of a queued job with a bad field: no update either
        r#"{"key":"a","response_url":"http://cb/a","priority":-5}"#,
        r#"{"key":"a","response_url":"http://cb/a","collation":{"type":"user"}}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    v.push(b"{\"key\":\"\xff\"}".to_vec()); // invalid UTF-8
    v.push(b"{\"key\":\"a\0b\"}".to_vec()); // raw NUL inside a string
    v.push(b"{\"key\":\"k\"}\0".to_vec());
    v.push(format!("{{\"key\":\"k\",\"x\":{}}}", "[".repeat(10_000)).into_bytes()); // deep nesting
    v.push(format!("{{\"key\":\"{}", "x".repeat(100_000)).into_bytes()); // long, unterminated
    v
}

#[test]
fn bad_configs_are_rejected() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = populated(&mut c);
    for cfg in bad_configs() {
        let cfg = cfg.as_slice();
        for q in [q, "fresh"] {
            let e = assert_rejected(&mut c, q, &args!["ORCA.ENQUEUE", q, cfg], ERR);
            assert!(e.len() < 1000, "error text too long: {} bytes", e.len());
            assert_rejected(&mut c, q, &args!["ORCA.ENQUEUE", q, cfg, "NOW", "5"], ERR);
            assert_rejected(&mut c, q, &args!["ORCA.IMMEDIATE", q, cfg], ERR);
            assert_rejected(&mut c, q, &args!["ORCA.REENQUEUE", q, cfg, "5"], ERR);
        }
        assert_eq!(
            exists(&mut c, "fresh"),
            0,
            "a failed command created the key"
        );
    }
    // Time overflow: priority + NOW beyond 2^53 - 1.
    let cfg = format!(r#"{{"key":"k","priority":{MAX_TIME}}}"#);
    for q in [q, "fresh"] {
        let e = assert_rejected(&mut c, q, &args!["ORCA.ENQUEUE", q, &cfg, "NOW", "1"], ERR);
        assert!(e.starts_with("ERR "), "{e}");
    }
    assert_eq!(exists(&mut c, "fresh"), 0);
    assert_eq!(pop_keys(&mut c, q), keys(&["i", "n", "b", "a"]));
    let st = pop_all(&mut c, q);
    assert!(st.is_empty());
}

#[test]
fn wrong_arity_for_every_command() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = populated(&mut c);
    let cfg = config("z", None, 0);
    let k = key_of("a");
    let cases: Vec<Vec<Vec<u8>>> = vec![
        args!["ORCA.ENQUEUE"],
        args!["ORCA.ENQUEUE", q],
        args!["ORCA.ENQUEUE", q, &cfg, "NOW"],
        args!["ORCA.ENQUEUE", q, &cfg, "NOW", "5", "extra"],
        args!["ORCA.IMMEDIATE"],
        args!["ORCA.IMMEDIATE", q],
        args!["ORCA.IMMEDIATE", q, &cfg, "NOW"],
        args!["ORCA.IMMEDIATE", q, &cfg, "5"],
        args!["ORCA.REENQUEUE"],
        args!["ORCA.REENQUEUE", q],
        args!["ORCA.REENQUEUE", q, &cfg],
        args!["ORCA.REENQUEUE", q, &cfg, "5", "6"],
        args!["ORCA.REENQUEUE", q, &cfg, "5", "NOW", "6"],
        args!["ORCA.MOVE"],
        args!["ORCA.MOVE", q],
        args!["ORCA.MOVE", q, &k],
        args!["ORCA.MOVE", q, &k, "DELAY", "BUFFER"],
        args!["ORCA.MOVE", q, &k, "DELAY", "extra"],
        args!["ORCA.MOVE", q, &k, "RELEASE", "NOW"],
        args!["ORCA.DELETE"],
        args!["ORCA.DELETE", q],
        args!["ORCA.DELETE", q, &k, &k],
        args!["ORCA.POP"],
        args!["ORCA.POP", q, "1"],
        args!["ORCA.LEN"],
        args!["ORCA.LEN", q, "x"],
        args!["ORCA.CHECK"],
        args!["ORCA.CHECK", q, "x"],
        args!["ORCA.STATUS"],
        args!["ORCA.STATUS", q],
        args!["ORCA.STATUS", q, &k, "x"],
        args!["ORCA.SETTINGS"],
        args!["ORCA.SETTINGS", q, "ORDER"],
        args!["ORCA.SETTINGS", q, "ORDER", "FIFO", "extra"],
        args!["ORCA.SETTINGS", q, "FIFO"],
        args!["ORCA.IMPORT"],
        args!["ORCA.IMPORT", q],
        args!["ORCA.IMPORT", q, "blob", "extra"],
    ];
    for a in &cases {
        assert_rejected(&mut c, q, a, ERR);
    }
    // The plain arity errors name the problem.
    for a in [
        args!["ORCA.POP"],
        args!["ORCA.DELETE", q],
        args!["ORCA.ENQUEUE", q],
    ] {
        let e = fails(&mut c, &a);
        assert!(e.contains("wrong number of arguments"), "{e}");
    }
    assert_eq!(qlen(&mut c, q), 4);
}

#[test]
fn bad_times_and_buffers() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = populated(&mut c);
    let cfg = config("z", Some("user.1"), 0);
    let ka = key_of("a");
    let bad = [
        "-1",
        "-0x1",
        "1.5",
        "1e3",
        "abc",
        "",
        " 5",
        "5 ",
        "+5",
        "0x10",
        "-",
        "9007199254740992",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "99999999999999999999999",
        "5\0",
    ];
    for t in bad {
        for q in [q, "fresh"] {
            assert_rejected(&mut c, q, &args!["ORCA.ENQUEUE", q, &cfg, "NOW", t], ERR);
            assert_rejected(&mut c, q, &args!["ORCA.IMMEDIATE", q, &cfg, "NOW", t], ERR);
            assert_rejected(&mut c, q, &args!["ORCA.REENQUEUE", q, &cfg, t], ERR);
            assert_rejected(
                &mut c,
                q,
                &args!["ORCA.MOVE", q, &ka, "RELEASE", "NOW", t],
                ERR,
            );
            assert_rejected(
                &mut c,
                q,
                &args!["ORCA.MOVE", q, &ka, "DELAY", "NOW", t],
                ERR,
            );
            assert_rejected(
                &mut c,
                q,
                &args!["ORCA.MOVE", q, &ka, "DELAY", "BUFFER", t],
                ERR,
            );
        }
        assert_eq!(exists(&mut c, "fresh"), 0);
    }
    // The edges are accepted.
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "edge", config("e0", None, 0), "NOW", "0"],
    );
    ok(
        &mut c,
        &args![
            "ORCA.ENQUEUE",
            "edge",
            config("e1", None, 0),
            "NOW",
            MAX_TIME
        ],
    );
    ok(
        &mut c,
        &args!["ORCA.REENQUEUE", "edge", config("e2", None, 0), MAX_TIME],
    );
    assert_check(&mut c, "edge");
    // DELAY past 2^53 - 1: refused, nothing moved.
    let e = assert_rejected(
        &mut c,
        "edge",
        &args!["ORCA.MOVE", "edge", key_of("e0"), "DELAY", "BUFFER", "1"],
        ERR,
    );
    assert!(e.starts_with("ERR "), "{e}");
    let e = assert_rejected(
        &mut c,
        q,
        &args!["ORCA.MOVE", q, &ka, "DELAY", "BUFFER", MAX_TIME],
        ERR,
    );
    assert!(e.starts_with("ERR "), "{e}");
    assert_eq!(pop_keys(&mut c, "edge"), keys(&["e0", "e1", "e2"]));
}

#[test]
fn unknown_options_and_bad_keywords() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = populated(&mut c);
    let cfg = config("z", None, 0);
    let ka = key_of("a");
    let cases: Vec<Vec<Vec<u8>>> = vec![
        args!["ORCA.ENQUEUE", q, &cfg, "FOO", "1"],
        args!["ORCA.ENQUEUE", q, &cfg, "BUFFER", "1"],
        args!["ORCA.ENQUEUE", q, &cfg, "NOW", "5", "NOW", "6"],
        args!["ORCA.ENQUEUE", q, &cfg, "NOW", "5", "FOO", "1"],
        args!["ORCA.ENQUEUE", q, &cfg, "NO\r\nW", "5"],
        args!["ORCA.ENQUEUE", q, &cfg, "\0", "5"],
        args!["ORCA.IMMEDIATE", q, &cfg, "ORDER", "FIFO"],
        args!["ORCA.MOVE", q, &ka, "DELAY", "FOO", "1"],
        args!["ORCA.MOVE", q, &ka, "DELAY", "BUFFER", "1", "BUFFER", "2"],
        args!["ORCA.MOVE", q, &ka, "SIDEWAYS"],
        args!["ORCA.MOVE", q, &ka, ""],
        args!["ORCA.MOVE", q, &ka, "RELEASEX"],
        args!["ORCA.MOVE", q, &ka, "RELEASE", "BUFFER", "5"],
        args!["ORCA.MOVE", q, &ka, "release", "buffer", "0"],
        args!["ORCA.MOVE", q, &ka, "RELEASE", "NOW", "5", "BUFFER", "5"],
        args!["ORCA.MOVE", q, "junk", "SIDEWAYS"],
        args!["ORCA.SETTINGS", q, "FOO", "bar"],
        args!["ORCA.SETTINGS", q, "ORDER", "SIDEWAYS"],
        args!["ORCA.SETTINGS", q, "ORDER", ""],
        args!["ORCA.SETTINGS", q, "ORDER", "FIFO", "ORDER", "LIFO"],
        args!["ORCA.SETTINGS", "fresh", "ORDER", "RANDOM"],
        args!["ORCA.SETTINGS", "fresh", "NOW", "5"],
    ];
    for a in &cases {
        let target = if show_args(a).contains("\"fresh\"") {
            "fresh"
        } else {
            q
        };
        assert_rejected(&mut c, target, a, ERR);
    }
    assert_eq!(exists(&mut c, "fresh"), 0);
    assert_eq!(text(&settings(&mut c, q), "order"), "lifo");
}

/// Every command on a key of another type answers WRONGTYPE and leaves the
/// key alone (a string and a list here).
#[test]
fn string_key_gives_wrongtype() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    ok(&mut c, &args!["SET", "s", "hello"]);
    ok(&mut c, &args!["RPUSH", "l", "x"]);
    let cfg = config("a", Some("user.1"), 0);
    let k = key_of("a");
    let mut wrong = Vec::new();
    for key in ["s", "l"] {
        let cases: Vec<Vec<Vec<u8>>> = vec![
            args!["ORCA.ENQUEUE", key, &cfg],
            args!["ORCA.ENQUEUE", key, &cfg, "NOW", "5"],
            args!["ORCA.IMMEDIATE", key, &cfg],
            args!["ORCA.REENQUEUE", key, &cfg, "5"],
            args!["ORCA.MOVE", key, &k, "RELEASE"],
            args!["ORCA.MOVE", key, &k, "DELAY"],
            args!["ORCA.DELETE", key, &k],
            args!["ORCA.DELETE", key, "junk"],
            args!["ORCA.POP", key],
            args!["ORCA.LEN", key],
            args!["ORCA.CHECK", key],
            args!["ORCA.STATUS", key, &k],
            args!["ORCA.STATUS", key, "junk"],
            args!["ORCA.SETTINGS", key],
            args!["ORCA.SETTINGS", key, "ORDER", "FIFO"],
        ];
        for a in &cases {
            let e = fails(&mut c, a);
            if !e.starts_with("WRONGTYPE ") {
                wrong.push(format!("{} -> {e:?}", show_args(a)));
            }
            assert_eq!(as_string(&ok(&mut c, &args!["GET", "s"])), "hello");
            assert_eq!(
                ok(&mut c, &args!["LRANGE", "l", "0", "-1"]),
                Value::Array(vec![Value::BulkString(b"x".to_vec())])
            );
        }
    }
    assert!(
        wrong.is_empty(),
        "expected WRONGTYPE errors on a string / list key, got:\n{}",
        wrong.join("\n")
    );
    // Input errors may be reported before the type check; either is fine.
    for a in [
        args!["ORCA.ENQUEUE", "s", "{"],
        args!["ORCA.MOVE", "s", "junk", "RELEASE"],
        args!["ORCA.IMPORT", "s", "garbage"],
    ] {
        let e = fails(&mut c, &a);
        assert!(e.starts_with("WRONGTYPE ") || e.starts_with("ERR "), "{e}");
        assert_eq!(as_string(&ok(&mut c, &args!["GET", "s"])), "hello");
    }
    // And the other way round.
    enq(&mut c, "q", &cfg, 1);
    let e = fails(&mut c, &args!["GET", "q"]);
    assert!(e.starts_with("WRONGTYPE"), "{e}");
}

#[test]
fn import_rejects_garbage() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = populated(&mut c);
    let mut blobs: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"garbage".to_vec(),
        vec![0u8; 64],
        vec![0xffu8; 64],
    ];
    for n in 1..40u8 {
        blobs.push((0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect());
    }
    // Header-like prefixes: version byte 1 followed by junk.
    for n in 0..40u8 {
        let mut b = vec![1u8];
        b.extend((0..n).map(|i| if i % 3 == 0 { 0 } else { 0xff }));
        blobs.push(b);
    }
    for b in &blobs {
        assert_rejected(&mut c, q, &args!["ORCA.IMPORT", q, b.as_slice()], ERR);
        assert_rejected(
            &mut c,
            "fresh",
            &args!["ORCA.IMPORT", "fresh", b.as_slice()],
            ERR,
        );
    }
    assert_eq!(exists(&mut c, "fresh"), 0);
}

#[test]
fn collation_ids() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let long = "x".repeat(1000);
    // Past the default orca.max-collation-id-length (256): refused, and
    // accepted once the limit allows it.
    let cfg = format!(r#"{{"key":"long","collation":{{"type":"user","id":"{long}"}}}}"#);
    let e = fails(&mut c, &args!["ORCA.ENQUEUE", "q", cfg.as_str()]);
    assert!(e.contains("orca.max-collation-id-length"), "{e}");
    assert_eq!(as_int(&ok(&mut c, &args!["EXISTS", "q"])), 0);
    ok(
        &mut c,
        &args!["CONFIG", "SET", "orca.max-collation-id-length", "1000"],
    );
    let cases: Vec<(String, String, &str)> = vec![
        (r#"{"type":"user","id":7}"#.into(), "user.7".into(), "int7"),
        (
            r#"{"type":"user","id":"7"}"#.into(),
            "user.7".into(),
            "str7",
        ),
        (r#"{"type":"user","id":-5}"#.into(), "user.-5".into(), "neg"),
        (
            r#"{"type":"team","id":"a.b"}"#.into(),
            "team.a.b".into(),
            "dot",
        ),
        (
            r#"{"type":"team","id":"\u00fc x"}"#.into(),
            "team.\u{fc} x".into(),
            "uni",
        ),
        (
            format!(r#"{{"type":"user","id":"{long}"}}"#),
            format!("user.{long}"),
            "long",
        ),
    ];
    for (i, (coll, want, name)) in cases.iter().enumerate() {
        let cfg = format!(r#"{{"key":"{name}","collation":{coll}}}"#);
        let f = enq(&mut c, "q", &cfg, 100 + i as i64);
        assert_eq!(
            opt_text(&f, "collation").as_deref(),
            Some(want.as_str()),
            "{coll}"
        );
    }
    // Integer 7 and string "7" are the same collation: one stack, LIFO.
    assert_eq!(int(&settings(&mut c, "q"), "collations"), 5);
    let k = |n: &str| orca_key(n, "");
    assert_eq!(
        int(&must_status(&mut c, "q", &k("str7")), "release_at"),
        100
    );
    assert_eq!(
        int(&must_status(&mut c, "q", &k("int7")), "release_at"),
        101
    );
    let before: Vec<Fields> = cases
        .iter()
        .map(|(_, _, n)| must_status(&mut c, "q", &k(n)))
        .collect();
    let d = digest(&mut c, "q");
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_eq!(digest(&mut c, "q"), d);
    let after: Vec<Fields> = cases
        .iter()
        .map(|(_, _, n)| must_status(&mut c, "q", &k(n)))
        .collect();
    assert_eq!(before, after);
    assert_check(&mut c, "q");
}

/// `"collation"` is an object `{"type": ..., "id": ...}`. A JSON array in
/// its place is not a collation and must be refused like any other
/// malformed config (serde's derived struct visitor accepts `[type, id]`).
#[test]
fn collation_given_as_json_array_is_rejected() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    let q = populated(&mut c);
    for cfg in [
        r#"{"key":"k","collation":["user","1"]}"#,
        r#"{"key":"k","collation":["team",7]}"#,
    ] {
        assert_rejected(&mut c, q, &args!["ORCA.ENQUEUE", q, cfg], ERR);
        assert_rejected(&mut c, "fresh", &args!["ORCA.ENQUEUE", "fresh", cfg], ERR);
    }
}

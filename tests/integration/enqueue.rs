//! Writing jobs: `ORCA.ENQUEUE`, `ORCA.IMMEDIATE`, `ORCA.REENQUEUE` (their
//! replies, the clock they use, updating a queued job), and how jobs pair
//! with the reservations of their collation: LIFO by default, FIFO per
//! queue, a later job with lower priority taking the earlier reservation,
//! and `ORCA.POP` handing out the lowest reservation.
//!
//! Times are pinned with `NOW <ms>` wherever the expected values depend on
//! them; one test checks the server clock is used when `NOW` is absent.

use std::collections::{HashMap, HashSet};

use crate::common::*;

#[test]
fn enqueue_reply_fields() {
    let (_s, mut c) = start_server();

    // sha256("a" + "bc") = sha256("abc"), a well-known vector.
    let cfg = r#"{"key":"a","response_url":"bc"}"#;
    let f = enqueue_at(&mut c, "q", cfg, 1000);
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
    let f = enqueue_at(&mut c, "q", r#"{"key":""}"#, 1000);
    assert_eq!(
        text(&f, "key"),
        "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    );
    nonces.push(int(&f, "nonce"));

    // JSON escapes: the decoded text is hashed, as the web server does.
    let f = enqueue_at(&mut c, "q", r#"{"key":"\u00e9","response_url":"u"}"#, 1000);
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
    let f = enqueue_at(&mut c, "q", cfg, 5000);
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
    let f = enqueue_at(
        &mut c,
        "q",
        r#"{"key":"k2","collation":{"type":"team","id":12},"priority":5}"#,
        7000,
    );
    assert_eq!(opt_text(&f, "collation").as_deref(), Some("team.12"));
    assert_eq!(int(&f, "release_at"), 7005);
    nonces.push(int(&f, "nonce"));

    // Explicit nulls mean "absent".
    let f = enqueue_at(
        &mut c,
        "q",
        r#"{"key":"k3","collation":null,"priority":null}"#,
        8000,
    );
    assert_eq!(opt_text(&f, "collation"), None);
    assert_eq!(int(&f, "release_at"), 8000);
    nonces.push(int(&f, "nonce"));

    // Largest release time: priority + NOW = 2^53 - 1.
    let f = enqueue_at(
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
    let (_s, mut c) = start_server();
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
    let p = pop(&mut c, "r", 0).expect("a job");
    assert_eq!(text(&p, "key"), key_of("late"));
}

#[test]
fn enqueue_existing_job_replaces_payload_only() {
    let (_s, mut c) = start_server();
    enqueue_at(&mut c, "q", &config("a", Some("user.1"), 100), 1000);
    enqueue_at(&mut c, "q", &config("b", Some("user.1"), 100), 1100);
    enqueue_at(&mut c, "q", &config("n", None, 0), 1050);
    immediate_at(&mut c, "q", &config("i", Some("user.1"), 0), 1200);
    let names = ["a", "b", "n", "i"];
    let before: HashMap<&str, Fields> = names
        .iter()
        .map(|n| (*n, must_status(&mut c, "q", &key_of(n))))
        .collect();

    // Same key + response_url, different everything else.
    let new_a = r#"{"key":"a","response_url":"http://cb/a","priority":999999,"collation":{"type":"team","id":"9"},"v":2}"#;
    let f = enqueue_at(&mut c, "q", new_a, 50_000);
    assert_write_fields(&f, &["created"]);
    assert_eq!(int(&f, "created"), 0);
    assert_eq!(stored_payload(&mut c, "q", &f), new_a.as_bytes());
    for field in JOB_FIELDS.iter().filter(|f| **f != "payload") {
        assert_eq!(get(&f, field), get(&before["a"], field), "field {field}");
    }

    // Updating an immediate job keeps it immediate and in place.
    let new_i = r#"{"key":"i","response_url":"http://cb/i","priority":5,"v":3}"#;
    let f = enqueue_at(&mut c, "q", new_i, 60_000);
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

#[test]
fn immediate_job_is_scored_at_arrival() {
    let (_s, mut c) = start_server();
    enqueue_at(&mut c, "q", &config("a", None, 0), 1000);
    enqueue_at(&mut c, "q", &config("b", None, 0), 3000);
    enqueue_at(&mut c, "q", &config("u", Some("user.5"), 5000), 500);
    let cfg = config("i", Some("user.5"), 99_999);
    let f = immediate_at(&mut c, "q", &cfg, 2000);
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
    let g = immediate_at(&mut c, "q", cfg2, 2500);
    assert_eq!(int(&g, "created"), 0);
    assert_eq!(int(&g, "immediate"), 1);
    assert_eq!(int(&g, "release_at"), 2000);
    assert_eq!(int(&g, "created_at"), 2000);
    assert_eq!(int(&g, "nonce"), int(&f, "nonce"));
    assert_eq!(stored_payload(&mut c, "q", &g), cfg2.as_bytes());

    // An immediate job without a collation.
    let h = immediate_at(&mut c, "q", &config("j", None, 0), 4000);
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
        let (_s, mut c) = start_server();
        ok(&mut c, &args!["ORCA.SETTINGS", "q", "ORDER", order]);
        // user.1 reservations 100, 110, 120; another collation in between.
        enqueue_at(&mut c, "q", &config("a", Some("user.1"), 100), 0);
        enqueue_at(&mut c, "q", &config("b", Some("user.1"), 100), 10);
        enqueue_at(&mut c, "q", &config("y", Some("team.3"), 100), 15);
        enqueue_at(&mut c, "q", &config("c", Some("user.1"), 100), 20);
        let b_before = must_status(&mut c, "q", &key_of("b"));
        assert_eq!(int(&b_before, "release_at"), 110, "{order}");

        let cfg = r#"{"key":"b","response_url":"http://cb/b","v":"upgraded"}"#;
        let f = immediate_at(&mut c, "q", cfg, 50);
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
        let g = immediate_at(&mut c, "q", cfg, 60);
        assert_eq!(int(&g, "release_at"), 50);
        assert_eq!(qlen(&mut c, "q"), 4);
        assert_eq!(int(&settings(&mut c, "q"), "collations"), 2);
        assert_order(&mut c, "q", expect);
    }
}

#[test]
fn immediate_upgrades_a_job_without_collation() {
    let (_s, mut c) = start_server();
    enqueue_at(&mut c, "q", &config("a", None, 0), 100);
    enqueue_at(&mut c, "q", &config("late", None, 10_000), 100);
    let f = immediate_at(&mut c, "q", &config("late", None, 0), 200);
    assert_eq!(int(&f, "created"), 0);
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&f, "release_at"), 200);
    assert_order(&mut c, "q", &[("a", 100), ("late", 200)]);
}

#[test]
fn reenqueue_is_immediate_at_created_at() {
    let (_s, mut c) = start_server();
    enqueue_at(&mut c, "q", &config("a", None, 0), 1000);
    enqueue_at(&mut c, "q", &config("b", Some("user.1"), 0), 2000);
    enqueue_at(&mut c, "q", &config("w", Some("user.2"), 0), 3000);
    // A worker hands its job back: it arrived at 1500, before b.
    let cfg = config("r", Some("user.1"), 60_000);
    let f = reenqueue(&mut c, "q", &cfg, 1500);
    assert_write_fields(&f, &["created"]);
    assert_eq!(int(&f, "created"), 1);
    assert_eq!(int(&f, "immediate"), 1);
    assert_eq!(int(&f, "created_at"), 1500);
    assert_eq!(int(&f, "release_at"), 1500);
    assert_eq!(int(&f, "attempts"), 0);
    assert_eq!(opt_text(&f, "collation").as_deref(), Some("user.1"));
    assert_eq!(stored_payload(&mut c, "q", &f), cfg.as_bytes());
    // Arrived at 0: before everything.
    let g = reenqueue(&mut c, "q", &config("z", None, 0), 0);
    assert_eq!(int(&g, "release_at"), 0);
    // Re-enqueue of a job that is still waiting: upgraded to immediate at
    // the given time, arrival kept.
    let h = reenqueue(&mut c, "q", &config("w", Some("user.2"), 0), 2500);
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
    reenqueue(&mut c, "fresh", &config("k", None, 0), 5);
    assert_eq!(qlen(&mut c, "fresh"), 1);
}

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
        let f = enqueue_at(c, q, &config(name, coll, prio), now);
        assert_eq!(int(&f, "created"), 1);
        assert_eq!(opt_text(&f, "collation").as_deref(), coll);
        out.push(int(&f, "release_at"));
    }
    out
}

#[test]
fn lifo_is_the_default_and_pairs_jobs_with_reservations() {
    let (_s, mut c) = start_server();
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
    let (_s, mut c) = start_server();
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
    let (_s, mut c) = start_server();
    // Reservations of user.1: 1000 (a) and 10 (b). LIFO: b is first in the
    // stack and is paired with the earliest reservation, 10.
    let a = enqueue_at(&mut c, "q", &config("a", Some("user.1"), 1000), 0);
    assert_eq!(int(&a, "release_at"), 1000);
    let b = enqueue_at(&mut c, "q", &config("b", Some("user.1"), 0), 10);
    assert_eq!(int(&b, "release_at"), 10);
    enqueue_at(&mut c, "q", &config("m", None, 500), 0);
    assert_order(&mut c, "q", &[("b", 10), ("m", 500), ("a", 1000)]);
}

#[test]
fn pop_hands_out_lowest_reservation() {
    let (_s, mut c) = start_server();
    assert!(pop(&mut c, "missing", 0).is_none());
    assert!(!exists(&mut c, "missing"));
    let cfg = config("a", Some("team.4"), 30);
    enqueue_at(&mut c, "q", &cfg, 70);
    immediate_at(&mut c, "q", &config("i", None, 0), 99);
    let p = pop(&mut c, "q", 0).expect("job");
    assert_field_names(&p, &[]);
    assert_eq!(text(&p, "key"), key_of("i"));
    assert_eq!(int(&p, "immediate"), 1);
    assert_eq!(int(&p, "attempts"), 1);
    assert_eq!(int(&p, "release_at"), 99);
    let st = must_status(&mut c, "q", &key_of("a"));
    let p = pop(&mut c, "q", 0).expect("job");
    assert_eq!(text(&p, "key"), key_of("a"));
    assert_eq!(opt_text(&p, "collation").as_deref(), Some("team.4"));
    assert_eq!(int(&p, "immediate"), 0);
    assert_eq!(int(&p, "created_at"), 70);
    assert_eq!(int(&p, "release_at"), 100);
    assert_eq!(int(&p, "nonce"), int(&st, "nonce"));
    assert_eq!(int(&p, "attempts"), 1);
    assert_eq!(as_bytes(get(&p, "payload")), cfg.as_bytes());
    assert!(pop(&mut c, "q", 0).is_none());
    assert_eq!(qlen(&mut c, "q"), 0);
    assert_check(&mut c, "q");
    // The emptied queue still works.
    enqueue_at(&mut c, "q", &config("b", None, 0), 1);
    assert_eq!(pop_keys(&mut c, "q"), keys_of(&["b"]));
}

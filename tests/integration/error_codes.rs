//! Error codes on the wire (docs/commands.md, "Error codes"): every queue
//! condition is refused with its own code, then the code's fields, then the
//! text; a malformed command with `ERR`. Each case changes nothing. The
//! texts of the key refusals are checked whole in their features' files
//! (move_job.rs, gates.rs, ack_next.rs, panic_guard.rs); here the codes
//! and fields, which are what clients read.

use std::collections::BTreeSet;

use redis::Value;

use crate::common::*;

/// Refused with `code` (and exactly `fields` after it); nothing changed.
/// Returns the text after the fields.
fn refused(c: &mut Con, q: &str, a: &[Vec<u8>], code: &str, fields: &[&str]) -> String {
    let e = assert_rejected(c, q, a, &[&format!("{code} ")]);
    let mut words = e.splitn(2 + fields.len(), ' ');
    assert_eq!(words.next(), Some(code), "{e}");
    for f in fields {
        assert_eq!(words.next(), Some(*f), "{}: {e}", show_args(a));
    }
    let text = words.next().unwrap_or_default().to_string();
    assert!(!text.is_empty(), "{}: no text in {e:?}", show_args(a));
    text
}

#[test]
fn every_condition_has_its_code() {
    let (_s, mut c) = start_server();
    let q = "q";
    let mut seen = BTreeSet::new();
    let mut expect = |c: &mut Con, a: Vec<Vec<u8>>, code: &'static str, fields: &[&str]| {
        refused(c, q, &a, code, fields);
        seen.insert(code);
    };
    // ERR: the command itself is malformed.
    expect(&mut c, args!["ORCA.POP", q, "SIDEWAYS", 1], "ERR", &[]);
    expect(&mut c, args!["ORCA.LIST", q, "LIMIT", -1], "ERR", &[]);
    // BADCONFIG, also over a size limit.
    expect(&mut c, args!["ORCA.ENQUEUE", q, "[1]"], "BADCONFIG", &[]);
    config_set(&mut c, "orca.max-payload-bytes", 10);
    expect(
        &mut c,
        args!["ORCA.ENQUEUE", q, config("big", None, 0)],
        "BADCONFIG",
        &[],
    );
    config_set(&mut c, "orca.max-payload-bytes", 4_194_304);
    // TIMERANGE: arrival + priority past 2^53-1.
    let late = config("late", None, 9_007_199_254_740_991);
    expect(&mut c, args!["ORCA.ENQUEUE", q, late], "TIMERANGE", &[]);

    // One job at a time, so each pop takes the job named.
    let take = |c: &mut Con, cfg: &str| {
        enqueue(c, q, cfg);
        must_pop(c, q, 60_000)
    };
    let run = take(&mut c, &config("run", None, 0));
    let retry = take(&mut c, &config("retry", None, 0));
    let dies = take(&mut c, &config("dies", None, 0));
    let gone = take(&mut c, &config("gone", None, 0));
    let nacked = nack_with(
        &mut c,
        q,
        &text(&retry, "key"),
        &lease(&retry),
        &args!["DELAY", 60_000],
    );
    let retry_at = int(&nacked, "retry_at").to_string();
    nack_with(
        &mut c,
        q,
        &text(&dies, "key"),
        &lease(&dies),
        &args!["MAXATTEMPTS", 1],
    );
    ok(&mut c, &args!["ORCA.GATE", q, "hw 3", "CLOSE"]);
    let held = text(
        &enqueue(&mut c, q, r#"{"key":"held","gate":"hw 3"}"#),
        "key",
    );
    immediate_job(&mut c, q, "imm2", None);

    // MOVE: a code per state, the retry time and the gate as fields.
    let mv = |k: &str| args!["ORCA.MOVE", q, k, "RELEASE"];
    expect(&mut c, mv(&key_of("never")), "NOJOB", &[]);
    expect(&mut c, mv("not-a-key"), "NOJOB", &[]);
    expect(&mut c, mv(&key_of("imm2")), "IMMEDIATE", &[]);
    expect(&mut c, mv(&text(&run, "key")), "LEASED", &[]);
    expect(&mut c, mv(&text(&retry, "key")), "DELAYED", &[&retry_at]);
    expect(&mut c, mv(&text(&dies, "key")), "DEAD", &[]);
    expect(&mut c, mv(&held), "HELD", &["hw%203"]);
    // DEAD REQUEUE.
    let requeue = |k: &str| args!["ORCA.DEAD", q, "REQUEUE", k];
    expect(&mut c, requeue(&text(&run, "key")), "NOJOB", &[]);
    enqueue(&mut c, q, &config("dies", None, 0)); // a regrade of the dead key
    expect(&mut c, requeue(&text(&dies, "key")), "ALREADYQUEUED", &[]);

    // Leases: NOLEASE (also malformed), CANCELLED, TOOLARGE, TIMERANGE.
    let (rk, rl) = (text(&run, "key"), lease(&run));
    for (k, l) in [
        (rk.as_str(), "999999"),
        (rk.as_str(), "x"),
        ("not-a-key", rl.as_str()),
    ] {
        expect(&mut c, args!["ORCA.ACK", q, k, l], "NOLEASE", &[]);
        expect(&mut c, args!["ORCA.NACK", q, k, l], "NOLEASE", &[]);
        expect(&mut c, args!["ORCA.EXTEND", q, k, l, 1000], "NOLEASE", &[]);
    }
    config_set(&mut c, "orca.max-payload-bytes", 10);
    expect(
        &mut c,
        args!["ORCA.ACK", q, &rk, &rl, "RESULT", "x".repeat(11)],
        "TOOLARGE",
        &[],
    );
    let mack = args!["ORCA.MACK", q, 1, &rk, &rl, "RESULTS", "x".repeat(11)];
    expect(&mut c, mack, "TOOLARGE", &[]);
    config_set(&mut c, "orca.max-payload-bytes", 4_194_304);
    let next = args![
        "ORCA.ACK",
        q,
        &rk,
        &rl,
        "NEXT",
        "LEASE",
        9_007_199_254_740_991i64
    ];
    expect(&mut c, next, "TIMERANGE", &[]);
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", q, text(&gone, "key")])),
        1
    );
    let (ik, il) = (text(&gone, "key"), lease(&gone));
    expect(&mut c, args!["ORCA.ACK", q, &ik, &il], "CANCELLED", &[]);
    expect(
        &mut c,
        args!["ORCA.EXTEND", q, &ik, &il, 1000],
        "CANCELLED",
        &[],
    );

    // TOOMANY <max> over orca.max-pop-count; below the range it is ERR.
    config_set(&mut c, "orca.max-pop-count", 3);
    expect(&mut c, args!["ORCA.POP", q, "COUNT", 4], "TOOMANY", &["3"]);
    expect(
        &mut c,
        args!["ORCA.MPOP", 1, q, "COUNT", 4],
        "TOOMANY",
        &["3"],
    );
    expect(&mut c, args!["ORCA.LIST", q, "LIMIT", 4], "TOOMANY", &["3"]);
    expect(
        &mut c,
        args!["ORCA.DEAD", q, "LIST", "LIMIT", 4],
        "TOOMANY",
        &["3"],
    );
    expect(&mut c, args!["ORCA.POP", q, "COUNT", 0], "ERR", &[]);
    config_set(&mut c, "orca.max-pop-count", 1000);

    // QUEUEFULL, CORRUPT, WRONGTYPE.
    config_set(&mut c, "orca.max-queue-length", 1);
    expect(
        &mut c,
        args!["ORCA.ENQUEUE", q, config("more", None, 0)],
        "QUEUEFULL",
        &[],
    );
    config_set(&mut c, "orca.max-queue-length", 10_000_000);
    expect(
        &mut c,
        args!["ORCA.IMPORT", "other", "not a queue"],
        "CORRUPT",
        &[],
    );
    ok(&mut c, &args!["SET", "str", "x"]);
    expect(&mut c, args!["ORCA.LEN", "str"], "WRONGTYPE", &[]);

    // Every code a healthy server gives to a client was given (INTERNAL:
    // panic_guard.rs; NOTQUEUED and INVARIANT need a broken queue).
    let all: BTreeSet<&str> = [
        "ERR",
        "WRONGTYPE",
        "BADCONFIG",
        "NOJOB",
        "IMMEDIATE",
        "LEASED",
        "DELAYED",
        "DEAD",
        "HELD",
        "ALREADYQUEUED",
        "NOLEASE",
        "CANCELLED",
        "QUEUEFULL",
        "TOOLARGE",
        "TOOMANY",
        "TIMERANGE",
        "CORRUPT",
    ]
    .into();
    assert_eq!(seen, all);
    // The server counts errors by code.
    let stats = info(&mut c, "errorstats");
    for code in ["NOLEASE", "TOOMANY", "HELD"] {
        let line = stats.get(&format!("errorstat_{code}")).map(String::as_str);
        assert!(
            line.is_some_and(|l| l.starts_with("count=")),
            "{code}: {stats:?}"
        );
    }
}

/// ORCA.MACK's per-lease outcomes carry the same codes, as error elements.
#[test]
fn mack_outcomes_carry_codes() {
    let (_s, mut c) = start_server();
    let q = "q";
    for n in ["a", "b"] {
        enqueue(&mut c, q, &config(n, None, 0));
    }
    let a = must_pop(&mut c, q, 60_000);
    let b = must_pop(&mut c, q, 60_000);
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", q, text(&b, "key")])),
        1
    );
    let r = ok(
        &mut c,
        &args![
            "ORCA.MACK",
            q,
            3,
            text(&a, "key"),
            lease(&a),
            text(&a, "key"),
            lease(&a),
            text(&b, "key"),
            lease(&b)
        ],
    );
    let Value::Array(outcomes) = r else {
        panic!("ORCA.MACK replied {r:?}")
    };
    let codes: Vec<Option<String>> = outcomes.iter().map(error_code).collect();
    assert_eq!(
        codes,
        [None, Some("NOLEASE".into()), Some("CANCELLED".into())]
    );
}

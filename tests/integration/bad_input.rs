//! Bad input: every refused command gets a one-line error reply, changes
//! nothing and leaves the server answering. Bad configs and collation ids,
//! wrong arity, bad times and buffers, unknown options, keys of another
//! type (`WRONGTYPE`), and commands on a missing key.

use crate::common::*;
use redis::Value;

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
    let (_s, mut c) = start_server();
    let q = populated(&mut c);
    for cfg in bad_configs() {
        let cfg = cfg.as_slice();
        for q in [q, "fresh"] {
            let e = assert_rejected(&mut c, q, &args!["ORCA.ENQUEUE", q, cfg], BADCONFIG);
            assert!(e.len() < 1000, "error text too long: {} bytes", e.len());
            let a = args!["ORCA.ENQUEUE", q, cfg, "NOW", "5"];
            assert_rejected(&mut c, q, &a, BADCONFIG);
            assert_rejected(&mut c, q, &args!["ORCA.IMMEDIATE", q, cfg], BADCONFIG);
            let a = args!["ORCA.REENQUEUE", q, cfg, "5"];
            assert_rejected(&mut c, q, &a, BADCONFIG);
        }
        assert!(!exists(&mut c, "fresh"), "a failed command created the key");
    }
    // Time overflow: priority + NOW beyond 2^53 - 1.
    let cfg = format!(r#"{{"key":"k","priority":{MAX_TIME}}}"#);
    for q in [q, "fresh"] {
        let a = args!["ORCA.ENQUEUE", q, &cfg, "NOW", "1"];
        assert_eq!(
            assert_rejected(&mut c, q, &a, ERR_CODES),
            "TIMERANGE time out of range"
        );
    }
    assert!(!exists(&mut c, "fresh"));
    assert_eq!(pop_keys(&mut c, q), keys_of(&["i", "n", "b", "a"]));
    let st = pop_all(&mut c, q);
    assert!(st.is_empty());
}

#[test]
fn wrong_arity_for_every_command() {
    let (_s, mut c) = start_server();
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
    let (_s, mut c) = start_server();
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
        assert!(!exists(&mut c, "fresh"));
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
        ERR_CODES,
    );
    assert!(e.starts_with("TIMERANGE "), "{e}");
    let e = assert_rejected(
        &mut c,
        q,
        &args!["ORCA.MOVE", q, &ka, "DELAY", "BUFFER", MAX_TIME],
        ERR_CODES,
    );
    assert!(e.starts_with("TIMERANGE "), "{e}");
    assert_eq!(pop_keys(&mut c, "edge"), keys_of(&["e0", "e1", "e2"]));
}

#[test]
fn unknown_options_and_bad_keywords() {
    let (_s, mut c) = start_server();
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
    assert!(!exists(&mut c, "fresh"));
    assert_eq!(text(&settings(&mut c, q), "order"), "lifo");
}

/// An unknown option is named as unknown, with the command's whole list of
/// options (those parsed apart from the rest too), whether or not a value
/// follows it.
#[test]
fn unknown_options_list_every_option_of_their_command() {
    let (_s, mut c) = start_server();
    let q = populated(&mut c);
    let j = must_pop(&mut c, q, LONG);
    let (k, l) = (text(&j, "key"), text(&j, "lease"));
    let settings_list = "ORDER, LIFETIME, AUTODELAY, CAP, MAXRUNNING, DEADMAX, DEADTTL, RESULTMAX";
    let cases: Vec<(Vec<Vec<u8>>, String)> = vec![
        (
            args!["ORCA.SETTINGS", q, "FOO"],
            format!("ERR unknown option 'FOO' (allowed: {settings_list})"),
        ),
        (
            args!["ORCA.SETTINGS", q, "FOO", "1"],
            format!("ERR unknown option 'FOO' (allowed: {settings_list})"),
        ),
        (
            args!["ORCA.SETTINGS", q, "AUTODELAY", "1", "2", "NEXT"],
            format!("ERR unknown option 'NEXT' (allowed: {settings_list})"),
        ),
        (
            args!["ORCA.LIST", q, "FOO", "1"],
            "ERR unknown option 'FOO' (allowed: OFFSET, LIMIT, STATE, GATE, FILTER)".into(),
        ),
        (
            args!["ORCA.ACK", q, &k, &l, "FOO", "1"],
            "ERR unknown option 'FOO' (allowed: RESULT, TTL, NOW, STOP, FORWARD, NEXT)".into(),
        ),
        (
            args!["ORCA.NACK", q, &k, &l, "FOO", "1"],
            "ERR unknown option 'FOO' (allowed: DELAY, NOW, MAXATTEMPTS, ERROR, FORWARD, NEXT)"
                .into(),
        ),
    ];
    for (a, want) in &cases {
        assert_eq!(
            &assert_rejected(&mut c, q, a, ERR),
            want,
            "{}",
            show_args(a)
        );
    }
    // A known option without its value says so.
    let e = assert_rejected(&mut c, q, &args!["ORCA.SETTINGS", q, "DEADMAX"], ERR);
    assert_eq!(e, "ERR option DEADMAX needs 1 value(s)");
}

/// Every command on a key of another type answers WRONGTYPE and leaves the
/// key alone (a string and a list here).
#[test]
fn string_key_gives_wrongtype() {
    let (_s, mut c) = start_server();
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
            // A malformed orca key or lease is checked after the type.
            args!["ORCA.MOVE", key, "junk", "RELEASE"],
            args!["ORCA.ACK", key, "junk", "1"],
            args!["ORCA.ACK", key, &k, "not-a-lease"],
            args!["ORCA.NACK", key, "junk", "1", "NEXT"],
            args!["ORCA.EXTEND", key, "junk", "1", "1000"],
            args!["ORCA.EXTEND", key, &k, "0", "1000"],
            args!["ORCA.DEAD", key, "REQUEUE", "junk"],
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
        args!["ORCA.IMPORT", "s", "garbage"],
    ] {
        let e = fails(&mut c, &a);
        assert!(
            ["WRONGTYPE ", "BADCONFIG ", "CORRUPT "]
                .iter()
                .any(|p| e.starts_with(p)),
            "{e}"
        );
        assert_eq!(as_string(&ok(&mut c, &args!["GET", "s"])), "hello");
    }
    // And the other way round.
    enqueue_at(&mut c, "q", &cfg, 1);
    let e = fails(&mut c, &args!["GET", "q"]);
    assert!(e.starts_with("WRONGTYPE"), "{e}");
}

/// The contract: `WRONGTYPE` when the key holds another type.
#[test]
fn inspection_commands_reply_wrongtype() {
    let (_s, mut c) = start_server();
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

#[test]
fn status_len_check_on_missing_or_absent() {
    let (_s, mut c) = start_server();
    assert_eq!(qlen(&mut c, "missing"), 0);
    assert_check(&mut c, "missing");
    assert!(status(&mut c, "missing", &key_of("a")).is_none());
    assert!(status(&mut c, "missing", "junk").is_none());
    assert!(!exists(&mut c, "missing"));
    enqueue_at(&mut c, "q", &config("a", None, 0), 1);
    assert!(status(&mut c, "q", &key_of("b")).is_none());
    assert!(status(&mut c, "q", "junk").is_none());
    assert!(status(&mut c, "q", "").is_none());
    let st = must_status(&mut c, "q", &key_of("a"));
    assert_field_names(&st, &["state", "position"]);
    assert_eq!(int(&st, "position"), 1);
    assert_eq!(qlen(&mut c, "q"), 1);
}

#[test]
fn collation_ids() {
    let (_s, mut c) = start_server();
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
        let f = enqueue_at(&mut c, "q", &cfg, 100 + i as i64);
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
    let (_s, mut c) = start_server();
    let q = populated(&mut c);
    for cfg in [
        r#"{"key":"k","collation":["user","1"]}"#,
        r#"{"key":"k","collation":["team",7]}"#,
    ] {
        assert_rejected(&mut c, q, &args!["ORCA.ENQUEUE", q, cfg], BADCONFIG);
        let a = args!["ORCA.ENQUEUE", "fresh", cfg];
        assert_rejected(&mut c, "fresh", &a, BADCONFIG);
    }
}

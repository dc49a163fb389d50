//! Settings: `ORCA.SETTINGS` of a queue (order, persisted), the module
//! settings (`CONFIG SET/GET orca.*`, loadmodule arguments, the command
//! line) and how each changes behaviour, and `orca.trust-client-clock`.

use std::collections::HashMap;
use std::time::Duration;

use crate::common::*;
use redis::Value;

#[test]
fn settings_reply_defaults_and_persistence() {
    let (_s, mut c) = start_server();
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
    assert!(!exists(&mut c, "missing"));

    // Keyword case does not matter.
    let st = fields(ok(&mut c, &args!["ORCA.SETTINGS", "f", "order", "fifo"]));
    assert_eq!(text(&st, "order"), "fifo");
    assert!(exists(&mut c, "f"));
    enqueue_at(&mut c, "l", &config("a", Some("user.1"), 0), 1);

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
    enqueue_at(&mut c, "newq", &config("a", Some("user.1"), 0), 1);
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
    enqueue_at(&mut c, "newq", &config("b", Some("user.1"), 0), 2);
    assert_eq!(pop_keys(&mut c, "newq"), keys_of(&["b", "a"]));
}

/// Every setting as test servers run with it: the module's defaults, except
/// `orca.trust-client-clock`, which the harness turns on so tests may pin
/// the clock (its real default, no, is checked in
/// `trust_client_clock_is_off_by_default`).
const DEFAULTS: [(&str, &str); 24] = [
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
    ("orca.max-worker-length", "256"),
    ("orca.max-error-length", "4096"),
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
    let (_s, mut c) = start_server();
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
    assert_eq!(
        reply_keys(&list_all(&mut c, q)),
        vec![key_of("b"), key_of("a")]
    );

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
        "TOOMANY 3 COUNT must be between 1 and 3"
    );
    assert_eq!(
        fails(&mut c, &args!["ORCA.LIST", "mp", "LIMIT", "4"]),
        "TOOMANY 3 LIMIT must be between 0 and 3"
    );
    assert_eq!(
        fails(&mut c, &args!["ORCA.DEAD", "mp", "LIST", "LIMIT", "4"]),
        "TOOMANY 3 LIMIT must be between 0 and 3"
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
        let j = must_pop(&mut c, "rb", 60_000);
        assert_eq!(int(&j, "attempt"), attempt);
        let now = server_ms(&mut c);
        let r = nack_job(&mut c, "rb", &j, &["NOW", &now.to_string()]);
        assert_eq!(text(&r, "outcome"), "retry");
        assert_eq!(int(&r, "retry_at"), now + backoff, "attempt {attempt}");
        wait_for("the retry", Duration::from_secs(5), || {
            state(&mut c, "rb", &rk).as_deref() == Some("queued")
        });
    }

    // max-attempts: the 2nd failed delivery dies.
    config_set(&mut c, "orca.max-attempts", "2");
    ok(&mut c, &args!["ORCA.ENQUEUE", "ma", config("x", None, 0)]);
    let j = must_pop(&mut c, "ma", 60_000);
    assert_eq!(
        text(&nack_job(&mut c, "ma", &j, &["DELAY", "0"]), "outcome"),
        "retry"
    );
    wait_for("the retry", Duration::from_secs(5), || {
        state(&mut c, "ma", &key_of("x")).as_deref() == Some("queued")
    });
    let j = must_pop(&mut c, "ma", 60_000);
    assert_eq!(text(&nack_job(&mut c, "ma", &j, &[]), "outcome"), "dead");
    config_set(&mut c, "orca.max-attempts", "5");

    // result-ttl: kept by default, not kept with 0, forgotten after the TTL.
    let ack_result = |c: &mut redis::Connection, name: &str| -> Value {
        ok(c, &args!["ORCA.ENQUEUE", "rt", config(name, None, 0)]);
        let j = must_pop(c, "rt", 60_000);
        ack_job(c, "rt", &j, &["RESULT", "done"]);
        ok(c, &args!["ORCA.RESULT", "rt", key_of(name)])
    };
    assert_eq!(as_string(&ack_result(&mut c, "r1")), "done");
    config_set(&mut c, "orca.result-ttl", "0");
    assert_eq!(ack_result(&mut c, "r2"), Value::Nil);
    config_set(&mut c, "orca.result-ttl", "150");
    assert_eq!(as_string(&ack_result(&mut c, "r3")), "done");
    wait_for("the result to be forgotten", Duration::from_secs(5), || {
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
        "TOOMANY 7 COUNT must be between 1 and 7"
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

/// redis.conf.example documents every module setting, with its default
/// (but trust-client-clock, which the harness turns on), and nothing else.
#[test]
fn redis_conf_example_lists_every_setting_with_its_default() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("redis.conf.example");
    let text = std::fs::read_to_string(&path).expect("redis.conf.example");
    let listed: HashMap<String, String> = text
        .lines()
        .filter(|l| l.starts_with("orca."))
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap_or((l, ""));
            (k.to_string(), v.trim().trim_matches('"').to_string())
        })
        .collect();
    let want = defaults_with(&[("orca.trust-client-clock", "no")]);
    assert_eq!(listed, want, "redis.conf.example vs the module's settings");
    // The one hidden setting is there, commented out.
    assert!(text.contains("# orca.debug-panic-in"));
    // And the server agrees with the defaults.
    let (_s, mut c) = start_server();
    assert_eq!(config_get(&mut c, "orca.*"), defaults_with(&[]));
}

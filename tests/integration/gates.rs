//! Gates (holding pens for jobs whose grader image is being built):
//! `ORCA.GATE <queue> <gate> CLOSE|OPEN|DROP` and the config field `gate`.
//!
//! - CLOSE / OPEN / DROP replies, on missing queues and gates, refusals;
//! - held jobs (ENQUEUE, IMMEDIATE, REENQUEUE naming a closed gate, with and
//!   without a collation) are never handed out; STATUS `held` + `gate`; a
//!   PUT updates a held job in place (arrival kept); DELETE; MOVE refused;
//!   STATS `held` / `gates`; `LIST STATE HELD [GATE g]`; `max-queue-length`;
//! - OPEN queues every held job exactly as direct enqueues at the same
//!   arrival times would have: the same queue built in a second key with
//!   the clock pinned (`NOW <arrival>`) lists the same jobs, nonces,
//!   release times and positions, LIFO and FIFO, with collations, ties,
//!   priorities, updates, immediates and the automatic delay;
//! - DROP returns the configs as given; hostile gate names; events.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::*;
use redis::Value;

const G: &str = "img-hw3";

#[test]
fn close_open_drop_replies() {
    let (_s, mut c) = start_server();
    // OPEN and DROP of a gate that is not closed, on a missing queue: nothing.
    assert_eq!(open_gate(&mut c, "q", G), 0);
    assert_eq!(drop_gate(&mut c, "q", G), Vec::<String>::new());
    assert!(!exists(&mut c, "q"), "OPEN/DROP created the queue");

    // CLOSE creates the queue; 1 if the gate was open, 0 if closed already.
    assert_eq!(close_gate(&mut c, "q", G), 1);
    assert!(exists(&mut c, "q"));
    assert_eq!(as_string(&ok(&mut c, &args!["TYPE", "q"])), "orcaqueue");
    assert_eq!(close_gate(&mut c, "q", G), 0);
    assert_eq!(
        gates_of(&stats(&mut c, "q")),
        BTreeMap::from([(G.as_bytes().to_vec(), 0)])
    );
    assert_check(&mut c, "q");

    // OPEN of an empty closed gate: 0 released, the gate is forgotten.
    assert_eq!(open_gate(&mut c, "q", G), 0);
    assert!(gates_of(&stats(&mut c, "q")).is_empty());
    assert_eq!(open_gate(&mut c, "q", G), 0);
    // DROP forgets the gate too.
    assert_eq!(close_gate(&mut c, "q", "other"), 1);
    assert_eq!(drop_gate(&mut c, "q", "other"), Vec::<String>::new());
    assert!(gates_of(&stats(&mut c, "q")).is_empty());
    // A gate closed again after OPEN holds again.
    assert_eq!(close_gate(&mut c, "q", G), 1);
    let f = enqueue(&mut c, "q", &gated("a", None, 0, G));
    assert_eq!(text(&f, "state"), "held");
    assert_eq!(open_gate(&mut c, "q", G), 1);

    // Refusals change nothing.
    ok(&mut c, &args!["SET", "str", "v"]);
    for (a, want) in [
        (
            args!["ORCA.GATE", "q", G, "SHUT"],
            "ERR gate operation must be CLOSE, OPEN or DROP",
        ),
        (
            args!["ORCA.GATE", "q", "", "CLOSE"],
            "ERR gate name must not be empty",
        ),
        (
            args!["ORCA.GATE", "str", G, "CLOSE"],
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
    ] {
        assert_eq!(assert_rejected(&mut c, "q", &a, &[want]), want);
    }
    for a in [
        args!["ORCA.GATE", "q", G],
        args!["ORCA.GATE", "q", G, "CLOSE", "x"],
    ] {
        let e = assert_rejected(&mut c, "q", &a, ERR);
        assert!(e.contains("wrong number of arguments"), "{e}");
    }
    assert_eq!(as_string(&ok(&mut c, &args!["GET", "str"])), "v");
    assert!(gates_of(&stats(&mut c, "q")).is_empty());
}

/// One job of every kind naming a closed gate, and jobs that are not held.
fn held_mix(c: &mut Con, q: &str, t: i64) {
    assert_eq!(close_gate(c, q, G), 1);
    for (cmd, name, coll, prio) in [
        ("ORCA.ENQUEUE", "h-coll", Some("user.7"), 60),
        ("ORCA.ENQUEUE", "h-single", None, 30),
        ("ORCA.IMMEDIATE", "h-imm", Some("team.2"), 0),
        ("ORCA.IMMEDIATE", "h-imm-single", None, 0),
    ] {
        let f = fields(ok(c, &args![cmd, q, gated(name, coll, prio, G), "NOW", t]));
        assert_write_fields(&f, &["created", "state", "gate"]);
        assert_eq!(text(&f, "state"), "held", "{name}");
        assert_eq!(text(&f, "gate"), G);
        assert_eq!(int(&f, "created"), 1);
        assert_eq!(int(&f, "created_at"), t);
        assert_eq!(
            int(&f, "release_at"),
            t + prio,
            "{name}: arrival + priority"
        );
        assert_eq!(int(&f, "immediate"), i64::from(cmd == "ORCA.IMMEDIATE"));
        assert_eq!(opt_text(&f, "collation").as_deref(), coll);
    }
    let f = reenqueue(c, q, &gated("h-re", Some("user.7"), 0, G), t + 1);
    assert_eq!(text(&f, "state"), "held");
    assert_eq!((int(&f, "created_at"), int(&f, "immediate")), (t + 1, 1));
    // Not held: no gate, a gate that is not closed, a collation job.
    enqueue_at(c, q, &config("free", None, 0), t);
    enqueue_at(c, q, &gated("open-gate", None, 0, "not-closed"), t);
    enqueue_at(c, q, &config("free-coll", Some("user.7"), 0), t);
}

const HELD: [&str; 5] = ["h-coll", "h-single", "h-imm", "h-imm-single", "h-re"];

#[test]
fn held_jobs_are_never_handed_out() {
    let (s, mut c, t) = start_pinned();
    let q = "q";
    held_mix(&mut c, q, t);
    assert_eq!(qlen(&mut c, q), 3, "held jobs are not queued");
    for name in HELD {
        let f = must_status(&mut c, q, &key_of(name));
        assert_field_names(&f, &["state", "gate", "leases"]);
        assert_eq!(text(&f, "state"), "held", "{name}");
        assert_eq!(text(&f, "gate"), G);
        assert!(!f.contains_key("position"), "{f:?}");
        assert_eq!(get(&f, "leases"), &Value::Array(vec![]));
    }
    // Every way of handing out skips them: POP, COUNT, MPOP, ACK ... NEXT.
    let first = must_pop_at(&mut c, q, LONG, t);
    let after = finish_next(&mut c, "ORCA.ACK", q, &first, &[], &[]).expect("a queued job");
    ack_job(&mut c, q, &after, &[]);
    let mut got = vec![text(&first, "key"), text(&after, "key")];
    let rest = ok(
        &mut c,
        &args!["ORCA.POP", q, "COUNT", 10, "LEASE", 0, "NOW", t],
    );
    let Value::Array(rest) = rest else {
        panic!("{rest:?}")
    };
    got.extend(rest.into_iter().map(|v| text(&fields(v), "key")));
    let want: BTreeSet<String> = keys_of(&["free", "open-gate", "free-coll"])
        .into_iter()
        .collect();
    assert_eq!(
        got.iter().cloned().collect::<BTreeSet<_>>(),
        want,
        "{got:?}"
    );
    assert_eq!(got.len(), 3);
    assert_eq!(pop_at(&mut c, q, LONG, t + 10_000_000), None);
    assert_eq!(mpop(&mut c, &[q], &args!["LEASE", 0]), None);
    let (v, _) = joined(spawn_blocked(
        &s,
        args!["ORCA.POP", q, "BLOCK", 50, "LEASE", 0],
    ));
    assert_eq!(v, Value::Nil, "a blocked pop is not served a held job");
    for name in HELD {
        assert_eq!(state(&mut c, q, &key_of(name)).as_deref(), Some("held"));
    }
    assert_check(&mut c, q);
}

#[test]
fn put_of_a_held_key_updates_it_in_place() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    held_mix(&mut c, q, t);
    let before = must_status(&mut c, q, &key_of("h-coll"));
    // A later PUT, another payload and priority, even without the gate:
    // the payload changes, nothing else (the arrival is kept).
    let new_cfg = r#"{"key":"h-coll","response_url":"http://cb/h-coll","priority":5000,"rev":2,"collation":{"type":"user","id":"8"}}"#;
    let f = enqueue_at(&mut c, q, new_cfg, t + 7000);
    assert_eq!(int(&f, "created"), 0);
    assert_eq!(text(&f, "state"), "held");
    assert_eq!(text(&f, "gate"), G);
    let after = must_status(&mut c, q, &key_of("h-coll"));
    assert_eq!(text(&after, "payload"), new_cfg);
    for field in [
        "created_at",
        "release_at",
        "nonce",
        "collation",
        "immediate",
        "gate",
        "state",
    ] {
        assert_eq!(get(&after, field), get(&before, field), "{field}");
    }
    assert_eq!(
        int(&stats(&mut c, q), "held"),
        5,
        "an update is not a new job"
    );

    // IMMEDIATE of a held job: immediate where it waits, arrival kept.
    let f = immediate_at(&mut c, q, &gated("h-coll", Some("user.7"), 60, G), t + 8000);
    assert_eq!((int(&f, "created"), int(&f, "immediate")), (0, 1));
    assert_eq!(text(&f, "state"), "held");
    assert_eq!(int(&f, "created_at"), t);
    assert_eq!(state(&mut c, q, &key_of("h-coll")).as_deref(), Some("held"));

    // OPEN: the job is queued as an immediate job at its arrival, with the
    // last payload.
    assert_eq!(open_gate(&mut c, q, G), 5);
    let f = must_status(&mut c, q, &key_of("h-coll"));
    assert_eq!(text(&f, "state"), "queued");
    assert_eq!((int(&f, "immediate"), int(&f, "created_at")), (1, t));
    assert_eq!(int(&f, "release_at"), t, "immediate at its arrival");
    assert_eq!(text(&f, "payload"), gated("h-coll", Some("user.7"), 60, G));
    assert_eq!(text(&f, "collation"), "user.7");
    assert_check(&mut c, q);
}

#[test]
fn delete_and_move_of_held_jobs() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    held_mix(&mut c, q, t);
    // MOVE is refused with the reason, and changes nothing.
    let want = format!("HELD {G} job is held behind gate '{G}' (ORCA.GATE ... OPEN releases it)");
    for how in ["RELEASE", "DELAY"] {
        for name in ["h-coll", "h-single", "h-imm"] {
            let a = args!["ORCA.MOVE", q, key_of(name), how];
            let e = assert_rejected(&mut c, q, &a, &["HELD "]);
            assert_eq!(e, want, "{how} {name}");
        }
    }
    // DELETE removes a held job from its gate; 0 the second time.
    for name in ["h-coll", "h-imm"] {
        assert_eq!(
            as_int(&ok(&mut c, &args!["ORCA.DELETE", q, key_of(name)])),
            1
        );
        assert_eq!(status(&mut c, q, &key_of(name)), None);
        assert_eq!(
            as_int(&ok(&mut c, &args!["ORCA.DELETE", q, key_of(name)])),
            0
        );
    }
    let st = stats(&mut c, q);
    assert_eq!(int(&st, "held"), 3);
    assert_eq!(gates_of(&st), BTreeMap::from([(G.as_bytes().to_vec(), 3)]));
    assert_eq!(
        int(&st, "dead"),
        0,
        "a deleted held job is not a dead letter"
    );
    assert_check(&mut c, q);
    assert_eq!(open_gate(&mut c, q, G), 3);
    assert_eq!(status(&mut c, q, &key_of("h-coll")), None);
    assert_eq!(qlen(&mut c, q), 6);
    assert_check(&mut c, q);
}

#[test]
fn stats_list_and_info_count_held_jobs() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    held_mix(&mut c, q, t);
    assert_eq!(close_gate(&mut c, q, "a-gate"), 1);
    enqueue_at(&mut c, q, &gated("other0", None, 0, "a-gate"), t + 1);
    enqueue_at(
        &mut c,
        q,
        &gated("other1", Some("user.1"), 0, "a-gate"),
        t + 5,
    );
    assert_eq!(close_gate(&mut c, q, "empty"), 1);

    let st = stats(&mut c, q);
    assert_eq!((int(&st, "held"), int(&st, "queued")), (7, 3));
    assert_eq!(
        gates_of(&st),
        BTreeMap::from([
            (b"a-gate".to_vec(), 2),
            (b"empty".to_vec(), 0),
            (G.as_bytes().to_vec(), 5)
        ])
    );
    let se = settings(&mut c, q);
    assert_eq!((int(&se, "held"), int(&se, "jobs")), (7, 3));
    assert_eq!(orca_info(&mut c, "orca_jobs_held"), 7);
    assert_eq!(orca_info(&mut c, "orca_jobs_queued"), 3);

    // LIST STATE HELD: by gate name, then arrival; GATE keeps one gate.
    let all = list_state(&mut c, q, "HELD", &[]);
    let want = [
        "other0",
        "other1",
        "h-coll",
        "h-single",
        "h-imm",
        "h-imm-single",
        "h-re",
    ];
    assert_eq!(reply_keys(&all), keys_of(&want));
    for f in &all {
        assert_field_names(f, &["state", "gate"]);
        assert_eq!(text(f, "state"), "held");
        assert!(!f.contains_key("position"), "{f:?}");
    }
    assert_eq!(text(&all[0], "gate"), "a-gate");
    assert_eq!(text(&all[6], "gate"), G);
    let one = list_state(&mut c, q, "HELD", &["GATE", G]);
    assert_eq!(shown(&one), shown(&all[2..]));
    let page = list(&mut c, q, &["STATE", "HELD", "OFFSET", "1", "LIMIT", "2"]);
    assert_eq!(shown(&page), shown(&all[1..3]));
    assert!(list_state(&mut c, q, "HELD", &["GATE", "empty"]).is_empty());
    assert!(list_state(&mut c, q, "HELD", &["GATE", "never-closed"]).is_empty());
    // The queue order lists no held job.
    assert_eq!(list_all(&mut c, q).len(), 3);
    let e = assert_rejected(&mut c, q, &args!["ORCA.LIST", q, "GATE", G], ERR);
    assert_eq!(e, "ERR GATE applies to STATE HELD only");
    let e = assert_rejected(
        &mut c,
        q,
        &args!["ORCA.LIST", q, "STATE", "LEASED", "GATE", G],
        ERR,
    );
    assert_eq!(e, "ERR GATE applies to STATE HELD only");
    let e = assert_rejected(&mut c, q, &args!["ORCA.LIST", q, "STATE", "PENNED"], ERR);
    assert_eq!(
        e,
        "ERR STATE must be QUEUED, HELD, LEASED, DELAYED, DEAD or DONE"
    );

    // Held jobs count against orca.max-queue-length (10 waiting jobs now).
    config_set(&mut c, "orca.max-queue-length", 10);
    let e = assert_rejected(
        &mut c,
        q,
        &args!["ORCA.ENQUEUE", q, gated("one-more", None, 0, G)],
        &["QUEUEFULL "],
    );
    assert_eq!(
        e,
        "QUEUEFULL queue is full (10 waiting jobs; orca.max-queue-length is 10)"
    );
    // An update of a held job is not a new job.
    enqueue(&mut c, q, &gated("h-single", None, 1, G));
    config_set(&mut c, "orca.max-queue-length", 10_000_000);
}

#[test]
fn drop_returns_the_configs_as_given() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    assert_eq!(close_gate(&mut c, q, G), 1);
    // Configs exactly as sent: odd spacing, escapes, field order, extra
    // fields; an updated job gives its last config; a deleted one nothing.
    let cfgs = [
        format!(" {{ \"response_url\" : \"http://web/cb/51\", \"key\":\"sub-51\", \"gate\":\"{G}\" }}\n"),
        format!(r#"{{"key":"sub-52","gate":"{G}","collation":{{"type":"team","id":7}},"x":"\u00e9\n"}}"#),
        format!(r#"{{"key":"sub-53","gate":"{G}","collation":{{"type":"user","id":"7"}}}}"#),
        format!(r#"{{"key":"sub-54","gate":"{G}"}}"#),
    ];
    // Arrival order (the pinned times): 53, 51, 54, 52.
    enqueue_at(&mut c, q, &cfgs[2], t);
    enqueue_at(&mut c, q, &cfgs[0], t + 1);
    ok(&mut c, &args!["ORCA.IMMEDIATE", q, &cfgs[3], "NOW", t + 2]);
    enqueue_at(&mut c, q, &cfgs[1], t + 3);
    let updated = format!(r#"{{"key":"sub-53","gate":"{G}","rev":2}}"#);
    enqueue_at(&mut c, q, &updated, t + 4);
    let k54 = orca_key("sub-54", "");
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", q, &k54])), 1);
    enqueue_at(&mut c, q, &config("queued", None, 0), t);

    let dropped = drop_gate(&mut c, q, G);
    assert_eq!(dropped, vec![updated, cfgs[0].clone(), cfgs[1].clone()]);
    for k in [
        orca_key("sub-51", "http://web/cb/51"),
        orca_key("sub-52", ""),
        orca_key("sub-53", ""),
    ] {
        assert_eq!(status(&mut c, q, &k), None, "dropped jobs are gone");
    }
    let st = stats(&mut c, q);
    assert_eq!(
        (int(&st, "held"), int(&st, "dead"), int(&st, "queued")),
        (0, 0, 1)
    );
    assert!(gates_of(&st).is_empty(), "DROP forgets the gate");
    assert_eq!(drop_gate(&mut c, q, G), Vec::<String>::new());
    // The gate is open now: a job naming it is queued.
    let f = enqueue_at(&mut c, q, &cfgs[2], t + 10);
    assert!(!f.contains_key("state"), "{f:?}");
    assert_eq!(
        state(&mut c, q, &orca_key("sub-53", "")).as_deref(),
        Some("queued")
    );
    assert_check(&mut c, q);
}

#[test]
fn hostile_gate_names() {
    let (_s, mut c) = start_server();
    let q = "q";
    ok(&mut c, &args!["ORCA.SETTINGS", q]);
    // Binary names are gates like any other.
    let bin: Vec<u8> = b"a\x00b\xff\r\n ".to_vec();
    assert_eq!(as_int(&gate_op(&mut c, q, bin.clone(), "CLOSE")), 1);
    assert_eq!(as_int(&gate_op(&mut c, q, bin.clone(), "CLOSE")), 0);
    assert_eq!(
        gates_of(&stats(&mut c, q)),
        BTreeMap::from([(bin.clone(), 0)])
    );
    assert_eq!(as_int(&gate_op(&mut c, q, bin.clone(), "OPEN")), 0);
    // A JSON escape in a config names the same bytes as the raw name.
    let raw_name: Vec<u8> = "a\u{0}\u{e9}\u{1f600}".as_bytes().to_vec();
    assert_eq!(as_int(&gate_op(&mut c, q, raw_name.clone(), "CLOSE")), 1);
    let cfg = r#"{"key":"esc","gate":"a\u0000\u00e9\ud83d\ude00"}"#;
    let f = enqueue(&mut c, q, cfg);
    assert_eq!(text(&f, "state"), "held");
    assert_eq!(as_bytes(get(&f, "gate")), raw_name);
    // The gate field is the exact bytes, percent-encoded; the text quotes
    // the name as UTF-8 (a control character as '?').
    let e = assert_rejected(
        &mut c,
        q,
        &args!["ORCA.MOVE", q, text(&f, "key"), "RELEASE"],
        &["HELD "],
    );
    assert_eq!(
        e,
        "HELD a%00%C3%A9%F0%9F%98%80 job is held behind gate 'a?\u{e9}\u{1f600}' (ORCA.GATE ... OPEN releases it)"
    );
    // Keywords as names.
    for name in ["OPEN", "CLOSE", "DROP", "NOW"] {
        assert_eq!(as_int(&gate_op(&mut c, q, name, "CLOSE")), 1, "{name}");
    }
    assert_eq!(gates_of(&stats(&mut c, q)).len(), 5);

    // At the limit works; beyond it, empty, or huge: clear errors, nothing
    // changes (in ORCA.GATE and in configs alike).
    let at = "g".repeat(256);
    assert_eq!(as_int(&gate_op(&mut c, q, at.as_str(), "CLOSE")), 1);
    enqueue(&mut c, q, &gated("at-limit", None, 0, &at));
    for len in [257, 1 << 20] {
        let name = "g".repeat(len);
        let want = format!("ERR gate name is {len} bytes; the limit is 256 (orca.max-gate-length)");
        for op in ["CLOSE", "OPEN", "DROP"] {
            let e = assert_rejected(&mut c, q, &args!["ORCA.GATE", q, &name, op], ERR);
            assert_eq!(e, want);
        }
        let e = assert_rejected(
            &mut c,
            q,
            &args!["ORCA.ENQUEUE", q, gated("big", None, 0, &name)],
            BADCONFIG,
        );
        assert_eq!(
            e,
            format!("BADCONFIG gate is {len} bytes; the limit is 256 (orca.max-gate-length)")
        );
    }
    for op in ["CLOSE", "OPEN", "DROP"] {
        let e = assert_rejected(&mut c, q, &args!["ORCA.GATE", q, "", op], ERR);
        assert_eq!(e, "ERR gate name must not be empty");
    }
    let e = assert_rejected(
        &mut c,
        q,
        &args!["ORCA.ENQUEUE", q, gated("e", None, 0, "")],
        BADCONFIG,
    );
    assert_eq!(e, "BADCONFIG gate must not be empty");
    for bad in [r#"5"#, r#"["g"]"#, r#"{"g":1}"#, "true"] {
        let cfg = format!(r#"{{"key":"bad","gate":{bad}}}"#);
        let e = assert_rejected(&mut c, q, &args!["ORCA.ENQUEUE", q, &cfg], BADCONFIG);
        assert!(e.contains("'gate' must be a string or null"), "{bad}: {e}");
    }
    // "gate": null is no gate.
    let f = enqueue(&mut c, q, r#"{"key":"nullgate","gate":null}"#);
    assert!(!f.contains_key("state"), "{f:?}");

    // The limit is a module setting, for both places.
    config_set(&mut c, "orca.max-gate-length", 4);
    let e = assert_rejected(&mut c, q, &args!["ORCA.GATE", q, "fives", "CLOSE"], ERR);
    assert_eq!(
        e,
        "ERR gate name is 5 bytes; the limit is 4 (orca.max-gate-length)"
    );
    let e = assert_rejected(
        &mut c,
        q,
        &args!["ORCA.ENQUEUE", q, gated("x", None, 0, "fives")],
        BADCONFIG,
    );
    assert_eq!(
        e,
        "BADCONFIG gate is 5 bytes; the limit is 4 (orca.max-gate-length)"
    );
    assert_eq!(as_int(&gate_op(&mut c, q, "four", "CLOSE")), 1);
    config_set(&mut c, "orca.max-gate-length", 256);
    assert_check(&mut c, q);
}

#[test]
fn gate_events() {
    let (s, mut c, t) = start_pinned();
    config_set(&mut c, "notify-keyspace-events", "KEd");
    let mut sub = s.conn();
    let mut ev = Events::subscribe(&mut sub, "q");
    close_gate(&mut c, "q", G);
    ev.expect(&["orca.gate"], "CLOSE");
    enqueue_at(&mut c, "q", &gated("a", Some("user.1"), 0, G), t);
    ev.expect(&["orca.held"], "a held ENQUEUE");
    immediate_at(&mut c, "q", &gated("b", None, 0, G), t);
    ev.expect(&["orca.held"], "a held IMMEDIATE");
    enqueue_at(&mut c, "q", &gated("a", Some("user.1"), 0, G), t + 1);
    ev.expect(&["orca.update"], "an update of a held job");
    assert_eq!(open_gate(&mut c, "q", G), 2);
    ev.expect(&["orca.gate"], "OPEN");
    // OPEN and DROP of a gate that is not closed change nothing: no event.
    open_gate(&mut c, "q", G);
    drop_gate(&mut c, "q", G);
    close_gate(&mut c, "q", G);
    ev.expect(&["orca.gate"], "CLOSE");
    enqueue_at(&mut c, "q", &gated("c", None, 0, G), t);
    ev.expect(&["orca.held"], "a held ENQUEUE");
    assert_eq!(drop_gate(&mut c, "q", G).len(), 1);
    ev.expect(&["orca.gate"], "DROP");
    enqueue_at(&mut c, "q", &gated("d", None, 0, G), t);
    ev.expect(&["orca.enqueue"], "ENQUEUE naming an open gate");
    ev.expect_none(200, "the last ENQUEUE");
}

// ---------------------------------------------------------------------------
// OPEN = direct enqueues at the same arrival times
// ---------------------------------------------------------------------------

/// One job of a scenario: its command, collation, priority, and whether it
/// names the gate. A name keeps these for every PUT of it (updates vary
/// the payload and the priority in it, which an update must ignore).
#[derive(Clone)]
struct Job {
    name: String,
    immediate: bool,
    coll: Option<&'static str>,
    prio: i64,
    gated: bool,
}

enum Step {
    Put(Job, i64, u64),
    Order(&'static str),
}

/// A seeded scenario: puts at pinned times (many equal times and scores;
/// mostly forward, sometimes back), updates of earlier jobs, order changes.
fn scenario(seed: u64, steps: usize) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut jobs: Vec<Job> = Vec::new();
    let mut out = Vec::new();
    let mut t = 0i64;
    for i in 0..steps {
        t += *rng.pick(&[0, 0, 125, 250, 500, -375]);
        if rng.chance(5) {
            out.push(Step::Order(rng.pick::<&str>(&["LIFO", "FIFO"])));
            continue;
        }
        if !jobs.is_empty() && rng.chance(20) {
            let mut j = rng.pick(&jobs).clone();
            j.prio = *rng.pick(&[0, 250, 500, 1000]);
            out.push(Step::Put(j, t, 1 + rng.below(1000)));
            continue;
        }
        let j = Job {
            name: format!("s{i}"),
            immediate: rng.chance(15),
            coll: *rng.pick(&[
                Some("user.1"),
                Some("user.2"),
                Some("team.1"),
                Some("user.1"),
                None,
            ]),
            prio: *rng.pick(&[0, 250, 500, 1000]),
            gated: rng.chance(50),
        };
        jobs.push(j.clone());
        out.push(Step::Put(j, t, 0));
    }
    out
}

fn put_config(j: &Job, rev: u64) -> String {
    let mut cfg = if j.gated {
        gated(&j.name, j.coll, j.prio, G)
    } else {
        config(&j.name, j.coll, j.prio)
    };
    if rev > 0 {
        cfg.insert_str(1, &format!("\"rev\":{rev},"));
    }
    cfg
}

/// Run the scenario on `q` at pinned times from `base`.
fn run(c: &mut Con, q: &str, steps: &[Step], base: i64) {
    for s in steps {
        match s {
            Step::Put(j, t, rev) => {
                let cmd = if j.immediate {
                    "ORCA.IMMEDIATE"
                } else {
                    "ORCA.ENQUEUE"
                };
                ok(c, &args![cmd, q, put_config(j, *rev), "NOW", base + t]);
            }
            Step::Order(o) => {
                set(c, q, &["ORDER", o]);
            }
        }
    }
}

/// The scenario on `held` with the gate closed first and on `direct`
/// without; after OPEN both list exactly the same, keep behaving the same
/// for new jobs, and pop the same.
fn open_matches_direct(c: &mut Con, seed: u64, setup: &[&str]) {
    let base = future_base(c);
    let (a, b) = (format!("held-{seed}"), format!("direct-{seed}"));
    for q in [&a, &b] {
        set(c, q, setup);
    }
    let steps = scenario(seed, 60);
    close_gate(c, &a, G);
    run(c, &a, &steps, base);
    run(c, &b, &steps, base);
    let gated: BTreeSet<&str> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Put(j, ..) if j.gated => Some(j.name.as_str()),
            _ => None,
        })
        .collect();
    assert!(gated.len() >= 10, "seed {seed}: scenario too small");
    // Held: the reservation each will have is arrival + priority (+ delay).
    for f in list_state(c, &a, "HELD", &[]) {
        let d = must_status(c, &b, &text(&f, "key"));
        assert_eq!(int(&f, "created_at"), int(&d, "created_at"));
    }
    assert_eq!(open_gate(c, &a, G), gated.len() as i64, "seed {seed}");
    assert_check(c, &a);
    assert_eq!(
        listing(c, &a),
        listing(c, &b),
        "seed {seed}: OPEN differs from direct enqueues"
    );
    // Hidden state (ties, nonces, windows) agrees too: more jobs at the
    // last time and later, in both.
    let last = steps
        .iter()
        .rev()
        .find_map(|s| match s {
            Step::Put(_, t, _) => Some(*t),
            _ => None,
        })
        .unwrap_or(0);
    let more = scenario(seed ^ 0xFFFF, 12)
        .into_iter()
        .map(|s| match s {
            Step::Put(mut j, t, r) => {
                j.name = format!("m{}", j.name);
                Step::Put(j, last + t, r)
            }
            o => o,
        })
        .collect::<Vec<_>>();
    run(c, &a, &more, base);
    run(c, &b, &more, base);
    assert_eq!(
        listing(c, &a),
        listing(c, &b),
        "seed {seed}: after more jobs"
    );
    let pa: Vec<_> = pop_all(c, &a).iter().map(job_fields).collect();
    let pb: Vec<_> = pop_all(c, &b).iter().map(job_fields).collect();
    assert_eq!(pa, pb, "seed {seed}: pop order");
}

#[test]
fn open_matches_direct_enqueues_lifo_and_fifo() {
    let (_s, mut c) = start_server();
    for seed in [1, 2, 3] {
        open_matches_direct(&mut c, seed, &["ORDER", "LIFO"]);
    }
    for seed in [4, 5, 6] {
        open_matches_direct(&mut c, seed, &["ORDER", "FIFO"]);
    }
}

#[test]
fn open_matches_direct_enqueues_with_autodelay() {
    let (_s, mut c) = start_server();
    for seed in [7, 8] {
        open_matches_direct(&mut c, seed, &["AUTODELAY", "1000", "300"]);
    }
    open_matches_direct(
        &mut c,
        9,
        &["AUTODELAY", "2000", "250", "CAP", "600", "ORDER", "FIFO"],
    );
}

/// The design's example, by hand: a user's held job and a later direct
/// job of the same user with the same score.
#[test]
fn open_orders_equal_scores_by_arrival() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    close_gate(&mut c, q, G);
    // h arrives first (t, priority 500: score t+500); d later (t+500,
    // priority 0: score t+500) and is queued at once; after OPEN, h's
    // reservation sorts before d's (same score, earlier arrival).
    enqueue_at(&mut c, q, &gated("h", None, 500, G), t);
    enqueue_at(&mut c, q, &config("d", None, 0), t + 500);
    enqueue_at(&mut c, q, &gated("h2", Some("user.1"), 0, G), t + 100);
    enqueue_at(&mut c, q, &config("d2", Some("user.1"), 0), t + 200);
    assert_eq!(open_gate(&mut c, q, G), 2);
    // user.1 (LIFO): d2 (newer) on the earliest reservation t+100, h2 on
    // t+200.
    assert_eq!(
        keys_and_releases(&list_all(&mut c, q)),
        vec![
            (key_of("d2"), t + 100),
            (key_of("h2"), t + 200),
            (key_of("h"), t + 500),
            (key_of("d"), t + 500),
        ]
    );
    assert_check(&mut c, q);
}

//! What Redis knows of the commands: `COMMAND INFO` (arity, flags, key
//! specs), `COMMAND DOCS`, `COMMAND GETKEYS`, and ACL categories.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::*;
use redis::Value;

/// (name, arity, flags besides `module`)
const COMMANDS: &[(&str, i64, &[&str])] = &[
    ("orca.enqueue", -3, &["write", "denyoom"]),
    ("orca.immediate", -3, &["write", "denyoom"]),
    ("orca.reenqueue", 4, &["write", "denyoom"]),
    ("orca.move", -4, &["write"]),
    ("orca.delete", 3, &["write", "fast"]),
    ("orca.pop", -2, &["write", "fast"]),
    ("orca.mpop", -3, &["write", "movablekeys"]),
    // ACK and NACK may name a second queue (`FORWARD <queue2>`): the module
    // reports their keys (`getkeys-api`), so they are "movablekeys".
    ("orca.ack", -4, &["write", "fast", "movablekeys"]),
    ("orca.mack", -5, &["write"]),
    ("orca.nack", -4, &["write", "fast", "movablekeys"]),
    // Documented as 5 arguments, but the server replicates it with `NOW <ms>`
    // pinned, so -5 is also right (5 makes replicas refuse the stream).
    ("orca.extend", 5, &["write", "fast"]),
    ("orca.result", 3, &["readonly", "fast"]),
    ("orca.dead", -3, &["write"]),
    ("orca.tick", -2, &["write"]),
    ("orca.len", 2, &["readonly", "fast"]),
    ("orca.check", 2, &["readonly"]),
    ("orca.status", 3, &["readonly"]),
    ("orca.list", -2, &["readonly"]),
    ("orca.stats", 2, &["readonly"]),
    ("orca.settings", -2, &["write", "denyoom"]),
    ("orca.import", 3, &["write", "denyoom"]),
    ("orca.gate", 4, &["write", "denyoom"]),
];

/// A flat RESP2 field/value array as a map (values kept raw).
fn pairs(v: &Value) -> BTreeMap<String, Value> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .map(|kv| (as_string(&kv[0]), kv[1].clone()))
            .collect(),
        Value::Map(m) => m.iter().map(|(k, v)| (as_string(k), v.clone())).collect(),
        other => panic!("expected pairs, got {other:?}"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) | Value::Set(items) => items.iter().map(as_string).collect(),
        other => panic!("expected an array, got {other:?}"),
    }
}

#[test]
fn command_info_docs_getkeys_and_acl() {
    let (s, mut c) = start_server();
    let listed: BTreeSet<String> = strings(&ok(
        &mut c,
        &args!["COMMAND", "LIST", "FILTERBY", "MODULE", "orca"],
    ))
    .into_iter()
    .collect();
    let expected: BTreeSet<String> = COMMANDS.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(listed, expected);

    for &(name, arity, flags) in COMMANDS {
        let v = ok(&mut c, &args!["COMMAND", "INFO", name]);
        let Value::Array(outer) = v else {
            panic!("{v:?}")
        };
        let Value::Array(info) = &outer[0] else {
            panic!("no COMMAND INFO for {name}")
        };
        assert_eq!(as_string(&info[0]), name);
        if name == "orca.extend" {
            assert!([5, -5].contains(&as_int(&info[1])), "{name} arity");
        } else {
            assert_eq!(as_int(&info[1]), arity, "{name} arity");
        }
        let got: BTreeSet<String> = strings(&info[2]).into_iter().collect();
        let want: BTreeSet<String> = flags
            .iter()
            .chain(&["module"])
            .map(|f| f.to_string())
            .collect();
        assert_eq!(got, want, "{name} flags");
        if name == "orca.mpop" {
            // numkeys at index 1, the queues after it: a keynum key spec.
            assert_eq!(
                (as_int(&info[3]), as_int(&info[4]), as_int(&info[5])),
                (0, 0, 0),
                "{name} keys"
            );
            let Value::Array(specs) = &info[8] else {
                panic!("{name} key specs {:?}", info[8])
            };
            let spec = pairs(&specs[0]);
            let find = pairs(&spec["find_keys"]);
            assert_eq!(as_string(&find["type"]), "keynum");
            let keys = strings(&ok(
                &mut c,
                &args![
                    "COMMAND",
                    "GETKEYS",
                    "ORCA.MPOP",
                    3,
                    "a",
                    "b",
                    "c",
                    "BLOCK",
                    5
                ],
            ));
            assert_eq!(keys, vec!["a", "b", "c"]);
            continue;
        }
        assert_eq!(
            (as_int(&info[3]), as_int(&info[4]), as_int(&info[5])),
            (1, 1, 1),
            "{name} keys"
        );
        // One key spec: the queue at index 1 (a finish has a second one:
        // the key after a FORWARD, incomplete, see `forward.rs`).
        let Value::Array(specs) = &info[8] else {
            panic!("{name} key specs {:?}", info[8])
        };
        let finish = ["orca.ack", "orca.nack"].contains(&name);
        assert_eq!(specs.len(), 1 + finish as usize, "{name} key specs");
        if finish {
            let second = pairs(&specs[1]);
            let f: BTreeSet<String> = strings(&second["flags"]).into_iter().collect();
            assert!(f.contains("incomplete") && f.contains("RW"), "{name} {f:?}");
            let begin = pairs(&second["begin_search"]);
            assert_eq!(as_string(&begin["type"]), "keyword");
            let spec = pairs(&begin["spec"]);
            assert_eq!(as_string(&spec["keyword"]), "FORWARD");
            assert_eq!(as_int(&spec["startfrom"]), 4);
        }
        let spec = pairs(&specs[0]);
        let spec_flags: BTreeSet<String> = strings(&spec["flags"]).into_iter().collect();
        let rw = if flags.contains(&"readonly") {
            "RO"
        } else {
            "RW"
        };
        assert!(
            spec_flags.contains(rw),
            "{name} key spec flags {spec_flags:?}"
        );
        let begin = pairs(&spec["begin_search"]);
        assert_eq!(as_string(&begin["type"]), "index");
        assert_eq!(as_int(&pairs(&begin["spec"])["index"]), 1, "{name}");
        let find = pairs(&spec["find_keys"]);
        assert_eq!(as_string(&find["type"]), "range");
        let range = pairs(&find["spec"]);
        assert_eq!(
            (
                as_int(&range["lastkey"]),
                as_int(&range["keystep"]),
                as_int(&range["limit"])
            ),
            (0, 1, 0),
            "{name}"
        );

        // Docs.
        let docs = ok(&mut c, &args!["COMMAND", "DOCS", name]);
        let docs = pairs(&docs);
        let doc = pairs(&docs[name]);
        assert!(!as_string(&doc["summary"]).is_empty(), "{name} summary");
        assert!(
            !as_string(&doc["complexity"]).is_empty(),
            "{name} complexity"
        );
        assert_eq!(as_string(&doc["group"]), "module");
        assert_eq!(as_string(&doc["module"]), "orca");

        // GETKEYS with the least arguments the arity allows.
        let mut cmd = args![name, "the-queue"];
        while (cmd.len() as i64) < arity.abs() {
            cmd.push(b"x".to_vec());
        }
        let mut getkeys = args!["COMMAND", "GETKEYS"];
        getkeys.extend(cmd.iter().cloned());
        assert_eq!(
            strings(&ok(&mut c, &getkeys)),
            vec!["the-queue"],
            "{name} GETKEYS"
        );
        // Arity is enforced.
        let e = fails(&mut c, &cmd[..cmd.len() - 1]);
        assert!(e.contains("wrong number of arguments"), "{name}: {e}");
        if as_int(&info[1]) > 0 {
            let mut more = cmd.clone();
            more.push(b"x".to_vec());
            let e = fails(&mut c, &more);
            assert!(e.contains("wrong number of arguments"), "{name}: {e}");
        }
    }

    // ACL: a worker user limited to the worker commands on queue:*.
    add_worker_user(&mut c, "workerpw");
    enqueue_job(&mut c, "queue:1", "a", Some("user.1"), 0);
    enqueue_job(&mut c, "queue:1", "b", Some("user.1"), 0);
    enqueue_job(&mut c, "other:1", "c", None, 0);
    let mut w = s.conn();
    ok(&mut w, &args!["AUTH", "worker", "workerpw"]);
    let f = pop(&mut w, "queue:1", LONG).expect("worker pops");
    let h = held("queue:1", &f);
    ok(
        &mut w,
        &args!["ORCA.EXTEND", "queue:1", &h.key, &h.lease, LONG],
    );
    assert_eq!(as_int(&ack_held(&mut w, &h)), 1);
    let h = held("queue:1", &pop(&mut w, "queue:1", LONG).unwrap());
    ok(
        &mut w,
        &args!["ORCA.NACK", "queue:1", &h.key, &h.lease, "DELAY", LONG],
    );
    for denied in [
        args!["ORCA.ENQUEUE", "queue:1", config("x", None, 0)],
        args!["ORCA.POP", "other:1"],
        args!["ORCA.ACK", "other:1", key_of("c"), "1"],
        args!["ORCA.LEN", "queue:1"],
        args!["ORCA.DELETE", "queue:1", key_of("a")],
        args!["DEL", "queue:1"],
    ] {
        let e = fails(&mut w, &denied);
        assert!(e.starts_with("NOPERM"), "{}: {e}", show_args(&denied));
    }
    assert_eq!(qlen(&mut c, "other:1"), 1);
    assert_check(&mut c, "queue:1");
}

//! Replies under RESP3 (`HELLO 3`): job replies and every other
//! field/value reply are maps, with the same fields as the flat RESP2
//! arrays; checked with a client library and on the raw wire.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;
use redis::Value;

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

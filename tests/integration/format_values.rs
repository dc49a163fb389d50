//! `FORMAT VALUES` of the commands that hand out jobs (`ORCA.POP`,
//! `ORCA.MPOP`, and after `NEXT` in `ORCA.ACK`, `ORCA.NACK`, `ORCA.MACK`):
//!
//! - a delivery is an array of the values of the delivery map, in the map's
//!   order, without the names, and `queue` (MPOP) last: in RESP2 and RESP3
//!   alike (an array, never a map);
//! - it changes nothing but the reply: a twin queue driven with the default
//!   `FORMAT MAP` hands out the same jobs, leases and deadlines, and ends in
//!   the same state; `LEASE 0` gives nil lease and deadline; a blocked pop
//!   woken by an enqueue replies in its format;
//! - `FORMAT MAP` is the default; a bad value, or `FORMAT` where it is not
//!   an option of the pop (before `NEXT`), is refused and changes nothing.

use crate::common::*;
use redis::Value;

/// The place of each field in a `FORMAT VALUES` delivery (docs/commands.md).
const ORDER: [&str; 11] = [
    "attempt",
    "attempts",
    "collation",
    "created_at",
    "deadline",
    "immediate",
    "key",
    "lease",
    "nonce",
    "payload",
    "release_at",
];

/// A delivery written as a map (RESP2 flat array or RESP3 map): its
/// values in the map's order, `queue` moved last, and the names.
fn map_values(v: &Value) -> (Vec<Value>, Vec<String>) {
    let pairs: Vec<(Value, Value)> = match v {
        Value::Map(m) => m.clone(),
        Value::Array(items) => items
            .chunks_exact(2)
            .map(|p| (p[0].clone(), p[1].clone()))
            .collect(),
        other => panic!("not a delivery map: {other:?}"),
    };
    let (mut values, mut names, mut queue) = (vec![], vec![], None);
    for (k, v) in pairs {
        let k = as_string(&k);
        if k == "queue" {
            queue = Some(v);
        } else {
            names.push(k);
            values.push(v);
        }
    }
    if let Some(q) = queue {
        names.push("queue".into());
        values.push(q);
    }
    (values, names)
}

/// A `FORMAT VALUES` delivery: an array (also under RESP3) of 11 values,
/// 12 with `queue`.
fn values(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) if items.len() == 11 || items.len() == 12 => items.clone(),
        other => panic!("not a FORMAT VALUES delivery: {other:?}"),
    }
}

/// A list of deliveries (COUNT, MACK ... NEXT).
fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items.clone(),
        other => panic!("expected a list of deliveries, got {other:?}"),
    }
}

/// The value of `field` in a `FORMAT VALUES` delivery, as text.
fn at(v: &[Value], field: &str) -> String {
    let i = ORDER.iter().position(|f| *f == field).expect("a field");
    match &v[i] {
        Value::Int(n) => n.to_string(),
        other => as_string(other),
    }
}

/// `v` (FORMAT VALUES, from queue `vq`) is `m` (FORMAT MAP, from its twin
/// `mq`) without the names; `queue`, if any, names each one's own queue.
fn assert_same(m: &Value, v: &Value, mq: &str, vq: &str) {
    let (mut mv, names) = map_values(m);
    let mut vv = values(v);
    assert_eq!(&names[..11], &ORDER[..], "the map's order");
    assert_eq!(mv.len(), vv.len(), "{names:?}");
    if mv.len() == 12 {
        assert_eq!(as_string(&mv[11]), mq);
        assert_eq!(as_string(&vv[11]), vq);
        mv.pop();
        vv.pop();
    }
    assert_eq!(mv, vv);
}

/// Twin queues `m` and `v` with the same jobs: collations, none, an
/// immediate, priorities.
fn twins(c: &mut Con, t: i64, m: &str, v: &str) {
    for q in [m, v] {
        for i in 0..10 {
            let cfg = config(
                &format!("j{i}"),
                [Some("user.1"), None][i % 2],
                i as i64 * 10,
            );
            if i == 5 {
                immediate_at(c, q, &cfg, t + i as i64);
            } else {
                enqueue_at(c, q, &cfg, t + i as i64);
            }
        }
    }
}

fn with(mut a: Vec<Vec<u8>>, more: &[&str]) -> Vec<Vec<u8>> {
    a.extend(str_args(more));
    a
}

/// Every delivering command, on twin queues, once per protocol.
#[test]
fn values_are_the_map_values_in_order_for_every_delivering_command() {
    let (s, mut c2, t) = start_pinned();
    let mut c3 = s.conn_resp3();
    for (proto, c) in [("resp2", &mut c2), ("resp3", &mut c3)] {
        let (m, v) = (format!("{proto}-m"), format!("{proto}-v"));
        let (m, v) = (m.as_str(), v.as_str());
        twins(c, t, m, v);
        let now = (t + 100).to_string();
        let pin = ["LEASE", "5000", "NOW", &now];
        let both = |c: &mut Con, a: &dyn Fn(&str) -> Vec<Vec<u8>>| {
            (ok(c, &a(m)), ok(c, &with(a(v), &["FORMAT", "VALUES"])))
        };

        // POP, one job: the delivery itself.
        let (pm, pv) = both(c, &|q| with(args!["ORCA.POP", q], &pin));
        assert_same(&pm, &pv, m, v);
        // POP COUNT: a list of them.
        let (lm, lv) = both(c, &|q| with(args!["ORCA.POP", q, "COUNT", 2], &pin));
        assert_eq!(list(&lm).len(), 2);
        for (a, b) in list(&lm).iter().zip(list(&lv).iter()) {
            assert_same(a, b, m, v);
        }
        // MPOP: `queue` last, for one job and with COUNT.
        let (mm, mv) = both(c, &|q| with(mpop_args(&["absent", q], &[]), &pin));
        assert_same(&mm, &mv, m, v);
        assert_eq!(values(&mv).len(), 12);
        let (mm, mv) = both(c, &|q| {
            with(mpop_args(&[q], &str_args(&["COUNT", "1"])), &pin)
        });
        assert_same(&list(&mm)[0], &list(&mv)[0], m, v);

        // ACK ... NEXT and NACK ... NEXT: the next job in the format asked.
        let pv = values(&pv);
        let pm = fields(pm);
        for cmd in ["ORCA.ACK", "ORCA.NACK"] {
            let held_m = if cmd == "ORCA.ACK" {
                &pm
            } else {
                &fields(list(&lm)[0].clone())
            };
            let held_v = if cmd == "ORCA.ACK" {
                pv.clone()
            } else {
                values(&list(&lv)[0])
            };
            let nm = ok(
                c,
                &with(
                    args![cmd, m, text(held_m, "key"), text(held_m, "lease")],
                    &["NOW", &now, "NEXT", "LEASE", "5000"],
                ),
            );
            let nv = ok(
                c,
                &with(
                    args![cmd, v, at(&held_v, "key"), at(&held_v, "lease")],
                    &["NOW", &now, "NEXT", "LEASE", "5000", "FORMAT", "VALUES"],
                ),
            );
            assert_same(&nm, &nv, m, v);
        }

        // MACK ... NEXT: [outcomes, deliveries].
        let second_m = fields(list(&lm)[1].clone());
        let second_v = values(&list(&lv)[1]);
        let mack = |q: &str, key: String, lease: String, format: &[&str]| {
            with(
                args!["ORCA.MACK", q, 1, key, lease, "NOW", &now, "NEXT"],
                &[&["LEASE", "5000", "COUNT", "2"][..], format].concat(),
            )
        };
        let am = ok(
            c,
            &mack(m, text(&second_m, "key"), text(&second_m, "lease"), &[]),
        );
        let av = ok(
            c,
            &mack(
                v,
                at(&second_v, "key"),
                at(&second_v, "lease"),
                &["FORMAT", "VALUES"],
            ),
        );
        let (Value::Array(am), Value::Array(av)) = (am, av) else {
            panic!("MACK ... NEXT replies [outcomes, jobs]");
        };
        assert_eq!(am[0], av[0], "the same outcomes");
        assert_eq!(list(&am[1]).len(), 2);
        for (a, b) in list(&am[1]).iter().zip(list(&av[1]).iter()) {
            assert_same(a, b, m, v);
        }

        // LEASE 0: nil lease and deadline, in their places.
        let (zm, zv) = both(c, &|q| args!["ORCA.POP", q, "LEASE", 0, "NOW", &now]);
        assert_same(&zm, &zv, m, v);
        let zv = values(&zv);
        assert_eq!((&zv[4], &zv[7]), (&Value::Nil, &Value::Nil));

        // Only the reply differed: the twins end alike.
        assert_eq!(digest(c, m), digest(c, v), "{proto}");
        assert_check(c, v);
        // Nothing left to hand out: nil, as with the map.
        let drain = |c: &mut Con, q: &str, f: &[&str]| loop {
            if ok(c, &with(args!["ORCA.POP", q, "LEASE", 0, "NOW", &now], f)) == Value::Nil {
                break;
            }
        };
        drain(c, m, &[]);
        drain(c, v, &["FORMAT", "VALUES"]);
        assert_eq!(
            ok(
                c,
                &with(args!["ORCA.POP", v, "NOW", &now], &["FORMAT", "VALUES"])
            ),
            Value::Nil
        );
    }
}

#[test]
fn the_values_hold_what_the_fields_name() {
    let (_s, mut c, t) = start_pinned();
    let cfg = config("a", Some("user.7"), 40);
    let put = fields(ok(&mut c, &args!["ORCA.ENQUEUE", "q", &cfg, "NOW", t]));
    let d = values(&ok(
        &mut c,
        &args![
            "ORCA.POP",
            "q",
            "LEASE",
            700,
            "NOW",
            t + 3,
            "FORMAT",
            "values"
        ],
    ));
    assert_eq!(d.len(), 11, "no queue outside MPOP");
    assert_eq!(at(&d, "key"), key_of("a"));
    assert_eq!(at(&d, "payload"), cfg);
    assert_eq!(at(&d, "collation"), "user.7");
    assert_eq!(at(&d, "attempt"), "1");
    assert_eq!(at(&d, "attempts"), "1");
    assert_eq!(at(&d, "deadline"), (t + 703).to_string());
    assert_eq!(at(&d, "created_at"), int(&put, "created_at").to_string());
    assert_eq!(at(&d, "release_at"), int(&put, "release_at").to_string());
    assert_eq!(at(&d, "nonce"), int(&put, "nonce").to_string());
    assert_eq!(at(&d, "immediate"), "0");
    let st = must_status(&mut c, "q", &key_of("a"));
    assert_eq!(at(&d, "lease"), text(&st, "lease"));
    // The lease acks like any other.
    must_ack(&mut c, "q", &at(&d, "key"), &at(&d, "lease"));
    assert_eq!(status(&mut c, "q", &key_of("a")), None);
}

#[test]
fn a_blocked_pop_is_answered_in_its_format() {
    let s = Server::start(&[]);
    let mut c = s.conn();
    for (q, cmd) in [
        (
            "pq",
            args!["ORCA.POP", "pq", "BLOCK", 10_000, "FORMAT", "VALUES"],
        ),
        (
            "mq",
            mpop_args(&["mq"], &str_args(&["BLOCK", "10000", "FORMAT", "VALUES"])),
        ),
    ] {
        let waiter = spawn_blocked(&s, cmd);
        wait_blocked(&mut c, 1);
        enqueue(&mut c, q, &config("b", None, 0));
        let d = values(&joined(waiter).0);
        assert_eq!(at(&d, "key"), key_of("b"));
        if q == "mq" {
            assert_eq!(as_string(&d[11]), "mq");
        }
    }
}

#[test]
fn map_is_the_default_and_bad_formats_are_refused() {
    let (_s, mut c, t) = start_pinned();
    for i in 0..3 {
        enqueue_at(&mut c, "q", &config(&format!("j{i}"), None, 0), t);
    }
    let pinned = |extra: &[&str]| with(args!["ORCA.POP", "q", "LEASE", 0, "NOW", t], extra);
    // MAP, spelled out or not, is the job map.
    let a = fields(ok(&mut c, &pinned(&["FORMAT", "map"])));
    assert_field_names(&a, &["attempt", "lease", "deadline"]);
    for bad in [&["FORMAT", "JSON"][..], &["FORMAT", ""]] {
        let e = assert_rejected(&mut c, "q", &pinned(bad), ERR);
        assert_eq!(e, "ERR FORMAT must be MAP or VALUES");
    }
    assert_rejected(&mut c, "q", &pinned(&["FORMAT"]), ERR);
    let e = assert_rejected(
        &mut c,
        "q",
        &pinned(&["FORMAT", "VALUES", "FORMAT", "MAP"]),
        ERR,
    );
    assert_eq!(e, "ERR option FORMAT given twice");
    // FORMAT belongs to the pop after NEXT, not to the ACK/NACK/MACK.
    let j = must_pop_at(&mut c, "q", LONG, t);
    let (k, l) = (text(&j, "key"), text(&j, "lease"));
    for cmd in ["ORCA.ACK", "ORCA.NACK"] {
        // The text a client falls back on (an older module says the same of FORMAT anywhere).
        let e = assert_rejected(
            &mut c,
            "q",
            &args![cmd, "q", &k, &l, "FORMAT", "VALUES", "NEXT"],
            ERR,
        );
        assert!(
            e.starts_with("ERR unknown option 'FORMAT' (allowed: "),
            "{e}"
        );
        assert_rejected(
            &mut c,
            "q",
            &args![cmd, "q", &k, &l, "NEXT", "FORMAT", "BOGUS"],
            ERR,
        );
    }
    assert_rejected(
        &mut c,
        "q",
        &args!["ORCA.MACK", "q", 1, &k, &l, "FORMAT", "VALUES", "NEXT"],
        ERR,
    );
    assert_rejected(
        &mut c,
        "q",
        &args!["ORCA.MACK", "q", 1, &k, &l, "NEXT", "FORMAT", "TUPLE"],
        ERR,
    );
    // MACK without NEXT hands nothing out: FORMAT has no place there.
    assert_rejected(
        &mut c,
        "q",
        &args!["ORCA.MACK", "q", 1, &k, &l, "FORMAT", "VALUES"],
        ERR,
    );
    // The lease is still held: nothing above took effect.
    must_ack(&mut c, "q", &k, &l);
}

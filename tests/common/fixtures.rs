//! Queues built for a test to work on: one with a bit of everything, one
//! with every kind of serialized unit, a big one.

use super::jobs::*;
use super::reply::*;
use super::state::*;
use crate::args;

/// A queue with a bit of everything; returns its name.
pub fn populated(c: &mut redis::Connection) -> &'static str {
    enqueue_at(c, "q", &config("a", Some("user.1"), 100), 1000);
    enqueue_at(c, "q", &config("b", Some("user.1"), 100), 1001);
    enqueue_at(c, "q", &config("n", None, 50), 1002);
    immediate_at(c, "q", &config("i", Some("team.2"), 0), 1003);
    "q"
}

/// Build a queue with every kind of unit: collations (LIFO, several jobs
/// each), a released job (front reservation), immediate jobs, a job without
/// collation, leases, a delayed retry, a dead job, a result and a
/// cancelled lease.
pub fn rich_queue(c: &mut redis::Connection, q: &str) {
    for i in 0..9 {
        let coll = ["user.1", "user.2", "team.t"][i % 3];
        enqueue_job(c, q, &format!("r{i}"), Some(coll), i as i64 * 10);
    }
    enqueue_job(c, q, "plain", None, 5);
    immediate_job(c, q, "imm", Some("user.9"));
    for i in 0..6 {
        enqueue_job(c, q, &format!("w{i}"), Some("user.5"), 1000);
    }
    let a = held(q, &pop(c, q, LONG).unwrap());
    ok(c, &args!["ORCA.ACK", q, &a.key, &a.lease, "RESULT", "done"]);
    let b = held(q, &pop(c, q, LONG).unwrap());
    ok(c, &args!["ORCA.NACK", q, &b.key, &b.lease, "DELAY", LONG]);
    ok(c, &args!["CONFIG", "SET", "orca.max-attempts", "1"]);
    let d = held(q, &pop(c, q, LONG).unwrap());
    ok(c, &args!["ORCA.NACK", q, &d.key, &d.lease]);
    ok(c, &args!["CONFIG", "SET", "orca.max-attempts", "5"]);
    let e = held(q, &pop(c, q, LONG).unwrap());
    ok(c, &args!["ORCA.DELETE", q, &e.key]);
    pop(c, q, LONG).unwrap();
    pop(c, q, LONG).unwrap();
    enqueue_job(c, q, "plain2", None, 5000);
    immediate_job(c, q, "imm2", Some("team.t"));
    // Released last, so its reservation has a front (negative) tie.
    ok(c, &args!["ORCA.MOVE", q, key_of("w0"), "RELEASE"]);
    assert_check(c, q);
}

/// Fill `q` with `n` jobs through pipelines (half in 1000 collations).
pub fn fill(c: &mut redis::Connection, q: &str, n: usize) {
    let mut i = 0;
    while i < n {
        let mut p = redis::pipe();
        for j in i..(i + 5000).min(n) {
            let coll = if j % 2 == 0 {
                Some(format!("user.{}", j % 1000))
            } else {
                None
            };
            p.cmd("ORCA.ENQUEUE")
                .arg(q)
                .arg(config(&format!("big-{j}"), coll.as_deref(), (j % 7) as i64))
                .ignore();
        }
        p.query::<()>(c).expect("pipeline");
        i += 5000;
    }
}

//! Keyspace notifications: every command that changes a queue publishes its
//! event, in order, with the queue's key.

use std::time::Duration;

use crate::common::*;
use redis::Value;

#[test]
fn keyspace_events_in_order() {
    let (s, mut c) = start_server();
    config_set(&mut c, "notify-keyspace-events", "KEd");
    let mut sub = s.conn();
    let mut ev = Events::subscribe(&mut sub, "q");
    let q = "q";
    let (k1, k3, k4) = (key_of("j1"), key_of("j3"), key_of("j4"));

    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", q, config("j1", Some("user.1"), 0)],
    );
    ev.expect(&["orca.enqueue"], "ENQUEUE");
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", q, config("j1", Some("user.1"), 5)],
    );
    ev.expect(&["orca.update"], "ENQUEUE of an existing job");
    ok(&mut c, &args!["ORCA.IMMEDIATE", q, config("j2", None, 0)]);
    ev.expect(&["orca.immediate"], "IMMEDIATE");

    // Reads and failures publish nothing (checked by the next event).
    ok(&mut c, &args!["ORCA.LIST", q]);
    ok(&mut c, &args!["ORCA.STATUS", q, &k1]);
    ok(&mut c, &args!["ORCA.STATS", q]);
    ok(&mut c, &args!["ORCA.LEN", q]);
    ok(&mut c, &args!["ORCA.SETTINGS", q]);
    fails(&mut c, &args!["ORCA.ACK", q, &k1, "12345"]);
    fails(&mut c, &args!["ORCA.MOVE", q, key_of("zz"), "RELEASE"]);
    fails(&mut c, &args!["ORCA.ENQUEUE", q, "{}"]);

    let j = must_pop(&mut c, q, 60_000);
    ev.expect(&["orca.pop"], "POP");
    ok(
        &mut c,
        &args![
            "ORCA.EXTEND",
            q,
            text(&j, "key"),
            text(&j, "lease"),
            "60000"
        ],
    );
    ev.expect(&["orca.extend"], "EXTEND");
    ack_job(&mut c, q, &j, &[]);
    ev.expect(&["orca.ack"], "ACK");

    // NACK, and the retry brought back by the server timer.
    let j = must_pop(&mut c, q, 60_000);
    let kj = text(&j, "key");
    ev.expect(&["orca.pop"], "POP");
    nack_job(&mut c, q, &j, &["DELAY", "100"]);
    ev.expect(&["orca.nack"], "NACK");
    wait_for("the retry", Duration::from_secs(5), || {
        state(&mut c, q, &kj).as_deref() == Some("queued")
    });
    ev.expect(&["orca.retry"], "a due retry");

    // A lease the server timer expires.
    let j = must_pop(&mut c, q, 100);
    assert_eq!(text(&j, "key"), kj);
    ev.expect(&["orca.pop"], "POP LEASE 100");
    wait_for("the expiry", Duration::from_secs(5), || {
        state(&mut c, q, &kj).as_deref() == Some("queued")
    });
    ev.expect(&["orca.expire"], "an expired lease");

    // Third delivery fails with max-attempts 3: dead.
    config_set(&mut c, "orca.max-attempts", "3");
    let j = must_pop(&mut c, q, 60_000);
    assert_eq!(int(&j, "attempt"), 3);
    ev.expect(&["orca.pop"], "POP");
    assert_eq!(text(&nack_job(&mut c, q, &j, &[]), "outcome"), "dead");
    ev.expect(&["orca.nack", "orca.dead"], "a NACK to the dead list");
    ok(&mut c, &args!["ORCA.DEAD", q, "REQUEUE", &kj]);
    ev.expect(&["orca.requeue"], "DEAD REQUEUE");

    // Moves.
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", q, config("j3", Some("user.2"), 0)],
    );
    ev.expect(&["orca.enqueue"], "ENQUEUE");
    ok(&mut c, &args!["ORCA.MOVE", q, &k3, "DELAY"]);
    ev.expect(&["orca.delay"], "MOVE DELAY");
    ok(&mut c, &args!["ORCA.MOVE", q, &k3, "RELEASE"]);
    ev.expect(&["orca.release"], "MOVE RELEASE");

    // A lease expiring on its last attempt: dead by the timer.
    config_set(&mut c, "orca.max-attempts", "1");
    let j = must_pop(&mut c, q, 100);
    assert_eq!(text(&j, "key"), k3, "the released job is first");
    ev.expect(&["orca.pop"], "POP");
    wait_for(
        "the expiry to the dead list",
        Duration::from_secs(5),
        || state(&mut c, q, &k3).as_deref() == Some("dead"),
    );
    // The lease expired, then the job died: both, in that order.
    ev.expect(
        &["orca.expire", "orca.dead"],
        "a lease expiring into the dead list",
    );
    config_set(&mut c, "orca.max-attempts", "5");
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DEAD", q, "PURGE"])), 1);
    ev.expect(&["orca.purge"], "DEAD PURGE");

    let t = server_ms(&mut c);
    ok(
        &mut c,
        &args!["ORCA.REENQUEUE", q, config("j4", None, 0), t - 5],
    );
    ev.expect(&["orca.reenqueue"], "REENQUEUE");
    ok(&mut c, &args!["ORCA.SETTINGS", q, "ORDER", "FIFO"]);
    ev.expect(&["orca.settings"], "SETTINGS ORDER");

    // DELETE of a queued job and of a running one.
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", q, &k4])), 1);
    ev.expect(&["orca.delete"], "DELETE");
    let j = must_pop(&mut c, q, 60_000);
    ev.expect(&["orca.pop"], "POP");
    assert_eq!(
        as_int(&ok(&mut c, &args!["ORCA.DELETE", q, text(&j, "key")])),
        1
    );
    ev.expect(&["orca.delete"], "DELETE of a leased job");

    // Pop LEASE 0 of the last jobs, then a pop of an empty queue (nothing).
    while qlen(&mut c, q) > 0 {
        ok(&mut c, &args!["ORCA.POP", q, "LEASE", "0"]);
        ev.expect(&["orca.pop"], "POP LEASE 0");
    }
    assert_eq!(ok(&mut c, &args!["ORCA.POP", q]), Value::Nil);
    // A DELETE that removes nothing, then the sentinel.
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DELETE", q, &k1])), 0);
    ok(&mut c, &args!["ORCA.ENQUEUE", q, config("j2", None, 0)]);
    ev.expect(&["orca.enqueue"], "the final ENQUEUE");
    ev.expect_none(300, "the script");
}

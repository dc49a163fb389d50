//! A running cap per collation (`ORCA.SETTINGS ... MAXRUNNING <n>`):
//!
//! - the setting, its module default (`orca.max-running`), refusals;
//! - POP (and COUNT, MPOP) never hands out a job of a collation with `n`
//!   leased jobs: it takes the lowest reservation among the collations below
//!   their cap and the immediate jobs (never capped; their leases count for
//!   the collation they name), however many reservations the capped
//!   collation holds in front;
//! - STATUS `capped`, STATS `running`, LIST keeps the reservation order;
//! - a lease ending (ACK, NACK, expiry, DELETE) makes the collation
//!   eligible again, and wakes a blocked worker: one test per way;
//! - raising, lowering and removing the cap.

use std::collections::BTreeMap;

use crate::common::*;
use redis::Value;

#[test]
fn maxrunning_setting_default_and_refusals() {
    let s = Server::start_with(&["max-running", "3"], &[]);
    let mut c = s.conn();
    assert_eq!(int(&settings(&mut c, "a"), "maxrunning"), 3);
    enqueue_job(&mut c, "a", "x", Some("user.1"), 0);
    config_set(&mut c, "orca.max-running", 0);
    assert_eq!(
        int(&settings(&mut c, "a"), "maxrunning"),
        3,
        "existing queues keep theirs"
    );
    assert_eq!(int(&settings(&mut c, "b"), "maxrunning"), 0);
    assert_eq!(
        int(
            &set(&mut c, "a", &["MAXRUNNING", "4294967295"]),
            "maxrunning"
        ),
        4_294_967_295
    );
    assert_eq!(
        int(&set(&mut c, "a", &["maxrunning", "0"]), "maxrunning"),
        0
    );
    assert_settings_refused(
        &mut c,
        "a",
        &[
            (
                vec!["MAXRUNNING", "two"],
                "ERR MAXRUNNING must be an integer",
            ),
            (
                vec!["MAXRUNNING", "-1"],
                "ERR MAXRUNNING must be between 0 and 4294967295",
            ),
            (
                vec!["MAXRUNNING", "4294967296"],
                "ERR MAXRUNNING must be between 0 and 4294967295",
            ),
            (vec!["MAXRUNNING"], "ERR option MAXRUNNING needs 1 value(s)"),
            (
                vec!["MAXRUNNING", "1", "MAXRUNNING", "1"],
                "ERR option MAXRUNNING given twice",
            ),
        ],
    );
}

/// user.1: a1, a2, a3 (LIFO: a3 on the earliest reservation t), user.2:
/// b1, b2 (b2 on t+3), a job without collation s (t+5), an immediate job
/// i naming user.1 (t+6).
fn capped_queue(c: &mut Con, q: &str, t: i64, cap: &str) {
    set(c, q, &["MAXRUNNING", cap]);
    for (i, n) in ["a1", "a2", "a3"].iter().enumerate() {
        enqueue_at(c, q, &config(n, Some("user.1"), 0), t + i as i64);
    }
    enqueue_at(c, q, &config("b1", Some("user.2"), 0), t + 3);
    enqueue_at(c, q, &config("b2", Some("user.2"), 0), t + 4);
    enqueue_at(c, q, &config("s", None, 0), t + 5);
    immediate_at(c, q, &config("i", Some("user.1"), 0), t + 6);
}

fn name_of(f: &Fields) -> String {
    let k = text(f, "key");
    ["a1", "a2", "a3", "b1", "b2", "s", "i", "z"]
        .iter()
        .find(|n| key_of(n) == k)
        .map(|n| n.to_string())
        .unwrap_or(k)
}

#[test]
fn pop_skips_collations_at_their_cap() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    capped_queue(&mut c, q, t, "1");
    let mut got = Vec::new();
    let mut jobs = BTreeMap::new();
    while let Some(f) = pop_at(&mut c, q, LONG, t) {
        got.push(name_of(&f));
        jobs.insert(name_of(&f), f);
    }
    // a3 (t), then user.1 is at its cap: b2 (t+3), user.2 too: s, and the
    // immediate i of user.1 (never capped, its lease counts for user.1).
    assert_eq!(got, ["a3", "b2", "s", "i"]);
    assert_eq!(
        running_of(&stats(&mut c, q)),
        BTreeMap::from([("user.1".to_string(), 2), ("user.2".to_string(), 1)])
    );
    // The queue order is still the reservation order; STATUS says capped.
    assert_eq!(
        keys_and_releases(&list_all(&mut c, q)),
        vec![
            (key_of("a2"), t + 1),
            (key_of("a1"), t + 2),
            (key_of("b1"), t + 4)
        ]
    );
    for (name, pos) in [("a2", 1), ("a1", 2), ("b1", 3)] {
        let f = must_status(&mut c, q, &key_of(name));
        assert_eq!((int(&f, "position"), int(&f, "capped")), (pos, 1), "{name}");
    }
    // ACK of a3: user.1 still runs i, so it stays at its cap.
    ack_job(&mut c, q, &jobs["a3"], &[]);
    assert_eq!(pop_at(&mut c, q, LONG, t), None);
    assert_eq!(int(&must_status(&mut c, q, &key_of("a2")), "capped"), 1);
    // ACK of the immediate i: user.1 is below its cap again.
    ack_job(&mut c, q, &jobs["i"], &[]);
    assert_eq!(int(&must_status(&mut c, q, &key_of("a2")), "capped"), 0);
    assert_eq!(int(&must_status(&mut c, q, &key_of("b1")), "capped"), 1);
    assert_eq!(name_of(&must_pop_at(&mut c, q, LONG, t)), "a2");
    assert_eq!(pop_at(&mut c, q, LONG, t), None);
    assert_eq!(
        running_of(&stats(&mut c, q)),
        BTreeMap::from([("user.1".to_string(), 1), ("user.2".to_string(), 1)])
    );
    assert_check(&mut c, q);
}

#[test]
fn count_and_mpop_respect_the_cap() {
    let (_s, mut c, t) = start_pinned();
    capped_queue(&mut c, "q", t, "2");
    let v = ok(
        &mut c,
        &args!["ORCA.POP", "q", "COUNT", 10, "LEASE", LONG, "NOW", t],
    );
    let Value::Array(items) = v else {
        panic!("{v:?}")
    };
    let got: Vec<String> = items.into_iter().map(|v| name_of(&fields(v))).collect();
    // a3, a2 (user.1 at 2), b2, b1 (user.2 at 2), s, i.
    assert_eq!(got, ["a3", "a2", "b2", "b1", "s", "i"]);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("a1")), "capped"), 1);
    // A queue whose only jobs are capped hands out nothing; MPOP goes on
    // to the next queue.
    enqueue_at(&mut c, "other", &config("z", Some("user.1"), 0), t + 100);
    let f = mpop(&mut c, &["q", "other"], &args!["LEASE", LONG]).expect("a job from other");
    assert_eq!(
        (text(&f, "queue"), name_of(&f)),
        ("other".to_string(), "z".to_string())
    );
    assert_check(&mut c, "q");
}

#[test]
fn status_has_capped_only_under_a_cap_and_stats_show_running() {
    let (_s, mut c, t) = start_pinned();
    enqueue_at(&mut c, "q", &config("a1", Some("user.1"), 0), t);
    enqueue_at(&mut c, "q", &config("a2", Some("user.1"), 0), t + 1);
    let f = must_status(&mut c, "q", &key_of("a1"));
    assert!(!f.contains_key("capped"), "no cap, no field: {f:?}");
    must_pop_at(&mut c, "q", LONG, t);
    // STATS counts running jobs per collation with or without a cap.
    assert_eq!(
        running_of(&stats(&mut c, "q")),
        BTreeMap::from([("user.1".to_string(), 1)])
    );
    set(&mut c, "q", &["MAXRUNNING", "2"]);
    let f = must_status(&mut c, "q", &key_of("a1"));
    assert_eq!((text(&f, "state"), int(&f, "capped")), ("queued".into(), 0));
    set(&mut c, "q", &["MAXRUNNING", "1"]);
    assert_eq!(int(&must_status(&mut c, "q", &key_of("a1")), "capped"), 1);
    assert_eq!(pop_at(&mut c, "q", LONG, t), None);
    // Raising the cap makes it eligible at once; removing it too.
    set(&mut c, "q", &["MAXRUNNING", "2"]);
    must_pop_at(&mut c, "q", LONG, t);
    enqueue_at(&mut c, "q", &config("a3", Some("user.1"), 0), t + 2);
    assert_eq!(pop_at(&mut c, "q", LONG, t), None);
    set(&mut c, "q", &["MAXRUNNING", "0"]);
    assert!(!must_status(&mut c, "q", &key_of("a3")).contains_key("capped"));
    assert_eq!(name_of(&must_pop_at(&mut c, "q", LONG, t)), "a3");
    assert_eq!(
        running_of(&stats(&mut c, "q")),
        BTreeMap::from([("user.1".to_string(), 3)])
    );
    assert_check(&mut c, "q");
}

#[test]
fn a_capped_collation_with_many_reservations_in_front() {
    let (_s, mut c, t) = start_pinned();
    set(&mut c, "q", &["MAXRUNNING", "1"]);
    let mut p = redis::pipe();
    for i in 0..3000 {
        p.cmd("ORCA.ENQUEUE")
            .arg("q")
            .arg(config(&format!("big{i}"), Some("user.1"), 0))
            .arg("NOW")
            .arg(t + i)
            .ignore();
    }
    p.query::<()>(&mut c).expect("pipeline");
    enqueue_at(&mut c, "q", &config("other", Some("user.2"), 0), t + 5000);
    must_pop_at(&mut c, "q", LONG, t);
    let f = must_pop_at(&mut c, "q", LONG, t);
    assert_eq!(text(&f, "key"), key_of("other"));
    assert_eq!(pop_at(&mut c, "q", LONG, t), None);
    let f = must_status(&mut c, "q", &key_of("big0"));
    assert_eq!((int(&f, "capped"), int(&f, "position")), (1, 2999));
    assert_check(&mut c, "q");
}

/// Each way a lease ends makes the collation eligible for the next pop.
#[test]
fn a_lease_ending_makes_the_collation_eligible() {
    let (_s, mut c, t) = start_pinned();
    for how in ["ack", "nack", "expiry", "delete"] {
        let q = format!("q-{how}");
        set(&mut c, &q, &["MAXRUNNING", "1"]);
        enqueue_at(&mut c, &q, &config("a1", Some("user.1"), 0), t);
        enqueue_at(&mut c, &q, &config("a2", Some("user.1"), 0), t + 1);
        let j = must_pop_at(&mut c, &q, 1000, t);
        assert_eq!(pop_at(&mut c, &q, 1000, t), None, "{how}: capped");
        let next = match how {
            "ack" => {
                ack_job(&mut c, &q, &j, &[]);
                must_pop_at(&mut c, &q, 1000, t)
            }
            "nack" => {
                nack_job(&mut c, &q, &j, &["DELAY", "60000", "NOW", &t.to_string()]);
                must_pop_at(&mut c, &q, 1000, t)
            }
            // a2 comes back as immediate at its arrival (t + 1), after a1's
            // reservation of the same score.
            "expiry" => must_pop_at(&mut c, &q, 1000, t + 1000),
            _ => {
                assert_eq!(
                    as_int(&ok(&mut c, &args!["ORCA.DELETE", &q, text(&j, "key")])),
                    1
                );
                must_pop_at(&mut c, &q, 1000, t)
            }
        };
        // LIFO: a2 was popped first; after its lease ends, a1 is next.
        assert_eq!(text(&j, "key"), key_of("a2"), "{how}");
        assert_eq!(text(&next, "key"), key_of("a1"), "{how}");
        assert_eq!(
            running_of(&stats(&mut c, &q)),
            BTreeMap::from([("user.1".to_string(), 1)]),
            "{how}"
        );
        assert_check(&mut c, &q);
    }
}

/// A worker blocked on a queue whose only jobs are capped: a job of the
/// capped collation does not wake it; `end` ending the running lease does.
fn blocked_worker_woken_by(how: &str, lease_ms: i64, end: impl FnOnce(&mut Con, &Fields)) {
    let (s, mut c) = start_server();
    let q = "q";
    set(&mut c, q, &["MAXRUNNING", "1"]);
    enqueue(&mut c, q, &config("a1", Some("user.1"), 0));
    let j = must_pop(&mut c, q, lease_ms);
    let h = spawn_blocked(&s, args!["ORCA.POP", q, "BLOCK", 10_000, "LEASE", LONG]);
    wait_blocked(&mut c, 1);
    // (Priority 1000: a1 back from an expired lease sorts before it.)
    enqueue(&mut c, q, &config("a2", Some("user.1"), 1000));
    assert_eq!(blocked_clients(&mut c), 1, "{how}: woken by a capped job");
    end(&mut c, &j);
    let f = woken(h, how);
    let want = if how == "expiry" { "a1" } else { "a2" };
    assert_eq!(text(&f, "key"), key_of(want), "{how}");
    let running = if how == "a raised cap" { 2 } else { 1 };
    assert_eq!(
        running_of(&stats(&mut c, q)),
        BTreeMap::from([("user.1".to_string(), running)])
    );
    assert_check(&mut c, q);
}

#[test]
fn blocked_worker_woken_by_ack() {
    blocked_worker_woken_by("ack", LONG, |c, j| ack_job(c, "q", j, &[]));
}

#[test]
fn blocked_worker_woken_by_nack() {
    blocked_worker_woken_by("nack", LONG, |c, j| {
        nack_job(c, "q", j, &["DELAY", "600000"]);
    });
}

#[test]
fn blocked_worker_woken_by_expiry() {
    // The server's timer expires the lease; a1 comes back as immediate at
    // its arrival and is what the woken worker gets.
    blocked_worker_woken_by("expiry", 300, |_c, _j| {});
}

#[test]
fn blocked_worker_woken_by_delete() {
    blocked_worker_woken_by("delete", LONG, |c, j| {
        assert_eq!(
            as_int(&ok(c, &args!["ORCA.DELETE", "q", text(j, "key")])),
            1
        );
    });
}

/// Not in the list of wake-ups docs/commands.md gives for BLOCK, but what a
/// worker needs: a raised cap makes a capped job available at once.
#[test]
fn blocked_worker_woken_by_a_raised_cap() {
    blocked_worker_woken_by("a raised cap", LONG, |c, _j| {
        set(c, "q", &["MAXRUNNING", "2"]);
    });
}

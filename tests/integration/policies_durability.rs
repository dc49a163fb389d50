//! The policies are part of the queue: closed gates with held jobs, running
//! caps and leases, lifetimes, automatic-delay windows, dead-letter and
//! result bounds survive `DEBUG RELOAD`, a restart from RDB, a restart from
//! the AOF (its command stream, and a rewrite into `ORCA.IMPORT` blobs) and
//! reach a replica (by full sync and by the command stream), exactly: the
//! same digests, STATUS of every job, listings of every state, STATS and
//! pop order; and the reloaded server (or the replica) keeps behaving like a
//! control that never reloaded (the hidden state: windows, arrivals of held
//! jobs, running counts). CLOSE/OPEN/DROP, settings, expiry and automatic
//! delay inside MULTI/EXEC, and the timer's lifetime expiry, replicate and
//! replay to the same state.

use std::collections::BTreeMap;

use crate::common::*;
use redis::Value;

const QS: [&str; 2] = ["pol:lifo", "pol:fifo"];
const DAY: i64 = 86_400_000;

/// Every policy's state in two queues, on a pinned clock from `t` (far
/// ahead of the server's, so its timer changes nothing). Job names are
/// `j<n>`, which `observe` reads the STATUS of.
fn build(c: &mut Con, t: i64) {
    for (q, order) in [(QS[0], "LIFO"), (QS[1], "FIFO")] {
        set(
            c,
            q,
            &[
                "ORDER",
                order,
                "AUTODELAY",
                "600000",
                "1000",
                "CAP",
                "5000",
                "MAXRUNNING",
                "1",
                "LIFETIME",
                "86400000",
                "DEADMAX",
                "3",
                "DEADTTL",
                "172800000",
                "RESULTMAX",
                "2",
            ],
        );
        for g in ["g1", "g2", "empty"] {
            close_gate(c, q, g);
        }
        for i in 0..24i64 {
            let coll = [Some("user.1"), Some("user.2"), Some("team.1"), None][i as usize % 4];
            let name = format!("j{i}");
            let cfg = match i % 5 {
                0 => gated(&name, coll, 50, "g1"),
                3 => gated(&name, coll, 0, "g2"),
                _ => config(&name, coll, (i * 37) % 300),
            };
            let cmd = if i % 6 == 5 {
                "ORCA.IMMEDIATE"
            } else {
                "ORCA.ENQUEUE"
            };
            ok(c, &args![cmd, q, cfg, "NOW", t + i * 100]);
        }
        let at = |d: i64| (t + d).to_string();
        // Leases under the cap: one acked with a result, one NACKed for a
        // later retry, one still running; four dead letters (DEADMAX 3).
        let a = must_pop_at(c, q, DAY, t + 3000);
        must_pop_at(c, q, DAY, t + 3000);
        let d = must_pop_at(c, q, DAY, t + 3000);
        ack_job(
            c,
            q,
            &a,
            &["RESULT", "r-a", "TTL", "86400000", "NOW", &at(3100)],
        );
        nack_with(
            c,
            q,
            &text(&d, "key"),
            &text(&d, "lease"),
            &args!["DELAY", 500_000, "NOW", t + 3100],
        );
        for k in 0..4 {
            let j = must_pop_at(c, q, DAY, t + 3200 + k);
            let n = nack_with(
                c,
                q,
                &text(&j, "key"),
                &text(&j, "lease"),
                &args!["NOW", t + 3200 + k, "MAXATTEMPTS", 1],
            );
            assert_eq!(text(&n, "outcome"), "dead");
        }
        assert_check(c, q);
    }
    let st = stats(c, QS[0]);
    let counts = ["held", "leased", "delayed", "dead", "results"].map(|k| int(&st, k));
    assert_eq!(counts, [10, 1, 1, 3, 1], "{st:?}");
}

/// More of every policy on a pinned clock; the replies, shown.
fn more(c: &mut Con, t: i64) -> Vec<String> {
    let mut log = Vec::new();
    let mut note = |v: Value| log.push(format!("{v:?}"));
    for q in QS {
        // The windows hold submissions from `build`: these get delays.
        note(ok(
            c,
            &args![
                "ORCA.ENQUEUE",
                q,
                config("j40", Some("user.1"), 0),
                "NOW",
                t + 4000
            ],
        ));
        note(ok(
            c,
            &args![
                "ORCA.ENQUEUE",
                q,
                gated("j41", Some("team.1"), 0, "g1"),
                "NOW",
                t + 4001
            ],
        ));
        note(ok(
            c,
            &args!["ORCA.ENQUEUE", q, revised("j0", 9), "NOW", t + 4002],
        ));
        note(ok(c, &args!["ORCA.GATE", q, "g2", "DROP"]));
        note(ok(c, &args!["ORCA.GATE", q, "g1", "OPEN"]));
        for _ in 0..3 {
            note(ok(c, &args!["ORCA.POP", q, "LEASE", DAY, "NOW", t + 5000]));
        }
        // MPOP, then ACK ... NEXT and NACK ... NEXT (replicated as their
        // two halves).
        let mut job = ok(
            c,
            &args!["ORCA.MPOP", 2, "pol:none", q, "LEASE", DAY, "NOW", t + 5000],
        );
        for (cmd, opt) in [("ORCA.ACK", "RESULT"), ("ORCA.NACK", "DELAY")] {
            note(job.clone());
            if job == Value::Nil {
                break;
            }
            let f = fields(job);
            job = ok(
                c,
                &args![
                    cmd,
                    q,
                    text(&f, "key"),
                    text(&f, "lease"),
                    opt,
                    "0",
                    "NOW",
                    t + 5001,
                    "NEXT",
                    "LEASE",
                    DAY
                ],
            );
        }
        note(job);
        // Lifetimes run out a day after release; dead letters two days
        // after they died.
        note(ok(c, &args!["ORCA.TICK", q, "NOW", t + DAY + 2000]));
        note(ok(c, &args!["ORCA.TICK", q, "NOW", t + DAY + 3150]));
        note(ok(c, &args!["ORCA.TICK", q, "NOW", t + 2 * DAY + 3300]));
        note(ok(c, &args!["ORCA.LIST", q, "STATE", "DEAD"]));
    }
    log
}

/// What is compared: `observe` (STATUS of every job, digests, pop order on
/// a copy) and the policy state (STATS, listings of every state).
fn assert_same_as(c: &mut Con, want: &(Observed, BTreeMap<String, String>), what: &str) {
    assert_observes(c, &QS, &want.0, what);
    assert_same(what, &want.1, &policy_state(c, &QS));
}

fn observe_all(c: &mut Con) -> (Observed, BTreeMap<String, String>) {
    (observe(c, &QS), policy_state(c, &QS))
}

/// The control: `build`, observed; `more`, its replies and observed.
struct Control {
    t: i64,
    built: (Observed, BTreeMap<String, String>),
    log: Vec<String>,
    after: (Observed, BTreeMap<String, String>),
}

fn control() -> Control {
    let (_s, mut c) = start_server();
    let t = future_base(&mut c);
    build(&mut c, t);
    let built = observe_all(&mut c);
    let log = more(&mut c, t);
    let after = observe_all(&mut c);
    Control {
        t,
        built,
        log,
        after,
    }
}

/// Build on `s`, reload it with `reload`, and check it shows what the
/// control showed, then behaves like it.
fn survives(how: &str, s: &mut Server, reload: impl FnOnce(&mut Server)) {
    let ctl = control();
    let mut c = s.conn();
    build(&mut c, ctl.t);
    assert_same_as(&mut c, &ctl.built, &format!("before {how}"));
    drop(c);
    reload(s);
    let mut c = s.conn();
    assert_same_as(&mut c, &ctl.built, &format!("after {how}"));
    assert_eq!(more(&mut c, ctl.t), ctl.log, "replies after {how}");
    assert_same_as(&mut c, &ctl.after, &format!("more work after {how}"));
}

#[test]
fn policies_survive_debug_reload() {
    let mut s = Server::start(&[]);
    survives("DEBUG RELOAD", &mut s, |s| {
        ok(&mut s.conn(), &args!["DEBUG", "RELOAD"]);
    });
}

#[test]
fn policies_survive_an_rdb_restart() {
    let mut s = Server::start(&[]);
    survives("an RDB restart", &mut s, Server::restart);
}

#[test]
fn policies_survive_an_aof_restart() {
    // The AOF's command stream (the replicated forms), replayed on start.
    let mut s = Server::start(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    survives("an AOF restart", &mut s, Server::restart);
}

#[test]
fn policies_survive_an_aof_rewrite_into_imports() {
    let mut s = Server::start(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    survives("an AOF rewrite and restart", &mut s, |s| {
        let mut c = s.conn();
        ok(&mut c, &args!["BGREWRITEAOF"]);
        wait_aof_rewrite_idle(&mut c);
        let (_, base) = aof_base(&s.dir).expect("a base file");
        assert!(
            base.windows(11).any(|w| w == b"ORCA.IMPORT"),
            "the rewrite has no ORCA.IMPORT"
        );
        drop(c);
        s.restart();
    });
}

#[test]
fn policies_reach_replicas_by_full_sync_and_by_stream() {
    let ctl = control();
    let master = Server::start(&[]);
    let streamed = master.start_replica(&[], &[]);
    let mut m = master.conn();
    build(&mut m, ctl.t);
    let synced = master.start_replica(&[], &[]);
    for r in [&streamed, &synced] {
        assert_replica_equal(&master, r);
        assert_same(
            "replica policy state",
            &ctl.built.1,
            &policy_state(&mut r.conn(), &QS),
        );
    }
    assert_eq!(more(&mut m, ctl.t), ctl.log);
    for r in [&streamed, &synced] {
        assert_replica_equal(&master, r);
        assert_same(
            "replica policy state after more",
            &ctl.after.1,
            &policy_state(&mut r.conn(), &QS),
        );
    }
}

/// Replicas and AOF replay reach the master's state after unpinned policy
/// commands inside MULTI/EXEC and the timer's lifetime expiry.
#[test]
fn policies_in_multi_and_timer_expiry_replicate_and_replay() {
    let master = Server::start(&["--appendonly", "yes"]);
    // A replica with other module defaults builds the same queues.
    let replica = master.start_replica(
        &[
            "job-lifetime",
            "5",
            "max-running",
            "7",
            "autodelay-window",
            "1000",
            "autodelay-step",
            "9",
            "dead-max",
            "1",
        ],
        &[],
    );
    let mut c = master.conn();
    ok(&mut c, &args!["MULTI"]);
    for a in [
        args![
            "ORCA.SETTINGS",
            "m",
            "AUTODELAY",
            600_000,
            1000,
            "LIFETIME",
            3_600_000,
            "MAXRUNNING",
            1
        ],
        args!["ORCA.GATE", "m", "g", "CLOSE"],
        args!["ORCA.ENQUEUE", "m", gated("j1", Some("user.1"), 0, "g")],
        args!["ORCA.ENQUEUE", "m", config("j2", Some("user.1"), 0)],
        args!["ORCA.ENQUEUE", "m", config("j3", Some("user.1"), 0)],
        args!["ORCA.GATE", "m", "g", "OPEN"],
        args!["ORCA.GATE", "m", "g2", "CLOSE"],
        args!["ORCA.ENQUEUE", "m", gated("j4", None, 0, "g2")],
        args!["ORCA.GATE", "m", "g2", "DROP"],
        args!["ORCA.POP", "m", "LEASE", 600_000],
        args!["ORCA.POP", "m", "LEASE", 600_000],
    ] {
        assert_eq!(ok(&mut c, &a), Value::SimpleString("QUEUED".into()));
    }
    let Value::Array(r) = ok(&mut c, &args!["EXEC"]) else {
        panic!("EXEC")
    };
    assert_eq!(int(&fields(r[0].clone()), "maxrunning"), 1);
    assert_eq!(
        (r[1].clone(), r[5].clone(), r[6].clone()),
        (Value::Int(1), Value::Int(1), Value::Int(1))
    );
    let held = fields(r[2].clone());
    assert_eq!(
        (text(&held, "state"), int(&held, "delay")),
        ("held".into(), 0)
    );
    // j1 (held) is a submission: j2 and j3 get 1 and 2 steps.
    assert_eq!(int(&fields(r[3].clone()), "delay"), 1000);
    assert_eq!(int(&fields(r[4].clone()), "delay"), 2000);
    assert_eq!(
        r[8],
        Value::Array(vec![Value::BulkString(
            gated("j4", None, 0, "g2").into_bytes()
        )])
    );
    // One pop of user.1, then its cap: the second pop gives nil.
    let first = fields(r[9].clone());
    assert_eq!(text(&first, "collation"), "user.1");
    assert_eq!(r[10], Value::Nil);

    // Expiry inside MULTI: an old job, a lifetime, a tick.
    let old = server_ms(&mut c) - 60_000;
    ok(&mut c, &args!["MULTI"]);
    ok(
        &mut c,
        &args!["ORCA.ENQUEUE", "x", config("j5", None, 0), "NOW", old],
    );
    ok(&mut c, &args!["ORCA.SETTINGS", "x", "LIFETIME", 1000]);
    ok(&mut c, &args!["ORCA.TICK", "x"]);
    let Value::Array(r) = ok(&mut c, &args!["EXEC"]) else {
        panic!("EXEC")
    };
    assert_eq!(int(&fields(r[2].clone()), "lifetime"), 1, "{r:?}");

    // The timer's expiry, with nobody touching the queue.
    let before = orca_info(&mut c, "orca_lifetime_expired");
    set(&mut c, "t", &["LIFETIME", "200"]);
    enqueue_job(&mut c, "t", "j6", Some("user.2"), 0);
    close_gate(&mut c, "t", "g");
    enqueue(&mut c, "t", &gated("j7", None, 0, "g"));
    wait_orca_info(&mut c, "orca_lifetime_expired", before + 2, 20);
    assert_eq!(state(&mut c, "t", &key_of("j7")).as_deref(), Some("dead"));

    assert_replica_equal(&master, &replica);
    let mut rc = replica.conn();
    assert_same(
        "replica",
        &policy_state(&mut c, &["m", "x", "t"]),
        &policy_state(&mut rc, &["m", "x", "t"]),
    );
    assert_eq!(int(&stats(&mut rc, "t"), "dead"), 2);
    // The AOF replays to the same dataset.
    let d = dataset_digests(&mut c);
    ok(&mut c, &args!["DEBUG", "LOADAOF"]);
    assert_same("after DEBUG LOADAOF", &d, &dataset_digests(&mut c));
}

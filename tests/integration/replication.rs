//! Replication: a replica follows its master exactly (random workloads,
//! replicas with other module settings, leases, ACKs, NACKs, EXTEND and
//! timer-driven expiry), reads work on a replica, and a replica takes over
//! after a failover with every lease intact.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::common::*;
use redis::Value;

#[test]
fn replica_matches_master_random_workload() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    setup_orders(&mut m);
    // Some state before the replica attaches (it arrives by RDB).
    Workload::new(31, false, &WORKLOAD_QUEUES).run(&mut m, 100);
    let replica = master.start_replica(&[], &[]);
    assert_replica_equal(&master, &replica);
    // Then a stream of commands, unpinned: the server clock, the master's
    // settings (changed on the way) and scripts / transactions.
    let mut w = Workload::new(32, false, &["q0", "q1", "q2", "q3", "q4"]);
    w.run(&mut m, 400);
    assert_replica_equal(&master, &replica);
    // The replica refuses writes.
    let mut r = replica.conn();
    let e = fails(&mut r, &args!["ORCA.ENQUEUE", "q0", config("x", None, 0)]);
    assert!(e.starts_with("READONLY"), "{e}");
    // A second replica started now gets everything by full sync.
    let late = master.start_replica(&[], &[]);
    assert_replica_equal(&master, &late);
}

#[test]
fn replica_with_other_settings_matches_master() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    enqueue_job(&mut m, "early", "a", Some("user.1"), 0);
    let replica = master.start_replica(
        &["move-to-back-buffer", "5000", "default-order", "fifo"],
        &[],
    );
    let mut r = replica.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("orca.*")
        .query(&mut r)
        .unwrap();
    let got: BTreeMap<_, _> = got
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    assert_eq!(
        got.get("orca.move-to-back-buffer").map(String::as_str),
        Some("5000"),
        "{got:?}"
    );
    assert_eq!(
        got.get("orca.default-order").map(String::as_str),
        Some("fifo"),
        "{got:?}"
    );

    // Queues created after the replica attached, by each kind of put, with
    // the master's default order (LIFO) and DELAY with the master's buffer.
    for (i, cmd) in ["ORCA.ENQUEUE", "ORCA.IMMEDIATE"].iter().enumerate() {
        let q = format!("new{i}");
        for n in ["a", "b", "c"] {
            ok(&mut m, &args![*cmd, &q, config(n, Some("user.1"), 10)]);
        }
    }
    ok(
        &mut m,
        &args![
            "ORCA.REENQUEUE",
            "new2",
            config("a", Some("user.1"), 0),
            "5"
        ],
    );
    for n in ["b", "c", "d"] {
        enqueue_job(&mut m, "new2", n, Some("user.1"), 0);
    }
    ok(&mut m, &args!["ORCA.MOVE", "new2", key_of("b"), "DELAY"]);
    ok(&mut m, &args!["ORCA.MOVE", "new2", key_of("c"), "RELEASE"]);
    enqueue_job(&mut m, "early", "b", Some("user.1"), 0);
    ok(&mut m, &args!["ORCA.MOVE", "early", key_of("a"), "DELAY"]);
    assert_replica_equal(&master, &replica);

    // And a random workload on top.
    setup_orders(&mut m);
    Workload::new(41, false, &["q0", "q1", "q2", "q3", "new0", "new2"]).run(&mut m, 400);
    assert_replica_equal(&master, &replica);
}

/// Inspection works on replicas: `ORCA.SETTINGS <queue>` without `ORDER`
/// only reads, like ORCA.STATUS / ORCA.LEN / ORCA.CHECK.
#[test]
fn settings_are_readable_on_a_replica() {
    let master = Server::start(&[]);
    let mut m = master.conn();
    ok(&mut m, &args!["ORCA.SETTINGS", "q", "ORDER", "FIFO"]);
    enqueue_job(&mut m, "q", "a", Some("user.1"), 0);
    let replica = master.start_replica(&[], &[]);
    let mut r = replica.conn();
    assert_eq!(as_int(&ok(&mut r, &args!["ORCA.LEN", "q"])), 1);
    assert_check(&mut r, "q");
    assert!(ok(&mut r, &args!["ORCA.STATUS", "q", key_of("a")]) != Value::Nil);
    // ORCA.SETTINGS is a write command (it sets and may create a queue),
    // so a replica refuses it like any write; the read-only ORCA.STATS
    // carries the order there.
    let e = fails(&mut r, &args!["ORCA.SETTINGS", "q"]);
    assert!(e.contains("READONLY"), "{e}");
    let st = fields(ok(&mut r, &args!["ORCA.STATS", "q"]));
    assert_eq!(as_string(get(&st, "order")), "fifo");
    assert_eq!(as_int(get(&st, "queued")), 1);
}

fn wait1(c: &mut redis::Connection) {
    let n = as_int(&ok(c, &args!["WAIT", 1, 5000]));
    assert_eq!(n, 1, "WAIT 1 5000 gave {n}");
}

/// A replica that refuses a command of its master's stream (wrong arity,
/// unknown option, ...) silently diverges: Redis only logs it.
fn assert_replica_accepted_everything(replica: &Server) {
    let log = replica.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sending an error to its master"))
        .collect();
    assert!(
        refused.is_empty(),
        "the replica refused replicated commands:\n{}",
        refused.join("\n")
    );
}

/// The smallest reproduction of a replica refusing its master's stream:
/// `ORCA.EXTEND` is replicated with `NOW <ms>` pinned.
#[test]
fn replica_applies_orca_extend() {
    let master = Server::start(&[]);
    let replica = master.start_replica(&[], &[]);
    let (mut m, mut r) = (master.conn(), replica.conn());
    enqueue_job(&mut m, "x", "job", None, 0);
    let h = held("x", &pop(&mut m, "x", LONG).unwrap());
    let deadline = as_int(&ok(
        &mut m,
        &args!["ORCA.EXTEND", "x", &h.key, &h.lease, 2 * LONG],
    ));
    wait1(&mut m);
    sync_replica(&master, &replica);
    assert_replica_accepted_everything(&replica);
    assert_eq!(
        digest(&mut r, "x"),
        digest(&mut m, "x"),
        "the replica missed the EXTEND"
    );
    let st = fields(ok(&mut r, &args!["ORCA.STATUS", "x", &h.key]));
    assert_eq!(int(&st, "deadline"), deadline);
}

/// A heartbeat on the master reaches the replica. (Fails while the
/// replicated `ORCA.EXTEND ... NOW <ms>` is refused by the replica for its
/// arity: the replica logs "== CRITICAL == This replica is sending an error
/// to its master: 'wrong number of arguments for 'orca.extend' command'" and
/// keeps the old deadline.)
#[test]
fn extend_reaches_the_replica() {
    let m = Server::start(&[]);
    let r = m.start_replica(&[], &[]);
    let mut c = m.conn();
    let mut rc = r.conn();
    let ka = key_of("a");
    let p = leased(&mut c, "q", "a", 60_000);
    let d = as_int(&ok(
        &mut c,
        &args!["ORCA.EXTEND", "q", &ka, lease(&p), 600_000],
    ));
    sync_replica(&m, &r);
    let st = must_status(&mut rc, "q", &ka);
    assert_eq!(int(&st, "deadline"), d, "the replica kept the old deadline");
    assert_eq!(digest(&mut c, "q"), digest(&mut rc, "q"));
    assert!(
        !r.log()
            .contains("This replica is sending an error to its master"),
        "replica refused a replicated command:\n{}",
        r.log()
    );
}

/// The master and the replica show the same worker state of `keys` in `q`.
fn assert_same_view(m: &mut Con, r: &mut Con, q: &str, keys: &[String]) {
    let (a, b) = (observe(m, q, keys), observe(r, q, keys));
    let diff: Vec<String> = a
        .lines()
        .zip(b.lines())
        .filter(|(x, y)| x != y)
        .map(|(x, y)| format!("master:  {x}\nreplica: {y}"))
        .collect();
    assert!(diff.is_empty(), "{q} differs:\n{}", diff.join("\n"));
}

/// Everything observable of the worker state of `keys` in `q` by read-only
/// commands (ORCA.DEAD is a write command: a replica refuses even LIST).
fn observe(c: &mut Con, q: &str, keys: &[String]) -> String {
    let mut out = format!("len={}\n", qlen(c, q));
    for k in keys {
        out.push_str(&format!(
            "{k}: {:?} result={:?}\n",
            raw(c, &args!["ORCA.STATUS", q, k]),
            raw(c, &args!["ORCA.RESULT", q, k])
        ));
    }
    out
}

#[test]
fn replica_follows_leases_acks_nacks_and_expiry() {
    let m = Server::start_with(&["retry-base", "100", "max-attempts", "3"], &[]);
    let r = m.start_replica(&[], &[]);
    let mut c = m.conn();
    let mut rc = r.conn();
    let q = "wq";
    let names: Vec<String> = (0..16).map(|i| format!("job{i}")).collect();
    let keys: Vec<String> = names.iter().map(|n| key_of(n)).collect();
    for (i, n) in names.iter().enumerate() {
        let coll = format!("user.{}", i % 3);
        let coll = (i % 4 != 0).then_some(coll.as_str());
        enqueue(&mut c, q, &config(n, coll, (i as i64 % 5) * 10));
    }
    let pop_lease = |c: &mut Con, lease_ms: i64| -> Fields {
        pop_with(c, q, &args!["LEASE", lease_ms]).expect("a job")
    };
    // acked with a result
    let f = pop_lease(&mut c, 60_000);
    let done_key = text(&f, "key");
    ok(
        &mut c,
        &args!["ORCA.ACK", q, &done_key, lease(&f), "RESULT", "done"],
    );
    // acked without
    let f = pop_lease(&mut c, 60_000);
    must_ack(&mut c, q, &text(&f, "key"), &lease(&f));
    // nacked: the timer brings it back after 100 ms
    let retried = pop_lease(&mut c, 60_000);
    ok(
        &mut c,
        &args!["ORCA.NACK", q, text(&retried, "key"), lease(&retried)],
    );
    // a short lease the timer expires
    let expired = pop_lease(&mut c, 150);
    // another long lease (EXTEND replication has its own test)
    pop_lease(&mut c, 120_000);
    // dead
    let f = pop_lease(&mut c, 60_000);
    ok(
        &mut c,
        &args!["ORCA.NACK", q, text(&f, "key"), lease(&f), "MAXATTEMPTS", 1],
    );
    // cancelled while leased
    let f = pop_lease(&mut c, 60_000);
    ok(&mut c, &args!["ORCA.DELETE", q, text(&f, "key")]);
    // at-most-once
    pop_lease(&mut c, 0);
    // left leased; left delayed
    pop_lease(&mut c, 120_000);
    let f = pop_lease(&mut c, 60_000);
    ok(
        &mut c,
        &args!["ORCA.NACK", q, text(&f, "key"), lease(&f), "DELAY", 120_000],
    );
    // a result the timer forgets after 200 ms
    let f = pop_lease(&mut c, 60_000);
    let brief_key = text(&f, "key");
    ok(
        &mut c,
        &args![
            "ORCA.ACK",
            q,
            &brief_key,
            lease(&f),
            "RESULT",
            "brief",
            "TTL",
            200
        ],
    );
    // dead, then requeued
    let f = pop_lease(&mut c, 60_000);
    let requeued_key = text(&f, "key");
    ok(
        &mut c,
        &args!["ORCA.NACK", q, &requeued_key, lease(&f), "MAXATTEMPTS", 1],
    );
    ok(&mut c, &args!["ORCA.DEAD", q, "REQUEUE", &requeued_key]);
    // failed, back at once
    let f = pop_lease(&mut c, 60_000);
    ok(
        &mut c,
        &args!["ORCA.NACK", q, text(&f, "key"), lease(&f), "DELAY", 0],
    );
    // a blocked pop on another queue, woken by an enqueue
    let h = spawn_blocked(&m, args!["ORCA.POP", "wq2", "BLOCK", 5000]);
    wait_blocked(&mut c, 1);
    enqueue(&mut c, "wq2", &config("blocked", None, 0));
    enqueue(&mut c, "wq2", &config("stays", None, 0));
    enqueue(&mut c, "wq2", &config("purged", None, 0));
    let bf = fields(joined(h).0);
    assert_eq!(text(&bf, "key"), key_of("blocked"));
    // a purged dead job there
    let mut f = pop_with(&mut c, "wq2", &args!["LEASE", 60_000]).expect("a job");
    if text(&f, "key") != key_of("purged") {
        f = pop_with(&mut c, "wq2", &args!["LEASE", 60_000]).expect("purged");
        let stays = pop_with(&mut c, "wq2", &[]);
        assert_eq!(stays, None, "only stays was left; it is leased now");
    }
    assert_eq!(text(&f, "key"), key_of("purged"));
    ok(
        &mut c,
        &args![
            "ORCA.NACK",
            "wq2",
            text(&f, "key"),
            lease(&f),
            "MAXATTEMPTS",
            1
        ],
    );
    assert_eq!(as_int(&ok(&mut c, &args!["ORCA.DEAD", "wq2", "PURGE"])), 1);

    // Wait for the timer: the retry and the expiry come back by themselves.
    let (kr, ke) = (text(&retried, "key"), text(&expired, "key"));
    wait_for(
        "retry and expiry on the master",
        Duration::from_secs(10),
        || {
            state(&mut c, q, &kr).as_deref() == Some("queued")
                && state(&mut c, q, &ke).as_deref() == Some("queued")
                && result(&mut c, q, &brief_key).is_none()
        },
    );
    assert_eq!(int(&must_status(&mut c, q, &ke), "attempts"), 1);
    assert_eq!(int(&must_status(&mut c, q, &kr), "attempts"), 1);
    // More pops after the ticks, so the replica sees those too.
    pop_lease(&mut c, 120_000);
    let g = pop_lease(&mut c, 120_000);
    must_ack(&mut c, q, &text(&g, "key"), &lease(&g));

    sync_replica(&m, &r);
    for key in [q, "wq2"] {
        assert_eq!(digest(&mut c, key), digest(&mut rc, key), "digest of {key}");
        assert_check(&mut rc, key);
    }
    let mut all_keys = keys.clone();
    all_keys.push(key_of("blocked"));
    assert_same_view(&mut c, &mut rc, q, &all_keys);
    assert_same_view(
        &mut c,
        &mut rc,
        "wq2",
        &[key_of("blocked"), key_of("stays"), key_of("purged")],
    );
    // The timer's forgetting of the short result reached the replica too
    // (the replica reads with its own clock, so check the stored state).
    assert_eq!(result(&mut rc, q, &brief_key), None);
    assert!(
        status(&mut rc, q, &requeued_key).is_some(),
        "the requeued job is gone"
    );
    // The replica does not tick by itself, and refuses worker writes.
    let e = fails(&mut rc, &args!["ORCA.POP", q]);
    assert!(e.starts_with("READONLY"), "{e}");

    // DEBUG RELOAD on the master keeps leases, delayed, dead and results.
    let short = pop_lease(&mut c, 1500);
    let ks = text(&short, "key");
    let before_digest = digest(&mut c, q);
    let before = observe(&mut c, q, &all_keys);
    let dead_before = raw(&mut c, &args!["ORCA.DEAD", q, "LIST"]);
    ok(&mut c, &args!["DEBUG", "RELOAD"]);
    assert_eq!(
        digest(&mut c, q),
        before_digest,
        "digest changed by DEBUG RELOAD"
    );
    assert_eq!(observe(&mut c, q, &all_keys), before);
    assert_eq!(raw(&mut c, &args!["ORCA.DEAD", q, "LIST"]), dead_before);
    assert_check(&mut c, q);
    let states: Vec<Option<String>> = keys.iter().map(|k| state(&mut c, q, k)).collect();
    for s in ["leased", "delayed", "dead"] {
        assert!(
            states.iter().any(|x| x.as_deref() == Some(s)),
            "no {s} job: {states:?}"
        );
    }
    assert_eq!(
        result(&mut c, q, &done_key).as_deref(),
        Some(b"done".as_slice())
    );
    // The reloaded lease still expires (timer), and the replica follows.
    wait_for(
        "the reloaded lease to expire",
        Duration::from_secs(10),
        || state(&mut c, q, &ks).as_deref() == Some("queued"),
    );
    assert_err(
        &mut c,
        &args!["ORCA.ACK", q, &ks, lease(&short)],
        LEASE_NOT_HELD,
    );
    sync_replica(&m, &r);
    assert_eq!(
        digest(&mut c, q),
        digest(&mut rc, q),
        "digest after reload + expiry"
    );
    assert_same_view(&mut c, &mut rc, q, &all_keys);
    // And DEBUG RELOAD on the replica keeps its copy identical.
    let rd = digest(&mut rc, q);
    ok(&mut rc, &args!["DEBUG", "RELOAD"]);
    assert_eq!(digest(&mut rc, q), rd);
    assert_check(&mut rc, q);
    assert_check(&mut c, q);
}

/// `ORCA.POP <q> BLOCK <ms> LEASE <lease>` on its own connection and thread.
fn blocking_pop(
    port: u16,
    q: &str,
    block: i64,
    lease: i64,
) -> std::thread::JoinHandle<Option<Fields>> {
    let q = q.to_string();
    std::thread::spawn(move || {
        let mut c = connect(port);
        match ok(
            &mut c,
            &args!["ORCA.POP", &q, "BLOCK", block, "LEASE", lease],
        ) {
            Value::Nil => None,
            v => Some(fields(v)),
        }
    })
}

/// A seeded mix of every write, with short leases and retries left to the
/// master's timer. Returns the long leases still held and those cancelled.
fn replicated_workload(c: &mut redis::Connection, seed: u64, ops: usize) -> (Vec<Held>, Vec<Held>) {
    let mut rng = Rng::new(seed);
    let queues = ["rq:0", "rq:1", "rq:2", "rq:3", "rq:4", "rq:5"];
    let colls = [
        Some("user.1"),
        Some("user.2"),
        Some("user.3"),
        Some("team.a"),
        None,
    ];
    let mut holding: Vec<(Held, bool)> = Vec::new();
    let mut cancelled: Vec<Held> = Vec::new();
    ok(c, &args!["ORCA.SETTINGS", "rq:1", "ORDER", "FIFO"]);
    for n in 0..ops {
        let q = *rng.pick(&queues);
        let name = format!("j{}", rng.below(60));
        let r = rng.below(100);
        let v = if r < 28 {
            raw(
                c,
                &args![
                    "ORCA.ENQUEUE",
                    q,
                    config(&name, *rng.pick(&colls), rng.below(3000) as i64)
                ],
            )
        } else if r < 34 {
            raw(
                c,
                &args!["ORCA.IMMEDIATE", q, config(&name, *rng.pick(&colls), 0)],
            )
        } else if r < 37 {
            raw(
                c,
                &args![
                    "ORCA.REENQUEUE",
                    q,
                    config(&name, *rng.pick(&colls), 0),
                    1_000 + n as i64
                ],
            )
        } else if r < 41 {
            let how = if rng.chance(50) { "RELEASE" } else { "DELAY" };
            raw(c, &args!["ORCA.MOVE", q, key_of(&name), how])
        } else if r < 44 {
            let v = raw(c, &args!["ORCA.DELETE", q, key_of(&name)]);
            // Deleting a running job cancels its leases.
            let key = key_of(&name);
            holding.retain(|(h, long)| {
                let hit = h.q == q && h.key == key;
                if hit && *long {
                    cancelled.push(h.clone());
                }
                !hit
            });
            v
        } else if r < 64 {
            let long = rng.chance(60);
            let lease = if long {
                LONG
            } else {
                50 + rng.below(400) as i64
            };
            let count = 1 + rng.below(2) as i64;
            let v = raw(c, &args!["ORCA.POP", q, "LEASE", lease, "COUNT", count]);
            if let Value::Array(jobs) = &v {
                for j in jobs {
                    holding.push((held(q, &fields(j.clone())), long));
                }
            }
            v
        } else if r < 92 && !holding.is_empty() {
            let i = rng.below(holding.len() as u64) as usize;
            let (h, long) = holding[i].clone();
            let r2 = rng.below(100);
            let v = if r2 < 45 {
                let mut a = args!["ORCA.ACK", &h.q, &h.key, &h.lease];
                if rng.chance(50) {
                    a.extend(args!["RESULT", format!("result {n}")]);
                }
                raw(c, &a)
            } else if r2 < 85 {
                raw(
                    c,
                    &args![
                        "ORCA.NACK",
                        &h.q,
                        &h.key,
                        &h.lease,
                        "DELAY",
                        20 + rng.below(300) as i64
                    ],
                )
            } else {
                raw(
                    c,
                    &args![
                        "ORCA.EXTEND",
                        &h.q,
                        &h.key,
                        &h.lease,
                        if long { LONG } else { 300 }
                    ],
                )
            };
            if r2 < 85 {
                holding.swap_remove(i);
            }
            v
        } else if r < 94 {
            let order = if rng.chance(50) { "FIFO" } else { "LIFO" };
            raw(c, &args!["ORCA.SETTINGS", q, "ORDER", order])
        } else if r < 96 {
            // Master-only setting: replicas learn the pinned threshold.
            let n = if rng.chance(50) { "2" } else { "5" };
            raw(c, &args!["CONFIG", "SET", "orca.max-attempts", n])
        } else if r < 98 {
            let dead = ok(c, &args!["ORCA.DEAD", q, "LIST"]);
            match dead {
                Value::Array(items) if !items.is_empty() => {
                    let key = text(&fields(items[0].clone()), "key");
                    raw(c, &args!["ORCA.DEAD", q, "REQUEUE", key])
                }
                v => v,
            }
        } else {
            raw(c, &args!["ORCA.TICK", q])
        };
        if let Some(e) = error_text(&v) {
            let refused = ERR_CODES.iter().any(|p| e.starts_with(p));
            assert!(
                refused && !e.starts_with("INVARIANT "),
                "unexpected error {e}"
            );
        }
    }
    let long = holding
        .into_iter()
        .filter(|(_, long)| *long)
        .map(|(h, _)| h)
        .collect();
    (long, cancelled)
}

/// Wait until the master's timer has nothing short left to do: digests
/// stable over a while.
fn settle(c: &mut redis::Connection) -> BTreeMap<String, String> {
    std::thread::sleep(Duration::from_millis(700));
    let mut last = digests(c);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(400));
        let now = digests(c);
        if now == last {
            return now;
        }
        assert!(Instant::now() < deadline, "queues never settle");
        last = now;
    }
}

#[test]
fn replica_follows_master_then_takes_over() {
    let mut master = Server::start(&[]);
    let replica = master.start_replica(&[], &[]);
    let mut m = master.conn();
    let mut r = replica.conn();

    // Blocking pops served later: by an enqueue, by an expired lease (the
    // timer), by a due retry.
    let t1 = blocking_pop(master.port, "rq:blk", 5000, LONG);
    let t2 = blocking_pop(master.port, "rq:blk", 5000, LONG);
    wait_blocked(&mut m, 2);
    enqueue_job(&mut m, "rq:blk", "b1", None, 0);
    enqueue_job(&mut m, "rq:blk", "b2", Some("user.1"), 0);
    let (f1, f2) = (
        t1.join().unwrap().expect("served"),
        t2.join().unwrap().expect("served"),
    );
    let served: BTreeSet<String> = [text(&f1, "key"), text(&f2, "key")].into();
    assert_eq!(served, [key_of("b1"), key_of("b2")].into());

    enqueue_job(&mut m, "rq:exp", "e1", None, 0);
    let first = pop(&mut m, "rq:exp", 300).unwrap();
    let t3 = blocking_pop(master.port, "rq:exp", 5000, LONG);
    wait_blocked(&mut m, 1);
    let f3 = t3.join().unwrap().expect("served after the lease expired");
    assert_eq!(text(&f3, "key"), text(&first, "key"));
    assert_eq!(int(&f3, "attempt"), 2);

    enqueue_job(&mut m, "rq:retry", "n1", None, 0);
    let h = held("rq:retry", &pop(&mut m, "rq:retry", LONG).unwrap());
    ok(
        &mut m,
        &args!["ORCA.NACK", "rq:retry", &h.key, &h.lease, "DELAY", 300],
    );
    let t4 = blocking_pop(master.port, "rq:retry", 5000, LONG);
    wait_blocked(&mut m, 1);
    let f4 = t4.join().unwrap().expect("served after the retry came due");
    assert_eq!(text(&f4, "key"), h.key);

    // A random mix, with short leases and retries left to the timer.
    let (mut holding, cancelled) = replicated_workload(&mut m, 0xD0_0D, 1500);
    let settled = settle(&mut m);
    wait1(&mut m);
    sync_replica(&master, &replica);
    assert_replica_accepted_everything(&replica);
    assert_same_digests("replica after the workload", &settled, &digests(&mut r));
    check_all(&mut m);
    check_all(&mut r);

    // Failover. Fresh leases expiring soon after the master dies.
    let mut soon = Vec::new();
    for q in ["rq:0", "rq:2", "rq:3"] {
        enqueue_job(&mut m, q, "failover-job", Some("user.7"), 0);
        ok(
            &mut m,
            &args!["ORCA.MOVE", q, key_of("failover-job"), "RELEASE"],
        );
        let f = pop(&mut m, q, 2500).unwrap();
        assert_eq!(text(&f, "key"), key_of("failover-job"));
        soon.push(held(q, &f));
    }
    holding.push(held("rq:4", &{
        enqueue_job(&mut m, "rq:4", "acked-after-failover", None, 0);
        ok(
            &mut m,
            &args![
                "ORCA.MOVE",
                "rq:4",
                key_of("acked-after-failover"),
                "RELEASE"
            ],
        );
        pop(&mut m, "rq:4", LONG).unwrap()
    }));
    wait1(&mut m);
    let acknowledged = digests(&mut m);
    drop(m);
    master.kill();
    ok(&mut r, &args!["REPLICAOF", "NO", "ONE"]);
    assert_eq!(
        info(&mut r, "replication").get("role").map(String::as_str),
        Some("master")
    );
    assert_same_digests("promoted replica", &acknowledged, &digests(&mut r));
    check_all(&mut r);
    for h in &soon {
        assert_eq!(state(&mut r, &h.q, &h.key).as_deref(), Some("leased"));
    }
    // Its timer takes over: the short leases expire without any command.
    for h in &soon {
        wait_for(
            "lease expiry on the promoted replica",
            Duration::from_secs(10),
            || state(&mut r, &h.q, &h.key).as_deref() == Some("queued"),
        );
        let e = error_text(&ack_held(&mut r, h)).expect("expired lease must not ack");
        assert!(e.contains("lease not held"), "{e}");
    }
    // Long leases taken on the old master complete on the new one.
    assert!(holding.len() > 5, "{}", holding.len());
    for h in &holding {
        assert_eq!(
            as_int(&ack_held(&mut r, h)),
            1,
            "lease {h:?} lost in the failover"
        );
    }
    for h in &cancelled {
        let e = error_text(&ack_held(&mut r, h)).expect("a cancelled lease must not ack");
        assert!(e.contains("cancelled"), "{e}");
    }
    check_all(&mut r);
}

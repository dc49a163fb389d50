//! Key operations on queues: DEL/UNLINK of big queues, COPY (deep), RENAME,
//! MOVE, EXPIRE, SWAPDB, FLUSHALL, MEMORY USAGE, digests that agree across
//! servers, and the lease timer following a queue wherever it goes (other
//! databases, renamed, copied, moved, restored, swapped).

use std::time::{Duration, Instant};

use crate::common::*;
use redis::Value;

#[test]
fn del_and_unlink_of_a_big_queue() {
    const N: usize = 200_000;
    let s = Server::start(&["--lazyfree-lazy-user-del", "no"]);
    let mut c = s.conn();
    let baseline = info_int(&mut c, "memory", "used_memory");
    fill(&mut c, "big", N);
    assert_eq!(qlen(&mut c, "big"), N as i64);
    let full = info_int(&mut c, "memory", "used_memory");
    assert!(
        full - baseline > (N * 100) as i64,
        "used_memory grew by {}",
        full - baseline
    );
    ok(&mut c, &args!["COPY", "big", "big2"]);
    ok(&mut c, &args!["COPY", "big", "big3"]);
    let d = digest(&mut c, "big");
    assert_eq!(digest(&mut c, "big2"), d);
    assert_eq!(digest(&mut c, "big3"), d);
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), 3);
    assert_eq!(info_int(&mut c, "orca", "orca_jobs_queued"), 3 * N as i64);

    // DEL frees in the foreground.
    let lazy0 = info_int(&mut c, "memory", "lazyfreed_objects");
    let t = Instant::now();
    assert_eq!(as_int(&ok(&mut c, &args!["DEL", "big"])), 1);
    let del_time = t.elapsed();
    assert_eq!(info_int(&mut c, "memory", "lazyfreed_objects"), lazy0);

    // With lazyfree-lazy-user-del, DEL and UNLINK hand the queue to the
    // lazyfree thread (the module reports its free effort).
    ok(
        &mut c,
        &args!["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"],
    );
    let t = Instant::now();
    assert_eq!(as_int(&ok(&mut c, &args!["UNLINK", "big2"])), 1);
    let unlink_time = t.elapsed();
    let t = Instant::now();
    assert_eq!(as_string(&ok(&mut c, &args!["PING"])), "PONG");
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "server not responsive"
    );
    assert_eq!(as_int(&ok(&mut c, &args!["DEL", "big3"])), 1);
    assert!(!exists(&mut c, "big2") && !exists(&mut c, "big3"));
    wait_for("lazyfree", Duration::from_secs(20), || {
        info_int(&mut c, "memory", "lazyfree_pending_objects") == 0
            && info_int(&mut c, "memory", "lazyfreed_objects") == lazy0 + 2
    });
    eprintln!("DEL {del_time:?}, UNLINK {unlink_time:?}");
    assert!(
        unlink_time < Duration::from_millis(250),
        "UNLINK of {N} jobs took {unlink_time:?} (DEL: {del_time:?})"
    );
    // The gauges follow frees on the lazyfree thread too.
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), 0);
    assert_eq!(info_int(&mut c, "orca", "orca_jobs_queued"), 0);
    let after = info_int(&mut c, "memory", "used_memory");
    assert!(
        after - baseline < (full - baseline) / 4,
        "memory not returned: baseline {baseline}, full {full}, after {after}"
    );
}

#[test]
fn copy_is_deep_and_key_operations_work() {
    let (s, mut c) = start_server();
    rich_queue(&mut c, "q");
    assert_eq!(as_string(&ok(&mut c, &args!["TYPE", "q"])), "orcaqueue");
    let dq = digest(&mut c, "q");
    let lenq = qlen(&mut c, "q");

    // COPY: equal right after, independent afterwards (both ways).
    assert_eq!(as_int(&ok(&mut c, &args!["COPY", "q", "q2"])), 1);
    assert_eq!(digest(&mut c, "q2"), dq);
    assert_check(&mut c, "q2");
    enqueue_job(&mut c, "q2", "only-in-copy", Some("user.1"), 0);
    let h = held("q2", &pop(&mut c, "q2", LONG).unwrap());
    assert_eq!(as_int(&ack_held(&mut c, &h)), 1);
    ok(&mut c, &args!["ORCA.DEAD", "q2", "PURGE"]);
    ok(&mut c, &args!["ORCA.SETTINGS", "q2", "ORDER", "FIFO"]);
    assert_eq!(
        digest(&mut c, "q"),
        dq,
        "modifying the copy changed the original"
    );
    assert_eq!(qlen(&mut c, "q"), lenq);
    assert!(state(&mut c, "q", &key_of("only-in-copy")).is_none());
    let d2 = digest(&mut c, "q2");
    assert_ne!(d2, dq);
    enqueue_job(&mut c, "q", "only-in-original", None, 0);
    assert_eq!(
        digest(&mut c, "q2"),
        d2,
        "modifying the original changed the copy"
    );
    ok(
        &mut c,
        &args!["ORCA.DELETE", "q", key_of("only-in-original")],
    );
    assert_check(&mut c, "q");
    assert_check(&mut c, "q2");
    // COPY onto an existing key needs REPLACE; COPY to another db.
    assert_eq!(as_int(&ok(&mut c, &args!["COPY", "q", "q2"])), 0);
    assert_eq!(as_int(&ok(&mut c, &args!["COPY", "q", "q2", "REPLACE"])), 1);
    let dq = digest(&mut c, "q");
    assert_eq!(digest(&mut c, "q2"), dq);

    // RENAME keeps the queue.
    ok(&mut c, &args!["RENAME", "q2", "renamed"]);
    assert!(!exists(&mut c, "q2"));
    assert_eq!(digest(&mut c, "renamed"), dq);
    assert_check(&mut c, "renamed");

    // MOVE to db 1, usable there.
    assert_eq!(as_int(&ok(&mut c, &args!["MOVE", "renamed", 1])), 1);
    assert!(!exists(&mut c, "renamed"));
    let mut c1 = s.conn_db(1);
    assert_eq!(digest(&mut c1, "renamed"), dq);
    assert_check(&mut c1, "renamed");
    assert!(pop(&mut c1, "renamed", LONG).is_some());
    assert_check(&mut c1, "renamed");

    // SWAPDB: db 0's queue is now in db 1 and vice versa.
    ok(&mut c, &args!["SWAPDB", 0, 1]);
    assert_eq!(digest(&mut c1, "q"), dq);
    assert!(exists(&mut c, "renamed") && !exists(&mut c, "q"));
    ok(&mut c, &args!["SWAPDB", 0, 1]);

    // EXPIRE: the queue vanishes (and is freed).
    ok(&mut c, &args!["COPY", "q", "temp"]);
    let queues = info_int(&mut c, "orca", "orca_queues");
    assert_eq!(as_int(&ok(&mut c, &args!["PEXPIRE", "temp", 300])), 1);
    let ttl = as_int(&ok(&mut c, &args!["PTTL", "temp"]));
    assert!((1..=300).contains(&ttl), "PTTL {ttl}");
    assert_eq!(as_int(&ok(&mut c, &args!["TTL", "q"])), -1);
    wait_for("the queue to expire", Duration::from_secs(5), || {
        !exists(&mut c, "temp")
    });
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), queues - 1);

    // FLUSHALL: everything goes, and the module keeps working.
    ok(&mut c, &args!["FLUSHALL"]);
    assert!(orca_queues(&mut c).is_empty() && orca_queues(&mut c1).is_empty());
    // Valkey 8 frees a FLUSHALL's values in the background by default
    // (lazyfree-lazy-user-flush yes): the counts drop once they are freed.
    wait_for(
        "the flushed queues to be freed",
        Duration::from_secs(5),
        || info_int(&mut c, "orca", "orca_queues") == 0,
    );
    assert_eq!(info_int(&mut c, "orca", "orca_jobs_queued"), 0);
    assert_eq!(info_int(&mut c, "orca", "orca_jobs_leased"), 0);
    assert_eq!(qlen(&mut c, "q"), 0);
    std::thread::sleep(Duration::from_millis(150)); // a few timer rounds
    enqueue_job(&mut c, "q", "after-flush", None, 0);
    assert_eq!(qlen(&mut c, "q"), 1);
}

#[test]
fn memory_usage_grows_with_jobs() {
    let (_s, mut c) = start_server();
    let pad = "x".repeat(500);
    let mem =
        |c: &mut redis::Connection| as_int(&ok(c, &args!["MEMORY", "USAGE", "q", "SAMPLES", 0]));
    ok(&mut c, &args!["ORCA.SETTINGS", "q", "ORDER", "LIFO"]);
    let empty = mem(&mut c);
    let mut last = empty;
    let mut payload_bytes = 0usize;
    for round in 1..=4 {
        let mut p = redis::pipe();
        for i in 0..250 {
            let cfg = format!(
                r#"{{"key":"m{round}-{i}","collation":{{"type":"user","id":"{}"}},"pad":"{pad}"}}"#,
                i % 10
            );
            payload_bytes += cfg.len();
            p.cmd("ORCA.ENQUEUE").arg("q").arg(cfg).ignore();
        }
        p.query::<()>(&mut c).unwrap();
        let m = mem(&mut c);
        assert!(m > last, "MEMORY USAGE did not grow: {last} -> {m}");
        assert!(
            m as usize > payload_bytes,
            "MEMORY USAGE {m} < payload bytes {payload_bytes}"
        );
        assert!(
            (m as usize) < 4 * payload_bytes + 1_000_000,
            "MEMORY USAGE {m} implausible for {payload_bytes} payload bytes"
        );
        last = m;
    }
    // Leased jobs still count; popping without a lease frees.
    for _ in 0..100 {
        pop(&mut c, "q", LONG).unwrap();
    }
    assert!(mem(&mut c) as usize > payload_bytes);
    let before = mem(&mut c);
    for _ in 0..500 {
        ok(&mut c, &args!["ORCA.POP", "q", "LEASE", 0]);
    }
    let after = mem(&mut c);
    assert!(after < before - 500 * 500, "{before} -> {after}");
    assert!(empty < 10_000, "an empty queue uses {empty} bytes");
}

/// The same commands with the clock pinned give the same queue on two
/// servers: same digest; any difference shows.
#[test]
fn digests_match_across_servers() {
    let a = Server::start(&[]);
    let b = Server::start(&[]);
    let run = |c: &mut redis::Connection| {
        let now = 1_700_000_000_000i64;
        for i in 0..40 {
            let coll = ["user.1", "user.2", "team.z"][i % 3];
            let coll = if i % 5 == 0 { None } else { Some(coll) };
            ok(
                c,
                &args![
                    "ORCA.ENQUEUE",
                    "d",
                    config(&format!("j{i}"), coll, (i * 37 % 11) as i64),
                    "NOW",
                    now + i as i64
                ],
            );
        }
        ok(
            c,
            &args![
                "ORCA.IMMEDIATE",
                "d",
                config("j3", None, 0),
                "NOW",
                now + 100
            ],
        );
        ok(
            c,
            &args!["ORCA.MOVE", "d", key_of("j4"), "RELEASE", "NOW", now + 101],
        );
        ok(
            c,
            &args!["ORCA.MOVE", "d", key_of("j7"), "DELAY", "BUFFER", 50],
        );
        for k in 0..5 {
            let f = fields(ok(
                c,
                &args!["ORCA.POP", "d", "LEASE", LONG, "NOW", now + 200 + k],
            ));
            if k == 0 {
                ok(
                    c,
                    &args!["ORCA.ACK", "d", text(&f, "key"), text(&f, "lease")],
                );
            }
        }
    };
    let (mut ca, mut cb) = (a.conn(), b.conn());
    run(&mut ca);
    run(&mut cb);
    let (da, db) = (digest(&mut ca, "d"), digest(&mut cb, "d"));
    assert_eq!(da, db);
    assert_ne!(da, "0".repeat(40));
    ok(
        &mut cb,
        &args![
            "ORCA.ENQUEUE",
            "d",
            config("extra", None, 0),
            "NOW",
            1_700_000_001_000i64
        ],
    );
    assert_ne!(digest(&mut cb, "d"), da, "the digest must see every job");
    ok(&mut cb, &args!["ORCA.DELETE", "d", key_of("extra")]);
    ok(&mut ca, &args!["ORCA.SETTINGS", "d", "ORDER", "FIFO"]);
    assert_ne!(
        digest(&mut ca, "d"),
        digest(&mut cb, "d"),
        "the digest must see the order"
    );
}

/// A queue with one job leased for `ms`; returns the job's key.
fn one_short_lease(c: &mut redis::Connection, q: &str, ms: i64) -> String {
    enqueue_job(c, q, "short", Some("user.1"), 0);
    enqueue_job(c, q, "other", Some("user.2"), 10_000);
    let f = pop(c, q, ms).unwrap();
    assert_eq!(text(&f, "key"), key_of("short"));
    text(&f, "key")
}

/// The job comes back (timer only: STATUS and LEN do not tick).
fn expires_by_timer(c: &mut redis::Connection, q: &str, key: &str, what: &str) {
    wait_for(what, Duration::from_secs(5), || {
        state(c, q, key).as_deref() == Some("queued")
    });
    assert_eq!(qlen(c, q), 2, "{what}");
    assert_check(c, q);
}

#[test]
fn leases_expire_after_rename_copy_move_and_restore() {
    let (s, mut c) = start_server();
    let mut c1 = s.conn_db(1);

    let k = one_short_lease(&mut c, "r", 400);
    ok(&mut c, &args!["RENAME", "r", "r-renamed"]);
    expires_by_timer(&mut c, "r-renamed", &k, "lease expiry after RENAME");

    let k = one_short_lease(&mut c, "c", 400);
    ok(&mut c, &args!["COPY", "c", "c-copy"]);
    ok(&mut c, &args!["DEL", "c"]);
    expires_by_timer(&mut c, "c-copy", &k, "lease expiry in a COPY");

    let k = one_short_lease(&mut c, "m", 400);
    ok(&mut c, &args!["MOVE", "m", 1]);
    expires_by_timer(&mut c1, "m", &k, "lease expiry after MOVE to db 1");

    let k = one_short_lease(&mut c, "d", 400);
    let payload = as_bytes(&ok(&mut c, &args!["DUMP", "d"]));
    ok(&mut c, &args!["DEL", "d"]);
    ok(&mut c, &args!["RESTORE", "d-restored", 0, payload]);
    expires_by_timer(&mut c, "d-restored", &k, "lease expiry after DUMP/RESTORE");

    let k = one_short_lease(&mut c, "n", 400);
    ok(&mut c, &args!["RENAME", "n", "n2"]);
    ok(&mut c, &args!["RENAME", "n2", "n3"]);
    ok(&mut c, &args!["COPY", "n3", "n4", "DB", 1]);
    ok(&mut c, &args!["DEL", "n3"]);
    expires_by_timer(
        &mut c1,
        "n4",
        &k,
        "lease expiry after RENAME, RENAME, COPY DB 1",
    );
}

#[test]
fn leases_expire_after_swapdb() {
    let (s, mut c) = start_server();
    let mut c1 = s.conn_db(1);
    let k = one_short_lease(&mut c, "s", 400);
    ok(&mut c, &args!["SWAPDB", 0, 1]);
    assert!(exists(&mut c1, "s"));
    expires_by_timer(&mut c1, "s", &k, "lease expiry after SWAPDB 0 1");
}

/// The timer works in every database: a lease expires in db 3 and wakes a
/// client blocked there, and a same-named queue in db 0 is left alone.
#[test]
fn leases_expire_in_other_databases() {
    let (s, mut c) = start_server();
    let mut c3 = s.conn();
    ok(&mut c3, &args!["SELECT", 3]);
    let k = key_of("a");
    let p0 = leased(&mut c, "q", "a", 60_000);
    enqueue(&mut c3, "q", &config("a", None, 0));
    let p3 = pop_with(&mut c3, "q", &args!["LEASE", 200]).expect("db3 a");
    let mut blocked = blocking_conn(&s);
    ok(&mut blocked, &args!["SELECT", 3]);
    let h = spawn_cmd(
        blocked,
        args!["ORCA.POP", "q", "BLOCK", 5000, "LEASE", 60_000],
    );
    let (v, took) = joined(h);
    assert_ne!(v, Value::Nil, "db 3 lease never expired (waited {took:?})");
    let f = fields(v);
    assert_eq!(text(&f, "key"), k);
    assert_eq!(int(&f, "attempt"), 2);
    assert_ne!(lease(&f), lease(&p3));
    // db 0 untouched: still the first lease.
    let st = must_status(&mut c, "q", &k);
    assert_eq!(text(&st, "lease"), lease(&p0));
    assert_eq!(int(&st, "attempts"), 1);
    assert_check(&mut c, "q");
    assert_check(&mut c3, "q");
}

/// Leases keep expiring after the queue key is renamed, moved to another
/// database, copied or dumped and restored.
#[test]
fn leases_expire_after_key_operations() {
    let (s, mut c) = start_server();
    let k = key_of("a");
    let names = ["renamed", "moved", "copied", "restored"];
    for n in names {
        enqueue(&mut c, n, &config("a", None, 0));
        enqueue(&mut c, n, &config("b", None, 0));
        pop_with(&mut c, n, &args!["LEASE", 300]).expect("a");
    }
    ok(&mut c, &args!["RENAME", "renamed", "renamed2"]);
    assert_eq!(as_int(&ok(&mut c, &args!["MOVE", "moved", 2])), 1);
    assert_eq!(as_int(&ok(&mut c, &args!["COPY", "copied", "copy2"])), 1);
    let dump = as_bytes(&ok(&mut c, &args!["DUMP", "restored"]));
    ok(&mut c, &args!["DEL", "restored"]);
    ok(&mut c, &args!["RESTORE", "restored", 0, dump]);
    let mut c2 = s.conn();
    ok(&mut c2, &args!["SELECT", 2]);
    wait_for("every lease to expire", Duration::from_secs(10), || {
        ["renamed2", "copied", "copy2", "restored"]
            .iter()
            .all(|q| state(&mut c, q, &k).as_deref() == Some("queued"))
            && state(&mut c2, "moved", &k).as_deref() == Some("queued")
    });
    for q in ["renamed2", "copied", "copy2", "restored"] {
        assert_eq!(qlen(&mut c, q), 2, "{q}");
        assert_eq!(int(&must_status(&mut c, q, &k), "attempts"), 1, "{q}");
        assert_check(&mut c, q);
    }
    assert_eq!(qlen(&mut c2, "moved"), 2);
    assert_check(&mut c2, "moved");
}

/// The db the connection has selected, as the server sees it.
fn client_db(c: &mut redis::Connection) -> i64 {
    let info = as_string(&ok(c, &args!["CLIENT", "INFO"]));
    info.split(' ')
        .find_map(|f| f.strip_prefix("db="))
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("no db= in CLIENT INFO: {info}"))
}

/// Regression (issue 14): on Valkey 8.1, a module subscribed to keyspace
/// events left the client that ran `MOVE <key> <db>` selected on the
/// target db. The client must stay where it was, for plain keys and
/// queues, and its next commands must hit its own db.
#[test]
fn move_to_another_db_leaves_the_client_where_it_was() {
    let (s, mut c) = start_server();
    ok(&mut c, &args!["SET", "plain", "v"]);
    enqueue_job(&mut c, "q", "a", Some("user.1"), 0);
    enqueue_job(&mut c, "q2", "b", None, 0);
    assert_eq!(as_int(&ok(&mut c, &args!["MOVE", "plain", 2])), 1);
    assert_eq!(client_db(&mut c), 0, "after MOVE of a plain key");
    assert_eq!(as_int(&ok(&mut c, &args!["MOVE", "q", 2])), 1);
    assert_eq!(client_db(&mut c), 0, "after MOVE of a queue");
    // The next commands see db 0: q2 is there, q and plain are not.
    assert_eq!(qlen(&mut c, "q2"), 1);
    assert!(!exists(&mut c, "q"));
    assert!(!exists(&mut c, "plain"));
    // Inside MULTI too.
    ok(&mut c, &args!["MULTI"]);
    raw(&mut c, &args!["MOVE", "q2", 3]);
    raw(&mut c, &args!["ORCA.LEN", "q2"]);
    let Value::Array(replies) = ok(&mut c, &args!["EXEC"]) else {
        panic!("EXEC")
    };
    assert_eq!(as_int(&replies[1]), 0, "q2 moved away from db 0");
    assert_eq!(client_db(&mut c), 0, "after MOVE in MULTI");
    // And the moved keys are where MOVE put them.
    let mut c2 = s.conn_db(2);
    assert_eq!(qlen(&mut c2, "q"), 1);
    assert_eq!(as_string(&ok(&mut c2, &args!["GET", "plain"])), "v");
    assert_eq!(client_db(&mut c2), 2);
    assert_check(&mut c2, "q");
    let mut c3 = s.conn_db(3);
    assert_eq!(qlen(&mut c3, "q2"), 1);
}

//! The append-only file: with and without the RDB preamble (then queues are
//! rewritten as `ORCA.IMPORT` commands, several per big queue), rewrites
//! racing writes, graceful restarts and `kill -9` (also during a rewrite);
//! nothing acknowledged is lost and every lease taken before still
//! completes.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::common::*;

/// One round of every kind of write on `aof:lifo` and `aof:fifo` (job names
/// carry `tag`, so rounds add up). Returns the long leases still held and the
/// leases that were cancelled (by deleting their job).
fn aof_workload(c: &mut redis::Connection, tag: &str) -> (Vec<Held>, Vec<Held>) {
    let (lifo, fifo) = ("aof:lifo", "aof:fifo");
    if !exists(c, fifo) {
        ok(c, &args!["ORCA.SETTINGS", fifo, "ORDER", "FIFO"]);
    }
    let mut holding = Vec::new();
    let mut cancelled = Vec::new();
    for q in [lifo, fifo] {
        let name = |i: usize| format!("{tag}-{q}-{i}");
        for i in 0..12 {
            let coll = match i % 4 {
                0 => Some("user.1"),
                1 => Some("user.2"),
                2 => Some("team.x"),
                _ => None,
            };
            let f = enqueue_job(c, q, &name(i), coll, i as i64 * 100);
            assert_eq!(int(&f, "created"), 1);
        }
        immediate_job(c, q, &name(12), Some("user.1"));
        // Upgrade a waiting collation job.
        let f = immediate_job(c, q, &name(4), None);
        assert_eq!((int(&f, "created"), int(&f, "immediate")), (0, 1));
        ok(c, &args!["ORCA.MOVE", q, key_of(&name(5)), "RELEASE"]);
        ok(c, &args!["ORCA.MOVE", q, key_of(&name(6)), "DELAY"]);
        ok(
            c,
            &args!["ORCA.MOVE", q, key_of(&name(9)), "DELAY", "BUFFER", 5],
        );
        assert_eq!(
            as_int(&ok(c, &args!["ORCA.DELETE", q, key_of(&name(1))])),
            1
        );
        let f = fields(ok(c, &args!["ORCA.ENQUEUE", q, revised(&name(2), 7)]));
        assert_eq!(int(&f, "created"), 0);
        ok(
            c,
            &args![
                "ORCA.REENQUEUE",
                q,
                config(&name(13), Some("user.3"), 0),
                12345
            ],
        );

        // Acked with a result.
        let a = held(q, &pop(c, q, LONG).expect("pop"));
        assert_eq!(
            as_int(&ok(
                c,
                &args![
                    "ORCA.ACK",
                    q,
                    &a.key,
                    &a.lease,
                    "RESULT",
                    format!("result of {}", a.key)
                ]
            )),
            1
        );
        // Failed, retried in 10 minutes.
        let b = held(q, &pop(c, q, LONG).expect("pop"));
        let f = fields(ok(
            c,
            &args!["ORCA.NACK", q, &b.key, &b.lease, "DELAY", LONG],
        ));
        assert_eq!(text(&f, "outcome"), "retry");
        // Still running.
        holding.push(held(q, &pop(c, q, LONG).expect("pop")));
        // Cancelled while running.
        let e = held(q, &pop(c, q, LONG).expect("pop"));
        assert_eq!(as_int(&ok(c, &args!["ORCA.DELETE", q, &e.key])), 1);
        cancelled.push(e);
        // Extended.
        let f = held(q, &pop(c, q, LONG).expect("pop"));
        ok(c, &args!["ORCA.EXTEND", q, &f.key, &f.lease, 2 * LONG]);
        holding.push(f);
    }
    // Dead after one attempt.
    ok(c, &args!["CONFIG", "SET", "orca.max-attempts", "1"]);
    let g = held(lifo, &pop(c, lifo, LONG).expect("pop"));
    let f = fields(ok(c, &args!["ORCA.NACK", lifo, &g.key, &g.lease]));
    assert_eq!(text(&f, "outcome"), "dead");
    ok(c, &args!["CONFIG", "SET", "orca.max-attempts", "5"]);
    (holding, cancelled)
}

/// A queue with more units than one `ORCA.IMPORT` carries (512), so an AOF
/// rewrite without preamble splits it into several commands.
fn big_aof_queue(c: &mut redis::Connection, q: &str) {
    let mut p = redis::pipe();
    for i in 0..700 {
        p.cmd("ORCA.ENQUEUE")
            .arg(q)
            .arg(config(&format!("single-{i}"), None, i))
            .ignore();
    }
    for i in 0..600 {
        let coll = format!("user.{}", i % 300);
        p.cmd("ORCA.ENQUEUE")
            .arg(q)
            .arg(config(&format!("coll-{i}"), Some(&coll), i))
            .ignore();
    }
    p.query::<()>(c).expect("pipeline");
    assert_eq!(qlen(c, q), 1300);
}

/// Pop a job with a short lease and wait until the server's timer puts it
/// back (so the AOF holds a timer-driven `ORCA.TICK`).
fn expire_by_timer(c: &mut redis::Connection, q: &str) {
    let h = held(q, &pop(c, q, 50).expect("pop"));
    wait_for("lease expiry by the timer", Duration::from_secs(5), || {
        state(c, q, &h.key).as_deref() == Some("queued")
    });
}

/// Start a rewrite that takes a while (`rdb-key-save-delay` slows the child
/// down per key) so writes land while it runs.
fn start_slow_rewrite(c: &mut redis::Connection, per_key_us: i64) {
    ok(c, &args!["CONFIG", "SET", "rdb-key-save-delay", per_key_us]);
    ok(c, &args!["BGREWRITEAOF"]);
    wait_for("AOF rewrite to start", Duration::from_secs(10), || {
        aof_info(c).0 == 1
    });
    ok(c, &args!["CONFIG", "SET", "rdb-key-save-delay", 0]);
}

fn count_occurrences(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

/// Pids of the processes the server forked (a rewrite child), so a test
/// that kills the server can end them too.
fn forked_children(s: &Server) -> Vec<u32> {
    let Some(pid) = s.pid() else {
        return Vec::new();
    };
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn kill_pid(pid: u32) {
    let _ = std::process::Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status();
}

/// SIGKILL the server (and a rewrite child it may have forked).
fn kill9(s: &mut Server) {
    let children = forked_children(s);
    s.kill();
    for pid in children {
        kill_pid(pid);
    }
}

fn aof_roundtrip(preamble: &str) {
    let mut s = Server::start(&[
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        preamble,
        "--appendfsync",
        "always",
    ]);
    let mut c = s.conn();
    let (mut holding, mut cancelled) = aof_workload(&mut c, "a");
    big_aof_queue(&mut c, "aof:big");
    expire_by_timer(&mut c, "aof:fifo");

    // Rewrite with writes racing it (they go to the new incremental file).
    start_slow_rewrite(&mut c, 500_000);
    let (h, x) = aof_workload(&mut c, "b");
    holding.extend(h);
    cancelled.extend(x);
    assert_eq!(
        aof_info(&mut c).0,
        1,
        "the writes of round b should have raced the rewrite"
    );
    wait_aof_rewrite_idle(&mut c);
    let (h, x) = aof_workload(&mut c, "c");
    holding.extend(h);
    cancelled.extend(x);

    // The rewrite took the intended path.
    let (base, bytes) = aof_base(&s.dir).expect("a base AOF file");
    if preamble == "yes" {
        assert!(
            base.ends_with(".base.rdb") && bytes.starts_with(b"REDIS"),
            "{base}"
        );
    } else {
        assert!(base.ends_with(".base.aof"), "{base}");
        let imports = count_occurrences(&bytes, b"ORCA.IMPORT");
        assert!(
            imports > 3,
            "aof:big (1300+ units) must be split over several ORCA.IMPORT: {imports}"
        );
        assert!(!bytes.starts_with(b"REDIS"));
    }

    let before = digests(&mut c);
    assert_eq!(before.len(), 3, "{before:?}");
    check_all(&mut c);
    drop(c);

    // Graceful restart, loading from the AOF only.
    s.shutdown_save();
    let _ = std::fs::remove_file(s.dir.join("dump.rdb"));
    s.start_again();
    assert!(
        s.log().contains("DB loaded from append only file"),
        "not loaded from the AOF"
    );
    let mut c = s.conn();
    assert_same_digests("after AOF restart", &before, &digests(&mut c));
    check_all(&mut c);
    for h in &cancelled {
        let e = error_text(&ack_held(&mut c, h)).expect("ack of a cancelled lease must fail");
        assert!(e.contains("cancelled"), "{e}");
    }

    // More acknowledged writes, then kill -9 (appendfsync always).
    let (h, _) = aof_workload(&mut c, "d");
    holding.extend(h);
    let half = holding.len() / 2;
    for h in holding.drain(..half) {
        assert_eq!(as_int(&ack_held(&mut c, &h)), 1, "lease {h:?} lost");
    }
    expire_by_timer(&mut c, "aof:lifo");
    let before = digests(&mut c);
    drop(c);
    kill9(&mut s);
    s.start_again();
    let mut c = s.conn();
    assert_same_digests("after kill -9", &before, &digests(&mut c));
    check_all(&mut c);
    // Every lease taken before either restart still completes, and new
    // deliveries never reuse a token.
    let tokens: BTreeSet<String> = holding.iter().map(|h| h.lease.clone()).collect();
    for h in &holding {
        assert_eq!(as_int(&ack_held(&mut c, h)), 1, "lease {h:?} lost");
    }
    for _ in 0..5 {
        let f = pop(&mut c, "aof:big", LONG).expect("pop");
        assert!(!tokens.contains(&text(&f, "lease")), "lease token reused");
    }
    check_all(&mut c);
}

#[test]
fn aof_without_preamble_rewrite_restart_and_kill9() {
    aof_roundtrip("no");
}

#[test]
fn aof_with_preamble_rewrite_restart_and_kill9() {
    aof_roundtrip("yes");
}

/// `kill -9` while a rewrite is still running: the server restarts from the
/// old base plus the increments, and nothing acknowledged is lost.
#[test]
fn aof_kill9_during_rewrite_loses_nothing() {
    let mut s = Server::start(&[
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        "no",
        "--appendfsync",
        "always",
    ]);
    let mut c = s.conn();
    let (mut holding, _) = aof_workload(&mut c, "a");
    big_aof_queue(&mut c, "aof:big");
    start_slow_rewrite(&mut c, 500_000);
    let (h, _) = aof_workload(&mut c, "b");
    holding.extend(h);
    assert_eq!(aof_info(&mut c).0, 1, "the rewrite should still run");
    let before = digests(&mut c);
    check_all(&mut c);
    drop(c);
    kill9(&mut s);
    s.start_again();
    let mut c = s.conn();
    assert_same_digests("after kill -9 during a rewrite", &before, &digests(&mut c));
    check_all(&mut c);
    for h in &holding {
        assert_eq!(as_int(&ack_held(&mut c, h)), 1, "lease {h:?} lost");
    }
}

/// Record everything, `kill -9`, start again on the same directory and
/// compare.
fn kill9_and_compare(s: &mut Server, queues: &[&str]) {
    let mut c = s.conn();
    let before = observe(&mut c, queues);
    // The copies were written to the AOF too; they are gone again.
    assert_eq!(dataset_digests(&mut c), before.digests);
    drop(c);
    s.kill();
    s.start_again();
    let mut c = s.conn();
    assert_observes(&mut c, queues, &before, "after AOF replay");
}

#[test]
fn aof_replay_after_kill9() {
    let mut s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    wait_aof_rewrite_idle(&mut c);
    setup_orders(&mut c);
    Workload::new(51, false, &WORKLOAD_QUEUES).run(&mut c, 400);
    drop(c);
    kill9_and_compare(&mut s, &WORKLOAD_QUEUES);
}

/// Without the RDB preamble an AOF rewrite stores queues as `ORCA.IMPORT`
/// commands (several per queue when it is large); replaying them and the
/// commands after them must give the same queues.
#[test]
fn aof_rewrite_without_preamble_replays_identically() {
    let mut s = Server::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "no",
    ]);
    let mut c = s.conn();
    wait_aof_rewrite_idle(&mut c);
    setup_orders(&mut c);
    Workload::new(61, false, &WORKLOAD_QUEUES).run(&mut c, 300);
    // A big queue: more units (single jobs, each collation) than one
    // rewritten command carries. Batched in transactions: one fsync each.
    for batch in 0..13 {
        ok(&mut c, &args!["MULTI"]);
        for i in batch * 100..(batch + 1) * 100 {
            let coll = match i % 4 {
                0 | 2 => None,
                1 => Some("user.9"),
                _ => Some("team.9"),
            };
            let name = format!("big{i}");
            let a = if i % 7 == 0 {
                args!["ORCA.IMMEDIATE", "big", config(&name, coll, i), "NOW", i]
            } else {
                args!["ORCA.ENQUEUE", "big", config(&name, coll, i), "NOW", i]
            };
            ok(&mut c, &a);
        }
        ok(&mut c, &args!["EXEC"]);
    }
    // Two payloads of 3 MB: more bytes than one rewritten command carries.
    for name in ["huge1", "huge2"] {
        let cfg = format!(r#"{{"key":"{name}","blob":"{}"}}"#, "z".repeat(3 << 20));
        ok(&mut c, &args!["ORCA.ENQUEUE", "big", cfg, "NOW", "5"]);
    }
    assert_eq!(qlen(&mut c, "big"), 1302);
    let mem = as_int(&ok(&mut c, &args!["MEMORY", "USAGE", "big"]));
    assert!(mem > 6 << 20, "MEMORY USAGE big = {mem}");
    let big_before = big_state(&mut c);
    ok(&mut c, &args!["BGREWRITEAOF"]);
    wait_aof_rewrite_idle(&mut c);
    let (_, text) = aof_base(&s.dir).expect("a base AOF file");
    assert!(text.starts_with(b"*"), "base AOF is not in command form");
    let pat = b"ORCA.IMPORT\r\n$3\r\nbig\r\n";
    let imports = text.windows(pat.len()).filter(|w| w == pat).count();
    assert!(
        imports >= 2,
        "expected several ORCA.IMPORT commands for big, found {imports}"
    );
    // More work after the rewrite, then kill -9.
    Workload::new(62, false, &WORKLOAD_QUEUES).run(&mut c, 200);
    drop(c);
    kill9_and_compare(&mut s, &WORKLOAD_QUEUES);
    let mut c = s.conn();
    assert_same("big queue", &big_before, &big_state(&mut c));
    assert_check(&mut c, "big");
}

/// Digest, settings and a sample of job statuses of the queue "big"
/// (popping 1300 jobs with fsync always would be slow; the digest covers
/// the whole queue).
fn big_state(c: &mut redis::Connection) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert("digest".into(), digest(c, "big"));
    let st = fields(ok(c, &args!["ORCA.SETTINGS", "big"]));
    out.insert("settings".into(), format!("{:?}", sorted(&st)));
    for i in (0..1300).step_by(7).chain((1..1300).step_by(11)) {
        let name = format!("big{i}");
        let v = ok(c, &args!["ORCA.STATUS", "big", key_of(&name)]);
        out.insert(name, format!("{:?}", sorted(&fields(v))));
    }
    for name in ["huge1", "huge2"] {
        let f = fields(ok(c, &args!["ORCA.STATUS", "big", orca_key(name, "")]));
        let payload = as_bytes(get(&f, "payload"));
        assert_eq!(payload.len(), (3 << 20) + 20 + name.len());
        out.insert(
            name.into(),
            format!("{} {}", int(&f, "position"), int(&f, "nonce")),
        );
    }
    out
}

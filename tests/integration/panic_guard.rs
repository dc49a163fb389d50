//! The panic guard (docs/design.md, "Failure containment"): a panic in any
//! place where Redis calls into the module is contained, logged with its
//! place, and turned into the failure that place can report. The server
//! never dies and no queue is damaged.
//!
//! Each test loads the module with `debug-panic-in <place>` (a load-time
//! setting for these tests, see redis.conf.example), which arms a panic in
//! that one place, then makes Redis call it.

use std::time::Duration;

use redis::Value;

use crate::common::*;

const INTERNAL: &str = "INTERNAL internal error in the orca module (see the server log)";

/// A server whose module panics in `place`.
fn armed(place: &str, extra: &[&str]) -> (Server, Con) {
    let s = Server::start_with(&["debug-panic-in", place], extra);
    let c = s.conn();
    (s, c)
}

/// The server answers, logged the contained panic of `place` (its message
/// names the injected place), and nothing aborted.
fn survived(s: &Server, c: &mut Con, place: &str) {
    assert_eq!(as_string(&ok(c, &args!["PING"])), "PONG");
    let log = s.log();
    assert!(
        log.contains("contained a panic in") && log.contains(&format!("injected panic in {place}")),
        "no contained panic of {place} in the log:\n{}",
        tail(&log, 30)
    );
    assert!(!log.contains("panicked") || log.contains("contained a panic"));
}

/// Two queues: `q` (collated jobs, one leased) and `plain`.
fn some_queues(c: &mut Con) {
    for i in 0..5 {
        enqueue_job(c, "q", &format!("j{i}"), Some("user.1"), i * 10);
    }
    enqueue_job(c, "plain", "p", None, 0);
}

#[test]
fn setting_is_hidden_and_fixed_at_load() {
    let (s, mut c) = armed("digest", &[]);
    assert!(config_get(&mut c, "orca.*")
        .keys()
        .all(|k| k != "orca.debug-panic-in"));
    let e = fails(
        &mut c,
        &args!["CONFIG", "SET", "orca.debug-panic-in", "command"],
    );
    assert!(
        e.contains("immutable") || e.contains("Unsupported") || e.contains("hidden"),
        "{e}"
    );
    // Armed for digest only: commands work.
    some_queues(&mut c);
    assert_check(&mut c, "q");
    assert!(s.log().contains("orca.debug-panic-in is set"));
    // Unarmed servers do not warn.
    let (plain, _c) = start_server();
    assert!(!plain.log().contains("orca.debug-panic-in is set"));
}

#[test]
fn command_panic_is_an_error_reply_and_changes_nothing() {
    let (s, mut c) = armed("command", &[]);
    ok(&mut c, &args!["SET", "other", "1"]);
    for cmd in [
        args!["ORCA.ENQUEUE", "q", config("a", None, 0)],
        args!["ORCA.POP", "q"],
        args!["ORCA.LEN", "q"],
        args!["ORCA.SETTINGS", "q", "ORDER", "FIFO"],
    ] {
        assert_eq!(fails(&mut c, &cmd), INTERNAL, "{}", show_args(&cmd));
    }
    assert!(!exists(&mut c, "q"), "a failed command left a key");
    // Inside MULTI the other commands still run.
    ok(&mut c, &args!["MULTI"]);
    raw(&mut c, &args!["ORCA.LEN", "q"]);
    raw(&mut c, &args!["INCR", "other"]);
    let Value::Array(r) = ok(&mut c, &args!["EXEC"]) else {
        panic!("EXEC")
    };
    assert_eq!(error_text(&r[0]).as_deref(), Some(INTERNAL));
    assert_eq!(as_int(&r[1]), 2);
    survived(&s, &mut c, "command");
}

#[test]
fn blocked_wake_up_panic_answers_the_waiter_and_keeps_the_job() {
    let (s, mut c) = armed("blocked-ready", &[]);
    let h = spawn_blocked(&s, args!["ORCA.POP", "q", "BLOCK", 5000]);
    wait_blocked(&mut c, 1);
    enqueue_job(&mut c, "q", "a", None, 0);
    let (v, _) = joined(h);
    assert_eq!(error_text(&v).as_deref(), Some(INTERNAL));
    assert_eq!(state(&mut c, "q", &key_of("a")).as_deref(), Some("queued"));
    assert_eq!(blocked_clients(&mut c), 0);
    assert_check(&mut c, "q");
    survived(&s, &mut c, "blocked-ready");
}

#[test]
fn blocked_timeout_panic_answers_the_waiter() {
    let (s, mut c) = armed("blocked-timeout", &[]);
    let h = spawn_blocked(&s, args!["ORCA.POP", "q", "BLOCK", 100]);
    let (v, _) = joined(h);
    assert_eq!(error_text(&v).as_deref(), Some(INTERNAL));
    assert_eq!(blocked_clients(&mut c), 0);
    survived(&s, &mut c, "blocked-timeout");
}

#[test]
fn timer_panic_is_contained_and_tick_still_works() {
    let (s, mut c) = armed("timer", &[]);
    enqueue_job(&mut c, "q", "a", None, 0);
    let p = must_pop(&mut c, "q", 50);
    wait_for("the timer to run and panic", Duration::from_secs(5), || {
        s.log().contains("injected panic in timer")
    });
    survived(&s, &mut c, "timer");
    // The timer could not expire the lease; the command can.
    ok(&mut c, &args!["ORCA.TICK", "q"]);
    assert_eq!(state(&mut c, "q", &key_of("a")).as_deref(), Some("queued"));
    assert_ne!(lease(&must_pop(&mut c, "q", 60_000)), lease(&p));
    assert_check(&mut c, "q");
}

#[test]
fn command_filter_panic_lets_commands_run() {
    let (s, mut c) = armed("filter", &[]);
    some_queues(&mut c);
    ok(&mut c, &args!["RENAME", "q", "q2"]);
    assert_eq!(qlen(&mut c, "q2"), 5);
    assert_check(&mut c, "q2");
    survived(&s, &mut c, "filter");
}

#[test]
fn swapdb_panic_is_contained() {
    let (s, mut c) = armed("swapdb", &[]);
    some_queues(&mut c);
    ok(&mut c, &args!["SWAPDB", 0, 1]);
    let mut c1 = s.conn_db(1);
    assert_eq!(qlen(&mut c1, "q"), 5);
    assert!(!exists(&mut c, "q"));
    survived(&s, &mut c, "swapdb");
}

#[test]
fn info_panic_leaves_the_rest_of_info() {
    let (s, mut c) = armed("info", &[]);
    some_queues(&mut c);
    let all = as_string(&ok(&mut c, &args!["INFO", "everything"]));
    assert!(all.contains("redis_version") || all.contains("valkey_version"));
    assert!(all.contains("used_memory:"));
    survived(&s, &mut c, "info");
}

#[test]
fn rdb_save_panic_fails_the_background_save_and_keeps_the_old_file() {
    let (s, mut c) = armed("rdb_save", &[]);
    ok(&mut c, &args!["SET", "before", "1"]);
    ok(&mut c, &args!["SAVE"]); // no queue yet: nothing to panic in
    let old = std::fs::read(s.dir.join("dump.rdb")).expect("dump.rdb");
    some_queues(&mut c);
    ok(&mut c, &args!["BGSAVE"]);
    wait_for(
        "the background save to end",
        Duration::from_secs(10),
        || info(&mut c, "persistence")["rdb_bgsave_in_progress"] == "0",
    );
    assert_eq!(info(&mut c, "persistence")["rdb_last_bgsave_status"], "err");
    assert_eq!(std::fs::read(s.dir.join("dump.rdb")).unwrap(), old);
    // The queues in memory are untouched.
    assert_eq!(qlen(&mut c, "q"), 5);
    assert_check(&mut c, "q");
    assert!(s
        .log()
        .contains("aborting this background save, the previous RDB stays"));
    survived(&s, &mut c, "rdb_save");
}

#[test]
fn rdb_load_panic_refuses_restore_cleanly() {
    let (s, mut c) = armed("rdb_load", &[]);
    some_queues(&mut c);
    let dump = as_bytes(&ok(&mut c, &args!["DUMP", "q"]));
    let e = fails(&mut c, &args!["RESTORE", "q-copy", 0, dump]);
    assert!(e.contains("Bad data format"), "{e}");
    assert!(!exists(&mut c, "q-copy"));
    assert_check(&mut c, "q");
    survived(&s, &mut c, "rdb_load");
}

#[test]
fn aof_rewrite_panic_fails_the_rewrite_and_keeps_the_aof() {
    let (s, mut c) = armed(
        "aof_rewrite",
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"],
    );
    some_queues(&mut c);
    let idle = |c: &mut Con| {
        wait_for("AOF rewrite to finish", Duration::from_secs(30), || {
            aof_info(c) == (0, 0)
        })
    };
    idle(&mut c);
    ok(&mut c, &args!["BGREWRITEAOF"]);
    idle(&mut c);
    assert_eq!(
        info(&mut c, "persistence")["aof_last_bgrewrite_status"],
        "err"
    );
    // The AOF still replays to the same queues.
    let before = digests(&mut c);
    ok(&mut c, &args!["DEBUG", "LOADAOF"]);
    assert_same_digests("AOF after a failed rewrite", &before, &digests(&mut c));
    survived(&s, &mut c, "aof_rewrite");
}

#[test]
fn digest_panic_gives_a_digest_no_queue_has() {
    let (s, mut c) = armed("digest", &[]);
    some_queues(&mut c);
    let broken = digest(&mut c, "q");
    let (_t, mut ct) = start_server();
    some_queues(&mut ct);
    assert_ne!(broken, digest(&mut ct, "q"));
    assert_ne!(broken, "0".repeat(40));
    survived(&s, &mut c, "digest");
}

#[test]
fn mem_usage_panic_reports_no_module_memory() {
    let (s, mut c) = armed("mem_usage", &[]);
    some_queues(&mut c);
    let v = raw(&mut c, &args!["MEMORY", "USAGE", "q"]);
    assert!(error_text(&v).is_none(), "{v:?}");
    survived(&s, &mut c, "mem_usage");
}

#[test]
fn free_panic_still_deletes_the_key() {
    let (s, mut c) = armed("free", &[]);
    some_queues(&mut c);
    assert_eq!(as_int(&ok(&mut c, &args!["DEL", "q"])), 1);
    assert!(!exists(&mut c, "q"));
    assert_eq!(info(&mut c, "orca")["orca_queues"], "1");
    survived(&s, &mut c, "free");
}

#[test]
fn free_effort_panic_frees_in_the_background() {
    let (s, mut c) = armed("free_effort", &[]);
    some_queues(&mut c);
    assert_eq!(as_int(&ok(&mut c, &args!["UNLINK", "q"])), 1);
    assert!(!exists(&mut c, "q"));
    wait_for("the queue to be freed", Duration::from_secs(5), || {
        info(&mut c, "orca")["orca_queues"] == "1"
    });
    survived(&s, &mut c, "free_effort");
}

#[test]
fn copy_panic_refuses_the_copy() {
    let (s, mut c) = armed("copy", &[]);
    some_queues(&mut c);
    let v = raw(&mut c, &args!["COPY", "q", "q2"]);
    assert!(
        error_text(&v).is_some() || as_int(&v) == 0,
        "COPY under a panic: {v:?}"
    );
    assert!(!exists(&mut c, "q2"));
    assert_check(&mut c, "q");
    survived(&s, &mut c, "copy");
}

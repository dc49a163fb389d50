//! Limits: under `maxmemory` new jobs are refused while workers are still
//! served.

use crate::common::*;

#[test]
fn maxmemory_refuses_enqueue_but_serves_workers() {
    let s = Server::start(&["--maxmemory-policy", "noeviction"]);
    let mut c = s.conn();
    for i in 0..20 {
        enqueue_job(&mut c, "mq", &format!("m{i}"), Some("user.1"), 0);
    }
    let used = info_int(&mut c, "memory", "used_memory");
    ok(
        &mut c,
        &args!["CONFIG", "SET", "maxmemory", used + 512 * 1024],
    );
    let big = format!(r#"{{"key":"fill-{{}}","pad":"{}"}}"#, "y".repeat(64 * 1024));
    let mut refused_after = None;
    for i in 0..200 {
        let v = raw(
            &mut c,
            &args!["ORCA.ENQUEUE", "mq", big.replace("{}", &i.to_string())],
        );
        if let Some(e) = error_text(&v) {
            assert!(e.starts_with("OOM"), "{e}");
            refused_after = Some(i);
            break;
        }
    }
    let n =
        refused_after.expect("ORCA.ENQUEUE never refused: does the module allocate through Redis?");
    assert!(n > 0, "refused before anything was added");
    // The refused command's own 64 KiB argument may have been what tipped
    // the server over (Valkey counts it): make sure the dataset alone is
    // over the limit now.
    let used = info_int(&mut c, "memory", "used_memory");
    ok(&mut c, &args!["CONFIG", "SET", "maxmemory", used / 2]);
    let len = qlen(&mut c, "mq");
    let d = digest(&mut c, "mq");
    // Everything that adds is refused, with nothing changed.
    for cmd in [
        args!["ORCA.ENQUEUE", "mq", config("late", None, 0)],
        args!["ORCA.IMMEDIATE", "mq", config("late", None, 0)],
        args!["ORCA.REENQUEUE", "mq", config("late", None, 0), 5],
        args!["ORCA.ENQUEUE", "new-queue", config("late", None, 0)],
        args!["ORCA.SETTINGS", "new-queue", "ORDER", "FIFO"],
    ] {
        let e = fails(&mut c, &cmd);
        assert!(e.starts_with("OOM"), "{}: {e}", show_args(&cmd));
    }
    assert_eq!(digest(&mut c, "mq"), d);
    assert!(!exists(&mut c, "new-queue"));
    // Workers and readers still work.
    assert_eq!(qlen(&mut c, "mq"), len);
    assert_eq!(
        state(&mut c, "mq", &key_of("m3")).as_deref(),
        Some("queued")
    );
    ok(&mut c, &args!["ORCA.STATS", "mq"]);
    ok(&mut c, &args!["ORCA.LIST", "mq", "LIMIT", 5]);
    let h = held("mq", &pop(&mut c, "mq", LONG).expect("POP under OOM"));
    assert_eq!(state(&mut c, "mq", &h.key).as_deref(), Some("leased"));
    ok(&mut c, &args!["ORCA.EXTEND", "mq", &h.key, &h.lease, LONG]);
    assert_eq!(as_int(&ack_held(&mut c, &h)), 1);
    let h = held("mq", &pop(&mut c, "mq", LONG).unwrap());
    ok(
        &mut c,
        &args!["ORCA.NACK", "mq", &h.key, &h.lease, "DELAY", LONG],
    );
    assert_eq!(qlen(&mut c, "mq"), len - 2);
    assert_check(&mut c, "mq");
    // Room again: enqueue works.
    ok(&mut c, &args!["CONFIG", "SET", "maxmemory", 0]);
    enqueue_job(&mut c, "mq", "late", None, 0);
    assert_eq!(qlen(&mut c, "mq"), len - 1);
}

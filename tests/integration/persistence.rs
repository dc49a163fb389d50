//! Queues survive persistence exactly: DEBUG RELOAD, RDB restart, RDB save
//! then `kill -9`, DUMP/RESTORE. "Exactly" is checked three ways:
//! `DEBUG DIGEST-VALUE` of every queue, `ORCA.STATUS` of every job (nonce,
//! release time, position, ...) and the full pop order, after a seeded
//! workload of every command (`common/workload.rs`).

use crate::common::*;

/// Run the same pinned workload on `a` and on a control server, reload `a`
/// with `reload`, and check that `a` is unchanged by it and keeps behaving
/// exactly like the control afterwards.
fn reload_is_invisible(seed: u64, reload: impl FnOnce(&mut Server)) {
    let mut a = Server::start(&[]);
    let b = Server::start(&[]);
    let (mut ca, mut cb) = (a.conn(), b.conn());
    setup_orders(&mut ca);
    setup_orders(&mut cb);
    Workload::new(seed, true, &WORKLOAD_QUEUES).run(&mut ca, 400);
    Workload::new(seed, true, &WORKLOAD_QUEUES).run(&mut cb, 400);
    let before = observe(&mut ca, &WORKLOAD_QUEUES);
    assert_same(
        "two servers, same workload",
        &before.state,
        &workload_state(&mut cb, &WORKLOAD_QUEUES),
    );
    assert!(
        before.pops.iter().map(Vec::len).sum::<usize>() > 20,
        "workload too small"
    );

    drop(ca);
    reload(&mut a);
    let mut ca = a.conn();
    assert_observes(&mut ca, &WORKLOAD_QUEUES, &before, "across reload");

    // Hidden state (sequence numbers, front ties) must survive too: the
    // reloaded server keeps behaving exactly like the control.
    Workload::new(seed + 1000, true, &WORKLOAD_QUEUES).run(&mut ca, 300);
    Workload::new(seed + 1000, true, &WORKLOAD_QUEUES).run(&mut cb, 300);
    assert_same(
        "reloaded server vs control after more work",
        &workload_state(&mut cb, &WORKLOAD_QUEUES),
        &workload_state(&mut ca, &WORKLOAD_QUEUES),
    );
    for q in WORKLOAD_QUEUES {
        let pa: Vec<_> = pop_all(&mut ca, q).iter().map(job_fields).collect();
        let pb: Vec<_> = pop_all(&mut cb, q).iter().map(job_fields).collect();
        assert_eq!(pa, pb, "final pops of {q}");
    }
}

#[test]
fn debug_reload_is_invisible() {
    reload_is_invisible(11, |s| {
        let mut c = s.conn();
        ok(&mut c, &args!["DEBUG", "RELOAD"]);
    });
}

#[test]
fn rdb_restart_is_invisible() {
    reload_is_invisible(12, |s| s.restart());
}

#[test]
fn rdb_save_then_kill9_is_invisible() {
    reload_is_invisible(13, |s| {
        let mut c = s.conn();
        ok(&mut c, &args!["SAVE"]);
        drop(c);
        s.kill();
        s.start_again();
    });
}

#[test]
fn dump_restore_roundtrip() {
    let (_s, mut c) = start_server();
    setup_orders(&mut c);
    Workload::new(21, true, &WORKLOAD_QUEUES).run(&mut c, 300);
    for q in WORKLOAD_QUEUES {
        if as_int(&ok(&mut c, &args!["EXISTS", q])) == 0 {
            continue;
        }
        let blob = as_bytes(&ok(&mut c, &args!["DUMP", q]));
        let copy = format!("{q}:restored");
        ok(&mut c, &args!["RESTORE", &copy, "0", blob]);
        assert_eq!(digest(&mut c, &copy), digest(&mut c, q));
        assert_check(&mut c, &copy);
        let a: Vec<_> = pop_all(&mut c, &copy).iter().map(job_fields).collect();
        let b: Vec<_> = pop_all(&mut c, q).iter().map(job_fields).collect();
        assert_eq!(a, b, "pops of {q}");
    }
}

//! ACL users restricted to tenant `t1` never change tenant `t2`'s queue,
//! and never read it without read rights (`%R~t2:*`), for every command of
//! the table, every spelling of its counts and every order of its options,
//! sent directly, inside MULTI/EXEC and from a script. `%W~` alone allows
//! no command on a queue: every command reads the queue it changes.

use super::*;

const T1: &str = "t1:q";
const T2: &str = "t2:q";
const T3: &str = "t3:q";
const EMPTY: &str = "t1:none";

struct User {
    name: &'static str,
    rules: &'static [&'static str],
    /// May read `t2:*` (and only read it).
    reads_t2: bool,
}

const USERS: &[User] = &[
    User {
        name: "tenant",
        rules: &["~t1:*", "+@all"],
        reads_t2: false,
    },
    User {
        name: "worker",
        rules: &[
            "~t1:*",
            "-@all",
            "+orca.mpop",
            "+orca.pop",
            "+orca.ack",
            "+orca.mack",
            "+orca.nack",
            "+orca.extend",
            "+multi",
            "+exec",
            "+eval",
        ],
        reads_t2: false,
    },
    User {
        name: "reader",
        rules: &["~t1:*", "%R~t2:*", "+@all"],
        reads_t2: true,
    },
    User {
        name: "writer",
        rules: &["~t1:*", "%W~t2:*", "+@all"],
        reads_t2: false,
    },
];

fn login(s: &Server, admin: &mut Con, u: &User) -> Con {
    let mut a = args![
        "ACL",
        "SETUSER",
        u.name,
        "reset",
        "on",
        ">pw",
        "resetchannels"
    ];
    a.extend(u.rules.iter().map(|r| r.as_bytes().to_vec()));
    ok(admin, &a);
    let mut c = s.conn();
    ok(&mut c, &args!["AUTH", u.name, "pw"]);
    c
}

/// The three ways a client sends a command: directly, queued in MULTI and
/// run by EXEC, and from a script (`redis.call`, no keys declared).
fn sent(c: &mut Con, a: &[Vec<u8>], how: usize) -> Value {
    match how {
        0 => raw(c, a),
        1 => {
            ok(c, &args!["MULTI"]);
            let queued = raw(c, a);
            let exec = raw(c, &args!["EXEC"]);
            match error_text(&queued) {
                // Refused when queued (ACL is checked then): EXEC aborts.
                Some(_) => queued,
                None => exec,
            }
        }
        _ => {
            let mut e = args!["EVAL", "return redis.call(unpack(ARGV))", 0];
            e.extend(a.iter().cloned());
            raw(c, &e)
        }
    }
}

fn is_write(name: &str) -> bool {
    orca::redis::commands::COMMANDS
        .iter()
        .find(|c| c.name.to_str() == Ok(name))
        .map(|c| c.writes())
        .expect("a command of the table")
}

#[test]
fn restricted_users_never_reach_another_tenants_queue() {
    let (s, mut admin) = start_server();
    let mut ds = Dataset::new(&mut admin, [T1, T2, T3]);
    let (own, x) = (ds.tenants[0].clone(), ds.tenants[1].clone());
    for u in USERS {
        let mut c = login(&s, &mut admin, u);
        let mut own_ran = 0;
        for name in command_names() {
            // Aimed at t2 (alone, or with t1's queues), then at t1 itself.
            let at_t2 = invocations(&name, &x, &own, EMPTY);
            let at_t1 = invocations(&name, &own, &own, EMPTY);
            for (inv, how) in at_t2
                .iter()
                .flat_map(|i| (0..3).map(move |h| (i, h)))
                .chain(at_t1.iter().map(|i| (i, 0)))
            {
                let v = sent(&mut c, &inv.args, how);
                let read = secrets_read(&v, &[T2, T3]);
                let ch = ds.settle(&mut admin);
                let what = || format!("user {} ({how}): {}", u.name, inv.show());
                assert!(
                    ch.iter().all(|k| k.starts_with("t1:")),
                    "{}: changed {ch:?}",
                    what()
                );
                if !u.reads_t2 || error_text(&v).is_some() {
                    assert!(read.is_empty(), "{}: read {read:?}: {v:?}", what());
                }
                let names_t2 = inv.keys.iter().any(|k| k.starts_with("t2:"));
                if inv.canonical && names_t2 {
                    // ACL itself refused it (the module was never asked),
                    // unless the user may read t2 and the command only reads.
                    let e = error_text(&v).unwrap_or_default();
                    if u.reads_t2 && !is_write(&name) {
                        assert!(error_text(&v).is_none(), "{}: {e}", what());
                    } else {
                        // NOPERM, or its form inside a script (Redis 7.0,
                        // Valkey 8).
                        assert!(
                            e.contains("NOPERM")
                                || e.contains("The user executing the script can't")
                                || e.contains("ACL failure in script"),
                            "{}: {v:?}",
                            what()
                        );
                    }
                }
                if !inv.keys.iter().any(|k| k.starts_with("t2:"))
                    && inv.canonical
                    && how == 0
                    && error_text(&v).is_none()
                {
                    own_ran += 1;
                }
            }
        }
        // The restrictions still let each user work on its own queues.
        let expected = if u.name == "worker" { 10 } else { 40 };
        assert!(
            own_ran >= expected,
            "user {} ran only {own_ran} commands on its own queues",
            u.name
        );
    }
    check_all(&mut admin);
}

/// The worker-only user of the issue: `ORCA.MPOP 02` (and `002`) over its
/// own queue and another tenant's, with `LEASE 0 COUNT 100`, is refused and
/// hands nothing out; the same with a count Redis reads is `NOPERM`.
#[test]
fn the_probe_of_the_issue_is_refused() {
    let (s, mut admin) = start_server();
    Dataset::new(&mut admin, [T1, T2, T3]);
    let u = &USERS[1];
    let mut w = login(&s, &mut admin, u);
    let before = digest(&mut admin, T2);
    for n in ["02", "002"] {
        let e = fails(
            &mut w,
            &args!["ORCA.MPOP", n, T1, T2, "LEASE", 0, "COUNT", 100],
        );
        assert!(e.starts_with("ERR numkeys"), "{n}: {e}");
    }
    let e = fails(
        &mut w,
        &args!["ORCA.MPOP", 2, T1, T2, "LEASE", 0, "COUNT", 100],
    );
    assert!(e.starts_with("NOPERM"), "{e}");
    assert_eq!(digest(&mut admin, T2), before);
    // Its own queue serves it.
    let v = ok(&mut w, &args!["ORCA.MPOP", 1, T1, "LEASE", 0, "COUNT", 100]);
    assert!(matches!(v, Value::Array(ref a) if !a.is_empty()), "{v:?}");
}

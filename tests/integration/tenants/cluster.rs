//! In a cluster, a command runs only where every key Redis extracted is in
//! one slot that the node serves: for every command of the table, aimed at
//! a queue whose slot the node no longer serves (alone or next to a queue
//! of a served slot), in every spelling of its counts, the node refuses it
//! (`CLUSTERDOWN`/`CROSSSLOT` where Redis reads the count, the module's
//! `ERR` where it cannot) and nothing changes. Queues of one slot (a hash
//! tag) are served together.

use std::time::Duration;

use super::*;

const T1: &str = "t1:q";
const T2: &str = "t2:q";
const T3: &str = "t3:q";
const EMPTY: &str = "t1:none";

fn keyslot(c: &mut Con, k: &str) -> i64 {
    as_int(&ok(c, &args!["CLUSTER", "KEYSLOT", k]))
}

fn cluster_ok(c: &mut Con) -> bool {
    as_string(&ok(c, &args!["CLUSTER", "INFO"])).contains("cluster_state:ok")
}

/// A cluster of one node serving every slot (with `extra` settings), once
/// its state is ok.
fn one_node_cluster(extra: &[&str]) -> (Server, Con) {
    let bus = free_port().to_string();
    let mut a = vec![
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-port",
        &bus,
    ];
    a.extend_from_slice(extra);
    let s = Server::start(&a);
    let mut c = s.conn();
    ok(&mut c, &args!["CLUSTER", "ADDSLOTSRANGE", 0, 16383]);
    wait_for("cluster_state:ok", Duration::from_secs(30), || {
        cluster_ok(&mut c)
    });
    (s, c)
}

#[test]
fn a_slot_not_served_and_cross_slot_queues_are_refused_in_every_spelling() {
    let (_s, mut c) = one_node_cluster(&["--cluster-require-full-coverage", "no"]);
    let ds = Dataset::new(&mut c, [T1, T2, T3]);
    let slot = keyslot(&mut c, T2);
    for k in [T1, T3, EMPTY] {
        assert_ne!(keyslot(&mut c, k), slot, "{k} shares t2's slot");
    }
    // t2's slot is no longer served here; its queue stays in the dataset.
    ok(&mut c, &args!["CLUSTER", "DELSLOTS", slot]);
    wait_for("cluster_state:ok", Duration::from_secs(30), || {
        cluster_ok(&mut c)
    });
    let before = key_digests(&mut c);
    assert!(before.contains_key(T2), "DELSLOTS dropped the queue");
    let (own, x) = (ds.tenants[0].clone(), ds.tenants[1].clone());
    let mut refused = 0;
    for name in command_names() {
        for inv in invocations(&name, &x, &own, EMPTY) {
            let v = raw(&mut c, &inv.args);
            let e = error_text(&v)
                .unwrap_or_else(|| panic!("{} ran in a slot not served: {v:?}", inv.show()));
            if inv.canonical {
                assert!(
                    e.starts_with("CLUSTERDOWN") || e.starts_with("CROSSSLOT"),
                    "{}: {e}",
                    inv.show()
                );
            } else {
                assert!(
                    e.starts_with("ERR ")
                        || e.starts_with("CLUSTERDOWN")
                        || e.starts_with("CROSSSLOT"),
                    "{}: {e}",
                    inv.show()
                );
            }
            assert_eq!(key_digests(&mut c), before, "{} changed keys", inv.show());
            refused += 1;
        }
    }
    assert!(refused > 200, "{refused}");

    // Two queues of one served slot are served together; of two slots not.
    enqueue_job(&mut c, "{t1}a", "x", None, 0);
    enqueue_job(&mut c, "{t1}b", "y", None, 0);
    enqueue_job(&mut c, "{t3}c", "z", None, 0);
    for (n, canonical) in spellings(2) {
        let same = args!["ORCA.MPOP", n.clone(), "{t1}a", "{t1}b", "LEASE", LONG];
        let cross = args!["ORCA.MPOP", n.clone(), "{t1}a", "{t3}c", "LEASE", LONG];
        let e = fails(&mut c, &cross);
        if canonical {
            assert!(e.starts_with("CROSSSLOT"), "{e}");
            let f = fields(ok(&mut c, &same));
            assert_eq!(text(&f, "queue"), "{t1}a");
        } else {
            assert!(
                e.starts_with("ERR ") || e.starts_with("CROSSSLOT"),
                "{}: {e}",
                show_args(&cross)
            );
            let e = fails(&mut c, &same);
            assert!(e.starts_with("ERR "), "{}: {e}", show_args(&same));
        }
    }
    assert_eq!(qlen(&mut c, "{t3}c"), 1);
}

/// What Cluster checks is what the module's mirror says it checks
/// (`keyspec::cluster_keys`: the locator through `getkeys-api` for MPOP,
/// ACK and NACK, the first argument for the others): over random argument
/// lists of every command (the same as `tenants::mirror`'s), a node serving
/// every slot answers `CROSSSLOT` exactly when those keys span two slots.
#[test]
fn cluster_checks_the_keys_the_mirror_names() {
    use super::mirror::orca_args;
    use orca::redis::commands::COMMANDS;
    use orca::redis::keyspec::cluster_keys;
    use std::collections::{BTreeSet, HashMap};

    let (_s, mut c) = one_node_cluster(&[]);
    let mut slots: HashMap<Vec<u8>, i64> = HashMap::new();
    let mut rng = Rng::new(0xc105);
    let (mut cross, mut one) = (0, 0);
    for (i, cmd) in COMMANDS.iter().enumerate() {
        for _ in 0..400 {
            let a = orca_args(&mut rng, i);
            let mut spanned = BTreeSet::new();
            for p in cluster_keys(cmd.keys, &a) {
                let k = a[p].clone();
                let slot = match slots.get(&k) {
                    Some(s) => *s,
                    None => {
                        let s = as_int(&ok(&mut c, &args!["CLUSTER", "KEYSLOT", k.clone()]));
                        slots.insert(k, s);
                        s
                    }
                };
                spanned.insert(slot);
            }
            let v = raw(&mut c, &a);
            let e = error_text(&v).unwrap_or_default();
            assert_eq!(
                e.starts_with("CROSSSLOT"),
                spanned.len() > 1,
                "{}: {v:?}",
                show_args(&a)
            );
            if spanned.len() > 1 {
                cross += 1;
            } else {
                one += 1;
            }
        }
    }
    assert!(cross > 20 && one > 500, "{cross} {one}");
}

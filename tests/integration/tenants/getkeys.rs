//! `COMMAND GETKEYS` names exactly the queues each command reads or
//! changes, for every command of the table, every spelling of its counts
//! and every order of its options; where Redis extracts no keys (and so ACL
//! and Cluster check none), the module refuses the command and changes
//! nothing.

use super::*;

const T1: &str = "t1:q";
const T2: &str = "t2:q";
const T3: &str = "t3:q";
const EMPTY: &str = "t1:none";

#[test]
fn getkeys_names_exactly_what_every_command_reads_or_changes() {
    let (_s, mut c) = start_server();
    let mut ds = Dataset::new(&mut c, [T1, T2, T3]);
    let (own, x) = (ds.tenants[0].clone(), ds.tenants[1].clone());
    let mut counted = 0;
    for name in command_names() {
        let mut succeeded = 0;
        for inv in invocations(&name, &x, &own, EMPTY) {
            let gk = getkeys(&mut c, &inv.args);
            if inv.canonical {
                assert_eq!(gk.as_ref(), Some(&inv.keys), "GETKEYS {}", inv.show());
            } else if let Some(k) = &gk {
                // Where Redis reads keys of a spelling the module refuses
                // (MPOP's count cast to 32 bits, a refused FORWARD), they
                // are the ones named: the module's refusal then changes
                // nothing anyway.
                assert_eq!(k, &inv.keys, "GETKEYS {}", inv.show());
            }
            let v = raw(&mut c, &inv.args);
            let read = secrets_read(&v, &[T1, T2, T3]);
            let ch = ds.settle(&mut c);
            match (error_text(&v), &gk) {
                (Some(e), _) => {
                    assert!(ch.is_empty(), "{}: refused ({e}) but changed {ch:?}", inv.show());
                    assert!(
                        e.starts_with("ERR ") || e.starts_with("WRONGTYPE"),
                        "{}: {e}",
                        inv.show()
                    );
                    assert!(
                        !inv.canonical,
                        "{}: refused as the admin user: {e}",
                        inv.show()
                    );
                }
                (None, None) => panic!(
                    "{} ran though Redis extracts no keys from it (ACL and Cluster checked none): {v:?}",
                    inv.show()
                ),
                (None, Some(keys)) => {
                    succeeded += 1;
                    for k in ch.iter().chain(&read) {
                        assert!(
                            keys.contains(k),
                            "{} touched {k}, not among the keys Redis checked {keys:?}",
                            inv.show()
                        );
                    }
                }
            }
            counted += 1;
        }
        assert!(succeeded > 0, "{name}: no invocation ran");
    }
    assert!(counted > 200, "{counted} invocations");
    check_all(&mut c);
}

/// The probe of the issue, spelled out: a count Redis cannot read is
/// refused with a clear error, whatever the options after it.
#[test]
fn counts_redis_cannot_read_are_refused() {
    let (_s, mut c) = start_server();
    let ds = Dataset::new(&mut c, [T1, T2, T3]);
    let (k, l) = &ds.tenants[0].leased;
    let lz = "ERR numkeys must be a plain decimal integer without leading zeros (as Redis reads key counts)";
    let range = "ERR numkeys must be between 1 and the number of queues given";
    for (n, want) in [
        ("02", lz),
        ("002", lz),
        ("-0", lz),
        ("+2", "ERR numkeys must be an integer"),
        (" 2", "ERR numkeys must be an integer"),
        ("4294967298", range),
        ("0", range),
    ] {
        let a = args!["ORCA.MPOP", n, T1, T2, "LEASE", 0, "COUNT", 100];
        assert_eq!(getkeys(&mut c, &a).filter(|k| k.len() != 2), None, "{n}");
        assert_eq!(assert_rejected(&mut c, T2, &a, &[want]), want, "{n}");
    }
    let e = fails(&mut c, &args!["ORCA.MACK", T1, "01", k, l]);
    assert_eq!(
        e,
        "ERR numleases must be a plain decimal integer without leading zeros (as Redis reads key counts)"
    );
    assert_eq!(
        fails(&mut c, &args!["ORCA.MACK", T1, "+1", k, l]),
        "ERR numleases must be an integer"
    );
    let v = ok(&mut c, &args!["ORCA.MACK", T1, "1", k, l]);
    assert_eq!(v, Value::Array(vec![Value::Int(1)]));
}

//! What a dataset holds, to compare two servers or one server before and
//! after: `DEBUG DIGEST-VALUE` of queues, `ORCA.CHECK` of every queue,
//! lengths.

use std::collections::BTreeMap;

use redis::Value;

use super::reply::*;
use crate::args;

/// `DEBUG DIGEST-VALUE <key>` as hex text.
pub fn digest(con: &mut Con, key: &str) -> String {
    match ok(con, &args!["DEBUG", "DIGEST-VALUE", key]) {
        Value::Array(items) if items.len() == 1 => as_string(&items[0]),
        other => panic!("unexpected DIGEST-VALUE reply {other:?}"),
    }
}

/// `ORCA.LEN <key>`.
pub fn qlen(con: &mut Con, key: &str) -> i64 {
    as_int(&ok(con, &args!["ORCA.LEN", key]))
}

/// `ORCA.CHECK <key>` must answer OK.
pub fn assert_check(con: &mut Con, key: &str) {
    let v = raw(con, &args!["ORCA.CHECK", key]);
    assert!(
        matches!(&v, Value::Okay) || matches!(&v, Value::SimpleString(s) if s == "OK"),
        "ORCA.CHECK {key}: {v:?}"
    );
}

/// Every key of type `orcaqueue` in the selected db, sorted.
pub fn orca_queues(c: &mut Con) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    let mut out: Vec<String> = keys
        .into_iter()
        .filter(|k| as_string(&ok(c, &args!["TYPE", k])) == "orcaqueue")
        .collect();
    out.sort();
    out
}

/// The digest of every queue in the selected db.
pub fn digests(c: &mut Con) -> BTreeMap<String, String> {
    orca_queues(c)
        .into_iter()
        .map(|q| {
            let d = digest(c, &q);
            (q, d)
        })
        .collect()
}

/// Digests of every key (of any type) and of the whole dataset (`*`).
pub fn dataset_digests(c: &mut Con) -> BTreeMap<String, String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    let mut out: BTreeMap<String, String> =
        keys.iter().map(|k| (k.clone(), digest(c, k))).collect();
    out.insert("*".into(), as_string(&ok(c, &args!["DEBUG", "DIGEST"])));
    out
}

/// `ORCA.CHECK` of every queue in the selected db.
pub fn check_all(c: &mut Con) {
    for q in orca_queues(c) {
        assert_check(c, &q);
    }
}

/// The same queues with the same digests, and at least one.
pub fn assert_same_digests(what: &str, a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) {
    let ka: Vec<&String> = a.keys().collect();
    let kb: Vec<&String> = b.keys().collect();
    assert_eq!(ka, kb, "{what}: queue keys differ");
    for (k, d) in a {
        assert_eq!(Some(d), b.get(k), "{what}: digest of {k} differs");
    }
    assert!(!a.is_empty(), "{what}: no queues compared");
}

/// Two observations are equal; else the first differences are shown.
pub fn assert_same(what: &str, a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) {
    if a == b {
        return;
    }
    let mut diffs = Vec::new();
    for k in a.keys().chain(b.keys()) {
        if a.get(k) != b.get(k) && !diffs.iter().any(|(d, _, _)| d == k) {
            diffs.push((k.clone(), a.get(k).cloned(), b.get(k).cloned()));
        }
    }
    let shown: Vec<String> = diffs
        .iter()
        .take(10)
        .map(|(k, x, y)| format!("{k}:\n    before {x:?}\n    after  {y:?}"))
        .collect();
    panic!(
        "{what}: {} differences\n  {}",
        diffs.len(),
        shown.join("\n  ")
    );
}

/// Every field of a reply, values in their debug form, sorted by name.
pub fn sorted(f: &Fields) -> BTreeMap<String, String> {
    f.iter()
        .map(|(k, v)| (k.clone(), format!("{v:?}")))
        .collect()
}

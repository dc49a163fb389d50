//! Upgrades: an RDB written by an earlier release of the module loads into
//! this one, the queues show exactly what they showed before, and they keep
//! working. One fixture per encoding version a release wrote:
//!
//! | file | fixture | written by |
//! |---|---|---|
//! | `v1.rs` | `tests/fixtures/v1/` | commit 308584e, the last release with encoding 1 (before stack keys, gates and per-queue settings) |
//! | `v2.rs` | `tests/fixtures/v2/` | commit eb5f3c2, the last release with encoding 2 (gates, held jobs, windows, caps, lifetimes, bounds) |
//!
//! Each fixture holds `dump.rdb`, saved after the file's `build_dataset`,
//! and `expected.txt`, what that release showed of it (`observations`). To
//! write one again with the old module:
//!
//!     ORCA_MODULE=/path/to/old/liborca.so ORCA_WRITE_FIXTURE=v2 \
//!         cargo test --release --test integration upgrade::v2
//!
//! Fields a later release adds to a reply are not compared; every field the
//! old release showed must be the same.

mod v1;
mod v2;

use std::collections::BTreeMap;
use std::path::PathBuf;

use redis::Value;

use crate::common::*;

/// Far in the future, so no lease or retry falls due while the test runs.
pub const T: i64 = 4_102_444_800_000;

pub fn fixture_dir(version: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(version)
}

/// Each field of a job-like reply under `prefix`.
fn record(out: &mut BTreeMap<String, String>, prefix: &str, f: &Fields) {
    for (k, v) in sorted(f) {
        out.insert(format!("{prefix} {k}"), v);
    }
    // STATUS's `leases` is one value, a list of maps: shown with the fields
    // of every release (the newer ones are checked by their own tests).
    if f.iter().any(|(k, _)| k == "leases") {
        let old: Vec<String> = leases(f)
            .iter()
            .map(|l| {
                let kept: Vec<Value> = ["attempts", "deadline", "lease"]
                    .iter()
                    .flat_map(|k| [Value::BulkString(k.as_bytes().to_vec()), get(l, k).clone()])
                    .collect();
                format!("{:?}", Value::Array(kept))
            })
            .collect();
        out.insert(
            format!("{prefix} leases"),
            format!("array([{}])", old.join(", ")),
        );
    }
}

/// What a server shows of `queues`: for each, its length and order, the
/// whole pop order (popped from a copy), the STATUS and RESULT of every
/// name in `names`, and the dead list; with `policies`, also every
/// statistic (but the wait times, which move with the clock), setting and
/// listing by state. As sorted `name<TAB>value` lines.
pub fn observations(
    c: &mut Con,
    queues: &[&str],
    names: &[String],
    policies: bool,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for &q in queues {
        out.insert(format!("{q} len"), qlen(c, q).to_string());
        let st = fields(ok(c, &args!["ORCA.SETTINGS", q]));
        out.insert(format!("{q} order"), text(&st, "order"));
        for (i, job) in pops_via_copy(c, q).iter().enumerate() {
            for (k, v) in job {
                out.insert(format!("{q} pop {i:03} {k}"), v.clone());
            }
        }
        for name in names {
            let v = ok(c, &args!["ORCA.STATUS", q, key_of(name)]);
            if v == Value::Nil {
                continue;
            }
            record(&mut out, &format!("{q} status {name}"), &fields(v));
            let r = ok(c, &args!["ORCA.RESULT", q, key_of(name)]);
            if r != Value::Nil {
                out.insert(format!("{q} result {name}"), as_string(&r));
            }
        }
        let Value::Array(dead) = ok(c, &args!["ORCA.DEAD", q, "LIST"]) else {
            panic!("DEAD LIST")
        };
        for (i, d) in dead.into_iter().enumerate() {
            record(&mut out, &format!("{q} dead {i}"), &fields(d));
        }
        if policies {
            let mut st = stats(c, q);
            st.remove("wait_all");
            st.remove("wait_released");
            for (k, v) in st {
                out.insert(format!("{q} stats {k}"), format!("{v:?}"));
            }
            for (k, v) in sorted(&settings(c, q)) {
                out.insert(format!("{q} settings {k}"), v);
            }
            for state in ["QUEUED", "HELD", "LEASED", "DELAYED", "DEAD"] {
                for (i, item) in list_state(c, q, state, &[]).iter().enumerate() {
                    record(&mut out, &format!("{q} list {state} {i:03}"), item);
                }
            }
        }
    }
    out
}

pub fn render(obs: &BTreeMap<String, String>) -> String {
    obs.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect()
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// With `ORCA_WRITE_FIXTURE=<version>`: build the dataset on a fresh server
/// (the module under `ORCA_MODULE` is the old release), save it, and write
/// the fixture. Returns whether it did.
/// `build` returns facts of the dataset the test needs later (`meta ...`
/// entries, e.g. a lease token), kept in `expected.txt` too.
pub fn write_fixture(
    version: &str,
    build: impl FnOnce(&mut Con) -> BTreeMap<String, String>,
    observe: impl FnOnce(&mut Con) -> BTreeMap<String, String>,
) -> bool {
    if std::env::var("ORCA_WRITE_FIXTURE").ok().as_deref() != Some(version) {
        return false;
    }
    let dir = fixture_dir(version);
    let (s, mut c) = start_server();
    let meta = build(&mut c);
    ok(&mut c, &args!["SAVE"]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(s.dir.join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let mut expected = observe(&mut c);
    expected.extend(meta.into_iter().map(|(k, v)| (format!("meta {k}"), v)));
    std::fs::write(dir.join("expected.txt"), render(&expected)).unwrap();
    true
}

/// A server started on the fixture's `dump.rdb`, every queue checked, and
/// what the old release showed (`expected.txt`).
pub fn load_fixture(version: &str, queues: &[&str]) -> (Server, BTreeMap<String, String>) {
    let dir = fixture_dir(version);
    let expected = parse(&std::fs::read_to_string(dir.join("expected.txt")).expect("fixture"));
    assert!(
        expected.len() > 500,
        "the fixture is too small to mean much"
    );
    let mut s = Server::start(&[]);
    s.kill();
    std::fs::copy(dir.join("dump.rdb"), s.dir.join("dump.rdb"))
        .unwrap_or_else(|e| panic!("tests/fixtures/{version}/dump.rdb: {e}"));
    s.start_again();
    let mut c = s.conn();
    for &q in queues {
        assert_check(&mut c, q);
    }
    (s, expected)
}

/// Nothing the old release showed is missing or changed, and no job, pop or
/// listed entry appeared; fields a later release adds to a job, a status, a
/// dead letter, a statistic or a setting are not compared.
pub fn assert_unchanged(
    version: &str,
    expected: &BTreeMap<String, String>,
    got: &BTreeMap<String, String>,
) {
    let mut diffs = Vec::new();
    for (k, want) in expected {
        match got.get(k) {
            Some(v) if v == want => {}
            other => diffs.push(format!("{k}: was {want}, now {other:?}")),
        }
    }
    // A finished job whose result is kept was nil to STATUS before state
    // `done` existed: its status and result are new, not changed.
    let done: Vec<String> = got
        .iter()
        .filter(|(k, v)| k.ends_with(" state") && v.contains("\"done\""))
        .filter_map(|(k, _)| k.strip_suffix(" state").map(|e| format!("{e} ")))
        .filter(|e| !expected.keys().any(|x| x.starts_with(e)))
        .collect();
    let finished = |k: &str| {
        done.iter().any(|e| k.starts_with(e.as_str()))
            || done
                .iter()
                .any(|e| k == e.replacen(" status ", " result ", 1).trim_end())
    };
    for k in got.keys().filter(|k| !finished(k)) {
        let is_new_field = [" status ", " dead ", " stats ", " settings ", " list "]
            .iter()
            .any(|part| k.contains(part))
            && entry_of(k).is_some_and(|e| expected.keys().any(|x| x.starts_with(&e)));
        let is_new_field = is_new_field || k.contains(" stats ") || k.contains(" settings ");
        if !expected.contains_key(k) && !is_new_field {
            diffs.push(format!("{k}: new {}", got[k]));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences after loading the {version} RDB:\n{}",
        diffs.len(),
        diffs[..diffs.len().min(40)].join("\n")
    );
}

/// The entry an observation's name belongs to (all but its last word: the
/// field), with a trailing space, so a new field of an entry the old release
/// showed is recognised, and a whole new entry is not.
fn entry_of(k: &str) -> Option<String> {
    k.rsplit_once(' ').map(|(entry, _)| format!("{entry} "))
}

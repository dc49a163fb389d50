//! Checks that many tests share: the fields of job replies, the pop order
//! of a queue, and "refused with an error, nothing changed".

use std::collections::HashSet;

use redis::Value;

use super::jobs::*;
use super::reply::*;
use super::state::*;
use crate::args;

/// The error of a worker command whose lease is not held.
pub const LEASE_NOT_HELD: &str = "NOLEASE ";
/// The error of a worker command whose job was deleted while it ran.
pub const CANCELLED: &str = "CANCELLED ";
/// The error of `ORCA.POP ... BLOCK` where blocking is not allowed.
pub const BLOCK_REFUSED: &str = "BLOCK is not allowed inside MULTI/EXEC or scripts";

/// Fields of every job reply.
pub const JOB_FIELDS: [&str; 8] = [
    "key",
    "collation",
    "immediate",
    "nonce",
    "created_at",
    "release_at",
    "attempts",
    "payload",
];

/// The reply of a command that writes a job (ENQUEUE, IMMEDIATE, REENQUEUE,
/// MOVE): every field of a job reply but `payload`, plus `extra`.
pub fn assert_write_fields(f: &Fields, extra: &[&str]) {
    let got: HashSet<&str> = f.keys().map(String::as_str).collect();
    let want: HashSet<&str> = JOB_FIELDS
        .iter()
        .filter(|k| **k != "payload")
        .chain(extra)
        .copied()
        .collect();
    let missing: Vec<&&str> = want.difference(&got).collect();
    assert!(missing.is_empty(), "reply lacks fields {missing:?}: {f:?}");
    assert!(
        !got.contains("payload"),
        "write reply carries the payload: {f:?}"
    );
}

/// The payload stored for `key` (from ORCA.STATUS).
pub fn stored_payload(c: &mut redis::Connection, q: &str, f: &Fields) -> Vec<u8> {
    as_bytes(get(&must_status(c, q, &text(f, "key")), "payload")).to_vec()
}

/// The reply has every field of a job reply plus `extra` (further fields,
/// e.g. of later features, are allowed).
pub fn assert_field_names(f: &Fields, extra: &[&str]) {
    let got: HashSet<&str> = f.keys().map(String::as_str).collect();
    let want: HashSet<&str> = JOB_FIELDS.iter().chain(extra).copied().collect();
    let missing: Vec<&&str> = want.difference(&got).collect();
    assert!(missing.is_empty(), "reply lacks fields {missing:?}: {f:?}");
}

pub fn assert_order(c: &mut redis::Connection, q: &str, expect: &[(&str, i64)]) {
    for (i, (name, release)) in expect.iter().enumerate() {
        let f = must_status(c, q, &key_of(name));
        assert_field_names(&f, &["state", "position"]);
        assert_eq!(text(&f, "state"), "queued");
        assert_eq!(int(&f, "position"), i as i64 + 1, "position of {name}");
        assert_eq!(int(&f, "release_at"), *release, "release_at of {name}");
    }
    assert_eq!(qlen(c, q), expect.len() as i64);
    assert_check(c, q);
    let statuses: Vec<Fields> = expect
        .iter()
        .map(|(n, _)| must_status(c, q, &key_of(n)))
        .collect();
    for (i, (name, release)) in expect.iter().enumerate() {
        let p = pop(c, q, 0).unwrap_or_else(|| panic!("queue empty before {name}"));
        assert_field_names(&p, &[]);
        assert_eq!(text(&p, "key"), key_of(name), "pop #{}", i + 1);
        assert_eq!(
            int(&p, "release_at"),
            *release,
            "popped release_at of {name}"
        );
        assert_eq!(int(&p, "attempts"), 1);
        for field in ["nonce", "created_at", "collation", "immediate", "payload"] {
            assert_eq!(get(&p, field), get(&statuses[i], field), "{name}: {field}");
        }
    }
    assert!(pop(c, q, 0).is_none());
    let st = settings(c, q);
    assert_eq!((int(&st, "jobs"), int(&st, "collations")), (0, 0), "{st:?}");
}

/// What must not change when a command is refused.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub exists: bool,
    pub digest: Option<String>,
    pub len: i64,
}

pub fn snapshot(c: &mut redis::Connection, q: &str) -> Snapshot {
    let exists = exists(c, q);
    let digest = exists.then(|| digest(c, q));
    let len = if exists { qlen(c, q) } else { 0 };
    Snapshot {
        exists,
        digest,
        len,
    }
}

/// Run `args`, which must be refused with an error starting with one of
/// `prefixes`, leave `q` unchanged (existence, digest, length), leave
/// ORCA.CHECK OK and the server answering. Returns the error text.
pub fn assert_rejected(
    c: &mut redis::Connection,
    q: &str,
    args: &[Vec<u8>],
    prefixes: &[&str],
) -> String {
    let before = snapshot(c, q);
    let e = fails(c, args);
    assert!(
        prefixes.iter().any(|p| e.starts_with(p)),
        "{}: error {e:?} should start with one of {prefixes:?}",
        show_args(args)
    );
    assert!(
        !e.contains('\n') && !e.contains('\r'),
        "multi-line error {e:?}"
    );
    assert_eq!(snapshot(c, q), before, "{} changed {q}", show_args(args));
    if before.exists {
        assert_check(c, q);
    }
    assert_eq!(as_string(&ok(c, &args!["PING"])), "PONG");
    e
}

/// A malformed command (docs/commands.md, "Error codes").
pub const ERR: &[&str] = &["ERR "];
/// A refused job config.
pub const BADCONFIG: &[&str] = &["BADCONFIG "];
/// Any code of the module's own (a queue condition) or ERR.
pub const ERR_CODES: &[&str] = &[
    "ERR ",
    "BADCONFIG ",
    "NOJOB ",
    "IMMEDIATE ",
    "LEASED ",
    "DELAYED ",
    "DEAD ",
    "HELD ",
    "NOTQUEUED ",
    "ALREADYQUEUED ",
    "NOLEASE ",
    "CANCELLED ",
    "QUEUEFULL ",
    "TOOLARGE ",
    "TOOMANY ",
    "TIMERANGE ",
    "CORRUPT ",
    "INVARIANT ",
];

/// The last delivery of `key` completes: ACK answers 1, the job is gone and
/// the queue passes ORCA.CHECK.
pub fn assert_acked_and_gone(c: &mut Con, q: &str, key: &str, lease: &str) {
    must_ack(c, q, key, lease);
    assert_eq!(status(c, q, key), None);
    assert_check(c, q);
}

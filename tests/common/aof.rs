//! The append-only file: waiting for rewrites, and the base file of the
//! multi-part AOF (`appendonlydir/`) with its contents.

use std::path::Path;
use std::time::Duration;

use super::reply::Con;
use super::server::{info, info_int};
use super::wait::wait_for;

/// `aof_rewrite_in_progress` and `aof_rewrite_scheduled` of `INFO persistence`.
pub fn aof_info(c: &mut Con) -> (i64, i64) {
    (
        info_int(c, "persistence", "aof_rewrite_in_progress"),
        info_int(c, "persistence", "aof_rewrite_scheduled"),
    )
}

/// Wait until no AOF rewrite runs or is scheduled (at most 30 s); the last
/// one must have succeeded.
pub fn wait_aof_rewrite_idle(c: &mut Con) {
    wait_for("AOF rewrite to finish", Duration::from_secs(30), || {
        aof_info(c) == (0, 0)
    });
    let inf = info(c, "persistence");
    assert_eq!(
        inf.get("aof_last_bgrewrite_status").map(String::as_str),
        Some("ok"),
        "{inf:?}"
    );
}

/// The base file of the multi-part AOF in a server's `dir` (its name and
/// contents), or `None` if there is none (yet).
pub fn aof_base(dir: &Path) -> Option<(String, Vec<u8>)> {
    let adir = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(adir.join("appendonly.aof.manifest")).ok()?;
    let base = manifest.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 6 && f[0] == "file" && f[4] == "type" && f[5] == "b").then(|| f[1].to_string())
    })?;
    let bytes = std::fs::read(adir.join(&base)).ok()?;
    Some((base, bytes))
}

//! The fuzz run's plumbing: batches on the wire, the blocking connection,
//! `ORCA.CHECK` sweeps, AOF rewrites, the server log, a `MONITOR` copy.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::common::*;

use super::replies::*;
use super::wire::*;
use super::*;

pub fn alive(pid: Option<u32>) -> bool {
    let Some(pid) = pid else { return false };
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Pipelined send; the replies in order.
pub fn send_batch(con: &mut Wire, batch: &[Sent]) -> std::io::Result<Vec<R>> {
    let cmds: Vec<&[Vec<u8>]> = batch.iter().map(|s| s.args.as_slice()).collect();
    con.pipeline(&cmds)
}

/// Replace the timeout of a top-level blocking pop by a short one, so the
/// pipeline never waits on itself.
pub fn shorten_blocks(s: &mut Sent) {
    if !eq_ci(&s.args[0], "ORCA.POP") && !eq_ci(&s.args[0], "ORCA.MPOP") {
        return;
    }
    for i in 0..s.args.len().saturating_sub(1) {
        if eq_ci(&s.args[i], "BLOCK") {
            let v = std::str::from_utf8(&s.args[i + 1])
                .ok()
                .and_then(|t| t.parse::<i64>().ok());
            if let Some(v) = v {
                if (0..=MAX_TIME).contains(&v) && !(1..=20).contains(&v) {
                    s.args[i + 1] = b"5".to_vec();
                }
            }
        }
    }
}

pub fn keys_of_type(con: &mut Wire, db: i64) -> Vec<Vec<u8>> {
    con.call(&args!["SELECT", db]);
    let keys: Vec<Vec<u8>> = match con.call(&args!["KEYS", "*"]) {
        R::Array(items) => items
            .into_iter()
            .filter_map(|v| match v {
                R::Bulk(b) => Some(b),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    keys.into_iter()
        .filter(|k| con.call(&args!["TYPE", k.clone()]) == R::Status(b"orcaqueue".to_vec()))
        .collect()
}

/// ORCA.CHECK on every queue of db 0 and 1; broken ones are reported with
/// their history and deleted, so the run goes on.
pub fn check_sweep(f: &mut Fuzz, con: &mut Wire) -> usize {
    let mut n = 0;
    for db in [0, 1] {
        for k in keys_of_type(con, db) {
            n += 1;
            f.counts.checks += 1;
            let v = con.call(&args!["ORCA.CHECK", k.clone()]);
            if !v.is_ok() {
                let v = match v {
                    R::Err(e) => String::from_utf8_lossy(&e).into_owned(),
                    other => format!("{other:?}"),
                };
                let hist = f.history_of(&k);
                f.fail(
                    "check",
                    format!(
                        "ORCA.CHECK {} in db {db}: {v:?}\n  last commands on the key:\n    {hist}",
                        show_args(std::slice::from_ref(&k))
                    ),
                );
                con.call(&args!["DEL", k]);
            }
        }
    }
    con.call(&args!["SELECT", 0]);
    n
}

/// Take the TTL off every key of db 0 and 1 before a `DEBUG RELOAD`. A
/// master loading an RDB drops the keys whose TTL has run out by then
/// without telling its replicas (Redis propagates no DEL for keys expired
/// at load), so a key with a short `PEXPIRE` from the stream could vanish on
/// the master only, and the replica check would report a divergence the
/// module did not cause. `SCAN` deletes (and replicates the deletion of) the
/// keys already expired; `PERSIST` on the rest is replicated like any write.
pub fn persist_all(con: &mut Wire) {
    for db in [0, 1] {
        con.call(&args!["SELECT", db]);
        let mut cursor = b"0".to_vec();
        while let R::Array(mut reply) = con.call(&args!["SCAN", cursor.clone(), "COUNT", 1000]) {
            let (Some(R::Array(keys)), Some(R::Bulk(next))) = (reply.pop(), reply.pop()) else {
                break;
            };
            for k in keys {
                if let R::Bulk(k) = k {
                    con.call(&args!["PERSIST", k]);
                }
            }
            if next == b"0" {
                break;
            }
            cursor = next;
        }
    }
    con.call(&args!["SELECT", 0]);
}

pub fn wait_rewrite(con: &mut Wire, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        let i = con.info("persistence");
        let idle = i.get("aof_rewrite_in_progress").map(String::as_str) == Some("0")
            && i.get("aof_rewrite_scheduled").map(String::as_str) == Some("0");
        if idle {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn setup_other_types(con: &mut Wire) {
    con.call(&args!["SET", "str", "v"]);
    con.call(&args!["DEL", "list", "hash", "zset"]);
    con.call(&args!["RPUSH", "list", "a"]);
    con.call(&args!["HSET", "hash", "f", "v"]);
    con.call(&args!["ZADD", "zset", "1", "m"]);
}

/// The blocking connection: ORCA.POP (or ORCA.MPOP) ... BLOCK on the queue
/// keys until told to stop. Returns its failures.
pub fn blocker(
    mut con: Wire,
    seed: u64,
    stop: Arc<AtomicBool>,
    pops: Arc<AtomicU64>,
    id_tx: mpsc::Sender<i64>,
) -> Vec<String> {
    let mut rng = Rng::new(seed ^ 0xB10C);
    let mut failures = Vec::new();
    if let R::Int(id) = con.call(&args!["CLIENT", "ID"]) {
        let _ = id_tx.send(id);
    }
    while !stop.load(Ordering::Relaxed) {
        let q = if rng.chance(85) {
            rng.pick(QUEUES).to_vec()
        } else {
            rng.pick(OTHERS).to_vec()
        };
        let block = match rng.below(10) {
            0 => "0".to_string(),
            _ => (1 + rng.below(150)).to_string(),
        };
        let lease = (1 + rng.below(400)).to_string();
        let mut a = if rng.chance(30) {
            // Several queues at once: woken by any.
            let q2 = rng.pick(QUEUES).to_vec();
            args!["ORCA.MPOP", 2, q, q2, "BLOCK", block, "LEASE", lease]
        } else if rng.chance(20) {
            // A finish that waits for the next job: its lease is not held
            // (an ACK/NACK is then refused at once; a MACK waits all the
            // same, keeping its outcomes for the reply).
            let cmd = *rng.pick(&["ORCA.MACK", "ORCA.MACK", "ORCA.ACK", "ORCA.NACK"]);
            let mut a = args![cmd, q];
            if cmd == "ORCA.MACK" {
                a.extend(args![1]);
            }
            a.extend(args![
                "YyzS/qcdzeAFr04H8UuLwfaLY9nBs3PcYEj7h+kK8is=",
                (1 + rng.below(1000)).to_string(),
                "NEXT",
                "BLOCK",
                block,
                "LEASE",
                lease
            ]);
            a
        } else {
            args!["ORCA.POP", q, "BLOCK", block, "LEASE", lease]
        };
        if rng.chance(30) && !is_kw_bytes(&a[0], "ORCA.ACK") && !is_kw_bytes(&a[0], "ORCA.NACK") {
            a.extend(args!["COUNT", (1 + rng.below(5)).to_string()]);
        }
        match con.pipeline(&[&a]) {
            Ok(v) => {
                pops.fetch_add(1, Ordering::Relaxed);
                if let Some(R::Err(e)) = v.first() {
                    let t = String::from_utf8_lossy(e);
                    let ok = std::str::from_utf8(e).is_ok()
                        && ERR_CODES
                            .iter()
                            .chain(&["WRONGTYPE ", "UNBLOCKED "])
                            .any(|p| t.starts_with(p))
                        && !t.starts_with("INTERNAL ");
                    if !ok {
                        failures.push(format!("blocking pop {}: {t}", show_args(&a)));
                    }
                }
            }
            Err(e) => {
                failures.push(format!("blocking pop {} got no reply: {e}", show_args(&a)));
                break;
            }
        }
    }
    failures
}

fn is_kw_bytes(a: &[u8], kw: &str) -> bool {
    a.eq_ignore_ascii_case(kw.as_bytes())
}

/// Keep the whole server log (the harness removes its directory).
pub fn save_log(server: &Server, seed: u64) -> String {
    let p = std::env::temp_dir().join(format!("orca-fuzz-{seed}-server.log"));
    let _ = std::fs::copy(server.log_path(), &p);
    p.display().to_string()
}

/// Copy the server's `MONITOR` stream to `path` on a thread of its own (until
/// the server closes the connection).
pub fn monitor_to(port: u16, path: std::path::PathBuf) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect for MONITOR");
    s.write_all(b"*1\r\n$7\r\nMONITOR\r\n").expect("MONITOR");
    let mut f = std::fs::File::create(&path).expect("the monitor file");
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 || f.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    // MONITOR is on before the stream starts.
    std::thread::sleep(Duration::from_millis(50));
}

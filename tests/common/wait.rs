//! Time: the server's clock, pinned clocks ahead of it, and waiting (with a
//! limit) for what only the server's timer or another client makes true.

use std::time::{Duration, Instant};

use redis::Value;

use super::reply::*;
use super::server::{info_int, start_server, Server};
use crate::args;

/// The server's clock (ms), from `TIME`.
pub fn server_ms(c: &mut Con) -> i64 {
    match ok(c, &args!["TIME"]) {
        Value::Array(v) if v.len() == 2 => {
            let s: i64 = as_string(&v[0]).parse().expect("TIME seconds");
            let us: i64 = as_string(&v[1]).parse().expect("TIME micros");
            s * 1000 + us / 1000
        }
        other => panic!("unexpected TIME reply {other:?}"),
    }
}

/// A pinned clock far ahead of the server's (about 28 hours), so the
/// server's timer never reaches any deadline set from it during a test.
pub fn future_base(c: &mut Con) -> i64 {
    server_ms(c) + 100_000_000
}

/// A server, a connection, and a pinned clock (`future_base`) to give
/// every worker command as `NOW`: every time-driven change then happens
/// exactly when a pinned command applies it.
pub fn start_pinned() -> (Server, Con, i64) {
    let (s, mut c) = start_server();
    let b = future_base(&mut c);
    (s, c, b)
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Poll `cond` every 10 ms until it holds; fail after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        sleep_ms(10);
    }
}

/// `blocked_clients` of `INFO clients`.
pub fn blocked_clients(c: &mut Con) -> i64 {
    info_int(c, "clients", "blocked_clients")
}

/// Wait until exactly `n` clients are blocked (at most 10 s).
pub fn wait_blocked(c: &mut Con, n: i64) {
    wait_for(
        &format!("{n} blocked clients"),
        Duration::from_secs(10),
        || blocked_clients(c) == n,
    );
}

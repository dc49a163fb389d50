//! Blocking clients: a connection that waits (with a read timeout, so a
//! broken wake-up fails instead of hanging) and a command run on its own
//! thread.

use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use super::reply::*;
use super::server::Server;

/// A connection for a blocking call: a read timeout so a broken wake-up
/// fails the test instead of hanging it.
pub fn blocking_conn(s: &Server) -> Con {
    let c = s.conn();
    c.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("set_read_timeout");
    c
}

/// Run a command on its own thread (a blocked client); the reply and how
/// long it took.
pub fn spawn_cmd(mut c: Con, a: Vec<Vec<u8>>) -> thread::JoinHandle<(Value, Duration, Con)> {
    thread::spawn(move || {
        let t = Instant::now();
        let v = raw(&mut c, &a);
        (v, t.elapsed(), c)
    })
}

pub fn joined(h: thread::JoinHandle<(Value, Duration, Con)>) -> (Value, Duration) {
    let (v, d, _c) = h.join().expect("blocked client thread panicked");
    (v, d)
}

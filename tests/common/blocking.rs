//! Blocking clients: a connection that waits (with a read timeout, so a
//! broken wake-up fails instead of hanging) and a command run on its own
//! thread.

use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use super::reply::*;
use super::server::Server;

/// A command running on its own thread (`spawn_cmd`): its reply, how long
/// it took, and the connection.
pub type Blocked = thread::JoinHandle<(Value, Duration, Con)>;

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
pub fn spawn_cmd(mut c: Con, a: Vec<Vec<u8>>) -> Blocked {
    thread::spawn(move || {
        let t = Instant::now();
        let v = raw(&mut c, &a);
        (v, t.elapsed(), c)
    })
}

/// `a` on a blocking connection of its own (`blocking_conn`), on its own
/// thread: a blocked client.
pub fn spawn_blocked(s: &Server, a: Vec<Vec<u8>>) -> Blocked {
    spawn_cmd(blocking_conn(s), a)
}

/// The reply of a command run by `spawn_cmd` and how long it took.
pub fn joined(h: Blocked) -> (Value, Duration) {
    let (v, d, _c) = h.join().expect("blocked client thread panicked");
    (v, d)
}

/// The reply of a blocked command that must have been woken (not timed out
/// with nil), as fields; `why` names the wake-up expected.
pub fn woken(h: Blocked, why: &str) -> Fields {
    let (v, took) = joined(h);
    assert_ne!(
        v,
        Value::Nil,
        "the blocked pop was not woken by {why} (after {took:?})"
    );
    fields(v)
}

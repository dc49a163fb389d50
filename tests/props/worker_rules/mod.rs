//! The worker layer, one rule per test, on hand-made queues: leases and
//! fencing (`leases.rs`), retries, dead letters and regrades
//! (`retries.rs`), and the core bugs the random sequences found
//! (`regressions.rs`).

mod leases;
mod regressions;
mod retries;

use orca::core::{Order, Policy, Queue, QueueError, State, MAX_TIME};

use crate::support::*;

pub const P: Policy = Policy {
    max_attempts: 3,
    retry_base: 100,
    retry_cap: 1_000,
};

pub fn enq(q: &mut Queue, name: &str, payload: &str, now: i64) {
    q.enqueue(&cfg(name, None, 0), payload.as_bytes(), now)
        .unwrap_or_else(|e| panic!("enqueue {name}: {e}"));
    q.check().unwrap();
}

pub fn enq_coll(q: &mut Queue, name: &str, coll: &str, priority: i64, now: i64) {
    q.enqueue(&cfg(name, Some(coll), priority), name.as_bytes(), now)
        .unwrap_or_else(|e| panic!("enqueue {name}: {e}"));
    q.check().unwrap();
}

pub fn imm(q: &mut Queue, name: &str, payload: &str, now: i64) {
    q.put_immediate(&cfg(name, None, 0), payload.as_bytes(), now)
        .unwrap_or_else(|e| panic!("put_immediate {name}: {e}"));
    q.check().unwrap();
}

/// Pop up to `count` with a lease; returns (name, token, deadline, info).
pub fn pop_n(
    q: &mut Queue,
    now: i64,
    lease: i64,
    count: usize,
    p: &Policy,
) -> Vec<(String, u64, i64, Info)> {
    let (ds, _) = q
        .pop_deliveries(now, lease, count, p)
        .expect("pop_deliveries");
    q.check().unwrap();
    ds.iter()
        .map(|d| {
            let (t, dl) = d.lease.unwrap_or((0, 0));
            (kname(&d.job.key), t, dl, conv(&d.job))
        })
        .collect()
}

pub fn pop1(q: &mut Queue, now: i64, lease: i64, p: &Policy) -> (String, u64, i64, Info) {
    pop_n(q, now, lease, 1, p)
        .pop()
        .unwrap_or_else(|| panic!("nothing to pop at {now}"))
}

pub fn popped_names(q: &mut Queue, now: i64, count: usize, p: &Policy) -> Vec<String> {
    pop_n(q, now, 60_000, count, p)
        .into_iter()
        .map(|d| d.0)
        .collect()
}

pub fn roundtrip(q: &Queue) -> Queue {
    let bytes = q.encode();
    let d = Queue::decode(&bytes).expect("decode");
    assert_eq!(d.encode(), bytes, "decode/encode not byte-identical");
    d
}

/// The `superseded` flag of each lease on `name`, by token.
pub fn lease_flags(q: &Queue, name: &str) -> Vec<(u64, bool)> {
    q.states(&k(name))
        .unwrap()
        .iter()
        .filter_map(|s| match s {
            State::Leased(_, t, l) => Some((*t, l.superseded)),
            _ => None,
        })
        .collect()
}

/// `q` reloaded with its sequence counter set to `next_seq` (through the
/// codec, as RESTORE/RDB would).
pub fn with_next_seq(q: &Queue, next_seq: i64) -> Result<Queue, QueueError> {
    let mut bytes = q.encode();
    // encode(): u64 header length, then version (1), order (1), next_seq (8).
    bytes[10..18].copy_from_slice(&next_seq.to_le_bytes());
    Queue::decode(&bytes)
}

/// A queue holding one lease on `name` (not superseded), with tokens far
/// from any other queue's here, to import into another queue.
pub fn one_lease(name: &str, payload: &str, now: i64, lease: i64, p: &Policy) -> (Queue, u64) {
    let mut o = with_next_seq(&Queue::new(Order::Lifo), 1_000_000).unwrap();
    enq(&mut o, name, payload, now);
    let (_, t, ..) = pop1(&mut o, now, lease, p);
    assert_eq!(lease_flags(&o, name), vec![(t, false)]);
    (o, t)
}

/// Hand out everything, acking each delivery, with the clock moving from
/// deadline to deadline and finally far ahead; returns the payloads handed
/// out, in order. Nothing is left afterwards.
pub fn drain(q: &mut Queue, mut now: i64, p: &Policy) -> Vec<String> {
    let end = MAX_TIME - 10;
    let mut out = Vec::new();
    loop {
        let ds = pop_n(q, now, 10, 10, p);
        for (name, t, _, info) in &ds {
            out.push(text(&info.payload));
            q.ack(&k(name), *t, None, now, 0).unwrap();
        }
        if ds.is_empty() {
            if now == end {
                assert_eq!(q.state_counts(), (0, 0, 0, 0));
                return out;
            }
            now = q.next_deadline().unwrap_or(end).clamp(now, end);
        }
    }
}

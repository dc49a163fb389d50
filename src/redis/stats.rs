//! Module-wide counters for `INFO orca` (sections `orca_queues` and
//! `orca_totals`), so existing Redis monitoring picks them up.
//!
//! Gauges (queues, jobs by state) follow every queue's life: added when a
//! queue is created, loaded or copied, adjusted after every write command by
//! the change in its counts, removed when it is freed (DEL, FLUSHALL, ...).
//! Totals count events since the server started.

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use redis_module::InfoContext;

use crate::core::Queue;

pub static QUEUES: AtomicI64 = AtomicI64::new(0);
pub static QUEUED: AtomicI64 = AtomicI64::new(0);
pub static DELAYED: AtomicI64 = AtomicI64::new(0);
pub static LEASED: AtomicI64 = AtomicI64::new(0);
pub static DEAD: AtomicI64 = AtomicI64::new(0);
pub static HELD: AtomicI64 = AtomicI64::new(0);

pub static ENQUEUED: AtomicI64 = AtomicI64::new(0);
pub static POPPED: AtomicI64 = AtomicI64::new(0);
pub static ACKED: AtomicI64 = AtomicI64::new(0);
pub static NACKED: AtomicI64 = AtomicI64::new(0);
pub static EXPIRED: AtomicI64 = AtomicI64::new(0);
pub static RETRIED: AtomicI64 = AtomicI64::new(0);
pub static DIED: AtomicI64 = AtomicI64::new(0);
pub static LIFETIME_EXPIRED: AtomicI64 = AtomicI64::new(0);
/// Successors enqueued by `ACK`/`NACK ... FORWARD`.
pub static FORWARDED: AtomicI64 = AtomicI64::new(0);

/// (queued, delayed, leased, dead, held)
pub type Counts = (usize, usize, usize, usize, usize);

pub fn counts(q: &Queue) -> Counts {
    let (queued, delayed, leased, dead) = q.state_counts();
    (queued, delayed, leased, dead, q.held_len())
}

fn apply(c: Counts, sign: i64) {
    QUEUED.fetch_add(sign * c.0 as i64, Relaxed);
    DELAYED.fetch_add(sign * c.1 as i64, Relaxed);
    LEASED.fetch_add(sign * c.2 as i64, Relaxed);
    DEAD.fetch_add(sign * c.3 as i64, Relaxed);
    HELD.fetch_add(sign * c.4 as i64, Relaxed);
}

/// A queue came into being (created, loaded, copied).
pub fn queue_added(q: &Queue) {
    QUEUES.fetch_add(1, Relaxed);
    apply(counts(q), 1);
}

/// A queue is being freed.
pub fn queue_removed(q: &Queue) {
    QUEUES.fetch_sub(1, Relaxed);
    apply(counts(q), -1);
}

/// A write changed a queue's counts from `before` to `after`.
pub fn changed(before: Counts, after: Counts) {
    apply(before, -1);
    apply(after, 1);
}

pub fn add(counter: &AtomicI64, n: usize) {
    counter.fetch_add(n as i64, Relaxed);
}

pub fn info(ctx: &InfoContext) {
    let g = |v: &AtomicI64| v.load(Relaxed);
    let _ = ctx
        .builder()
        .add_section("queues")
        .field("queues", g(&QUEUES))
        .and_then(|s| s.field("jobs_queued", g(&QUEUED)))
        .and_then(|s| s.field("jobs_delayed", g(&DELAYED)))
        .and_then(|s| s.field("jobs_leased", g(&LEASED)))
        .and_then(|s| s.field("jobs_dead", g(&DEAD)))
        .and_then(|s| s.field("jobs_held", g(&HELD)))
        .and_then(|s| s.build_section())
        .and_then(|b| {
            b.add_section("totals")
                .field("enqueued", g(&ENQUEUED))
                .and_then(|s| s.field("popped", g(&POPPED)))
                .and_then(|s| s.field("acked", g(&ACKED)))
                .and_then(|s| s.field("nacked", g(&NACKED)))
                .and_then(|s| s.field("expired", g(&EXPIRED)))
                .and_then(|s| s.field("retried", g(&RETRIED)))
                .and_then(|s| s.field("dead", g(&DIED)))
                .and_then(|s| s.field("lifetime_expired", g(&LIFETIME_EXPIRED)))
                .and_then(|s| s.field("forwarded", g(&FORWARDED)))
                .and_then(|s| s.build_section())
        })
        .and_then(|b| b.build_info());
}

//! Time-driven changes on the master: expired leases, due retries, old
//! results. Every queue with something pending is tracked with its next
//! deadline; a periodic timer ticks the due ones and replicates each tick as
//! `ORCA.TICK <queue> NOW <ms> MAXATTEMPTS <n>` (the effect with time and
//! policy pinned), so replicas and the AOF reach the same state.
//!
//! Queues are tracked when a command writes them, when they are loaded
//! (RDB, RESTORE) and when they are renamed, moved or copied; an entry whose
//! key no longer holds a queue is dropped when it comes due.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use redis_module::{Context, ContextFlags, NotifyEvent, RedisString};

use super::datatype::QUEUE_TYPE;
use super::ffi::{now_ms, select_db, selected_db, signal_ready, Arg, Kw};
use super::settings;
use crate::core::{Queue, TickReport};

thread_local! {
    /// Writes are paused (CLIENT PAUSE, FAILOVER) until this time (ms).
    static PAUSED_UNTIL: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// Redis lifts an expired pause only on its next cron run (`hz`), so the
/// timer keeps off for this long after the pause's nominal end.
const PAUSE_SLACK_MS: i64 = 1_000;

/// Writes are paused for `ms` from now (0: unpaused).
pub fn paused_for(ms: i64) {
    let until = if ms <= 0 {
        0
    } else {
        now_ms().saturating_add(ms).saturating_add(PAUSE_SLACK_MS)
    };
    PAUSED_UNTIL.with(|p| p.set(until));
}

/// How often the timer looks for due work (ms).
pub const TIMER_PERIOD_MS: u64 = 50;

/// (db, key name) of a tracked queue.
type Tracked = (i32, Vec<u8>);

/// Per db (a short list: few dbs hold queues with pending work), tracked
/// queue -> next deadline (None: look at it on the next round). A write
/// looks its queue up by the borrowed name, so tracking allocates only
/// for a queue new to the list; a db with nothing tracked has no entry.
type ByDb = Vec<(i32, HashMap<Vec<u8>, Option<i64>>)>;

thread_local! {
    static TRACKED: RefCell<ByDb> = const { RefCell::new(Vec::new()) };
}

/// Remember that `key` in `db` has work due at `deadline` (or none).
/// Queues with nothing pending (the common case) cost one emptiness check.
pub fn track_raw(db: i32, key: &[u8], deadline: Option<i64>) {
    TRACKED.with(|t| {
        let mut t = t.borrow_mut();
        match deadline {
            Some(d) => set(&mut t, db, key, Some(d)),
            None if t.is_empty() => {}
            None => {
                let Some(i) = t.iter().position(|(d, _)| *d == db) else {
                    return;
                };
                if let Some((_, keys)) = t.get_mut(i) {
                    keys.remove(key);
                    if keys.is_empty() {
                        t.swap_remove(i);
                    }
                }
            }
        }
    });
}

fn set(t: &mut ByDb, db: i32, key: &[u8], v: Option<i64>) {
    let i = match t.iter().position(|(d, _)| *d == db) {
        Some(i) => i,
        None => {
            t.push((db, HashMap::new()));
            t.len() - 1
        }
    };
    if let Some((_, keys)) = t.get_mut(i) {
        match keys.get_mut(key) {
            Some(d) => *d = v,
            None => {
                keys.insert(key.to_vec(), v);
            }
        }
    }
}

pub fn track(ctx: &Context, key: &RedisString, q: &Queue) {
    track_raw(selected_db(ctx), key.as_slice(), q.next_deadline());
}

/// A key may now hold a queue it did not before (rename, move, copy,
/// restore): look at it on the next round.
pub fn on_generic_event(ctx: &Context, _ev: NotifyEvent, event: &str, key: &[u8]) {
    if matches!(event, "rename_to" | "move_to" | "copy_to" | "restore") {
        TRACKED.with(|t| set(&mut t.borrow_mut(), selected_db(ctx), key, Some(0)));
    }
}

/// SWAPDB exchanged two databases: so do their tracked queues.
pub fn on_swapdb(a: i32, b: i32) {
    TRACKED.with(|t| {
        for (db, _) in t.borrow_mut().iter_mut() {
            if *db == a {
                *db = b;
            } else if *db == b {
                *db = a;
            }
        }
    });
}

pub fn start(ctx: &Context) {
    ctx.create_timer(Duration::from_millis(TIMER_PERIOD_MS), fire, ());
}

/// Notify and wake for what a tick did.
pub fn publish(ctx: &Context, key: &RedisString, r: &TickReport) {
    super::stats::add(&super::stats::EXPIRED, r.expired);
    super::stats::add(&super::stats::RETRIED, r.retried);
    super::stats::add(&super::stats::DIED, r.died);
    if r.expired > 0 {
        super::ffi::notify(ctx, c"orca.expire", key);
    }
    if r.retried > 0 {
        super::ffi::notify(ctx, c"orca.retry", key);
    }
    if r.died > 0 {
        super::ffi::notify(ctx, c"orca.dead", key);
    }
    if r.requeued() {
        signal_ready(ctx, key);
    }
}

fn fire(ctx: &Context, _: ()) {
    let flags = ctx.get_flags();
    // Writes paused (CLIENT PAUSE, FAILOVER, a shutdown waiting for
    // replicas): Redis says so through AvoidReplicaTraffic; the command
    // filter's record backs it up.
    let paused = PAUSED_UNTIL.with(|p| p.get()) > now_ms() || super::ffi::avoid_replica_traffic();
    if flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING) && !paused {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tick_due(ctx)));
    }
    start(ctx);
}

fn tick_due(ctx: &Context) {
    let now = now_ms();
    let due: Vec<Tracked> = TRACKED.with(|t| {
        t.borrow()
            .iter()
            .flat_map(|(db, keys)| {
                keys.iter()
                    .filter(|(_, d)| d.is_none_or(|d| d <= now))
                    .map(|(k, _)| (*db, k.clone()))
            })
            .collect()
    });
    if due.is_empty() {
        return;
    }
    // Only when there is work: a shutdown waiting for replicas pauses
    // writes, and Redis 7.0 aborts if anything is replicated then.
    if super::ffi::shutdown_pending(ctx) {
        return;
    }
    let max_attempts = settings::max_attempts();
    let policy = settings::policy(Some(max_attempts));
    let home = selected_db(ctx);
    for (db, name) in due {
        if !select_db(ctx, db) {
            track_raw(db, &name, None);
            continue;
        }
        // Binary-safe: key names may hold any byte, NUL included.
        let key_name = RedisString::create_from_slice(ctx.ctx, name.as_slice());
        let key = ctx.open_key_writable(&key_name);
        let q = match key.get_value::<Queue>(&QUEUE_TYPE) {
            Ok(Some(q)) => q,
            _ => {
                track_raw(db, &name, None);
                continue;
            }
        };
        let before = super::stats::counts(q);
        let report = q.tick(now, &policy);
        super::stats::changed(before, super::stats::counts(q));
        let next = q.next_deadline();
        drop(key);
        track_raw(db, &name, next);
        if report.changed() {
            super::ffi::replicate(
                ctx,
                c"ORCA.TICK",
                &[
                    Arg::S(&key_name),
                    Arg::K(Kw::Now),
                    Arg::I(now),
                    Arg::K(Kw::MaxAttempts),
                    Arg::I(max_attempts),
                ],
            );
            publish(ctx, &key_name, &report);
        }
    }
    select_db(ctx, home);
}

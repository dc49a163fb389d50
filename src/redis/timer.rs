//! Time-driven changes on the master: expired leases, due retries, old
//! results. Every queue with something pending is tracked with its next
//! deadline (`tracking.rs`); a periodic timer ticks the due ones and
//! replicates each tick as `ORCA.TICK <queue> NOW <ms> MAXATTEMPTS <n>` (the
//! effect with time and policy pinned), so replicas and the AOF reach the
//! same state.
//!
//! The timer changes nothing while Redis wants no writes: during CLIENT
//! PAUSE, FAILOVER and a SHUTDOWN waiting for its replicas (Redis 7.0
//! asserts if a module replicates then). Redis 7.0 tells modules of none of
//! these, so the command filter (`on_command`) watches for them, with
//! `AvoidReplicaTraffic` and INFO's `shutdown_in_milliseconds` as a backup.
//! The same filter follows RENAME, COPY, MOVE and EXEC for `tracking.rs`.

use std::time::Duration;

use redis_module::{Context, ContextFlags, RedisString};

use super::access::open_for_tick;
use super::ffi::{self, now_ms, select_db, selected_db, signal_ready, Arg, Kw};
use super::hooks::FilterArgs;
use super::{guard, module_config, stats, tracking};
use crate::core::TickReport;

thread_local! {
    /// Writes are paused (CLIENT PAUSE, FAILOVER) until this time (ms).
    static PAUSED_UNTIL: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// Redis lifts an expired pause only on its next cron run (`hz`), so the
/// timer keeps off for this long after the pause's nominal end.
const PAUSE_SLACK_MS: i64 = 1_000;

/// How often the timer looks for due work (ms).
pub const TIMER_PERIOD_MS: u64 = 50;

/// Writes are paused for `ms` from now (0: unpaused).
fn paused_for(ms: i64) {
    let until = if ms <= 0 {
        0
    } else {
        now_ms().saturating_add(ms).saturating_add(PAUSE_SLACK_MS)
    };
    PAUSED_UNTIL.with(|p| p.set(until));
}

/// The command filter: runs before every command (not the module's own),
/// so it allocates nothing and compares little for the common case.
pub fn on_command(a: &FilterArgs) {
    let cmd = a.arg(0);
    let num = |i: usize| {
        std::str::from_utf8(a.arg(i))
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
    };
    match cmd.len() {
        6 if a.is(0, "CLIENT") => {
            if a.is(1, "PAUSE") {
                paused_for(num(2).unwrap_or(0));
            } else if a.is(1, "UNPAUSE") {
                paused_for(0);
            }
        }
        8 if a.is(0, "SHUTDOWN") => {
            // A master waiting for its replicas before shutting down pauses
            // writes (up to shutdown-timeout); ABORT cancels the shutdown.
            let abort = (1..a.len()).any(|i| a.is(i, "ABORT"));
            paused_for(if abort { 0 } else { i64::MAX / 4 });
        }
        8 if a.is(0, "FAILOVER") => {
            // FAILOVER pauses writes while it hands over (until done or its
            // TIMEOUT); the server then is a replica and its timer idles.
            let mut ms = 60_000;
            for i in 1..a.len() {
                if a.is(i, "TIMEOUT") {
                    if let Some(t) = num(i + 1) {
                        ms = t;
                    }
                }
            }
            paused_for(ms);
        }
        6 | 8 if a.is(0, "RENAME") || a.is(0, "RENAMENX") => {
            tracking::moved(a.arg(1), a.arg(2), None, now_ms());
        }
        4 if a.is(0, "MOVE") => {
            if let Some(db) = num(2).and_then(|d| i32::try_from(d).ok()) {
                tracking::moved(a.arg(1), a.arg(1), Some(db), now_ms());
            }
        }
        4 if a.is(0, "COPY") => {
            let db = (3..a.len())
                .find(|&i| a.is(i, "DB"))
                .and_then(|i| num(i + 1))
                .and_then(|d| i32::try_from(d).ok());
            tracking::moved(a.arg(1), a.arg(2), db, now_ms());
        }
        4 if a.is(0, "EXEC") => tracking::replay_moves(now_ms()),
        _ => {}
    }
}

pub fn start(ctx: &Context) {
    ctx.create_timer(Duration::from_millis(TIMER_PERIOD_MS), fire, ());
}

/// Notify and wake for what a tick did.
pub fn publish(ctx: &Context, key: &RedisString, r: &TickReport) {
    stats::add(&stats::EXPIRED, r.expired);
    stats::add(&stats::RETRIED, r.retried);
    stats::add(&stats::DIED, r.died);
    stats::add(&stats::LIFETIME_EXPIRED, r.lifetime);
    if r.expired > 0 {
        ffi::notify(ctx, c"orca.expire", key);
    }
    if r.lifetime > 0 {
        ffi::notify(ctx, c"orca.lifetime", key);
    }
    if r.retried > 0 {
        ffi::notify(ctx, c"orca.retry", key);
    }
    if r.died > 0 {
        ffi::notify(ctx, c"orca.dead", key);
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
    let paused = PAUSED_UNTIL.with(|p| p.get()) > now_ms() || ffi::avoid_replica_traffic();
    if flags.contains(ContextFlags::MASTER) && !flags.contains(ContextFlags::LOADING) && !paused {
        guard::contain("the lease timer", || {
            guard::inject("timer");
            tick_due(ctx)
        });
    }
    start(ctx);
}

fn tick_due(ctx: &Context) {
    let now = now_ms();
    let due = tracking::due(now);
    if due.is_empty() {
        return;
    }
    // Only when there is work: a shutdown waiting for replicas pauses
    // writes, and Redis 7.0 aborts if anything is replicated then.
    if ffi::shutdown_pending(ctx) {
        return;
    }
    let max_attempts = module_config::max_attempts();
    let policy = module_config::policy(Some(max_attempts));
    let home = selected_db(ctx);
    for (db, name) in due {
        if !select_db(ctx, db) {
            tracking::track(db, &name, None);
            continue;
        }
        // Binary-safe: key names may hold any byte, NUL included.
        let key_name = RedisString::create_from_slice(ctx.ctx, name.as_slice());
        let Some((report, next)) = open_for_tick(ctx, &key_name, |q| q.tick(now, &policy)) else {
            tracking::track(db, &name, None);
            continue;
        };
        tracking::track(db, &name, next);
        if report.changed() {
            ffi::replicate(
                ctx,
                c"ORCA.TICK",
                &[
                    Arg::Client(&key_name),
                    Arg::Keyword(Kw::Now),
                    Arg::Int(now),
                    Arg::Keyword(Kw::MaxAttempts),
                    Arg::Int(max_attempts),
                ],
            );
            publish(ctx, &key_name, &report);
        }
    }
    select_db(ctx, home);
}

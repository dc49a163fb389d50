//! The numeric bounds every part of the core agrees on: times, and the
//! sequence counters behind ties, nonces and lease tokens.

/// Largest time (ms) the queue accepts anywhere: 2^53 - 1, the largest
/// integer every client language represents exactly.
pub const MAX_TIME: i64 = (1 << 53) - 1;

/// Bound of the sequence counters (ties and nonces): |value| <= 2^62.
/// Operations stop short of it and loaders refuse anything beyond it, so a
/// queue that loaded can always be saved and loaded again.
pub const SEQ_LIMIT: i64 = 1 << 62;

/// What loaders accept for the counters: above `SEQ_LIMIT` by a margin far
/// larger than any queue can consume once operations refuse (time-driven
/// requeues use at most one number per parked job), so every queue that
/// exists can be saved and loaded again.
pub const SEQ_LOAD_LIMIT: i64 = SEQ_LIMIT + SEQ_LIMIT / 2;

/// Is `t` a time (or duration) the queue accepts?
pub fn valid_time(t: i64) -> bool {
    (0..=MAX_TIME).contains(&t)
}

/// The deadline of a lease of `lease_ms` taken at `now`, if both are times
/// and the deadline is too.
pub fn lease_deadline(now: i64, lease_ms: i64) -> Option<i64> {
    if !valid_time(now) || !valid_time(lease_ms) {
        return None;
    }
    now.checked_add(lease_ms).filter(|d| *d <= MAX_TIME)
}

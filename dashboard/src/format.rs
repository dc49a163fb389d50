//! Display helpers: times of the Redis server's clock (ms), durations,
//! counts, short forms. What a page shows of stored bytes (payloads,
//! results, configs) is `render.rs`.

use time::macros::format_description;
use time::OffsetDateTime;

/// `1795278605350` -> `2026-11-21 10:30:05 UTC`; out-of-range values as digits.
pub fn timestamp(ms: i64) -> String {
    let fmt = format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_else(|| ms.to_string())
}

/// A duration in ms, short: `850 ms`, `12.3 s`, `4m 05s`, `2h 03m`, `3d 04h`.
pub fn duration(ms: i64) -> String {
    let neg = ms < 0;
    let ms = ms.unsigned_abs();
    let s = ms / 1000;
    let text = if ms < 1000 {
        format!("{ms} ms")
    } else if s < 60 {
        format!("{}.{} s", s, (ms % 1000) / 100)
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d {:02}h", s / 86_400, (s % 86_400) / 3600)
    };
    if neg {
        format!("-{text}")
    } else {
        text
    }
}

/// How `t` relates to `now`: `5m 02s ago` or `in 10.0 s`.
pub fn relative(now: i64, t: i64) -> String {
    if t <= now {
        format!("{} ago", duration(now.saturating_sub(t)))
    } else {
        format!("in {}", duration(t.saturating_sub(now)))
    }
}

/// Thousands separators: 1000000 -> 1,000,000.
pub fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The first `n` characters of an orca key, for narrow tables.
pub fn short(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(duration(245_000), "4m 05s");
        assert_eq!(duration(7_380_000), "2h 03m");
        assert_eq!(duration(273_600_000), "3d 04h");
        assert_eq!(duration(-1500), "-1.5 s");
        assert_eq!(duration(i64::MIN), "-106751991167d 07h");
    }

    #[test]
    fn timestamps_and_counts() {
        assert_eq!(timestamp(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(timestamp(i64::MAX), i64::MAX.to_string());
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(count(-12), "-12");
        assert_eq!(count(999), "999");
        assert_eq!(relative(10_000, 5_000), "5.0 s ago");
        assert_eq!(relative(5_000, 10_000), "in 5.0 s");
    }

    #[test]
    fn short_cuts_at_characters() {
        assert_eq!(short("abcdef", 3), "abc…");
        assert_eq!(short("ab", 3), "ab");
        assert_eq!(short("ééé", 2), "éé…");
    }
}

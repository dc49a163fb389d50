//! Inspection: the ordered, paginated listing of queued jobs (with their
//! positions, optionally filtered by `metadata_table`) and queue statistics.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;

use super::queue::{JobInfo, Queue};

/// Wait-time statistics in ms (Orca's queue stats): over a set of jobs,
/// the wait of each is `now - created_at`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitStats {
    pub count: u64,
    pub min: i64,
    pub max: i64,
    /// Sum of waits, for the average.
    pub total: i128,
}

impl WaitStats {
    fn add(&mut self, wait: i64) {
        if self.count == 0 {
            self.min = wait;
            self.max = wait;
        } else {
            self.min = self.min.min(wait);
            self.max = self.max.max(wait);
        }
        self.count += 1;
        self.total += wait as i128;
    }

    /// Average wait, rounded down; 0 when empty.
    pub fn avg(&self) -> i64 {
        if self.count == 0 {
            0
        } else {
            (self.total / self.count as i128) as i64
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub queued: usize,
    pub delayed: usize,
    pub leased: usize,
    pub dead: usize,
    pub results: usize,
    pub collations: usize,
    pub immediate: usize,
    /// All queued jobs.
    pub wait_all: WaitStats,
    /// Queued jobs whose release time has passed (ready to be graded now).
    pub wait_released: WaitStats,
}

#[derive(Deserialize)]
struct MetaOnly<'a> {
    #[serde(borrow, default)]
    metadata_table: Option<HashMap<Cow<'a, str>, MetaValue<'a>>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum MetaValue<'a> {
    #[serde(borrow)]
    One(Cow<'a, str>),
    #[serde(borrow)]
    Many(Vec<Cow<'a, str>>),
    Other(serde::de::IgnoredAny),
}

/// Does the config's `metadata_table[field]` hold `value` (a string equal to
/// it, or an array of strings containing it)?
pub fn metadata_matches(payload: &[u8], field: &str, value: &str) -> bool {
    let Ok(m) = serde_json::from_slice::<MetaOnly>(payload) else {
        return false;
    };
    match m.metadata_table.as_ref().and_then(|t| t.get(field)) {
        Some(MetaValue::One(s)) => s == value,
        Some(MetaValue::Many(v)) => v.iter().any(|s| s == value),
        _ => false,
    }
}

impl Queue {
    /// Queued jobs in pop order from 0-based `offset`, at most `limit`,
    /// each with its 1-based position. Without a filter this costs
    /// O(log n + page) plus, for each collation on the page, the length of
    /// that collation; with a filter it scans from the front.
    pub fn list(
        &self,
        offset: usize,
        limit: usize,
        filter: Option<(&str, &str)>,
    ) -> Vec<(JobInfo<'_>, usize)> {
        let mut out = Vec::new();
        if limit == 0 {
            return out;
        }
        let start = if filter.is_some() { 0 } else { offset };
        let mut skip = if filter.is_some() { offset } else { 0 };
        let r = &self.records;
        for (i, (n, j)) in r.walk_from(start).enumerate() {
            if let Some((field, value)) = filter {
                if !metadata_matches(&r.job(j).payload, field, value) {
                    continue;
                }
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
            }
            out.push((r.info_at(j, n), start + i + 1));
            if out.len() >= limit {
                break;
            }
        }
        out
    }

    /// Counts by state and wait-time statistics at `now`. O(n).
    pub fn stats(&self, now: i64) -> QueueStats {
        let (queued, delayed, leased, dead) = self.state_counts();
        let mut s = QueueStats {
            queued,
            delayed,
            leased,
            dead,
            results: self.work.result_count(),
            collations: self.collation_count(),
            ..Default::default()
        };
        let r = &self.records;
        for (n, j) in r.walk_from(0) {
            if r.is_immediate(n) {
                s.immediate += 1;
            }
            let wait = now.saturating_sub(r.job(j).created_at).max(0);
            s.wait_all.add(wait);
            if r.rk(n).score <= now {
                s.wait_released.add(wait);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_filter() {
        let p =
            br#"{"key":"k","metadata_table":{"course":"cs2500","graders":["ann","bob"],"n":3}}"#;
        assert!(metadata_matches(p, "course", "cs2500"));
        assert!(!metadata_matches(p, "course", "cs3500"));
        assert!(metadata_matches(p, "graders", "bob"));
        assert!(!metadata_matches(p, "graders", "eve"));
        assert!(!metadata_matches(p, "n", "3"));
        assert!(!metadata_matches(p, "missing", "x"));
        assert!(!metadata_matches(br#"{"key":"k"}"#, "course", "cs2500"));
        assert!(!metadata_matches(
            br#"{"key":"k","metadata_table":[1]}"#,
            "course",
            "x"
        ));
    }

    #[test]
    fn wait_stats() {
        let mut w = WaitStats::default();
        assert_eq!(w.avg(), 0);
        for v in [10, 20, 60] {
            w.add(v);
        }
        assert_eq!((w.count, w.min, w.max, w.avg()), (3, 10, 60, 30));
    }
}

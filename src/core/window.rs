//! The submission window behind automatic delays: for each collation, the
//! times of its recent submissions, so that "how many jobs did this student
//! submit in the last 15 minutes" is exact and cheap.
//!
//! A submission at `t` counts the same collation's earlier submissions in
//! `(t - window, t]`. Per collation the times are kept sorted (they arrive
//! in order, so recording is O(1) amortized; a time given out of order is
//! placed by binary search and a shift, O(k)); counting is two binary
//! searches, O(log k). Counts are exact for submission times that do not go
//! back (the server's clock); a time given earlier than the collation's
//! newest (a client pinning `NOW` in the past) counts what is still kept. Only submissions that can still count are kept:
//! older ones are trimmed when the collation submits again, and a
//! collation's whole record goes `window` ms after its newest submission
//! (`expire`, driven by the queue's tick), so memory is bounded by the
//! submissions inside the window. Everything depends only on the times
//! given, so replicas and AOF replay agree.

use std::collections::{BTreeSet, VecDeque};

use super::containers::idmap::IdMap;
use super::ids::CollId;

#[derive(Clone, Debug, Default)]
pub(crate) struct Window {
    /// Collation id -> its submission times, ascending.
    times: IdMap<CollId, VecDeque<i64>>,
    /// (newest submission + window, collation): when a record can go.
    expiry: BTreeSet<(i64, CollId)>,
    /// The window the expiry times were computed with.
    window: i64,
}

impl Window {
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Collations with a record.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Submissions kept.
    #[cfg(test)]
    pub fn submissions(&self) -> usize {
        self.times.values().map(VecDeque::len).sum()
    }

    /// Collation `c`'s submissions in `(t - window, t]`.
    pub fn count(&self, c: CollId, t: i64, window: i64) -> usize {
        let Some(times) = self.times.get(&c) else {
            return 0;
        };
        let lo = t.saturating_sub(window);
        let after_lo = times.partition_point(|&x| x <= lo);
        let up_to_t = times.partition_point(|&x| x <= t);
        up_to_t.saturating_sub(after_lo)
    }

    /// Record a submission of collation `c` at `t`. Returns true when `c`
    /// had no record before (the caller keeps the collation alive while it
    /// has one).
    pub fn record(&mut self, c: CollId, t: i64, window: i64) -> bool {
        self.set_window(window);
        let new = !self.times.contains_key(&c);
        let times = self.times.entry(c).or_default();
        let old_newest = times.back().copied();
        let at = times.partition_point(|&x| x <= t);
        times.insert(at, t);
        let newest = times.back().copied().unwrap_or(t);
        // Nothing at or before `newest - window` can count again for a
        // submission at `newest` or later.
        let horizon = newest.saturating_sub(window);
        while times.front().is_some_and(|&x| x <= horizon) {
            times.pop_front();
        }
        if let Some(old) = old_newest {
            self.expiry.remove(&(old.saturating_add(window), c));
        }
        self.expiry.insert((newest.saturating_add(window), c));
        new
    }

    /// When the next record can go.
    pub fn next_expiry(&self) -> Option<i64> {
        self.expiry.first().map(|(t, _)| *t)
    }

    /// Forget the records whose newest submission is `window` or more
    /// before `now`; returns their collations (to release).
    pub fn expire(&mut self, now: i64) -> Vec<CollId> {
        let mut gone = Vec::new();
        while let Some(&(t, c)) = self.expiry.first() {
            if t > now {
                break;
            }
            self.expiry.remove(&(t, c));
            self.times.remove(&c);
            gone.push(c);
        }
        gone
    }

    /// The window changed (a setting): expiry times follow it.
    pub fn set_window(&mut self, window: i64) {
        if window == self.window {
            return;
        }
        self.window = window;
        self.expiry = self
            .times
            .iter()
            .filter_map(|(c, t)| t.back().map(|n| (n.saturating_add(window), *c)))
            .collect();
    }

    /// Forget everything (auto delay turned off); returns the collations.
    pub fn clear(&mut self) -> Vec<CollId> {
        self.expiry.clear();
        self.times.drain().map(|(c, _)| c).collect()
    }

    /// Every record, by collation (for the codec and the check).
    pub fn records(&self) -> impl Iterator<Item = (CollId, &VecDeque<i64>)> {
        self.times.iter().map(|(c, t)| (*c, t))
    }

    /// Put back a record read from a saved queue (times ascending).
    pub fn load(&mut self, c: CollId, times: VecDeque<i64>, window: i64) -> bool {
        self.set_window(window);
        if times.is_empty() || self.times.contains_key(&c) {
            return false;
        }
        if let Some(&newest) = times.back() {
            self.expiry.insert((newest.saturating_add(window), c));
        }
        self.times.insert(c, times);
        true
    }

    pub fn heap_bytes(&self) -> usize {
        self.times.capacity() * 48
            + self.times.values().map(|t| t.capacity() * 8).sum::<usize>()
            + self.expiry.len() * 32
    }

    /// Records are sorted and non-empty, and each has its expiry.
    pub fn check(&self) -> Result<(), String> {
        if self.expiry.len() != self.times.len() {
            return Err("submission window: expiry and records disagree".into());
        }
        for (c, t) in &self.times {
            let newest = t.back().ok_or("submission window: an empty record")?;
            if t.iter().zip(t.iter().skip(1)).any(|(a, b)| a > b) {
                return Err("submission window: times out of order".into());
            }
            if !self
                .expiry
                .contains(&(newest.saturating_add(self.window), *c))
            {
                return Err("submission window: a record without its expiry".into());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::containers::slab::SlabId;

    fn c(x: u32) -> CollId {
        CollId::from_raw(x)
    }

    /// The rule, by brute force over every submission ever made.
    fn brute(all: &[(CollId, i64)], c: CollId, t: i64, window: i64) -> usize {
        all.iter()
            .filter(|(x, s)| *x == c && *s > t - window && *s <= t)
            .count()
    }

    #[test]
    fn counts_match_brute_force_with_trimming_and_expiry() {
        let window = 1_000;
        let mut w = Window::default();
        let mut all: Vec<(CollId, i64)> = Vec::new();
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let mut now = 0i64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Forward in time, often within the same millisecond.
            now += (x % 120) as i64 / 2;
            let now_c = now;
            let c = c((x >> 20) as u32 % 5);
            assert_eq!(w.count(c, now_c, window), brute(&all, c, now_c, window));
            w.record(c, now_c, window);
            all.push((c, now_c));
            if x.is_multiple_of(7) {
                let gone = w.expire(now_c);
                for c in gone {
                    // Gone only when nothing of it can count at now or later.
                    assert_eq!(brute(&all, c, now_c + 1_000_000, window), 0);
                }
            }
            w.check().unwrap();
        }
        assert!(w.submissions() < 1_000, "kept {}", w.submissions());
    }

    #[test]
    fn times_out_of_order_keep_the_record_valid() {
        let mut w = Window::default();
        for t in [500, 100, 900, 50, 900, 2_000, 10] {
            w.record(c(7), t, 300);
            w.check().unwrap();
        }
        // Kept: what can count for a submission at the newest time.
        assert_eq!(w.count(c(7), 2_000, 300), 1);
        // A time older than the newest minus the window is not kept.
        assert_eq!(w.count(c(7), 10, 300), 0);
    }

    #[test]
    fn loading_refuses_an_empty_or_repeated_record() {
        let mut w = Window::default();
        assert!(!w.load(c(1), VecDeque::new(), 100));
        assert!(w.is_empty());
        assert!(w.load(c(1), VecDeque::from([5, 9]), 100));
        assert!(!w.load(c(1), VecDeque::from([20]), 100));
        assert_eq!((w.len(), w.next_expiry()), (1, Some(109)));
        w.check().unwrap();
    }

    #[test]
    fn heap_bytes_count_records_times_and_expiries() {
        let mut w = Window::default();
        assert_eq!(w.heap_bytes(), 0);
        for x in 0..100u32 {
            for t in 0..10 {
                w.record(c(x), 1_000 + t, 1_000_000);
            }
        }
        // Per record: its map slot (48), its times (8 each), its expiry
        // entry (32).
        let least = 100 * 48 + 1_000 * 8 + 100 * 32;
        let bytes = w.heap_bytes();
        assert!(bytes >= least && bytes < 4 * least, "{bytes} for {least}");
        w.clear();
        assert!(w.heap_bytes() < least / 2, "{}", w.heap_bytes());
    }

    #[test]
    fn expiry_follows_the_window_and_clear_forgets() {
        let mut w = Window::default();
        assert!(w.record(c(1), 100, 50));
        assert!(!w.record(c(1), 120, 50));
        assert_eq!(w.next_expiry(), Some(170));
        w.set_window(500);
        assert_eq!(w.next_expiry(), Some(620));
        assert!(w.expire(619).is_empty());
        assert_eq!(w.expire(620), vec![c(1)]);
        assert!(w.is_empty());
        w.record(c(2), 5, 10);
        w.record(c(3), 5, 10);
        let mut gone = w.clear();
        gone.sort();
        assert_eq!(gone, vec![c(2), c(3)]);
        w.check().unwrap();
    }
}

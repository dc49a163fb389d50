//! The queue history behind the plots: every `interval` the sampler finds the
//! queues (`SCAN ... TYPE orcaqueue`) and records, per queue, its length
//! (`ORCA.LEN`, O(1)) and its front wait (`ORCA.LIST LIMIT 1`, O(log n)):
//! how long the reservation at position 1 has been due (server clock minus
//! its `release_at`; 0 while it is not yet due). Samples older than an hour
//! are dropped; nothing is stored outside this process.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::orca::Orca;

/// The history kept per queue.
pub const WINDOW_MS: i64 = 3_600_000;
/// At most this many queues are listed and sampled.
pub const MAX_QUEUES: usize = 10_000;
/// Queues per pipeline. Each queue's front job comes with its payload (up
/// to `orca.max-payload-bytes`, 4 MiB by default): a pipeline holds at most
/// this many of them.
const BATCH: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Server time (ms).
    pub t: i64,
    pub len: i64,
    /// Front wait (ms); None when the queue is empty.
    pub front_wait: Option<i64>,
}

#[derive(Default)]
struct Inner {
    queues: Vec<String>,
    non_utf8: usize,
    series: HashMap<String, VecDeque<Sample>>,
    scanned_at: Option<i64>,
    error: Option<String>,
}

/// What the overview needs from the last scan.
pub struct Discovery {
    pub queues: Vec<String>,
    pub non_utf8: usize,
    pub scanned_at: Option<i64>,
    pub error: Option<String>,
    pub truncated: bool,
}

#[derive(Clone, Default)]
pub struct History {
    inner: Arc<RwLock<Inner>>,
}

impl History {
    pub fn discovery(&self) -> Discovery {
        let g = self.inner.read().unwrap_or_else(|e| e.into_inner());
        Discovery {
            queues: g.queues.clone(),
            non_utf8: g.non_utf8,
            scanned_at: g.scanned_at,
            error: g.error.clone(),
            truncated: g.queues.len() >= MAX_QUEUES,
        }
    }

    pub fn series(&self, queue: &str) -> Vec<Sample> {
        let g = self.inner.read().unwrap_or_else(|e| e.into_inner());
        g.series
            .get(queue)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    fn fail(&self, error: String) {
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        g.error = Some(error);
    }

    fn record(&self, now: i64, queues: Vec<String>, non_utf8: usize, samples: Vec<Sample>) {
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let mut series = std::mem::take(&mut g.series);
        series.retain(|q, _| queues.binary_search(q).is_ok());
        for (q, s) in queues.iter().zip(samples) {
            let e = series.entry(q.clone()).or_default();
            e.push_back(s);
            while e.front().is_some_and(|f| f.t < now - WINDOW_MS) {
                e.pop_front();
            }
        }
        g.series = series;
        g.queues = queues;
        g.non_utf8 = non_utf8;
        g.scanned_at = Some(now);
        g.error = None;
    }

    /// One round: scan, then sample every queue found. The error is also
    /// kept for the overview.
    pub async fn sample_once(&self, orca: &Orca) -> Result<(), crate::orca::OrcaError> {
        let r = self.try_sample(orca).await;
        if let Err(e) = &r {
            tracing::warn!("sampling failed: {e}");
            self.fail(e.to_string());
        }
        r
    }

    async fn try_sample(&self, orca: &Orca) -> Result<(), crate::orca::OrcaError> {
        let (queues, non_utf8) = orca.scan_queues(MAX_QUEUES).await?;
        let now = orca.time_ms().await?;
        let mut samples = Vec::with_capacity(queues.len());
        for chunk in queues.chunks(BATCH) {
            for (len, front) in orca.fronts(chunk).await? {
                let front_wait = front.map(|j| j.release_at.map_or(0, |r| (now - r).max(0)));
                samples.push(Sample {
                    t: now,
                    len,
                    front_wait,
                });
            }
        }
        self.record(now, queues, non_utf8, samples);
        Ok(())
    }

    /// Sample forever, every `interval`.
    pub async fn run(self, orca: Arc<Orca>, interval: Duration) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let _ = self.sample_once(&orca).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_samples_and_gone_queues_are_dropped() {
        let h = History::default();
        let s = |t| Sample {
            t,
            len: 1,
            front_wait: Some(0),
        };
        h.record(0, vec!["a".into(), "b".into()], 0, vec![s(0), s(0)]);
        h.record(WINDOW_MS, vec!["a".into()], 0, vec![s(WINDOW_MS)]);
        assert_eq!(h.series("a").len(), 2);
        assert!(h.series("b").is_empty());
        h.record(WINDOW_MS + 1, vec!["a".into()], 0, vec![s(WINDOW_MS + 1)]);
        assert_eq!(h.series("a").len(), 2);
        assert_eq!(h.discovery().queues, vec!["a".to_string()]);
    }
}

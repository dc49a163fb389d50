//! `ORCA.STATS` is O(n) on the server (it walks every queued job for the
//! wait times), so pages read it through this cache: at most one call per
//! queue per `ttl`, and concurrent pages wait for the same call instead of
//! each issuing their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::orca::{Fields, Orca, OrcaResult};

type Slot = Arc<tokio::sync::Mutex<Option<(Instant, Arc<Fields>)>>>;

/// Entries beyond this are pruned (expired ones first).
const MAX_ENTRIES: usize = 20_000;

pub struct StatsCache {
    ttl: Duration,
    slots: Mutex<HashMap<String, Slot>>,
}

impl StatsCache {
    pub fn new(ttl: Duration) -> StatsCache {
        StatsCache {
            ttl,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, queue: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if slots.len() >= MAX_ENTRIES && !slots.contains_key(queue) {
            let ttl = self.ttl;
            slots.retain(|_, s| {
                s.try_lock()
                    .map(|g| g.as_ref().is_some_and(|(at, _)| at.elapsed() < ttl))
                    .unwrap_or(true)
            });
            if slots.len() >= MAX_ENTRIES {
                slots.clear();
            }
        }
        slots.entry(queue.to_string()).or_default().clone()
    }

    /// The queue's stats and their age.
    pub async fn get(&self, orca: &Orca, queue: &str) -> OrcaResult<(Arc<Fields>, Duration)> {
        let slot = self.slot(queue);
        let mut g = slot.lock().await;
        if let Some((at, f)) = g.as_ref() {
            if at.elapsed() < self.ttl {
                return Ok((f.clone(), at.elapsed()));
            }
        }
        let f = Arc::new(orca.stats(queue).await?);
        *g = Some((Instant::now(), f.clone()));
        Ok((f, Duration::ZERO))
    }

    /// Forget a queue's stats (after an action changed it).
    pub fn invalidate(&self, queue: &str) {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.remove(queue);
    }
}

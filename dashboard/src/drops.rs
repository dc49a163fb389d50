//! Dropped gates, kept so staff can notify every submitter. `ORCA.GATE ...
//! DROP` removes the held jobs and replies with their configs; that reply is
//! the only copy left, so the dashboard writes it to its log (one line per
//! config) and keeps it in memory under an unguessable id, where the page
//! after the drop shows it and offers it as a JSON download. Memory is
//! bounded: the last `MAX_ENTRIES` drops, at most `MAX_BYTES` of configs
//! (the newest drop is always kept, whatever its size).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

pub const MAX_ENTRIES: usize = 200;
pub const MAX_BYTES: usize = 256 << 20;

/// One `ORCA.GATE ... DROP` and what it removed.
#[derive(Debug)]
pub struct Dropped {
    pub id: String,
    pub queue: String,
    pub gate: String,
    /// Server time of the drop (ms).
    pub at: i64,
    /// The held count the confirmation showed, if the form sent it.
    pub expected: Option<u64>,
    /// The configs as given, in arrival order.
    pub configs: Vec<String>,
}

impl Dropped {
    fn bytes(&self) -> usize {
        self.configs.iter().map(String::len).sum::<usize>() + self.gate.len() + self.queue.len()
    }

    /// The download: `{"queue", "gate", "dropped_at", "count", "configs"}`,
    /// each config embedded exactly as given (they are JSON objects; a
    /// config that were not JSON would be embedded as a string), in parts:
    /// a download is streamed a config at a time, never copied whole.
    pub fn json_parts(self: &Arc<Self>) -> impl Iterator<Item = String> + Send + 'static {
        let d = self.clone();
        let n = d.configs.len();
        (0..n + 2).map(move |i| match i {
            0 => format!(
                "{{\n  \"queue\": {},\n  \"gate\": {},\n  \"dropped_at\": {},\n  \"count\": {},\n  \"configs\": [",
                serde_json::Value::from(d.queue.as_str()),
                serde_json::Value::from(d.gate.as_str()),
                d.at,
                n
            ),
            i if i <= n => {
                let c = &d.configs[i - 1];
                let mut out = String::from(if i == 1 { "\n    " } else { ",\n    " });
                if serde_json::from_str::<serde::de::IgnoredAny>(c).is_ok() {
                    out.push_str(c.trim());
                } else {
                    out.push_str(&serde_json::Value::from(c.as_str()).to_string());
                }
                out
            }
            _ if n == 0 => "]\n}\n".to_string(),
            _ => "\n  ]\n}\n".to_string(),
        })
    }

    /// The whole download as one string (tests).
    #[cfg(test)]
    pub fn to_json(self: &Arc<Self>) -> String {
        self.json_parts().collect()
    }
}

#[derive(Default)]
pub struct Drops {
    inner: Mutex<VecDeque<Arc<Dropped>>>,
}

/// 128 random bits, hex.
fn new_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: fall back to the std hasher's random keys.
        use std::hash::{BuildHasher, Hasher};
        for chunk in b.chunks_mut(8) {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Drops {
    /// Keep a drop (and log every config of it); returns it with its id.
    pub fn add(
        &self,
        queue: &str,
        gate: &str,
        at: i64,
        expected: Option<u64>,
        configs: Vec<String>,
    ) -> Arc<Dropped> {
        let d = Arc::new(Dropped {
            id: new_id(),
            queue: queue.to_string(),
            gate: gate.to_string(),
            at,
            expected,
            configs,
        });
        tracing::warn!(
            "dropped gate {:?} of queue {:?}: {} held jobs removed (drop {})",
            d.gate,
            d.queue,
            d.configs.len(),
            d.id
        );
        for c in &d.configs {
            tracing::warn!("dropped config (drop {}): {c}", d.id);
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.push_back(d.clone());
        let mut total: usize = g.iter().map(|x| x.bytes()).sum();
        while g.len() > MAX_ENTRIES || (g.len() > 1 && total > MAX_BYTES) {
            if let Some(old) = g.pop_front() {
                total -= old.bytes();
            }
        }
        d
    }

    pub fn get(&self, id: &str) -> Option<Arc<Dropped>> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.iter().find(|d| d.id == id).cloned()
    }

    /// The drops of one queue kept in memory, newest first.
    pub fn of_queue(&self, queue: &str) -> Vec<Arc<Dropped>> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.iter()
            .rev()
            .filter(|d| d.queue == queue)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_kept_and_bounded() {
        let drops = Drops::default();
        let first = drops.add("q", "g", 1, Some(1), vec![r#"{"key":"a"}"#.into()]);
        assert_eq!(first.id.len(), 32);
        assert_eq!(drops.get(&first.id).unwrap().configs.len(), 1);
        for i in 0..MAX_ENTRIES {
            drops.add("q", "g", i as i64, None, Vec::new());
        }
        assert!(drops.get(&first.id).is_none(), "the oldest went first");
        assert_eq!(drops.of_queue("q").len(), MAX_ENTRIES);
        assert!(drops.of_queue("other").is_empty());
        assert_eq!(drops.of_queue("q")[0].at, (MAX_ENTRIES - 1) as i64);
        // a drop larger than the whole budget is still kept, alone
        let big = "x".repeat(MAX_BYTES + 1);
        let d = drops.add("q", "g", 0, None, vec![big]);
        assert!(drops.get(&d.id).is_some());
        assert_eq!(drops.of_queue("q").len(), 1);
    }

    #[test]
    fn the_download_keeps_configs_as_given() {
        let d = Arc::new(Dropped {
            id: "x".into(),
            queue: "q\"1".into(),
            gate: "img".into(),
            at: 5,
            expected: None,
            configs: vec![
                r#"{"key":"a","n":1.50,"z":0,"a":1}"#.into(),
                "not json".into(),
            ],
        });
        let j = d.to_json();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["queue"], "q\"1");
        assert_eq!(v["count"], 2);
        assert_eq!(v["configs"][1], "not json");
        // the first config's text is embedded byte for byte (key order, 1.50)
        assert!(j.contains(r#"{"key":"a","n":1.50,"z":0,"a":1}"#), "{j}");
        let empty = Arc::new(Dropped {
            id: "y".into(),
            queue: d.queue.clone(),
            gate: d.gate.clone(),
            at: d.at,
            expected: None,
            configs: Vec::new(),
        });
        let v: serde_json::Value = serde_json::from_str(&empty.to_json()).unwrap();
        assert_eq!(v["configs"], serde_json::json!([]));
    }
}

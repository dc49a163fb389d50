//! The job config (Orca's `GradingJobConfig`): the few fields the queue reads,
//! validated in one pass, and the orca key derived from them.
//!
//! The config is scanned once (`scan.rs`, a hand-written validator that
//! accepts exactly what the earlier serde_json parse accepted); every field
//! the queue does not need is skipped without building anything (see
//! docs/design.md for costs).

use base64::Engine;
use sha2::{Digest, Sha256};

use super::containers::idmap::{fmix64, random_word};
use super::error::QueueError;
use super::limits::MAX_TIME;
use super::scan::{self, Id, Num};

/// The raw 32-byte SHA-256 of `key + response_url`; shown as base64.
pub type JobKey = [u8; 32];

/// The secret of this process's orca-key hashes.
fn key_secret() -> u64 {
    static SECRET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SECRET.get_or_init(random_word)
}

/// The hash of an orca key in the queue's tables. The key is a SHA-256
/// digest, uniform, but a client can grind its inputs until the digest's
/// first bits put many keys in one bucket (about 2^20 tries per key for a
/// table of a million slots), so its first 8 bytes go through a mix keyed
/// by a per-process secret: which bits collide cannot be known outside.
pub(crate) fn key_hash(key: &JobKey) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[..8]);
    fmix64(u64::from_le_bytes(b) ^ key_secret())
}

/// Hasher for maps keyed by `JobKey`: `key_hash` (whatever else is hashed
/// is folded in, mixed the same way), at a fraction of SipHash's cost.
#[derive(Clone, Copy)]
pub struct KeyHasher(u64);

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher(key_secret())
    }
}

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        fmix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        // [u8; 32] hashes as its length (8 bytes) then its bytes; the
        // first 8 bytes of the key end the fold (the rest adds nothing a
        // digest's first 8 bytes do not have). Fold whatever arrives so
        // any use stays correct.
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(29) ^ u64::from_le_bytes(b);
            if bytes.len() >= 32 {
                break;
            }
        }
    }
}

/// `HashMap` keyed by `JobKey`.
pub type KeyMap<V> = std::collections::HashMap<JobKey, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// What the queue needs from a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobConfig {
    pub job_key: JobKey,
    /// `user.<id>` or `team.<id>`.
    pub collation: Option<String>,
    /// Delay in ms (>= 0).
    pub priority: i64,
    /// The gate the job waits behind while that gate is closed.
    pub gate: Option<String>,
}

/// Bounds on what a config may hold (module settings `orca.max-key-length`
/// and `orca.max-collation-id-length`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigLimits {
    pub max_key_len: usize,
    pub max_collation_id_len: usize,
    pub max_gate_len: usize,
}

impl ConfigLimits {
    pub const NONE: ConfigLimits = ConfigLimits {
        max_key_len: usize::MAX,
        max_collation_id_len: usize::MAX,
        max_gate_len: usize::MAX,
    };
}

/// Parse and validate a config. The bytes must be one JSON object.
pub fn parse_config(bytes: &[u8]) -> Result<JobConfig, QueueError> {
    parse_config_limited(bytes, &ConfigLimits::NONE)
}

/// `parse_config` with bounds on the key and collation id lengths (bytes).
pub fn parse_config_limited(bytes: &[u8], limits: &ConfigLimits) -> Result<JobConfig, QueueError> {
    let raw = scan::scan(bytes).map_err(|e| QueueError::BadConfig(e.to_string()))?;
    let key = raw
        .key
        .ok_or_else(|| QueueError::BadConfig("config has no string field 'key'".into()))?;
    if key.len() > limits.max_key_len {
        return Err(QueueError::BadConfig(format!(
            "config key is {} bytes; the limit is {} (orca.max-key-length)",
            key.len(),
            limits.max_key_len
        )));
    }
    let url = raw.response_url.as_deref().unwrap_or_default();
    let priority = match raw.priority {
        None => 0,
        Some(Num::U64(v)) => {
            if v > MAX_TIME as u64 {
                return Err(QueueError::BadConfig(format!(
                    "priority must be at most {MAX_TIME} ms"
                )));
            }
            v as i64
        }
        Some(Num::I64(_)) => {
            return Err(QueueError::BadConfig(
                "priority must be an integer >= 0 (ms)".into(),
            ))
        }
        // A fraction or exponent, -0, or beyond 64 bits (what serde_json
        // would hold as f64).
        Some(Num::F64) => {
            return Err(QueueError::BadConfig(
                "priority must be an integer number of ms, not a fraction".into(),
            ))
        }
    };
    let collation = match raw.collation {
        None => None,
        Some(c) => {
            let kind = c.kind.ok_or_else(|| {
                QueueError::BadConfig("collation needs a 'type' of \"user\" or \"team\"".into())
            })?;
            let kind = match &*kind {
                b"user" => "user",
                b"team" => "team",
                _ => {
                    return Err(QueueError::BadConfig(
                        "collation type must be \"user\" or \"team\"".into(),
                    ))
                }
            };
            let int;
            let id: &[u8] = match &c.id {
                Some(Id::Str(s)) => s,
                Some(Id::Int(i)) => {
                    int = i.to_string();
                    int.as_bytes()
                }
                None => {
                    return Err(QueueError::BadConfig(
                        "collation needs an 'id' (string)".into(),
                    ))
                }
            };
            if id.is_empty() {
                return Err(QueueError::BadConfig(
                    "collation id must not be empty".into(),
                ));
            }
            if id.len() > limits.max_collation_id_len {
                return Err(QueueError::BadConfig(format!(
                    "collation id is {} bytes; the limit is {} (orca.max-collation-id-length)",
                    id.len(),
                    limits.max_collation_id_len
                )));
            }
            // The scanner checked that strings are UTF-8.
            let id = std::str::from_utf8(id)
                .map_err(|_| QueueError::BadConfig("collation id is not UTF-8".into()))?;
            let mut name = String::with_capacity(kind.len() + 1 + id.len());
            name.push_str(kind);
            name.push('.');
            name.push_str(id);
            Some(name)
        }
    };
    let gate = match raw.gate {
        None => None,
        Some(g) => {
            if g.is_empty() {
                return Err(QueueError::BadConfig("gate must not be empty".into()));
            }
            if g.len() > limits.max_gate_len {
                return Err(QueueError::BadConfig(format!(
                    "gate is {} bytes; the limit is {} (orca.max-gate-length)",
                    g.len(),
                    limits.max_gate_len
                )));
            }
            // The scanner checked that strings are UTF-8.
            Some(
                String::from_utf8(g.into_owned())
                    .map_err(|_| QueueError::BadConfig("gate is not UTF-8".into()))?,
            )
        }
    };
    Ok(JobConfig {
        job_key: key_of(&key, url),
        collation,
        priority,
        gate,
    })
}

/// sha256(key + response_url), raw.
pub fn orca_key(key: &str, response_url: &str) -> JobKey {
    key_of(key.as_bytes(), response_url.as_bytes())
}

fn key_of(key: &[u8], response_url: &[u8]) -> JobKey {
    let mut h = Sha256::new();
    h.update(key);
    h.update(response_url);
    h.finalize().into()
}

/// The orca key as users see it: standard base64 with padding (44 chars).
pub fn encode_key(key: &JobKey) -> String {
    base64::engine::general_purpose::STANDARD.encode(key)
}

/// Parse an orca key given by a client.
pub fn decode_key(text: &[u8]) -> Option<JobKey> {
    if text.len() != 44 {
        return None;
    }
    let v = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    v.try_into().ok()
}

/// A collation name as stored: `user.<id>` or `team.<id>` with a non-empty id.
pub fn valid_collation_name(name: &str) -> bool {
    (name.starts_with("user.") || name.starts_with("team.")) && name.len() > 5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ground_key_prefixes_do_not_crowd_a_bucket() {
        // A client that ground 1000 keys whose digests agree on their
        // first four bytes (what picks a slot when a hash is the raw
        // prefix) finds them spread over the table's home slots.
        let keys = (0..1000u32).map(|i| {
            let mut k = [0u8; 32];
            k[..4].copy_from_slice(&0x5eed_u32.to_le_bytes());
            k[4..8].copy_from_slice(&i.to_le_bytes());
            k
        });
        let homes: std::collections::HashSet<u64> = keys
            .map(|k| (key_hash(&k) as u32 as u64 * 4096) >> 32)
            .collect();
        assert!(homes.len() > 700, "{} distinct home slots", homes.len());
        // The same key always hashes the same, and maps use the same hash.
        let k = [7u8; 32];
        assert_eq!(key_hash(&k), key_hash(&k));
        use std::hash::BuildHasher;
        let b = std::hash::BuildHasherDefault::<KeyHasher>::default();
        assert_eq!(b.hash_one(k), b.hash_one(k));
    }

    #[test]
    fn orca_key_matches_node_crypto() {
        // node -e 'console.log(require("crypto").createHash("sha256").update("abc"+"http://x").digest("base64"))'
        let k = orca_key("abc", "http://x");
        assert_eq!(encode_key(&k).len(), 44);
        assert_eq!(decode_key(encode_key(&k).as_bytes()), Some(k));
        assert!(!encode_key(&k).contains('.'));
        // sha256("") is well known.
        assert_eq!(
            encode_key(&orca_key("", "")),
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
    }

    #[test]
    fn parses_fields() {
        let c = parse_config(
            br#"{"key":"k1","response_url":"u","collation":{"type":"user","id":"7"},"priority":60000,"script":[1,2]}"#,
        )
        .unwrap();
        assert_eq!(c.collation.as_deref(), Some("user.7"));
        assert_eq!(c.priority, 60000);
        assert_eq!(c.job_key, orca_key("k1", "u"));
        let c = parse_config(br#" {"key":"k","collation":{"type":"team","id":12}}"#).unwrap();
        assert_eq!(c.collation.as_deref(), Some("team.12"));
        assert_eq!(c.priority, 0);
        let c = parse_config(br#"{"key":"k","collation":null,"priority":null}"#).unwrap();
        assert_eq!(c.collation, None);
    }

    #[test]
    fn rejects_bad_configs() {
        for bad in [
            &b""[..],
            b"[]",
            b"[\"k\"]",
            b"\"k\"",
            b"{",
            b"{\"key\":1}",
            b"{}",
            b"{\"response_url\":\"x\"}",
            b"{\"key\":\"k\",\"priority\":-1}",
            b"{\"key\":\"k\",\"priority\":1.5}",
            b"{\"key\":\"k\",\"priority\":\"5\"}",
            b"{\"key\":\"k\",\"priority\":1e300}",
            b"{\"key\":\"k\",\"priority\":18446744073709551615}",
            b"{\"key\":\"k\",\"collation\":{\"type\":\"group\",\"id\":\"1\"}}",
            b"{\"key\":\"k\",\"collation\":{\"type\":\"user\"}}",
            b"{\"key\":\"k\",\"collation\":{\"type\":\"user\",\"id\":\"\"}}",
            b"{\"key\":\"k\",\"collation\":{\"id\":\"1\"}}",
            b"{\"key\":\"k\",\"collation\":\"user.1\"}",
            b"{\"key\":\"k\",\"collation\":[\"user\",\"1\"]}",
            b"{\"key\":\"k\",\"collation\":{\"type\":\"user\",\"type\":\"team\",\"id\":\"1\"}}",
            b"{\"key\":\"k\",\"key\":\"j\"}",
            b"{\"key\":\"k\"} x",
            b"{\"key\":\"\xff\"}",
        ] {
            assert!(
                parse_config(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn limits() {
        let l = ConfigLimits {
            max_key_len: 3,
            max_collation_id_len: 2,
            max_gate_len: 4,
        };
        let gate = |g: &str| {
            let doc = format!("{{\"key\":\"a\",\"gate\":{g}}}");
            parse_config_limited(doc.as_bytes(), &l)
        };
        assert_eq!(gate("\"img\"").unwrap().gate.as_deref(), Some("img"));
        assert_eq!(gate("null").unwrap().gate, None);
        assert!(gate("\"image\"").is_err(), "over max-gate-length");
        assert!(gate("\"\"").is_err(), "empty gate");
        assert!(gate("3").is_err(), "not a string");
        assert!(parse_config_limited(br#"{"key":"abc"}"#, &l).is_ok());
        assert!(parse_config_limited(br#"{"key":"abcd"}"#, &l).is_err());
        assert!(
            parse_config_limited(br#"{"key":"a","collation":{"type":"user","id":"12"}}"#, &l)
                .is_ok()
        );
        assert!(
            parse_config_limited(br#"{"key":"a","collation":{"type":"user","id":"123"}}"#, &l)
                .is_err()
        );
    }

    #[test]
    fn decode_key_rejects_junk() {
        assert_eq!(decode_key(b""), None);
        assert_eq!(decode_key(b"not a key"), None);
        assert_eq!(decode_key(&[b'A'; 44]), None);
        assert_eq!(decode_key(&[0xff; 44]), None);
    }
}

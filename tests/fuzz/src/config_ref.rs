//! The reference oracle for the config scanner (`src/core/scan.rs`): the
//! serde_json parse that `parse_config_limited` used before the scanner
//! replaced it (commit 49bbe11), logic unchanged but for the `gate` field
//! added since (a string or null, non-empty, bounded). Configs are replayed from
//! AOF files and replicas, so the scanner must accept exactly what this
//! accepts and read the same `JobConfig` from it; `tests/props/config_diff/`
//! and the `config` fuzz target compare the two.
//!
//! Included as a module by `src/lib.rs` (the fuzz crate, and through it
//! `tests/props/fuzz_corpus.rs`, whose copy `tests/props/config_diff/` uses).

use orca::core::config::{orca_key, ConfigLimits, JobConfig};
use orca::core::{QueueError, MAX_TIME};
use serde::Deserialize;
use std::borrow::Cow;

#[derive(Deserialize)]
struct RawConfig<'a> {
    #[serde(borrow)]
    key: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    response_url: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    collation: Option<RawCollation<'a>>,
    #[serde(default)]
    priority: Option<serde_json::Number>,
    #[serde(borrow, default)]
    gate: Option<Cow<'a, str>>,
}

/// `{"type": ..., "id": ...}`: an object only (the derived parser would
/// also take a positional array).
struct RawCollation<'a> {
    kind: Option<Cow<'a, str>>,
    id: Option<RawId<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for RawCollation<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = RawCollation<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a collation object {\"type\": ..., \"id\": ...}")
            }
            fn visit_map<M: serde::de::MapAccess<'de>>(
                self,
                mut m: M,
            ) -> Result<Self::Value, M::Error> {
                let mut out = RawCollation {
                    kind: None,
                    id: None,
                };
                while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                    match &*k {
                        "type" => {
                            if out.kind.is_some() {
                                return Err(serde::de::Error::duplicate_field("type"));
                            }
                            out.kind = m.next_value::<Option<Cow<'de, str>>>()?;
                        }
                        "id" => {
                            if out.id.is_some() {
                                return Err(serde::de::Error::duplicate_field("id"));
                            }
                            out.id = m.next_value::<Option<RawId<'de>>>()?;
                        }
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawId<'a> {
    #[serde(borrow)]
    Str(Cow<'a, str>),
    Int(i64),
}

/// The old `parse_config_limited`, verbatim but for its name.
pub fn reference_parse(bytes: &[u8], limits: &ConfigLimits) -> Result<JobConfig, QueueError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(QueueError::BadConfig("config must be a JSON object".into()));
    }
    let raw: RawConfig = serde_json::from_slice(bytes)
        .map_err(|e| QueueError::BadConfig(format!("invalid config JSON: {e}")))?;
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
    let url = raw.response_url.unwrap_or(Cow::Borrowed(""));
    let priority = match raw.priority {
        None => 0,
        Some(n) => {
            if let Some(v) = n.as_u64() {
                if v > MAX_TIME as u64 {
                    return Err(QueueError::BadConfig(format!(
                        "priority must be at most {MAX_TIME} ms"
                    )));
                }
                v as i64
            } else if n.as_i64().is_some() {
                return Err(QueueError::BadConfig(
                    "priority must be an integer >= 0 (ms)".into(),
                ));
            } else {
                return Err(QueueError::BadConfig(
                    "priority must be an integer number of ms, not a fraction".into(),
                ));
            }
        }
    };
    let collation = match raw.collation {
        None => None,
        Some(c) => {
            let kind = c.kind.ok_or_else(|| {
                QueueError::BadConfig("collation needs a 'type' of \"user\" or \"team\"".into())
            })?;
            if kind != "user" && kind != "team" {
                return Err(QueueError::BadConfig(
                    "collation type must be \"user\" or \"team\"".into(),
                ));
            }
            let id = match c.id {
                Some(RawId::Str(s)) => s.into_owned(),
                Some(RawId::Int(i)) => i.to_string(),
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
            Some(format!("{kind}.{id}"))
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
            Some(g.into_owned())
        }
    };
    Ok(JobConfig {
        job_key: orca_key(&key, &url),
        collation,
        priority,
        gate,
    })
}

/// The scanner and the reference agree on `data` under `limits`: both
/// refuse, or both accept with the same `JobConfig`. The disagreement, if
/// any, as text.
pub fn compare(data: &[u8], limits: &ConfigLimits) -> Result<(), String> {
    let new = orca::core::config::parse_config_limited(data, limits);
    let old = reference_parse(data, limits);
    if let Err(e) = &new {
        let text = e.to_string();
        if text.is_empty() || !text.bytes().all(|c| (0x20..0x7f).contains(&c)) {
            return Err(format!(
                "scanner error text is not printable ASCII: {text:?}"
            ));
        }
    }
    match (&new, &old) {
        (Ok(a), Ok(b)) if a == b => Ok(()),
        (Err(_), Err(_)) => Ok(()),
        _ => Err(format!(
            "scanner and serde_json disagree on {:?} (limits {limits:?}):\n  scanner: {new:?}\n  serde:   {old:?}",
            String::from_utf8_lossy(data)
        )),
    }
}

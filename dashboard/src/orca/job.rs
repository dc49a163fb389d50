//! A job as the module replies it (ORCA.LIST, ORCA.STATUS, ORCA.DEAD LIST),
//! plus what the dashboard reads from its config JSON.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::value::{Fields, Val};

#[derive(Clone, Debug)]
pub struct Job {
    /// The orca key.
    pub key: String,
    pub state: Option<String>,
    pub position: Option<i64>,
    pub collation: Option<String>,
    pub created_at: Option<i64>,
    pub release_at: Option<i64>,
    pub attempts: Option<i64>,
    pub immediate: bool,
    /// The config as stored (decoded as UTF-8, lossily). Listings keep it
    /// only while they look at the job (`drop_payload`).
    pub payload: Option<String>,
    /// Its size in bytes, also once dropped.
    pub payload_len: usize,
    /// What the config says (when the payload is a JSON object).
    pub config: ConfigSummary,
    /// Every other field of the reply, for generic display.
    pub fields: Fields,
}

/// The field of a job config the dashboard shows in listings (a field the
/// queue reads: shown with or without a token).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ConfigSummary {
    pub key: Option<String>,
}

impl Job {
    pub fn from_fields(mut fields: Fields) -> Option<Job> {
        let key = fields.text("key")?.to_string();
        let payload = match fields.take("payload") {
            Some(Val::Str(p)) => Some(p),
            _ => None,
        };
        let config = payload
            .as_deref()
            .and_then(|p| serde_json::from_str::<ConfigSummary>(p).ok())
            .unwrap_or_default();
        Some(Job {
            payload_len: payload.as_ref().map_or(0, String::len),
            key,
            state: fields.text("state").map(str::to_string),
            position: fields.int("position"),
            collation: fields.text("collation").map(str::to_string),
            created_at: fields.int("created_at"),
            release_at: fields.int("release_at"),
            attempts: fields.int("attempts"),
            immediate: fields.int("immediate") == Some(1),
            payload,
            config,
            fields,
        })
    }

    pub fn from_val(v: Val) -> Option<Job> {
        Job::from_fields(v.into_fields()?)
    }

    /// Forget the payload (listings show what `config` read from it).
    pub fn drop_payload(mut self) -> Job {
        self.payload = None;
        self
    }
}

/// The module's FILTER rule (`ORCA.LIST ... FILTER`, src/core/inspect.rs):
/// does the config's `metadata_table[field]` hold `value`, as a string equal
/// to it or an array of strings containing it?
pub fn metadata_matches(payload: &str, field: &str, value: &str) -> bool {
    #[derive(Deserialize)]
    struct MetaOnly {
        metadata_table: Option<serde_json::Map<String, serde_json::Value>>,
    }
    let Ok(m) = serde_json::from_str::<MetaOnly>(payload) else {
        return false;
    };
    match m.metadata_table.as_ref().and_then(|t| t.get(field)) {
        Some(serde_json::Value::String(s)) => s == value,
        Some(serde_json::Value::Array(items)) => {
            items.iter().all(serde_json::Value::is_string)
                && items.iter().any(|i| i.as_str() == Some(value))
        }
        _ => false,
    }
}

/// The orca key of a config: base64(sha256(key + response_url)), standard
/// alphabet with padding (docs/commands.md, "The job reply").
pub fn orca_key(config_key: &str, response_url: &str) -> String {
    let mut h = Sha256::new();
    h.update(config_key.as_bytes());
    h.update(response_url.as_bytes());
    STANDARD.encode(h.finalize())
}

/// True if `s` has the shape of an orca key (44 characters of standard
/// base64 that decode to 32 bytes).
pub fn looks_like_orca_key(s: &str) -> bool {
    s.len() == 44 && STANDARD.decode(s).map(|b| b.len() == 32).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orca_key_matches_the_documented_example() {
        // docs/commands.md: sub-41 + http://web/cb
        assert_eq!(
            orca_key("sub-41", "http://web/cb"),
            "5Zr9ALyYLAy/nvBG54qPNp1OpXLDW+TmNeQJalyzjSk="
        );
        assert!(looks_like_orca_key(
            "5Zr9ALyYLAy/nvBG54qPNp1OpXLDW+TmNeQJalyzjSk="
        ));
        assert!(!looks_like_orca_key("sub-41"));
        assert!(!looks_like_orca_key(&"=".repeat(44)));
    }

    #[test]
    fn metadata_rule_is_the_modules() {
        // the cases of the module's own test (src/core/inspect.rs)
        let p = r#"{"key":"k","metadata_table":{"course":"cs2500","graders":["ann","bob"],"n":3}}"#;
        assert!(metadata_matches(p, "course", "cs2500"));
        assert!(!metadata_matches(p, "course", "cs3500"));
        assert!(metadata_matches(p, "graders", "bob"));
        assert!(!metadata_matches(p, "graders", "eve"));
        assert!(!metadata_matches(p, "n", "3"));
        assert!(!metadata_matches(p, "missing", "x"));
        assert!(!metadata_matches(r#"{"key":"k"}"#, "course", "cs2500"));
        assert!(!metadata_matches(
            r#"{"key":"k","metadata_table":[1]}"#,
            "course",
            "x"
        ));
        assert!(!metadata_matches(
            r#"{"metadata_table":{"a":["x",1]}}"#,
            "a",
            "x"
        ));
    }

    #[test]
    fn config_summary_tolerates_any_payload() {
        let mut f = Fields::default();
        f.0.push(("key".into(), Val::Str("k".into())));
        f.0.push(("payload".into(), Val::Str("not json".into())));
        let j = Job::from_fields(f).unwrap();
        assert!(j.config.key.is_none());
        let mut f = Fields::default();
        f.0.push(("key".into(), Val::Str("k".into())));
        f.0.push((
            "payload".into(),
            Val::Str(r#"{"key":"sub-1","response_url":"u","x":[1]}"#.into()),
        ));
        let j = Job::from_fields(f).unwrap();
        assert_eq!(j.config.key.as_deref(), Some("sub-1"));
        assert_eq!(j.payload_len, 42);
        assert!(j.fields.get("payload").is_none(), "moved out of the fields");
        assert_eq!(j.drop_payload().payload, None);
    }
}

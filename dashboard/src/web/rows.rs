//! View models: jobs and reply maps as rows of display strings, so templates
//! stay free of logic. Maps are rendered generically (every field the server
//! returns), so fields the module adds later show up without code changes.

use super::layout::{collation_href, gate_href, job_href};
use crate::format;
use crate::orca::{Fields, Job, Val};

/// A job in a listing (any state, or found by a search).
pub struct JobRow {
    pub position: String,
    pub key: String,
    pub key_short: String,
    pub href: String,
    /// The config key, shortened for display (`LABEL_MAX` characters).
    pub config_key: String,
    pub collation: String,
    pub collation_label: String,
    pub collation_href: String,
    pub created: String,
    pub created_title: String,
    pub due: String,
    pub attempts: String,
    pub immediate: bool,
    pub cause: String,
    pub died: String,
    /// Held jobs: the gate they wait behind.
    pub gate: String,
    pub gate_label: String,
    pub gate_href: String,
    /// Running jobs: the lease token and the deadline.
    pub lease: String,
    pub deadline: String,
    pub deadline_title: String,
    /// Delayed jobs: when the retry is due.
    pub retry: String,
    /// Queued jobs waiting only because their collation is at the running
    /// cap (`capped` of ORCA.STATUS; set by the listing that asked).
    pub capped: bool,
}

/// The most characters of a config key, collation or gate name a row
/// shows: the module bounds them by settings that may be raised up to
/// 1 MiB, and a page lists up to 1000 rows. Links keep the whole name.
pub const LABEL_MAX: usize = 200;

impl JobRow {
    pub fn new(queue: &str, job: &Job, now: i64) -> JobRow {
        let f = &job.fields;
        let gate = f.text("gate").unwrap_or_default().to_string();
        JobRow {
            position: job.position.map(format::count).unwrap_or_default(),
            key: job.key.clone(),
            key_short: format::short(&job.key, 12),
            href: job_href(queue, &job.key),
            config_key: format::short(job.config.key.as_deref().unwrap_or_default(), LABEL_MAX),
            collation: job.collation.clone().unwrap_or_default(),
            collation_label: format::short(job.collation.as_deref().unwrap_or_default(), LABEL_MAX),
            collation_href: job
                .collation
                .as_deref()
                .map(|c| collation_href(queue, c))
                .unwrap_or_default(),
            created: job
                .created_at
                .map(|t| format::relative(now, t))
                .unwrap_or_default(),
            created_title: job.created_at.map(format::timestamp).unwrap_or_default(),
            due: job
                .release_at
                .map(|t| format::relative(now, t))
                .unwrap_or_default(),
            attempts: job.attempts.map(|a| a.to_string()).unwrap_or_default(),
            immediate: job.immediate,
            cause: f.text("cause").unwrap_or_default().to_string(),
            died: f
                .int("died_at")
                .map(|t| format::relative(now, t))
                .unwrap_or_default(),
            gate_href: if gate.is_empty() {
                String::new()
            } else {
                gate_href(queue, &gate)
            },
            gate_label: format::short(&gate, LABEL_MAX),
            gate,
            lease: f.get("lease").map(Val::to_text).unwrap_or_default(),
            deadline: f
                .int("deadline")
                .map(|t| format::relative(now, t))
                .unwrap_or_default(),
            deadline_title: f.int("deadline").map(format::timestamp).unwrap_or_default(),
            retry: f
                .int("retry_at")
                .map(|t| format::relative(now, t))
                .unwrap_or_default(),
            capped: f.int("capped") == Some(1),
        }
    }
}

/// One line of a generic map display: `wait_all.avg  79  (79 ms)`.
pub struct FieldRow {
    pub name: String,
    pub value: String,
    /// A human reading of the value (a duration or a time), if it has one.
    pub hint: String,
}

fn is_time_field(name: &str) -> bool {
    name.ends_with("_at") || name == "deadline"
}

fn is_duration_field(path: &str, name: &str) -> bool {
    (path.starts_with("wait") && matches!(name, "avg" | "min" | "max"))
        || name.ends_with("_ms")
        || ((path == name || path.starts_with("settings."))
            && (matches!(name, "lifetime" | "deadttl") || name.starts_with("autodelay_")))
        || matches!(
            name,
            "orca.move-to-back-buffer"
                | "orca.lease-time"
                | "orca.retry-base"
                | "orca.retry-cap"
                | "orca.result-ttl"
                | "orca.job-lifetime"
                | "orca.autodelay-window"
                | "orca.autodelay-step"
                | "orca.autodelay-cap"
                | "orca.dead-ttl"
        )
}

/// Flatten a map reply into rows, nested maps as `outer.inner`.
pub fn field_rows(fields: &Fields, now: i64, skip: &[&str]) -> Vec<FieldRow> {
    let mut rows = Vec::new();
    flatten(fields, "", now, skip, &mut rows);
    rows
}

fn flatten(fields: &Fields, path: &str, now: i64, skip: &[&str], rows: &mut Vec<FieldRow>) {
    for (name, v) in &fields.0 {
        if path.is_empty() && skip.contains(&name.as_str()) {
            continue;
        }
        let full = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        match v {
            Val::Map(inner) => flatten(inner, &full, now, skip, rows),
            Val::Array(items)
                if items.iter().all(|i| matches!(i, Val::Map(_))) && !items.is_empty() =>
            {
                for (i, item) in items.iter().enumerate() {
                    if let Val::Map(inner) = item {
                        flatten(inner, &format!("{full}[{i}]"), now, skip, rows);
                    }
                }
            }
            _ => {
                let hint = match v.as_int() {
                    Some(n) if is_time_field(name) => {
                        format!("{} ({})", format::timestamp(n), format::relative(now, n))
                    }
                    Some(n) if is_duration_field(&full, name) => format::duration(n),
                    _ => String::new(),
                };
                let value = match v {
                    Val::Nil => "(nil)".to_string(),
                    Val::Array(a) if a.is_empty() => "(empty)".to_string(),
                    other => other.to_text(),
                };
                rows.push(FieldRow {
                    name: full,
                    value,
                    hint,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_maps_flatten_with_hints() {
        let f = Fields::new(vec![
            ("order".into(), Val::Str("lifo".into())),
            (
                "wait_all".into(),
                Val::Map(Fields::new(vec![
                    ("avg".into(), Val::Int(79_000)),
                    ("max".into(), Val::Nil),
                ])),
            ),
            ("created_at".into(), Val::Int(0)),
            ("leases".into(), Val::Array(vec![])),
            ("skipme".into(), Val::Int(1)),
        ]);
        let rows = field_rows(&f, 1000, &["skipme"]);
        let names: Vec<_> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "order",
                "wait_all.avg",
                "wait_all.max",
                "created_at",
                "leases"
            ]
        );
        assert_eq!(rows[1].hint, "1m 19s");
        assert_eq!(rows[2].value, "(nil)");
        assert!(rows[3].hint.starts_with("1970-01-01 00:00:00 UTC"));
        assert_eq!(rows[4].value, "(empty)");
    }
}

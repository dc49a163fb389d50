//! The top of every queue page: the name, counts by state (cached
//! ORCA.STATS), the plot of the last hour and the tabs. Also checks that
//! the queue exists and is an Orca queue (`TYPE`, O(1)).

use super::error::{AppError, AppResult};
use super::layout::{queue_href, tab_href};
use super::App;
use crate::{format, svg};

pub struct Tab {
    pub label: &'static str,
    pub href: String,
    pub active: bool,
}

pub struct Count {
    pub label: &'static str,
    pub value: String,
    pub id: &'static str,
}

pub struct QueueHead {
    pub name: String,
    pub href: String,
    pub now: i64,
    pub counts: Vec<Count>,
    pub stats_note: String,
    pub stats_error: Option<String>,
    pub chart: String,
    pub tabs: Vec<Tab>,
}

/// The queue name from the query, required.
pub fn queue_name(q: Option<String>) -> AppResult<String> {
    q.ok_or_else(|| AppError::BadRequest("Which queue? The address needs ?q=<queue name>.".into()))
}

/// Refuse names that are not an Orca queue, with a clear page.
pub async fn check_queue(app: &App, name: &str) -> AppResult<()> {
    let t = app.orca.key_type(name).await?;
    match t.as_str() {
        crate::orca::QUEUE_TYPE => Ok(()),
        "none" => Err(AppError::NotFound(format!(
            "There is no queue named \u{201c}{}\u{201d} in this database.",
            format::short(name, 200)
        ))),
        other => Err(AppError::BadRequest(format!(
            "\u{201c}{}\u{201d} is a Redis {other}, not an Orca queue.",
            format::short(name, 200)
        ))),
    }
}

pub async fn queue_head(app: &App, name: &str, active: &str) -> AppResult<QueueHead> {
    check_queue(app, name).await?;
    let now = app.orca.time_ms().await?;
    let mut counts = Vec::new();
    let mut stats_note = String::new();
    let mut stats_error = None;
    match app.stats.get(&app.orca, name).await {
        Ok((s, age)) => {
            for (label, field, id) in [
                ("queued", "queued", "count-queued"),
                ("held", "held", "count-held"),
                ("delayed", "delayed", "count-delayed"),
                ("running", "leased", "count-leased"),
                ("dead", "dead", "count-dead"),
                ("immediate", "immediate", "count-immediate"),
                ("collations", "collations", "count-collations"),
                ("results kept", "results", "count-results"),
            ] {
                if let Some(v) = s.int(field) {
                    counts.push(Count {
                        label,
                        value: format::count(v),
                        id,
                    });
                }
            }
            if let Some(g) = s.map("gates") {
                counts.push(Count {
                    label: "closed gates",
                    value: format::count(g.0.len() as i64),
                    id: "count-gates",
                });
            }
            let oldest = s.map("wait_all").and_then(|w| w.int("max"));
            counts.push(Count {
                label: "oldest wait",
                value: oldest.map(format::duration).unwrap_or_else(|| "-".into()),
                id: "count-oldest",
            });
            stats_note = format!("ORCA.STATS {} s old", age.as_secs());
        }
        Err(e) => stats_error = Some(e.to_string()),
    }
    let tabs = [
        ("Jobs", "jobs"),
        ("Find", "find"),
        ("Gates", "gates"),
        ("Dead letters", "dead"),
        ("Stats", "stats"),
        ("Settings", "settings"),
    ]
    .into_iter()
    .map(|(label, tab)| Tab {
        label,
        href: if tab == "jobs" {
            queue_href(name)
        } else {
            tab_href(tab, name)
        },
        active: tab == active,
    })
    .collect();
    Ok(QueueHead {
        name: name.to_string(),
        href: queue_href(name),
        now,
        counts,
        stats_note,
        stats_error,
        chart: svg::chart(&app.history.series(name)),
        tabs,
    })
}

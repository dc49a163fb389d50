//! What a gate drop removed (`ORCA.GATE ... DROP` replies with the configs
//! of every held job it removed, the only copy left): the page after the
//! drop lists each config (key, response_url, collation, the JSON as
//! given) so staff can tell each submitter, and offers them all as a JSON
//! download. Kept in the dashboard's memory (`crate::drops`) and its log.

use askama::Template;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::error::{AppError, AppResult};
use super::extract::Query;
use super::head::queue_name;
use super::layout::{enc, gate_href, queue_crumbs, tab_href, Crumb, Ctx, Layout};
use crate::drops::{Dropped, MAX_ENTRIES};
use crate::format;

pub fn dropped_href(queue: &str, id: &str) -> String {
    format!("/queue/dropped?q={}&id={}", enc(queue), enc(id))
}

fn download_href(queue: &str, id: &str) -> String {
    format!("/queue/dropped.json?q={}&id={}", enc(queue), enc(id))
}

/// One removed job, as its config tells.
pub struct DroppedRow {
    pub n: usize,
    pub key: String,
    pub response_url: String,
    pub collation: String,
    pub json: String,
}

fn row(n: usize, config: &str) -> DroppedRow {
    let v: Option<serde_json::Value> = serde_json::from_str(config).ok();
    let text = |name: &str| {
        v.as_ref()
            .and_then(|v| v.get(name))
            .map(|x| match x {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default()
    };
    let collation = v
        .as_ref()
        .and_then(|v| v.get("collation"))
        .and_then(|c| {
            let id = match c.get("id")? {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Some(format!("{}.{id}", c.get("type")?.as_str()?))
        })
        .unwrap_or_default();
    DroppedRow {
        n,
        key: text("key"),
        response_url: text("response_url"),
        collation,
        json: format::pretty_json(config).0,
    }
}

#[derive(Template)]
#[template(path = "dropped.html")]
struct DroppedPage {
    l: Layout,
    queue: String,
    gate: String,
    gate_href: String,
    gates_href: String,
    count: usize,
    expected: Option<u64>,
    at: String,
    id: String,
    download: String,
    rows: Vec<DroppedRow>,
}

#[derive(Deserialize)]
pub struct DroppedQuery {
    q: Option<String>,
    id: Option<String>,
}

fn find(app: &super::App, queue: &str, id: Option<String>) -> AppResult<std::sync::Arc<Dropped>> {
    let id = id.unwrap_or_default();
    app.drops
        .get(&id)
        .filter(|d| d.queue == queue)
        .ok_or_else(|| {
            AppError::NotFound(format!(
                "This dashboard no longer keeps that gate drop in memory (it keeps the last {} \
                 drops, until it restarts). Every dropped config was also written to its log \
                 (lines \u{201c}dropped config (drop {})\u{201d}).",
                MAX_ENTRIES,
                format::short(&id, 40)
            ))
        })
}

/// The page after a drop: every removed config.
pub async fn page(ctx: Ctx, Query(q): Query<DroppedQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let d = find(&ctx.app, &name, q.id)?;
    let mut crumbs = queue_crumbs(&name);
    crumbs.push(Crumb {
        label: format!("dropped gate {}", format::short(&d.gate, 40)),
        href: dropped_href(&name, &d.id),
    });
    let page = DroppedPage {
        l: ctx.layout(
            format!("dropped gate {}", format::short(&d.gate, 40)),
            crumbs,
        ),
        queue: name.clone(),
        gate: d.gate.clone(),
        gate_href: gate_href(&name, &d.gate),
        gates_href: tab_href("gates", &name),
        count: d.configs.len(),
        expected: d.expected,
        at: format::timestamp(d.at),
        id: d.id.clone(),
        download: download_href(&name, &d.id),
        rows: d
            .configs
            .iter()
            .enumerate()
            .map(|(i, c)| row(i + 1, c))
            .collect(),
    };
    Ok(ctx.render(&page))
}

/// The removed configs as a JSON file.
pub async fn download(ctx: Ctx, Query(q): Query<DroppedQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let d = find(&ctx.app, &name, q.id)?;
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .take(60)
            .collect()
    };
    let filename = format!("dropped-{}-{}-{}.json", safe(&d.queue), safe(&d.gate), d.at);
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "application/json; charset=utf-8".to_string(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        d.to_json(),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_what_staff_need() {
        let r = row(
            3,
            r#"{"key":"sub-51","response_url":"http://web/cb/51","collation":{"type":"user","id":7},"gate":"img"}"#,
        );
        assert_eq!(
            (
                r.n,
                r.key.as_str(),
                r.response_url.as_str(),
                r.collation.as_str()
            ),
            (3, "sub-51", "http://web/cb/51", "user.7")
        );
        assert!(r.json.contains("\n  \"gate\": \"img\""));
        let r = row(1, "not json");
        assert_eq!((r.key.as_str(), r.json.as_str()), ("", "not json"));
    }
}

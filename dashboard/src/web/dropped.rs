//! What a gate drop removed (`ORCA.GATE ... DROP` replies with the configs
//! of every held job it removed, the only copy left): the page after the
//! drop lists each config (key, response_url, collation, the JSON as
//! given) so staff can tell each submitter, and offers them all as a JSON
//! download. Kept in the dashboard's memory (`crate::drops`) and its log.

use askama::Template;
use axum::body::Body;
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

/// Configs the page shows (all are in the download).
pub const SHOWN: usize = 100;
/// The most of one config the page shows.
pub const CONFIG_SHOWN_BYTES: usize = 16 * 1024;

/// One removed job, as its config tells: the fields the queue reads always;
/// its `response_url` and the config itself only with a token.
pub struct DroppedRow {
    pub n: usize,
    pub key: String,
    pub response_url: String,
    pub collation: String,
    pub json: Option<crate::render::TextView>,
}

/// What a row reads from a config (unknown fields skipped, nothing built).
#[derive(Deserialize, Default)]
struct Summary {
    key: Option<serde_json::Value>,
    response_url: Option<serde_json::Value>,
    collation: Option<Collation>,
}

#[derive(Deserialize)]
struct Collation {
    #[serde(rename = "type")]
    kind: Option<String>,
    id: Option<serde_json::Value>,
}

fn text(v: Option<serde_json::Value>) -> String {
    match v {
        Some(serde_json::Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn row(n: usize, config: &str, show: bool) -> DroppedRow {
    // The fields the queue reads are strings, numbers or small objects:
    // read only those (a config's other fields may be megabytes).
    let v: Summary = serde_json::from_str(config).unwrap_or_default();
    let collation = v
        .collation
        .and_then(|c| Some(format!("{}.{}", c.kind?, text(Some(c.id?)))))
        .unwrap_or_default();
    DroppedRow {
        n,
        key: format::short(&text(v.key), 200),
        response_url: if show {
            format::short(&text(v.response_url), 200)
        } else {
            String::new()
        },
        collation: format::short(&collation, 200),
        json: show.then(|| crate::render::text_view_within(config, CONFIG_SHOWN_BYTES)),
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
    /// Configs not on the page (only in the download).
    more: usize,
    /// Without a token: response_urls and configs are not shown.
    show: bool,
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
            .take(SHOWN)
            .enumerate()
            .map(|(i, c)| row(i + 1, c, ctx.app.show_payloads))
            .collect(),
        more: d.configs.len().saturating_sub(SHOWN),
        show: ctx.app.show_payloads,
    };
    Ok(ctx.render(&page))
}

/// The removed configs as a JSON file, streamed a config at a time.
pub async fn download(ctx: Ctx, Query(q): Query<DroppedQuery>) -> AppResult<Response> {
    if !ctx.app.show_payloads {
        return Err(AppError::Forbidden(
            "The dropped configs are shown only to holders of this dashboard's token: start \
             it with --token (or ORCA_DASHBOARD_TOKEN) and log in. Every dropped config is \
             also in the dashboard's log."
                .into(),
        ));
    }
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
        Body::from_stream(futures_util::stream::iter(
            d.json_parts().map(Ok::<_, std::convert::Infallible>),
        )),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_read_what_staff_need() {
        let config = r#"{"key":"sub-51","response_url":"http://web/cb/51","collation":{"type":"user","id":7},"gate":"img","secret":"s3"}"#;
        let r = row(3, config, true);
        assert_eq!(
            (
                r.n,
                r.key.as_str(),
                r.response_url.as_str(),
                r.collation.as_str()
            ),
            (3, "sub-51", "http://web/cb/51", "user.7")
        );
        assert!(r.json.unwrap().text.contains("\n  \"gate\": \"img\""));
        let r = row(1, "not json", true);
        assert_eq!(
            (r.key.as_str(), r.json.unwrap().text.as_str()),
            ("", "not json")
        );
        // Without a token: the fields the queue reads, nothing else.
        let r = row(3, config, false);
        assert_eq!((r.key.as_str(), r.collation.as_str()), ("sub-51", "user.7"));
        assert!(r.response_url.is_empty() && r.json.is_none());
        // A huge config is shown cut.
        let big = format!(r#"{{"key":"b","x":"{}"}}"#, "y".repeat(1 << 20));
        let r = row(1, &big, true);
        assert!(r.json.unwrap().text.len() <= CONFIG_SHOWN_BYTES);
    }
}

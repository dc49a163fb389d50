//! Finding jobs. Every request stays O(window + log n) on the server:
//!
//! - by orca key: `ORCA.STATUS` (any state), O(log n);
//! - by config `key` with its `response_url`: the orca key is
//!   base64(sha256(key + response_url)), computed here, then as above;
//! - by config `key` alone, or by collation (a student's or team's jobs):
//!   the module has no index for these, so the page scans one window of the
//!   queue (see `scan`) and offers the next. Only queued jobs are scanned;
//!   running, delayed and dead ones are found by orca key or key +
//!   response_url.

use askama::Template;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::error::{AppError, AppResult};
use super::extract::{number, Query, MAX_PAGE};
use super::head::{queue_head, queue_name, QueueHead};
use super::layout::{enc, job_href, queue_crumbs, Ctx, Layout};
use super::rows::JobRow;
use super::scan::scan;
use crate::orca::{looks_like_orca_key, orca_key};

#[derive(Template)]
#[template(path = "find.html")]
struct FindPage {
    l: Layout,
    h: QueueHead,
    rows: Vec<JobRow>,
    back: String,
    what: String,
    message: Option<String>,
    scanned: Option<String>,
    next_href: Option<String>,
    asked: bool,
}

#[derive(Deserialize)]
pub struct FindQuery {
    q: Option<String>,
    key: Option<String>,
    response_url: Option<String>,
    collation: Option<String>,
    from: Option<String>,
}

pub async fn page(ctx: Ctx, Query(q): Query<FindQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    // Config keys and response_urls are taken exactly as typed: the orca
    // key is the hash of their exact bytes (" sp-key " is not "sp-key").
    let key = q.key.unwrap_or_default();
    let url = q.response_url.unwrap_or_default();
    let collation = q.collation.unwrap_or_default().trim().to_string();
    let from = number("from", q.from.as_deref(), 1, MAX_PAGE)? - 1;
    if key.len() > 64 * 1024 || url.len() > 64 * 1024 || collation.len() > 64 * 1024 {
        return Err(AppError::BadRequest(
            "Search terms are limited to 64 KB.".into(),
        ));
    }
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "find").await?;

    // Exact lookups: one ORCA.STATUS (and ORCA.RESULT for finished jobs).
    let exact = if !key.is_empty() && !url.is_empty() {
        Some(orca_key(&key, &url))
    } else if looks_like_orca_key(key.trim()) && collation.is_empty() {
        // an orca key has no spaces: one pasted with some is still found
        Some(key.trim().to_string())
    } else {
        None
    };
    let mut message = None;
    if let Some(k) = &exact {
        if app.orca.status(&name, k).await?.is_some() || app.orca.result(&name, k).await?.is_some()
        {
            return Ok(Redirect::to(&job_href(&name, k)).into_response());
        }
        if !url.is_empty() {
            message = Some(format!(
                "No job with config key \u{201c}{key}\u{201d} and this response_url \
                 (orca key {k}) is queued, held, delayed, running or dead, and no result is kept."
            ));
        } else {
            message = Some(format!(
                "No job has the orca key {k} (queued, held, delayed, running or dead), and no \
                 result is kept for it. Scanning for it as a config key instead:"
            ));
        }
    }

    let scan_key = (!key.is_empty() && (url.is_empty())).then_some(key.as_str());
    let scan_collation = (!collation.is_empty()).then_some(collation.as_str());
    let asked = scan_key.is_some() || scan_collation.is_some() || exact.is_some();
    let mut rows = Vec::new();
    let mut scanned = None;
    let mut next_href = None;
    if scan_key.is_some() || scan_collation.is_some() {
        let s = scan(&app, &name, from, h.now, |j| {
            scan_key.is_none_or(|k| j.config.key.as_deref() == Some(k))
                && scan_collation.is_none_or(|c| j.collation.as_deref() == Some(c))
        })
        .await?;
        rows = s.rows;
        scanned = Some(s.summary);
        next_href = s.next_from.map(|next| {
            let mut href = format!("/queue/find?q={}", enc(&name));
            if let Some(k) = scan_key {
                href.push_str(&format!("&key={}", enc(k)));
            }
            if let Some(c) = scan_collation {
                href.push_str(&format!("&collation={}", enc(c)));
            }
            href.push_str(&format!("&from={next}"));
            href
        });
    }
    let what = match (scan_key, scan_collation) {
        (Some(k), Some(c)) => format!("config key \u{201c}{k}\u{201d} in collation {c}"),
        (Some(k), None) => format!("config key \u{201c}{k}\u{201d}"),
        (None, Some(c)) => format!("collation {c}"),
        (None, None) => String::new(),
    };
    let back = format!(
        "/queue/find?q={}&key={}&collation={}&from={}",
        enc(&name),
        enc(scan_key.unwrap_or("")),
        enc(&collation),
        from + 1
    );
    let page = FindPage {
        l: ctx.layout(format!("{name} · find"), queue_crumbs(&name)),
        h,
        rows,
        back,
        what,
        message,
        scanned,
        next_href,
        asked,
    };
    Ok(ctx.render(&page))
}

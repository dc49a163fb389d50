//! The overview: every queue the sampler found (`SCAN ... TYPE orcaqueue`),
//! with counts by state and oldest wait (from the cached ORCA.STATS) and the
//! plot of the last hour. Paged by 50 queues. Redis unreachable ends the
//! page at the first failure (503), as on every other page.

use askama::Template;
use axum::response::Response;
use serde::Deserialize;

use super::error::AppResult;
use super::extract::{Paging, Query};
use super::layout::{queue_href, tab_href, Ctx, Layout};
use super::pager::Pager;
use crate::orca::OrcaError;
use crate::{format, svg};

const PER: u64 = 50;

pub struct QueueLine {
    pub name: String,
    pub href: String,
    pub queued: String,
    pub held: String,
    pub gates: String,
    pub gates_href: String,
    pub delayed: String,
    pub leased: String,
    pub dead: String,
    pub oldest_wait: String,
    pub front_wait: String,
    pub plot: String,
    pub error: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    l: Layout,
    lines: Vec<QueueLine>,
    total: usize,
    non_utf8: usize,
    scanned: String,
    scan_error: Option<String>,
    truncated: bool,
    interval: u64,
    pager: Pager,
}

#[derive(Deserialize)]
pub struct OverviewQuery {
    page: Option<String>,
}

pub async fn page(ctx: Ctx, Query(q): Query<OverviewQuery>) -> AppResult<Response> {
    let app = ctx.app.clone();
    if app.history.discovery().scanned_at.is_none() {
        if let Err(e @ OrcaError::Unavailable(_)) = app.history.sample_once(&app.orca).await {
            return Err(e.into());
        }
    }
    let d = app.history.discovery();
    let paging = Paging::parse(q.page.as_deref(), None, PER)?;
    // Redis down or frozen: the same 503 page as every other page, at once,
    // rather than a stale list after a timeout per queue.
    let now = app.orca.time_ms().await?;
    let start = usize::try_from(paging.offset()).unwrap_or(usize::MAX);
    let mut lines = Vec::new();
    for name in d.queues.iter().skip(start).take(PER as usize) {
        let samples = app.history.series(name);
        let mut line = QueueLine {
            name: name.clone(),
            href: queue_href(name),
            queued: String::new(),
            held: String::new(),
            gates: String::new(),
            gates_href: tab_href("gates", name),
            delayed: String::new(),
            leased: String::new(),
            dead: String::new(),
            oldest_wait: String::new(),
            front_wait: samples
                .last()
                .and_then(|s| s.front_wait)
                .map(format::duration)
                .unwrap_or_else(|| "-".into()),
            plot: svg::sparkline(&samples),
            error: String::new(),
        };
        match app.stats.get(&app.orca, name).await {
            Ok((s, _)) => {
                let c = |f: &str| s.int(f).map(format::count).unwrap_or_default();
                line.queued = c("queued");
                line.held = c("held");
                line.gates = s
                    .map("gates")
                    .map(|g| match g.0.len() {
                        0 => String::new(),
                        1 => "1 closed gate".to_string(),
                        n => format!("{} closed gates", format::count(n as i64)),
                    })
                    .unwrap_or_default();
                line.delayed = c("delayed");
                line.leased = c("leased");
                line.dead = c("dead");
                line.oldest_wait = s
                    .map("wait_all")
                    .and_then(|w| w.int("max"))
                    .map(format::duration)
                    .unwrap_or_else(|| "-".into());
            }
            // the first failure to reach Redis ends the page
            Err(e @ OrcaError::Unavailable(_)) => return Err(e.into()),
            Err(e) => line.error = e.to_string(),
        }
        lines.push(line);
    }
    let page = OverviewPage {
        l: ctx.layout("Queues", Vec::new()),
        total: d.queues.len(),
        non_utf8: d.non_utf8,
        scanned: d
            .scanned_at
            .map(|t| format::relative(now, t))
            .unwrap_or_else(|| "never".into()),
        scan_error: d.error,
        truncated: d.truncated,
        interval: app.sample_interval.as_secs(),
        pager: Pager::new(
            "/?",
            paging,
            Some(d.queues.len() as u64),
            lines.len() as u64,
            false,
        ),
        lines,
    };
    Ok(ctx.render(&page))
}

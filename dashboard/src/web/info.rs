//! Stats: every field of ORCA.STATS (wait times, gates, running counts,
//! settings included), rendered generically so fields the module adds later
//! appear without code changes. (Settings: `settings`.)

use askama::Template;
use axum::response::Response;
use serde::Deserialize;

use super::error::AppResult;
use super::extract::Query;
use super::head::{queue_head, queue_name, QueueHead};
use super::layout::{queue_crumbs, Ctx, Layout};
use super::rows::{field_rows, FieldRow};

#[derive(Deserialize)]
pub struct InfoQuery {
    q: Option<String>,
}

#[derive(Template)]
#[template(path = "stats.html")]
struct StatsPage {
    l: Layout,
    h: QueueHead,
    rows: Vec<FieldRow>,
    error: Option<String>,
    ttl: u64,
}

pub async fn stats(ctx: Ctx, Query(q): Query<InfoQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "stats").await?;
    let (rows, error) = match app.stats.get(&app.orca, &name).await {
        Ok((s, _)) => (field_rows(&s, h.now, &[]), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let page = StatsPage {
        l: ctx.layout(format!("{name} · stats"), queue_crumbs(&name)),
        h,
        rows,
        error,
        ttl: app.stats_ttl.as_secs(),
    };
    Ok(ctx.render(&page))
}

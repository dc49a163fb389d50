//! Stats (every field of ORCA.STATS, wait times included) and settings
//! (the queue's, and the module's server-wide ones), rendered generically so
//! fields the module adds later appear without code changes.

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

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    l: Layout,
    h: QueueHead,
    queue_rows: Vec<FieldRow>,
    queue_note: Option<String>,
    module_rows: Vec<FieldRow>,
    module_note: Option<String>,
}

pub async fn settings(ctx: Ctx, Query(q): Query<InfoQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "settings").await?;
    let (queue_rows, queue_note) = match app.orca.settings(&name).await {
        Ok(f) => (field_rows(&f, h.now, &[]), None),
        Err(e) => {
            // ORCA.SETTINGS is a write command (refused to read-only users
            // and on replicas): fall back to what ORCA.STATS tells.
            let order = app
                .stats
                .get(&app.orca, &name)
                .await
                .ok()
                .and_then(|(s, _)| s.text("order").map(str::to_string));
            let rows = order
                .map(|o| {
                    vec![FieldRow {
                        name: "order".into(),
                        value: o,
                        hint: "from ORCA.STATS".into(),
                    }]
                })
                .unwrap_or_default();
            (
                rows,
                Some(format!(
                    "ORCA.SETTINGS could not be read ({e}); showing what ORCA.STATS reports."
                )),
            )
        }
    };
    let (module_rows, module_note) = match app.orca.module_config().await {
        Ok(f) => (field_rows(&f, h.now, &[]), None),
        Err(e) => (
            Vec::new(),
            Some(format!("CONFIG GET orca.* is not available: {e}")),
        ),
    };
    let page = SettingsPage {
        l: ctx.layout(format!("{name} · settings"), queue_crumbs(&name)),
        h,
        queue_rows,
        queue_note,
        module_rows,
        module_note,
    };
    Ok(ctx.render(&page))
}

//! Dead letters in the order they died, paged, with cause and attempts;
//! requeue or delete one, or purge them all.

use askama::Template;
use axum::response::Response;
use serde::Deserialize;

use super::error::AppResult;
use super::extract::{Paging, Query};
use super::head::{queue_head, queue_name, QueueHead};
use super::layout::{enc, queue_crumbs, Ctx, Layout};
use super::pager::Pager;
use super::rows::JobRow;
use crate::orca::OrcaError;

const DEFAULT_PER: u64 = 50;

#[derive(Template)]
#[template(path = "dead.html")]
struct DeadPage {
    l: Layout,
    h: QueueHead,
    rows: Vec<JobRow>,
    back: String,
    unreadable: Option<String>,
    pager: Pager,
}

#[derive(Deserialize)]
pub struct DeadQuery {
    q: Option<String>,
    page: Option<String>,
    per: Option<String>,
}

pub async fn page(ctx: Ctx, Query(q): Query<DeadQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let paging = Paging::parse(q.page.as_deref(), q.per.as_deref(), DEFAULT_PER)?;
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "dead").await?;
    let total = app
        .stats
        .get(&app.orca, &name)
        .await
        .ok()
        .and_then(|(s, _)| s.int("dead"))
        .and_then(|d| u64::try_from(d).ok());
    let (rows, unreadable) = match app.orca.dead_list(&name, paging.offset(), paging.per).await {
        Ok(jobs) => (
            jobs.iter().map(|j| JobRow::new(&name, j, h.now)).collect(),
            None,
        ),
        // ORCA.DEAD is a write command: a read-only ACL user may not run it.
        Err(OrcaError::NoPerm(m)) => (
            Vec::new(),
            Some(format!(
                "This Redis user may not read dead letters ({m}). The module lists them \
                 with ORCA.DEAD <queue> LIST, a write command; grant it, or use a user \
                 that may run it."
            )),
        ),
        Err(e) => return Err(e.into()),
    };
    let base = format!("/queue/dead?q={}&", enc(&name));
    let back = format!("{base}page={}&per={}", paging.page, paging.per);
    let page = DeadPage {
        l: ctx.layout(format!("{name} · dead letters"), queue_crumbs(&name)),
        pager: Pager::new(&base, paging, total, rows.len() as u64, true),
        h,
        rows,
        back,
        unreadable,
    };
    Ok(ctx.render(&page))
}

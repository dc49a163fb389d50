//! Dead letters in the order they died, paged with `ORCA.LIST <q> STATE
//! DEAD` (a read-only command, O(offset + page)), with cause (`failed`,
//! `lease-expired`, `expired`: lifetime over) and attempts; requeue or
//! delete one, or purge them all.

use askama::Template;
use axum::response::Response;
use serde::Deserialize;

use super::error::AppResult;
use super::extract::{Paging, Query};
use super::head::{queue_head, queue_name, QueueHead};
use super::layout::{enc, queue_crumbs, Ctx, Layout};
use super::pager::{limit_note, paged, Pager};
use super::rows::JobRow;
use crate::format;
use crate::orca::{JobState, OrcaError};

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
    /// The queue's bounds on dead letters (DEADMAX, DEADTTL), if known.
    bounds: String,
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
    let stats = app.stats.get(&app.orca, &name).await.ok().map(|(s, _)| s);
    let total = stats
        .as_ref()
        .and_then(|s| s.int("dead"))
        .and_then(|d| u64::try_from(d).ok());
    let bounds = stats
        .as_ref()
        .and_then(|s| s.map("settings"))
        .map(|s| {
            let max = match s.int("deadmax") {
                Some(0) | None => "no bound on their number".to_string(),
                Some(n) => format!("at most {} kept (the oldest go first)", format::count(n)),
            };
            let ttl = match s.int("deadttl") {
                Some(0) | None => "kept until purged".to_string(),
                Some(t) => format!("forgotten {} after they died", format::duration(t)),
            };
            format!("{max}, {ttl}")
        })
        .unwrap_or_default();
    let asked = paging;
    let listed = paged(&app, asked, |p| {
        app.orca
            .list_state(&name, JobState::Dead, None, p.offset(), p.per)
    })
    .await;
    let (paging, rows, unreadable) = match listed {
        Ok((p, jobs)) => (
            p,
            jobs.iter().map(|j| JobRow::new(&name, j, h.now)).collect(),
            None,
        ),
        Err(OrcaError::NoPerm(m)) => (
            asked,
            Vec::new(),
            Some(format!(
                "This Redis user may not read dead letters ({m}): it needs ORCA.LIST."
            )),
        ),
        Err(e) => return Err(e.into()),
    };
    let base = format!("/queue/dead?q={}&", enc(&name));
    let back = format!("{base}page={}&per={}", paging.page, paging.per);
    let page = DeadPage {
        l: Layout {
            warning: limit_note(asked, paging),
            ..ctx.layout(format!("{name} · dead letters"), queue_crumbs(&name))
        },
        pager: Pager::new(&base, paging, total, rows.len() as u64, true),
        h,
        rows,
        back,
        unreadable,
        bounds,
    };
    Ok(ctx.render(&page))
}

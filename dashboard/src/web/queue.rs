//! A queue's jobs in pop order with their positions, paged with
//! `ORCA.LIST OFFSET/LIMIT` (O(log n + page)), optionally filtered by a
//! metadata field (`ORCA.LIST ... FILTER`).

use askama::Template;
use axum::response::Response;
use serde::Deserialize;

use super::error::{AppError, AppResult};
use super::extract::{Paging, Query};
use super::head::{queue_head, queue_name, QueueHead};
use super::layout::{enc, queue_crumbs, Ctx, Layout};
use super::pager::Pager;
use super::rows::JobRow;
use crate::format;

const DEFAULT_PER: u64 = 50;

#[derive(Template)]
#[template(path = "queue.html")]
struct QueuePage {
    l: Layout,
    h: QueueHead,
    rows: Vec<JobRow>,
    back: String,
    field: String,
    value: String,
    filtered: bool,
    len: String,
    past_end: Option<String>,
    pager: Pager,
}

#[derive(Deserialize)]
pub struct JobsQuery {
    q: Option<String>,
    page: Option<String>,
    per: Option<String>,
    field: Option<String>,
    value: Option<String>,
}

pub async fn jobs(ctx: Ctx, Query(q): Query<JobsQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let paging = Paging::parse(q.page.as_deref(), q.per.as_deref(), DEFAULT_PER)?;
    let field = q.field.unwrap_or_default().trim().to_string();
    let value = q.value.unwrap_or_default();
    if field.is_empty() && !value.is_empty() {
        return Err(AppError::BadRequest(
            "A filter needs a metadata field as well as a value.".into(),
        ));
    }
    let filtered = !field.is_empty();
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "jobs").await?;
    let len = u64::try_from(app.orca.len(&name).await?).unwrap_or(0);

    let mut base = format!("/queue?q={}&", enc(&name));
    if filtered {
        base.push_str(&format!("field={}&value={}&", enc(&field), enc(&value)));
    }
    let mut past_end = None;
    let jobs = if !filtered && paging.offset() >= len && len > 0 {
        past_end = Some(format!(
            "Page {} is past the end: the queue has {} jobs ({} pages of {}).",
            format::count(paging.page as i64),
            format::count(len as i64),
            format::count(paging.last_page(len) as i64),
            paging.per
        ));
        Vec::new()
    } else {
        let filter = filtered.then_some((field.as_str(), value.as_str()));
        app.orca
            .list(&name, paging.offset(), paging.per, filter)
            .await?
    };
    let rows: Vec<JobRow> = jobs.iter().map(|j| JobRow::new(&name, j, h.now)).collect();
    let total = (!filtered).then_some(len);
    let back = format!("{base}page={}&per={}", paging.page, paging.per);
    let page = QueuePage {
        l: ctx.layout(format!("{name} · jobs"), queue_crumbs(&name)),
        pager: Pager::new(&base, paging, total, rows.len() as u64, true),
        h,
        rows,
        back,
        field,
        value,
        filtered,
        len: format::count(len as i64),
        past_end,
    };
    Ok(ctx.render(&page))
}

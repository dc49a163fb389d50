//! A queue's jobs in pop order with their positions, paged with
//! `ORCA.LIST OFFSET/LIMIT` (O(log n + page)), optionally filtered by a
//! metadata field. The module's `ORCA.LIST ... FILTER` scans from the front
//! until it has filled the page (O(n) for a rare value: 0.66 s of Redis time
//! at 1M jobs), so it is used only while the queue is at most
//! `--scan-window` jobs long; a longer queue is filtered by windowed scans
//! with the same matching rule (`scan`), O(log n + window) per request.
//! Under a running cap, the jobs waiting only because of it are marked
//! (`running::mark_capped`). `state=held|running|delayed` lists the other
//! states instead (`states`).

use askama::Template;
use axum::response::Response;
use serde::Deserialize;

use super::error::{AppError, AppResult};
use super::extract::{number, Paging, Query, MAX_PAGE};
use super::head::{queue_head, queue_name, QueueHead};
use super::layout::{enc, queue_crumbs, Ctx, Layout};
use super::pager::{limit_note, paged, Pager};
use super::rows::JobRow;
use super::running::{cap_of, mark_capped};
use super::scan::scan;
use super::states::{state_links, StateLink};
use crate::format;
use crate::orca::{metadata_matches, JobState};

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
    /// Set when the filter ran as a windowed scan.
    scanned: Option<String>,
    scan_next: Option<String>,
    states: Vec<StateLink>,
    /// The running cap, when the queue has one.
    cap: Option<String>,
    cap_note: Option<String>,
}

#[derive(Deserialize)]
pub struct JobsQuery {
    q: Option<String>,
    page: Option<String>,
    per: Option<String>,
    field: Option<String>,
    value: Option<String>,
    from: Option<String>,
    state: Option<String>,
}

pub async fn jobs(ctx: Ctx, Query(q): Query<JobsQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let asked = Paging::parse(q.page.as_deref(), q.per.as_deref(), DEFAULT_PER)?;
    // a page size the server is known not to take is clamped at once
    let paging = ctx.app.orca.max_limit().map_or(asked, |n| asked.clamped(n));
    let state = match q.state.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => JobState::Queued,
        Some(s) => match JobState::parse(s) {
            Some(JobState::Dead) | None => {
                return Err(AppError::BadRequest(format!(
                    "Unknown state \u{201c}{}\u{201d}: the jobs page lists queued, held, running \
                     or delayed jobs (dead letters have their own tab).",
                    format::short(s, 40)
                )))
            }
            Some(st) => st,
        },
    };
    if state != JobState::Queued {
        return super::states::page(ctx, name, state, asked).await;
    }
    let field = q.field.unwrap_or_default().trim().to_string();
    let value = q.value.unwrap_or_default();
    if field.is_empty() && !value.is_empty() {
        return Err(AppError::BadRequest(
            "A filter needs a metadata field as well as a value.".into(),
        ));
    }
    if !field.is_empty() && !ctx.app.show_payloads {
        return Err(AppError::Forbidden(
            "Filtering by metadata reads the jobs' payloads, which this dashboard shows only              to holders of its token: start it with --token (or ORCA_DASHBOARD_TOKEN) and              log in."
                .into(),
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
    let mut scanned = None;
    let mut scan_next = None;
    let mut paging = paging;
    let mut back = format!("{base}page={}&per={}", paging.page, paging.per);
    let mut pager_total = (!filtered).then_some(len);
    let mut rows: Vec<JobRow> = if !filtered && paging.offset() >= len && len > 0 {
        past_end = Some(format!(
            "Page {} is past the end: the queue has {} jobs ({} pages of {}).",
            format::count(paging.page as i64),
            format::count(len as i64),
            format::count(paging.last_page(len) as i64),
            paging.per
        ));
        Vec::new()
    } else if filtered && len > app.scan_window {
        let from = number("from", q.from.as_deref(), 1, MAX_PAGE)? - 1;
        let s = scan(&app, &name, from, h.now, |j| {
            j.payload
                .as_deref()
                .is_some_and(|p| metadata_matches(p, &field, &value))
        })
        .await?;
        scanned = Some(s.summary);
        scan_next = s.next_from.map(|n| format!("{base}from={n}"));
        back = format!("{base}from={}", from + 1);
        pager_total = Some(0);
        s.rows
    } else {
        let filter = filtered.then_some((field.as_str(), value.as_str()));
        let (p, jobs) = paged(&app, paging, |p| {
            app.orca.list(&name, p.offset(), p.per, filter)
        })
        .await?;
        paging = p;
        back = format!("{base}page={}&per={}", paging.page, paging.per);
        jobs.iter().map(|j| JobRow::new(&name, j, h.now)).collect()
    };
    let stats = app.stats.get(&app.orca, &name).await.ok().map(|(s, _)| s);
    let cap = stats.as_deref().map(cap_of).unwrap_or(0);
    let cap_note = if cap > 0 {
        mark_capped(&app, &name, &mut rows).await
    } else {
        None
    };
    let page = QueuePage {
        l: Layout {
            warning: limit_note(asked, paging),
            ..ctx.layout(format!("{name} · jobs"), queue_crumbs(&name))
        },
        states: state_links(&name, stats.as_deref(), JobState::Queued),
        cap: (cap > 0).then(|| format::count(cap as i64)),
        cap_note,
        pager: Pager::new(&base, paging, pager_total, rows.len() as u64, true),
        h,
        rows,
        back,
        field,
        value,
        filtered,
        len: format::count(len as i64),
        past_end,
        scanned,
        scan_next,
    };
    Ok(ctx.render(&page))
}

//! The jobs page for the states other than queued: held (behind a closed
//! gate), running (leased, by deadline, with the running counts per
//! collation under the cap) and delayed (waiting for a retry), each paged
//! with `ORCA.LIST <q> STATE <s> OFFSET o LIMIT l` (O(offset + page), a
//! read-only command). Totals come from the cached `ORCA.STATS`.

use askama::Template;
use axum::response::Response;

use super::error::AppResult;
use super::extract::Paging;
use super::head::{queue_head, QueueHead};
use super::layout::{enc, queue_crumbs, state_href, tab_href, Ctx, Layout};
use super::pager::{limit_note, paged, Pager};
use super::rows::JobRow;
use super::running::{running, Running};
use crate::format;
use crate::orca::{Fields, JobState};

/// A link to one state's listing, with its count.
pub struct StateLink {
    pub label: &'static str,
    pub href: String,
    pub count: String,
    pub active: bool,
    pub id: String,
}

pub fn state_links(queue: &str, stats: Option<&Fields>, active: JobState) -> Vec<StateLink> {
    JobState::LISTED
        .iter()
        .map(|&s| StateLink {
            label: s.label(),
            href: state_href(queue, s.name()),
            count: stats
                .and_then(|f| f.int(s.name()))
                .map(format::count)
                .unwrap_or_default(),
            active: s == active,
            id: format!("state-{}", s.name()),
        })
        .collect()
}

#[derive(Template)]
#[template(path = "states.html")]
struct StatesPage {
    l: Layout,
    h: QueueHead,
    state: &'static str,
    label: &'static str,
    states: Vec<StateLink>,
    rows: Vec<JobRow>,
    back: String,
    pager: Pager,
    run: Option<Running>,
    stats_age: String,
    gates_href: String,
}

pub async fn page(ctx: Ctx, name: String, state: JobState, paging: Paging) -> AppResult<Response> {
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "jobs").await?;
    let stats = app.stats.get(&app.orca, &name).await.ok();
    let total = stats
        .as_ref()
        .and_then(|(s, _)| s.int(state.name()))
        .and_then(|n| u64::try_from(n).ok());
    let asked = paging;
    let (paging, jobs) = paged(&app, asked, |p| {
        app.orca.list_state(&name, state, None, p.offset(), p.per)
    })
    .await?;
    let rows: Vec<JobRow> = jobs.iter().map(|j| JobRow::new(&name, j, h.now)).collect();
    let base = format!("/queue?q={}&state={}&", enc(&name), state.name());
    let page = StatesPage {
        l: Layout {
            warning: limit_note(asked, paging),
            ..ctx.layout(
                format!("{name} · {} jobs", state.label()),
                queue_crumbs(&name),
            )
        },
        pager: Pager::new(&base, paging, total, rows.len() as u64, true),
        back: format!("{base}page={}&per={}", paging.page, paging.per),
        states: state_links(&name, stats.as_ref().map(|(s, _)| &**s), state),
        run: (state == JobState::Leased)
            .then(|| stats.as_ref().map(|(s, _)| running(&name, s)))
            .flatten(),
        stats_age: stats
            .as_ref()
            .map(|(_, age)| format!("{} s", age.as_secs()))
            .unwrap_or_default(),
        gates_href: tab_href("gates", &name),
        state: state.name(),
        label: state.label(),
        h,
        rows,
    };
    Ok(ctx.render(&page))
}

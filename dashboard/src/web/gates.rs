//! Gates (holding pens for jobs whose grader is not ready): the closed
//! gates of a queue with their held counts (`gates` of the cached
//! `ORCA.STATS`), a form to close one, the drops kept in memory, and one
//! gate's page: its held jobs (`ORCA.LIST <q> STATE HELD GATE <g>`, paged,
//! O(offset + page)) with open / drop (confirmed) / close.

use askama::Template;
use axum::response::Response;
use serde::Deserialize;

use super::error::{AppError, AppResult};
use super::extract::{Paging, Query};
use super::head::{queue_head, queue_name, QueueHead};
use super::layout::{enc, gate_href, queue_crumbs, tab_href, Crumb, Ctx, Layout};
use super::pager::{limit_note, paged, Pager};
use super::rows::JobRow;
use crate::format;
use crate::orca::{Fields, JobState};

const GATES_PER: u64 = 50;
const DEFAULT_PER: u64 = 50;
/// Longest gate name the dashboard passes on (the module's own limit,
/// `orca.max-gate-length`, is usually far lower and says so).
pub const MAX_GATE_BYTES: usize = 64 * 1024;

/// The gate name of a request: present, not empty, not huge.
pub fn gate_name(g: Option<String>) -> AppResult<String> {
    let g = g.unwrap_or_default();
    if g.is_empty() {
        return Err(AppError::BadRequest(
            "Which gate? The gate name is empty.".into(),
        ));
    }
    if g.len() > MAX_GATE_BYTES {
        return Err(AppError::BadRequest(format!(
            "That gate name is {} bytes long; the dashboard takes at most {} (and the module \
             usually far fewer: orca.max-gate-length).",
            format::count(g.len() as i64),
            format::count(MAX_GATE_BYTES as i64)
        )));
    }
    Ok(g)
}

/// The closed gates in a stats reply with their held counts, and whether
/// each name is UTF-8 (gate names are binary-safe; one that is not reaches
/// the dashboard decoded lossily and cannot be named in a form).
fn closed_gates(stats: &Fields) -> Vec<(String, i64, bool)> {
    stats
        .map("gates")
        .map(|m| {
            m.0.iter()
                .enumerate()
                .map(|(i, (g, n))| (g.clone(), n.as_int().unwrap_or(0), m.key_is_utf8(i)))
                .collect()
        })
        .unwrap_or_default()
}

pub struct GateRow {
    pub name: String,
    pub href: String,
    pub held: String,
    pub actionable: bool,
}

pub struct DropLine {
    pub href: String,
    pub gate: String,
    pub count: String,
    pub at: String,
    pub at_title: String,
}

#[derive(Template)]
#[template(path = "gates.html")]
struct GatesPage {
    l: Layout,
    h: QueueHead,
    rows: Vec<GateRow>,
    total: usize,
    pager: Pager,
    stats_age: String,
    stats_error: Option<String>,
    drops: Vec<DropLine>,
    back: String,
}

#[derive(Deserialize)]
pub struct GatesQuery {
    q: Option<String>,
    page: Option<String>,
}

pub async fn list(ctx: Ctx, Query(q): Query<GatesQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let paging = Paging::parse(q.page.as_deref(), None, GATES_PER)?;
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "gates").await?;
    let (gates, stats_age, stats_error) = match app.stats.get(&app.orca, &name).await {
        Ok((s, age)) => (closed_gates(&s), format!("{} s", age.as_secs()), None),
        Err(e) => (Vec::new(), String::new(), Some(e.to_string())),
    };
    let total = gates.len();
    let start = usize::try_from(paging.offset()).unwrap_or(usize::MAX);
    let rows: Vec<GateRow> = gates
        .into_iter()
        .skip(start)
        .take(GATES_PER as usize)
        .map(|(g, n, utf8)| GateRow {
            href: gate_href(&name, &g),
            held: format::count(n),
            actionable: utf8,
            name: g,
        })
        .collect();
    let drops = app
        .drops
        .of_queue(&name)
        .iter()
        .map(|d| DropLine {
            href: super::dropped::dropped_href(&d.queue, &d.id),
            gate: d.gate.clone(),
            count: format::count(d.configs.len() as i64),
            at: format::relative(h.now, d.at),
            at_title: format::timestamp(d.at),
        })
        .collect();
    let base = format!("/queue/gates?q={}&", enc(&name));
    let page = GatesPage {
        l: ctx.layout(format!("{name} · gates"), queue_crumbs(&name)),
        pager: Pager::new(&base, paging, Some(total as u64), rows.len() as u64, false),
        back: format!("{base}page={}", paging.page),
        h,
        rows,
        total,
        stats_age,
        stats_error,
        drops,
    };
    Ok(ctx.render(&page))
}

#[derive(Template)]
#[template(path = "gate.html")]
struct GatePage {
    l: Layout,
    h: QueueHead,
    gate: String,
    /// Closed, per the (cached) stats.
    closed: bool,
    held: String,
    held_n: i64,
    rows: Vec<JobRow>,
    pager: Pager,
    back: String,
    gates_back: String,
    stats_age: String,
}

#[derive(Deserialize)]
pub struct GateQuery {
    q: Option<String>,
    gate: Option<String>,
    page: Option<String>,
    per: Option<String>,
}

pub async fn page(ctx: Ctx, Query(q): Query<GateQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let gate = gate_name(q.gate)?;
    let paging = Paging::parse(q.page.as_deref(), q.per.as_deref(), DEFAULT_PER)?;
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "gates").await?;
    let (s, age) = app.stats.get(&app.orca, &name).await?;
    // the name asked for is UTF-8 (it came in a query string): it names
    // the gate whose bytes are its UTF-8, never a lossily decoded one
    let held = closed_gates(&s)
        .into_iter()
        .find(|(g, _, utf8)| *utf8 && *g == gate);
    let asked = paging;
    let (paging, jobs) = paged(&app, asked, |p| {
        app.orca
            .list_state(&name, JobState::Held, Some(&gate), p.offset(), p.per)
    })
    .await?;
    let rows: Vec<JobRow> = jobs.iter().map(|j| JobRow::new(&name, j, h.now)).collect();
    let held_n = held.as_ref().map_or(0, |(_, n, _)| *n);
    let base = format!("{}&", gate_href(&name, &gate));
    let mut crumbs = queue_crumbs(&name);
    crumbs.push(Crumb {
        label: format!("gate {}", format::short(&gate, 40)),
        href: gate_href(&name, &gate),
    });
    let page = GatePage {
        l: Layout {
            warning: limit_note(asked, paging),
            ..ctx.layout(format!("gate {}", format::short(&gate, 40)), crumbs)
        },
        pager: Pager::new(
            &base,
            paging,
            Some(u64::try_from(held_n).unwrap_or(0)),
            rows.len() as u64,
            true,
        ),
        back: format!("{base}page={}&per={}", paging.page, paging.per),
        gates_back: tab_href("gates", &name),
        closed: held.is_some(),
        held: format::count(held_n),
        held_n,
        stats_age: format!("{} s", age.as_secs()),
        h,
        gate,
        rows,
    };
    Ok(ctx.render(&page))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orca::Val;

    #[test]
    fn gates_and_names() {
        let s = Fields::new(vec![(
            "gates".into(),
            Val::Map(Fields::new(vec![
                ("img-hw3".into(), Val::Int(2)),
                ("a\u{fffd}b".into(), Val::Int(0)),
            ])),
        )]);
        assert_eq!(
            closed_gates(&s),
            [
                ("img-hw3".to_string(), 2, true),
                ("a\u{fffd}b".to_string(), 0, true)
            ]
        );
        assert!(closed_gates(&Fields::default()).is_empty());
        assert!(gate_name(None).is_err());
        assert!(gate_name(Some(String::new())).is_err());
        assert!(gate_name(Some("x".repeat(MAX_GATE_BYTES + 1))).is_err());
        assert_eq!(gate_name(Some(" g ".into())).unwrap(), " g ");
    }
}

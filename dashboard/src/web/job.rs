//! One job: `ORCA.STATUS` (state, position, lease and deadline while it
//! runs, every other field) and `ORCA.RESULT` (a kept result), both
//! O(log n); the payload pretty-printed; the actions its state allows.

use askama::Template;
use axum::response::Response;
use serde::Deserialize;

use super::error::{AppError, AppResult};
use super::extract::Query;
use super::head::{check_queue, queue_name};
use super::layout::{job_href, queue_crumbs, queue_href, Crumb, Ctx, Layout};
use super::rows::{field_rows, FieldRow, JobRow};
use crate::format;
use crate::orca::Val;

pub struct LeaseRow {
    pub lease: String,
    pub deadline: String,
    pub attempts: String,
}

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    l: Layout,
    queue: String,
    queue_href: String,
    key: String,
    /// Present when the job is in some state (else only a result is kept).
    r: Option<JobRow>,
    state: String,
    position: String,
    fields: Vec<FieldRow>,
    leases: Vec<LeaseRow>,
    payload: String,
    payload_is_json: bool,
    result: Option<format::BytesView>,
    back: String,
    queue_back: String,
}

#[derive(Deserialize)]
pub struct JobQuery {
    q: Option<String>,
    key: Option<String>,
}

pub async fn page(ctx: Ctx, Query(q): Query<JobQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    let key = q.key.filter(|k| !k.is_empty()).ok_or_else(|| {
        AppError::BadRequest("Which job? The address needs &key=<orca key>.".into())
    })?;
    if key.len() > 1024 {
        return Err(AppError::BadRequest(
            "That orca key is too long (orca keys have 44 characters).".into(),
        ));
    }
    let app = ctx.app.clone();
    check_queue(&app, &name).await?;
    let now = app.orca.time_ms().await?;
    let status = app.orca.status(&name, &key).await?;
    let result = app.orca.result(&name, &key).await?;
    if status.is_none() && result.is_none() {
        return Err(AppError::NotFound(format!(
            "No job with orca key {} in queue \u{201c}{}\u{201d}: it is not queued, held, \
             delayed, running or dead, and no result is kept for it (it may have finished, or been deleted).",
            format::short(&key, 60),
            format::short(&name, 200)
        )));
    }
    let mut leases = Vec::new();
    let (r, state, position, fields, payload, payload_is_json) = match &status {
        Some(job) => {
            if let Some(Val::Array(items)) = job.fields.get("leases") {
                for item in items {
                    if let Val::Map(f) = item {
                        leases.push(LeaseRow {
                            lease: f.get("lease").map(Val::to_text).unwrap_or_default(),
                            deadline: f
                                .int("deadline")
                                .map(|d| {
                                    format!(
                                        "{} ({})",
                                        format::timestamp(d),
                                        format::relative(now, d)
                                    )
                                })
                                .unwrap_or_default(),
                            attempts: f.get("attempts").map(Val::to_text).unwrap_or_default(),
                        });
                    }
                }
            }
            let (payload, is_json) = format::pretty_json(job.payload.as_deref().unwrap_or(""));
            (
                Some(JobRow::new(&name, job, now)),
                job.state.clone().unwrap_or_default(),
                job.position.map(format::count).unwrap_or_default(),
                field_rows(&job.fields, now, &["payload", "leases"]),
                payload,
                is_json,
            )
        }
        None => (
            None,
            "finished".to_string(),
            String::new(),
            Vec::new(),
            String::new(),
            false,
        ),
    };
    let result = result.as_deref().map(format::bytes_view);
    let mut crumbs = queue_crumbs(&name);
    crumbs.push(Crumb {
        label: format::short(&key, 12),
        href: job_href(&name, &key),
    });
    let page = JobPage {
        l: ctx.layout(format!("job {}", format::short(&key, 12)), crumbs),
        queue_href: queue_href(&name),
        back: job_href(&name, &key),
        queue_back: queue_href(&name),
        queue: name,
        key,
        r,
        state,
        position,
        fields,
        leases,
        payload,
        payload_is_json,
        result,
    };
    Ok(ctx.render(&page))
}

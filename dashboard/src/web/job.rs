//! One job: `ORCA.STATUS` (state, position, lease and deadline while it
//! runs, every other field) and `ORCA.RESULT` (a kept result), both
//! O(log n); the payload and result within the bounds of `render.rs`, each
//! downloadable whole (`/job/payload`, `/job/result`); the actions its
//! state allows. Without a token, payload and result are not shown.

use askama::Template;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::error::{AppError, AppResult};
use super::extract::Query;
use super::head::{check_queue, queue_name};
use super::layout::{job_download_href, job_href, queue_crumbs, queue_href, Crumb, Ctx, Layout};
use super::rows::{field_rows, FieldRow, JobRow};
use crate::format;
use crate::orca::Val;
use crate::render::{self, BytesView, TextView};

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
    /// Shown only with a token (`None` without one, or for a finished job).
    payload: Option<TextView>,
    payload_bytes: String,
    payload_href: String,
    /// The kept result's size, when there is one.
    result_bytes: Option<String>,
    /// Shown only with a token.
    result: Option<BytesView>,
    result_href: String,
    back: String,
    queue_back: String,
}

#[derive(Deserialize)]
pub struct JobQuery {
    q: Option<String>,
    key: Option<String>,
}

fn job_of(q: JobQuery) -> AppResult<(String, String)> {
    let name = queue_name(q.q)?;
    let key = q.key.filter(|k| !k.is_empty()).ok_or_else(|| {
        AppError::BadRequest("Which job? The address needs &key=<orca key>.".into())
    })?;
    if key.len() > 1024 {
        return Err(AppError::BadRequest(
            "That orca key is too long (orca keys have 44 characters).".into(),
        ));
    }
    Ok((name, key))
}

fn size(n: usize) -> String {
    format!(
        "{} byte{}",
        format::count(n as i64),
        if n == 1 { "" } else { "s" }
    )
}

pub async fn page(ctx: Ctx, Query(q): Query<JobQuery>) -> AppResult<Response> {
    let (name, key) = job_of(q)?;
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
    let (r, state, position, fields, payload_text) = match &status {
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
            (
                Some(JobRow::new(&name, job, now)),
                job.state.clone().unwrap_or_default(),
                job.position.map(format::count).unwrap_or_default(),
                field_rows(&job.fields, now, &["payload", "leases"]),
                job.payload.as_deref(),
            )
        }
        None => (
            None,
            "finished".to_string(),
            String::new(),
            Vec::new(),
            None,
        ),
    };
    let show = app.show_payloads;
    let payload_bytes = status.as_ref().map_or(0, |j| j.payload_len);
    let payload = payload_text.filter(|_| show).map(render::text_view);
    let result_bytes = result.as_ref().map(|r| size(r.len()));
    let result = result.as_deref().filter(|_| show).map(render::bytes_view);
    let mut crumbs = queue_crumbs(&name);
    crumbs.push(Crumb {
        label: format::short(&key, 12),
        href: job_href(&name, &key),
    });
    let payload_href = job_download_href("payload", &name, &key);
    let result_href = job_download_href("result", &name, &key);
    let page = JobPage {
        payload_href,
        result_href,
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
        payload_bytes: size(payload_bytes),
        result_bytes,
        result,
    };
    Ok(ctx.render(&page))
}

/// Downloads are for token holders only (the page says so without one).
fn check_shown(ctx: &Ctx, what: &str) -> AppResult<()> {
    if ctx.app.show_payloads {
        Ok(())
    } else {
        Err(AppError::Forbidden(format!(
            "Job {what}s are shown only to holders of this dashboard's token: start it \
             with --token (or ORCA_DASHBOARD_TOKEN) and log in."
        )))
    }
}

/// A download of stored bytes, exactly as stored.
fn attachment(bytes: Vec<u8>, content_type: &str, name: &str, key: &str) -> Response {
    let safe: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(44)
        .collect();
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}-{safe}\""),
            ),
        ],
        bytes,
    )
        .into_response()
}

/// `/job/payload`: the job's config exactly as stored (its bytes, whatever
/// the page could show of them).
pub async fn payload(ctx: Ctx, Query(q): Query<JobQuery>) -> AppResult<Response> {
    check_shown(&ctx, "payload")?;
    let (name, key) = job_of(q)?;
    check_queue(&ctx.app, &name).await?;
    let bytes = ctx.app.orca.payload(&name, &key).await?.ok_or_else(|| {
        AppError::NotFound("No such job in this queue (it may have finished).".into())
    })?;
    Ok(attachment(bytes, "application/json", "config", &key))
}

/// `/job/result`: the kept result exactly as stored.
pub async fn result(ctx: Ctx, Query(q): Query<JobQuery>) -> AppResult<Response> {
    check_shown(&ctx, "result")?;
    let (name, key) = job_of(q)?;
    check_queue(&ctx.app, &name).await?;
    let bytes = ctx
        .app
        .orca
        .result(&name, &key)
        .await?
        .ok_or_else(|| AppError::NotFound("No result is kept for this job.".into()))?;
    Ok(attachment(
        bytes,
        "application/octet-stream",
        "result",
        &key,
    ))
}

//! The actions. Each is a POST carrying the page's CSRF token, and each is
//! exactly one module command, so it is atomic on the server; then the
//! browser is sent back (303) to the page it came from, with a notice.
//! A name that is not an Orca queue is refused first (`TYPE`, O(1)) with
//! the page every other page gives.

use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::error::{AppError, AppResult};
use super::extract::Form;
use super::head::check_queue;
use super::layout::{local_path, queue_href, tab_href, with_notice, Ctx};
use crate::orca::MoveTo;

/// The form's authenticity token must match this browser's CSRF cookie.
pub fn check_csrf(ctx: &Ctx, token: &str) -> AppResult<()> {
    ctx.csrf.verify(token).map_err(|_| {
        AppError::Forbidden(
            "The form's CSRF token is missing or does not match this browser's: \
             reload the page and try again."
                .into(),
        )
    })
}

#[derive(Deserialize)]
pub struct JobForm {
    csrf: String,
    q: String,
    key: String,
    to: Option<String>,
    back: Option<String>,
}

fn done(back: Option<&str>, fallback: String, code: &str, n: Option<i64>) -> Response {
    Redirect::to(&with_notice(&local_path(back, fallback), code, n)).into_response()
}

fn check_key(key: &str) -> AppResult<()> {
    if key.is_empty() || key.len() > 1024 {
        return Err(AppError::BadRequest(
            "The orca key is empty or too long.".into(),
        ));
    }
    Ok(())
}

/// `ORCA.MOVE <q> <key> RELEASE|DELAY`.
pub async fn move_job(ctx: Ctx, Form(f): Form<JobForm>) -> AppResult<Response> {
    check_csrf(&ctx, &f.csrf)?;
    check_key(&f.key)?;
    let (to, code) = match f.to.as_deref() {
        Some("front") => (MoveTo::Front, "front"),
        Some("back") => (MoveTo::Back, "back"),
        _ => {
            return Err(AppError::BadRequest(
                "Move where? (to=front or to=back)".into(),
            ))
        }
    };
    check_queue(&ctx.app, &f.q).await?;
    ctx.app.orca.move_job(&f.q, &f.key, to).await?;
    ctx.app.stats.invalidate(&f.q);
    Ok(done(f.back.as_deref(), queue_href(&f.q), code, None))
}

/// `ORCA.DELETE <q> <key>` (in any state; a running lease is cancelled).
pub async fn delete(ctx: Ctx, Form(f): Form<JobForm>) -> AppResult<Response> {
    check_csrf(&ctx, &f.csrf)?;
    check_key(&f.key)?;
    check_queue(&ctx.app, &f.q).await?;
    let removed = ctx.app.orca.delete(&f.q, &f.key).await?;
    ctx.app.stats.invalidate(&f.q);
    let code = if removed { "deleted" } else { "gone" };
    Ok(done(f.back.as_deref(), queue_href(&f.q), code, None))
}

/// `ORCA.DEAD <q> REQUEUE <key>`.
pub async fn requeue(ctx: Ctx, Form(f): Form<JobForm>) -> AppResult<Response> {
    check_csrf(&ctx, &f.csrf)?;
    check_key(&f.key)?;
    check_queue(&ctx.app, &f.q).await?;
    ctx.app.orca.dead_requeue(&f.q, &f.key).await?;
    ctx.app.stats.invalidate(&f.q);
    Ok(done(
        f.back.as_deref(),
        tab_href("dead", &f.q),
        "requeued",
        None,
    ))
}

#[derive(Deserialize)]
pub struct PurgeForm {
    csrf: String,
    q: String,
    confirm: Option<String>,
}

/// `ORCA.DEAD <q> PURGE`, only with the confirmation box ticked.
pub async fn purge(ctx: Ctx, Form(f): Form<PurgeForm>) -> AppResult<Response> {
    check_csrf(&ctx, &f.csrf)?;
    if f.confirm.as_deref() != Some("yes") {
        return Err(AppError::BadRequest(
            "Purging forgets every dead letter of the queue: tick the confirmation box first."
                .into(),
        ));
    }
    // a missing queue (or another type) gets the page the others get, not
    // "purged 0" and then a 404
    check_queue(&ctx.app, &f.q).await?;
    let n = ctx.app.orca.dead_purge(&f.q).await?;
    ctx.app.stats.invalidate(&f.q);
    Ok(done(None, tab_href("dead", &f.q), "purged", Some(n)))
}

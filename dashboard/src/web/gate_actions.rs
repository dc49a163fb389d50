//! Gate actions, each one `ORCA.GATE <q> <g> CLOSE|OPEN|DROP` (atomic on
//! the server), CSRF-checked, refused in read-only mode (`security`):
//!
//! - close: from now on new jobs naming the gate are held;
//! - open: every held job enters the queue as if enqueued at its arrival;
//! - drop: only with the confirmation box ticked; removes every held job and
//!   leads to the page of the removed configs (`dropped`), which are also
//!   logged, so each submitter can be told.

use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::actions::check_csrf;
use super::error::{AppError, AppResult};
use super::extract::Form;
use super::gates::gate_name;
use super::head::check_queue;
use super::layout::{gate_href, local_path, tab_href, with_notice, Ctx};

#[derive(Deserialize)]
pub struct GateForm {
    csrf: String,
    q: String,
    gate: Option<String>,
    op: Option<String>,
    confirm: Option<String>,
    /// The held count the confirmation showed.
    expected: Option<String>,
    back: Option<String>,
}

pub async fn gate(ctx: Ctx, Form(f): Form<GateForm>) -> AppResult<Response> {
    check_csrf(&ctx, &f.csrf)?;
    let gate = gate_name(f.gate)?;
    let app = ctx.app.clone();
    let back = |fallback: String, code: &str, n: Option<i64>| {
        Redirect::to(&with_notice(
            &local_path(f.back.as_deref(), fallback),
            code,
            n,
        ))
        .into_response()
    };
    match f.op.as_deref() {
        Some("close") => {
            // CLOSE creates a missing queue: only act on an existing one.
            check_queue(&app, &f.q).await?;
            let was_open = app.orca.gate_close(&f.q, &gate).await?;
            app.stats.invalidate(&f.q);
            // to the gate's own page, whatever the form came from
            let code = if was_open {
                "gate-closed"
            } else {
                "gate-was-closed"
            };
            Ok(Redirect::to(&with_notice(&gate_href(&f.q, &gate), code, None)).into_response())
        }
        Some("open") => {
            check_queue(&app, &f.q).await?;
            let n = app.orca.gate_open(&f.q, &gate).await?;
            app.stats.invalidate(&f.q);
            Ok(back(tab_href("gates", &f.q), "gate-opened", Some(n)))
        }
        Some("drop") => {
            if f.confirm.as_deref() != Some("yes") {
                return Err(AppError::BadRequest(
                    "Dropping a gate removes every job it holds: tick the confirmation box \
                     first. Nothing was removed."
                        .into(),
                ));
            }
            check_queue(&app, &f.q).await?;
            let expected = f
                .expected
                .as_deref()
                .and_then(|e| e.trim().parse::<u64>().ok());
            let configs = app.orca.gate_drop(&f.q, &gate).await?;
            app.stats.invalidate(&f.q);
            // The reply is the only copy of these configs: keep it (and log
            // it) before anything else is asked of Redis.
            let d = app.drops.add(&f.q, &gate, now_ms(), expected, configs);
            Ok(Redirect::to(&super::dropped::dropped_href(&f.q, &d.id)).into_response())
        }
        _ => Err(AppError::BadRequest(
            "Which gate action? (op=close, op=open or op=drop)".into(),
        )),
    }
}

/// The dashboard's own clock (the time of a drop is only shown).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

//! A queue's settings (order, lifetime, auto delay, running cap, bounds of
//! dead letters and results), the running counts under the cap, and the
//! module's server-wide settings; a form changes the queue's settings with
//! one `ORCA.SETTINGS <q> <options>` (atomic), sending only what changed.
//! A refused or invalid form comes back with what was typed and why.
//!
//! Read fresh with `ORCA.SETTINGS <q>` (O(1)); that is a write command, so
//! in read-only mode (and when refused) the `settings` map of the cached
//! `ORCA.STATS` is shown instead.

use std::collections::HashMap;

use askama::Template;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::actions::check_csrf;
use super::error::{AppError, AppResult};
use super::extract::{Form, Query};
use super::head::{check_queue, queue_head, queue_name, QueueHead};
use super::layout::{queue_crumbs, tab_href, with_notice, Ctx, Layout};
use super::rows::{field_rows, FieldRow};
use super::running::{running, Running};
use super::settings_form::{self, current, Kind, Outcome, Submitted, NOT_SETTINGS, SPECS};
use super::App;
use crate::format;
use crate::orca::Fields;

/// One setting on the page: its current value and its form field.
pub struct SettingInput {
    pub field: &'static str,
    pub label: &'static str,
    pub help: &'static str,
    pub is_order: bool,
    /// As the server has it (`lifo`, `86400000`), and a human reading.
    pub value: String,
    pub hint: String,
    /// What the form field holds (the typed text after a refusal).
    pub input: String,
    /// The raw current value, sent back as `was_<field>`.
    pub was: String,
    pub error: String,
}

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    l: Layout,
    h: QueueHead,
    inputs: Vec<SettingInput>,
    /// Fields of the reply the dashboard does not know (a newer module).
    other_rows: Vec<FieldRow>,
    source: String,
    queue_note: Option<String>,
    error: Option<String>,
    run: Option<Running>,
    module_rows: Vec<FieldRow>,
    module_note: Option<String>,
}

#[derive(Deserialize)]
pub struct SettingsQuery {
    q: Option<String>,
}

/// The queue's settings: (reply, where they came from, why not fresh).
async fn read(app: &App, name: &str) -> (Option<Fields>, String, Option<String>) {
    let refused = if app.read_only {
        None
    } else {
        match app.orca.settings(name).await {
            Ok(f) => return (Some(f), "ORCA.SETTINGS, read now".into(), None),
            Err(e) => Some(e),
        }
    };
    match app.stats.get(&app.orca, name).await {
        Ok((s, age)) => {
            let f = s.map("settings").cloned().unwrap_or_else(|| (*s).clone());
            let source = format!("the settings map of ORCA.STATS, {} s old", age.as_secs());
            let note = refused.map(|e| {
                format!("ORCA.SETTINGS could not be read ({e}); showing what ORCA.STATS reports.")
            });
            (Some(f), source, note)
        }
        Err(e) => (
            None,
            String::new(),
            Some(format!("The settings could not be read: {e}")),
        ),
    }
}

/// Render the page; `form` is a refused form to show again, with its errors.
async fn render(
    ctx: Ctx,
    name: String,
    form: Option<&HashMap<String, String>>,
    field_errors: &[(&'static str, String)],
    error: Option<String>,
) -> AppResult<Response> {
    let app = ctx.app.clone();
    let h = queue_head(&app, &name, "settings").await?;
    let (settings, source, queue_note) = read(&app, &name).await;
    let settings = settings.unwrap_or_default();
    let inputs = SPECS
        .iter()
        .map(|spec| {
            let cur = current(&settings, spec);
            let value = cur.as_ref().map(|v| v.raw()).unwrap_or_default();
            let hint = match (&cur, spec.kind) {
                (Some(settings_form::Value::Num(0)), Kind::Duration) => "0 (none)".to_string(),
                (Some(settings_form::Value::Num(n)), Kind::Duration) => {
                    format::duration(i64::try_from(*n).unwrap_or(i64::MAX))
                }
                _ => String::new(),
            };
            let shown = cur.as_ref().map(|v| v.show(spec.kind)).unwrap_or_default();
            SettingInput {
                field: spec.field,
                label: spec.label,
                help: spec.help,
                is_order: spec.kind == Kind::Order,
                input: form
                    .and_then(|f| f.get(spec.field).cloned())
                    .unwrap_or(shown),
                // after a refusal, keep comparing against what the form
                // was first rendered with
                was: form
                    .and_then(|f| f.get(&format!("was_{}", spec.field)).cloned())
                    .unwrap_or_else(|| value.clone()),
                error: field_errors
                    .iter()
                    .filter(|(f, _)| *f == spec.field)
                    .map(|(_, e)| e.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                value,
                hint,
            }
        })
        .collect();
    let known: Vec<&str> = SPECS.iter().map(|s| s.field).chain(NOT_SETTINGS).collect();
    let other = Fields::new(
        settings
            .0
            .iter()
            .filter(|(k, _)| !known.contains(&k.as_str()) && source.starts_with("ORCA.SETTINGS"))
            .cloned()
            .collect(),
    );
    let run = app
        .stats
        .get(&app.orca, &name)
        .await
        .ok()
        .map(|(s, _)| running(&name, &s));
    let (module_rows, module_note) = match app.orca.module_config().await {
        Ok(f) => (field_rows(&f, h.now, &[]), None),
        Err(e) => (
            Vec::new(),
            Some(format!("CONFIG GET orca.* is not available: {e}")),
        ),
    };
    let page = SettingsPage {
        l: ctx.layout(format!("{name} · settings"), queue_crumbs(&name)),
        other_rows: field_rows(&other, h.now, &[]),
        h,
        inputs,
        source,
        queue_note,
        error,
        run,
        module_rows,
        module_note,
    };
    Ok(ctx.render(&page))
}

pub async fn page(ctx: Ctx, Query(q): Query<SettingsQuery>) -> AppResult<Response> {
    let name = queue_name(q.q)?;
    render(ctx, name, None, &[], None).await
}

fn with_status(r: AppResult<Response>, status: StatusCode) -> AppResult<Response> {
    r.map(|mut resp| {
        *resp.status_mut() = status;
        resp
    })
}

/// The settings form: `ORCA.SETTINGS <q>` with the changed options.
pub async fn save(ctx: Ctx, Form(f): Form<HashMap<String, String>>) -> AppResult<Response> {
    check_csrf(&ctx, f.get("csrf").map(String::as_str).unwrap_or(""))?;
    let name = queue_name(f.get("q").cloned())?;
    let app = ctx.app.clone();
    // ORCA.SETTINGS creates a missing queue: only change an existing one.
    check_queue(&app, &name).await?;
    match settings_form::options(&Submitted(&f)) {
        Outcome::Invalid(errors) => {
            let msg = "Nothing was changed: some settings do not read (see below).".to_string();
            with_status(
                render(ctx, name, Some(&f), &errors, Some(msg)).await,
                StatusCode::BAD_REQUEST,
            )
        }
        Outcome::Unchanged => Ok(Redirect::to(&with_notice(
            &tab_href("settings", &name),
            "settings-same",
            None,
        ))
        .into_response()),
        Outcome::Change(options) => match app.orca.change_settings(&name, &options).await {
            Ok(_) => {
                app.stats.invalidate(&name);
                Ok(
                    Redirect::to(&with_notice(&tab_href("settings", &name), "settings", None))
                        .into_response(),
                )
            }
            Err(e) => {
                let status = AppError::Orca(e.clone()).status();
                let msg = format!(
                    "The server refused the change, nothing was changed: {e} (ORCA.SETTINGS {} {})",
                    format::short(&name, 80),
                    options.join(" ")
                );
                with_status(render(ctx, name, Some(&f), &[], Some(msg)).await, status)
            }
        },
    }
}

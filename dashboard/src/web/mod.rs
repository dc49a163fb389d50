//! The HTTP side: state, routes and the layers every request goes through.

pub mod actions;
pub mod auth;
pub mod dead;
pub mod dropped;
pub mod error;
pub mod error_page;
pub mod extract;
pub mod find;
pub mod gate_actions;
pub mod gates;
pub mod head;
pub mod hosts;
pub mod info;
pub mod job;
pub mod layout;
pub mod overview;
pub mod pager;
pub mod queue;
pub mod rows;
pub mod running;
pub mod scan;
pub mod security;
pub mod settings;
pub mod settings_form;
pub mod states;

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, FromRef};
use axum::http::{header, StatusCode};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use axum_csrf::{CsrfConfig, Key, SameSite};
use tower_http::catch_panic::CatchPanicLayer;

use crate::drops::Drops;
use crate::orca::Orca;
use crate::sampler::History;
use crate::stats_cache::StatsCache;
use error::AppError;

pub struct Inner {
    pub orca: Arc<Orca>,
    pub history: History,
    pub stats: StatsCache,
    /// Gate drops kept for the page after them (and their download).
    pub drops: Drops,
    pub csrf: CsrfConfig,
    pub auth: Option<auth::Auth>,
    /// Payloads, results and what is read from them beyond the fields the
    /// queue reads are shown only behind a token: without one, anyone on
    /// this machine could read them (docs/security.md, "The dashboard").
    pub show_payloads: bool,
    /// The host names requests may name (DNS rebinding protection).
    pub hosts: hosts::AllowedHosts,
    pub read_only: bool,
    pub scan_window: u64,
    pub sample_interval: Duration,
    pub stats_ttl: Duration,
}

/// The shared state of every handler.
#[derive(Clone)]
pub struct App(Arc<Inner>);

impl Deref for App {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl FromRef<App> for CsrfConfig {
    fn from_ref(app: &App) -> CsrfConfig {
        app.csrf.clone()
    }
}

pub struct Options {
    pub token: Option<String>,
    pub hosts: hosts::AllowedHosts,
    pub read_only: bool,
    pub scan_window: u64,
    pub sample_interval: Duration,
    pub stats_ttl: Duration,
}

impl App {
    pub fn new(orca: Arc<Orca>, history: History, o: Options) -> App {
        // The CSRF cookie is private (encrypted with a key made at start) and
        // SameSite=Strict; forms carry an HMAC of it.
        let csrf = CsrfConfig::default()
            .with_key(Some(Key::generate()))
            .with_cookie_name("orca_csrf")
            .with_cookie_same_site(SameSite::Strict)
            .with_http_only(true);
        App(Arc::new(Inner {
            orca,
            history,
            stats: StatsCache::new(o.stats_ttl),
            drops: Drops::default(),
            csrf,
            show_payloads: o.token.is_some(),
            auth: o.token.map(auth::Auth::new),
            hosts: o.hosts,
            read_only: o.read_only,
            scan_window: o.scan_window,
            sample_interval: o.sample_interval,
            stats_ttl: o.stats_ttl,
        }))
    }
}

const STYLE: &str = include_str!("../../static/style.css");
const SCRIPT: &str = include_str!("../../static/refresh.js");

async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

async fn not_found() -> AppError {
    AppError::NotFound("No such page.".into())
}

async fn method_not_allowed() -> Response {
    let mut r = AppError::BadRequest(
        "This address does not take that method (actions are POSTed by their buttons).".into(),
    )
    .into_response();
    *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    r
}

fn panic_page(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    AppError::Internal("The dashboard hit a bug on this request (it keeps running).".into())
        .into_response()
}

pub fn router(app: App) -> Router {
    Router::new()
        .route("/", get(overview::page))
        .route("/queue", get(queue::jobs))
        .route("/queue/find", get(find::page))
        .route("/queue/dead", get(dead::page))
        .route("/queue/stats", get(info::stats))
        .route("/queue/settings", get(settings::page))
        .route("/queue/gates", get(gates::list))
        .route("/queue/gate", get(gates::page))
        .route("/queue/dropped", get(dropped::page))
        .route("/queue/dropped.json", get(dropped::download))
        .route("/job", get(job::page))
        .route("/job/payload", get(job::payload))
        .route("/job/result", get(job::result))
        .route("/action/move", post(actions::move_job))
        .route("/action/delete", post(actions::delete))
        .route("/action/requeue", post(actions::requeue))
        .route("/action/purge", post(actions::purge))
        .route("/action/gate", post(gate_actions::gate))
        .route("/action/settings", post(settings::save))
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/static/style.css", get(style))
        .route("/static/refresh.js", get(script))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(app.clone(), security::guard_posts))
        .layer(from_fn_with_state(app.clone(), auth::require_auth))
        .layer(from_fn_with_state(app.clone(), security::check_host))
        .layer(from_fn(security::headers))
        .layer(DefaultBodyLimit::max(extract::BODY_LIMIT))
        .layer(CatchPanicLayer::custom(panic_page))
        .with_state(app)
}

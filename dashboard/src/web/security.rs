//! Request guards every route goes through: response headers (CSP, no
//! framing, no caching, no referrer to other sites), read-only mode, and a same-origin
//! check on every POST (on top of the CSRF token each form carries).

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::AppError;
use super::hosts::same_origin;
use super::App;

/// Pages load their stylesheet and refresh script from /static/ only; no
/// inline script or style can run, no other site can frame a page.
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; \
                   form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub async fn headers(req: Request, next: Next) -> Response {
    let is_static = req.uri().path().starts_with("/static/");
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !is_static {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// The request's host: its `Host` header, else the authority of an
/// absolute request target.
fn request_host(req: &Request) -> Option<String> {
    match req.headers().get(header::HOST) {
        Some(h) => h.to_str().ok().map(str::to_string),
        None => req.uri().authority().map(|a| a.as_str().to_string()),
    }
}

/// Every request must name an allowed host (see `hosts`): a site whose
/// name was rebound to this machine's address gets nothing.
pub async fn check_host(State(app): State<App>, req: Request, next: Next) -> Response {
    match request_host(&req) {
        Some(h) if app.hosts.allows(&h) => next.run(req).await,
        host => AppError::MisdirectedHost(format!(
            "This dashboard does not answer to the host name {}: only to the address it \
             listens on, localhost, 127.0.0.1 and [::1] (on its port), and the names given with \
             --allowed-host (ORCA_DASHBOARD_ALLOWED_HOST). This protects it from other sites \
             (DNS rebinding). If you reached it through a name of your own, start it with \
             --allowed-host <that name>.",
            match host {
                Some(h) => format!("\u{201c}{}\u{201d}", crate::format::short(&h, 100)),
                None => "(the request names none)".to_string(),
            }
        ))
        .into_response(),
    }
}

/// Read-only mode refuses every POST but login/logout; any POST whose
/// Origin is another site is refused whatever the mode.
pub async fn guard_posts(State(app): State<App>, req: Request, next: Next) -> Response {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            // the Host is an allowed one (check_host ran first): the
            // Origin must be that very host
            let same = match (origin.to_str().ok(), request_host(&req)) {
                (Some(o), Some(h)) => same_origin(o, &h) && app.hosts.allows(&h),
                _ => false,
            };
            if !same {
                return AppError::Forbidden(
                    "Cross-site request refused: the form must come from this dashboard.".into(),
                )
                .into_response();
            }
        }
        let path = req.uri().path();
        if app.read_only && path != "/login" && path != "/logout" {
            return AppError::Forbidden(
                "This dashboard runs read-only (--read-only): it changes nothing.".into(),
            )
            .into_response();
        }
    }
    next.run(req).await
}

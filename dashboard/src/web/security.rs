//! Request guards every route goes through: response headers (CSP, no
//! framing, no caching, no referrer to other sites), read-only mode, and a same-origin
//! check on every POST (on top of the CSRF token each form carries).

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::AppError;
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

/// Read-only mode refuses every POST but login/logout; any POST whose
/// Origin is another site is refused whatever the mode.
pub async fn guard_posts(State(app): State<App>, req: Request, next: Next) -> Response {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok());
            let origin_host = origin
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://").map(|(_, rest)| rest));
            if host.is_none() || origin_host != host {
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

//! Access control: the `--token`. A browser logs in once on /login and gets
//! an HttpOnly, SameSite=Strict session cookie holding HMAC-SHA256(token,
//! "orca-dashboard session v1") (the token itself never sits in a cookie;
//! changing the token ends every session); scripts may instead send
//! `Authorization: Bearer <token>`. Comparisons are constant-time.

use std::time::Duration;

use askama::Template;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use super::error::AppError;
use super::extract::{Form, Query};
use super::layout::{local_path, Ctx, Layout};
use super::App;

pub const SESSION_COOKIE: &str = "orca_session";
const SESSION_MESSAGE: &[u8] = b"orca-dashboard session v1";

pub struct Auth {
    token: String,
}

fn mac(key: &[u8]) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(SESSION_MESSAGE);
    m
}

impl Auth {
    pub fn new(token: String) -> Auth {
        Auth { token }
    }

    /// The session cookie's value for this token.
    pub fn session_value(&self) -> String {
        URL_SAFE_NO_PAD.encode(mac(self.token.as_bytes()).finalize().into_bytes())
    }

    /// Is `candidate` the token? (constant-time)
    pub fn token_matches(&self, candidate: &str) -> bool {
        let tag = mac(candidate.as_bytes()).finalize().into_bytes();
        mac(self.token.as_bytes()).verify_slice(&tag).is_ok()
    }

    /// Is `value` a session cookie of this token? (constant-time)
    pub fn session_matches(&self, value: &str) -> bool {
        match URL_SAFE_NO_PAD.decode(value) {
            Ok(tag) => mac(self.token.as_bytes()).verify_slice(&tag).is_ok(),
            Err(_) => false,
        }
    }

    fn allows(&self, headers: &HeaderMap) -> bool {
        for v in headers.get_all(header::AUTHORIZATION) {
            if let Some(t) = v.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) {
                if self.token_matches(t.trim()) {
                    return true;
                }
            }
        }
        cookie_values(headers, SESSION_COOKIE).any(|v| self.session_matches(&v))
    }
}

fn cookie_values<'a>(headers: &'a HeaderMap, name: &'a str) -> impl Iterator<Item = String> + 'a {
    headers
        .get_all(header::COOKIE)
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| cookie::Cookie::split_parse(v.to_string()))
        .filter_map(Result::ok)
        .filter(move |c| c.name() == name)
        .map(|c| c.value().to_string())
}

/// Paths open without a session: the login page itself, static files, health.
fn is_public(path: &str) -> bool {
    path == "/login" || path == "/healthz" || path.starts_with("/static/")
}

/// Middleware: with a token, every other request needs a session or bearer.
pub async fn require_auth(State(app): State<App>, req: Request, next: Next) -> Response {
    let Some(auth) = app.auth.as_ref() else {
        return next.run(req).await;
    };
    if is_public(req.uri().path()) || auth.allows(req.headers()) {
        return next.run(req).await;
    }
    if req.method() == Method::GET || req.method() == Method::HEAD {
        let here = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let mut ser = form_urlencoded::Serializer::new(String::new());
        ser.append_pair("next", &here);
        return Redirect::to(&format!("/login?{}", ser.finish())).into_response();
    }
    AppError::Unauthorized(
        "This dashboard needs its access token: log in on /login, or send \
         Authorization: Bearer <token>."
            .into(),
    )
    .into_response()
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    l: Layout,
    next: String,
    failed: bool,
}

#[derive(Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
}

pub async fn login_form(ctx: Ctx, Query(q): Query<LoginQuery>) -> Response {
    if ctx.app.auth.is_none() {
        return Redirect::to("/").into_response();
    }
    let page = LoginPage {
        l: Layout {
            auth: false,
            ..ctx.layout("Log in", Vec::new())
        },
        next: local_path(q.next.as_deref(), "/".into()),
        failed: false,
    };
    ctx.render(&page)
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
    csrf: String,
    next: Option<String>,
}

pub async fn login(ctx: Ctx, Form(f): Form<LoginForm>) -> Result<Response, AppError> {
    let Some(auth) = ctx.app.auth.as_ref() else {
        return Ok(Redirect::to("/").into_response());
    };
    super::actions::check_csrf(&ctx, &f.csrf)?;
    let next = local_path(f.next.as_deref(), "/".into());
    if !auth.token_matches(&f.token) {
        // slow down guessing
        tokio::time::sleep(Duration::from_millis(500)).await;
        let page = LoginPage {
            l: Layout {
                auth: false,
                ..ctx.layout("Log in", Vec::new())
            },
            next,
            failed: true,
        };
        let mut resp = ctx.render(&page);
        *resp.status_mut() = StatusCode::UNAUTHORIZED;
        return Ok(resp);
    }
    let cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        auth.session_value()
    );
    let mut resp = Redirect::to(&next).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(resp)
}

#[derive(Deserialize)]
pub struct LogoutForm {
    csrf: String,
}

pub async fn logout(ctx: Ctx, Form(f): Form<LogoutForm>) -> Result<Response, AppError> {
    super::actions::check_csrf(&ctx, &f.csrf)?;
    let mut resp = Redirect::to("/login").into_response();
    resp.headers_mut().append(
        header::SET_COOKIE,
        HeaderValue::from_static("orca_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_sessions() {
        let a = Auth::new("0123456789abcdef".into());
        assert!(a.token_matches("0123456789abcdef"));
        assert!(!a.token_matches("0123456789abcdeg"));
        assert!(!a.token_matches(""));
        let s = a.session_value();
        assert!(a.session_matches(&s));
        assert!(!a.session_matches("0123456789abcdef"));
        assert!(!a.session_matches("not base64 !"));
        let b = Auth::new("another-token-0000".into());
        assert!(!b.session_matches(&s));
    }

    #[test]
    fn bearer_and_cookie_headers() {
        let a = Auth::new("0123456789abcdef".into());
        let mut h = HeaderMap::new();
        assert!(!a.allows(&h));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer 0123456789abcdef"),
        );
        assert!(a.allows(&h));
        let mut h = HeaderMap::new();
        let c = format!("x=1; {SESSION_COOKIE}={}", a.session_value());
        h.insert(header::COOKIE, HeaderValue::from_str(&c).unwrap());
        assert!(a.allows(&h));
    }
}

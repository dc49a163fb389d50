//! What every page shares: the header (breadcrumbs, Redis, mode, logout),
//! the notice after an action, links, and rendering with the CSRF cookie.

use askama::Template;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Response};
use axum_csrf::CsrfToken;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::error::AppError;
use super::App;
use crate::format;

/// Everything but the unreserved characters is escaped in links.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

pub fn enc(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}

pub fn queue_href(queue: &str) -> String {
    format!("/queue?q={}", enc(queue))
}

pub fn tab_href(tab: &str, queue: &str) -> String {
    format!("/queue/{tab}?q={}", enc(queue))
}

pub fn job_href(queue: &str, key: &str) -> String {
    format!("/job?q={}&key={}", enc(queue), enc(key))
}

/// The download of a job's payload (`what` = "payload") or kept result.
pub fn job_download_href(what: &str, queue: &str, key: &str) -> String {
    format!("/job/{what}?q={}&key={}", enc(queue), enc(key))
}

pub fn collation_href(queue: &str, collation: &str) -> String {
    format!("/queue/find?q={}&collation={}", enc(queue), enc(collation))
}

pub fn gate_href(queue: &str, gate: &str) -> String {
    format!("/queue/gate?q={}&gate={}", enc(queue), enc(gate))
}

/// The jobs page listing one state (`queued` is the plain jobs page).
pub fn state_href(queue: &str, state: &str) -> String {
    if state == "queued" {
        queue_href(queue)
    } else {
        format!("/queue?q={}&state={state}", enc(queue))
    }
}

pub struct Crumb {
    pub label: String,
    pub href: String,
}

pub struct Layout {
    pub title: String,
    pub crumbs: Vec<Crumb>,
    pub redis: String,
    pub read_only: bool,
    /// Show the logout button (a token protects this dashboard).
    pub auth: bool,
    /// Payloads and results are hidden (no token).
    pub redacted: bool,
    /// The CSRF authenticity token for forms; empty on pages without forms.
    pub csrf: String,
    pub notice: Option<String>,
    /// A warning about this page (a page size the server would not take).
    pub warning: Option<String>,
}

impl Layout {
    /// For pages rendered without a request context (errors).
    pub fn bare(title: &str) -> Layout {
        Layout {
            title: title.to_string(),
            crumbs: Vec::new(),
            redis: String::new(),
            read_only: false,
            auth: false,
            redacted: false,
            csrf: String::new(),
            notice: None,
            warning: None,
        }
    }
}

/// The request context of a page: the app, the CSRF token of this browser
/// and the notice of the action that led here.
pub struct Ctx {
    pub app: App,
    pub csrf: CsrfToken,
    pub notice: Option<String>,
}

/// Notices are fixed texts chosen by a code in the query (`done=`), so a
/// link cannot make the dashboard display words of its own.
fn notice(query: Option<&str>) -> Option<String> {
    let mut done = None;
    let mut n = None;
    for (k, v) in form_urlencoded::parse(query?.as_bytes()) {
        match &*k {
            "done" => done = Some(v.into_owned()),
            "n" => n = v.parse::<i64>().ok(),
            _ => {}
        }
    }
    let text = match done?.as_str() {
        "front" => "Moved the job to the front of the queue.".to_string(),
        "back" => "Moved the job to the back of the queue.".to_string(),
        "deleted" => "Deleted the job.".to_string(),
        "gone" => "Nothing to delete: the job was already gone.".to_string(),
        "requeued" => "Requeued the dead letter (immediate, with fresh attempts).".to_string(),
        "purged" => format!("Purged {} dead letters.", format::count(n.unwrap_or(0))),
        "gate-closed" => {
            "Closed the gate: new jobs naming it are held until it is opened.".to_string()
        }
        "gate-was-closed" => "The gate was already closed: nothing changed.".to_string(),
        "gate-opened" => format!(
            "Opened the gate: {} held job{} entered the queue.",
            format::count(n.unwrap_or(0)),
            if n == Some(1) { "" } else { "s" }
        ),
        "settings" => "Saved the queue's settings.".to_string(),
        "settings-same" => "Nothing to save: no setting was changed.".to_string(),
        _ => return None,
    };
    Some(text)
}

impl FromRequestParts<App> for Ctx {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, Self::Rejection> {
        let csrf = CsrfToken::from_request_parts(parts, app)
            .await
            .map_err(|(_, m)| AppError::Internal(m.to_string()))?;
        Ok(Ctx {
            app: app.clone(),
            csrf,
            notice: notice(parts.uri.query()),
        })
    }
}

impl Ctx {
    pub fn layout(&self, title: impl Into<String>, crumbs: Vec<Crumb>) -> Layout {
        let csrf = self.csrf.authenticity_token().unwrap_or_default();
        Layout {
            title: title.into(),
            crumbs,
            redis: self.app.orca.display_url.clone(),
            read_only: self.app.read_only,
            auth: self.app.auth.is_some(),
            redacted: !self.app.show_payloads,
            csrf,
            notice: self.notice.clone(),
            warning: None,
        }
    }

    /// Render a page and set this browser's CSRF cookie with it.
    pub fn render<T: Template>(self, page: &T) -> Response {
        match page.render() {
            Ok(html) => (self.csrf, Html(no_nul(html))).into_response(),
            Err(e) => AppError::Internal(format!("template: {e}")).into_response(),
        }
    }
}

/// A NUL (which HTML may not hold) from anything shown, as U+FFFD.
pub fn no_nul(html: String) -> String {
    if html.contains('\0') {
        html.replace('\0', "\u{fffd}")
    } else {
        html
    }
}

/// Crumbs for a queue page: Queues / <name>.
pub fn queue_crumbs(queue: &str) -> Vec<Crumb> {
    vec![
        Crumb {
            label: "Queues".into(),
            href: "/".into(),
        },
        Crumb {
            label: queue.to_string(),
            href: queue_href(queue),
        },
    ]
}

/// A local path to go back to after an action: must be a path on this
/// site (no scheme, no `//host`), else the fallback.
pub fn local_path(back: Option<&str>, fallback: String) -> String {
    match back {
        Some(b)
            if b.starts_with('/')
                && !b.starts_with("//")
                && !b.contains('\\')
                && !b.chars().any(char::is_control) =>
        {
            b.to_string()
        }
        _ => fallback,
    }
}

/// `path` with `done=<code>` (and `n=`) set, replacing earlier ones.
pub fn with_notice(path: &str, done: &str, n: Option<i64>) -> String {
    let (base, query) = path.split_once('?').unwrap_or((path, ""));
    let mut ser = form_urlencoded::Serializer::new(String::new());
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k != "done" && k != "n" {
            ser.append_pair(&k, &v);
        }
    }
    ser.append_pair("done", done);
    if let Some(n) = n {
        ser.append_pair("n", &n.to_string());
    }
    format!("{base}?{}", ser.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_escape_everything_but_unreserved() {
        assert_eq!(
            job_href("a/b c", "5Zr9ALyYLAy/nvBG+=="),
            "/job?q=a%2Fb%20c&key=5Zr9ALyYLAy%2FnvBG%2B%3D%3D"
        );
        assert_eq!(queue_href(".."), "/queue?q=..");
    }

    #[test]
    fn back_paths_stay_local() {
        let fb = || "/fallback".to_string();
        assert_eq!(local_path(Some("/queue?q=a"), fb()), "/queue?q=a");
        assert_eq!(local_path(Some("//evil.example/"), fb()), "/fallback");
        assert_eq!(local_path(Some("https://evil.example/"), fb()), "/fallback");
        assert_eq!(local_path(Some("/\\evil"), fb()), "/fallback");
        assert_eq!(local_path(None, fb()), "/fallback");
    }

    #[test]
    fn notices_are_fixed_texts() {
        assert_eq!(
            with_notice("/queue?q=a&done=front&page=2", "purged", Some(3)),
            "/queue?q=a&page=2&done=purged&n=3"
        );
        assert_eq!(
            notice(Some("done=purged&n=3")).unwrap(),
            "Purged 3 dead letters."
        );
        assert_eq!(notice(Some("done=<script>")), None);
        assert_eq!(
            notice(Some("done=gate-opened&n=1")).unwrap(),
            "Opened the gate: 1 held job entered the queue."
        );
        assert_eq!(notice(None), None);
    }
}

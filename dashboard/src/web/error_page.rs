//! The page of an `AppError`: its status, its reason and its message, in
//! the common layout.

use askama::Template;
use axum::response::{Html, IntoResponse, Response};

use super::error::AppError;
use super::layout::{no_nul, Layout};

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    l: Layout,
    status: u16,
    reason: String,
    message: String,
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!("{}: {}", status, self.message());
        }
        let page = ErrorPage {
            l: Layout::bare(status.canonical_reason().unwrap_or("Error")),
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or("Error").to_string(),
            message: self.message(),
        };
        match page.render() {
            Ok(html) => (status, Html(no_nul(html))).into_response(),
            Err(_) => (status, self.message()).into_response(),
        }
    }
}

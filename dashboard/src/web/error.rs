//! Every failure becomes a page that says what went wrong, with a status
//! code that matches; nothing a request carries can panic the server.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::orca::OrcaError;

#[derive(Debug)]
pub enum AppError {
    BadRequest(String),
    NotFound(String),
    Unauthorized(String),
    Forbidden(String),
    /// The request names a host this dashboard does not answer to.
    MisdirectedHost(String),
    /// The body is over the size limit.
    TooLarge(String),
    Orca(OrcaError),
    Internal(String),
}

impl From<OrcaError> for AppError {
    fn from(e: OrcaError) -> Self {
        AppError::Orca(e)
    }
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::MisdirectedHost(_) => StatusCode::MISDIRECTED_REQUEST,
            AppError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::Orca(OrcaError::Unavailable(_)) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Orca(OrcaError::NoPerm(_)) => StatusCode::FORBIDDEN,
            AppError::Orca(OrcaError::Refused(_)) => StatusCode::CONFLICT,
            AppError::Orca(OrcaError::Protocol(_)) => StatusCode::BAD_GATEWAY,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn message(&self) -> String {
        match self {
            AppError::BadRequest(m)
            | AppError::NotFound(m)
            | AppError::Unauthorized(m)
            | AppError::Forbidden(m)
            | AppError::MisdirectedHost(m)
            | AppError::TooLarge(m)
            | AppError::Internal(m) => m.clone(),
            AppError::Orca(e) => e.to_string(),
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    l: super::layout::Layout,
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
            l: super::layout::Layout::bare(status.canonical_reason().unwrap_or("Error")),
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or("Error").to_string(),
            message: self.message(),
        };
        match page.render() {
            Ok(html) => (status, Html(super::layout::no_nul(html))).into_response(),
            Err(_) => (status, self.message()).into_response(),
        }
    }
}

pub type AppResult<T> = Result<T, AppError>;

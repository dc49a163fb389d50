//! Every failure becomes a page that says what went wrong, with a status
//! code that matches; nothing a request carries can panic the server. The
//! page itself is drawn by `error_page` (which uses the layout; this file
//! uses nothing of the web module, so the layout may use it).

use axum::http::StatusCode;

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
            AppError::Orca(OrcaError::Refused(r)) if r.no_such_job() => StatusCode::NOT_FOUND,
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

pub type AppResult<T> = Result<T, AppError>;

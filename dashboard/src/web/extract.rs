//! Query strings and forms as typed values, with rejections turned into
//! error pages, and the numbers in them parsed with clear messages.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::AppError;

/// `axum::extract::Query`, with a clear 400 page for a malformed query.
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e| AppError::BadRequest(format!("Bad query string: {}", e.body_text())))
    }
}

/// `axum::extract::Form`, with a clear 400 page for a malformed form.
pub struct Form<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Form<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Form::<T>::from_request(req, state)
            .await
            .map(|f| Form(f.0))
            .map_err(|e| {
                if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    AppError::TooLarge(format!(
                        "The form is larger than the dashboard takes ({} KB): nothing was done.",
                        BODY_LIMIT / 1024
                    ))
                } else {
                    AppError::BadRequest(format!("Bad form: {}", e.body_text()))
                }
            })
    }
}

/// Largest request body taken (forms are small).
pub const BODY_LIMIT: usize = 256 * 1024;

/// Largest page number accepted (beyond it no queue can have entries).
pub const MAX_PAGE: u64 = 1 << 40;
/// Page sizes offered; any value 1..=MAX_PER is accepted.
pub const PER_CHOICES: [u64; 4] = [25, 50, 100, 200];
pub const MAX_PER: u64 = 1000;

/// Parse an optional positive integer parameter in `1..=max`.
pub fn number(name: &str, raw: Option<&str>, default: u64, max: u64) -> Result<u64, AppError> {
    let Some(raw) = raw.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(default);
    };
    match raw.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ if raw.bytes().all(|b| b.is_ascii_digit()) && !raw.trim_start_matches('0').is_empty() => {
            Err(AppError::BadRequest(format!(
                "{name} {} is out of range: it must be between 1 and {max}.",
                crate::format::short(raw, 40)
            )))
        }
        _ => Err(AppError::BadRequest(format!(
            "{name} must be a whole number between 1 and {max} (got \u{201c}{}\u{201d}).",
            crate::format::short(raw, 40)
        ))),
    }
}

/// `page` and `per` of a paged listing, and the offset they give.
#[derive(Clone, Copy, Debug)]
pub struct Paging {
    pub page: u64,
    pub per: u64,
}

impl Paging {
    pub fn parse(
        page: Option<&str>,
        per: Option<&str>,
        default_per: u64,
    ) -> Result<Paging, AppError> {
        Ok(Paging {
            page: number("page", page, 1, MAX_PAGE)?,
            per: number("per", per, default_per, MAX_PER)?,
        })
    }

    pub fn offset(&self) -> u64 {
        (self.page - 1).saturating_mul(self.per)
    }

    /// At most `max` a page, starting at (or just before) the same position.
    pub fn clamped(self, max: u64) -> Paging {
        if self.per <= max || max == 0 {
            return self;
        }
        Paging {
            page: self.offset() / max + 1,
            per: max,
        }
    }

    /// Pages needed for `total` entries (at least 1).
    pub fn last_page(&self, total: u64) -> u64 {
        total.div_ceil(self.per).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_checked() {
        assert_eq!(number("page", None, 1, 10).unwrap(), 1);
        assert_eq!(number("page", Some(" 3 "), 1, 10).unwrap(), 3);
        let e = number("page", Some("99999999999999999999999"), 1, 10).unwrap_err();
        assert!(e.message().contains("out of range"), "{}", e.message());
        let e = number("page", Some("0"), 1, 10).unwrap_err();
        assert!(e.message().contains("whole number"), "{}", e.message());
        let e = number("page", Some("-1"), 1, 10).unwrap_err();
        assert!(e.message().contains("whole number"), "{}", e.message());
        let e = number("per", Some("abc"), 1, 10).unwrap_err();
        assert!(e.message().contains("got"), "{}", e.message());
    }

    #[test]
    fn paging() {
        let p = Paging::parse(Some("3"), Some("50"), 50).unwrap();
        assert_eq!(p.offset(), 100);
        assert_eq!(p.last_page(0), 1);
        assert_eq!(p.last_page(101), 3);
        let p = Paging::parse(Some(&MAX_PAGE.to_string()), Some("1000"), 50).unwrap();
        assert_eq!(p.offset(), (MAX_PAGE - 1) * 1000);
    }

    #[test]
    fn clamped_pages_start_where_asked() {
        let p = Paging { page: 3, per: 200 };
        let c = p.clamped(100);
        assert_eq!((c.page, c.per, c.offset()), (5, 100, 400));
        let c = Paging { page: 2, per: 150 }.clamped(100);
        assert_eq!((c.page, c.per, c.offset()), (2, 100, 100));
        let c = Paging { page: 7, per: 50 }.clamped(100);
        assert_eq!((c.page, c.per), (7, 50));
        let c = Paging { page: 1, per: 1000 }.clamped(1);
        assert_eq!((c.page, c.per), (1, 1));
    }
}

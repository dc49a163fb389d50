//! Links between the pages of a listing.

use std::future::Future;

use super::extract::{Paging, PER_CHOICES};
use super::App;
use crate::format;
use crate::orca::OrcaResult;

/// One page of a listing (`list(paging)` reads it), its size kept within
/// the largest LIMIT the server takes (`orca.max-pop-count`, learned from
/// its refusal): a larger page size asked for is clamped, starting at the
/// same position. Returns the paging used.
pub async fn paged<T, F, Fut>(app: &App, asked: Paging, list: F) -> OrcaResult<(Paging, T)>
where
    F: Fn(Paging) -> Fut,
    Fut: Future<Output = OrcaResult<T>>,
{
    let mut p = app.orca.max_limit().map_or(asked, |n| asked.clamped(n));
    let mut out = list(p).await?;
    // learned during that call: the reply holds the first `n` jobs at p's
    // offset, which is the clamped page's unless its offset moved
    if let Some(n) = app.orca.max_limit() {
        let c = p.clamped(n);
        if c.offset() != p.offset() {
            out = list(c).await?;
        }
        p = c;
    }
    Ok((p, out))
}

/// The notice a clamped page size gets.
pub fn limit_note(asked: Paging, used: Paging) -> Option<String> {
    (used.per < asked.per).then(|| {
        format!(
            "This Redis server lists at most {} jobs per command (orca.max-pop-count), so \
             pages here hold {} jobs instead of the {} asked for.",
            format::count(used.per as i64),
            format::count(used.per as i64),
            format::count(asked.per as i64)
        )
    })
}

pub struct PerLink {
    pub per: u64,
    pub href: String,
    pub active: bool,
}

pub struct Pager {
    pub page: u64,
    /// "page 3 of 20,000" or "page 3".
    pub summary: String,
    pub first_href: Option<String>,
    pub prev_href: Option<String>,
    pub next_href: Option<String>,
    pub last_href: Option<String>,
    pub per_links: Vec<PerLink>,
}

impl Pager {
    /// `base` is the URL up to and including `?` or `&`; `total` the number
    /// of entries if known (else a next page is offered after a full page).
    pub fn new(base: &str, p: Paging, total: Option<u64>, shown: u64, per_choices: bool) -> Pager {
        let href = |page: u64| {
            if per_choices {
                format!("{base}page={page}&per={}", p.per)
            } else {
                format!("{base}page={page}")
            }
        };
        let last = total.map(|t| p.last_page(t));
        let has_next = match last {
            Some(l) => p.page < l,
            None => shown == p.per,
        };
        Pager {
            page: p.page,
            summary: match last {
                Some(l) => format!(
                    "page {} of {}",
                    format::count(p.page as i64),
                    format::count(l as i64)
                ),
                None => format!("page {}", format::count(p.page as i64)),
            },
            first_href: (p.page > 1).then(|| href(1)),
            prev_href: (p.page > 1).then(|| href(last.map_or(p.page - 1, |l| (p.page - 1).min(l)))),
            next_href: has_next.then(|| href(p.page + 1)),
            last_href: last.filter(|l| *l != p.page).map(href),
            per_links: if per_choices {
                PER_CHOICES
                    .iter()
                    .map(|&per| PerLink {
                        per,
                        href: format!("{base}page=1&per={per}"),
                        active: per == p.per,
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links() {
        let p = Paging { page: 2, per: 50 };
        let g = Pager::new("/queue?q=a&", p, Some(120), 50, true);
        assert_eq!(g.summary, "page 2 of 3");
        assert_eq!(g.prev_href.as_deref(), Some("/queue?q=a&page=1&per=50"));
        assert_eq!(g.next_href.as_deref(), Some("/queue?q=a&page=3&per=50"));
        assert_eq!(g.last_href.as_deref(), Some("/queue?q=a&page=3&per=50"));
        assert_eq!(g.per_links.len(), 4);
        // past the end: "previous" leads back to the last page
        let p = Paging {
            page: 1000,
            per: 50,
        };
        let g = Pager::new("/?", p, Some(120), 0, false);
        assert_eq!(g.prev_href.as_deref(), Some("/?page=3"));
        assert!(g.next_href.is_none());
        // unknown total: next only after a full page
        let g = Pager::new("/?", Paging { page: 1, per: 2 }, None, 2, false);
        assert!(g.next_href.is_some() && g.last_href.is_none());
    }
}

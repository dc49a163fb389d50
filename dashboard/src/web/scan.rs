//! Windowed scans: where the module has no index (config key alone,
//! collation, a metadata filter on a long queue), a request reads one window
//! of the queue in pop order (`--scan-window` jobs from a position, in
//! `ORCA.LIST OFFSET/LIMIT` pages of 500, or of the server's
//! `orca.max-pop-count` if lower) and matches here. Each request is
//! O(log n + window) on the server, split into commands of 500 jobs so
//! Redis serves other clients in between; the page links to the next window.

use super::error::AppResult;
use super::rows::JobRow;
use super::App;
use crate::format;
use crate::orca::Job;

/// Jobs per ORCA.LIST call of a scan (below the default orca.max-pop-count;
/// fewer where the server takes fewer).
const CHUNK: u64 = 500;
/// Matches shown per window.
pub const MAX_MATCHES: usize = 500;

pub struct Scan {
    pub rows: Vec<JobRow>,
    /// "Scanned positions 1–5,000 of 1,000,000 queued jobs."
    pub summary: String,
    /// The 1-based position the next window starts at, if any is left.
    pub next_from: Option<u64>,
}

/// Scan the window starting at 0-based `from` for jobs matching `keep`.
pub async fn scan(
    app: &App,
    queue: &str,
    from: u64,
    now: i64,
    keep: impl Fn(&Job) -> bool,
) -> AppResult<Scan> {
    let len = u64::try_from(app.orca.len(queue).await?).unwrap_or(0);
    let end = from.saturating_add(app.scan_window).min(len);
    let mut offset = from;
    let mut rows = Vec::new();
    let mut truncated = false;
    let mut stop = end;
    while offset < end && !truncated {
        let limit = CHUNK.min(end - offset);
        // Each job is looked at as it arrives, its payload then dropped
        // (`list_each` reads large payloads a few at a time).
        let mut seen = 0u64;
        let got = app
            .orca
            .list_each(queue, offset, limit, |j| {
                if truncated {
                    return;
                }
                if keep(&j) {
                    if rows.len() >= MAX_MATCHES {
                        truncated = true;
                        stop = offset + seen;
                        return;
                    }
                    rows.push(JobRow::new(queue, &j, now));
                }
                seen += 1;
            })
            .await?;
        if truncated {
            break;
        }
        // the server's LIMIT may be lower than a chunk (orca.max-pop-count,
        // learned by that call): it sent that many
        let limit = limit.min(app.orca.max_limit().unwrap_or(u64::MAX));
        if got < limit {
            // the queue got shorter while we read it
            stop = offset + got;
            break;
        }
        offset += got;
    }
    let summary = if len == 0 {
        "The queue has no queued jobs.".to_string()
    } else if from >= len {
        format!(
            "Position {} is past the end of the queue ({} queued jobs).",
            format::count(from.saturating_add(1) as i64),
            format::count(len as i64)
        )
    } else {
        format!(
            "Scanned positions {}–{} of {} queued jobs{}.",
            format::count(from as i64 + 1),
            format::count(stop as i64),
            format::count(len as i64),
            if truncated {
                format!(" (stopped at {MAX_MATCHES} matches)")
            } else {
                String::new()
            }
        )
    };
    Ok(Scan {
        rows,
        summary,
        next_from: (stop < len && stop >= from).then_some(stop + 1),
    })
}

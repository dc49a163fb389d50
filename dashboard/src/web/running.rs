//! The running cap (`MAXRUNNING`): running counts per collation from
//! `ORCA.STATS` (`running`: the 100 busiest collations with leased jobs)
//! against the queue's cap, and which queued jobs wait only because of it
//! (`capped` of `ORCA.STATUS`, asked once per collation on a page).

use super::layout::collation_href;
use super::rows::JobRow;
use super::App;
use crate::format;
use crate::orca::Fields;

/// `ORCA.STATS` lists at most this many collations under `running`.
const BUSIEST: usize = 100;

pub struct RunningRow {
    pub collation: String,
    pub href: String,
    pub running: String,
    pub at_cap: bool,
}

pub struct Running {
    pub rows: Vec<RunningRow>,
    /// The queue's `maxrunning`, 0 for no cap.
    pub cap: u64,
    pub cap_text: String,
    pub at_cap: usize,
    /// The list may be cut at the busiest 100.
    pub busiest_only: bool,
}

/// The queue's running cap from the (cached) stats: 0 when none or unknown.
pub fn cap_of(stats: &Fields) -> u64 {
    stats
        .map("settings")
        .and_then(|s| s.int("maxrunning"))
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

pub fn running(queue: &str, stats: &Fields) -> Running {
    let cap = cap_of(stats);
    let rows: Vec<RunningRow> = stats
        .map("running")
        .map(|m| {
            m.0.iter()
                .map(|(c, v)| {
                    let n = v.as_int().unwrap_or(0);
                    RunningRow {
                        collation: c.clone(),
                        href: collation_href(queue, c),
                        running: format::count(n),
                        at_cap: cap > 0 && u64::try_from(n).unwrap_or(0) >= cap,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Running {
        at_cap: rows.iter().filter(|r| r.at_cap).count(),
        busiest_only: rows.len() >= BUSIEST,
        cap_text: if cap == 0 {
            "no cap".into()
        } else {
            format::count(cap as i64)
        },
        cap,
        rows,
    }
}

/// Mark the queued jobs of `rows` that wait only because their collation
/// is at the cap: one `ORCA.STATUS` per collation on the page (a property
/// of the collation; immediate jobs are never capped). On failure, says why.
pub async fn mark_capped(app: &App, queue: &str, rows: &mut [JobRow]) -> Option<String> {
    let mut collations: Vec<(&str, String)> = Vec::new();
    for r in rows.iter() {
        if !r.immediate
            && !r.collation.is_empty()
            && !collations.iter().any(|(c, _)| *c == r.collation)
        {
            collations.push((&r.collation, r.key.clone()));
        }
    }
    let keys: Vec<String> = collations.iter().map(|(_, k)| k.clone()).collect();
    let capped = match app.orca.capped(queue, &keys).await {
        Ok(c) => c,
        Err(e) => {
            return Some(format!(
                "Which jobs wait for the running cap is unknown: {e}"
            ))
        }
    };
    let capped: Vec<String> = collations
        .iter()
        .zip(capped)
        .filter(|(_, c)| *c)
        .map(|((c, _), _)| c.to_string())
        .collect();
    for r in rows.iter_mut() {
        r.capped = !r.immediate && capped.contains(&r.collation);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::orca::Val;

    #[test]
    fn collations_at_the_cap_are_marked() {
        let stats = Fields::new(vec![
            (
                "running".into(),
                Val::Map(Fields::new(vec![
                    ("user.7".into(), Val::Int(2)),
                    ("team.1".into(), Val::Int(1)),
                ])),
            ),
            (
                "settings".into(),
                Val::Map(Fields::new(vec![("maxrunning".into(), Val::Int(2))])),
            ),
        ]);
        let r = running("q", &stats);
        assert_eq!(r.cap, 2);
        assert_eq!(r.at_cap, 1);
        assert!(r.rows[0].at_cap && !r.rows[1].at_cap);
        assert_eq!(r.rows[0].href, "/queue/find?q=q&collation=user.7");
        assert!(!r.busiest_only);
        // without a cap nobody is at it
        let r = running("q", &Fields::new(vec![stats.0[0].clone()]));
        assert_eq!((r.cap, r.at_cap, r.cap_text.as_str()), (0, 0, "no cap"));
    }
}

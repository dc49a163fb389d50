//! The plots: queue length and front wait over the last hour, as inline SVG
//! (no JavaScript, no image requests). Each series is scaled to its own
//! maximum; the labels say what the top of each scale is. The time axis
//! spans the history there is (up to the hour), so a dashboard started a
//! few minutes ago still draws readable lines.

use std::fmt::Write;

use crate::format;
use crate::sampler::{Sample, WINDOW_MS};

const LEN_COLOR: &str = "#2563eb";
const WAIT_COLOR: &str = "#ea580c";

/// Escape text for SVG/HTML content.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The time axis: (start, span) in ms, at most the window.
fn axis(samples: &[Sample]) -> (i64, i64) {
    let now = samples.last().map_or(0, |s| s.t);
    let start = samples.first().map_or(now, |s| s.t).max(now - WINDOW_MS);
    (start, (now - start).max(1))
}

fn points(
    samples: &[Sample],
    w: f64,
    h: f64,
    top: f64,
    value: impl Fn(&Sample) -> Option<i64>,
) -> String {
    let (start, span) = axis(samples);
    let max = samples.iter().filter_map(&value).max().unwrap_or(0).max(1) as f64;
    let mut out = String::new();
    for s in samples {
        let Some(v) = value(s) else { continue };
        let x = ((s.t - start) as f64 / span as f64 * w).clamp(0.0, w);
        let y = top + h - (v as f64 / max * h);
        let _ = write!(out, "{x:.1},{y:.1} ");
    }
    out
}

fn series_max(samples: &[Sample], value: impl Fn(&Sample) -> Option<i64>) -> i64 {
    samples.iter().filter_map(value).max().unwrap_or(0)
}

/// A small plot for the overview table.
pub fn sparkline(samples: &[Sample]) -> String {
    plot(samples, 220.0, 44.0, false)
}

/// The larger plot of a queue page, with scale labels.
pub fn chart(samples: &[Sample]) -> String {
    plot(samples, 640.0, 140.0, true)
}

fn plot(samples: &[Sample], w: f64, h: f64, labels: bool) -> String {
    let max_len = series_max(samples, |s| Some(s.len));
    let max_wait = series_max(samples, |s| s.front_wait);
    let (top, bottom) = if labels { (16.0, 18.0) } else { (2.0, 2.0) };
    let ph = h - top - bottom;
    let last = samples.last();
    let title = match last {
        Some(s) => format!(
            "last {}, {} samples: length now {} (max {}), front wait now {} (max {})",
            format::duration(axis(samples).1),
            samples.len(),
            format::count(s.len),
            format::count(max_len),
            s.front_wait.map_or("-".to_string(), format::duration),
            format::duration(max_wait),
        ),
        None => "no samples yet".to_string(),
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r##"<svg class="plot" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}"><title>{t}</title><rect x="0" y="0" width="{w}" height="{h}" fill="#f8fafc" stroke="#e2e8f0"/>"##,
        t = esc(&title)
    );
    if samples.len() < 2 {
        let _ = write!(
            svg,
            r##"<text x="{}" y="{}" text-anchor="middle" font-size="11" fill="#64748b">collecting samples…</text>"##,
            w / 2.0,
            h / 2.0 + 4.0
        );
    } else {
        for (color, pts) in [
            (LEN_COLOR, points(samples, w, ph, top, |s| Some(s.len))),
            (WAIT_COLOR, points(samples, w, ph, top, |s| s.front_wait)),
        ] {
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{}"/>"#,
                pts.trim_end()
            );
        }
    }
    if labels {
        let _ = write!(
            svg,
            r##"<text x="4" y="12" font-size="11" fill="{LEN_COLOR}">length (max {})</text><text x="{}" y="12" font-size="11" text-anchor="end" fill="{WAIT_COLOR}">front wait (max {})</text><text x="4" y="{}" font-size="11" fill="#64748b">{} ago</text><text x="{}" y="{}" font-size="11" text-anchor="end" fill="#64748b">now</text>"##,
            esc(&format::count(max_len)),
            w - 4.0,
            esc(&format::duration(max_wait)),
            h - 5.0,
            esc(&format::duration(axis(samples).1)),
            w - 4.0,
            h - 5.0,
        );
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_are_well_formed_and_scaled() {
        let s = [
            Sample {
                t: 1_000_000,
                len: 10,
                front_wait: Some(0),
            },
            Sample {
                t: 1_010_000,
                len: 5,
                front_wait: None,
            },
            Sample {
                t: 1_020_000,
                len: 0,
                front_wait: Some(2000),
            },
        ];
        let svg = chart(&s);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(svg.contains("length (max 10)"));
        assert!(svg.contains("front wait (max 2.0 s)"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        // the axis spans the history: first sample left, last right
        assert!(svg.contains("0.0,") && svg.contains("640.0,"));
        assert!(svg.contains("20.0 s ago"));
        let empty = sparkline(&[]);
        assert!(empty.contains("collecting samples"));
        // older than the window: clipped to the last hour
        let long = [
            Sample {
                t: 0,
                len: 1,
                front_wait: None,
            },
            Sample {
                t: 2 * WINDOW_MS,
                len: 1,
                front_wait: None,
            },
        ];
        assert!(chart(&long).contains("1h 00m ago"));
    }
}

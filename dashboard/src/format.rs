//! Display helpers: times of the Redis server's clock (ms) and durations.

use time::macros::format_description;
use time::OffsetDateTime;

/// `1795278605350` -> `2026-11-21 10:30:05 UTC`; out-of-range values as digits.
pub fn timestamp(ms: i64) -> String {
    let fmt = format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_else(|| ms.to_string())
}

/// A duration in ms, short: `850 ms`, `12.3 s`, `4m 05s`, `2h 03m`, `3d 04h`.
pub fn duration(ms: i64) -> String {
    let neg = ms < 0;
    let ms = ms.unsigned_abs();
    let s = ms / 1000;
    let text = if ms < 1000 {
        format!("{ms} ms")
    } else if s < 60 {
        format!("{}.{} s", s, (ms % 1000) / 100)
    } else if s < 3600 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d {:02}h", s / 86_400, (s % 86_400) / 3600)
    };
    if neg {
        format!("-{text}")
    } else {
        text
    }
}

/// How `t` relates to `now`: `5m 02s ago` or `in 10.0 s`.
pub fn relative(now: i64, t: i64) -> String {
    if t <= now {
        format!("{} ago", duration(now.saturating_sub(t)))
    } else {
        format!("in {}", duration(t.saturating_sub(now)))
    }
}

/// Thousands separators: 1000000 -> 1,000,000.
pub fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Pretty-printed JSON if `s` is JSON, else `s` as it is. Only whitespace
/// changes: numbers, strings (escapes included) and the order of keys stay
/// exactly as stored (a re-serialization would round big numbers and sort
/// keys).
pub fn pretty_json(s: &str) -> (String, bool) {
    if serde_json::from_str::<serde::de::IgnoredAny>(s).is_err() {
        return (s.to_string(), false);
    }
    let mut out = String::with_capacity(s.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = s.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                // an empty object or array stays on its line
                while chars.peek().is_some_and(|n| n.is_ascii_whitespace()) {
                    chars.next();
                }
                out.push(c);
                if matches!(chars.peek(), Some('}' | ']')) {
                    out.extend(chars.next());
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    (out, true)
}

/// How a kept result is shown: text (pretty-printed if JSON) when it is
/// UTF-8 without control characters (but newlines and tabs); else a hex
/// dump, its base64 and a note with its length, so no raw byte (a NUL, an
/// escape) ever reaches the page.
pub struct BytesView {
    pub text: String,
    /// For binary content: what it is, and the base64 of it.
    pub binary: Option<(String, String)>,
}

pub fn bytes_view(bytes: &[u8]) -> BytesView {
    if let Ok(text) = std::str::from_utf8(bytes) {
        if !text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        {
            return BytesView {
                text: pretty_json(text).0,
                binary: None,
            };
        }
    }
    use base64::Engine;
    let hex: Vec<String> = bytes
        .chunks(16)
        .map(|line| {
            line.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let what = if std::str::from_utf8(bytes).is_ok() {
        "text with control characters"
    } else {
        "not UTF-8 text"
    };
    BytesView {
        text: hex.join("\n"),
        binary: Some((
            format!(
                "Binary: {} byte{}, {what}; shown as hex (base64 below).",
                count(bytes.len() as i64),
                if bytes.len() == 1 { "" } else { "s" }
            ),
            base64::engine::general_purpose::STANDARD.encode(bytes),
        )),
    }
}

/// The first `n` characters of an orca key, for narrow tables.
pub fn short(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(duration(245_000), "4m 05s");
        assert_eq!(duration(7_380_000), "2h 03m");
        assert_eq!(duration(273_600_000), "3d 04h");
        assert_eq!(duration(-1500), "-1.5 s");
        assert_eq!(duration(i64::MIN), "-106751991167d 07h");
    }

    #[test]
    fn timestamps_and_counts() {
        assert_eq!(timestamp(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(timestamp(i64::MAX), i64::MAX.to_string());
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(count(-12), "-12");
        assert_eq!(count(999), "999");
        assert_eq!(relative(10_000, 5_000), "5.0 s ago");
        assert_eq!(relative(5_000, 10_000), "in 5.0 s");
    }

    #[test]
    fn json_and_short() {
        assert_eq!(
            pretty_json("{\"a\":1}"),
            ("{\n  \"a\": 1\n}".to_string(), true)
        );
        assert_eq!(pretty_json("nope"), ("nope".to_string(), false));
        assert_eq!(
            pretty_json("{\"a\":1} x"),
            ("{\"a\":1} x".to_string(), false)
        );
        // numbers, key order and escapes exactly as stored
        let stored =
            r#"{"z":12345678901234567890123,"a":[1.50,-0e0, {}, [ ]],"s":"a\"b\\\u00e9,:{"}"#;
        assert_eq!(
            pretty_json(stored).0,
            "{\n  \"z\": 12345678901234567890123,\n  \"a\": [\n    1.50,\n    -0e0,\n    {},\n    []\n  ],\n  \"s\": \"a\\\"b\\\\\\u00e9,:{\"\n}"
        );
        // as serde_json would print it, where it keeps everything
        let plain = r#"{"a":{"b":[1,2,{"c":null}],"d":true},"e":"x"}"#;
        let v: serde_json::Value = serde_json::from_str(plain).unwrap();
        assert_eq!(
            pretty_json(plain).0,
            serde_json::to_string_pretty(&v).unwrap()
        );
        assert_eq!(pretty_json(" 42 ").0, "42");
        assert_eq!(short("abcdef", 3), "abc…");
        let v = bytes_view(b"\xff\xfe\x00");
        assert_eq!(v.text, "ff fe 00");
        let (note, b64) = v.binary.unwrap();
        assert!(note.contains("3 bytes, not UTF-8"), "{note}");
        assert_eq!(b64, "//4A");
        let v = bytes_view(b"ok\x00");
        assert_eq!(v.text, "6f 6b 00");
        assert!(v.binary.unwrap().0.contains("control characters"));
        let v = bytes_view("{\"score\":97}\n".as_bytes());
        assert_eq!(
            (v.text.as_str(), v.binary.is_none()),
            ("{\n  \"score\": 97\n}", true)
        );
        let v = bytes_view("é\tline\r\n".as_bytes());
        assert_eq!(v.text, "é\tline\r\n");
        assert_eq!(bytes_view(&[7; 17]).text.lines().count(), 2);
        assert_eq!(short("ab", 3), "ab");
    }
}

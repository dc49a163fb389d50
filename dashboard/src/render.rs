//! What a page shows of stored bytes (job payloads, kept results, dropped
//! configs), within bounds whatever they hold. A job config may be up to
//! `orca.max-payload-bytes` (4 MiB by default) of anything JSON allows:
//! re-indenting 16,000 arrays nested 120 deep once made a 476 MB page. So:
//!
//! - JSON is re-indented only when it is at most `PRETTY_MAX_BYTES` long,
//!   nests at most `PRETTY_MAX_DEPTH` deep and re-indents to at most
//!   `PRETTY_MAX_OUT`; only whitespace changes (numbers, escapes and key
//!   order stay exactly as stored);
//! - otherwise it is shown as stored, and anything is cut at
//!   `SHOWN_MAX_BYTES`, with a note saying so;
//! - a binary result (not UTF-8, or with control characters) is shown as
//!   the hex of its first `HEX_MAX_BYTES` bytes, with its base64 when it is
//!   at most `BASE64_MAX_BYTES`;
//! - the whole, exactly as stored, is always a download away (`/job/payload`,
//!   `/job/result`, the dropped configs' JSON).
//!
//! A page's share of one stored value is so at most a few hundred KiB of
//! text (HTML escaping may make it up to 5 times that), however large or
//! deep the value. docs/security.md lists these bounds.

/// JSON longer than this is shown as stored (re-indenting is skipped).
pub const PRETTY_MAX_BYTES: usize = 128 * 1024;
/// JSON nested deeper than this is shown as stored.
pub const PRETTY_MAX_DEPTH: usize = 32;
/// Re-indented text longer than this is shown as stored instead.
pub const PRETTY_MAX_OUT: usize = 256 * 1024;
/// The most of one value a page shows (the rest: download it).
pub const SHOWN_MAX_BYTES: usize = 256 * 1024;
/// The bytes of a binary result shown as hex.
pub const HEX_MAX_BYTES: usize = 4096;
/// A binary result's base64 is shown up to this size.
pub const BASE64_MAX_BYTES: usize = 48 * 1024;

/// A stored text as a page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextView {
    pub text: String,
    /// Whether the text is JSON (re-indented or not); `None` when it was
    /// too long to check.
    pub json: Option<bool>,
    /// Why it is not re-indented, or cut: for a note above it.
    pub note: Option<String>,
}

/// The first `max` bytes of `s`, cut at a character boundary.
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn kib(n: usize) -> String {
    format!("{} KiB", n / 1024)
}

fn size(n: usize) -> String {
    if n < 1024 * 1024 {
        format!("{} bytes", crate::format::count(n as i64))
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

/// A payload or config: re-indented JSON within the bounds, else as stored
/// (cut at `SHOWN_MAX_BYTES`).
pub fn text_view(s: &str) -> TextView {
    text_view_within(s, SHOWN_MAX_BYTES)
}

/// `text_view`, showing at most `shown_max` bytes of it (a page listing
/// many values shows less of each).
pub fn text_view_within(s: &str, shown_max: usize) -> TextView {
    let (json, why) = if s.len() > PRETTY_MAX_BYTES {
        (
            None,
            Some(format!(
                "{} of text: shown as stored, not re-indented (only up to {} is)",
                size(s.len()),
                kib(PRETTY_MAX_BYTES)
            )),
        )
    } else {
        match serde_json::from_str::<serde::de::IgnoredAny>(s) {
            Err(e) if e.to_string().contains("recursion limit") => (
                Some(true),
                Some(format!(
                    "JSON nested more than {PRETTY_MAX_DEPTH} levels deep: shown as stored"
                )),
            ),
            Err(_) => (Some(false), None),
            Ok(_) => match pretty(s, PRETTY_MAX_DEPTH, PRETTY_MAX_OUT) {
                Ok(text) if text.len() <= shown_max => {
                    return TextView {
                        text,
                        json: Some(true),
                        note: None,
                    }
                }
                Err(Unpretty::Deep) => (
                    Some(true),
                    Some(format!(
                        "JSON nested more than {PRETTY_MAX_DEPTH} levels deep: shown as stored"
                    )),
                ),
                Ok(_) | Err(Unpretty::Long) => (
                    Some(true),
                    Some(format!(
                        "JSON that would re-indent to more than {}: shown as stored",
                        kib(PRETTY_MAX_OUT)
                    )),
                ),
            },
        }
    };
    let shown = cut(s, shown_max);
    let note = if shown.len() < s.len() {
        let first = format!(
            "Showing the first {} of {}: download it for the whole.",
            kib(shown_max),
            size(s.len())
        );
        Some(match why {
            Some(w) => format!("{w}. {first}"),
            None => first,
        })
    } else {
        why.map(|w| format!("{w}."))
    };
    TextView {
        text: shown.to_string(),
        json,
        note,
    }
}

/// Why `pretty` gave up.
#[derive(Debug, PartialEq, Eq)]
enum Unpretty {
    Deep,
    Long,
}

/// `s` (valid JSON) re-indented by two spaces a level. Only whitespace
/// changes: numbers, strings (escapes included) and the order of keys stay
/// exactly as stored (a re-serialization would round big numbers and sort
/// keys). Gives up past `max_depth` levels or `max_out` bytes of output.
fn pretty(s: &str, max_depth: usize, max_out: usize) -> Result<String, Unpretty> {
    let mut out = String::with_capacity((s.len() * 2).min(max_out));
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
        if out.len() > max_out {
            return Err(Unpretty::Long);
        }
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
                    if depth > max_depth {
                        return Err(Unpretty::Deep);
                    }
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
    if out.len() > max_out {
        return Err(Unpretty::Long);
    }
    Ok(out)
}

/// How a kept result is shown: text (`text_view`) when it is UTF-8 without
/// control characters (but newlines and tabs); else the hex of its first
/// `HEX_MAX_BYTES` bytes and, up to `BASE64_MAX_BYTES`, its base64, with a
/// note saying what it is, so no raw byte (a NUL, an escape) reaches the
/// page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BytesView {
    pub text: String,
    /// What is shown, when it is not the whole text as it is.
    pub note: Option<String>,
    pub binary: bool,
    pub base64: Option<String>,
}

pub fn bytes_view(bytes: &[u8]) -> BytesView {
    if let Ok(text) = std::str::from_utf8(bytes) {
        if !text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        {
            let v = text_view(text);
            return BytesView {
                text: v.text,
                note: v.note,
                binary: false,
                base64: None,
            };
        }
    }
    use base64::Engine;
    let shown = &bytes[..bytes.len().min(HEX_MAX_BYTES)];
    let hex: Vec<String> = shown
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
    let n = bytes.len();
    let base64 =
        (n <= BASE64_MAX_BYTES).then(|| base64::engine::general_purpose::STANDARD.encode(bytes));
    let shown_how = match (shown.len() < n, base64.is_some()) {
        (false, true) => "shown as hex (base64 below)".to_string(),
        (false, false) => "shown as hex".to_string(),
        (true, _) => format!(
            "the first {} shown as hex; download it for the whole",
            size(shown.len())
        ),
    };
    BytesView {
        text: hex.join("\n"),
        note: Some(format!(
            "Binary: {} byte{}, {what}; {shown_how}.",
            crate::format::count(n as i64),
            if n == 1 { "" } else { "s" }
        )),
        binary: true,
        base64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pretty_json(s: &str) -> String {
        text_view(s).text
    }

    #[test]
    fn json_is_reindented_as_stored() {
        assert_eq!(pretty_json("{\"a\":1}"), "{\n  \"a\": 1\n}");
        let v = text_view("nope");
        assert_eq!(
            (v.text.as_str(), v.json, v.note),
            ("nope", Some(false), None)
        );
        assert_eq!(text_view("{\"a\":1} x").json, Some(false));
        // numbers, key order and escapes exactly as stored
        let stored =
            r#"{"z":12345678901234567890123,"a":[1.50,-0e0, {}, [ ]],"s":"a\"b\\\u00e9,:{"}"#;
        assert_eq!(
            pretty_json(stored),
            "{\n  \"z\": 12345678901234567890123,\n  \"a\": [\n    1.50,\n    -0e0,\n    {},\n    []\n  ],\n  \"s\": \"a\\\"b\\\\\\u00e9,:{\"\n}"
        );
        // as serde_json would print it, where it keeps everything
        let plain = r#"{"a":{"b":[1,2,{"c":null}],"d":true},"e":"x"}"#;
        let v: serde_json::Value = serde_json::from_str(plain).unwrap();
        assert_eq!(
            pretty_json(plain),
            serde_json::to_string_pretty(&v).unwrap()
        );
        assert_eq!(pretty_json(" 42 "), "42");
    }

    /// The issue's hostile configs: deep, wide, long; each shown within
    /// `SHOWN_MAX_BYTES`, with a note.
    #[test]
    fn hostile_json_is_shown_within_bounds() {
        let deep = format!(
            "{{\"key\":\"d\",\"x\":[{}]}}",
            vec![format!("{}{}", "[".repeat(120), "]".repeat(120)); 16_000].join(",")
        );
        assert!(deep.len() > 3_800_000);
        let v = text_view(&deep);
        assert_eq!(v.text.len(), SHOWN_MAX_BYTES);
        assert!(
            v.note.as_deref().unwrap().contains("not re-indented"),
            "{v:?}"
        );
        assert!(v.note.unwrap().contains("download it"));
        // Just under the size bound, too deep to re-indent.
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        let v = text_view(&deep);
        assert_eq!((v.text.as_str(), v.json), (deep.as_str(), Some(true)));
        assert!(v.note.unwrap().contains("levels deep"));
        let deeper = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(text_view(&deeper).note.unwrap().contains("levels deep"));
        // At the depth bound it is re-indented.
        let ok = format!(
            "{}1{}",
            "[".repeat(PRETTY_MAX_DEPTH),
            "]".repeat(PRETTY_MAX_DEPTH)
        );
        assert!(text_view(&ok).note.is_none());
        // Wide: re-indenting would pass PRETTY_MAX_OUT.
        let wide = format!("[{}]", vec!["[[[[[[[[[[1]]]]]]]]]]"; 5000].join(","));
        assert!(wide.len() < PRETTY_MAX_BYTES);
        let v = text_view(&wide);
        assert_eq!(v.text, wide);
        assert!(v.note.unwrap().contains("re-indent to more than"));
        // Long strings are cut at a character boundary.
        let long = format!("\"{}\"", "é".repeat(300_000));
        let v = text_view(&long);
        assert!(v.text.len() <= SHOWN_MAX_BYTES && v.text.len() > SHOWN_MAX_BYTES - 4);
        assert!(long.starts_with(&v.text));
    }

    #[test]
    fn results_binary_and_text() {
        let v = bytes_view(b"\xff\xfe\x00");
        assert_eq!(v.text, "ff fe 00");
        assert!(v.binary);
        assert!(
            v.note.as_deref().unwrap().contains("3 bytes, not UTF-8"),
            "{v:?}"
        );
        assert_eq!(v.base64.as_deref(), Some("//4A"));
        let v = bytes_view(b"ok\x00");
        assert_eq!(v.text, "6f 6b 00");
        assert!(v.note.unwrap().contains("control characters"));
        let v = bytes_view("{\"score\":97}\n".as_bytes());
        assert_eq!(
            (v.text.as_str(), v.binary, v.note),
            ("{\n  \"score\": 97\n}", false, None)
        );
        let v = bytes_view("é\tline\r\n".as_bytes());
        assert_eq!(v.text, "é\tline\r\n");
        assert_eq!(bytes_view(&[7; 17]).text.lines().count(), 2);
        // A large binary result: the first bytes as hex, no base64.
        let big = vec![0xffu8; 4 << 20];
        let v = bytes_view(&big);
        assert_eq!(v.text.lines().count(), HEX_MAX_BYTES / 16);
        assert_eq!(v.base64, None);
        assert!(v.note.unwrap().contains("4,194,304 bytes"));
        // A large text result is cut like a payload.
        let v = bytes_view("x".repeat(1 << 20).as_bytes());
        assert_eq!(v.text.len(), SHOWN_MAX_BYTES);
        assert!(v.note.unwrap().contains("download"));
    }

    #[test]
    fn cut_keeps_characters_whole() {
        assert_eq!(cut("abc", 2), "ab");
        assert_eq!(cut("éa", 1), "");
        assert_eq!(cut("éa", 2), "é");
        assert_eq!(cut("ab", 5), "ab");
    }
}

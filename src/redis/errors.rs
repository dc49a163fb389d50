//! Error replies. Each starts with a code (`ErrorCode`, the table in
//! docs/commands.md): `ERR` for a malformed command, a code of its own for
//! every queue condition, then the code's fixed fields, then the text.
//! Clients switch on the code and read the fields, never the text.

use redis_module::{Context, RedisError};

use super::ffi;
use crate::core::error::ErrorCode;
use crate::core::QueueError;

/// Longest text (in characters) after the code and its fields.
const MAX_TEXT: usize = 400;

/// Codes of Redis's own errors that may pass through a command unchanged.
const REDIS_CODES: [&str; 3] = ["NOPERM", "OOM", "READONLY"];

/// An argument error: `ERR <msg>`.
pub fn err(msg: impl Into<String>) -> RedisError {
    coded(ErrorCode::Err, &[], msg)
}

/// An error reply with `code` and its fields (`ErrorCode::fields`, each
/// already one token) before the text.
pub fn coded(code: ErrorCode, fields: &[String], text: impl Into<String>) -> RedisError {
    RedisError::String(code.line(fields, &text.into()))
}

/// A write that creates its queue found none: a fault, never a condition.
pub fn queue_missing() -> RedisError {
    coded(ErrorCode::Internal, &[], "queue missing")
}

/// The error reply of a core error: its code, fields and text.
pub fn core_err(e: QueueError) -> RedisError {
    RedisError::String(e.line())
}

/// Errors as clients expect them: `WRONGTYPE ...` for another type, and
/// every other text cleaned (see `clean_error`).
pub fn clean_err(e: RedisError) -> RedisError {
    const WRONG_TYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    match e {
        RedisError::WrongType => RedisError::Str(WRONG_TYPE),
        // The wrapper crate reports another key type with this text.
        RedisError::Str(s)
            if s.contains("wrong Redis type") || s.contains("wrong kind of value") =>
        {
            RedisError::Str(WRONG_TYPE)
        }
        RedisError::Str(s) => RedisError::String(clean_error(s)),
        RedisError::String(s) => RedisError::String(clean_error(&s)),
        e => e,
    }
}

/// One line a client can read: a known code and its fields kept whole, or
/// `ERR` put first; the text after them bounded (`MAX_TEXT`) and without
/// control characters (no CR, LF or NUL: the reply is a C string on one
/// RESP line). Text may quote client input (a JSON parser's message, a
/// gate's name); other characters stay: `send_err` sends UTF-8 as it is.
fn clean_error(s: &str) -> String {
    let first = s.split(' ').next().unwrap_or_default();
    let words = match ErrorCode::from_name(first) {
        Some(code) => 1 + code.fields().len(),
        None if REDIS_CODES.contains(&first) => 1,
        None => 0,
    };
    let mut parts = s.splitn(words + 1, ' ');
    let mut out = String::with_capacity(s.len().min(MAX_TEXT) + 16);
    if words == 0 {
        out.push_str("ERR");
    }
    for w in parts.by_ref().take(words) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(w.chars().map(printable));
    }
    out.push(' ');
    out.extend(
        parts
            .next()
            .unwrap_or_default()
            .chars()
            .map(printable)
            .take(MAX_TEXT),
    );
    out
}

fn printable(c: char) -> char {
    if c.is_control() {
        '?'
    } else {
        c
    }
}

/// Write an error reply to the client of `ctx` (cleaned: `clean_err`).
/// Texts go through `ffi::reply::error`, not the wrapper crate, which sends
/// each char as one byte (`c as u8`): a non-ASCII name quoted in an error
/// would arrive as invalid UTF-8, and U+0100 as a NUL that aborts it.
pub fn send_err(ctx: &Context, e: RedisError) {
    match clean_err(e) {
        RedisError::String(s) => send_error_text(ctx, &s),
        RedisError::Str(s) => send_error_text(ctx, s),
        e => {
            ctx.reply(Err(e));
        }
    }
}

fn send_error_text(ctx: &Context, s: &str) {
    match std::ffi::CString::new(s) {
        Ok(c) => ffi::reply::error(ctx, &c),
        // `clean_error` leaves no NUL; a fixed text if one came anyway.
        Err(_) => ffi::reply::error(ctx, c"INTERNAL error text not representable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes_and_fields_are_kept_whole() {
        let gate = "g".repeat(3 * MAX_TEXT);
        let e = QueueError::Held(gate.clone());
        let line = clean_error(&e.line());
        assert!(
            line.starts_with(&format!("HELD {gate} job is held")),
            "{line}"
        );
        assert_eq!(
            line.chars().count(),
            "HELD ".len() + gate.len() + 1 + MAX_TEXT
        );
        assert_eq!(
            clean_error("DELAYED 17 job is waiting to be retried (at 17)\r\n"),
            "DELAYED 17 job is waiting to be retried (at 17)??"
        );
        assert_eq!(
            clean_error("NOLEASE lease not held"),
            "NOLEASE lease not held"
        );
        assert_eq!(clean_error("NOPERM no"), "NOPERM no");
    }

    #[test]
    fn anything_else_is_an_err_line() {
        assert_eq!(clean_error("LIMIT must be\n0"), "ERR LIMIT must be?0");
        assert_eq!(clean_error("ERR x\0y"), "ERR x?y");
        assert_eq!(clean_error("nolease x"), "ERR nolease x");
        assert_eq!(clean_error(""), "ERR ");
        let long = "é".repeat(2 * MAX_TEXT);
        assert_eq!(clean_error(&long).chars().count(), 4 + MAX_TEXT);
        // A code whose fields are missing still gives one line.
        assert_eq!(clean_error("TOOMANY"), "TOOMANY ");
    }

    #[test]
    fn argument_errors_say_err_and_conditions_their_code() {
        let RedisError::String(s) = err("option NOW needs a value") else {
            unreachable!()
        };
        assert_eq!(s, "ERR option NOW needs a value");
        let RedisError::String(s) = coded(ErrorCode::TooMany, &["30".into()], "LIMIT ...") else {
            unreachable!()
        };
        assert_eq!(s, "TOOMANY 30 LIMIT ...");
        let RedisError::String(s) = core_err(QueueError::LeaseNotHeld) else {
            unreachable!()
        };
        assert!(s.starts_with("NOLEASE lease not held"), "{s}");
    }
}

//! Argument parsing shared by the commands: strict integers, keywords and
//! trailing options. Every failure is an `ERR ...` reply, never a panic.

use redis_module::{RedisError, RedisString};

use crate::core::MAX_TIME;

pub fn err(msg: impl Into<String>) -> RedisError {
    let msg = msg.into();
    RedisError::String(format!("ERR {msg}"))
}

/// A strict base-10 integer (optional leading '-', no spaces, no '+').
pub fn parse_int(arg: &RedisString, what: &str) -> Result<i64, RedisError> {
    let b = arg.as_slice();
    let ok = !b.is_empty()
        && b.len() <= 20
        && b.iter()
            .enumerate()
            .all(|(i, c)| c.is_ascii_digit() || (i == 0 && *c == b'-' && b.len() > 1));
    let parsed = if ok {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
    } else {
        None
    };
    parsed.ok_or_else(|| err(format!("{what} must be an integer")))
}

/// A time or duration in ms: integer in 0..=2^53-1.
pub fn parse_ms(arg: &RedisString, what: &str) -> Result<i64, RedisError> {
    let v = parse_int(arg, what)?;
    if !(0..=MAX_TIME).contains(&v) {
        return Err(err(format!("{what} must be between 0 and {MAX_TIME}")));
    }
    Ok(v)
}

pub fn is_kw(arg: &RedisString, kw: &str) -> bool {
    arg.as_slice().eq_ignore_ascii_case(kw.as_bytes())
}

/// Trailing `NAME value` options. Each allowed option may appear once.
pub struct Options<'a> {
    pub values: Vec<(&'static str, &'a RedisString)>,
}

impl<'a> Options<'a> {
    pub fn parse(args: &'a [RedisString], allowed: &[&'static str]) -> Result<Self, RedisError> {
        let mut values: Vec<(&'static str, &'a RedisString)> = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let name = allowed.iter().find(|n| is_kw(&args[i], n)).ok_or_else(|| {
                err(format!(
                    "unknown option '{}' (allowed: {})",
                    printable(&args[i]),
                    allowed.join(", ")
                ))
            })?;
            if values.iter().any(|(n, _)| n == name) {
                return Err(err(format!("option {name} given twice")));
            }
            let v = args
                .get(i + 1)
                .ok_or_else(|| err(format!("option {name} needs a value")))?;
            values.push((name, v));
            i += 2;
        }
        Ok(Options { values })
    }

    pub fn get(&self, name: &str) -> Option<&'a RedisString> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    pub fn ms(&self, name: &str) -> Result<Option<i64>, RedisError> {
        self.get(name).map(|v| parse_ms(v, name)).transpose()
    }
}

/// `LIMIT n` of a listing: 0..=`orca.max-pop-count`, default 100 (or the
/// maximum if lower).
pub fn page_limit(opts: &Options) -> Result<usize, RedisError> {
    let max = super::settings::max_pop_count();
    match opts.get("LIMIT") {
        None => Ok(100.min(max) as usize),
        Some(v) => {
            let n = parse_int(v, "LIMIT")?;
            if !(0..=max).contains(&n) {
                return Err(err(format!("LIMIT must be between 0 and {max}")));
            }
            Ok(n as usize)
        }
    }
}

/// A short, printable rendering of client bytes for error messages.
pub fn printable(arg: &RedisString) -> String {
    let s: String = String::from_utf8_lossy(arg.as_slice())
        .chars()
        .take(32)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    s
}

//! Argument parsing shared by the commands: strict integers, keywords,
//! trailing options, and which pinned values (`NOW`, `MAXATTEMPTS`) a
//! command may carry. Every failure is an `ERR ...` reply, never a panic.

use redis_module::{Context, RedisError, RedisString};

use crate::core::error::ErrorCode;
use crate::core::MAX_TIME;

pub use super::errors::err;

/// A strict base-10 integer (optional leading '-', no spaces, no '+').
pub fn parse_int(arg: &RedisString, what: &str) -> Result<i64, RedisError> {
    int_of(arg.as_slice()).ok_or_else(|| err(format!("{what} must be an integer")))
}

/// The value of a strict base-10 integer of at most 20 bytes that fits an
/// i64 (what `str::parse::<i64>` accepts, less a leading '+').
fn int_of(b: &[u8]) -> Option<i64> {
    if b.len() > 20 {
        return None;
    }
    let (neg, digits) = match b {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        v = v.checked_mul(10)?;
        v = if neg {
            v.checked_sub(d)?
        } else {
            v.checked_add(d)?
        };
    }
    Some(v)
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

/// Most options a command takes.
pub const MAX_OPTIONS: usize = 8;

/// Trailing `NAME value` options. Each allowed option may appear once.
pub struct Options<'a> {
    allowed: &'static [&'static str],
    /// The value of each allowed option, in the order of `allowed`.
    values: [Option<&'a RedisString>; MAX_OPTIONS],
}

impl<'a> Options<'a> {
    pub fn parse(
        args: &'a [RedisString],
        allowed: &'static [&'static str],
    ) -> Result<Self, RedisError> {
        Self::parse_also(args, allowed, &[])
    }

    /// `parse`, where the command also takes the options `also`, split off
    /// before (an unknown option's error lists them too).
    pub fn parse_also(
        args: &'a [RedisString],
        allowed: &'static [&'static str],
        also: &[&str],
    ) -> Result<Self, RedisError> {
        let mut values = [None; MAX_OPTIONS];
        let mut i = 0;
        while i < args.len() {
            let found = allowed.iter().enumerate().find(|(_, n)| is_kw(&args[i], n));
            let Some((slot, name)) = found.and_then(|(k, n)| Some((values.get_mut(k)?, n))) else {
                let names: Vec<&str> = allowed.iter().chain(also).copied().collect();
                return Err(err(format!(
                    "unknown option '{}' (allowed: {})",
                    printable(&args[i]),
                    names.join(", ")
                )));
            };
            if slot.is_some() {
                return Err(err(format!("option {name} given twice")));
            }
            let v = args
                .get(i + 1)
                .ok_or_else(|| err(format!("option {name} needs a value")))?;
            *slot = Some(v);
            i += 2;
        }
        Ok(Options { allowed, values })
    }

    /// Options found by another walk of the arguments (`finish.rs`):
    /// `values[i]` is the value of `allowed[i]`.
    pub fn with_values(
        allowed: &'static [&'static str],
        values: [Option<&'a RedisString>; MAX_OPTIONS],
    ) -> Self {
        Options { allowed, values }
    }

    pub fn get(&self, name: &str) -> Option<&'a RedisString> {
        let k = self.allowed.iter().position(|n| *n == name)?;
        self.values.get(k).copied().flatten()
    }

    pub fn ms(&self, name: &str) -> Result<Option<i64>, RedisError> {
        self.get(name).map(|v| parse_ms(v, name)).transpose()
    }
}

/// `FORMAT MAP|VALUES` of the commands that hand out jobs (default MAP).
pub fn format(opts: &Options) -> Result<super::reply::Format, RedisError> {
    use super::reply::Format;
    match opts.get("FORMAT") {
        None => Ok(Format::Map),
        Some(v) if is_kw(v, "MAP") => Ok(Format::Map),
        Some(v) if is_kw(v, "VALUES") => Ok(Format::Values),
        Some(_) => Err(err("FORMAT must be MAP or VALUES")),
    }
}

/// `LIMIT n` of a listing: 0..=`orca.max-pop-count`, default 100 (or the
/// maximum if lower).
pub fn page_limit(opts: &Options) -> Result<usize, RedisError> {
    let max = super::module_config::max_pop_count();
    match opts.get("LIMIT") {
        None => Ok(100.min(max) as usize),
        Some(v) => {
            let n = parse_int(v, "LIMIT")?;
            if !(0..=max).contains(&n) {
                return Err(over_max(
                    n > max,
                    max,
                    format!("LIMIT must be between 0 and {max}"),
                ));
            }
            Ok(n as usize)
        }
    }
}

/// A COUNT or LIMIT refused: `TOOMANY <max>` when it is over the server's
/// maximum (`orca.max-pop-count`, which a client cannot know), else `ERR`.
pub fn over_max(over: bool, max: i64, text: String) -> RedisError {
    if over {
        super::errors::coded(ErrorCode::TooMany, &[max.to_string()], text)
    } else {
        err(text)
    }
}

/// Did this command come from the master or the AOF (not from a client)?
/// Such commands carry their pinned values (`NOW`, `MAXATTEMPTS`, ...) and
/// must be applied as the master applied them, whatever this server's limits.
pub fn from_master_or_aof(ctx: &Context) -> bool {
    ctx.get_flags()
        .intersects(redis_module::ContextFlags::REPLICATED | redis_module::ContextFlags::LOADING)
}

/// `NOW`/`MAXATTEMPTS` on a worker command: honoured from the master and
/// the AOF, from clients only with `orca.trust-client-clock yes` (a client
/// that moves the clock forward could expire other workers' leases).
pub fn check_pins(ctx: &Context, opts: &Options) -> Result<(), RedisError> {
    let pinned = opts.get("NOW").is_some() || opts.get("MAXATTEMPTS").is_some();
    if pinned && !from_master_or_aof(ctx) && !super::module_config::trust_client_clock() {
        return Err(err(
            "NOW and MAXATTEMPTS on worker commands are for replication (CONFIG SET orca.trust-client-clock yes allows them from clients)",
        ));
    }
    Ok(())
}

/// `MAXATTEMPTS n` (0..=2^32-1), or the module setting.
pub fn max_attempts(opts: &Options) -> Result<i64, RedisError> {
    match opts.get("MAXATTEMPTS") {
        None => Ok(super::module_config::max_attempts()),
        Some(v) => {
            let n = parse_int(v, "MAXATTEMPTS")?;
            if !(0..=u32::MAX as i64).contains(&n) {
                return Err(err("MAXATTEMPTS must be between 0 and 4294967295"));
            }
            Ok(n)
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

#[cfg(test)]
mod tests {
    use super::int_of;

    /// The rule as first written: digits with an optional leading '-',
    /// at most 20 bytes, then `str::parse`.
    fn reference(b: &[u8]) -> Option<i64> {
        let ok = !b.is_empty()
            && b.len() <= 20
            && b.iter()
                .enumerate()
                .all(|(i, c)| c.is_ascii_digit() || (i == 0 && *c == b'-' && b.len() > 1));
        if !ok {
            return None;
        }
        std::str::from_utf8(b).ok()?.parse().ok()
    }

    #[test]
    fn int_of_matches_the_reference() {
        let fixed: &[&[u8]] = &[
            b"",
            b"-",
            b"+1",
            b"0",
            b"-0",
            b"007",
            b"-007",
            b"1-",
            b"--1",
            b" 1",
            b"1 ",
            b"9223372036854775807",
            b"9223372036854775808",
            b"-9223372036854775808",
            b"-9223372036854775809",
            b"00000000000000000001",
            b"000000000000000000001",
            b"-0000000000000000001",
            b"18446744073709551616",
            b"1e3",
            b"\xff1",
        ];
        for b in fixed {
            assert_eq!(int_of(b), reference(b), "{:?}", String::from_utf8_lossy(b));
        }
        // Short strings over a small alphabet, exhaustively up to 4 bytes.
        let alpha = b"-+09 a";
        let mut cur = vec![];
        fn walk(cur: &mut Vec<u8>, alpha: &[u8], depth: usize) {
            assert_eq!(int_of(cur), reference(cur), "{cur:?}");
            if depth == 0 {
                return;
            }
            for &c in alpha {
                cur.push(c);
                walk(cur, alpha, depth - 1);
                cur.pop();
            }
        }
        walk(&mut cur, alpha, 4);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = match x % 4 {
                0 => (x as i64).to_string(),
                1 => (x >> (x % 64)).to_string(),
                2 => format!("-{}", x % 1_000_000),
                _ => format!("{:0>width$}", x % 1000, width = (x % 24) as usize),
            };
            assert_eq!(int_of(s.as_bytes()), reference(s.as_bytes()), "{s}");
        }
    }
}

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

/// An integer exactly as Redis's `string2ll` (util.c, Redis 7.0 and Valkey
/// 8) reads it: optional '-', then digits with no leading zero (`0` alone
/// is zero), nothing else, within i64. So `02`, `+2`, ` 2`, `-0` and
/// `1e3` are not integers here, though `parse_int` takes `02` and `-0`.
/// That is exactly the decimal text `i64::to_string` writes.
pub fn redis_int(b: &[u8]) -> Option<i64> {
    // LONG_STR_SIZE is 21: longer strings are refused before parsing.
    if b.is_empty() || b.len() >= 21 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, b),
    };
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v = u64::from(first - b'0');
    for &c in rest {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    if neg {
        // Down to i64::MIN, whose magnitude is i64::MAX + 1.
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i128).wrapping_neg() as i64)
    } else {
        i64::try_from(v).ok()
    }
}

/// A count that shapes the command's arguments (`numkeys`, `numleases`):
/// read as Redis reads a key count (`redis_int`), in `1..=max`. A count
/// that locates keys must be read this way, or the module would touch
/// keys that ACL and Cluster never checked (`keyspec.rs`); the others are
/// read the same way so that every count of a command means one thing.
/// `of` names what is counted, for the error.
pub fn strict_count(arg: &[u8], name: &str, max: usize, of: &str) -> Result<usize, RedisError> {
    let Some(n) = redis_int(arg) else {
        return Err(if int_of(arg).is_some() {
            err(format!(
                "{name} must be a plain decimal integer without leading zeros (as Redis reads key counts)"
            ))
        } else {
            err(format!("{name} must be an integer"))
        });
    };
    match usize::try_from(n) {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(err(format!(
            "{name} must be between 1 and the number of {of} given"
        ))),
    }
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
    kw_eq(arg.as_slice(), kw)
}

/// `is_kw` on bytes: the whole argument equals `kw`, ASCII case folded.
pub fn kw_eq(arg: &[u8], kw: &str) -> bool {
    arg.eq_ignore_ascii_case(kw.as_bytes())
}

/// An argument's bytes: client strings in the module, byte strings in the
/// unit tests of the walks that locate keys (`keyspec.rs`, `finish.rs`),
/// which run without a server.
pub trait ArgBytes {
    fn arg_bytes(&self) -> &[u8];
}

impl ArgBytes for RedisString {
    fn arg_bytes(&self) -> &[u8] {
        self.as_slice()
    }
}

impl ArgBytes for &[u8] {
    fn arg_bytes(&self) -> &[u8] {
        self
    }
}

impl ArgBytes for Vec<u8> {
    fn arg_bytes(&self) -> &[u8] {
        self
    }
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

/// `WORKER <name>` of the commands that hand out jobs: the name each lease
/// keeps (`ORCA.STATUS`, `ORCA.LIST ... STATE LEASED`). Not empty, at most
/// `orca.max-worker-length` bytes (a replicated or AOF command was checked
/// where it first ran).
pub fn worker<'a>(
    ctx: &Context,
    opts: &Options<'a>,
) -> Result<Option<&'a RedisString>, RedisError> {
    let Some(w) = opts.get("WORKER") else {
        return Ok(None);
    };
    let max = super::module_config::max_worker_length();
    if w.is_empty() {
        return Err(err("WORKER name must not be empty"));
    }
    if w.len() > max && !from_master_or_aof(ctx) {
        return Err(err(format!(
            "WORKER name is {} bytes; the limit is {max} (orca.max-worker-length)",
            w.len()
        )));
    }
    Ok(Some(w))
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
    printable_bytes(arg.as_slice())
}

/// `printable` of any argument's bytes.
pub fn printable_bytes(arg: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(arg)
        .chars()
        .take(32)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    s
}

#[cfg(test)]
mod tests {
    use super::{int_of, redis_int, strict_count};

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

    /// `string2ll` accepts exactly the text `i64::to_string` writes: the
    /// spellings of the issue (leading zeros, signs, spaces, -0, overflow),
    /// every string of up to 4 bytes over a small alphabet, and random ones.
    #[test]
    fn redis_int_is_string2ll() {
        let canonical = |b: &[u8]| -> Option<i64> {
            let v: i64 = std::str::from_utf8(b).ok()?.parse().ok()?;
            (v.to_string().as_bytes() == b).then_some(v)
        };
        let fixed: &[(&[u8], Option<i64>)] = &[
            (b"2", Some(2)),
            (b"02", None),
            (b"002", None),
            (b"+2", None),
            (b" 2", None),
            (b"2 ", None),
            (b"-0", None),
            (b"0", Some(0)),
            (b"00", None),
            (b"-2", Some(-2)),
            (b"-02", None),
            (b"2.0", None),
            (b"0x2", None),
            (b"", None),
            (b"-", None),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"9223372036854775808", None),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"-9223372036854775809", None),
            (b"18446744073709551616", None),
            (b"99999999999999999999", None),
            (b"4294967298", Some(4294967298)),
            (b"2\x00", None),
        ];
        for (b, want) in fixed {
            assert_eq!(redis_int(b), *want, "{:?}", String::from_utf8_lossy(b));
            assert_eq!(
                redis_int(b),
                canonical(b),
                "{:?}",
                String::from_utf8_lossy(b)
            );
        }
        fn walk(cur: &mut Vec<u8>, depth: usize, check: &dyn Fn(&[u8])) {
            check(cur);
            if depth == 0 {
                return;
            }
            for &c in b"-+019 \x00" {
                cur.push(c);
                walk(cur, depth - 1, check);
                cur.pop();
            }
        }
        walk(&mut vec![], 4, &|b| {
            assert_eq!(redis_int(b), canonical(b), "{b:?}")
        });
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = match x % 4 {
                0 => (x as i64).to_string(),
                1 => format!("{:0>w$}", x % 1000, w = (x % 5) as usize),
                2 => format!("-{}", x >> (x % 64)),
                _ => (x >> (x % 64)).to_string(),
            };
            assert_eq!(redis_int(s.as_bytes()), canonical(s.as_bytes()), "{s}");
        }
    }

    #[test]
    fn strict_counts() {
        let msg = |b: &[u8]| match strict_count(b, "numkeys", 3, "queues") {
            Ok(n) => n.to_string(),
            Err(redis_module::RedisError::String(m)) => m,
            Err(e) => format!("{e:?}"),
        };
        assert_eq!(msg(b"3"), "3");
        assert_eq!(msg(b"1"), "1");
        for b in [&b"03"[..], b"001", b"-0", b"-01"] {
            assert_eq!(
                msg(b),
                "ERR numkeys must be a plain decimal integer without leading zeros (as Redis reads key counts)"
            );
        }
        for b in [&b"x"[..], b"1.0", b"", b"1e1", b"+1", b" 1", b"1 "] {
            assert_eq!(msg(b), "ERR numkeys must be an integer");
        }
        for b in [
            &b"0"[..],
            b"-1",
            b"4",
            b"4294967298",
            b"9223372036854775807",
        ] {
            assert_eq!(
                msg(b),
                "ERR numkeys must be between 1 and the number of queues given"
            );
        }
    }
}

//! The job config scanner: one pass over the bytes that validates the JSON
//! and extracts the fields the queue reads (`key`, `response_url`,
//! `collation`, `priority`, `gate`), skipping everything else without
//! building anything.
//!
//! It accepts exactly the inputs that a serde_json 1.0.154 parse accepts
//! (`serde_json::from_slice` into a derived borrowed struct, `IgnoredAny`
//! for unknown fields), and reads the same values from them,
//! because configs are replayed from AOF files and replicas: an input must
//! mean the same on every version. `tests/props/config_diff/` keeps that serde
//! parse as the oracle (`tests/fuzz/src/config_ref.rs`) and compares the two
//! on generated and mutated inputs; so does the `config` fuzz target. What
//! serde_json does, and so what this does:
//!
//! - RFC 8259 grammar: whitespace is space, tab, CR, LF only; no trailing
//!   commas, comments, leading zeros, `NaN`, bare words; after the object
//!   only whitespace.
//! - Those fields are parsed (serde_json's `parse_str`, `parse_integer`):
//!   their strings, and every key of the top-level and `collation` objects,
//!   must be valid UTF-8 with well-formed escapes, and `\u` surrogates must
//!   pair (a lone one is an error). Field names are compared unescaped
//!   (`"k\u0065y"` is `key`).
//! - Everything else is skipped (serde_json's `ignore_value`): strings and
//!   keys there are checked for control bytes and escape syntax only
//!   (`\uXXXX` needs four hex digits, any value), so raw invalid UTF-8 and
//!   lone surrogates pass; numbers are checked for grammar only (`1e999`
//!   passes). `ignore_value` is iterative: serde_json's recursion limit (128)
//!   never applies to skipped values and their nesting is unbounded, so this
//!   skips with an explicit bit stack, no recursion.
//! - Numbers that are parsed keep serde_json's three kinds: an integer that
//!   fits u64 is `U64`; a negative integer that fits i64 is `I64`; anything
//!   else (fraction, exponent, `-0`, beyond 64 bits) is `F64`.
//! - A repeated field the queue reads (`READ_FIELDS`: `key`, `response_url`,
//!   `collation`, `priority`, `gate`) is an error even if the first was
//!   `null` (serde derive); a repeat of any other field is skipped like it;
//!   inside `collation`, a repeated `type` or `id` is an error only if the
//!   earlier one was not `null` (the hand-written visitor checked
//!   `Option::is_some`).
//!
//! Strings come out as bytes (`Text`), unescaped and checked to be UTF-8:
//! the queue only hashes them or copies them into a `String`.
//!
//! Speed: strings are scanned for `"`, `\` and control bytes eight bytes at
//! a time (`find_special`), noting on the way whether any byte is >= 0x80,
//! so ASCII strings (nearly all) need no UTF-8 pass; skipped values are
//! walked by one loop (`skip`) with the container stack in a register.
//! Positions travel as local indexes and errors as a zero-sized marker (the
//! text is kept in the scanner), so the hot path returns in registers. On
//! `benches/job.json` (1001 bytes) `scan` runs ~7.5k instructions where
//! serde_json took ~18k (`examples/parse_config.rs` has the callgrind
//! recipe). No `unsafe`, no indexing without a check, no recursion.
//!
//! Files: this one holds the public types, `scan`, the top-level object and
//! the kept fields (`key`, `collation`, ...); `bytes.rs` the word-at-a-time
//! search and hex digits; `skip.rs` skipped values (serde_json's
//! `ignore_value`); `value.rs` parsed strings and numbers; `tests.rs`.

mod bytes;
mod skip;
#[cfg(test)]
mod tests;
mod value;

use std::borrow::Cow;
use std::fmt;

/// A string value: unescaped, valid UTF-8 (checked), borrowed from the
/// input unless it had escapes.
pub type Text<'a> = Cow<'a, [u8]>;

/// A number the way serde_json holds it (without `arbitrary_precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Num {
    /// An integer literal in `0..=u64::MAX`.
    U64(u64),
    /// A negative integer literal in `i64::MIN..=-1`.
    I64(i64),
    /// Anything serde_json parses as `f64`: a fraction or exponent, `-0`,
    /// an integer beyond 64 bits.
    F64,
}

/// `collation.id`: a string or an integer that fits i64 (as serde reads an
/// untagged `enum { Str(Cow<str>), Int(i64) }`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Id<'a> {
    Str(Text<'a>),
    Int(i64),
}

/// `collation`: `null` fields read as absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collation<'a> {
    pub kind: Option<Text<'a>>,
    pub id: Option<Id<'a>>,
}

/// The fields the queue reads; `null` reads as absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fields<'a> {
    pub key: Option<Text<'a>>,
    pub response_url: Option<Text<'a>>,
    pub collation: Option<Collation<'a>>,
    pub priority: Option<Num>,
    pub gate: Option<Text<'a>>,
}

/// Why a config was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScanError {
    /// The first non-whitespace byte is not `{`.
    NotObject,
    /// Invalid JSON, or a field of the wrong type; `at` is a byte offset.
    Syntax { what: &'static str, at: usize },
}

impl fmt::Display for ScanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanError::NotObject => f.write_str("config must be a JSON object"),
            ScanError::Syntax { what, at } => {
                write!(f, "invalid config JSON: {what} at byte {at}")
            }
        }
    }
}

impl std::error::Error for ScanError {}

/// Validate `bytes` as one JSON object and extract the config fields.
pub fn scan(bytes: &[u8]) -> Result<Fields<'_>, ScanError> {
    let mut s = Scanner {
        b: bytes,
        what: "",
        at: 0,
    };
    match s.top() {
        Ok(f) => Ok(f),
        Err(Bail) if s.what.is_empty() => Err(ScanError::NotObject),
        Err(Bail) => Err(ScanError::Syntax {
            what: s.what,
            at: s.at,
        }),
    }
}

/// An error was recorded in the scanner (`Scanner::fail`).
struct Bail;

type Step<T> = Result<T, Bail>;

/// The top-level fields the queue reads, declared once: their names, the
/// `Field` each is, and the error a repeat gets. A config that repeats any
/// of them is refused (even when the first was `null`, as serde's derive
/// did); every other field is skipped and kept as given, repeats included.
/// A field added here (plus its arm in `Scanner::top`, which the compiler
/// asks for) is read once and its duplicates are refused, with nothing
/// else to change; docs/commands.md ("The job config") lists these names
/// and a test in this file checks that it does.
macro_rules! read_fields {
    ($($field:ident = $name:literal),* $(,)?) => {
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        enum Field {
            $($field,)*
            Other,
        }

        /// The names of the fields the queue reads, in declaration order.
        pub const READ_FIELDS: &[&str] = &[$($name),*];

        impl Field {
            #[inline(always)]
            fn of(name: &[u8]) -> Field {
                $(if name == $name.as_bytes() {
                    return Field::$field;
                })*
                Field::Other
            }

            /// Its bit in the set of fields seen (`Other` has none).
            fn bit(self) -> u32 {
                match self {
                    Field::Other => 0,
                    f => 1 << (f as u32),
                }
            }

            fn duplicate(self) -> &'static str {
                match self {
                    $(Field::$field => concat!("duplicate field '", $name, "'"),)*
                    Field::Other => "duplicate field",
                }
            }
        }
    };
}

read_fields! {
    Key = "key",
    ResponseUrl = "response_url",
    Collation = "collation",
    Priority = "priority",
    Gate = "gate",
}

// One bit per read field in `seen`.
const _: () = assert!(READ_FIELDS.len() <= 32);

use bytes::{find_special, ws};

struct Scanner<'a> {
    b: &'a [u8],
    /// The error, once `fail` was called ("" for `NotObject`).
    what: &'static str,
    at: usize,
}

/// The byte at `i`, or 0 past the end (0 is never valid outside a string,
/// so the end falls into the error arms with it).
#[inline(always)]
fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// The next byte that is not whitespace, from `i`, and its index.
#[inline(always)]
fn next(b: &[u8], i: usize) -> (usize, u8) {
    let c = at(b, i);
    if c > b' ' {
        return (i, c);
    }
    let i = ws(b, i);
    (i, at(b, i))
}

impl<'a> Scanner<'a> {
    #[cold]
    #[inline(never)]
    fn fail(&mut self, what: &'static str, at: usize) -> Bail {
        self.what = what;
        self.at = at;
        Bail
    }

    /// A failure at `i` where `what` was expected: the end of the input
    /// says so.
    #[cold]
    #[inline(never)]
    fn expected(&mut self, what: &'static str, i: usize) -> Bail {
        if i >= self.b.len() {
            self.fail("unexpected end of input", i)
        } else {
            self.fail(what, i)
        }
    }

    fn span(&self, from: usize, to: usize) -> &'a [u8] {
        self.b.get(from..to).unwrap_or_default()
    }

    /// `word` (`true`, `false`, `null`) at `i`; the index after it.
    #[inline(always)]
    fn literal(&mut self, b: &'a [u8], i: usize, word: &'static [u8]) -> Step<usize> {
        let end = i.saturating_add(word.len());
        if b.get(i..end) != Some(word) {
            return Err(self.fail("invalid literal (expected true, false or null)", i));
        }
        Ok(end)
    }

    /// `:` after whitespace from `i`; the index after it.
    #[inline(always)]
    fn colon(&mut self, b: &'a [u8], i: usize) -> Step<usize> {
        let (i, c) = next(b, i);
        if c != b':' {
            return Err(self.expected("expected ':'", i));
        }
        Ok(i + 1)
    }

    // -- the top level -----------------------------------------------------

    fn top(&mut self) -> Step<Fields<'a>> {
        let b = self.b;
        let (i, c) = next(b, 0);
        if c != b'{' {
            return Err(Bail);
        }
        let mut out = Fields::default();
        // Bit per read field seen (serde derive: a repeat is an error, null
        // or not).
        let mut seen = 0u32;
        let (mut i, mut c) = next(b, i + 1);
        if c == b'}' {
            i += 1;
        } else {
            loop {
                if c != b'"' {
                    return Err(self.expected("expected a string key", i));
                }
                let (field, j) = self.field_name(b, i + 1)?;
                i = self.colon(b, j)?;
                if seen & field.bit() != 0 {
                    return Err(self.fail(field.duplicate(), i));
                }
                seen |= field.bit();
                i = match field {
                    Field::Other => self.skip_value(i)?,
                    Field::Key => {
                        let (v, j) = self.opt_str(b, i, "'key' must be a string")?;
                        out.key = v;
                        j
                    }
                    Field::ResponseUrl => {
                        let wrong = "'response_url' must be a string or null";
                        let (v, j) = self.opt_str(b, i, wrong)?;
                        out.response_url = v;
                        j
                    }
                    Field::Collation => {
                        let (v, j) = self.collation(b, i)?;
                        out.collation = v;
                        j
                    }
                    Field::Priority => {
                        let (v, j) = self.priority(b, i)?;
                        out.priority = v;
                        j
                    }
                    Field::Gate => {
                        let (v, j) = self.opt_str(b, i, "'gate' must be a string or null")?;
                        out.gate = v;
                        j
                    }
                };
                let (j, d) = next(b, i);
                if d == b',' {
                    (i, c) = next(b, j + 1);
                } else if d == b'}' {
                    i = j + 1;
                    break;
                } else {
                    return Err(self.expected("expected ',' or '}'", j));
                }
            }
        }
        let i = ws(b, i);
        if i < b.len() {
            return Err(self.fail("trailing characters after the object", i));
        }
        Ok(out)
    }

    /// A top-level field name from `i` (after its opening quote), parsed
    /// like any kept string; the index after it.
    #[inline(always)]
    fn field_name(&mut self, b: &'a [u8], i: usize) -> Step<(Field, usize)> {
        let f = find_special(b, i);
        if f.high == 0 && f.byte == b'"' {
            return Ok((Field::of(self.span(i, f.at)), f.at + 1));
        }
        let (name, j) = self.string(i)?;
        Ok((Field::of(&name), j))
    }

    /// `null` or a string, from `i`.
    fn opt_str(
        &mut self,
        b: &'a [u8],
        i: usize,
        wrong_type: &'static str,
    ) -> Step<(Option<Text<'a>>, usize)> {
        let (i, c) = next(b, i);
        match c {
            b'"' => {
                let (t, j) = self.string(i + 1)?;
                Ok((Some(t), j))
            }
            b'n' => Ok((None, self.literal(b, i, b"null")?)),
            _ => Err(self.expected(wrong_type, i)),
        }
    }

    /// `null` or a number, from `i`.
    fn priority(&mut self, b: &'a [u8], i: usize) -> Step<(Option<Num>, usize)> {
        let (i, c) = next(b, i);
        match c {
            b'0'..=b'9' | b'-' => {
                let (n, j) = self.number(i)?;
                Ok((Some(n), j))
            }
            b'n' => Ok((None, self.literal(b, i, b"null")?)),
            _ => Err(self.expected("'priority' must be a number or null", i)),
        }
    }

    /// `null` or `{"type": string|null, "id": string|i64|null, ...}`, from `i`.
    fn collation(&mut self, b: &'a [u8], i: usize) -> Step<(Option<Collation<'a>>, usize)> {
        let (i, c) = next(b, i);
        match c {
            b'{' => {}
            b'n' => return Ok((None, self.literal(b, i, b"null")?)),
            _ => return Err(self.expected("'collation' must be an object or null", i)),
        }
        let mut out = Collation::default();
        let (mut i, mut c) = next(b, i + 1);
        if c == b'}' {
            return Ok((Some(out), i + 1));
        }
        loop {
            if c != b'"' {
                return Err(self.expected("expected a string key", i));
            }
            let (name, j) = self.string(i + 1)?;
            i = self.colon(b, j)?;
            match &*name {
                b"type" => {
                    // Only a non-null earlier value makes a duplicate.
                    if out.kind.is_some() {
                        return Err(self.fail("duplicate field 'type' in 'collation'", i));
                    }
                    let wrong = "collation 'type' must be a string or null";
                    let (v, j) = self.opt_str(b, i, wrong)?;
                    out.kind = v;
                    i = j;
                }
                b"id" => {
                    if out.id.is_some() {
                        return Err(self.fail("duplicate field 'id' in 'collation'", i));
                    }
                    let (v, j) = self.collation_id(b, i)?;
                    out.id = v;
                    i = j;
                }
                _ => i = self.skip_value(i)?,
            }
            let (j, d) = next(b, i);
            if d == b',' {
                (i, c) = next(b, j + 1);
            } else if d == b'}' {
                return Ok((Some(out), j + 1));
            } else {
                return Err(self.expected("expected ',' or '}'", j));
            }
        }
    }

    /// `null`, a string, or an integer that fits i64, from `i`.
    fn collation_id(&mut self, b: &'a [u8], i: usize) -> Step<(Option<Id<'a>>, usize)> {
        const WRONG: &str = "collation id must be a string or an integer in the i64 range";
        let (i, c) = next(b, i);
        match c {
            b'"' => {
                let (t, j) = self.string(i + 1)?;
                Ok((Some(Id::Str(t)), j))
            }
            b'0'..=b'9' | b'-' => {
                let (n, j) = self.number(i)?;
                let v = match n {
                    Num::U64(v) => i64::try_from(v).ok(),
                    Num::I64(v) => Some(v),
                    Num::F64 => None,
                };
                match v {
                    Some(v) => Ok((Some(Id::Int(v)), j)),
                    None => Err(self.fail(WRONG, i)),
                }
            }
            b'n' => Ok((None, self.literal(b, i, b"null")?)),
            _ => Err(self.expected(WRONG, i)),
        }
    }
}

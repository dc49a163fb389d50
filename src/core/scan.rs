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

const ONES: u64 = u64::MAX / 255; // 0x0101..01
const HIGHS: u64 = ONES << 7; // 0x8080..80

/// Skip JSON whitespace from `i`; the index of the next byte (or the end).
/// Out of line: `next` calls it only when the byte at hand is <= 0x20.
#[inline(never)]
fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        match c {
            b' ' | b'\n' | b'\r' | b'\t' => i += 1,
            _ => break,
        }
    }
    i
}

/// From `i`, the index of the first `"`, `\` or control byte (< 0x20), or
/// `b.len()`; and, nonzero if any byte before it is >= 0x80, their high
/// bits. Eight bytes at a time (SWAR): `x ^ 0x02` maps `"` to 0x20 and keeps
/// control bytes below 0x20, so one "byte < 0x21" test finds both, and a
/// "byte == 0" test of `x ^ 0x5c` finds `\`. Each test flags a byte by its
/// high bit in `(y - k) & !y & 0x80`; borrows only run upwards, so the
/// lowest flag of either test is exact, and `!y` has the high bits of `!x`.
#[inline(always)]
fn find_special(b: &[u8], i: usize) -> Special {
    find_special_with(b, i, Masks::new())
}

/// `find_special` with the masks at hand.
#[inline(always)]
fn find_special_with(b: &[u8], i: usize, m: Masks) -> Special {
    let Some(mut rest) = b.get(i..) else {
        return Special {
            at: i,
            byte: 0,
            high: 0,
        };
    };
    let mut high = 0u64;
    while let Some((chunk, tail)) = rest.split_first_chunk::<8>() {
        let w = u64::from_le_bytes(*chunk);
        let hit = special_bits(w, m);
        if hit != 0 {
            let bit = hit.trailing_zeros();
            let shift = bit & !7;
            let below = (1u64 << shift).wrapping_sub(1);
            return Special {
                at: b.len() - rest.len() + (bit / 8) as usize,
                byte: (w >> shift) as u8,
                high: (high | (w & below)) & HIGHS,
            };
        }
        high |= w;
        rest = tail;
    }
    let mut high = high & HIGHS;
    for (k, &c) in rest.iter().enumerate() {
        if c == b'"' || c == b'\\' || c < 0x20 {
            return Special {
                at: b.len() - rest.len() + k,
                byte: c,
                high,
            };
        }
        high |= u64::from(c & 0x80);
    }
    Special {
        at: b.len(),
        byte: 0,
        high,
    }
}

/// The constants of `special_bits`, as runtime values: made once per scan
/// through `black_box`, so the compiler keeps them in registers (or uses
/// them as memory operands) instead of rebuilding each 64-bit immediate in
/// every loop iteration, which it otherwise prefers under register pressure.
#[derive(Clone, Copy)]
struct Masks {
    twos: u64,
    minus_21s: u64,
    backslashes: u64,
    minus_ones: u64,
    highs: u64,
}

impl Masks {
    #[inline(always)]
    fn new() -> Masks {
        let ones = std::hint::black_box(ONES);
        Masks {
            twos: ones << 1,
            minus_21s: ones.wrapping_mul(0x21).wrapping_neg(),
            backslashes: ones.wrapping_mul(0x5c),
            minus_ones: ones.wrapping_neg(),
            highs: ones << 7,
        }
    }
}

/// The high bit of each byte of `w` that is `"`, `\` or < 0x20, and maybe
/// of bytes above the lowest such byte (see `find_special`).
#[inline(always)]
fn special_bits(w: u64, m: Masks) -> u64 {
    let quote_ctrl = (w ^ m.twos).wrapping_add(m.minus_21s);
    let backslash = (w ^ m.backslashes).wrapping_add(m.minus_ones);
    (quote_ctrl | backslash) & !w & m.highs
}

/// What `find_special` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Special {
    /// Index of the byte (or the end).
    at: usize,
    /// `"`, `\`, a control byte, or 0 at the end.
    byte: u8,
    /// Nonzero if a byte before it is >= 0x80.
    high: u64,
}

fn hex_val(c: u8) -> Option<u16> {
    match c {
        b'0'..=b'9' => Some(u16::from(c - b'0')),
        b'a'..=b'f' => Some(u16::from(c - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(c - b'A' + 10)),
        _ => None,
    }
}

/// Four hex digits at `b[i..i + 4]`.
fn hex4_at(b: &[u8], i: usize) -> Option<u16> {
    let d = b.get(i..i.saturating_add(4))?;
    d.iter()
        .try_fold(0u16, |v, &c| Some((v << 4) | hex_val(c)?))
}

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

    // -- skipped values (serde_json's ignore_value / ignore_str) ------------

    /// A skipped string from `i` (after its opening quote); the index after
    /// its closing quote. Control bytes and escape syntax are checked;
    /// UTF-8 and surrogates are not. (`b` is `self.b`, passed so that it
    /// stays in registers.)
    #[inline(always)]
    fn skip_str(&mut self, b: &'a [u8], i: usize, m: Masks) -> Step<usize> {
        let f = find_special_with(b, i, m);
        if f.byte == b'"' {
            return Ok(f.at + 1);
        }
        self.skip_str_rest(f.at)
    }

    /// `skip_str` from a byte that is not the closing quote.
    #[inline(never)]
    fn skip_str_rest(&mut self, mut j: usize) -> Step<usize> {
        let b = self.b;
        loop {
            match b.get(j) {
                Some(b'"') => return Ok(j + 1),
                Some(b'\\') => {
                    let i = self.skip_escape(j + 1)?;
                    j = find_special(b, i).at;
                }
                Some(_) => return Err(self.fail("control character inside a string", j)),
                None => return Err(self.fail("end of input inside a string", j)),
            }
        }
    }

    /// The escape after a backslash (at `i`); the index after it.
    fn skip_escape(&mut self, i: usize) -> Step<usize> {
        match self.b.get(i) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 1),
            Some(b'u') => match hex4_at(self.b, i + 1) {
                Some(_) => Ok(i + 5),
                None => Err(self.bad_hex(i + 1)),
            },
            Some(_) => Err(self.fail("invalid escape", i)),
            None => Err(self.fail("end of input inside a string", i)),
        }
    }

    /// serde_json takes four bytes after `\u` whatever they are: fewer than
    /// four left is the end of input, else a bad escape.
    #[cold]
    fn bad_hex(&mut self, i: usize) -> Bail {
        if self.b.len() < i.saturating_add(4) {
            self.fail("end of input inside a string", self.b.len())
        } else {
            self.fail("invalid \\u escape", i)
        }
    }

    /// `"key":` inside a skipped object, from `i`; the index after the colon.
    #[inline(always)]
    fn skip_key(&mut self, b: &'a [u8], i: usize, m: Masks) -> Step<usize> {
        let (i, c) = next(b, i);
        if c != b'"' {
            return Err(self.expected("expected a string key", i));
        }
        let i = self.skip_str(b, i + 1, m)?;
        self.colon(b, i)
    }

    /// Skip one value of any kind and depth from `i`, iteratively; the index
    /// after it.
    #[inline(always)]
    fn skip_value(&mut self, i: usize) -> Step<usize> {
        self.skip::<false>(i)
    }

    /// `skip_value`. The open containers are a bit stack (1 = object): 64
    /// levels in a register; a value nested deeper is skipped again from
    /// its start with `DEEP`, which spills to the heap (serde_json's
    /// `ignore_value` has no depth limit, so neither can this).
    #[inline(never)]
    fn skip<const DEEP: bool>(&mut self, start: usize) -> Step<usize> {
        let b = self.b;
        let m = Masks::new();
        let mut bits = 0u64;
        let mut depth = 0u32;
        let mut spill: Vec<u64> = Vec::new();
        let (mut i, mut c) = next(b, start);
        'value: loop {
            match c {
                b'"' => i = self.skip_str(b, i + 1, m)?,
                b'{' | b'[' => {
                    let (j, d) = next(b, i + 1);
                    i = j;
                    // `}` is `{` + 2, `]` is `[` + 2.
                    if d == c + 2 {
                        i += 1;
                    } else {
                        if depth == 64 {
                            if !DEEP {
                                return self.skip::<true>(start);
                            }
                            spill.push(bits);
                            bits = 0;
                            depth = 0;
                        }
                        let object = c == b'{';
                        bits = (bits << 1) | u64::from(object);
                        depth += 1;
                        if object {
                            i = self.skip_key(b, i, m)?;
                        }
                        (i, c) = next(b, i);
                        continue 'value;
                    }
                }
                b'0'..=b'9' | b'-' => i = self.skip_number(b, i)?,
                b't' => i = self.literal(b, i, b"true")?,
                b'f' => i = self.literal(b, i, b"false")?,
                b'n' => i = self.literal(b, i, b"null")?,
                _ => return Err(self.expected("expected a value", i)),
            }
            // A value is complete: close containers until one goes on.
            while depth > 0 {
                let (j, d) = next(b, i);
                let object = bits & 1 == 1;
                if d == b',' {
                    i = j + 1;
                    if object {
                        i = self.skip_key(b, i, m)?;
                    }
                    (i, c) = next(b, i);
                    continue 'value;
                }
                if d != if object { b'}' } else { b']' } {
                    let what = if object {
                        "expected ',' or '}'"
                    } else {
                        "expected ',' or ']'"
                    };
                    return Err(self.expected(what, j));
                }
                i = j + 1;
                bits >>= 1;
                depth -= 1;
                if DEEP && depth == 0 {
                    if let Some(outer) = spill.pop() {
                        bits = outer;
                        depth = 64;
                    }
                }
            }
            return Ok(i);
        }
    }

    /// A skipped number from `i`; the index after it. Plain integers here,
    /// the rest (and every error) through `number`.
    #[inline(always)]
    fn skip_number(&mut self, b: &'a [u8], i: usize) -> Step<usize> {
        if let b'1'..=b'9' = at(b, i) {
            let mut j = i + 1;
            while at(b, j).is_ascii_digit() {
                j += 1;
            }
            if !matches!(at(b, j), b'.' | b'e' | b'E') {
                return Ok(j);
            }
        }
        self.number(i).map(|(_, j)| j)
    }

    /// A number from `i` (at `-` or a digit): grammar checked, value kept
    /// the way serde_json keeps it; the index after it.
    #[inline(never)]
    fn number(&mut self, mut i: usize) -> Step<(Num, usize)> {
        let b = self.b;
        let negative = at(b, i) == b'-';
        if negative {
            i += 1;
        }
        let mut v: u64 = 0;
        let mut wide = false;
        match at(b, i) {
            b'0' => {
                i += 1;
                if at(b, i).is_ascii_digit() {
                    return Err(self.fail("leading zero in a number", i));
                }
            }
            c @ b'1'..=b'9' => {
                v = u64::from(c - b'0');
                i += 1;
                loop {
                    let c = at(b, i);
                    if !c.is_ascii_digit() {
                        break;
                    }
                    match v
                        .checked_mul(10)
                        .and_then(|x| x.checked_add(u64::from(c - b'0')))
                    {
                        Some(x) => v = x,
                        None => wide = true,
                    }
                    i += 1;
                }
            }
            _ => return Err(self.expected("invalid number", i)),
        }
        let mut float = false;
        if at(b, i) == b'.' {
            i = self.digits(i + 1)?;
            float = true;
        }
        if let b'e' | b'E' = at(b, i) {
            i += 1;
            if let b'+' | b'-' = at(b, i) {
                i += 1;
            }
            i = self.digits(i)?;
            float = true;
        }
        let num = if float || wide {
            Num::F64
        } else if !negative {
            Num::U64(v)
        } else {
            // serde_json: `-0` and anything below i64::MIN become f64.
            let n = (v as i64).wrapping_neg();
            if n >= 0 {
                Num::F64
            } else {
                Num::I64(n)
            }
        };
        Ok((num, i))
    }

    /// One or more digits from `start`; the index after them.
    fn digits(&mut self, start: usize) -> Step<usize> {
        let mut i = start;
        while at(self.b, i).is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(self.expected("invalid number", i));
        }
        Ok(i)
    }

    // -- parsed values (serde_json's parse_str, parse_integer) --------------

    /// A parsed string from `i` (after its opening quote): escapes decoded,
    /// surrogates paired, UTF-8 checked; and the index after its closing
    /// quote. Borrowed unless it has escapes.
    #[inline(never)]
    fn string(&mut self, i: usize) -> Step<(Text<'a>, usize)> {
        let b = self.b;
        let Special { at: j, high, .. } = find_special(b, i);
        match at(b, j) {
            b'"' => {
                let raw = self.span(i, j);
                if high != 0 && std::str::from_utf8(raw).is_err() {
                    return Err(self.fail("invalid UTF-8 in a string", i));
                }
                Ok((Cow::Borrowed(raw), j + 1))
            }
            b'\\' => self.string_escaped(i, j, high),
            _ if j >= b.len() => Err(self.fail("end of input inside a string", j)),
            _ => Err(self.fail("control character inside a string", j)),
        }
    }

    /// `string` with escapes, the first at `first`; `high` is nonzero if a
    /// byte before it is not ASCII.
    #[inline(never)]
    fn string_escaped(
        &mut self,
        start: usize,
        first: usize,
        mut high: u64,
    ) -> Step<(Text<'a>, usize)> {
        let b = self.b;
        let room = b.len().saturating_sub(start);
        let mut out: Vec<u8> = Vec::with_capacity((first - start + 64).min(room));
        let mut run = start;
        let mut j = first;
        loop {
            match at(b, j) {
                b'"' => break,
                b'\\' => {
                    out.extend_from_slice(self.span(run, j));
                    run = self.unescape(j + 1, &mut out)?;
                    let f = find_special(b, run);
                    high |= f.high;
                    j = f.at;
                }
                _ if j >= b.len() => return Err(self.fail("end of input inside a string", j)),
                _ => return Err(self.fail("control character inside a string", j)),
            }
        }
        out.extend_from_slice(self.span(run, j));
        // What serde_json checks: the decoded text is UTF-8. Escapes decode
        // to whole characters, so only a non-ASCII raw byte can break it.
        if high != 0 && std::str::from_utf8(&out).is_err() {
            return Err(self.fail("invalid UTF-8 in a string", start));
        }
        Ok((Cow::Owned(out), j + 1))
    }

    /// Decode the escape at `k` (after its backslash) into `out`; the index
    /// after it.
    fn unescape(&mut self, k: usize, out: &mut Vec<u8>) -> Step<usize> {
        let b = self.b;
        let byte = match at(b, k) {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let lone = "lone surrogate in a \\u escape";
                let Some(n) = hex4_at(b, k + 1) else {
                    return Err(self.bad_hex(k + 1));
                };
                let (code, next) = match n {
                    0xDC00..=0xDFFF => return Err(self.fail(lone, k)),
                    0xD800..=0xDBFF => {
                        // A high surrogate needs `\u` + a low one right after.
                        if b.get(k + 5..k + 7) != Some(b"\\u") {
                            return Err(self.fail(lone, k));
                        }
                        match hex4_at(b, k + 7) {
                            Some(n2 @ 0xDC00..=0xDFFF) => (
                                0x1_0000
                                    + ((u32::from(n) - 0xD800) << 10)
                                    + (u32::from(n2) - 0xDC00),
                                k + 11,
                            ),
                            Some(_) => return Err(self.fail(lone, k)),
                            None => return Err(self.bad_hex(k + 7)),
                        }
                    }
                    _ => (u32::from(n), k + 5),
                };
                let Some(ch) = char::from_u32(code) else {
                    return Err(self.fail("invalid \\u escape", k));
                };
                let mut tmp = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                return Ok(next);
            }
            _ if k >= b.len() => return Err(self.fail("end of input inside a string", k)),
            _ => return Err(self.fail("invalid escape", k)),
        };
        out.push(byte);
        Ok(k + 1)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(json: &str) -> Fields<'_> {
        scan(json.as_bytes()).unwrap_or_else(|e| panic!("refused {json:?}: {e}"))
    }

    fn bad(json: &[u8]) {
        assert!(
            scan(json).is_err(),
            "accepted {:?}",
            String::from_utf8_lossy(json)
        );
    }

    #[test]
    fn find_special_matches_a_plain_loop() {
        let mut bytes: Vec<u8> = (0u8..=255).collect();
        bytes.extend_from_slice(b"abcdefghijklmnopqrstuvwxyz\xff\x80 ~");
        for start in 0..bytes.len() {
            for end in start..=bytes.len().min(start + 40) {
                let mut s = bytes[start..end].to_vec();
                // Only bytes that are not special, then one special.
                s.retain(|&c| !(c == b'"' || c == b'\\' || c < 0x20));
                let plain = s.len();
                let high = |from: usize| s[from.min(plain)..].iter().any(|&c| c >= 0x80);
                let f = find_special(&s, 0);
                assert_eq!((f.at, f.byte, f.high != 0), (plain, 0, high(0)));
                for sp in [b'"', b'\\', 0x00, 0x1f] {
                    let mut t = s.clone();
                    t.push(sp);
                    t.extend_from_slice(b"\"\\\x01\xfftail");
                    let f = find_special(&t, 0);
                    assert_eq!((f.at, f.byte, f.high != 0), (plain, sp, high(0)));
                    if plain > 3 {
                        let f = find_special(&t, 3);
                        assert_eq!((f.at, f.byte, f.high != 0), (plain, sp, high(3)));
                    }
                }
            }
        }
        let end = Special {
            at: 3,
            byte: 0,
            high: 0,
        };
        assert_eq!(find_special(b"abc", 3), end);
        assert_eq!(find_special(b"abc", 9).at, 9);
    }

    #[test]
    fn extracts_fields() {
        let f = ok(
            r#" {"x":[1,{"y":null}],"key":"k\"\u00e9\ud83d\ude00","response_url":null,
               "collation":{"type":"user","id":-5,"z":{}},"priority":12} "#,
        );
        assert_eq!(f.key.as_deref(), Some("k\"\u{e9}\u{1f600}".as_bytes()));
        assert_eq!(f.response_url, None);
        let c = f.collation.unwrap();
        assert_eq!(c.kind.as_deref(), Some(&b"user"[..]));
        assert_eq!(c.id, Some(Id::Int(-5)));
        assert_eq!(f.priority, Some(Num::U64(12)));
        assert!(matches!(
            ok(r#"{"key":"plain"}"#).key,
            Some(Cow::Borrowed(b"plain"))
        ));
        assert!(matches!(ok(r#"{"key":"a\nb"}"#).key, Some(Cow::Owned(v)) if v == b"a\nb"));
        assert_eq!(ok("{}"), Fields::default());
    }

    #[test]
    fn numbers_keep_serde_json_kinds() {
        for (text, want) in [
            ("0", Num::U64(0)),
            ("-0", Num::F64),
            ("-1", Num::I64(-1)),
            ("18446744073709551615", Num::U64(u64::MAX)),
            ("18446744073709551616", Num::F64),
            ("-9223372036854775808", Num::I64(i64::MIN)),
            ("-9223372036854775809", Num::F64),
            ("-18446744073709551615", Num::F64),
            ("1.0", Num::F64),
            ("1e2", Num::F64),
            ("1E+2", Num::F64),
            ("0e-0", Num::F64),
            ("1e99999", Num::F64),
        ] {
            let json = format!(r#"{{"priority":{text}}}"#);
            assert_eq!(ok(&json).priority, Some(want), "{text}");
        }
        for text in [
            "01", "-", "-a", "1.", "1.e1", ".5", "+1", "1e", "1e+", "00", "-01", "0x1",
        ] {
            bad(format!(r#"{{"priority":{text}}}"#).as_bytes());
            bad(format!(r#"{{"other":{text}}}"#).as_bytes());
        }
    }

    #[test]
    fn skipped_strings_are_not_utf8_checked_but_kept_ones_are() {
        assert!(scan(b"{\"x\":\"\xff\"}").is_ok());
        assert!(scan(b"{\"x\":{\"\xff\":1}}").is_ok());
        assert!(scan(br#"{"x":"\ud800","y":{"\udc00":"\ud800\u0041"}}"#).is_ok());
        bad(b"{\"key\":\"\xff\"}");
        bad(b"{\"\xff\":1}");
        bad(br#"{"\ud800":1}"#);
        bad(br#"{"key":"\ud800"}"#);
        bad(br#"{"key":"\udc00"}"#);
        bad(br#"{"key":"\ud800\u0041"}"#);
        bad(br#"{"key":"\ud800\n"}"#);
        bad(b"{\"collation\":{\"\xff\":1}}");
        bad(b"{\"x\":\"\x1f\"}");
        bad(br#"{"x":"\x"}"#);
        bad(br#"{"x":"\u12"}"#);
        bad(br#"{"x":"\u12g4"}"#);
    }

    #[test]
    fn deep_skipped_values_have_no_limit() {
        let n = 100_000;
        let json = format!(r#"{{"key":"k","x":{}1{}}}"#, "[".repeat(n), "]".repeat(n));
        assert!(scan(json.as_bytes()).is_ok());
        let json = format!(r#"{{"x":{}1{}}}"#, r#"{"a":["#.repeat(n), "]}".repeat(n));
        assert!(scan(json.as_bytes()).is_ok());
        let json = format!(r#"{{"x":{}1{}}}"#, "[".repeat(n), "]".repeat(n - 1));
        bad(json.as_bytes());
        let json = format!(r#"{{"x":{}1{}}}"#, "[".repeat(200), "}".repeat(200));
        bad(json.as_bytes());
    }

    /// Every read field is refused when repeated, `null` first or not;
    /// other fields are not; docs/commands.md names exactly these fields.
    #[test]
    fn every_read_field_is_refused_when_repeated() {
        assert_eq!(
            READ_FIELDS,
            ["key", "response_url", "collation", "priority", "gate"]
        );
        for f in READ_FIELDS {
            // `null` is valid for each (so the repeat is what is refused).
            for (a, b) in [("null", "null"), (" null ", "null")] {
                let json = format!(r#"{{"{f}":{a},"x":0,"{f}":{b}}}"#);
                let e = scan(json.as_bytes()).expect_err(&json);
                assert_eq!(
                    e.to_string(),
                    format!(
                        "invalid config JSON: duplicate field '{f}' at byte {}",
                        json.rfind(&format!("\"{f}\":")).unwrap() + f.len() + 3
                    ),
                    "{json}"
                );
            }
            // Escaped, it is the same name.
            let esc: String = f.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
            assert!(scan(format!(r#"{{"{f}":null,"{esc}":null}}"#).as_bytes()).is_err());
            assert_eq!(
                Field::of(f.as_bytes()).duplicate(),
                format!("duplicate field '{f}'")
            );
        }
        for other in ["x", "metadata_table", "Key", "key ", "script"] {
            let json = format!(r#"{{"{other}":1,"{other}":[2]}}"#);
            assert!(scan(json.as_bytes()).is_ok(), "{json}");
        }
        let docs = include_str!("../../docs/commands.md");
        let line = docs
            .lines()
            .find(|l| l.starts_with("Fields the queue reads:"))
            .expect("docs/commands.md: a line 'Fields the queue reads: ...'");
        let named: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
        assert_eq!(named, READ_FIELDS, "docs/commands.md: {line}");
    }

    #[test]
    fn duplicates() {
        bad(br#"{"key":null,"key":"k"}"#);
        bad(br#"{"priority":1,"priority":1}"#);
        assert!(scan(br#"{"x":1,"x":2}"#).is_ok());
        let f = ok(r#"{"collation":{"type":null,"type":"team","id":null,"id":"1"}}"#);
        let c = f.collation.unwrap();
        assert_eq!(c.kind.as_deref(), Some(&b"team"[..]));
        assert_eq!(c.id, Some(Id::Str(Cow::Borrowed(b"1"))));
        bad(br#"{"collation":{"type":"team","type":null}}"#);
        bad(br#"{"collation":{"id":1,"id":1}}"#);
        // An escaped name is the same name.
        bad(br#"{"key":"a","k\u0065y":"b"}"#);
    }

    #[test]
    fn grammar() {
        for b in [
            &b""[..],
            b" ",
            b"[]",
            b"\x0c{}",
            b"{",
            b"{,}",
            b"{\"a\":1,}",
            b"{\"a\":[1,]}",
            b"{\"a\":[,1]}",
            b"{\"a\" 1}",
            b"{\"a\":1 \"b\":2}",
            b"{\"a\":tru}",
            b"{\"a\":nul}",
            b"{\"a\":NaN}",
            b"{} x",
            b"{}{}",
            b"{\"a\":1}/**/",
            b"{'a':1}",
            b"{a:1}",
            b"\xef\xbb\xbf{}",
        ] {
            bad(b);
        }
        for b in [
            &b"{}"[..],
            b" \t\r\n{ \t\r\n} \t\r\n",
            b"{\"a\":[]}",
            b"{\"a\":{}}",
        ] {
            assert!(scan(b).is_ok(), "{:?}", String::from_utf8_lossy(b));
        }
        assert_eq!(scan(b"[]"), Err(ScanError::NotObject));
    }

    #[test]
    fn never_panics_on_prefixes() {
        let full = br#"{"key":"a\u00e9\ud83d\ude00\n","response_url":"u","collation":{"type":"user","id":12},"priority":1.5e3,"x":[true,false,null,-0.1e-2,"\u0041",{"y":[]}]}"#;
        for end in 0..=full.len() {
            let _ = scan(&full[..end]);
        }
    }
}

//! Parsed values (serde_json's `parse_str`, `parse_integer`): strings with
//! escapes decoded, surrogates paired and UTF-8 checked; numbers in
//! serde_json's three kinds.

use std::borrow::Cow;

use super::bytes::{find_special, hex4_at, Special};
use super::{at, Num, Scanner, Step, Text};

impl<'a> Scanner<'a> {
    /// A number from `i` (at `-` or a digit): grammar checked, value kept
    /// the way serde_json keeps it; the index after it.
    #[inline(never)]
    pub(super) fn number(&mut self, mut i: usize) -> Step<(Num, usize)> {
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
    pub(super) fn digits(&mut self, start: usize) -> Step<usize> {
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
    pub(super) fn string(&mut self, i: usize) -> Step<(Text<'a>, usize)> {
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
    pub(super) fn string_escaped(
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
    pub(super) fn unescape(&mut self, k: usize, out: &mut Vec<u8>) -> Step<usize> {
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
}

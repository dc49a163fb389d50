//! Skipped values (serde_json's `ignore_value` / `ignore_str`): checked for
//! grammar, control bytes and escape syntax only, and walked without
//! recursion.

use super::bytes::{find_special, find_special_with, hex4_at, Masks};
use super::{at, next, Bail, Scanner, Step};

impl<'a> Scanner<'a> {
    // -- skipped values (serde_json's ignore_value / ignore_str) ------------

    /// A skipped string from `i` (after its opening quote); the index after
    /// its closing quote. Control bytes and escape syntax are checked;
    /// UTF-8 and surrogates are not. (`b` is `self.b`, passed so that it
    /// stays in registers.)
    #[inline(always)]
    pub(super) fn skip_str(&mut self, b: &'a [u8], i: usize, m: Masks) -> Step<usize> {
        let f = find_special_with(b, i, m);
        if f.byte == b'"' {
            return Ok(f.at + 1);
        }
        self.skip_str_rest(f.at)
    }

    /// `skip_str` from a byte that is not the closing quote.
    #[inline(never)]
    pub(super) fn skip_str_rest(&mut self, mut j: usize) -> Step<usize> {
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
    pub(super) fn skip_escape(&mut self, i: usize) -> Step<usize> {
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
    pub(super) fn bad_hex(&mut self, i: usize) -> Bail {
        if self.b.len() < i.saturating_add(4) {
            self.fail("end of input inside a string", self.b.len())
        } else {
            self.fail("invalid \\u escape", i)
        }
    }

    /// `"key":` inside a skipped object, from `i`; the index after the colon.
    #[inline(always)]
    pub(super) fn skip_key(&mut self, b: &'a [u8], i: usize, m: Masks) -> Step<usize> {
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
    pub(super) fn skip_value(&mut self, i: usize) -> Step<usize> {
        self.skip::<false>(i)
    }

    /// `skip_value`. The open containers are a bit stack (1 = object): 64
    /// levels in a register; a value nested deeper is skipped again from
    /// its start with `DEEP`, which spills to the heap (serde_json's
    /// `ignore_value` has no depth limit, so neither can this).
    #[inline(never)]
    pub(super) fn skip<const DEEP: bool>(&mut self, start: usize) -> Step<usize> {
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
    pub(super) fn skip_number(&mut self, b: &'a [u8], i: usize) -> Step<usize> {
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
}

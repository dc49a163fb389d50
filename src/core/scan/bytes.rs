//! The config scanner's byte-level helpers: whitespace, the word-at-a-time
//! search for `"`, `\` and control bytes, and hex digits.

pub(super) const ONES: u64 = u64::MAX / 255; // 0x0101..01
pub(super) const HIGHS: u64 = ONES << 7; // 0x8080..80

/// Skip JSON whitespace from `i`; the index of the next byte (or the end).
/// Out of line: `next` calls it only when the byte at hand is <= 0x20.
#[inline(never)]
pub(super) fn ws(b: &[u8], mut i: usize) -> usize {
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
pub(super) fn find_special(b: &[u8], i: usize) -> Special {
    find_special_with(b, i, Masks::new())
}

/// `find_special` with the masks at hand.
#[inline(always)]
pub(super) fn find_special_with(b: &[u8], i: usize, m: Masks) -> Special {
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
pub(super) struct Masks {
    twos: u64,
    minus_21s: u64,
    backslashes: u64,
    minus_ones: u64,
    highs: u64,
}

impl Masks {
    #[inline(always)]
    pub(super) fn new() -> Masks {
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
pub(super) fn special_bits(w: u64, m: Masks) -> u64 {
    let quote_ctrl = (w ^ m.twos).wrapping_add(m.minus_21s);
    let backslash = (w ^ m.backslashes).wrapping_add(m.minus_ones);
    (quote_ctrl | backslash) & !w & m.highs
}

/// What `find_special` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Special {
    /// Index of the byte (or the end).
    pub(super) at: usize,
    /// `"`, `\`, a control byte, or 0 at the end.
    pub(super) byte: u8,
    /// Nonzero if a byte before it is >= 0x80.
    pub(super) high: u64,
}

pub(super) fn hex_val(c: u8) -> Option<u16> {
    match c {
        b'0'..=b'9' => Some(u16::from(c - b'0')),
        b'a'..=b'f' => Some(u16::from(c - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(c - b'A' + 10)),
        _ => None,
    }
}

/// Four hex digits at `b[i..i + 4]`.
pub(super) fn hex4_at(b: &[u8], i: usize) -> Option<u16> {
    let d = b.get(i..i.saturating_add(4))?;
    d.iter()
        .try_fold(0u16, |v, &c| Some((v << 4) | hex_val(c)?))
}

//! Collation names packed into the collation record.
//!
//! A name is `user.<id>` or `team.<id>`, stored inline in 8 bytes when the
//! id is a decimal number of up to 16 digits (database ids, leading zeros
//! kept) or any id of up to 7 bytes: one byte for the kind, the form and
//! the length, then the number (56 bits) or the bytes. Other names are
//! marked `LONG` and kept by the queue in a side table. Packing saves a heap
//! allocation per collation and keeps the record at 32 bytes;
//! docs/design.md, "Memory".

use std::borrow::Cow;

const TEAM: u8 = 0x80;
const NUMERIC: u8 = 0x40;
const LEN: u8 = 0x3f;
const LONG: u8 = 0x3f;
const MAX_TEXT: usize = 7;
const MAX_DIGITS: usize = 16;

/// A packed collation name, or the `LONG` mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackedName([u8; 8]);

impl PackedName {
    /// The mark of a name kept outside the record.
    pub const LONG: PackedName = PackedName([LONG, 0, 0, 0, 0, 0, 0, 0]);

    /// Pack `name`, if it has a known kind and an id that fits.
    pub fn pack(name: &str) -> Option<PackedName> {
        let (kind, id) = if let Some(id) = name.strip_prefix("user.") {
            (0, id)
        } else if let Some(id) = name.strip_prefix("team.") {
            (TEAM, id)
        } else {
            return None;
        };
        let mut b = [0u8; 8];
        let digits = !id.is_empty() && id.bytes().all(|c| c.is_ascii_digit());
        if digits && id.len() > MAX_TEXT && id.len() <= MAX_DIGITS {
            let v: u64 = id.parse().ok()?;
            b[0] = kind | NUMERIC | id.len() as u8;
            b[1..].copy_from_slice(&v.to_le_bytes()[..7]);
        } else if id.len() <= MAX_TEXT {
            b[0] = kind | id.len() as u8;
            b[1..1 + id.len()].copy_from_slice(id.as_bytes());
        } else {
            return None;
        }
        Some(PackedName(b))
    }

    /// The packed bytes as one word (for hashing).
    pub fn word(&self) -> u64 {
        u64::from_le_bytes(self.0)
    }

    pub fn is_long(&self) -> bool {
        self.0[0] == LONG
    }

    /// The full name of an inline name (`None` for the `LONG` mark).
    pub fn unpack(&self) -> Option<String> {
        if self.is_long() {
            return None;
        }
        let len = (self.0[0] & LEN) as usize;
        let kind = if self.0[0] & TEAM != 0 {
            "team."
        } else {
            "user."
        };
        let mut s = String::with_capacity(kind.len() + len);
        s.push_str(kind);
        if self.0[0] & NUMERIC != 0 {
            let mut v = [0u8; 8];
            v[..7].copy_from_slice(&self.0[1..]);
            let mut n = u64::from_le_bytes(v);
            let mut digits = [b'0'; MAX_DIGITS];
            for d in digits.get_mut(..len)?.iter_mut().rev() {
                *d = b'0' + (n % 10) as u8;
                n /= 10;
            }
            s.push_str(std::str::from_utf8(digits.get(..len)?).ok()?);
        } else {
            s.push_str(std::str::from_utf8(self.0.get(1..1 + len)?).ok()?);
        }
        Some(s)
    }
}

/// A name as stored: inline, or borrowed from the side table.
pub fn render<'a>(packed: &PackedName, long: Option<&'a str>) -> Cow<'a, str> {
    match (packed.unpack(), long) {
        (Some(s), _) => Cow::Owned(s),
        (None, Some(s)) => Cow::Borrowed(s),
        (None, None) => Cow::Borrowed(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for name in [
            "user.7",
            "team.12",
            "user.1234567",
            "user.12345678",
            "user.0000000000123456",
            "team.9999999999999999",
            "user.Ωmega",
            "team.abc",
            "user.",
        ] {
            let p = PackedName::pack(name).unwrap_or_else(|| panic!("{name}"));
            assert!(!p.is_long());
            assert_eq!(p.unpack().as_deref(), Some(name));
        }
        assert_ne!(PackedName::pack("user.1"), PackedName::pack("team.1"));
        assert_ne!(
            PackedName::pack("user.012345678"),
            PackedName::pack("user.12345678")
        );
        // Too long for either form: kept outside the record.
        for name in ["user.12345678901234567", "user.abcdefgh", "user.1234567x"] {
            assert_eq!(PackedName::pack(name), None, "{name}");
        }
        assert_eq!(PackedName::pack("group.1"), None);
        assert_eq!(PackedName::LONG.unpack(), None);
        assert_eq!(render(&PackedName::LONG, Some("user.x")), "user.x");
    }

    #[test]
    fn packed_name_is_8_bytes() {
        assert_eq!(std::mem::size_of::<PackedName>(), 8);
    }
}

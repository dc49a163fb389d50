//! Collation names packed into the collation record.
//!
//! A name is `user.<id>` or `team.<id>`. Ids of up to 15 bytes (database
//! ids, usernames) are stored inline in 16 bytes: one byte for the kind and
//! length, then the id. Longer names are marked `LONG` and kept by the queue
//! in a side table. Packing saves a heap allocation (32 bytes with jemalloc)
//! per collation; docs/design.md, "Memory".

use std::borrow::Cow;

const TEAM: u8 = 0x80;
const LONG: u8 = 0x7f;
const MAX_INLINE: usize = 15;

/// A packed collation name, or the `LONG` mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackedName([u8; 16]);

impl PackedName {
    /// The mark of a name kept outside the record.
    pub const LONG: PackedName = PackedName([LONG, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);

    /// Pack `name`, if it has a known kind and an id of at most 15 bytes.
    pub fn pack(name: &str) -> Option<PackedName> {
        let (kind, id) = if let Some(id) = name.strip_prefix("user.") {
            (0, id)
        } else if let Some(id) = name.strip_prefix("team.") {
            (TEAM, id)
        } else {
            return None;
        };
        if id.len() > MAX_INLINE {
            return None;
        }
        let mut b = [0u8; 16];
        b[0] = kind | id.len() as u8;
        b[1..1 + id.len()].copy_from_slice(id.as_bytes());
        Some(PackedName(b))
    }

    pub fn is_long(&self) -> bool {
        self.0[0] == LONG
    }

    /// The full name of an inline name (`None` for the `LONG` mark).
    pub fn unpack(&self) -> Option<String> {
        if self.is_long() {
            return None;
        }
        let len = (self.0[0] & !TEAM) as usize;
        let id = std::str::from_utf8(self.0.get(1..1 + len)?).ok()?;
        let kind = if self.0[0] & TEAM != 0 {
            "team."
        } else {
            "user."
        };
        let mut s = String::with_capacity(kind.len() + id.len());
        s.push_str(kind);
        s.push_str(id);
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
        for name in ["user.7", "team.12", "user.123456789012345", "team.Ωmega"] {
            let p = PackedName::pack(name).unwrap();
            assert!(!p.is_long());
            assert_eq!(p.unpack().as_deref(), Some(name));
        }
        assert_ne!(PackedName::pack("user.1"), PackedName::pack("team.1"));
        assert_eq!(PackedName::pack("user.1234567890123456"), None);
        assert_eq!(PackedName::pack("group.1"), None);
        assert_eq!(PackedName::LONG.unpack(), None);
        assert_eq!(render(&PackedName::LONG, Some("user.x")), "user.x");
    }
}

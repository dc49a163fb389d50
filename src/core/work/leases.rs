//! The running deliveries' store: lease records in a slab, found by token
//! and by orca key. `Work` keeps them in deadline order through the
//! generic `Expiring` map (this is its `Store`).

use std::collections::hash_map::Entry;

use super::expiring::Store;
use super::Lease;
use crate::core::config::{key_hash, JobKey};
use crate::core::containers::idmap::IdMap;
use crate::core::containers::shrink_map;
use crate::core::containers::{IdTable, Slab};

/// A lease and its token, as stored.
#[derive(Clone, Debug)]
struct LeaseRec {
    token: u64,
    lease: Lease,
}

/// The running deliveries: records in a slab (grown by chunks, never
/// copied), found by token (`by_token`, a map of small entries) and by orca
/// key (`by_key`, an id table: several leases share a key after a regrade).
/// A leased pop adds one record and one entry to each; the maps it grows
/// hold 16-byte and 4-byte entries, so growing them moves little (a map of
/// whole leases moved ~100 bytes per lease each time it doubled, and a map
/// by key probed and grew a table of 56-byte entries).
#[derive(Clone, Debug, Default)]
pub struct Leases {
    recs: Slab<LeaseRec>,
    by_token: IdMap<u64, u32>,
    by_key: IdTable,
}

impl Leases {
    pub fn len(&self) -> usize {
        self.recs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    pub fn contains(&self, token: u64) -> bool {
        self.by_token.contains_key(&token)
    }

    pub fn get(&self, token: u64) -> Option<&Lease> {
        let id = *self.by_token.get(&token)?;
        self.recs.get(id).map(|r| &r.lease)
    }

    pub fn get_mut(&mut self, token: u64) -> Option<&mut Lease> {
        let id = *self.by_token.get(&token)?;
        self.recs.get_mut(id).map(|r| &mut r.lease)
    }

    /// Add the lease `token` (not held yet). The lease comes back,
    /// nothing changed, if the token is taken or no record can be stored.
    pub fn insert(&mut self, token: u64, lease: Lease) -> Result<(), Lease> {
        // One probe of the token map: a taken token is refused, a free
        // one is filled in place.
        let Entry::Vacant(slot) = self.by_token.entry(token) else {
            return Err(lease);
        };
        if !self.recs.has_room() {
            return Err(lease);
        }
        let hash = key_hash(&lease.key);
        let Some(id) = self.recs.insert(LeaseRec { token, lease }) else {
            return Ok(());
        };
        slot.insert(id);
        let recs = &self.recs;
        self.by_key.insert_with(hash, id, || {
            recs.iter().map(|(i, r)| (key_hash(&r.lease.key), i))
        });
        Ok(())
    }

    pub fn remove(&mut self, token: u64) -> Option<Lease> {
        let id = self.by_token.remove(&token)?;
        let hash = key_hash(&self.recs.get(id)?.lease.key);
        let recs = &self.recs;
        self.by_key.remove(hash, id, |i| {
            recs.get(i).map_or(0, |r| key_hash(&r.lease.key))
        });
        self.recs.remove(id).map(|r| r.lease)
    }

    /// Is any lease held on `key`?
    pub fn has_key(&self, key: &JobKey) -> bool {
        let recs = &self.recs;
        self.by_key
            .find(key_hash(key), |i| {
                recs.get(i).is_some_and(|r| r.lease.key == *key)
            })
            .is_some()
    }

    /// The tokens of the leases on `key`, in no particular order (no
    /// allocation when there are none).
    pub fn tokens_of(&self, key: &JobKey) -> Vec<u64> {
        self.by_key
            .candidates(key_hash(key))
            .filter_map(|i| self.recs.get(i))
            .filter(|r| r.lease.key == *key)
            .map(|r| r.token)
            .collect()
    }

    /// Every lease with its token, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Lease)> {
        self.recs.iter().map(|(_, r)| (r.token, &r.lease))
    }

    pub fn values(&self) -> impl Iterator<Item = &Lease> {
        self.recs.iter().map(|(_, r)| &r.lease)
    }

    /// Do the by-token and by-key indexes hold exactly the records?
    pub fn indexes_agree(&self) -> bool {
        let recs = &self.recs;
        self.by_token.len() == recs.len()
            && self.by_key.len() == recs.len()
            && recs.iter().all(|(id, r)| {
                self.by_token.get(&r.token) == Some(&id)
                    && self
                        .by_key
                        .candidates(key_hash(&r.lease.key))
                        .any(|i| i == id)
            })
    }

    /// One record move of the slab's shrink, if one is under way (or due);
    /// false when there is nothing to move.
    pub fn move_one(&mut self) -> bool {
        let Some((from, to)) = self.recs.next_move() else {
            return false;
        };
        let Some(r) = self.recs.get(from) else {
            return false;
        };
        let (token, hash) = (r.token, key_hash(&r.lease.key));
        self.by_key.replace(hash, from, to);
        self.by_token.insert(token, to);
        let moved = self.recs.move_record(from, to);
        debug_assert!(moved, "lease {from} not moved to free slot {to}");
        true
    }

    /// Shrink the indexes when sparse.
    pub fn shrink_indexes(&mut self) {
        if self.by_key.wants_shrink() {
            let recs = &self.recs;
            self.by_key
                .shrink(|i| recs.get(i).map_or(0, |r| key_hash(&r.lease.key)));
        }
        shrink_map(&mut self.by_token);
    }

    /// Can another lease be stored? (ids are bounded by `MAX_ID`)
    pub fn has_room(&self) -> bool {
        self.recs.has_room()
    }
}

impl Store<u64, Lease> for Leases {
    fn len(&self) -> usize {
        Leases::len(self)
    }
    fn get(&self, token: &u64) -> Option<&Lease> {
        Leases::get(self, *token)
    }
    fn get_mut(&mut self, token: &u64) -> Option<&mut Lease> {
        Leases::get_mut(self, *token)
    }
    /// Leases are never replaced: a taken token is refused.
    fn put(&mut self, token: u64, lease: Lease) -> Result<Option<Lease>, Lease> {
        self.insert(token, lease).map(|()| None)
    }
    fn take(&mut self, token: &u64) -> Option<Lease> {
        self.remove(*token)
    }
    fn shrink(&mut self) {
        self.shrink_indexes();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::work::Parked;

    fn lease(k: u8, deadline: i64) -> Lease {
        let mut key = [0u8; 32];
        key[0] = k % 4; // few distinct hashes: shared probe runs
        key[31] = k;
        Lease {
            key,
            deadline,
            job: Parked {
                payload: vec![k; 3].into(),
                created_at: 1,
                attempts: 1,
                coll: None,
                immediate: false,
            },
            superseded: false,
            started_at: 0,
            worker: None,
        }
    }

    #[test]
    fn leases_by_token_and_key_through_growth_removal_and_moves() {
        let mut ls = Leases::default();
        for t in 1..=3000u64 {
            assert!(ls.insert(t, lease((t % 200) as u8, t as i64)).is_ok());
        }
        // A taken token is refused, and the lease handed back.
        assert!(ls.insert(5, lease(1, 1)).is_err());
        assert_eq!(ls.len(), 3000);
        assert!(ls.indexes_agree());
        assert_eq!(ls.get(7).map(|l| l.deadline), Some(7));
        // Several leases share a key (a regrade): every token is found.
        let key = lease(7, 0).key;
        let mut ts = ls.tokens_of(&key);
        ts.sort_unstable();
        let want: Vec<u64> = (1..=3000u64).filter(|t| t % 200 == 7).collect();
        assert_eq!(ts, want);
        assert!(ls.has_key(&key));
        // Most leases end: the slab shrinks by moves that keep both indexes.
        for t in 1..=3000u64 {
            if t % 10 != 0 {
                assert_eq!(ls.remove(t).map(|l| l.deadline), Some(t as i64));
            }
        }
        assert_eq!(ls.remove(1), None);
        let mut moves = 0;
        while ls.move_one() {
            moves += 1;
            assert!(ls.indexes_agree());
        }
        assert!(moves > 0);
        ls.shrink_indexes();
        assert!(ls.indexes_agree());
        for t in (10..=3000u64).step_by(10) {
            assert_eq!(ls.get(t).map(|l| l.deadline), Some(t as i64));
        }
        assert!(!ls.has_key(&lease(7, 0).key));
        assert_eq!(ls.tokens_of(&lease(10, 0).key).len(), 15);
        for t in (10..=3000u64).step_by(10) {
            assert!(ls.remove(t).is_some());
        }
        assert!(ls.is_empty() && ls.indexes_agree());
    }
}

//! An open-addressing table of record ids, for lookups by key: the table
//! holds only ids (and a tag and displacement in their spare bits); the
//! caller supplies each id's hash and the key comparison.

use std::marker::PhantomData;

use super::slab::SlabId;

/// An empty slot (no id reaches it: ids stay below `slab::MAX_ID`).
const NIL: u32 = u32::MAX;

/// A set of ids found by a 64-bit hash of their record's key: linear probing
/// over a table of `u32` at most 3/4 full, grown by half (not doubled, so
/// it is on average a third emptier: about 6.5 bytes per entry instead of
/// 8), deletion by backward shift (no tombstones). A hash's home slot is
/// its low 32 bits scaled to the table (`(h * len) >> 32`, any length
/// works). The caller supplies the hash and the key comparison, so the table
/// holds nothing but ids, plus in each slot's high bits:
/// - the slot's displacement from the id's home slot (3 bits; the largest
///   value means "that far or more"), so a removal's backward shift knows
///   where each later id of the probe run belongs without reading its
///   record (a cache miss each in a large queue); only an id displaced 7
///   slots or more needs its record's hash;
/// - a tag: the top bits of the hash, as many as the ids and the
///   displacement leave free (`id_bits` is one more than the largest
///   stored id needs, at least 16: 13 tag bits in a small table, 8 at a
///   million jobs). A probe reads the record behind a slot only when the
///   tags match, so a lookup of an absent key (every new job's) rarely
///   touches a record at all.
///
/// Widening `id_bits` for a larger id keeps every slot in place (a shorter
/// tag is a prefix of the longer one): one pass over the slots. In the
/// widest tables the displacement narrows (to none at 2^29 ids and more)
/// so that two tag bits stay.
#[derive(Debug)]
pub struct IdTable<I = u32> {
    slots: Vec<u32>,
    len: usize,
    id_bits: u32,
    ids: PhantomData<fn() -> I>,
}

impl<I> Clone for IdTable<I> {
    fn clone(&self) -> Self {
        IdTable {
            slots: self.slots.clone(),
            len: self.len,
            id_bits: self.id_bits,
            ids: PhantomData,
        }
    }
}

impl<I> Default for IdTable<I> {
    fn default() -> Self {
        IdTable {
            slots: Vec::new(),
            len: 0,
            id_bits: 0,
            ids: PhantomData,
        }
    }
}

/// The fewest id bits that leave `id` below the all-ones id (so no slot
/// reads as `NIL`), plus one for growth; 16 to 30.
fn id_bits_for(id: u32) -> u32 {
    (33 - id.saturating_add(1).leading_zeros()).clamp(16, 30)
}

/// Bits of the displacement field next to `id_bits` of id: 3, fewer in
/// the widest tables, so that at least 2 bits of tag stay.
fn disp_bits_for(id_bits: u32) -> u32 {
    30u32.saturating_sub(id_bits).min(3)
}

impl<I: SlabId> IdTable<I> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn id_mask(&self) -> u32 {
        (1u32 << self.id_bits) - 1
    }

    /// The largest displacement field; it means "this far or more".
    fn disp_max(&self) -> u32 {
        (1u32 << disp_bits_for(self.id_bits)) - 1
    }

    /// Where the tag starts.
    fn tag_shift(&self) -> u32 {
        self.id_bits + disp_bits_for(self.id_bits)
    }

    fn tag_mask(&self) -> u32 {
        !0u32 << self.tag_shift()
    }

    fn tag(&self, hash: u64) -> u32 {
        ((hash >> 32) as u32) & self.tag_mask()
    }

    /// A slot: `tag` (in place), displacement `disp` (saturated), `id`.
    fn pack(&self, tag: u32, disp: usize, id: u32) -> u32 {
        let d = disp.min(self.disp_max() as usize) as u32;
        tag | d << self.id_bits | id
    }

    /// The displacement of the id in slot `x` at index `j`: from the slot
    /// when it is below the field's largest value, else from its hash.
    fn disp_at(&self, x: u32, j: usize, hash_of: &impl Fn(u32) -> u64) -> usize {
        let d = (x >> self.id_bits) & self.disp_max();
        if d < self.disp_max() {
            d as usize
        } else {
            self.dist(self.home(hash_of(x & self.id_mask())), j)
        }
    }

    /// Can `id` be stored with the current width?
    fn fits(&self, id: u32) -> bool {
        self.id_bits != 0 && id < self.id_mask()
    }

    /// Make room for `id` by widening the id field (shortening every tag,
    /// and in the widest tables the displacement). O(slots), no record is
    /// read.
    fn widen_for(&mut self, id: u32) {
        let bits = id_bits_for(id).max(self.id_bits);
        if bits == self.id_bits {
            return;
        }
        let (old_bits, old_mask, old_dmax) = (self.id_bits, self.id_mask(), self.disp_max());
        self.id_bits = bits;
        let (tmask, dmax) = (self.tag_mask(), self.disp_max());
        for x in self.slots.iter_mut().filter(|x| **x != NIL) {
            let (id, d) = (*x & old_mask, (*x >> old_bits) & old_dmax);
            // The new tag is a prefix of the old one (the tag only shrinks).
            *x = (*x & tmask) | d.min(dmax) << bits | id;
        }
    }

    /// Is the table sparse enough to rebuild smaller (load under 3/16)?
    pub fn wants_shrink(&self) -> bool {
        self.slots.len() > 64 && self.len * 16 < self.slots.len() * 3
    }

    /// Rebuild with a load of 3/8 (so it neither grows nor shrinks again
    /// soon). O(len + slots).
    pub fn shrink(&mut self, hash_of: impl Fn(I) -> u64) {
        let cap = ((self.len * 8).div_ceil(3)).max(8);
        if cap >= self.slots.len() {
            return;
        }
        self.rebuild(cap, |x| hash_of(I::from_raw(x)));
    }

    /// Re-place every id in a table of `cap` slots, with the id width the
    /// largest of them needs (so a compacted table gets longer tags back).
    fn rebuild(&mut self, cap: usize, hash_of: impl Fn(u32) -> u64) {
        let mask = self.id_mask();
        let old = std::mem::take(&mut self.slots);
        let ids = old.into_iter().filter(|&x| x != NIL).map(|x| x & mask);
        let items: Vec<(u64, u32)> = ids.map(|id| (hash_of(id), id)).collect();
        self.place_all(cap, items);
    }

    /// A table of `cap` slots holding exactly `items` (hash, id).
    fn place_all(&mut self, cap: usize, items: Vec<(u64, u32)>) {
        self.slots = vec![NIL; cap];
        self.id_bits = id_bits_for(items.iter().map(|x| x.1).max().unwrap_or(0));
        for (hash, id) in items {
            self.place(hash, id);
        }
    }

    /// The slot a hash probes first.
    fn home(&self, hash: u64) -> usize {
        ((hash as u32 as u64 * self.slots.len() as u64) >> 32) as usize
    }

    /// The slot after `i` (wrapping).
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.slots.len() {
            0
        } else {
            i + 1
        }
    }

    /// How far slot `j` is after slot `from` (wrapping).
    fn dist(&self, from: usize, j: usize) -> usize {
        if j >= from {
            j - from
        } else {
            j + self.slots.len() - from
        }
    }

    /// Record `from` (found by `hash`) now has id `to`.
    pub fn replace(&mut self, hash: u64, from: I, to: I) -> bool {
        let (from, to) = (from.raw(), to.raw());
        if self.slots.is_empty() {
            return false;
        }
        if !self.fits(to) {
            self.widen_for(to);
        }
        let mask = self.id_mask();
        let mut i = self.home(hash);
        loop {
            match self.slots[i] {
                NIL => return false,
                x if x & mask == from => {
                    self.slots[i] = to | (x & !mask);
                    return true;
                }
                _ => i = self.next(i),
            }
        }
    }

    /// The id whose record `is` the wanted one.
    pub fn find(&self, hash: u64, mut is: impl FnMut(I) -> bool) -> Option<I> {
        if self.slots.is_empty() {
            return None;
        }
        let (t, tmask, mask) = (self.tag(hash), self.tag_mask(), self.id_mask());
        let mut i = self.home(hash);
        loop {
            let slot = self.slots[i];
            if slot == NIL {
                return None;
            }
            if slot & tmask == t && is(I::from_raw(slot & mask)) {
                return Some(I::from_raw(slot & mask));
            }
            i = self.next(i);
        }
    }

    /// Every id of `hash`'s probe run whose tag matches: the ids that may
    /// be records with that hash (a table holding several ids of equal
    /// hash, as leases sharing a key, yields them all).
    pub fn candidates(&self, hash: u64) -> impl Iterator<Item = I> + '_ {
        let (t, tmask, mask) = (self.tag(hash), self.tag_mask(), self.id_mask());
        let mut i = if self.slots.is_empty() {
            None
        } else {
            Some(self.home(hash))
        };
        std::iter::from_fn(move || loop {
            let at = i?;
            let slot = *self.slots.get(at)?;
            if slot == NIL {
                i = None;
                return None;
            }
            i = Some(self.next(at));
            if slot & tmask == t {
                return Some(I::from_raw(slot & mask));
            }
        })
    }

    /// Does the table need to grow before one more id goes in?
    fn full(&self) -> bool {
        (self.len + 1) * 4 > self.slots.len() * 3
    }

    /// The size a full table grows to.
    fn grown(&self) -> usize {
        (self.slots.len() + self.slots.len() / 2).max(8)
    }

    /// Add `id` (not present yet). `hash_of` gives the hash of any stored id
    /// (needed when the table grows).
    pub fn insert(&mut self, hash: u64, id: I, hash_of: impl Fn(I) -> u64) {
        if self.full() {
            self.rebuild(self.grown(), |x| hash_of(I::from_raw(x)));
        }
        self.add(hash, id.raw());
    }

    /// `insert`, where growing takes the stored ids with their hashes from
    /// `all` (every id stored, and maybe `id` itself): the records in their
    /// slab's order, read front to back, where `hash_of` would read them in
    /// the table's order, one cache miss each in a large queue.
    pub fn insert_with<It: Iterator<Item = (u64, I)>>(
        &mut self,
        hash: u64,
        id: I,
        all: impl FnOnce() -> It,
    ) {
        let id = id.raw();
        if self.full() {
            let mut items = Vec::with_capacity(self.len + 1);
            items.extend(all().map(|(h, x)| (h, x.raw())).filter(|x| x.1 != id));
            if items.len() == self.len {
                self.place_all(self.grown(), items);
            } else {
                // `all` disagrees with the table (a bug): grow from the
                // table itself instead of losing ids.
                let known: std::collections::HashMap<u32, u64> =
                    items.into_iter().map(|(h, i)| (i, h)).collect();
                self.rebuild(self.grown(), |i| known.get(&i).copied().unwrap_or(0));
            }
        }
        self.add(hash, id);
    }

    fn add(&mut self, hash: u64, id: u32) {
        if !self.fits(id) {
            self.widen_for(id);
        }
        self.place(hash, id);
        self.len += 1;
    }

    fn place(&mut self, hash: u64, id: u32) {
        let mut i = self.home(hash);
        let mut d = 0;
        while self.slots[i] != NIL {
            i = self.next(i);
            d += 1;
        }
        self.slots[i] = self.pack(self.tag(hash), d, id);
    }

    /// Remove `id` (found by `hash`). `hash_of` gives the hash of a stored
    /// id: needed only for ids displaced too far to say so in their slot.
    pub fn remove(&mut self, hash: u64, id: I, hash_of: impl Fn(I) -> u64) -> bool {
        let id = id.raw();
        let hash_of = |x: u32| hash_of(I::from_raw(x));
        if self.slots.is_empty() {
            return false;
        }
        let mask = self.id_mask();
        let mut i = self.home(hash);
        loop {
            match self.slots[i] {
                NIL => return false,
                x if x & mask == id => break,
                _ => i = self.next(i),
            }
        }
        // Backward shift: pull later entries of the probe run into the hole
        // when their home slot is at or before it.
        let tmask = self.tag_mask();
        let mut hole = i;
        let mut j = self.next(i);
        loop {
            let x = self.slots[j];
            if x == NIL {
                break;
            }
            let disp = self.disp_at(x, j, &hash_of);
            let gap = self.dist(hole, j);
            if disp >= gap {
                self.slots[hole] = self.pack(x & tmask, disp - gap, x & mask);
                hole = j;
            }
            j = self.next(j);
        }
        self.slots[hole] = NIL;
        self.len -= 1;
        if self.len == 0 {
            self.slots = Vec::new();
        }
        true
    }

    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 4
    }

    /// Does every slot's displacement field agree with its id's hash (for
    /// tests)?
    #[cfg(test)]
    fn displacements_agree(&self, hash_of: impl Fn(u32) -> u64) -> bool {
        let mask = self.id_mask();
        self.slots.iter().enumerate().all(|(j, &x)| {
            if x == NIL {
                return true;
            }
            let d = self.dist(self.home(hash_of(x & mask)), j);
            let field = ((x >> self.id_bits) & self.disp_max()) as usize;
            field == d.min(self.disp_max() as usize)
                && x & self.tag_mask() == self.tag(hash_of(x & mask))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::containers::slab::{Slab, MAX_ID};
    use std::collections::HashMap;

    #[test]
    fn id_table_matches_hashmap() {
        // Keys with deliberately colliding hashes (few distinct home buckets)
        // exercise probe runs and backward shifts.
        let mut keys: Slab<u64> = Slab::default();
        let mut t = IdTable::default();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        // Home buckets from the low bits (few of them), tags from the top two.
        let h = |k: u64| (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7 & 0x3f) | (k % 4) << 62;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = x % 300;
            let found = t.find(h(k), |id| keys[id] == k);
            assert_eq!(found, model.get(&k).copied());
            match found {
                Some(id) if x.is_multiple_of(3) => {
                    assert!(t.remove(h(k), id, |i| h(keys[i])));
                    keys.remove(id);
                    model.remove(&k);
                }
                None => {
                    let id = keys.insert(k).unwrap();
                    t.insert(h(k), id, |i| h(keys[i]));
                    model.insert(k, id);
                }
                _ => {}
            }
            assert_eq!(t.len(), model.len());
        }
        for (k, id) in &model {
            assert_eq!(t.find(h(*k), |i| keys[i] == *k), Some(*id));
        }
        assert!(t.displacements_agree(|i| h(keys[i])));
    }

    #[test]
    fn id_table_displacements_stay_exact() {
        // Long probe runs (few home slots) and every way in: insert,
        // insert_with growing from the records, removal by backward shift
        // (which must move each id by its displacement, reading the hash
        // only when the slot cannot say), replace, widening, shrinking.
        let h = |k: u64| (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 3 & 0x7) | k << 40;
        let mut keys: Slab<u64> = Slab::default();
        let mut t = IdTable::default();
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let reads = std::cell::Cell::new(0usize);
        for step in 0..40_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = x % 700;
            match model.get(&k).copied() {
                Some(id) if x % 5 < 2 => {
                    assert!(t.remove(h(k), id, |i| {
                        reads.set(reads.get() + 1);
                        h(keys[i])
                    }));
                    keys.remove(id);
                    model.remove(&k);
                }
                None => {
                    let id = keys.insert(k).unwrap();
                    if step.is_multiple_of(2) {
                        t.insert(h(k), id, |i| h(keys[i]));
                    } else {
                        t.insert_with(h(k), id, || keys.iter().map(|(i, k)| (h(*k), i)));
                    }
                    model.insert(k, id);
                }
                _ => {}
            }
            if step.is_multiple_of(1000) {
                assert!(t.displacements_agree(|i| h(keys[i])), "step {step}");
            }
            assert_eq!(t.len(), model.len());
        }
        // Far-displaced ids exist here, so some removals read hashes; the
        // others did not.
        assert!(reads.get() > 0);
        for (k, id) in &model {
            assert_eq!(t.find(h(*k), |i| keys[i] == *k), Some(*id));
            assert_eq!(t.candidates(h(*k)).filter(|&i| keys[i] == *k).count(), 1);
        }
        assert!(t.displacements_agree(|i| h(keys[i])));
        // A replace keeps the displacement; a wide id widens in place.
        let (&k, &id) = model.iter().next().unwrap();
        assert!(t.replace(h(k), id, MAX_ID - 1));
        assert_eq!(t.id_bits, 30);
        let hk = |i: u32| if i == MAX_ID - 1 { h(k) } else { h(keys[i]) };
        assert!(t.displacements_agree(hk));
        assert_eq!(t.find(h(k), |i| i == MAX_ID - 1), Some(MAX_ID - 1));
        assert!(t.replace(h(k), MAX_ID - 1, id));
        for (k, id) in model.clone() {
            assert!(t.remove(h(k), id, |i| h(keys[i])));
            keys.remove(id);
            model.remove(&k);
            if model.len().is_multiple_of(97) {
                assert!(t.displacements_agree(|i| h(keys[i])));
            }
        }
        assert!(t.is_empty());
    }

    #[test]
    fn id_table_candidates_yield_every_id_of_a_shared_hash() {
        let mut t = IdTable::default();
        let h = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for id in 0..50u32 {
            // ids 0..10 share one hash; the others differ.
            let k = if id < 10 { 7 } else { id as u64 + 100 };
            t.insert(h(k), id, |i| h(if i < 10 { 7 } else { i as u64 + 100 }));
        }
        let mut same: Vec<u32> = t.candidates(h(7)).filter(|&i| i < 10).collect();
        same.sort_unstable();
        assert_eq!(same, (0..10).collect::<Vec<_>>());
        assert_eq!(IdTable::<u32>::default().candidates(h(7)).count(), 0);
    }

    #[test]
    fn id_table_widens_and_narrows_its_ids_without_losing_any() {
        // Ids far apart (as a slab's free list and compaction make them):
        // each width change must keep every entry findable. Keys are the
        // `u64`s in `model`, ids are what the table stores.
        let h = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut model: HashMap<u32, u64> = HashMap::new();
        let mut t = IdTable::default();
        let mut ids: Vec<u32> = (0..300u32).collect();
        ids.extend((17..30).map(|b| (1u32 << b) - 3));
        ids.push(MAX_ID - 1);
        for (n, &id) in ids.iter().enumerate() {
            let key = 1_000_003 * id as u64 + 7;
            t.insert(h(key), id, |x| h(model[&x]));
            model.insert(id, key);
            if n % 37 == 0 || id > 300 {
                for (&i, &k) in &model {
                    assert_eq!(t.find(h(k), |x| model[&x] == k), Some(i));
                }
            }
        }
        assert_eq!(t.id_bits, 30, "the largest id needs the widest field");
        // A hash with other top bits never reaches the comparison.
        let (&big, &kbig) = model.iter().max().unwrap();
        assert_eq!(t.find(h(kbig) ^ (1 << 63), |x| x == big), None);
        // Compaction moves the large ids down...
        let large: Vec<u32> = model.keys().copied().filter(|&i| i >= 300).collect();
        for (n, id) in large.into_iter().enumerate() {
            let key = model.remove(&id).unwrap();
            let to = 1000 + n as u32;
            assert!(t.replace(h(key), id, to));
            model.insert(to, key);
        }
        // ... and ids leave; the rebuilt table narrows again.
        for id in 0..280u32 {
            let key = model.remove(&id).unwrap();
            assert!(t.remove(h(key), id, |x| h(model[&x])));
        }
        assert!(t.wants_shrink());
        t.shrink(|x| h(model[&x]));
        assert_eq!(t.id_bits, 16);
        assert_eq!(t.len(), model.len());
        for (&i, &k) in &model {
            assert_eq!(t.find(h(k), |x| model[&x] == k), Some(i));
        }
    }
}

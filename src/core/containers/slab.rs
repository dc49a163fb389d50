//! Compact storage for the queue's records: a chunked slab addressed by
//! `u32` ids (the id table that finds them by key is `id_table.rs`).
//!
//! Why not `HashMap<JobKey, Job>` and `Vec<Node>`: a queued job must cost
//! little beyond its payload (docs/design.md, "Memory"). A `HashMap` keeps
//! its entries inline at a load factor between 44% and 87%, so at a million
//! jobs it spends more on empty buckets than on jobs; a `Vec` doubles and
//! copies everything when it grows. Here records live in chunks of 256 KiB
//! (a jemalloc size class; no copy when another chunk is added, at most one
//! chunk of slack), the first of which grows by doubling so a small queue
//! stays small, and the lookup table holds only 4-byte ids.
//!
//! Both give memory back when a queue shrinks (after a deadline rush):
//! a slab whose records fill less than a quarter of its slots *shrinks*:
//! the records above a new bound (twice the records left) move, a few per
//! command, into free slots below it (the queue fixes every link to a moved
//! record), and the chunks above the bound are freed. An id table whose load
//! falls under 3/16 is rebuilt at half its size or less. Both thresholds leave
//! room to grow again first, so a queue that oscillates around a size does
//! not thrash.

use std::marker::PhantomData;

/// The id that means "none".
pub const NIL: u32 = u32::MAX;

/// Ids stay below this (two high bits stay free for tags).
pub const MAX_ID: u32 = (1 << 30) - 1;

/// Bytes per chunk: a jemalloc size class, so a chunk wastes nothing.
const CHUNK_BYTES: usize = 256 << 10;

/// Slabs smaller than this many slots never shrink (not worth it).
const MIN_SHRINK_SLOTS: usize = 1024;

/// The type of a slab's ids: a `u32` (tests, leases) or a
/// `#[repr(transparent)]` newtype of one (`core::ids`), so a slab of jobs
/// cannot be indexed by a collation's id.
pub trait SlabId: Copy + Eq + std::fmt::Debug {
    fn from_raw(raw: u32) -> Self;
    fn raw(self) -> u32;
}

impl SlabId for u32 {
    #[inline]
    fn from_raw(raw: u32) -> Self {
        raw
    }
    #[inline]
    fn raw(self) -> u32 {
        self
    }
}

/// Records addressed by `u32` ids; freed ids are reused, last freed first.
#[derive(Debug)]
pub struct Slab<T, I = u32> {
    chunks: Vec<Vec<Option<T>>>,
    free: Vec<u32>,
    len: usize,
    /// While shrinking: the records at ids >= this move below it, and the
    /// free list holds only ids below it.
    bound: Option<u32>,
    /// While shrinking: the slots at and above this id were looked at
    /// (see `next_move_where`); the scan goes on below it.
    cursor: u32,
    /// Records left when the last shrink ended with records it could not
    /// move above its bound: the next shrink waits until half of them are
    /// gone, so unmovable records do not make every command scan again.
    settled: usize,
    ids: PhantomData<fn() -> I>,
}

impl<T: Clone, I> Clone for Slab<T, I> {
    fn clone(&self) -> Self {
        Slab {
            chunks: self.chunks.clone(),
            free: self.free.clone(),
            len: self.len,
            bound: self.bound,
            cursor: self.cursor,
            settled: self.settled,
            ids: PhantomData,
        }
    }
}

impl<T, I> Default for Slab<T, I> {
    fn default() -> Self {
        Slab {
            chunks: Vec::new(),
            free: Vec::new(),
            len: 0,
            bound: None,
            cursor: 0,
            settled: usize::MAX,
            ids: PhantomData,
        }
    }
}

impl<T, I: SlabId> Slab<T, I> {
    /// Records per chunk (a constant per record type).
    const PER: usize = {
        let n = CHUNK_BYTES / std::mem::size_of::<Option<T>>();
        if n == 0 {
            1
        } else {
            n
        }
    };

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Can another record be stored? (ids are bounded by `MAX_ID`)
    pub fn has_room(&self) -> bool {
        !self.free.is_empty() || self.slots() < MAX_ID as usize
    }

    fn slots(&self) -> usize {
        match self.chunks.last() {
            None => 0,
            Some(last) => (self.chunks.len() - 1) * Self::PER + last.len(),
        }
    }

    /// Store `v`; returns its id, or `None` when `has_room` is false.
    pub fn insert(&mut self, v: T) -> Option<I> {
        if self.bound.is_some() && self.free.is_empty() {
            // Grown back while shrinking: give up the shrink.
            self.cancel_shrink();
        }
        if let Some(id) = self.free.pop() {
            if let Some(slot) = self.slot_mut(id) {
                *slot = Some(v);
                self.len += 1;
                return Some(I::from_raw(id));
            }
            return None;
        }
        let id = self.slots();
        if id >= MAX_ID as usize {
            return None;
        }
        match self.chunks.last_mut() {
            Some(last) if last.len() < Self::PER => {
                if last.len() == last.capacity() {
                    // Only the first chunk grows (a small queue must not
                    // pay for a whole chunk); the others are born full size.
                    let more = last.capacity().max(4).min(Self::PER - last.len());
                    last.reserve_exact(more);
                }
                last.push(Some(v));
            }
            _ => {
                let cap = if self.chunks.is_empty() { 4 } else { Self::PER };
                let mut chunk = Vec::with_capacity(cap);
                chunk.push(Some(v));
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
        Some(I::from_raw(id as u32))
    }

    /// Take the record out; its id becomes free.
    pub fn remove(&mut self, id: I) -> Option<T> {
        let id = id.raw();
        let v = self.slot_mut(id)?.take()?;
        self.len -= 1;
        if self.len == 0 {
            // Give the memory back when the slab empties.
            *self = Slab::default();
        } else if self.bound.is_none_or(|b| id < b) {
            self.free.push(id);
        }
        Some(v)
    }

    // ------------------------------------------------------------ shrinking

    /// Should the slab shrink (or is it shrinking)?
    pub fn wants_shrink(&self) -> bool {
        self.bound.is_some()
            || (self.slots() >= MIN_SHRINK_SLOTS
                && self.len * 4 < self.slots()
                && self.len.saturating_mul(2) < self.settled)
    }

    /// The next record to move while shrinking, and the free id below the
    /// bound it goes to; starts a shrink if the slab is sparse. `None` when
    /// there is nothing (more) to move: the slab has then freed its chunks
    /// above the bound.
    pub fn next_move(&mut self) -> Option<(I, I)> {
        self.next_move_where(|_| true)
    }

    /// `next_move`, passing over the records `movable` refuses: they stay
    /// where they are, and the slab frees what is above the highest of them.
    /// Each slot above the bound is looked at once per shrink.
    pub fn next_move_where(&mut self, movable: impl Fn(&T) -> bool) -> Option<(I, I)> {
        let bound = match self.bound {
            Some(b) => b,
            None if self.wants_shrink() => self.begin_shrink(),
            None => return None,
        };
        // Vacant slots at the very top go first.
        while self.slots() > bound as usize
            && self.slots() > self.cursor as usize
            && self.get_raw(self.slots() as u32 - 1).is_none()
        {
            self.pop_vacant_top();
        }
        // The highest movable record at or above the bound, below the
        // slots already looked at.
        let mut id = self.slots().min(self.cursor as usize) as u32;
        while id > bound {
            id -= 1;
            self.cursor = id;
            if self.get_raw(id).is_some_and(&movable) {
                let Some(to) = self.free.pop() else {
                    self.cancel_shrink();
                    return None;
                };
                return Some((I::from_raw(id), I::from_raw(to)));
            }
        }
        let keep = self.unmoved_top(bound);
        self.finish_shrink(keep);
        None
    }

    /// One past the highest record left at or above `bound` (or `bound`).
    fn unmoved_top(&self, bound: u32) -> u32 {
        (bound..self.slots() as u32)
            .rev()
            .find(|&id| self.get_raw(id).is_some())
            .map_or(bound, |id| id + 1)
    }

    /// Move record `from` to free slot `to` (from `next_move`). Returns
    /// false, changing nothing, if `from` holds no record or `to` is not a
    /// vacant slot.
    pub fn move_record(&mut self, from: I, to: I) -> bool {
        let (from, to) = (from.raw(), to.raw());
        if !matches!(self.slot_mut(to), Some(None)) {
            return false;
        }
        let Some(v) = self.slot_mut(from).and_then(Option::take) else {
            return false;
        };
        match self.slot_mut(to) {
            Some(slot) => {
                *slot = Some(v);
                true
            }
            None => {
                // Not reached (checked above): put the record back.
                if let Some(slot) = self.slot_mut(from) {
                    *slot = Some(v);
                }
                false
            }
        }
    }

    /// Start shrinking: the bound is twice the records (at least one
    /// chunk's worth of a small slab), and the free list keeps ids below it.
    fn begin_shrink(&mut self) -> u32 {
        let want = (self.len * 2).max(64);
        let bound = if want <= Self::PER {
            want
        } else {
            want.div_ceil(Self::PER) * Self::PER
        }
        .min(self.slots()) as u32;
        self.free.retain(|&id| id < bound);
        self.bound = Some(bound);
        self.cursor = self.slots() as u32;
        bound
    }

    /// Stop shrinking without finishing (the slab grew back): the free ids
    /// at or above the bound go back to the free list.
    fn cancel_shrink(&mut self) {
        let Some(bound) = self.bound.take() else {
            return;
        };
        for id in bound as usize..self.slots() {
            if self.get_raw(id as u32).is_none() {
                self.free.push(id as u32);
            }
        }
    }

    /// Drop the last slot (vacant) of the slab.
    fn pop_vacant_top(&mut self) {
        if let Some(last) = self.chunks.last_mut() {
            if last.last().is_some_and(Option::is_some) {
                return;
            }
            last.pop();
            if last.is_empty() {
                self.chunks.pop();
            }
        }
    }

    /// Every record is below `top`: free what is above it. The free ids
    /// between the shrink's bound and `top` (records that could not move)
    /// are free again.
    fn finish_shrink(&mut self, top: u32) {
        let bound = self.bound.take().unwrap_or(top);
        self.settled = if top > bound { self.len } else { usize::MAX };
        while self.slots() > top as usize {
            let before = self.slots();
            self.pop_vacant_top();
            if self.slots() == before {
                break;
            }
        }
        for id in bound..top {
            if self.get_raw(id).is_none() {
                self.free.push(id);
            }
        }
        if let Some(last) = self.chunks.last_mut() {
            last.shrink_to(last.len().max(4));
        }
        self.chunks.shrink_to_fit();
        let slots = self.slots() as u32;
        self.free.retain(|&id| id < slots);
        self.free.shrink_to_fit();
    }

    fn slot_mut(&mut self, id: u32) -> Option<&mut Option<T>> {
        let id = id as usize;
        self.chunks.get_mut(id / Self::PER)?.get_mut(id % Self::PER)
    }

    pub fn get(&self, id: I) -> Option<&T> {
        self.get_raw(id.raw())
    }

    fn get_raw(&self, id: u32) -> Option<&T> {
        let id = id as usize;
        self.chunks
            .get(id / Self::PER)?
            .get(id % Self::PER)?
            .as_ref()
    }

    pub fn get_mut(&mut self, id: I) -> Option<&mut T> {
        self.slot_mut(id.raw())?.as_mut()
    }

    /// Every live record with its id (in id order).
    pub fn iter(&self) -> impl Iterator<Item = (I, &T)> {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk.iter().enumerate().filter_map(move |(i, v)| {
                v.as_ref()
                    .map(|v| (I::from_raw((c * Self::PER + i) as u32), v))
            })
        })
    }

    /// Heap bytes held (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>() * std::mem::size_of::<Option<T>>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<Option<T>>>()
            + self.free.capacity() * 4
    }
}

impl<T, I: SlabId> std::ops::Index<I> for Slab<T, I> {
    type Output = T;
    /// Ids come from the queue's own links, never from clients: a vacant id
    /// here is a bug in the queue (caught by the command guard).
    fn index(&self, id: I) -> &T {
        match self.get(id) {
            Some(v) => v,
            None => panic!("slab id {id:?} is vacant"),
        }
    }
}

impl<T, I: SlabId> std::ops::IndexMut<I> for Slab<T, I> {
    fn index_mut(&mut self, id: I) -> &mut T {
        match self.get_mut(id) {
            Some(v) => v,
            None => panic!("slab id {id:?} is vacant"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_reuses_ids_and_empties() {
        let mut s: Slab<String> = Slab::default();
        let a = s.insert("a".into()).unwrap();
        let b = s.insert("b".into()).unwrap();
        assert_eq!((a, b, s.len()), (0, 1, 2));
        assert_eq!(s.remove(a).as_deref(), Some("a"));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(a), None);
        assert_eq!(s.insert("c".into()), Some(a));
        assert_eq!(
            s.iter().map(|(i, v)| (i, v.clone())).collect::<Vec<_>>(),
            vec![(0, "c".to_string()), (1, "b".to_string())]
        );
        s.remove(0);
        s.remove(1);
        assert!(s.is_empty());
        assert_eq!(s.heap_bytes(), 0);
        for i in 0..100_000u32 {
            assert_eq!(s.insert(i.to_string()), Some(i));
        }
        assert_eq!(s[99_999], "99999");
        assert_eq!(s.get(100_000), None);
        assert_eq!(s.iter().count(), 100_000);
        // A small slab holds little: the first chunk grows with it.
        let mut small: Slab<u64> = Slab::default();
        for i in 0..10u64 {
            small.insert(i);
        }
        assert!(small.heap_bytes() < 512, "{}", small.heap_bytes());
    }
}

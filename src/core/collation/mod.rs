//! Collations (`user.<id>` / `team.<id>`): each one's stack of jobs and its
//! reservations, and their names.
//!
//! The k-th job of a stack (front = next to pop) is paired with the
//! collation's k-th earliest reservation; pairing is positional, never
//! stored. The stack is ordered by each job's stack key (`Job::skey`), the
//! reservations by their key.
//!
//! Two representations, switched with hysteresis:
//! - **small** (the usual case, one student's few submissions): the stack
//!   is a list through the jobs' `link`, the reservations a list through
//!   their nodes' `aux`. Nothing is stored beyond the records; pushes at
//!   either end and the front are O(1), anything else O(m).
//! - **large** (more than `PROMOTE_ABOVE` jobs): two order-statistic trees,
//!   the stack by stack key and the reservations by key; a job's `link` and
//!   a reservation's `aux` hold their node in those trees. Every operation
//!   is O(log m): position, k-th job and reservation, insert anywhere.
//!   Costs 56 bytes per job beyond the small form (a tree node holds one
//!   typed id, no second word).

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::num::NonZeroU32;

mod members;
mod relocate;

use super::config::valid_collation_name;
use super::containers::idmap::{fmix64, IdMap};
use super::containers::slab::{SlabId, NIL};
use super::containers::treap::{IndexKey, Iter as IndexIter, OrderIndex};
use super::containers::{IdTable, Slab};
use super::error::QueueError;
use super::ids::{CollId, JobId, NodeId, ResNode, StackNode};
use super::names::{render, PackedName};
use super::reservation::NodeKey;

/// A collation grows into the large form beyond this many jobs...
pub const PROMOTE_ABOVE: u32 = 64;
/// ...and goes back to the small form below this many.
pub const DEMOTE_BELOW: u32 = 16;

/// `Collation::head` of a large collation.
const LARGE: u32 = NIL - 1;

/// One collation's record (32 bytes).
#[derive(Clone, Debug)]
pub(crate) struct Collation {
    /// The name, or `PackedName::LONG` (then it is in `long_names`).
    name: PackedName,
    /// Small form: stack front and back (`NIL` when empty). Large: `LARGE`.
    head: JobId,
    tail: JobId,
    /// Small form: reservations, earliest and latest.
    rhead: NodeId,
    rtail: NodeId,
    /// Jobs in the stack (= reservations).
    len: u32,
    /// What names the collation: the jobs in its stack, single and held
    /// jobs whose config names it, parked jobs, its submission window. The
    /// record goes when the last one goes.
    refs: NonZeroU32,
}

impl Collation {
    fn large(&self) -> bool {
        self.head.raw() == LARGE
    }

    /// Jobs in its stack (= its reservations).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// References held on it.
    pub fn refs(&self) -> u32 {
        self.refs.get()
    }
}

/// A large collation's stack: stack key -> job.
pub(crate) type StackTree = OrderIndex<i64, JobId, (), StackNode>;
/// A large collation's reservations: reservation key -> node of the
/// global order.
pub(crate) type ResTree = OrderIndex<NodeKey, NodeId, (), ResNode>;

/// The trees of a large collation.
#[derive(Clone, Debug)]
struct Large {
    stack: StackTree,
    res: ResTree,
}

fn corrupt(msg: &str) -> QueueError {
    QueueError::Corrupt(msg.to_string())
}

#[derive(Clone, Debug)]
pub(crate) struct Collations {
    recs: Slab<Collation, CollId>,
    /// Collation ids by name (names are chosen by clients: keyed hash).
    by_name: IdTable<CollId>,
    hasher: RandomState,
    /// The key of packed names' hash (random per queue).
    key: u64,
    /// Names too long to pack (collation id -> name).
    long_names: IdMap<CollId, Box<str>>,
    /// The trees of the large collations.
    large: IdMap<CollId, Box<Large>>,
    /// Collations with a non-empty stack.
    active: usize,
    /// Large collations whose trees fell under a quarter full since the
    /// last compaction (`relocate.rs` rebuilds them).
    sparse: Vec<CollId>,
}

impl Default for Collations {
    fn default() -> Self {
        Collations {
            recs: Slab::default(),
            by_name: IdTable::default(),
            hasher: RandomState::new(),
            key: RandomState::new().hash_one(0x6f72_6361_u64),
            long_names: IdMap::default(),
            large: IdMap::default(),
            active: 0,
            sparse: Vec::new(),
        }
    }
}

/// Jobs (`T = JobId`) or reservations (`T = NodeId`) of one collation, in
/// order: along the small form's list, or through a large form's tree
/// (keyed by `K`, nodes `N`).
pub(crate) enum Members<'a, K, T, N> {
    Small {
        cur: T,
        next: Box<dyn Fn(T) -> T + 'a>,
    },
    Large(IndexIter<'a, K, T, (), N>, &'a OrderIndex<K, T, (), N>),
    /// A large collation whose trees are missing (only a corrupt queue).
    Empty,
}

/// A collation's stack, front first.
pub(crate) type StackMembers<'a> = Members<'a, i64, JobId, StackNode>;
/// A collation's reservations, earliest first.
pub(crate) type ResMembers<'a> = Members<'a, NodeKey, NodeId, ResNode>;

impl<K: IndexKey, T: SlabId, N: SlabId> Iterator for Members<'_, K, T, N> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            Members::Small { cur, next } => (cur.raw() != NIL).then(|| {
                let x = *cur;
                *cur = next(x);
                x
            }),
            Members::Large(it, t) => it.next().map(|n| t.val(n)),
            Members::Empty => None,
        }
    }
}

impl Collations {
    /// Collation records (some may have an empty stack).
    pub fn records(&self) -> usize {
        self.recs.len()
    }

    /// Collations with jobs in their stack.
    pub fn active(&self) -> usize {
        self.active
    }

    /// Every collation record with its id.
    pub fn iter(&self) -> impl Iterator<Item = (CollId, &Collation)> {
        self.recs.iter()
    }

    /// The collations with jobs in their stack.
    pub fn with_stack(&self) -> impl Iterator<Item = CollId> + '_ {
        self.recs
            .iter()
            .filter(|(_, c)| c.len > 0)
            .map(|(id, _)| id)
    }

    /// Jobs in all stacks.
    pub fn stacked(&self) -> usize {
        self.recs.iter().map(|(_, c)| c.len as usize).sum()
    }

    pub fn get(&self, c: CollId) -> Option<&Collation> {
        self.recs.get(c)
    }

    pub fn len_of(&self, c: CollId) -> usize {
        self.recs.get(c).map_or(0, |r| r.len as usize)
    }

    pub fn is_large(&self, c: CollId) -> bool {
        self.recs.get(c).is_some_and(Collation::large)
    }

    pub fn has_room(&self) -> bool {
        self.recs.has_room()
    }

    /// Hash of a name: of its packed form, or of the text of a long name.
    /// A packed name is one word: a keyed 64-bit mix of it (murmur3's
    /// finalizer of the word xor a random per-queue key: a bijection, so two
    /// packed names never share a hash, and a client who does not know the
    /// key cannot aim names at one slot). Long names: SipHash.
    fn name_hash(&self, packed: Option<&PackedName>, long: &str) -> u64 {
        match packed {
            Some(p) => fmix64(p.word() ^ self.key),
            None => self.hasher.hash_one(long),
        }
    }

    /// Hash of stored collation `c`'s name.
    pub(crate) fn stored_name_hash(&self, c: CollId) -> u64 {
        let name = &self.recs[c].name;
        if name.is_long() {
            let long = self.long_names.get(&c).map_or("", |s| &**s);
            self.name_hash(None, long)
        } else {
            self.name_hash(Some(name), "")
        }
    }

    pub fn find(&self, name: &str) -> Option<CollId> {
        let packed = PackedName::pack(name);
        let h = self.name_hash(packed.as_ref(), name);
        let (recs, long) = (&self.recs, &self.long_names);
        self.by_name.find(h, |id| match &packed {
            Some(p) => recs.get(id).is_some_and(|c| c.name == *p),
            None => {
                recs.get(id).is_some_and(|c| c.name.is_long())
                    && long.get(&id).is_some_and(|s| &**s == name)
            }
        })
    }

    /// Collation `c`'s name.
    pub fn name_of(&self, c: CollId) -> Cow<'_, str> {
        render(&self.recs[c].name, self.long_names.get(&c).map(|s| &**s))
    }

    /// Is `name` a collation with jobs in its stack?
    pub fn has_stack(&self, name: &str) -> bool {
        self.find(name).is_some_and(|c| self.recs[c].len > 0)
    }

    /// The id of collation `name` with one more reference, created (with an
    /// empty stack) if needed.
    pub fn acquire(&mut self, name: &str) -> Result<CollId, QueueError> {
        if let Some(c) = self.find(name) {
            let rec = &mut self.recs[c];
            rec.refs = rec.refs.checked_add(1).ok_or(QueueError::Full)?;
            return Ok(c);
        }
        let packed = PackedName::pack(name);
        let c = self
            .recs
            .insert(Collation {
                name: packed.unwrap_or(PackedName::LONG),
                head: JobId::NIL,
                tail: JobId::NIL,
                rhead: NodeId::NIL,
                rtail: NodeId::NIL,
                len: 0,
                refs: NonZeroU32::MIN,
            })
            .ok_or(QueueError::Full)?;
        if packed.is_none() {
            self.long_names.insert(c, name.into());
        }
        let h = self.name_hash(packed.as_ref(), name);
        let mut table = std::mem::take(&mut self.by_name);
        table.insert_with(h, c, || {
            self.recs
                .iter()
                .map(|(id, _)| (self.stored_name_hash(id), id))
        });
        self.by_name = table;
        Ok(c)
    }

    /// One more reference to existing collation `c`.
    pub fn add_ref(&mut self, c: CollId) -> Result<(), QueueError> {
        let rec = self
            .recs
            .get_mut(c)
            .ok_or_else(|| corrupt("reference to a missing collation"))?;
        rec.refs = rec.refs.checked_add(1).ok_or(QueueError::Full)?;
        Ok(())
    }

    /// Drop one reference to collation `c`; the record goes with the last.
    pub fn release(&mut self, c: CollId) {
        let last = match self.recs.get_mut(c) {
            Some(rec) => match NonZeroU32::new(rec.refs.get() - 1) {
                Some(r) => {
                    rec.refs = r;
                    false
                }
                None => true,
            },
            None => return,
        };
        if last {
            let h = self.stored_name_hash(c);
            let mut table = std::mem::take(&mut self.by_name);
            table.remove(h, c, |id| self.stored_name_hash(id));
            self.by_name = table;
            self.recs.remove(c);
            self.long_names.remove(&c);
            self.large.remove(&c);
        }
    }

    /// The collations' own invariants: each record is stored in its
    /// canonical form under a valid name and found by it; the name table,
    /// the side tables and the active count agree with the records. (Their
    /// stacks and reservations against the jobs and the order are
    /// `check_members`; their reference counts `check.rs`'s.)
    pub fn check(&self) -> Result<(), String> {
        let mut active = 0usize;
        for (c, coll) in self.recs.iter() {
            let name = &*self.name_of(c);
            if coll.name.is_long() != self.long_names.contains_key(&c)
                || PackedName::pack(name).is_some_and(|p| p != coll.name)
            {
                return Err(format!("collation {name:?} is stored in the wrong form"));
            }
            if !valid_collation_name(name) {
                return Err(format!("invalid collation name {name:?}"));
            }
            if self.find(name) != Some(c) {
                return Err(format!("collation {name} cannot be found by its name"));
            }
            if coll.len > 0 {
                active += 1;
            }
        }
        if self.by_name.len() != self.recs.len()
            || active != self.active
            || self.long_names.keys().any(|c| self.recs.get(*c).is_none())
            || self.large.keys().any(|c| !self.is_large(*c))
        {
            return Err("the collation table and the collations disagree".into());
        }
        Ok(())
    }

    /// Heap bytes held (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        let names: usize = self.long_names.values().map(|n| n.len() + 16).sum();
        let large: usize = self
            .large
            .values()
            .map(|l| std::mem::size_of::<Large>() + l.stack.heap_bytes() + l.res.heap_bytes())
            .sum();
        self.recs.heap_bytes()
            + self.by_name.heap_bytes()
            + names
            + self.long_names.capacity() * 24
            + large
            + self.large.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collation_record_is_compact() {
        // docs/design.md, "Memory": the name packed in 8 bytes, six u32.
        assert_eq!(std::mem::size_of::<Option<Collation>>(), 32);
    }

    #[test]
    fn large_collation_trees_are_compact() {
        // docs/design.md: a large collation's trees cost 56 bytes per job
        // (a stack node 24, a reservation node 32).
        assert_eq!(StackTree::NODE_BYTES, 24);
        assert_eq!(ResTree::NODE_BYTES, 32);
    }
}

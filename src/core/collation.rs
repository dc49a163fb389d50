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

use super::containers::idmap::{fmix64, IdMap};
use super::containers::slab::{SlabId, NIL};
use super::containers::treap::{IndexKey, Iter as IndexIter, OrderIndex};
use super::containers::{IdTable, Slab};
use super::error::QueueError;
use super::ids::{CollId, JobId, NodeId, ResNode, StackNode};
use super::job::{CollRef, Job, JobLink};
use super::names::{render, PackedName};
use super::reservation::{GlobalOrder, NodeKey, Owner, ResLink};

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
    pub name: PackedName,
    /// Small form: stack front and back (`NIL` when empty). Large: `LARGE`.
    pub head: JobId,
    pub tail: JobId,
    /// Small form: reservations, earliest and latest.
    pub rhead: NodeId,
    pub rtail: NodeId,
    /// Jobs in the stack (= reservations).
    pub len: u32,
    /// Jobs naming the collation: those in the stack, single and held jobs
    /// whose config names it. The record goes when the last one goes.
    pub refs: NonZeroU32,
}

impl Collation {
    pub(crate) fn large(&self) -> bool {
        self.head.raw() == LARGE
    }
}

/// A large collation's stack: stack key -> job.
pub(crate) type StackTree = OrderIndex<i64, JobId, (), StackNode>;
/// A large collation's reservations: reservation key -> node of the
/// global order.
pub(crate) type ResTree = OrderIndex<NodeKey, NodeId, (), ResNode>;

/// The trees of a large collation.
#[derive(Clone, Debug)]
pub(crate) struct Large {
    pub stack: StackTree,
    pub res: ResTree,
}

fn corrupt(msg: &str) -> QueueError {
    QueueError::Corrupt(msg.to_string())
}

#[derive(Clone, Debug)]
pub(crate) struct Collations {
    pub(crate) recs: Slab<Collation, CollId>,
    /// Collation ids by name (names are chosen by clients: keyed hash).
    pub(crate) by_name: IdTable<CollId>,
    hasher: RandomState,
    /// The key of packed names' hash (random per queue).
    key: u64,
    /// Names too long to pack (collation id -> name).
    pub(crate) long_names: IdMap<CollId, Box<str>>,
    /// The trees of the large collations.
    pub(crate) large: IdMap<CollId, Box<Large>>,
    /// Collations with a non-empty stack.
    pub(crate) active: usize,
    /// Large collations whose trees fell under a quarter full since the
    /// last compaction (`compact.rs` rebuilds them).
    pub(crate) sparse: Vec<CollId>,
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

    // ------------------------------------------------------------ the stack

    /// Put job `j` (its `skey` set) into collation `c`'s stack, in stack-key
    /// order. O(1) at either end in the small form, else O(m); O(log m) in
    /// the large form.
    pub fn push(
        &mut self,
        c: CollId,
        j: JobId,
        jobs: &mut Slab<Job, JobId>,
    ) -> Result<(), QueueError> {
        let skey = jobs[j].skey;
        jobs[j].coll = CollRef::in_stack_of(c);
        let rec = &self.recs[c];
        if rec.large() {
            let large = self
                .large
                .get_mut(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let node = large
                .stack
                .insert(skey, j, ())
                .ok_or_else(|| corrupt("stack key used twice in a collation"))?;
            jobs[j].link = JobLink::stack_node(node);
        } else {
            let (head, tail) = (rec.head, rec.tail);
            if head == JobId::NIL {
                jobs[j].link = JobLink::next_job(JobId::NIL);
                let rec = &mut self.recs[c];
                rec.head = j;
                rec.tail = j;
            } else if skey < jobs[head].skey {
                jobs[j].link = JobLink::next_job(head);
                self.recs[c].head = j;
            } else if skey > jobs[tail].skey {
                jobs[tail].link = JobLink::next_job(j);
                jobs[j].link = JobLink::next_job(JobId::NIL);
                self.recs[c].tail = j;
            } else {
                // Inside: after the last job with a smaller key.
                let mut p = head;
                loop {
                    let next = jobs[p].link.as_next_job();
                    if next == JobId::NIL || skey < jobs[next].skey {
                        if next != JobId::NIL && jobs[next].skey == skey {
                            return Err(corrupt("stack key used twice in a collation"));
                        }
                        jobs[j].link = JobLink::next_job(next);
                        jobs[p].link = JobLink::next_job(j);
                        break;
                    }
                    if jobs[next].skey == skey {
                        return Err(corrupt("stack key used twice in a collation"));
                    }
                    p = next;
                }
            }
        }
        let rec = &mut self.recs[c];
        rec.len += 1;
        if rec.len == 1 {
            self.active += 1;
        }
        Ok(())
    }

    /// Take job `j` out of collation `c`'s stack; returns the position it
    /// had. The job keeps naming the collation.
    pub fn unlink(
        &mut self,
        c: CollId,
        j: JobId,
        jobs: &mut Slab<Job, JobId>,
    ) -> Result<usize, QueueError> {
        let k = if self.recs[c].large() {
            let large = self
                .large
                .get_mut(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let node = jobs[j].link.as_stack_node();
            if large.stack.get_val(node) != Some(j) {
                return Err(corrupt("job missing from its collation"));
            }
            let k = large
                .stack
                .rank(node)
                .ok_or_else(|| corrupt("job missing from its collation"))?;
            large.stack.remove(node);
            if large.wants_compaction() && !self.sparse.contains(&c) {
                self.sparse.push(c);
            }
            k
        } else {
            let (k, prev) = self.small_position(c, j, jobs)?;
            let next = jobs[j].link.as_next_job();
            let rec = &mut self.recs[c];
            if prev == JobId::NIL {
                rec.head = next;
            } else {
                jobs[prev].link = JobLink::next_job(next);
            }
            if rec.tail == j {
                rec.tail = prev;
            }
            k
        };
        let job = &mut jobs[j];
        job.coll = CollRef::new(Some(c));
        job.link = JobLink::NONE;
        let rec = &mut self.recs[c];
        rec.len -= 1;
        if rec.len == 0 {
            self.active -= 1;
        }
        Ok(k)
    }

    /// Position of a small collation's job, with its predecessor.
    fn small_position(
        &self,
        c: CollId,
        j: JobId,
        jobs: &Slab<Job, JobId>,
    ) -> Result<(usize, JobId), QueueError> {
        let rec = &self.recs[c];
        let (mut prev, mut cur, mut k) = (JobId::NIL, rec.head, 0usize);
        while cur != j {
            if cur == JobId::NIL || k > rec.len as usize {
                return Err(corrupt("job missing from its collation"));
            }
            prev = cur;
            cur = jobs[cur].link.as_next_job();
            k += 1;
        }
        Ok((k, prev))
    }

    /// Position (0 = front) of job `j` in collation `c`'s stack.
    pub fn position(
        &self,
        c: CollId,
        j: JobId,
        jobs: &Slab<Job, JobId>,
    ) -> Result<usize, QueueError> {
        if self.recs[c].large() {
            let large = self
                .large
                .get(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let node = jobs[j].link.as_stack_node();
            if large.stack.get_val(node) != Some(j) {
                return Err(corrupt("job missing from its collation"));
            }
            large
                .stack
                .rank(node)
                .ok_or_else(|| corrupt("job missing from its collation"))
        } else {
            Ok(self.small_position(c, j, jobs)?.0)
        }
    }

    /// The job at position `k` of collation `c`'s stack.
    pub fn job_at(&self, c: CollId, k: usize, jobs: &Slab<Job, JobId>) -> Option<JobId> {
        if self.recs.get(c)?.large() {
            let large = self.large.get(&c)?;
            large.stack.nth(k).map(|n| large.stack.val(n))
        } else {
            self.stack(c, jobs).nth(k)
        }
    }

    /// The front (next to pop) of collation `c`'s stack.
    pub fn front(&self, c: CollId) -> Option<JobId> {
        let rec = self.recs.get(c)?;
        if rec.large() {
            let large = self.large.get(&c)?;
            large.stack.first().map(|n| large.stack.val(n))
        } else {
            rec.head.some()
        }
    }

    /// Job ids of collation `c`'s stack, front first.
    pub fn stack<'a>(&'a self, c: CollId, jobs: &'a Slab<Job, JobId>) -> StackMembers<'a> {
        match self.recs.get(c) {
            Some(rec) if rec.large() => match self.large.get(&c) {
                Some(large) => Members::Large(large.stack.iter(), &large.stack),
                None => Members::Empty,
            },
            rec => Members::Small {
                cur: rec.map_or(JobId::NIL, |r| r.head),
                next: Box::new(move |j| jobs[j].link.as_next_job()),
            },
        }
    }

    // ----------------------------------------------------- the reservations

    /// Add node `n` (owned by `c`, already in the global order) to
    /// collation `c`'s reservations, in key order.
    pub fn add_res(
        &mut self,
        c: CollId,
        n: NodeId,
        index: &mut GlobalOrder,
    ) -> Result<(), QueueError> {
        let key = *index.key(n);
        let rec = &self.recs[c];
        if rec.large() {
            let large = self
                .large
                .get_mut(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let rn = large
                .res
                .insert(key, n, ())
                .ok_or_else(|| corrupt("duplicate reservation"))?;
            index.set_aux(n, ResLink::tree_node(rn));
            return Ok(());
        }
        let (rhead, rtail) = (rec.rhead, rec.rtail);
        if rtail == NodeId::NIL {
            index.set_aux(n, ResLink::next(NodeId::NIL));
            let rec = &mut self.recs[c];
            rec.rhead = n;
            rec.rtail = n;
        } else if *index.key(rtail) < key {
            index.set_aux(rtail, ResLink::next(n));
            index.set_aux(n, ResLink::next(NodeId::NIL));
            self.recs[c].rtail = n;
        } else if key < *index.key(rhead) {
            index.set_aux(n, ResLink::next(rhead));
            self.recs[c].rhead = n;
        } else {
            // Inside: after the last reservation below `key`.
            let mut p = rhead;
            loop {
                let next = index.aux(p).as_next();
                if next == NodeId::NIL || key < *index.key(next) {
                    index.set_aux(n, ResLink::next(next));
                    index.set_aux(p, ResLink::next(n));
                    break;
                }
                p = next;
            }
        }
        Ok(())
    }

    /// Take the `k`-th reservation out of collation `c`'s reservations (the
    /// caller removes it from the global order); returns its node.
    pub fn unlink_res_at(
        &mut self,
        c: CollId,
        k: usize,
        index: &mut GlobalOrder,
    ) -> Result<NodeId, QueueError> {
        if self.recs[c].large() {
            let large = self
                .large
                .get_mut(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let rn = large
                .res
                .nth(k)
                .ok_or_else(|| corrupt("collation has too few reservations"))?;
            let n = large.res.val(rn);
            large.res.remove(rn);
            if large.wants_compaction() && !self.sparse.contains(&c) {
                self.sparse.push(c);
            }
            index.set_aux(n, ResLink::NONE);
            return Ok(n);
        }
        let (mut prev, mut cur) = (NodeId::NIL, self.recs[c].rhead);
        for _ in 0..k {
            if cur == NodeId::NIL {
                break;
            }
            prev = cur;
            cur = index.aux(cur).as_next();
        }
        if cur == NodeId::NIL {
            return Err(corrupt("collation has too few reservations"));
        }
        let next = index.aux(cur).as_next();
        let rec = &mut self.recs[c];
        if prev == NodeId::NIL {
            rec.rhead = next;
        } else {
            index.set_aux(prev, ResLink::next(next));
        }
        if rec.rtail == cur {
            rec.rtail = prev;
        }
        index.set_aux(cur, ResLink::NONE);
        Ok(cur)
    }

    /// The `k`-th earliest reservation of collation `c`.
    pub fn res_at(&self, c: CollId, k: usize, index: &GlobalOrder) -> Result<NodeId, QueueError> {
        let found = if self.recs[c].large() {
            self.large
                .get(&c)
                .and_then(|l| l.res.nth(k).map(|rn| l.res.val(rn)))
        } else {
            self.reservations(c, index).nth(k)
        };
        found.ok_or_else(|| corrupt("collation has too few reservations"))
    }

    /// Rank (0 = earliest) of reservation `n` among collation `c`'s.
    pub fn res_rank(&self, c: CollId, n: NodeId, index: &GlobalOrder) -> Result<usize, QueueError> {
        let found = if self.recs[c].large() {
            self.large.get(&c).and_then(|l| {
                let rn = index.aux(n).as_tree_node();
                (l.res.get_val(rn) == Some(n))
                    .then(|| l.res.rank(rn))
                    .flatten()
            })
        } else {
            self.reservations(c, index).position(|x| x == n)
        };
        found.ok_or_else(|| corrupt("reservation missing from its collation"))
    }

    /// The earliest reservation of collation `c`.
    pub fn first_res(&self, c: CollId) -> Option<NodeId> {
        let rec = self.recs.get(c)?;
        if rec.large() {
            let large = self.large.get(&c)?;
            large.res.first().map(|rn| large.res.val(rn))
        } else {
            rec.rhead.some()
        }
    }

    /// Reservation nodes of collation `c`, in key order.
    pub fn reservations<'a>(&'a self, c: CollId, index: &'a GlobalOrder) -> ResMembers<'a> {
        match self.recs.get(c) {
            Some(rec) if rec.large() => match self.large.get(&c) {
                Some(large) => Members::Large(large.res.iter(), &large.res),
                None => Members::Empty,
            },
            rec => Members::Small {
                cur: rec.map_or(NodeId::NIL, |r| r.rhead),
                next: Box::new(move |n| index.aux(n).as_next()),
            },
        }
    }

    // ------------------------------------------------------ representation

    /// Switch collation `c` to the form its size calls for (called after
    /// each operation that changed its stack, when stack and reservations
    /// pair again). O(m log m) when it switches, which happens only after
    /// O(m) operations in the other direction.
    pub fn settle(
        &mut self,
        c: CollId,
        jobs: &mut Slab<Job, JobId>,
        index: &mut GlobalOrder,
    ) -> Result<(), QueueError> {
        let Some(rec) = self.recs.get(c) else {
            return Ok(());
        };
        if !rec.large() && rec.len > PROMOTE_ABOVE {
            self.promote(c, jobs, index)
        } else if rec.large() && rec.len < DEMOTE_BELOW {
            self.demote(c, jobs, index)
        } else {
            Ok(())
        }
    }

    fn promote(
        &mut self,
        c: CollId,
        jobs: &mut Slab<Job, JobId>,
        index: &mut GlobalOrder,
    ) -> Result<(), QueueError> {
        let stack: Vec<JobId> = self.stack(c, jobs).collect();
        let res: Vec<NodeId> = self.reservations(c, index).collect();
        let mut large = Large {
            stack: OrderIndex::new(),
            res: OrderIndex::new(),
        };
        for j in stack {
            let node = large
                .stack
                .insert(jobs[j].skey, j, ())
                .ok_or_else(|| corrupt("stack key used twice in a collation"))?;
            jobs[j].link = JobLink::stack_node(node);
        }
        for n in res {
            let rn = large
                .res
                .insert(*index.key(n), n, ())
                .ok_or_else(|| corrupt("duplicate reservation"))?;
            index.set_aux(n, ResLink::tree_node(rn));
        }
        let rec = &mut self.recs[c];
        rec.head = JobId::from_raw(LARGE);
        rec.tail = JobId::NIL;
        rec.rhead = NodeId::NIL;
        rec.rtail = NodeId::NIL;
        self.large.insert(c, Box::new(large));
        Ok(())
    }

    fn demote(
        &mut self,
        c: CollId,
        jobs: &mut Slab<Job, JobId>,
        index: &mut GlobalOrder,
    ) -> Result<(), QueueError> {
        let large = self
            .large
            .remove(&c)
            .ok_or_else(|| corrupt("large collation without its trees"))?;
        let stack: Vec<JobId> = large.stack.iter().map(|n| large.stack.val(n)).collect();
        let res: Vec<NodeId> = large.res.iter().map(|n| large.res.val(n)).collect();
        for w in stack.windows(2) {
            jobs[w[0]].link = JobLink::next_job(w[1]);
        }
        for w in res.windows(2) {
            index.set_aux(w[0], ResLink::next(w[1]));
        }
        if let Some(&last) = stack.last() {
            jobs[last].link = JobLink::next_job(JobId::NIL);
        }
        if let Some(&last) = res.last() {
            index.set_aux(last, ResLink::next(NodeId::NIL));
        }
        let rec = &mut self.recs[c];
        rec.head = JobId::or_nil(stack.first().copied());
        rec.tail = JobId::or_nil(stack.last().copied());
        rec.rhead = NodeId::or_nil(res.first().copied());
        rec.rtail = NodeId::or_nil(res.last().copied());
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

    // --------------------------------------------------------------- check

    /// Collation `c`'s stack and reservations as stored: every job says it
    /// is in this stack, keys strictly increase, the lengths match the
    /// record, and (large form) every tree node points back at its record.
    pub fn check_members(
        &self,
        c: CollId,
        name: &str,
        jobs: &Slab<Job, JobId>,
        index: &GlobalOrder,
    ) -> Result<(), String> {
        let rec = &self.recs[c];
        let len = rec.len as usize;
        if rec.large() {
            let large = self
                .large
                .get(&c)
                .ok_or(format!("large collation {name} has no trees"))?;
            large.stack.check_structure()?;
            large.res.check_structure()?;
            if large.stack.len() != len || large.res.len() != len {
                return Err(format!("collation {name}'s trees hold the wrong counts"));
            }
            if rec.len < DEMOTE_BELOW {
                return Err(format!("collation {name} is large but small"));
            }
            for node in large.stack.iter() {
                let j = large.stack.val(node);
                let job = jobs
                    .get(j)
                    .ok_or("a collation stack names a missing job (invariant 1)")?;
                if job.coll != CollRef::in_stack_of(c)
                    || job.link != JobLink::stack_node(node)
                    || job.skey != *large.stack.key(node)
                {
                    return Err(format!(
                        "a job in collation {name}'s stack does not say it is there"
                    ));
                }
            }
            for rn in large.res.iter() {
                let n = large.res.val(rn);
                if !index.is_live(n)
                    || index.val(n) != Owner::collation(c)
                    || index.aux(n) != ResLink::tree_node(rn)
                    || index.key(n) != large.res.key(rn)
                {
                    return Err(format!("collation {name} lists a reservation not its own"));
                }
            }
            return Ok(());
        }
        if self.large.contains_key(&c) || rec.len > PROMOTE_ABOVE {
            return Err(format!("collation {name} is small but large"));
        }
        let (mut j, mut last, mut k) = (rec.head, JobId::NIL, 0usize);
        while j != JobId::NIL && k <= len {
            let job = jobs
                .get(j)
                .ok_or("a collation stack names a missing job (invariant 1)")?;
            if job.coll != CollRef::in_stack_of(c) {
                return Err(format!(
                    "a job in collation {name}'s stack does not say it is there"
                ));
            }
            if last != JobId::NIL && jobs[last].skey >= job.skey {
                return Err(format!("collation {name}'s stack is out of order"));
            }
            last = j;
            j = job.link.as_next_job();
            k += 1;
        }
        if k != len || j != JobId::NIL || rec.tail != last {
            return Err(format!("collation {name}'s stack is malformed"));
        }
        let (mut n, mut last, mut k) = (rec.rhead, NodeId::NIL, 0usize);
        while n != NodeId::NIL && k <= len {
            if !index.is_live(n) || index.val(n) != Owner::collation(c) {
                return Err(format!("collation {name} lists a reservation not its own"));
            }
            if last != NodeId::NIL && index.key(last) >= index.key(n) {
                return Err(format!("collation {name}'s reservations are out of order"));
            }
            last = n;
            n = index.aux(n).as_next();
            k += 1;
        }
        if k != len || n != NodeId::NIL || rec.rtail != last {
            return Err(format!("collation {name}'s reservations are malformed"));
        }
        Ok(())
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

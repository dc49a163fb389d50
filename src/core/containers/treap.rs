//! An ordered set with order statistics: a treap whose nodes live in a slab.
//!
//! Every operation the queue needs on the global reservation order costs
//! O(log n) expected: insert, remove, lookup, first/last, the rank of a node
//! (its 0-based position) and the n-th node. Subtree sizes make rank and
//! select logarithmic, which is what `ORCA.STATUS` positions and paginated
//! listings need; a `BTreeMap` cannot answer "what is my position" without a
//! linear scan.
//!
//! Nodes are addressed by `u32` ids that stay put while the node lives, so
//! the queue links its records to nodes directly. Each node carries two
//! `u32` payload words (`val`, `aux`) for the queue's use. A node is 20
//! bytes plus its key (36 with the queue's 16-byte, 4-aligned key). Heap
//! priorities are a keyed hash of the node's key under a per-index random
//! seed: nothing is stored for them, and a client who knows the code still
//! cannot predict them (a predictable priority sequence would let crafted
//! release times build a degenerate, deep tree). Because a node's priority
//! follows its key, not its id, moving a node to another id (compaction)
//! keeps its place in the tree: one descent to its parent and a relink.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::num::NonZeroU32;

use super::idmap::{fmix64, random_word};
use super::slab::{Slab, SlabId, NIL};

#[derive(Clone, Debug)]
struct Node<K, V, A> {
    key: K,
    val: V,
    aux: A,
    left: u32,
    right: u32,
    /// Subtree size (>= 1; non-zero so `Option<Node>` costs nothing extra).
    size: NonZeroU32,
}

/// A key the index can order and hash into a heap priority: two words that
/// tell distinct keys apart (the index mixes them with its seed).
pub trait IndexKey: Ord + Copy {
    fn words(&self) -> (u64, u64);
}

impl IndexKey for i64 {
    fn words(&self) -> (u64, u64) {
        (*self as u64, 0)
    }
}

/// Ordered set of keys with rank/select in O(log n); each node holds two
/// words for the caller (`val`, `aux`: small `Copy` types, e.g. typed ids)
/// and is addressed by an id of type `I`.
#[derive(Clone, Debug)]
pub struct OrderIndex<K, V = u32, A = u32, I = u32> {
    nodes: Slab<Node<K, V, A>>,
    root: u32,
    /// The leftmost node (`NIL` when empty), kept so the queue's most
    /// frequent question, "what comes first", needs no descent.
    min: u32,
    seed: u64,
    ids: PhantomData<fn() -> I>,
}

impl<K: IndexKey, V: Copy, A: Copy, I: SlabId> Default for OrderIndex<K, V, A, I> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: IndexKey, V: Copy, A: Copy, I: SlabId> OrderIndex<K, V, A, I> {
    /// Bytes of one node in the slab (what a key in this index costs).
    pub const NODE_BYTES: usize = std::mem::size_of::<Option<Node<K, V, A>>>();

    pub fn new() -> Self {
        OrderIndex {
            nodes: Slab::default(),
            root: NIL,
            min: NIL,
            seed: random_word(),
            ids: PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.root == NIL
    }

    /// Room for another node? (ids are bounded, see `slab::MAX_ID`)
    pub fn has_room(&self) -> bool {
        self.nodes.has_room()
    }

    /// Bytes of heap the index holds (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.heap_bytes()
    }

    /// The heap priority of `key`: its two words mixed under the seed.
    fn key_prio(&self, key: &K) -> u32 {
        let (a, b) = key.words();
        (fmix64(fmix64(a ^ self.seed) ^ b) >> 32) as u32
    }

    /// The heap priority of node `n`.
    fn prio(&self, n: u32) -> u32 {
        self.key_prio(&self.nodes[n].key)
    }

    fn size(&self, n: u32) -> u32 {
        if n == NIL {
            0
        } else {
            self.nodes[n].size.get()
        }
    }

    fn fix(&mut self, n: u32) {
        let (l, r) = {
            let node = &self.nodes[n];
            (node.left, node.right)
        };
        let s = 1 + self.size(l) + self.size(r);
        self.nodes[n].size = NonZeroU32::new(s).unwrap_or(NonZeroU32::MIN);
    }

    /// Split `n` into (< key, >= key).
    fn split(&mut self, n: u32, key: &K) -> (u32, u32) {
        if n == NIL {
            return (NIL, NIL);
        }
        if self.nodes[n].key < *key {
            let r = self.nodes[n].right;
            let (a, b) = self.split(r, key);
            self.nodes[n].right = a;
            self.fix(n);
            (n, b)
        } else {
            let l = self.nodes[n].left;
            let (a, b) = self.split(l, key);
            self.nodes[n].left = b;
            self.fix(n);
            (a, n)
        }
    }

    /// Merge two treaps where every key of `a` is below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.prio(a) > self.prio(b) {
            let ar = self.nodes[a].right;
            let m = self.merge(ar, b);
            self.nodes[a].right = m;
            self.fix(a);
            a
        } else {
            let bl = self.nodes[b].left;
            let m = self.merge(a, bl);
            self.nodes[b].left = m;
            self.fix(b);
            b
        }
    }

    /// The node holding `key`.
    pub fn find(&self, key: &K) -> Option<I> {
        let mut n = self.root;
        while n != NIL {
            let node = &self.nodes[n];
            match key.cmp(&node.key) {
                Ordering::Less => n = node.left,
                Ordering::Greater => n = node.right,
                Ordering::Equal => return Some(I::from_raw(n)),
            }
        }
        None
    }

    pub fn contains(&self, key: &K) -> bool {
        self.find(key).is_some()
    }

    pub fn key(&self, n: I) -> &K {
        &self.nodes[n.raw()].key
    }

    pub fn val(&self, n: I) -> V {
        self.nodes[n.raw()].val
    }

    pub fn aux(&self, n: I) -> A {
        self.nodes[n.raw()].aux
    }

    /// `val` of node `n`, or `None` if `n` is not a live node.
    pub fn get_val(&self, n: I) -> Option<V> {
        self.nodes.get(n.raw()).map(|node| node.val)
    }

    pub fn set_val(&mut self, n: I, v: V) {
        self.nodes[n.raw()].val = v;
    }

    pub fn set_aux(&mut self, n: I, v: A) {
        self.nodes[n.raw()].aux = v;
    }

    /// Is `n` a live node? (for the invariant check)
    pub fn is_live(&self, n: I) -> bool {
        self.nodes.get(n.raw()).is_some()
    }

    /// Point the link to a subtree (`parent`'s left or right child, or the
    /// root when `parent` is `NIL`) at `child`.
    fn relink(&mut self, parent: u32, left: bool, child: u32) {
        if parent == NIL {
            self.root = child;
        } else if left {
            self.nodes[parent].left = child;
        } else {
            self.nodes[parent].right = child;
        }
    }

    /// Insert a new key with its words; returns the node id, or `None` (and
    /// changes nothing) if the key exists or there is no room.
    ///
    /// Top-down: descend while the nodes on the path outrank the new node
    /// (counting it into their sizes), then split the subtree found there
    /// around the key; that subtree is O(1) nodes expected.
    pub fn insert(&mut self, key: K, val: V, aux: A) -> Option<I> {
        if self.contains(&key) {
            return None;
        }
        let id = self.nodes.insert(Node {
            key,
            val,
            aux,
            left: NIL,
            right: NIL,
            size: NonZeroU32::MIN,
        })?;
        self.link_in(id, key);
        if self.min == NIL || key < self.nodes[self.min].key {
            self.min = id;
        }
        Some(I::from_raw(id))
    }

    /// Put stored node `id` (no children yet) into the tree under `key`.
    fn link_in(&mut self, id: u32, key: K) {
        let p = self.key_prio(&key);
        let (mut parent, mut left, mut cur) = (NIL, false, self.root);
        while cur != NIL && self.prio(cur) > p {
            let node = &mut self.nodes[cur];
            node.size = node.size.saturating_add(1);
            parent = cur;
            left = key < node.key;
            cur = if left { node.left } else { node.right };
        }
        let (l, r) = self.split(cur, &key);
        let node = &mut self.nodes[id];
        node.left = l;
        node.right = r;
        self.fix(id);
        self.relink(parent, left, id);
    }

    /// Remove node `n`; returns its key and words. One descent: sizes on
    /// the path shrink on the way down, then the node's two subtrees are
    /// merged in its place (O(1) nodes expected). Should the descent not
    /// meet `n` (never, while the tree is sound), a second one puts the
    /// sizes back and nothing changes.
    pub fn remove(&mut self, n: I) -> Option<(K, V, A)> {
        let n = n.raw();
        let key = self.nodes.get(n)?.key;
        let (mut parent, mut left, mut cur) = (NIL, false, self.root);
        while cur != n {
            let Some(node) = self.nodes.get_mut(cur).filter(|node| node.key != key) else {
                self.undo_remove(&key, cur);
                return None;
            };
            node.size = NonZeroU32::new(node.size.get() - 1).unwrap_or(NonZeroU32::MIN);
            parent = cur;
            left = key < node.key;
            cur = if left { node.left } else { node.right };
        }
        let (l, r) = (self.nodes[n].left, self.nodes[n].right);
        if n == self.min {
            // The next node in order: the leftmost of n's right subtree,
            // else n's parent (n was its left child).
            self.min = if r == NIL { parent } else { self.leftmost(r) };
        }
        let merged = self.merge(l, r);
        self.relink(parent, left, merged);
        let node = self.nodes.remove(n)?;
        Some((node.key, node.val, node.aux))
    }

    /// Give back the sizes a `remove` descent took on its way to `stop`.
    fn undo_remove(&mut self, key: &K, stop: u32) {
        let mut cur = self.root;
        while cur != stop {
            let Some(node) = self.nodes.get_mut(cur) else {
                return;
            };
            node.size = node.size.saturating_add(1);
            cur = if *key < node.key {
                node.left
            } else {
                node.right
            };
        }
    }

    fn leftmost(&self, mut n: u32) -> u32 {
        while let Some(l) = self
            .nodes
            .get(n)
            .map(|node| node.left)
            .filter(|&l| l != NIL)
        {
            n = l;
        }
        n
    }

    /// Shrinking: the next node to move and the id it goes to (see
    /// `Slab::next_move`).
    pub fn next_move(&mut self) -> Option<(I, I)> {
        let (from, to) = self.nodes.next_move()?;
        Some((I::from_raw(from), I::from_raw(to)))
    }

    /// Does the node slab want to shrink?
    pub fn wants_shrink(&self) -> bool {
        self.nodes.wants_shrink()
    }

    /// Move node `from` to vacant id `to` (from `next_move`); returns `to`,
    /// or `None` (changing nothing) if `from` is not in the tree or `to` is
    /// not vacant. The node keeps its key, words, children and place in the
    /// tree (its priority follows its key): one descent finds the link to
    /// it, which is pointed at `to`.
    pub fn relocate(&mut self, from: I, to: I) -> Option<I> {
        let (from, to) = (from.raw(), to.raw());
        let key = self.nodes.get(from)?.key;
        let (mut parent, mut left, mut cur) = (NIL, false, self.root);
        while cur != from {
            let node = self.nodes.get(cur)?;
            parent = cur;
            left = key < node.key;
            cur = if left { node.left } else { node.right };
        }
        if !self.nodes.move_record(from, to) {
            return None;
        }
        self.relink(parent, left, to);
        if self.min == from {
            self.min = to;
        }
        Some(I::from_raw(to))
    }

    pub fn first(&self) -> Option<I> {
        (self.min != NIL).then_some(I::from_raw(self.min))
    }

    pub fn last(&self) -> Option<I> {
        let mut n = self.root;
        if n == NIL {
            return None;
        }
        while self.nodes[n].right != NIL {
            n = self.nodes[n].right;
        }
        Some(I::from_raw(n))
    }

    /// 0-based position of node `n` among all nodes.
    pub fn rank(&self, n: I) -> Option<usize> {
        let key = self.nodes.get(n.raw())?.key;
        let mut m = self.root;
        let mut acc = 0usize;
        while m != NIL {
            let node = &self.nodes[m];
            match key.cmp(&node.key) {
                Ordering::Less => m = node.left,
                Ordering::Greater => {
                    acc += self.size(node.left) as usize + 1;
                    m = node.right
                }
                Ordering::Equal => return Some(acc + self.size(node.left) as usize),
            }
        }
        None
    }

    /// The node at 0-based position `k`.
    pub fn nth(&self, mut k: usize) -> Option<I> {
        let mut n = self.root;
        while n != NIL {
            let node = &self.nodes[n];
            let ls = self.size(node.left) as usize;
            match k.cmp(&ls) {
                Ordering::Less => n = node.left,
                Ordering::Equal => return Some(I::from_raw(n)),
                Ordering::Greater => {
                    k -= ls + 1;
                    n = node.right
                }
            }
        }
        None
    }

    /// In-order iteration of node ids starting at position `start`.
    pub fn iter_from(&self, start: usize) -> Iter<'_, K, V, A, I> {
        let mut it = Iter {
            index: self,
            stack: Vec::new(),
        };
        // Descend to the start position, stacking the nodes still to visit.
        let mut n = self.root;
        let mut k = start;
        while n != NIL {
            let node = &self.nodes[n];
            let ls = self.size(node.left) as usize;
            if k < ls {
                it.stack.push(n);
                n = node.left;
            } else if k == ls {
                it.stack.push(n);
                break;
            } else {
                k -= ls + 1;
                n = node.right;
            }
        }
        it
    }

    pub fn iter(&self) -> Iter<'_, K, V, A, I> {
        self.iter_from(0)
    }

    /// The deepest a sound tree of `n` nodes may be: its priorities are
    /// random, so its depth is that of a random binary search tree, about
    /// 3 log2 n at most with overwhelming probability (4.3 ln n); twice that
    /// plus a margin is never reached by chance, while a tree whose
    /// priorities do not spread (a constant hash, ties) degenerates towards
    /// a list of n nodes and fails as soon as n passes about a hundred.
    pub fn depth_bound(n: usize) -> usize {
        6 * (usize::BITS - n.leading_zeros()) as usize + 32
    }

    /// Verify the structure itself: BST order, heap order, subtree sizes,
    /// a depth a random tree reaches (`depth_bound`), and that the tree
    /// holds every live node.
    pub fn check_structure(&self) -> Result<(), String> {
        fn walk<K: IndexKey, V: Copy, A: Copy, I: SlabId>(
            ix: &OrderIndex<K, V, A, I>,
            n: u32,
            lo: Option<K>,
            hi: Option<K>,
            depth: usize,
        ) -> Result<u32, String> {
            if n == NIL {
                return Ok(0);
            }
            if depth > OrderIndex::<K, V, A, I>::depth_bound(ix.nodes.len()) {
                return Err("index too deep: its priorities do not spread".into());
            }
            let node = ix
                .nodes
                .get(n)
                .ok_or_else(|| "index node out of range".to_string())?;
            if lo.is_some_and(|lo| node.key <= lo) || hi.is_some_and(|hi| node.key >= hi) {
                return Err("index keys out of order".into());
            }
            let p = ix.key_prio(&node.key);
            for c in [node.left, node.right] {
                // A child that is not a node is reported by the walk below.
                let cp = ix.nodes.get(c).map(|child| ix.key_prio(&child.key));
                if cp.is_some_and(|cp| cp > p) {
                    return Err("index heap order broken".into());
                }
            }
            let l = walk(ix, node.left, lo, Some(node.key), depth + 1)?;
            let r = walk(ix, node.right, Some(node.key), hi, depth + 1)?;
            if node.size.get() != l + r + 1 {
                return Err("index subtree size wrong".into());
            }
            Ok(node.size.get())
        }
        let n = walk(self, self.root, None, None, 0)?;
        if n as usize != self.nodes.len() {
            return Err("index holds nodes outside its tree".into());
        }
        let leftmost = if self.root == NIL {
            NIL
        } else {
            self.leftmost(self.root)
        };
        if self.min != leftmost {
            return Err("index's first node out of date".into());
        }
        Ok(())
    }
}

pub struct Iter<'a, K, V = u32, A = u32, I = u32> {
    index: &'a OrderIndex<K, V, A, I>,
    stack: Vec<u32>,
}

impl<K, V, A, I: SlabId> Iterator for Iter<'_, K, V, A, I> {
    type Item = I;

    fn next(&mut self) -> Option<I> {
        let n = self.stack.pop()?;
        let nodes = &self.index.nodes;
        let mut c = nodes[n].right;
        while c != NIL {
            self.stack.push(c);
            c = nodes[c].left;
        }
        Some(I::from_raw(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn matches_btreemap_under_random_operations() {
        let mut ix: OrderIndex<i64> = OrderIndex::new();
        let mut model: BTreeMap<i64, u32> = BTreeMap::new();
        let mut x: u64 = 88172645463325252;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 500) as i64;
            if x.is_multiple_of(3) {
                let got = ix.find(&key).and_then(|n| ix.remove(n)).map(|(_, v, _)| v);
                assert_eq!(got, model.remove(&key));
            } else {
                let inserted = ix.insert(key, step, step ^ 1).is_some();
                assert_eq!(inserted, !model.contains_key(&key));
                model.entry(key).or_insert(step);
            }
            assert_eq!(ix.len(), model.len());
            if step % 97 == 0 {
                ix.check_structure().unwrap();
                let all: Vec<_> = ix.iter().map(|n| (*ix.key(n), ix.val(n))).collect();
                let want: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
                assert_eq!(all, want);
                assert!(ix.iter().all(|n| ix.aux(n) == ix.val(n) ^ 1));
                for (i, k) in model.keys().enumerate() {
                    let n = ix.find(k).unwrap();
                    assert_eq!(ix.rank(n), Some(i));
                    assert_eq!(ix.nth(i), Some(n));
                }
                let start = (x as usize) % (model.len() + 1);
                let from: Vec<_> = ix.iter_from(start).map(|n| *ix.key(n)).collect();
                let want: Vec<_> = model.keys().skip(start).copied().collect();
                assert_eq!(from, want);
                assert_eq!(ix.first().map(|n| *ix.key(n)), model.keys().next().copied());
                assert_eq!(ix.last().map(|n| *ix.key(n)), model.keys().last().copied());
            }
        }
    }

    #[test]
    fn relocation_keeps_the_tree_and_shrinks_the_slab() {
        let mut ix: OrderIndex<i64> = OrderIndex::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut ids = BTreeMap::new();
        for k in 0..6_000i64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 1_000_000) as i64 * 8 + k % 8;
            if let Some(n) = ix.insert(key, k as u32, !(k as u32)) {
                ids.insert(key, n);
            }
        }
        // Empty most of it, in key order's middle and at random.
        let keys: Vec<i64> = ids.keys().copied().collect();
        for (i, k) in keys.iter().enumerate() {
            if i % 10 != 3 {
                let n = ids.remove(k).unwrap();
                assert!(ix.remove(n).is_some());
            }
        }
        let before: Vec<(i64, u32, u32)> = ix
            .iter()
            .map(|n| (*ix.key(n), ix.val(n), ix.aux(n)))
            .collect();
        assert!(ix.wants_shrink());
        let mut moves = 0;
        while let Some((from, to)) = ix.next_move() {
            assert_eq!(ix.relocate(from, to), Some(to));
            assert!(!ix.is_live(from));
            // A second move of the same node from its old id is refused.
            assert_eq!(ix.relocate(from, to), None);
            moves += 1;
            if moves % 37 == 0 {
                ix.check_structure().unwrap();
            }
        }
        assert!(moves > 0);
        assert!(!ix.wants_shrink());
        ix.check_structure().unwrap();
        let after: Vec<(i64, u32, u32)> = ix
            .iter()
            .map(|n| (*ix.key(n), ix.val(n), ix.aux(n)))
            .collect();
        assert_eq!(after, before);
        for (i, n) in ix.iter().enumerate() {
            assert_eq!(ix.rank(n), Some(i));
            assert_eq!(ix.find(ix.key(n)), Some(n));
        }
    }

    #[test]
    fn missing_keys() {
        let mut ix: OrderIndex<i64> = OrderIndex::new();
        assert!(ix.first().is_none());
        assert!(ix.last().is_none());
        assert_eq!(ix.rank(3), None);
        assert_eq!(ix.remove(3), None);
        let n = ix.insert(3, 1, 0).unwrap();
        assert!(ix.insert(3, 2, 0).is_none());
        assert_eq!(ix.find(&3), Some(n));
        assert_eq!(ix.val(n), 1);
        assert_eq!(ix.nth(1), None);
        assert_eq!(ix.iter_from(5).count(), 0);
        assert!(ix.remove(n).is_some());
        assert!(ix.remove(n).is_none());
        assert!(ix.is_empty());
    }

    /// A key whose priority words are all alike: the tree cannot balance.
    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
    struct Flat(i64);

    impl IndexKey for Flat {
        fn words(&self) -> (u64, u64) {
            (7, 7)
        }
    }

    #[test]
    fn a_tree_that_cannot_balance_fails_the_check() {
        // Keys arrive in order, as release times do: with equal priorities
        // every insert lands at the root and the tree is a list.
        let mut flat: OrderIndex<Flat> = OrderIndex::new();
        for k in 0..1_000 {
            flat.insert(Flat(k), 0, 0);
        }
        let err = flat.check_structure().unwrap_err();
        assert!(err.contains("too deep"), "{err}");
        // The same keys with real priorities pass, and stay far from the
        // bound.
        let mut ix: OrderIndex<i64> = OrderIndex::new();
        for k in 0..100_000 {
            ix.insert(k, 0, 0);
        }
        ix.check_structure().unwrap();
        assert!(OrderIndex::<i64>::depth_bound(100_000) < 150);
        assert_eq!(OrderIndex::<i64>::depth_bound(0), 32);
    }

    #[test]
    fn node_is_compact() {
        assert_eq!(
            std::mem::size_of::<Option<Node<(i64, i64), u32, u32>>>(),
            40
        );
        assert_eq!(std::mem::size_of::<Option<Node<[u32; 4], u32, u32>>>(), 36);
    }
}

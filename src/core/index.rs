//! An ordered map with order statistics: a treap stored in an arena.
//!
//! Every operation the queue needs on the global reservation order costs
//! O(log n) expected: insert, remove, lookup, first/last, the rank of a key
//! (its 0-based position) and the n-th entry. Subtree sizes make rank and
//! select logarithmic, which is what `ORCA.STATUS` positions and paginated
//! listings need; a `BTreeMap` cannot answer "what is my position" without a
//! linear scan.
//!
//! Nodes live in one `Vec` and refer to each other by `u32` index, so there is
//! one allocation for the whole structure, no `unsafe`, and freed slots are
//! reused. Heap priorities come from a deterministic xorshift generator, so
//! the same sequence of operations always builds the same tree.

use std::cmp::Ordering;

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node<K, V> {
    key: K,
    val: V,
    left: u32,
    right: u32,
    prio: u32,
    size: u32,
}

/// Ordered map with rank/select in O(log n).
#[derive(Clone, Debug)]
pub struct OrderIndex<K, V> {
    nodes: Vec<Node<K, V>>,
    free: Vec<u32>,
    root: u32,
    rng: u32,
}

impl<K: Ord + Copy, V> Default for OrderIndex<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord + Copy, V> OrderIndex<K, V> {
    pub fn new() -> Self {
        OrderIndex {
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            rng: 0x9E37_79B9,
        }
    }

    pub fn len(&self) -> usize {
        self.size(self.root) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.root == NIL
    }

    /// Bytes of heap the index holds (for `MEMORY USAGE`).
    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node<K, V>>() + self.free.capacity() * 4
    }

    fn size(&self, n: u32) -> u32 {
        if n == NIL {
            0
        } else {
            self.nodes[n as usize].size
        }
    }

    fn fix(&mut self, n: u32) {
        let (l, r) = {
            let node = &self.nodes[n as usize];
            (node.left, node.right)
        };
        let s = 1 + self.size(l) + self.size(r);
        self.nodes[n as usize].size = s;
    }

    fn next_prio(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    /// Split `n` into (< key, >= key).
    fn split(&mut self, n: u32, key: &K) -> (u32, u32) {
        if n == NIL {
            return (NIL, NIL);
        }
        if self.nodes[n as usize].key < *key {
            let r = self.nodes[n as usize].right;
            let (a, b) = self.split(r, key);
            self.nodes[n as usize].right = a;
            self.fix(n);
            (n, b)
        } else {
            let l = self.nodes[n as usize].left;
            let (a, b) = self.split(l, key);
            self.nodes[n as usize].left = b;
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
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let ar = self.nodes[a as usize].right;
            let m = self.merge(ar, b);
            self.nodes[a as usize].right = m;
            self.fix(a);
            a
        } else {
            let bl = self.nodes[b as usize].left;
            let m = self.merge(a, bl);
            self.nodes[b as usize].left = m;
            self.fix(b);
            b
        }
    }

    fn find(&self, key: &K) -> u32 {
        let mut n = self.root;
        while n != NIL {
            let node = &self.nodes[n as usize];
            match key.cmp(&node.key) {
                Ordering::Less => n = node.left,
                Ordering::Greater => n = node.right,
                Ordering::Equal => return n,
            }
        }
        NIL
    }

    pub fn contains(&self, key: &K) -> bool {
        self.find(key) != NIL
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        let n = self.find(key);
        (n != NIL).then(|| &self.nodes[n as usize].val)
    }

    /// Insert a new key. Returns false (and changes nothing) if the key exists.
    pub fn insert(&mut self, key: K, val: V) -> bool {
        if self.contains(&key) {
            return false;
        }
        let prio = self.next_prio();
        let node = Node {
            key,
            val,
            left: NIL,
            right: NIL,
            prio,
            size: 1,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let (a, b) = self.split(self.root, &key);
        let left = self.merge(a, id);
        self.root = self.merge(left, b);
        true
    }

    /// Remove a key, returning its value.
    pub fn remove(&mut self, key: &K) -> Option<V>
    where
        V: Default,
    {
        let (parent, n) = {
            let mut parent = NIL;
            let mut n = self.root;
            while n != NIL {
                let node = &self.nodes[n as usize];
                match key.cmp(&node.key) {
                    Ordering::Less => {
                        parent = n;
                        n = node.left
                    }
                    Ordering::Greater => {
                        parent = n;
                        n = node.right
                    }
                    Ordering::Equal => break,
                }
            }
            (parent, n)
        };
        if n == NIL {
            return None;
        }
        let (l, r) = (self.nodes[n as usize].left, self.nodes[n as usize].right);
        let merged = self.merge(l, r);
        if parent == NIL {
            self.root = merged;
        } else if self.nodes[parent as usize].left == n {
            self.nodes[parent as usize].left = merged;
        } else {
            self.nodes[parent as usize].right = merged;
        }
        // Walk from the root down to the parent, shrinking sizes on the path.
        let mut m = self.root;
        while m != NIL && m != merged {
            self.nodes[m as usize].size -= 1;
            let node = &self.nodes[m as usize];
            m = match key.cmp(&node.key) {
                Ordering::Less => node.left,
                Ordering::Greater => node.right,
                Ordering::Equal => NIL,
            };
        }
        self.free.push(n);
        let val = std::mem::take(&mut self.nodes[n as usize].val);
        if self.root == NIL {
            // Give the memory back when the index empties.
            self.nodes.clear();
            self.nodes.shrink_to_fit();
            self.free.clear();
            self.free.shrink_to_fit();
        }
        Some(val)
    }

    pub fn first(&self) -> Option<(&K, &V)> {
        self.nth(0)
    }

    pub fn last(&self) -> Option<(&K, &V)> {
        let len = self.len();
        if len == 0 {
            None
        } else {
            self.nth(len - 1)
        }
    }

    /// 0-based position of `key` among all keys, if present.
    pub fn rank(&self, key: &K) -> Option<usize> {
        let mut n = self.root;
        let mut acc = 0usize;
        while n != NIL {
            let node = &self.nodes[n as usize];
            match key.cmp(&node.key) {
                Ordering::Less => n = node.left,
                Ordering::Greater => {
                    acc += self.size(node.left) as usize + 1;
                    n = node.right
                }
                Ordering::Equal => return Some(acc + self.size(node.left) as usize),
            }
        }
        None
    }

    /// The entry at 0-based position `k`.
    pub fn nth(&self, mut k: usize) -> Option<(&K, &V)> {
        let mut n = self.root;
        while n != NIL {
            let node = &self.nodes[n as usize];
            let ls = self.size(node.left) as usize;
            match k.cmp(&ls) {
                Ordering::Less => n = node.left,
                Ordering::Equal => return Some((&node.key, &node.val)),
                Ordering::Greater => {
                    k -= ls + 1;
                    n = node.right
                }
            }
        }
        None
    }

    /// In-order iteration starting at position `start`.
    pub fn iter_from(&self, start: usize) -> Iter<'_, K, V> {
        let mut it = Iter {
            index: self,
            stack: Vec::new(),
        };
        // Descend to the start position, stacking the nodes still to visit.
        let mut n = self.root;
        let mut k = start;
        while n != NIL {
            let node = &self.nodes[n as usize];
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

    pub fn iter(&self) -> Iter<'_, K, V> {
        self.iter_from(0)
    }

    /// Verify the structure itself: BST order, heap order and subtree sizes.
    pub fn check_structure(&self) -> Result<(), String> {
        fn walk<K: Ord + Copy, V>(
            ix: &OrderIndex<K, V>,
            n: u32,
            lo: Option<K>,
            hi: Option<K>,
            depth: usize,
        ) -> Result<u32, String> {
            if n == NIL {
                return Ok(0);
            }
            if depth > 10_000 {
                return Err("index too deep".into());
            }
            let node = ix
                .nodes
                .get(n as usize)
                .ok_or_else(|| "index node out of range".to_string())?;
            if lo.is_some_and(|lo| node.key <= lo) || hi.is_some_and(|hi| node.key >= hi) {
                return Err("index keys out of order".into());
            }
            for c in [node.left, node.right] {
                if c != NIL && ix.nodes[c as usize].prio > node.prio {
                    return Err("index heap order broken".into());
                }
            }
            let l = walk(ix, node.left, lo, Some(node.key), depth + 1)?;
            let r = walk(ix, node.right, Some(node.key), hi, depth + 1)?;
            if node.size != l + r + 1 {
                return Err("index subtree size wrong".into());
            }
            Ok(node.size)
        }
        walk(self, self.root, None, None, 0).map(|_| ())
    }
}

pub struct Iter<'a, K, V> {
    index: &'a OrderIndex<K, V>,
    stack: Vec<u32>,
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        let n = self.stack.pop()?;
        let nodes = &self.index.nodes;
        let node = &nodes[n as usize];
        let mut c = node.right;
        while c != NIL {
            self.stack.push(c);
            c = nodes[c as usize].left;
        }
        Some((&node.key, &node.val))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn matches_btreemap_under_random_operations() {
        let mut ix: OrderIndex<i64, u64> = OrderIndex::new();
        let mut model: BTreeMap<i64, u64> = BTreeMap::new();
        let mut x: u64 = 88172645463325252;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % 500) as i64;
            if x.is_multiple_of(3) {
                assert_eq!(ix.remove(&key), model.remove(&key));
            } else {
                let inserted = ix.insert(key, step);
                assert_eq!(inserted, !model.contains_key(&key));
                model.entry(key).or_insert(step);
            }
            assert_eq!(ix.len(), model.len());
            if step % 97 == 0 {
                ix.check_structure().unwrap();
                let all: Vec<_> = ix.iter().map(|(k, v)| (*k, *v)).collect();
                let want: Vec<_> = model.iter().map(|(k, v)| (*k, *v)).collect();
                assert_eq!(all, want);
                for (i, (k, _)) in model.iter().enumerate() {
                    assert_eq!(ix.rank(k), Some(i));
                    assert_eq!(ix.nth(i).map(|(k, _)| *k), Some(*k));
                }
                let start = (x as usize) % (model.len() + 1);
                let from: Vec<_> = ix.iter_from(start).map(|(k, _)| *k).collect();
                let want: Vec<_> = model.keys().skip(start).copied().collect();
                assert_eq!(from, want);
                assert_eq!(ix.first().map(|(k, _)| *k), model.keys().next().copied());
                assert_eq!(ix.last().map(|(k, _)| *k), model.keys().last().copied());
            }
        }
    }

    #[test]
    fn missing_keys() {
        let mut ix: OrderIndex<i64, u64> = OrderIndex::new();
        assert!(ix.first().is_none());
        assert!(ix.last().is_none());
        assert_eq!(ix.rank(&3), None);
        assert_eq!(ix.remove(&3), None);
        assert!(ix.insert(3, 1));
        assert!(!ix.insert(3, 2));
        assert_eq!(ix.get(&3), Some(&1));
        assert_eq!(ix.nth(1), None);
        assert_eq!(ix.iter_from(5).count(), 0);
    }
}

//! One map whose entries each carry a time: the entries by key, the same
//! entries in time order, and the bytes their payloads hold, kept in step
//! by the only methods that change them. Leases, retries, dead letters,
//! results and cancellations are each one of these (`work/mod.rs`), so no
//! caller keeps a map, its order and its byte count in step by hand.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, Hash};

use crate::core::containers::shrink_map;

/// An entry of an `Expiring` map: where it sorts (its time first) and the
/// payload bytes it holds.
pub(crate) trait Timed {
    type Order: Ord + Copy;
    fn order(&self) -> Self::Order;
    fn bytes(&self) -> usize;
}

/// Where an `Expiring` map keeps its entries: a hash map, or a store of its
/// own (the leases' slab with its indexes).
pub(crate) trait Store<K, V>: Default {
    fn len(&self) -> usize;
    fn get(&self, k: &K) -> Option<&V>;
    fn get_mut(&mut self, k: &K) -> Option<&mut V>;
    /// Store `v` under `k`, handing back the entry it replaced; or `v`
    /// itself, nothing changed, when it cannot be stored.
    fn put(&mut self, k: K, v: V) -> Result<Option<V>, V>;
    fn take(&mut self, k: &K) -> Option<V>;
    /// Give memory back when sparse.
    fn shrink(&mut self);
}

impl<K: Hash + Eq, V, S: BuildHasher + Default> Store<K, V> for HashMap<K, V, S> {
    fn len(&self) -> usize {
        HashMap::len(self)
    }
    fn get(&self, k: &K) -> Option<&V> {
        HashMap::get(self, k)
    }
    fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        HashMap::get_mut(self, k)
    }
    fn put(&mut self, k: K, v: V) -> Result<Option<V>, V> {
        Ok(self.insert(k, v))
    }
    fn take(&mut self, k: &K) -> Option<V> {
        self.remove(k)
    }
    fn shrink(&mut self) {
        shrink_map(self);
    }
}

/// Entries by key (in `St`), in time order, with their byte count.
#[derive(Clone, Debug)]
pub(crate) struct Expiring<K, V: Timed, St> {
    store: St,
    order: BTreeSet<(V::Order, K)>,
    bytes: usize,
}

impl<K, V: Timed, St: Default> Default for Expiring<K, V, St> {
    fn default() -> Self {
        Expiring {
            store: St::default(),
            order: BTreeSet::new(),
            bytes: 0,
        }
    }
}

impl<K: Ord + Copy, V: Timed, St: Store<K, V>> Expiring<K, V, St> {
    pub fn len(&self) -> usize {
        self.store.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Payload bytes held by the entries.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.store.get(k)
    }

    pub fn contains(&self, k: &K) -> bool {
        self.store.get(k).is_some()
    }

    /// The store itself, for its own lookups (read only: every change goes
    /// through the map).
    pub fn store(&self) -> &St {
        &self.store
    }

    /// Add `v` under `k`; returns the entry it replaced. `Err(v)`, nothing
    /// changed, when the store cannot take it.
    pub fn insert(&mut self, k: K, v: V) -> Result<Option<V>, V> {
        let (at, bytes) = (v.order(), v.bytes());
        let old = self.store.put(k, v)?;
        if let Some(o) = &old {
            self.order.remove(&(o.order(), k));
            self.bytes -= o.bytes();
        }
        self.order.insert((at, k));
        self.bytes += bytes;
        Ok(old)
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        let v = self.store.take(k)?;
        self.order.remove(&(v.order(), *k));
        self.bytes -= v.bytes();
        Some(v)
    }

    /// Change the entry under `k` (its time or payload too); false if
    /// there is none.
    pub fn update(&mut self, k: &K, f: impl FnOnce(&mut V)) -> bool {
        let Some(v) = self.store.get_mut(k) else {
            return false;
        };
        let (at, bytes) = (v.order(), v.bytes());
        f(v);
        let (now_at, now_bytes) = (v.order(), v.bytes());
        if now_at != at {
            self.order.remove(&(at, *k));
            self.order.insert((now_at, *k));
        }
        self.bytes = self.bytes - bytes + now_bytes;
        true
    }

    /// The earliest entry's place and key.
    #[inline]
    pub fn first(&self) -> Option<(V::Order, K)> {
        self.order.first().copied()
    }

    /// Take the earliest entry if `due` says its place has come.
    #[inline]
    pub fn pop_first_if(&mut self, due: impl FnOnce(&V::Order) -> bool) -> Option<(K, V)> {
        let &(at, k) = self.order.first()?;
        if !due(&at) {
            return None;
        }
        match self.remove(&k) {
            Some(v) => Some((k, v)),
            None => {
                // An order entry without its entry: cannot happen (they
                // change together); drop it rather than loop on it.
                self.order.remove(&(at, k));
                None
            }
        }
    }

    /// Keys with their entries, in time order, from `offset`, at most
    /// `limit`.
    pub fn page(&self, offset: usize, limit: usize) -> impl Iterator<Item = (K, &V)> {
        self.ordered().skip(offset).take(limit)
    }

    /// Keys with their entries, in time order.
    pub fn ordered(&self) -> impl Iterator<Item = (K, &V)> {
        self.order
            .iter()
            .filter_map(|(_, k)| self.store.get(k).map(|v| (*k, v)))
    }

    /// Take every entry (in time order).
    pub fn drain(&mut self) -> Vec<(K, V)> {
        let order = std::mem::take(&mut self.order);
        let out = order
            .into_iter()
            .filter_map(|(_, k)| self.store.take(&k).map(|v| (k, v)))
            .collect();
        *self = Expiring::default();
        out
    }

    pub fn shrink(&mut self) {
        self.store.shrink();
    }

    /// Run `f` on the store for a change that keeps every entry as it is
    /// (moving records while compacting).
    pub fn compact_store<R>(&mut self, f: impl FnOnce(&mut St) -> R) -> R {
        f(&mut self.store)
    }

    /// The store and the order hold the same entries at their places, and
    /// the byte count adds up.
    pub fn check(&self, what: &str) -> Result<(), String> {
        let mut bytes = 0usize;
        if self.order.len() != self.store.len() {
            return Err(format!("{what}: the order and the entries disagree"));
        }
        for (at, k) in &self.order {
            match self.store.get(k) {
                Some(v) if v.order() == *at => bytes += v.bytes(),
                _ => return Err(format!("{what}: an entry is missing from its order")),
            }
        }
        if bytes != self.bytes {
            return Err(format!("{what}: payload accounting is off"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct E {
        at: i64,
        payload: Vec<u8>,
    }

    impl Timed for E {
        type Order = i64;
        fn order(&self) -> i64 {
            self.at
        }
        fn bytes(&self) -> usize {
            self.payload.len()
        }
    }

    type M = Expiring<u32, E, HashMap<u32, E>>;

    fn e(at: i64, n: usize) -> E {
        E {
            at,
            payload: vec![0; n],
        }
    }

    #[test]
    fn map_order_and_bytes_stay_in_step() {
        let mut m = M::default();
        assert_eq!(m.insert(1, e(30, 3)), Ok(None));
        assert_eq!(m.insert(2, e(10, 5)), Ok(None));
        assert_eq!(m.insert(3, e(20, 7)), Ok(None));
        m.check("m").unwrap();
        assert_eq!((m.len(), m.bytes()), (3, 15));
        // Replacing moves the entry and its bytes.
        assert_eq!(m.insert(1, e(5, 1)), Ok(Some(e(30, 3))));
        assert_eq!((m.first(), m.bytes()), (Some((5, 1)), 13));
        // Updating a time re-sorts it.
        assert!(m.update(&1, |v| v.at = 40));
        assert!(!m.update(&9, |v| v.at = 1));
        assert_eq!(m.first(), Some((10, 2)));
        let keys: Vec<u32> = m.ordered().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![2, 3, 1]);
        assert_eq!(m.page(1, 1).map(|(k, _)| k).collect::<Vec<_>>(), vec![3]);
        // Due entries come out earliest first.
        assert_eq!(m.pop_first_if(|at| *at <= 9), None);
        assert_eq!(m.pop_first_if(|at| *at <= 10), Some((2, e(10, 5))));
        assert_eq!(m.remove(&3), Some(e(20, 7)));
        assert_eq!(m.remove(&3), None);
        m.check("m").unwrap();
        assert_eq!((m.len(), m.bytes()), (1, 1));
        assert_eq!(m.drain(), vec![(1, e(40, 1))]);
        assert!(m.is_empty() && m.bytes() == 0);
        m.check("m").unwrap();
    }
}

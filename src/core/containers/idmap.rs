//! Hash maps keyed by the queue's own numbers (record ids, lease tokens):
//! a multiplicative hash instead of SipHash. These keys are handed out by
//! the queue itself (slab ids, sequence numbers), never chosen by clients,
//! so they need no protection against crafted collisions, and SipHash was
//! a tenth of a leased pop's time (docs/design.md, "The hot path").

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

/// FxHash's step: xor the word in, multiply by an odd constant. Sequential
/// keys spread evenly over the low bits (a bijection there) and the high
/// bits (which hashbrown uses as tags) mix well.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl IdHasher {
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.add(x as u64);
    }
    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }
    fn write_i64(&mut self, x: i64) {
        self.add(x as u64);
    }
    fn write_usize(&mut self, x: usize) {
        self.add(x as u64);
    }
}

/// A `HashMap` keyed by record ids or tokens.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Shrink a hash map under a quarter full to about twice its entries.
/// Maps of fewer than 64 slots are left alone.
pub fn shrink_map<K: Eq + Hash, V, S: BuildHasher>(m: &mut HashMap<K, V, S>) {
    if m.capacity() > 64 && m.len() * 4 < m.capacity() {
        m.shrink_to(m.len() * 2);
    }
}

/// MurmurHash3's 64-bit finalizer: a bijection in which every input bit
/// flips each output bit with probability about one half. Mixed with a
/// secret, it turns words a client can steer (release times, digests it
/// can grind) into hashes it cannot predict.
pub(crate) fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// A random word, different in every process (for keyed hashes).
pub(crate) fn random_word() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(0x6f72_6361_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_keys_spread() {
        let mut m: IdMap<u64, u64> = IdMap::default();
        for i in 0..100_000u64 {
            m.insert(i, i * 2);
        }
        for i in 0..100_000u64 {
            assert_eq!(m.get(&i), Some(&(i * 2)));
        }
        // Low bits of sequential ids land in distinct buckets.
        let h = |x: u64| {
            let mut s = IdHasher::default();
            s.write_u64(x);
            s.finish() & 1023
        };
        let buckets: std::collections::HashSet<u64> = (0..1024).map(h).collect();
        assert_eq!(buckets.len(), 1024);
    }
}

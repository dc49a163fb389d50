//! The deterministic PRNG of every random test, and the run parameters they
//! read from the environment (seeds, steps).
//!
//! Self-contained (std only): `benches/clientside.rs` includes this file
//! with `#[path]`.

#![allow(dead_code)]

/// xorshift64* (Vigna), seeded through splitmix64 so small seeds are fine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `percent`%.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A u64 from the environment (decimal or 0x-hex); `None` if unset or not
/// a number.
pub fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    if let Some(hex) = v.strip_prefix("0x") {
        u64::from_str_radix(hex, 16).ok()
    } else {
        v.parse().ok()
    }
}

/// The seeds of the property tests: `ORCA_PROP_SEED` (decimal or 0x-hex)
/// alone, or `defaults`.
pub fn seeds(defaults: &[u64]) -> Vec<u64> {
    match std::env::var("ORCA_PROP_SEED") {
        Ok(s) => {
            let s = s.trim();
            let v = if let Some(hex) = s.strip_prefix("0x") {
                u64::from_str_radix(hex, 16)
            } else {
                s.parse()
            };
            vec![v.expect("ORCA_PROP_SEED must be a u64 (decimal or 0x-hex)")]
        }
        Err(_) => defaults.to_vec(),
    }
}

/// Steps per random sequence of the property tests: `ORCA_PROP_STEPS` or
/// `default`.
pub fn steps(default: usize) -> usize {
    std::env::var("ORCA_PROP_STEPS")
        .ok()
        .map(|s| s.trim().parse().expect("ORCA_PROP_STEPS must be a number"))
        .unwrap_or(default)
}

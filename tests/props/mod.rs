//! Shared by the property suites (`core_props.rs`, `worker_props.rs`): a
//! deterministic PRNG and the run parameters (`ORCA_PROP_SEED`,
//! `ORCA_PROP_STEPS`).
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

    pub fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// The seeds to run: `ORCA_PROP_SEED` (decimal or 0x-hex) or `defaults`.
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

/// Steps per random sequence: `ORCA_PROP_STEPS` or `default`.
pub fn steps(default: usize) -> usize {
    std::env::var("ORCA_PROP_STEPS")
        .ok()
        .map(|s| s.trim().parse().expect("ORCA_PROP_STEPS must be a number"))
        .unwrap_or(default)
}

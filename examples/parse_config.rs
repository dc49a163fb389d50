//! Parses the bench job config (`benches/job.json`, `__rand_int__` replaced by
//! 12-digit numbers) in a loop, for instruction counts of `parse_config`:
//!
//!     cargo build --release --example parse_config
//!     valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!         --toggle-collect='*parse_config_limited*' \
//!         target/release/examples/parse_config 2000
//!
//! then divide the collected instructions ("Collected" on stderr) by the
//! count (or take the difference of two counts, which drops the constant).
//! `--toggle-collect='*key_of*'` gives the SHA-256 share of the orca key
//! (valgrind has no SHA-NI, so `sha2` runs its soft code there), and
//! `--toggle-collect='orca::core::scan::scan'` the JSON scan alone.

use orca::core::config::{parse_config_limited, ConfigLimits};
use std::hint::black_box;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let text = include_str!("../benches/job.json");
    let mut json = String::new();
    for (i, part) in text.trim_end().split("__rand_int__").enumerate() {
        if i > 0 {
            json.push_str(&format!("{}", 100_000_000_000u64 + 7919 * i as u64));
        }
        json.push_str(part);
    }
    let limits = ConfigLimits {
        max_key_len: 4096,
        max_collation_id_len: 256,
        max_gate_len: 256,
    };
    let bytes = json.as_bytes();
    let mut sum = 0u64;
    for _ in 0..n {
        let c = parse_config_limited(black_box(bytes), &limits).expect("job.json parses");
        sum = sum.wrapping_add(c.priority as u64 + c.job_key[0] as u64);
    }
    println!("{} bytes, {n} parses, checksum {sum}", bytes.len());
}

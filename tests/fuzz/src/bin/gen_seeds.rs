//! Seed inputs for the fuzz targets: `cargo run --release --bin gen-seeds`
//! (from tests/fuzz/) writes them to corpus/<target>/seed-*. libFuzzer then
//! grows and minimizes the corpus from there (see README.md).

use std::fs;
use std::path::Path;

use orca::core::{parse_config, Move, Order, Policy, Queue};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn queue(rng: &mut Rng, steps: u64) -> Queue {
    let mut q = Queue::new(if rng.below(2) == 0 {
        Order::Lifo
    } else {
        Order::Fifo
    });
    let policy = Policy {
        max_attempts: 2,
        retry_base: 1000,
        retry_cap: 60_000,
    };
    let mut now = 1_700_000_000_000i64;
    let mut leases = Vec::new();
    for _ in 0..steps {
        now += rng.below(1000) as i64;
        match rng.below(10) {
            0..=4 => {
                let name = format!("j{}", rng.below(24));
                let coll = match rng.below(3) {
                    0 => String::new(),
                    1 => format!(
                        ",\"collation\":{{\"type\":\"user\",\"id\":\"{}\"}}",
                        rng.below(3)
                    ),
                    _ => format!(
                        ",\"collation\":{{\"type\":\"team\",\"id\":{}}}",
                        rng.below(3)
                    ),
                };
                let json = format!(
                    "{{\"key\":\"{name}\",\"response_url\":\"u\"{coll},\"priority\":{},\"metadata_table\":{{\"course\":\"cs2500\"}}}}",
                    rng.below(5000)
                );
                let c = parse_config(json.as_bytes()).expect("seed config");
                if rng.below(5) == 0 {
                    let _ = q.put_immediate(&c, json.as_bytes(), now);
                } else {
                    let _ = q.enqueue(&c, json.as_bytes(), now);
                }
            }
            5 | 6 => {
                let lease = if rng.below(4) == 0 { 0 } else { 30_000 };
                if let Ok((ds, _)) = q.pop_deliveries(now, lease, 2, &policy) {
                    leases.extend(
                        ds.iter()
                            .filter_map(|d| d.lease.map(|(t, _)| (d.job.key, t))),
                    );
                }
            }
            7 if !leases.is_empty() => {
                let (k, t) = leases.remove(0);
                let _ = q.nack(&k, t, None, now, &policy);
            }
            8 if !leases.is_empty() => {
                let (k, t) = leases.remove(0);
                let _ = q.ack(&k, t, Some(b"ok"), now, 60_000);
            }
            _ => {
                if let Some(k) = q.pop_order().first().copied() {
                    let how = if rng.below(2) == 0 {
                        Move::Release
                    } else {
                        Move::Delay { buffer: 100 }
                    };
                    let _ = q.move_job(&k, how, now);
                }
                if let Some(k) = q.pop_order().last().copied() {
                    if rng.below(3) == 0 {
                        let _ = q.cancel(&k);
                    }
                }
            }
        }
    }
    q.check().expect("seed queue is valid");
    q
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for t in ["config", "codec", "ops"] {
        fs::create_dir_all(root.join(t)).expect("corpus dir");
    }
    let configs: &[&[u8]] = &[
        br#"{"key":"sub-41","response_url":"http://web/cb","collation":{"type":"user","id":"7"},"priority":60000,"script":[]}"#,
        br#"{"key":"k","collation":{"type":"team","id":12},"metadata_table":{"course":"cs2500","tags":["a","b"]}}"#,
        br#"{"key":"k","collation":null,"priority":null}"#,
        br#"{"key":"k","priority":9007199254740991}"#,
        br#"{"key":"k","priority":1.5}"#,
        br#"{"key":"k","priority":"\u0100"}"#,
        br#"{"key":"k","key":"j"}"#,
        br#"{"key":"k","collation":{"type":"user","type":"team","id":"1"}}"#,
        br#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"#,
    ];
    for (i, c) in configs.iter().enumerate() {
        fs::write(root.join("config").join(format!("seed-{i}")), c).expect("write");
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..24 {
        let q = queue(&mut rng, 2 + i * 3);
        fs::write(root.join("codec").join(format!("seed-{i}")), q.encode()).expect("write");
    }
    fs::write(
        root.join("codec").join("seed-empty"),
        Queue::new(Order::Lifo).encode(),
    )
    .expect("write");
    for i in 0..8 {
        let n = 32 + rng.below(400) as usize;
        let b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        fs::write(root.join("ops").join(format!("seed-{i}")), b).expect("write");
    }
    println!("seeds written to {}", root.display());
}

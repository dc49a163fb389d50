//! Criterion benches of the queue core (no Redis): the cost of each
//! operation at several queue depths. `cargo bench --bench core`.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use orca::core::{parse_config, Move, Order, Queue};

fn config(i: u64, collations: u64) -> Vec<u8> {
    format!(
        r#"{{"key":"job-{i}","response_url":"http://orca.test/results/{i}","collation":{{"type":"user","id":"{}"}},"priority":{},"metadata_table":{{"course":"cs2500","assignment":"hw{}"}},"script":[{{"cmd":["make","test"],"timeout":120}}],"files":{{"submission":{{"url":"http://orca.test/files/{i}.zip","mime_type":"application/zip"}}}}}}"#,
        i % collations,
        (i * 7919) % 600_000,
        i % 12
    )
    .into_bytes()
}

/// `benches/job.json` (the ~1 KB config of `make bench`) with each
/// `__rand_int__` replaced by a 12-digit number.
fn job_json() -> Vec<u8> {
    let text = include_str!("job.json");
    let mut json = String::new();
    for (i, part) in text.trim_end().split("__rand_int__").enumerate() {
        if i > 0 {
            json.push_str(&format!("{}", 100_000_000_000u64 + 7919 * i as u64));
        }
        json.push_str(part);
    }
    json.into_bytes()
}

fn filled(n: u64) -> Queue {
    let mut q = Queue::new(Order::Lifo);
    for i in 0..n {
        let c = config(i, n / 4 + 1);
        let cfg = parse_config(&c).unwrap();
        q.enqueue(&cfg, &c, i as i64).unwrap();
    }
    q
}

fn benches(c: &mut Criterion) {
    let sample = config(1, 10);
    c.bench_function("parse_config (~500 B)", |b| {
        b.iter(|| parse_config(black_box(&sample)).unwrap())
    });
    let job = job_json();
    c.bench_function("parse_config/job.json", |b| {
        b.iter(|| parse_config(black_box(&job)).unwrap())
    });
    for &n in &[1_000u64, 100_000] {
        let base = filled(n);
        let mut i = n;
        c.bench_function(&format!("enqueue+delete at depth {n}"), |b| {
            let mut q = base.clone();
            b.iter(|| {
                i += 1;
                let cfg_bytes = config(i, n / 4 + 1);
                let cfg = parse_config(&cfg_bytes).unwrap();
                q.enqueue(&cfg, &cfg_bytes, 1_000_000).unwrap();
                q.delete(&cfg.job_key).unwrap();
            })
        });
        c.bench_function(&format!("pop at depth {n}"), |b| {
            b.iter_batched_ref(|| base.clone(), |q| q.pop().unwrap(), BatchSize::LargeInput)
        });
        let probe = parse_config(&config(n / 2, n / 4 + 1)).unwrap().job_key;
        c.bench_function(&format!("position at depth {n}"), |b| {
            b.iter(|| base.position(black_box(&probe)).unwrap())
        });
        c.bench_function(&format!("move delay at depth {n}"), |b| {
            let mut q = base.clone();
            b.iter(|| {
                q.move_job(&probe, Move::Delay { buffer: 10_000 }, 5)
                    .unwrap();
            })
        });
    }
}

criterion_group! {
    name = core;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = benches
}
criterion_main!(core);

//! The serialized queue (`Queue::encode` / `decode`, what RDB, AOF and
//! `ORCA.IMPORT` carry): units are canonical and self-contained, every kind
//! of work round-trips, and decoding mutated encodings never panics: it
//! refuses, or gives a queue that passes `check()` and works.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use orca::core::settings::AutoDelay;
use orca::core::{JobKey, Move, Order, Policy, Queue, QueueError, Settings, MAX_TIME};

use crate::common::{seeds, Rng};
use crate::queue_rules::seed_queue;
use crate::queue_sequences::{describe, Harness};
use crate::support::*;
use crate::worker_rules::*;
use crate::worker_sequences::{deliveries, COLLS};

/// A queue built by a random sequence (checked against the model as it goes).
pub fn random_queue(seed: u64, order: Order, steps: usize) -> Queue {
    let mut h = Harness::new(seed, order);
    for step in 0..steps {
        let op = h.gen_op(step);
        h.apply(&op)
            .unwrap_or_else(|e| panic!("seed {seed} step {step} {}: {e}", describe(&op)));
    }
    h.q
}

pub fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Split `encode()` output into (header, units) following its framing:
/// bytes(header) u64(count) bytes(unit)*.
pub fn split_units(buf: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let hl = le_u64(buf, 0).unwrap() as usize;
    let header = buf[8..8 + hl].to_vec();
    let mut at = 8 + hl;
    let n = le_u64(buf, at).unwrap();
    at += 8;
    let mut units = Vec::new();
    for _ in 0..n {
        let l = le_u64(buf, at).unwrap() as usize;
        units.push(buf[at + 8..at + 8 + l].to_vec());
        at += 8 + l;
    }
    assert_eq!(at, buf.len(), "framing of encode() not as expected");
    (header, units)
}

pub fn join_units(header: &[u8], units: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(&(units.len() as u64).to_le_bytes());
    for u in units {
        out.extend_from_slice(&(u.len() as u64).to_le_bytes());
        out.extend_from_slice(u);
    }
    out
}

#[test]
pub fn codec_units_are_canonical_and_self_contained() {
    for (seed, order) in [(21, Order::Lifo), (22, Order::Fifo), (23, Order::Lifo)] {
        let q = random_queue(seed, order, 700);
        let bytes = q.encode();
        let (header, units) = split_units(&bytes);
        assert_eq!(units.len(), q.unit_count());
        let mut rng = Rng::new(seed);
        // Any permutation of the units decodes to the same queue, which
        // encodes back canonically.
        for _ in 0..10 {
            let mut u = units.clone();
            for i in (1..u.len()).rev() {
                u.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let d = Queue::decode(&join_units(&header, &u)).expect("shuffled units rejected");
            assert_eq!(
                d.encode(),
                bytes,
                "seed {seed}: shuffled units decode differently"
            );
        }
        // Each unit is valid on its own: dropping one loses exactly its jobs.
        let full = Queue::decode(&bytes).unwrap();
        for drop in 0..units.len() {
            let mut u = units.clone();
            u.remove(drop);
            let d = Queue::decode(&join_units(&header, &u))
                .unwrap_or_else(|e| panic!("seed {seed}: dropping unit {drop} rejected: {e}"));
            d.check().unwrap();
            let kept: Vec<JobKey> = full
                .pop_order()
                .into_iter()
                .filter(|key| d.info(key).is_ok())
                .collect();
            assert_eq!(d.pop_order().len(), kept.len());
            // The unit held queued jobs, a held job, a closed gate or a
            // collation's submission window: that is what is lost.
            assert!(d.len() <= full.len() && d.held_len() <= full.held_len());
            assert!(
                d.len() + d.held_len() < full.len() + full.held_len()
                    || d.gate_list().len() < full.gate_list().len()
                    || d.encode() != bytes,
                "seed {seed}: dropping unit {drop} lost nothing"
            );
        }
        // A duplicated unit is rejected.
        if !units.is_empty() {
            let mut u = units.clone();
            let i = rng.below(u.len() as u64) as usize;
            u.push(u[i].clone());
            assert!(
                Queue::decode(&join_units(&header, &u)).is_err(),
                "duplicate unit accepted"
            );
        }
        // Header/count/trailing-byte damage.
        let mut t = bytes.clone();
        t.push(0);
        assert!(Queue::decode(&t).is_err(), "trailing byte accepted");
        let mut h = header.clone();
        h[0] = orca::core::codec::ENCODING_CURRENT + 1; // a newer encoding version
        assert!(
            Queue::decode(&join_units(&h, &units)).is_err(),
            "future version accepted"
        );
        let mut h = header.clone();
        h[1] = 2; // unknown order
        assert!(
            Queue::decode(&join_units(&h, &units)).is_err(),
            "unknown order accepted"
        );
    }
}

pub const INTERESTING: [i64; 12] = [
    0,
    1,
    -1,
    2,
    MAX_TIME,
    MAX_TIME + 1,
    i64::MIN,
    i64::MAX,
    u32::MAX as i64,
    1 << 32,
    i64::MAX / 2,
    i64::MIN / 2,
];

pub fn mutate(rng: &mut Rng, base: &[u8]) -> (String, Vec<u8>) {
    let mut b = base.to_vec();
    let len = b.len();
    let pos = |rng: &mut Rng, len: usize| {
        if len == 0 {
            0
        } else {
            rng.below(len as u64) as usize
        }
    };
    let kind = rng.below(10);
    let desc = match kind {
        0 => {
            let p = pos(rng, len);
            let x = 1 + rng.below(255) as u8;
            if len > 0 {
                b[p] ^= x;
            }
            format!("xor byte {p} with {x:#04x}")
        }
        1 => {
            let p = pos(rng, len);
            let bit = rng.below(8);
            if len > 0 {
                b[p] ^= 1 << bit;
            }
            format!("flip bit {bit} of byte {p}")
        }
        2 => {
            let p = pos(rng, len);
            b.truncate(p);
            format!("truncate to {p}")
        }
        3 | 4 => {
            let p = pos(rng, len);
            let n = 1 + rng.below(8) as usize;
            let v = if kind == 3 { 0xff } else { 0 };
            for x in b.iter_mut().skip(p).take(n) {
                *x = v;
            }
            format!("set {n} bytes at {p} to {v:#04x}")
        }
        5 => {
            let p = pos(rng, len + 1);
            let n = 1 + rng.below(16) as usize;
            let ins: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            b.splice(p..p, ins);
            format!("insert {n} random bytes at {p}")
        }
        6 => {
            let p = pos(rng, len);
            let n = (1 + rng.below(64) as usize).min(len - p.min(len));
            b.drain(p..p + n);
            format!("delete {n} bytes at {p}")
        }
        7 => {
            // Copy a chunk over another place (duplicates keys, units, ...).
            let n = 1 + rng.below(80) as usize;
            if len > n {
                let from = rng.below((len - n) as u64) as usize;
                let to = rng.below((len - n) as u64) as usize;
                let chunk = b[from..from + n].to_vec();
                b[to..to + n].copy_from_slice(&chunk);
                format!("copy {n} bytes from {from} to {to}")
            } else {
                "no-op".into()
            }
        }
        8 => {
            // An interesting 8-byte value at a random offset.
            let v = INTERESTING[rng.below(INTERESTING.len() as u64) as usize];
            if len >= 8 {
                let p = rng.below((len - 7) as u64) as usize;
                b[p..p + 8].copy_from_slice(&v.to_le_bytes());
                format!("write i64 {v} at {p}")
            } else {
                "no-op".into()
            }
        }
        _ => {
            let n = 2 + rng.below(4);
            for _ in 0..n {
                if !b.is_empty() {
                    let p = rng.below(b.len() as u64) as usize;
                    b[p] = rng.next_u64() as u8;
                }
            }
            format!("{n} random bytes replaced")
        }
    };
    (desc, b)
}

/// Use a queue that decoding accepted: every query and operation must work
/// without panicking and keep it valid.
pub fn exercise(q: &mut Queue) -> Result<(), String> {
    q.check()
        .map_err(|e| format!("accepted queue fails check(): {e}"))?;
    let bytes = q.encode();
    let again = match Queue::decode(&bytes) {
        Ok(q) => q,
        Err(e) => return err(format!("re-decoding an accepted queue failed: {e}")),
    };
    ensure!(
        again.encode() == bytes,
        "accepted queue does not round-trip"
    );
    let order = q.pop_order();
    ensure!(
        order.len() == q.len(),
        "pop_order() has {} jobs, len() {}",
        order.len(),
        q.len()
    );
    for (i, key) in order.iter().enumerate() {
        q.info(key).map_err(|e| format!("info failed: {e}"))?;
        ensure!(
            q.position(key) == Ok(i + 1),
            "position disagrees with pop_order"
        );
    }
    // A crafted queue may sit at the end of its sequence range: then writes
    // are refused (with nothing changed), never half-done.
    let before = q.encode();
    match q.enqueue(&cfg("fuzz-new", Some("user.1"), 10), b"n", 1_000) {
        Ok(_) => {}
        Err(e) if exhausted(&e) => {
            ensure!(q.encode() == before, "refused enqueue changed the queue")
        }
        Err(e) => return err(format!("enqueue failed: {e}")),
    }
    q.check()?;
    let before = q.encode();
    match q.put_immediate(&cfg("fuzz-imm", None, 0), b"i", 0) {
        Ok(_) => {}
        Err(e) if exhausted(&e) => ensure!(
            q.encode() == before,
            "refused put_immediate changed the queue"
        ),
        Err(e) => return err(format!("put_immediate failed: {e}")),
    }
    q.check()?;
    let movable: Vec<JobKey> = q
        .pop_order()
        .into_iter()
        .filter(|key| q.info(key).map(|i| !i.immediate).unwrap_or(false))
        .take(2)
        .collect();
    for (i, key) in movable.iter().enumerate() {
        let how = if i == 0 {
            Move::Delay { buffer: 10_000 }
        } else {
            Move::Release
        };
        match q.move_job(key, how, 2_000) {
            Ok(_) | Err(QueueError::TimeOverflow) => {}
            Err(e) if exhausted(&e) => {}
            Err(e) => return err(format!("move_job failed: {e}")),
        }
        q.check()?;
    }
    if let Some(key) = q.pop_order().get(q.len() / 2).copied() {
        ensure!(q.delete(&key) == Ok(true), "delete of a listed job failed");
        q.check()?;
    }
    let expect = q.pop_order();
    let mut got = Vec::new();
    while let Some(i) = q.pop().map_err(|e| format!("pop failed: {e}"))? {
        got.push(i.key);
        if got.len() % 8 == 1 {
            q.check()?;
        }
    }
    q.check()?;
    ensure!(got == expect, "pops do not follow pop_order()");
    Ok(())
}

/// The refusal of a write on a queue whose sequence counters are exhausted.
pub fn exhausted(e: &QueueError) -> bool {
    matches!(e, QueueError::Corrupt(m) if m == "sequence numbers exhausted")
}

#[test]
pub fn decode_fuzz() {
    let start = Instant::now();
    let mut bases: Vec<(String, Vec<u8>)> = vec![
        ("empty lifo".into(), Queue::new(Order::Lifo).encode()),
        ("empty fifo".into(), Queue::new(Order::Fifo).encode()),
        ("seed queue".into(), {
            let mut q = seed_queue(Order::Lifo);
            q.move_job(&k("j1"), Move::Release, 9).unwrap();
            q.move_job(&k("j2"), Move::Delay { buffer: 10 }, 9).unwrap();
            q.put_immediate(&cfg("imm", Some("team.2"), 0), b"payload", 3)
                .unwrap();
            q.encode()
        }),
    ];
    for (seed, order, steps) in [
        (31, Order::Lifo, 40),
        (32, Order::Fifo, 120),
        (33, Order::Lifo, 350),
        (34, Order::Fifo, 800),
    ] {
        bases.push((
            format!("random seed {seed} {order:?} {steps} steps"),
            random_queue(seed, order, steps).encode(),
        ));
    }
    let mut accepted = 0usize;
    let mut rejected = 0usize;
    let fuzz_seeds: Vec<u64> = seeds(&SEEDS).into_iter().take(3).collect();
    for &seed in &fuzz_seeds {
        let mut rng = Rng::new(seed ^ 0xF022);
        for (name, base) in &bases {
            for m in 0..300 {
                let (desc, bytes) = mutate(&mut rng, base);
                let r = catch_unwind(AssertUnwindSafe(|| match Queue::decode(&bytes) {
                    Err(_) => Ok(false),
                    Ok(mut q) => exercise(&mut q).map(|_| true),
                }));
                match r {
                    Ok(Ok(true)) => accepted += 1,
                    Ok(Ok(false)) => rejected += 1,
                    Ok(Err(e)) => panic!(
                        "decode fuzz: seed {seed}, base {name:?}, mutation {m} ({desc}): {e}"
                    ),
                    Err(_) => panic!(
                        "decode fuzz: seed {seed}, base {name:?}, mutation {m} ({desc}): PANIC (see above)"
                    ),
                }
            }
        }
    }
    eprintln!(
        "decode_fuzz: {} mutations ({accepted} accepted and exercised, {rejected} rejected) in {:.2?}",
        accepted + rejected,
        start.elapsed()
    );
}

#[test]
pub fn codec_round_trip_with_every_kind_of_work() {
    let p1 = Policy {
        max_attempts: 2,
        ..P
    };
    let mut q = Queue::new(Order::Fifo);
    for i in 0..6 {
        enq_coll(
            &mut q,
            &format!("c{i}"),
            COLLS[i % 3],
            10 * i as i64,
            i as i64,
        );
    }
    enq(&mut q, "plain", "p", 7);
    let ds = pop_n(&mut q, 100, 1_000, 3, &p1);
    q.nack(&k(&ds[0].0), ds[0].1, Some(5_000), 110, &p1)
        .unwrap(); // delayed
    q.ack(&k(&ds[1].0), ds[1].1, Some(b"res"), 120, 100_000)
        .unwrap(); // result
    let ds2 = pop_n(&mut q, 130, 1_000, 2, &p1);
    q.cancel(&k(&ds2[0].0)).unwrap(); // cancellation record
    enq(&mut q, &ds2[1].0, "regrade", 135); // a superseded lease
    let flags = lease_flags(&q, &ds2[1].0);
    assert_eq!(flags, vec![(ds2[1].1, true)]);
    // A job whose lease expires twice: dead (max_attempts 2).
    let (n, ..) = pop1(&mut q, 140, 10, &p1);
    q.tick(150, &p1);
    assert_eq!(pop1(&mut q, 150, 10, &p1).0, n);
    q.tick(160, &p1);
    assert_eq!(q.dead_len(), 1);
    let (qd, dl, ls, dd) = q.state_counts();
    assert!(
        qd > 0 && dl == 1 && ls > 0 && dd == 1,
        "{:?}",
        q.state_counts()
    );
    let mut d = roundtrip(&q);
    d.check().unwrap();
    assert_eq!(
        lease_flags(&d, &ds2[1].0),
        flags,
        "the flag survives decode"
    );
    // Both behave identically from here on.
    let steps: Vec<i64> = vec![200, 1_200, 5_200, 6_000, 200_000, 1_000_000];
    for now in steps {
        let a = q
            .pop_deliveries(now, 500, 2, &p1)
            .map(|(ds, r)| (deliveries(&ds), r));
        let b = d
            .pop_deliveries(now, 500, 2, &p1)
            .map(|(ds, r)| (deliveries(&ds), r));
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_eq!(q.encode(), d.encode());
    }
}

/// docs/commands.md, ORCA.IMPORT: "it is fully decoded and checked ...
/// before anything changes, and refused whole if ..."; "into an existing
/// queue, the queue keeps its settings". A blob that carries a collation's
/// submission window (its queue had an automatic delay), imported into a
/// queue without one, passes `absorb`'s checks, then its window unit is
/// refused by the loader ("submission window without an auto delay")
/// after the units before it were applied: the import answers an error
/// and the queue holds half of it. Found by the `codec` fuzz target with
/// the V2 seeds.
///
///     A: SETTINGS AUTODELAY 60000 1000; ENQUEUE a1 (user.1)
///     B: ENQUEUE x, b at 5000 (no collation); DELETE x; ORCA.IMPORT B <A's blob>
///     -> ERR corrupt queue data: submission window without an auto delay,
///        and B now holds a1.
#[test]
pub fn codec_bug_import_of_a_window_is_half_applied() {
    let mut a = Queue::with_settings(Settings {
        autodelay: AutoDelay {
            window: 60_000,
            step: 1_000,
            cap: 0,
        },
        ..Settings::default()
    });
    a.enqueue(&cfg("a1", Some("user.1"), 0), b"a1", 1_000)
        .unwrap();
    // B's job has another reservation and nonce than A's (seq 2, at 5000).
    let mut b = Queue::new(Order::Lifo);
    b.enqueue(&cfg("x", None, 0), b"x", 5_000).unwrap();
    b.enqueue(&cfg("b", None, 0), b"b", 5_000).unwrap();
    b.delete(&k("x")).unwrap();
    let before = b.encode();
    match b.absorb(a) {
        Ok(()) => {
            b.check().unwrap();
            assert!(b.contains(&k("a1")), "an accepted import holds its jobs");
        }
        Err(e) => assert!(
            b.encode() == before,
            "IMPORT refused ({e}) yet changed the queue: it now holds {:?}",
            order_of(&b)
        ),
    }
}

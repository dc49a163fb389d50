//! The queue order, one rule per test: the seed-000 examples, LIFO and
//! FIFO collations, pairing kept through delete and upgrade, immediate jobs
//! and re-enqueue, release before everything, errors that change nothing;
//! and the core bugs the random sequences found (`regression_*`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use orca::core::config::orca_key;
use orca::core::{encode_key, parse_config, Move, Order, Queue, QueueError, MAX_TIME};

use crate::support::*;

pub fn enq(q: &mut Queue, name: &str, coll: Option<&str>, priority: i64, now: i64) -> Info {
    let (info, created) = q
        .enqueue(&cfg(name, coll, priority), name.as_bytes(), now)
        .unwrap_or_else(|e| panic!("enqueue {name}: {e}"));
    assert!(created.created, "enqueue {name}: not created");
    let info = conv(&info);
    q.check().unwrap();
    info
}

pub fn info_of(q: &Queue, name: &str) -> Info {
    conv(
        &q.info(&k(name))
            .unwrap_or_else(|e| panic!("info({name}): {e}")),
    )
}

pub fn pop_all(q: &mut Queue) -> Vec<Info> {
    let mut out = Vec::new();
    while let Some(i) = q.pop().unwrap() {
        q.check().unwrap();
        out.push(conv(&i));
    }
    assert!(q.is_empty());
    out
}

pub fn popped_names(v: &[Info]) -> Vec<String> {
    v.iter().map(|i| kname(&i.key)).collect()
}

/// j1..j6 over collations user.1 (j1, j3), team.2 (j2, j5), user.3 (j6) and
/// one job without collation (j4).
pub fn seed_queue(order: Order) -> Queue {
    let mut q = Queue::new(order);
    enq(&mut q, "j1", Some("user.1"), 0, 0);
    enq(&mut q, "j2", Some("team.2"), 0, 1);
    enq(&mut q, "j3", Some("user.1"), 0, 2);
    enq(&mut q, "j4", None, 0, 3);
    enq(&mut q, "j5", Some("team.2"), 50, 4);
    enq(&mut q, "j6", Some("user.3"), 0, 5);
    q
}

#[test]
pub fn seed_queue_layout() {
    // LIFO: user.1 stack [j3, j1] with reservations 0, 2; team.2 [j5, j2]
    // with 1, 54.
    let q = seed_queue(Order::Lifo);
    assert_eq!(order_of(&q), strs(&["j3", "j5", "j1", "j4", "j6", "j2"]));
    let rel: Vec<i64> = ["j3", "j5", "j1", "j4", "j6", "j2"]
        .iter()
        .map(|n| info_of(&q, n).release_at)
        .collect();
    assert_eq!(rel, [0, 1, 2, 3, 5, 54]);
    // FIFO: user.1 [j1, j3], team.2 [j2, j5].
    let q = seed_queue(Order::Fifo);
    assert_eq!(order_of(&q), strs(&["j1", "j2", "j3", "j4", "j6", "j5"]));
    for (i, n) in ["j1", "j2", "j3", "j4", "j6", "j5"].iter().enumerate() {
        assert_eq!(q.position(&k(n)), Ok(i + 1), "position of {n}");
    }
}

/// Pairs of the seed queue's jobs that the seed-000 examples move one after
/// the other.
const MOVED_PAIRS: [(&str, &str); 5] = [
    ("j1", "j2"),
    ("j4", "j1"),
    ("j6", "j3"),
    ("j2", "j5"),
    ("j3", "j1"),
];

/// The seed queue in `order`, and for a test that moves `a` and `b` the
/// other jobs in pop order with what the core reports of each (which the
/// moves must not change).
fn seed_queue_but(order: Order, a: &str, b: &str) -> (Queue, Vec<String>, Vec<Info>) {
    let q = seed_queue(order);
    let others: Vec<String> = order_of(&q)
        .into_iter()
        .filter(|n| *n != a && *n != b)
        .collect();
    let kept: Vec<Info> = others.iter().map(|n| info_of(&q, n)).collect();
    (q, others, kept)
}

#[test]
pub fn seed_examples_release_then_release() {
    for order in [Order::Lifo, Order::Fifo] {
        for &(a, b) in &MOVED_PAIRS {
            let (mut q, others, kept) = seed_queue_but(order, a, b);
            let ia = conv(&q.move_job(&k(a), Move::Release, 100).unwrap());
            q.check().unwrap();
            assert_eq!(order_of(&q)[0], a, "{order:?}: release {a} -> front");
            assert!(ia.immediate);
            let ib = conv(&q.move_job(&k(b), Move::Release, 100).unwrap());
            q.check().unwrap();
            assert!(ib.immediate);
            let mut want = strs(&[b, a]);
            want.extend(others.iter().cloned());
            assert_eq!(order_of(&q), want, "{order:?}: release {a} then {b}");
            // Nobody else moved: same release time and nonce.
            for w in &kept {
                assert_eq!(
                    &info_of(&q, &kname(&w.key)),
                    w,
                    "{order:?}: release {a},{b} moved another job"
                );
            }
            // Released jobs are immediate now and cannot be moved again.
            let enc = q.encode();
            assert_eq!(
                q.move_job(&k(a), Move::Release, 200).map(|i| conv(&i)),
                Err(QueueError::ImmediateNotMovable)
            );
            assert_eq!(
                q.move_job(&k(b), Move::Delay { buffer: 10_000 }, 200)
                    .map(|i| conv(&i)),
                Err(QueueError::ImmediateNotMovable)
            );
            assert_eq!(q.encode(), enc);
            assert_eq!(popped_names(&pop_all(&mut q)), want);
        }
    }
}

#[test]
pub fn seed_examples_delay_then_delay() {
    for order in [Order::Lifo, Order::Fifo] {
        for &(a, b) in MOVED_PAIRS.iter().chain(&[("j2", "j4")]) {
            let (mut q, others, kept) = seed_queue_but(order, a, b);
            // The last reservation is j2's/j5's at 54.
            let ia = conv(
                &q.move_job(&k(a), Move::Delay { buffer: 10_000 }, 100)
                    .unwrap(),
            );
            q.check().unwrap();
            assert_eq!(ia.release_at, 10_054, "{order:?}: delay {a}");
            assert!(!ia.immediate);
            assert_eq!(
                order_of(&q).last().unwrap(),
                a,
                "{order:?}: delay {a} -> back"
            );
            let ib = conv(
                &q.move_job(&k(b), Move::Delay { buffer: 10_000 }, 100)
                    .unwrap(),
            );
            q.check().unwrap();
            assert_eq!(ib.release_at, 20_054, "{order:?}: delay {b}");
            let mut want = others.clone();
            want.extend(strs(&[a, b]));
            assert_eq!(order_of(&q), want, "{order:?}: delay {a} then {b}");
            for w in &kept {
                assert_eq!(
                    &info_of(&q, &kname(&w.key)),
                    w,
                    "{order:?}: delay {a},{b} moved another job"
                );
            }
            assert_eq!(q.position(&k(a)), Ok(5));
            assert_eq!(q.position(&k(b)), Ok(6));
            // A delayed job can still be moved (it is not immediate).
            let ia2 = conv(&q.move_job(&k(a), Move::Delay { buffer: 0 }, 100).unwrap());
            assert_eq!(
                ia2.release_at, 20_054,
                "buffer 0: same score as the last, after it"
            );
            assert_eq!(order_of(&q).last().unwrap(), a);
            let popped = pop_all(&mut q);
            let mut want = others.clone();
            want.extend(strs(&[b, a]));
            assert_eq!(popped_names(&popped), want);
        }
    }
}

#[test]
pub fn delay_counts_the_jobs_own_reservation() {
    for order in [Order::Lifo, Order::Fifo] {
        let mut q = Queue::new(order);
        enq(&mut q, "s", None, 500, 0);
        let i = conv(
            &q.move_job(&k("s"), Move::Delay { buffer: 10_000 }, 0)
                .unwrap(),
        );
        assert_eq!(i.release_at, 10_500);
        enq(&mut q, "c", Some("user.5"), 20_000, 0);
        let i = conv(&q.move_job(&k("c"), Move::Delay { buffer: 1 }, 0).unwrap());
        assert_eq!(i.release_at, 20_001);
        assert_eq!(order_of(&q), strs(&["s", "c"]));
        q.check().unwrap();
    }
}

#[test]
pub fn lifo_vs_fifo_in_one_collation() {
    let build = |order| {
        let mut q = Queue::new(order);
        enq(&mut q, "a", Some("user.9"), 0, 0);
        enq(&mut q, "b", Some("user.9"), 0, 10);
        enq(&mut q, "x", None, 0, 15);
        enq(&mut q, "c", Some("user.9"), 0, 20);
        q
    };
    let mut q = build(Order::Lifo);
    assert_eq!(q.order(), Order::Lifo);
    assert_eq!(order_of(&q), strs(&["c", "b", "x", "a"]));
    let popped = pop_all(&mut q);
    assert_eq!(popped_names(&popped), strs(&["c", "b", "x", "a"]));
    // The k-th job takes the k-th reservation, not its own arrival time.
    let rel: Vec<i64> = popped.iter().map(|i| i.release_at).collect();
    assert_eq!(rel, [0, 10, 15, 20]);
    let created: Vec<i64> = popped.iter().map(|i| i.created_at).collect();
    assert_eq!(created, [20, 10, 15, 0]);
    assert!(popped.iter().all(|i| i.attempts == 1 && !i.immediate));

    let mut q = build(Order::Fifo);
    assert_eq!(order_of(&q), strs(&["a", "b", "x", "c"]));
    let popped = pop_all(&mut q);
    assert_eq!(popped_names(&popped), strs(&["a", "b", "x", "c"]));
    let rel: Vec<i64> = popped.iter().map(|i| i.release_at).collect();
    assert_eq!(rel, [0, 10, 15, 20]);

    // A spamming student: priorities push their later reservations back, and
    // LIFO hands out the newest submission at the earliest reservation.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "s1", Some("user.7"), 0, 0);
    enq(&mut q, "s2", Some("user.7"), 60_000, 1);
    enq(&mut q, "s3", Some("user.7"), 120_000, 2);
    enq(&mut q, "other", Some("user.8"), 0, 3);
    assert_eq!(order_of(&q), strs(&["s3", "other", "s2", "s1"]));
    assert_eq!(info_of(&q, "s3").release_at, 0);
    assert_eq!(info_of(&q, "s1").release_at, 120_002);
}

#[test]
pub fn set_order_affects_only_new_jobs() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "a", Some("user.1"), 0, 0);
    enq(&mut q, "b", Some("user.1"), 0, 1);
    q.set_order(Order::Fifo);
    enq(&mut q, "c", Some("user.1"), 0, 2);
    assert_eq!(order_of(&q), strs(&["b", "a", "c"]));
    q.set_order(Order::Lifo);
    enq(&mut q, "d", Some("user.1"), 0, 3);
    assert_eq!(order_of(&q), strs(&["d", "b", "a", "c"]));
    let back = Queue::decode(&q.encode()).unwrap();
    assert_eq!(back.order(), Order::Lifo);
}

#[test]
pub fn pairing_preserved_on_delete_and_upgrade() {
    for order in [Order::Lifo, Order::Fifo] {
        // Pop order: (first, middle, last) at reservations 0, 100, 200.
        let build = || {
            let mut q = Queue::new(order);
            enq(&mut q, "a", Some("team.3"), 0, 0);
            enq(&mut q, "b", Some("team.3"), 0, 100);
            enq(&mut q, "c", Some("team.3"), 0, 200);
            enq(&mut q, "z", None, 0, 150);
            q
        };
        let q = build();
        let names3 = match order {
            Order::Lifo => ["c", "b", "a"],
            Order::Fifo => ["a", "b", "c"],
        };
        assert_eq!(order_of(&q), strs(&[names3[0], names3[1], "z", names3[2]]));
        let orig: Vec<Info> = names3.iter().map(|n| info_of(&q, n)).collect();
        assert_eq!(
            orig.iter().map(|i| i.release_at).collect::<Vec<_>>(),
            [0, 100, 200]
        );

        for victim in 0..3 {
            // Delete.
            let mut q = build();
            assert_eq!(q.delete(&k(names3[victim])), Ok(true));
            q.check().unwrap();
            for (i, n) in names3.iter().enumerate() {
                if i != victim {
                    assert_eq!(
                        info_of(&q, n),
                        orig[i],
                        "{order:?}: delete {} moved {n}",
                        names3[victim]
                    );
                }
            }
            assert_eq!(q.delete(&k(names3[victim])), Ok(false));
            assert_eq!(q.len(), 3);

            // Upgrade (IMMEDIATE on a waiting collated job).
            let mut q = build();
            let v = names3[victim];
            let (up, created) = q
                .put_immediate(&cfg(v, Some("team.3"), 0), b"new", 300)
                .unwrap();
            let up = conv(&up);
            assert!(!created.created);
            assert!(up.immediate);
            assert_eq!(up.release_at, 300);
            assert_eq!(
                up.created_at, orig[victim].created_at,
                "upgrade keeps created_at"
            );
            assert_eq!(up.collation.as_deref(), Some("team.3"));
            assert_eq!(up.payload, b"new");
            q.check().unwrap();
            for (i, n) in names3.iter().enumerate() {
                if i != victim {
                    assert_eq!(info_of(&q, n), orig[i], "{order:?}: upgrade {v} moved {n}");
                }
            }
            // Release / delay of the victim: same for the others.
            for how in [Move::Release, Move::Delay { buffer: 10_000 }] {
                let mut q = build();
                q.move_job(&k(v), how, 400).unwrap();
                q.check().unwrap();
                for (i, n) in names3.iter().enumerate() {
                    if i != victim {
                        assert_eq!(info_of(&q, n), orig[i], "{order:?}: {how:?} {v} moved {n}");
                    }
                }
            }
        }
    }
}

#[test]
pub fn enqueue_existing_job_replaces_payload_only() {
    for order in [Order::Lifo, Order::Fifo] {
        let mut q = Queue::new(order);
        enq(&mut q, "a", Some("user.1"), 100, 0);
        enq(&mut q, "b", Some("user.1"), 0, 10);
        enq(&mut q, "n", None, 5, 20);
        let before: Vec<Info> = ["a", "b", "n"].iter().map(|n| info_of(&q, n)).collect();
        let pos: Vec<_> = ["a", "b", "n"].iter().map(|n| q.position(&k(n))).collect();
        let ord = order_of(&q);
        // Different priority, collation and time: all ignored.
        let (i, created) = q
            .enqueue(&cfg("a", Some("team.9"), 0), b"A2", 5_000)
            .unwrap();
        assert!(!created.created);
        let mut want = before[0].clone();
        want.payload = b"A2".to_vec();
        assert_eq!(conv(&i), want);
        let (i, created) = q.enqueue(&cfg("n", Some("user.1"), 0), b"", 5_000).unwrap();
        assert!(!created.created);
        assert_eq!(conv(&i).release_at, before[2].release_at);
        assert_eq!(conv(&i).collation, None);
        assert_eq!(order_of(&q), ord);
        assert_eq!(info_of(&q, "b"), before[1]);
        let pos2: Vec<_> = ["a", "b", "n"].iter().map(|n| q.position(&k(n))).collect();
        assert_eq!(pos, pos2);
        // An existing job whose new release time would overflow: still only
        // the payload changes.
        let (_, created) = q
            .enqueue(&cfg("b", None, MAX_TIME), b"B2", MAX_TIME)
            .unwrap();
        assert!(!created.created);
        assert_eq!(info_of(&q, "b").payload, b"B2");
        assert_eq!(info_of(&q, "b").release_at, before[1].release_at);
        q.check().unwrap();
    }
}

#[test]
pub fn immediate_jobs_and_reenqueue() {
    for order in [Order::Lifo, Order::Fifo] {
        let mut q = Queue::new(order);
        enq(&mut q, "a", Some("user.1"), 0, 1_000);
        enq(&mut q, "b", None, 0, 1_001);
        // New immediate job at its arrival.
        let (i, created) = q
            .put_immediate(&cfg("i", Some("user.1"), 0), b"I", 1_002)
            .unwrap();
        let i = conv(&i);
        assert!(created.created && i.immediate);
        assert_eq!((i.created_at, i.release_at), (1_002, 1_002));
        assert_eq!(i.collation.as_deref(), Some("user.1"));
        assert_eq!(order_of(&q), strs(&["a", "b", "i"]));
        // Existing immediate job: payload only; arrival ignored.
        let (i2, created) = q.put_immediate(&cfg("i", None, 0), b"I2", 0).unwrap();
        let i2 = conv(&i2);
        assert!(!created.created);
        assert_eq!(
            (i2.nonce, i2.release_at, i2.created_at),
            (i.nonce, i.release_at, i.created_at)
        );
        assert_eq!(i2.payload, b"I2");
        // Immediate job with equal score: after the earlier arrivals at that time.
        let (j, _) = q.put_immediate(&cfg("j", None, 0), b"J", 1_000).unwrap();
        assert_eq!(conv(&j).release_at, 1_000);
        assert_eq!(order_of(&q), strs(&["a", "j", "b", "i"]));
        // Upgrade of a job without collation.
        let (u, created) = q.put_immediate(&cfg("b", None, 0), b"B", 5_000).unwrap();
        let u = conv(&u);
        assert!(!created.created && u.immediate);
        assert_eq!((u.created_at, u.release_at), (1_001, 5_000));
        assert_eq!(order_of(&q), strs(&["a", "j", "i", "b"]));
        // A worker hands a popped job back: immediate at its arrival time,
        // ahead of everything that arrived later.
        let popped = conv(&q.pop().unwrap().unwrap());
        assert_eq!(kname(&popped.key), "a");
        assert_eq!(popped.attempts, 1);
        let (r, created) = q
            .put_immediate(
                &cfg("a", Some("user.1"), 0),
                &popped.payload,
                popped.created_at,
            )
            .unwrap();
        let r = conv(&r);
        assert!(created.created && r.immediate);
        assert_eq!((r.created_at, r.release_at), (1_000, 1_000));
        assert_eq!(
            order_of(&q),
            strs(&["j", "a", "i", "b"]),
            "equal score: arrival (sequence) order"
        );
        // Arrival in the past: before everything.
        q.put_immediate(&cfg("old", None, 0), b"", 10).unwrap();
        assert_eq!(order_of(&q)[0], "old");
        q.check().unwrap();
        assert_eq!(
            popped_names(&pop_all(&mut q)),
            strs(&["old", "j", "a", "i", "b"])
        );
    }
}

#[test]
pub fn release_goes_before_everything_even_in_the_past() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "late", None, 0, 5_000);
    q.put_immediate(&cfg("early", None, 0), b"", 100).unwrap();
    enq(&mut q, "r", Some("user.1"), 60_000, 6_000);
    // Released at now=7000, but the first reservation is at 100.
    let r = conv(&q.move_job(&k("r"), Move::Release, 7_000).unwrap());
    assert_eq!(r.release_at, 100);
    assert!(r.immediate);
    assert_eq!(order_of(&q), strs(&["r", "early", "late"]));
    // now earlier than the first reservation: score = now.
    enq(&mut q, "s", None, 0, 8_000);
    let s = conv(&q.move_job(&k("s"), Move::Release, 50).unwrap());
    assert_eq!(s.release_at, 50);
    assert_eq!(order_of(&q), strs(&["s", "r", "early", "late"]));
    // Releasing the only job.
    let mut q = Queue::new(Order::Fifo);
    enq(&mut q, "only", Some("team.1"), 100, 0);
    let o = conv(&q.move_job(&k("only"), Move::Release, 30).unwrap());
    assert_eq!(o.release_at, 30);
    assert_eq!(q.collation_count(), 0);
    q.check().unwrap();
}

#[test]
pub fn pop_does_not_wait_for_release_time() {
    let mut q = Queue::new(Order::Lifo);
    assert_eq!(q.pop().map(|o| o.is_none()), Ok(true));
    enq(&mut q, "far", Some("user.1"), 1_000_000_000, 0);
    let p = conv(
        &q.pop()
            .unwrap()
            .expect("future release time held the job back"),
    );
    assert_eq!(kname(&p.key), "far");
    assert_eq!(p.release_at, 1_000_000_000);
    assert_eq!(p.attempts, 1);
    assert_eq!(p.payload, b"far");
    assert!(q.is_empty());
    assert_eq!(q.collation_count(), 0);
    assert_eq!(q.pop().map(|o| o.is_none()), Ok(true));
}

#[test]
pub fn errors_change_nothing() {
    let mut q = seed_queue(Order::Lifo);
    q.put_immediate(&cfg("imm", None, 0), b"", 7).unwrap();
    let enc = q.encode();
    let same = |q: &Queue| assert_eq!(q.encode(), enc);
    assert_eq!(
        q.move_job(&k("nope"), Move::Release, 1).map(|i| conv(&i)),
        Err(QueueError::NoSuchJob)
    );
    same(&q);
    assert_eq!(
        q.move_job(&k("nope"), Move::Delay { buffer: 1 }, 1)
            .map(|i| conv(&i)),
        Err(QueueError::NoSuchJob)
    );
    same(&q);
    assert_eq!(
        q.move_job(&k("imm"), Move::Release, 1).map(|i| conv(&i)),
        Err(QueueError::ImmediateNotMovable)
    );
    same(&q);
    assert_eq!(q.delete(&k("nope")), Ok(false));
    same(&q);
    assert_eq!(
        q.info(&k("nope")).map(|i| conv(&i)),
        Err(QueueError::NoSuchJob)
    );
    assert_eq!(q.position(&k("nope")), Err(QueueError::NoSuchJob));
    assert_eq!(
        q.enqueue(&cfg("new", Some("user.1"), MAX_TIME), b"", 1)
            .map(|(i, b)| (conv(&i), b)),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.enqueue(&cfg("new", None, i64::MAX), b"", 1)
            .map(|(i, b)| (conv(&i), b)),
        Err(QueueError::TimeOverflow)
    );
    same(&q);
    for bad in [-1, MAX_TIME + 1, i64::MIN, i64::MAX] {
        assert_eq!(
            q.put_immediate(&cfg("new", None, 0), b"", bad)
                .map(|(i, b)| (conv(&i), b)),
            Err(QueueError::TimeOverflow)
        );
        // Even for an existing job (an upgrade would be wrong too).
        assert_eq!(
            q.put_immediate(&cfg("j1", None, 0), b"", bad)
                .map(|(i, b)| (conv(&i), b)),
            Err(QueueError::TimeOverflow)
        );
        assert_eq!(
            q.move_job(&k("j1"), Move::Release, bad).map(|i| conv(&i)),
            Err(QueueError::TimeOverflow)
        );
        same(&q);
    }
    assert_eq!(
        q.move_job(&k("j1"), Move::Delay { buffer: MAX_TIME }, 1)
            .map(|i| conv(&i)),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.move_job(&k("j4"), Move::Delay { buffer: i64::MAX }, 1)
            .map(|i| conv(&i)),
        Err(QueueError::TimeOverflow)
    );
    same(&q);
    // Exactly MAX_TIME is fine; one more is not.
    enq(&mut q, "max", None, MAX_TIME - 10, 10);
    assert_eq!(info_of(&q, "max").release_at, MAX_TIME);
    let enc = q.encode();
    assert_eq!(
        q.move_job(&k("j1"), Move::Delay { buffer: 1 }, 1)
            .map(|i| conv(&i)),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(q.encode(), enc);
    assert_eq!(
        conv(&q.move_job(&k("j1"), Move::Delay { buffer: 0 }, 1).unwrap()).release_at,
        MAX_TIME
    );
    assert_eq!(order_of(&q).last().unwrap(), "j1");
    q.check().unwrap();
    let back = Queue::decode(&q.encode()).unwrap();
    assert_eq!(back.encode(), q.encode());
}

#[test]
pub fn config_json_gives_the_orca_key() {
    let c = parse_config(
        br#"{"key":"k1","response_url":"http://cb/1","collation":{"type":"user","id":"3"},"priority":5000,"script":[]}"#,
    )
    .unwrap();
    assert_eq!(c.job_key, orca_key("k1", "http://cb/1"));
    assert_eq!(c.collation.as_deref(), Some("user.3"));
    assert_eq!(c.priority, 5000);
    let mut q = Queue::new(Order::Lifo);
    let (i, created) = q.enqueue(&c, b"{}", 10).unwrap();
    assert!(created.created);
    assert_eq!(i.release_at, 5010);
    assert_eq!(encode_key(&i.key).len(), 44);
    assert!(!encode_key(&i.key).contains('.'));
    // Without collation: a single reservation, not immediate.
    let c = parse_config(br#"{"key":"k2"}"#).unwrap();
    let (i, _) = q.enqueue(&c, b"", 10).unwrap();
    assert_eq!(
        (i.immediate, i.collation.is_none(), i.release_at),
        (false, true, 10)
    );
}

/// Offset of the u32 `attempts` of job `name` in an encoding: it follows the
/// 32-byte job key and the 8-byte created_at.
pub fn attempts_offset(bytes: &[u8], name: &str) -> usize {
    let key = k(name);
    bytes
        .windows(32)
        .position(|w| w == key)
        .expect("job key not in encoding")
        + 40
}

#[test]
pub fn regression_pop_attempts_overflow() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "a", None, 0, 0);
    let mut bytes = q.encode();
    let at = attempts_offset(&bytes, "a");
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    // Rejecting such a queue is a fix too.
    let Ok(mut d) = Queue::decode(&bytes) else {
        return;
    };
    assert_eq!(d.info(&k("a")).unwrap().attempts, u32::MAX);
    let r = catch_unwind(AssertUnwindSafe(|| d.pop().map(|o| o.map(|i| i.attempts))));
    let attempts = r.expect("pop panicked").unwrap().unwrap();
    assert_ne!(attempts, 0, "attempts wrapped around to 0");
}

#[test]
pub fn regression_decode_accepts_counters_it_cannot_reload() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "a", None, 0, 0);
    let bytes = q.encode();
    // A single unit ends with score(8) tie(8) nonce(8) immediate(1).
    let n = bytes.len();
    for (what, at) in [("nonce", n - 9), ("tie", n - 17)] {
        let mut b = bytes.clone();
        b[at..at + 8].copy_from_slice(&(i64::MAX / 2).to_le_bytes());
        if let Ok(d) = Queue::decode(&b) {
            let again = Queue::decode(&d.encode());
            assert!(
                again.is_ok(),
                "{what} = i64::MAX/2 accepted, but its re-encoding is rejected: {again:?}"
            );
        }
    }
    // Header: bytes(header) = len(8) version(1) order(1) next_seq(8) front_tie(8).
    let mut b = bytes.clone();
    b[10..18].copy_from_slice(&(i64::MAX / 2).to_le_bytes());
    if let Ok(mut d) = Queue::decode(&b) {
        if d.enqueue(&cfg("b", None, 0), b"", 1).is_ok() {
            let again = Queue::decode(&d.encode());
            assert!(again.is_ok(), "next_seq = i64::MAX/2 accepted; one enqueue later the queue cannot be reloaded: {again:?}");
        }
    }
}

#[test]
pub fn regression_enqueue_accepts_negative_now() {
    let mut q = Queue::new(Order::Lifo);
    if q.enqueue(&cfg("neg", None, 10), b"", -5).is_ok() {
        q.check().unwrap();
        let d = Queue::decode(&q.encode());
        assert!(
            d.is_ok(),
            "enqueue at now=-5 accepted, but the queue cannot be reloaded: {d:?}"
        );
    }
}

#[test]
pub fn regression_negative_delay_buffer_moves_other_jobs() {
    let mut q = Queue::new(Order::Fifo);
    enq(&mut q, "a", Some("user.1"), 1_000, 0);
    enq(&mut q, "b", Some("user.1"), 2_000, 0);
    enq(&mut q, "z", None, 5_000, 0);
    let b_before = info_of(&q, "b");
    if q.move_job(&k("a"), Move::Delay { buffer: -4_500 }, 0)
        .is_ok()
    {
        q.check().unwrap();
        assert_eq!(info_of(&q, "b"), b_before, "delaying a moved b");
        assert_eq!(
            order_of(&q).last().unwrap(),
            "a",
            "delay did not move a to the back"
        );
    }
}

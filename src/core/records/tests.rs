//! Unit tests of the records part on its own: the pairing rule through its
//! operations, relocation while the slabs shrink, and `Records::check`
//! finding each kind of broken bookkeeping (the property tests in
//! tests/props/ drive the whole queue; these corrupt private fields, which
//! only a test inside the part can).

use std::collections::HashMap;

use super::Records;
use crate::core::caps::Caps;
use crate::core::config::JobKey;
use crate::core::containers::slab::SlabId;
use crate::core::ids::{CollId, JobId};
use crate::core::reservation::ResKey;

fn key(i: u32) -> JobKey {
    let mut k = [0u8; 32];
    k[..4].copy_from_slice(&i.to_le_bytes());
    k[31] = 0x5a;
    k
}

fn none() -> HashMap<CollId, u32> {
    HashMap::new()
}

fn ok(r: &Records) {
    if let Err(e) = r.check(&none()) {
        panic!("check failed: {e}");
    }
}

/// A single job `i` at `score` (its payload `i` as text).
fn single(r: &mut Records, w: &mut Caps, i: u32, score: i64) -> JobId {
    let payload = i.to_string().into_bytes().into_boxed_slice();
    let j = r.new_job(key(i), payload, 0, 0, None).unwrap();
    r.add_single(j, score, false, w).unwrap();
    j
}

/// Job `i` into collation `name` (LIFO: stack key -seq), its reservation
/// at `score`.
fn collated(r: &mut Records, w: &mut Caps, name: &str, i: u32, score: i64) -> JobId {
    let j = r
        .new_job(key(i), Box::new([1, 2, 3]), 0, 0, Some(name))
        .unwrap();
    let c = r.coll_id(name).unwrap();
    let seq = r.alloc_seq();
    r.collate(c, j, -seq, ResKey { score, tie: seq }, seq as u64, w)
        .unwrap();
    j
}

fn keys(ids: &[u32]) -> Vec<JobKey> {
    ids.iter().map(|&i| key(i)).collect()
}

#[test]
fn the_kth_stacked_job_takes_the_kth_reservation() {
    let mut r = Records::default();
    let mut w = Caps::default();
    // LIFO: the newest job is the stack's front and pairs with the
    // earliest reservation, whatever order the reservations came in.
    collated(&mut r, &mut w, "user.c", 1, 30);
    single(&mut r, &mut w, 9, 15);
    collated(&mut r, &mut w, "user.c", 2, 10);
    collated(&mut r, &mut w, "user.c", 3, 20);
    ok(&r);
    assert_eq!(r.pop_order(), keys(&[3, 9, 2, 1]));
    assert_eq!(r.stack_len(r.coll_id("user.c").unwrap()), 3);
    assert_eq!((r.order_len(), r.job_count(), r.stacked()), (4, 4, 3));

    // Taking the front takes the collation's front job with its earliest
    // reservation; the rest keep theirs.
    let p = r.take_node(r.first().unwrap(), &mut w).unwrap();
    assert_eq!((p.job.key, p.release, p.immediate), (key(3), 10, false));
    assert_eq!(p.coll, r.coll_id("user.c"));
    r.release_coll(p.coll.unwrap());
    ok(&r);
    assert_eq!(r.pop_order(), keys(&[9, 2, 1]));
}

#[test]
fn detaching_a_middle_job_keeps_every_other_pairing() {
    let mut r = Records::default();
    let mut w = Caps::default();
    let js: Vec<JobId> = (1..=5)
        .map(|i| collated(&mut r, &mut w, "user.c", i, 10 * i as i64))
        .collect();
    assert_eq!(r.pop_order(), keys(&[5, 4, 3, 2, 1]));
    // Job 3 (third in the stack) leaves with the third reservation (30).
    r.detach(js[2], &mut w).unwrap();
    let (job, _) = r.drop_job(js[2]).unwrap();
    assert_eq!(job.key, key(3));
    ok(&r);
    assert_eq!(r.pop_order(), keys(&[5, 4, 2, 1]));
    let scores: Vec<i64> = r
        .coll_reservations(r.coll_id("user.c").unwrap())
        .map(|n| r.rk(n).score)
        .collect();
    assert_eq!(scores, vec![10, 20, 40, 50]);
    // Job 2, now third in the stack, pairs with the third reservation.
    let n = r.reservation_node(js[1]).unwrap();
    assert_eq!((r.position_of(n).unwrap(), r.rk(n).score), (3, 40));
}

#[test]
fn the_front_goes_before_everything_and_counts_its_own_ties() {
    let mut r = Records::default();
    let mut w = Caps::default();
    single(&mut r, &mut w, 1, 100);
    collated(&mut r, &mut w, "user.c", 2, 50);
    let j = r.new_job(key(3), Box::new([]), 0, 0, None).unwrap();
    r.add_front(j, 500, &mut w).unwrap();
    ok(&r);
    assert_eq!(r.pop_order(), keys(&[3, 2, 1]));
    assert!(r.job_immediate(j));
    assert_eq!(r.front_tie(), -1);
    let n = r.first().unwrap();
    // Its score is the earliest one (50), not `now`; its nonce is a fresh
    // sequence number, kept aside since it differs from its tie.
    assert_eq!(r.rk(n), ResKey { score: 50, tie: -1 });
    assert!(r.nonce_of(n) > 0 && r.nonce_of(n) < r.next_seq() as u64);
}

#[test]
fn relocation_while_shrinking_changes_nothing_observable() {
    let mut r = Records::default();
    let mut w = Caps::default();
    let n = 12_000u32;
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(if i % 3 == 0 {
            collated(&mut r, &mut w, &format!("team.{}", i % 7), i, i as i64)
        } else {
            single(&mut r, &mut w, i, i as i64)
        });
    }
    // Keep the last 600: they sit at the top of every slab.
    for &j in &ids[..(n - 600) as usize] {
        r.detach(j, &mut w).unwrap();
        r.drop_job(j).unwrap();
    }
    ok(&r);
    let before = r.pop_order();
    let bytes = r.heap_bytes();
    let mut moves = 0;
    loop {
        let m = r.move_records(64, &mut w, |_, _, _| panic!("no held jobs"));
        r.compact_trees();
        r.shrink_tables();
        ok(&r);
        if m == 0 {
            break;
        }
        moves += m;
    }
    assert!(moves >= 600, "only {moves} moves");
    assert_eq!(r.pop_order(), before);
    assert!(r.heap_bytes() < bytes, "{} >= {bytes}", r.heap_bytes());
    for i in n - 600..n {
        let j = r.job_id(&key(i)).unwrap();
        assert_eq!(r.job(j).key, key(i));
        assert!(r.reservation_node(j).is_ok());
    }
}

/// A queue with a bit of everything, for the corruption tests.
fn sample() -> (Records, Caps) {
    let mut r = Records::default();
    let mut w = Caps::default();
    single(&mut r, &mut w, 1, 10);
    collated(&mut r, &mut w, "user.c", 2, 20);
    collated(&mut r, &mut w, "user.c", 3, 30);
    let j = r.new_job(key(4), Box::new([7]), 0, 2, None).unwrap();
    r.add_front(j, 5, &mut w).unwrap();
    ok(&r);
    (r, w)
}

fn broken(r: &Records, outside: &HashMap<CollId, u32>, what: &str) {
    match r.check(outside) {
        Ok(_) => panic!("check passed; expected {what:?}"),
        Err(e) => assert!(e.contains(what), "{e:?} does not say {what:?}"),
    }
}

#[test]
fn check_finds_broken_counts_and_counters() {
    let (mut r, _) = sample();
    r.payload_bytes += 1;
    broken(&r, &none(), "payload accounting");

    let (mut r, _) = sample();
    r.next_seq -= 2;
    broken(&r, &none(), "outside the allocated range");

    let (mut r, _) = sample();
    r.front_tie = 0;
    broken(&r, &none(), "tie outside the allocated range");

    let (mut r, _) = sample();
    let gone = JobId::from_raw(999);
    r.attempts.insert(gone, 1);
    broken(&r, &none(), "attempts kept for a missing job");

    let (mut r, _) = sample();
    let j = r.job_id(&key(4)).unwrap();
    r.attempts.insert(j, 0);
    broken(&r, &none(), "attempts kept for a missing job");
}

#[test]
fn check_finds_broken_nonces_and_references() {
    // A nonce kept aside that equals its tie is redundant.
    let (mut r, _) = sample();
    let n = r.reservation_node(r.job_id(&key(1)).unwrap()).unwrap();
    let tie = r.rk(n).tie as u64;
    r.nonces.insert(n, tie);
    broken(&r, &none(), "stale or redundant");

    // Two reservations with one nonce.
    let (mut r, _) = sample();
    let a = r.reservation_node(r.job_id(&key(1)).unwrap()).unwrap();
    let b = r.reservation_node(r.job_id(&key(2)).unwrap()).unwrap();
    let nb = r.nonce_of(b);
    r.nonces.insert(a, nb);
    broken(&r, &none(), "used twice");

    // A reference from outside the records that the collation does not
    // count (or one it counts that nothing holds).
    let (mut r, _) = sample();
    let c = r.coll_id("user.c").unwrap();
    broken(&r, &HashMap::from([(c, 1)]), "counts its jobs wrong");
    r.add_coll_ref(c).unwrap();
    broken(&r, &none(), "counts its jobs wrong");
    assert!(r.check(&HashMap::from([(c, 1)])).is_ok());
}

#[test]
fn check_finds_a_job_out_of_step_with_its_reservation() {
    // A single job whose reservation is gone from the order.
    let (mut r, mut w) = sample();
    let j = r.job_id(&key(1)).unwrap();
    let n = r.reservation_node(j).unwrap();
    r.remove_res(n, &mut w);
    broken(&r, &none(), "reservation is not in the order");

    // A collation with a reservation more than it has jobs.
    let (mut r, mut w) = sample();
    let c = r.coll_id("user.c").unwrap();
    let seq = r.alloc_seq();
    let rk = ResKey {
        score: 40,
        tie: seq,
    };
    let owner = crate::core::reservation::Owner::collation(c);
    r.add_res(
        rk,
        owner,
        crate::core::reservation::ResLink::NONE,
        seq as u64,
        &mut w,
    )
    .unwrap();
    broken(&r, &none(), "but other reservations");
}

fn loaded(i: u32, skey: i64) -> crate::core::job::LoadedJob {
    crate::core::job::LoadedJob {
        key: key(i),
        created_at: 0,
        attempts: 0,
        skey,
        payload: Box::new([9]),
    }
}

fn rk(score: i64, tie: i64) -> (ResKey, u64) {
    (ResKey { score, tie }, tie as u64)
}

/// What a refused load must leave as it was.
fn snapshot(r: &Records) -> (Vec<JobKey>, usize, usize, usize) {
    (
        r.pop_order(),
        r.job_count(),
        r.order_len(),
        r.collation_count(),
    )
}

#[test]
fn a_collation_unit_that_collides_or_does_not_pair_changes_nothing() {
    let (mut r, mut w) = sample();
    r.set_counters(100, r.front_tie());
    let before = snapshot(&r);
    let taken = r.rk(r.first().unwrap());
    let cases: Vec<(&str, Vec<_>, Vec<_>)> = vec![
        // More jobs than reservations, and the other way round.
        (
            "more jobs",
            vec![loaded(10, 1), loaded(11, 2)],
            vec![rk(5, 50)],
        ),
        (
            "more reservations",
            vec![loaded(10, 1)],
            vec![rk(5, 50), rk(6, 51)],
        ),
        ("no jobs", vec![], vec![rk(5, 50)]),
        // A key twice in the unit, or one the records hold already.
        (
            "repeated key",
            vec![loaded(10, 1), loaded(10, 2)],
            vec![rk(5, 50), rk(6, 51)],
        ),
        (
            "stored key",
            vec![loaded(10, 1), loaded(1, 2)],
            vec![rk(5, 50), rk(6, 51)],
        ),
        // A reservation twice in the unit, or one in the order already.
        (
            "repeated reservation",
            vec![loaded(10, 1), loaded(11, 2)],
            vec![rk(5, 50), rk(5, 50)],
        ),
        (
            "stored reservation",
            vec![loaded(10, 1), loaded(11, 2)],
            vec![rk(5, 50), (taken, 52)],
        ),
        // Stack keys out of order.
        (
            "stack keys",
            vec![loaded(10, 2), loaded(11, 1)],
            vec![rk(5, 50), rk(6, 51)],
        ),
    ];
    for (what, jobs, res) in cases {
        assert!(
            r.load_collation("team.new", jobs, res, &mut w).is_err(),
            "{what}: loaded"
        );
        assert_eq!(snapshot(&r), before, "{what}: changed the records");
        ok(&r);
    }
    // A collation with jobs here already.
    let err = r.load_collation("user.c", vec![loaded(10, 1)], vec![rk(5, 50)], &mut w);
    assert!(err.is_err());
    assert_eq!(snapshot(&r), before);
    // And the same unit, well formed, loads.
    r.load_collation(
        "team.new",
        vec![loaded(10, 1), loaded(11, 2)],
        vec![rk(6, 51), rk(5, 50)],
        &mut w,
    )
    .unwrap();
    ok(&r);
    assert_eq!(r.job_count(), before.1 + 2);
}

#[test]
fn a_single_unit_that_collides_changes_nothing() {
    let (mut r, mut w) = sample();
    r.set_counters(100, r.front_tie());
    let before = snapshot(&r);
    let taken = r.rk(r.first().unwrap());
    assert!(r
        .load_single(
            loaded(1, 0),
            None,
            ResKey { score: 5, tie: 50 },
            50,
            false,
            &mut w
        )
        .is_err());
    assert!(r
        .load_single(loaded(10, 0), None, taken, 50, false, &mut w)
        .is_err());
    assert_eq!(snapshot(&r), before);
    ok(&r);
    r.load_single(
        loaded(10, 0),
        Some("user.c"),
        ResKey { score: 5, tie: 50 },
        60,
        false,
        &mut w,
    )
    .unwrap();
    ok(&r);
    assert_eq!(r.job_count(), before.1 + 1);
    let n = r.reservation_node(r.job_id(&key(10)).unwrap()).unwrap();
    assert_eq!((r.rk(n), r.nonce_of(n)), (ResKey { score: 5, tie: 50 }, 60));
}

#[test]
fn a_merge_collides_only_on_a_shared_nonce() {
    let (a, _) = sample();
    let mut w = Caps::default();
    // Another queue's records, their nonces far above these.
    let mut b = Records::default();
    b.set_counters(1_000, 0);
    b.load_single(
        loaded(50, 0),
        None,
        ResKey { score: 1, tie: 900 },
        900,
        false,
        &mut w,
    )
    .unwrap();
    assert!(!a.nonces_collide(&b) && !b.nonces_collide(&a));
    assert!(!a.nonces_collide(&Records::default()));
    assert!(a.absorb_check(&b).is_ok());
    // One nonce in common (their reservation differs, its nonce does not).
    let shared = a.nonce_of(a.first().unwrap());
    b.load_single(
        loaded(51, 0),
        None,
        ResKey { score: 2, tie: 901 },
        shared,
        false,
        &mut w,
    )
    .unwrap();
    assert!(a.nonces_collide(&b) && b.nonces_collide(&a));
}

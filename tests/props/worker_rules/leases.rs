//! Leases: unique tokens and deadlines, `LEASE 0`, a pop ticks first,
//! attempts count every delivery, ACK keeps the result for its TTL, fencing
//! by token, cancelled leases reported until their memory runs out,
//! EXTEND, cancel, tick order, out-of-range times.

use std::collections::HashSet;

use orca::core::worker::CANCEL_MEMORY_MS;
use orca::core::{NackOutcome, Order, Queue, QueueError, State, MAX_TIME};

use crate::support::*;

use super::*;

#[test]
pub fn pop_leases_with_unique_tokens_and_deadlines() {
    let mut q = Queue::new(Order::Lifo);
    for i in 0..5 {
        enq(&mut q, &format!("a{i}"), "x", 100 + i);
    }
    let ds = pop_n(&mut q, 1_000, 500, 3, &P);
    assert_eq!(
        ds.iter().map(|d| d.0.clone()).collect::<Vec<_>>(),
        strs(&["a0", "a1", "a2"]),
        "queue order"
    );
    let mut seen = HashSet::new();
    for (name, token, deadline, info) in &ds {
        assert!(*token > 0 && seen.insert(*token), "token of {name} reused");
        assert_eq!(*deadline, 1_500);
        assert_eq!(info.attempts, 1);
    }
    assert_eq!(q.state_counts(), (2, 0, 3, 0));
    assert_eq!(q.next_deadline(), Some(1_500));
    // Ack, expire and re-deliver: tokens still never repeat.
    for (name, token, ..) in &ds[..2] {
        q.ack(&k(name), *token, None, 1_100, 0).unwrap();
    }
    let again = pop_n(&mut q, 1_500, 10, 3, &P); // a2 expires at 1500 and comes back first
    assert_eq!(again.len(), 3);
    assert_eq!(again[0].0, "a2");
    assert_eq!(again[0].3.attempts, 2);
    for (name, token, ..) in &again {
        assert!(seen.insert(*token), "token of {name} reused");
    }
    // Through encode/decode the counter carries on: no reuse either.
    let mut d = roundtrip(&q);
    let more = pop_n(&mut d, 1_510, 10, 3, &P);
    assert!(!more.is_empty());
    for (name, token, ..) in &more {
        assert!(seen.insert(*token), "token of {name} reused after decode");
    }
}

#[test]
pub fn pop_with_lease_zero_is_at_most_once() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "z", "payload", 10);
    let (name, token, _, info) = pop1(&mut q, 20, 0, &P);
    assert_eq!((name.as_str(), token), ("z", 0));
    assert_eq!(info.attempts, 1);
    assert_eq!(q.state_counts(), (0, 0, 0, 0));
    assert!(q.states(&k("z")).unwrap().is_empty());
    assert_eq!(q.next_deadline(), None);
    // Nothing to ack, and nothing ever comes back.
    assert_eq!(
        q.ack(&k("z"), 1, None, 30, 0),
        Err(QueueError::LeaseNotHeld)
    );
    let report = q.tick(MAX_TIME, &P);
    assert!(!report.changed());
    assert!(pop_n(&mut q, MAX_TIME, 0, 3, &P).is_empty());
}

#[test]
pub fn pop_runs_tick_first_and_expired_lease_returns_at_original_arrival() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "first", "f", 100);
    let (_, _, deadline, _) = pop1(&mut q, 200, 1_000, &P);
    assert_eq!(deadline, 1_200);
    enq(&mut q, "later", "l", 300);
    // Before the deadline, only "later" is there.
    assert_eq!(order_of(&q), strs(&["later"]));
    // At the deadline pop runs tick: "first" is back, immediate at its
    // original arrival time 100, so it is handed out before "later".
    let (ds, report) = q.pop_deliveries(1_200, 1_000, 1, &P).unwrap();
    assert_eq!(
        (report.expired, report.requeued, report.died),
        (1, 1, 0),
        "{report:?}"
    );
    assert!(report.changed() && report.requeued());
    let d = conv(&ds[0].job);
    assert_eq!(kname(&d.key), "first");
    assert_eq!(
        (d.created_at, d.release_at, d.immediate, d.attempts),
        (100, 100, true, 2)
    );
    assert_eq!(order_of(&q), strs(&["later"]));
}

#[test]
pub fn attempts_count_every_delivery() {
    let p = Policy {
        max_attempts: 0,
        ..P
    };
    let mut q = Queue::new(Order::Fifo);
    enq(&mut q, "j", "j", 0);
    let mut now = 0;
    for want in 1..=20u32 {
        let (_, token, deadline, info) = pop1(&mut q, now, 50, &p);
        assert_eq!(info.attempts, want);
        if want % 2 == 0 {
            now = deadline; // let it expire
        } else {
            assert!(matches!(
                q.nack(&k("j"), token, Some(0), now, &p),
                Ok(NackOutcome::Retry { attempts, .. }) if attempts == want
            ));
        }
    }
    assert_eq!(q.dead_len(), 0, "max_attempts 0 never kills");
}

#[test]
pub fn ack_ends_the_lease_and_keeps_the_result_for_its_ttl() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "r", "r", 0);
    let (_, token, ..) = pop1(&mut q, 10, 1_000, &P);
    q.ack(&k("r"), token, Some(b"score=10"), 100, 500).unwrap();
    q.check().unwrap();
    assert_eq!(q.state_counts(), (0, 0, 0, 0));
    assert!(q.states(&k("r")).unwrap().is_empty());
    assert_eq!(q.result(&k("r"), 100), Some(&b"score=10"[..]));
    assert_eq!(q.result(&k("r"), 599), Some(&b"score=10"[..]));
    assert_eq!(
        q.result(&k("r"), 600),
        None,
        "readable only while expires_at > now"
    );
    assert_eq!(q.next_deadline(), Some(600));
    // Acking again: the lease is gone.
    assert_eq!(
        q.ack(&k("r"), token, None, 101, 0),
        Err(QueueError::LeaseNotHeld)
    );
    // The lease never comes back.
    assert_eq!(q.tick(599, &P).expired, 0);
    let r = q.tick(600, &P);
    assert_eq!((r.expired, r.forgotten), (0, 1));
    assert_eq!(q.next_deadline(), None);
    assert_eq!(q.result(&k("r"), 0), None, "forgotten by tick");

    // TTL 0: not kept (an older result stays as it was).
    enq(&mut q, "r", "r2", 700);
    let (_, t2, ..) = pop1(&mut q, 700, 1_000, &P);
    q.ack(&k("r"), t2, Some(b"ignored"), 710, 0).unwrap();
    assert_eq!(q.result(&k("r"), 710), None);
    assert_eq!(q.next_deadline(), None);
    // A new result replaces the old one.
    enq(&mut q, "r", "r3", 800);
    let (_, t3, ..) = pop1(&mut q, 800, 1_000, &P);
    q.ack(&k("r"), t3, Some(b"one"), 810, 10_000).unwrap();
    enq(&mut q, "r", "r4", 820);
    let (_, t4, ..) = pop1(&mut q, 820, 1_000, &P);
    q.ack(&k("r"), t4, Some(b"two"), 830, 100).unwrap();
    assert_eq!(q.result(&k("r"), 900), Some(&b"two"[..]));
    assert_eq!(q.result(&k("r"), 930), None);
    q.check().unwrap();
    roundtrip(&q);
}

#[test]
pub fn ack_nack_extend_with_wrong_or_stale_tokens() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "a", "a", 0);
    enq(&mut q, "b", "b", 1);
    let (_, ta, ..) = pop1(&mut q, 10, 1_000, &P);
    let before = q.encode();
    // Wrong key for a live token, never-issued token.
    assert_eq!(
        q.ack(&k("b"), ta, None, 20, 0),
        Err(QueueError::LeaseNotHeld)
    );
    assert_eq!(
        q.nack(&k("b"), ta, None, 20, &P),
        Err(QueueError::LeaseNotHeld)
    );
    assert_eq!(q.extend(&k("b"), ta, 10, 20), Err(QueueError::LeaseNotHeld));
    assert_eq!(
        q.ack(&k("a"), 999_999, None, 20, 0),
        Err(QueueError::LeaseNotHeld)
    );
    assert_eq!(
        q.ack(&k("a"), 0, None, 20, 0),
        Err(QueueError::LeaseNotHeld)
    );
    assert_eq!(q.encode(), before, "failed calls changed nothing");
    // Stale: the lease expired and the job was handed out again.
    let (_, ta2, ..) = pop_n(&mut q, 1_010, 1_000, 1, &P)[0].clone();
    assert_ne!(ta, ta2);
    assert_eq!(
        q.ack(&k("a"), ta, None, 1_020, 0),
        Err(QueueError::LeaseNotHeld)
    );
    assert_eq!(
        q.nack(&k("a"), ta, None, 1_020, &P),
        Err(QueueError::LeaseNotHeld)
    );
    assert_eq!(
        q.extend(&k("a"), ta, 5, 1_020),
        Err(QueueError::LeaseNotHeld)
    );
    q.ack(&k("a"), ta2, None, 1_020, 0).unwrap();
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
}

#[test]
pub fn cancelled_lease_is_reported_until_its_memory_runs_out() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "c", "c", 0);
    let (_, t, deadline, _) = pop1(&mut q, 0, 1_000, &P);
    assert_eq!(q.cancel(&k("c")), Ok(true));
    q.check().unwrap();
    assert_eq!(q.state_counts(), (0, 0, 0, 0));
    assert_eq!(q.ack(&k("c"), t, None, 10, 0), Err(QueueError::Cancelled));
    assert_eq!(q.nack(&k("c"), t, None, 10, &P), Err(QueueError::Cancelled));
    assert_eq!(q.extend(&k("c"), t, 10, 10), Err(QueueError::Cancelled));
    let until = deadline + CANCEL_MEMORY_MS;
    assert_eq!(q.next_deadline(), Some(until));
    // The job never comes back, whatever the clock does.
    let r = q.tick(until - 1, &P);
    assert!(!r.changed());
    assert_eq!(
        q.ack(&k("c"), t, None, until - 1, 0),
        Err(QueueError::Cancelled)
    );
    let d = roundtrip(&q);
    let r = q.tick(until, &P);
    assert_eq!(r.forgotten, 1);
    assert_eq!(r.expired, 0);
    assert_eq!(
        q.ack(&k("c"), t, None, until, 0),
        Err(QueueError::LeaseNotHeld)
    );
    assert_eq!(q.next_deadline(), None);
    assert!(pop_n(&mut q, until, 10, 5, &P).is_empty());
    // The decoded copy remembers the cancellation too.
    assert_eq!(
        d.clone().ack(&k("c"), t, None, 5, 0),
        Err(QueueError::Cancelled)
    );
}

#[test]
pub fn extend_moves_the_deadline() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "h", "h", 0);
    let (_, t, deadline, _) = pop1(&mut q, 0, 100, &P);
    assert_eq!(deadline, 100);
    assert_eq!(q.extend(&k("h"), t, 500, 90), Ok(590));
    assert_eq!(q.next_deadline(), Some(590));
    assert!(!q.tick(589, &P).changed());
    assert_eq!(q.state_counts(), (0, 0, 1, 0));
    // Shorter is allowed too: the deadline is now + ms.
    assert_eq!(q.extend(&k("h"), t, 10, 100), Ok(110));
    assert_eq!(q.tick(110, &P).expired, 1);
    assert_eq!(q.extend(&k("h"), t, 10, 120), Err(QueueError::LeaseNotHeld));
    // Extend after the deadline but before a tick: still held.
    let (_, t2, d2, _) = pop1(&mut q, 200, 10, &P);
    assert_eq!(q.extend(&k("h"), t2, 1_000, d2 + 5), Ok(d2 + 1_005));
    assert!(!q.tick(d2 + 100, &P).changed());
    q.check().unwrap();
}

#[test]
pub fn cancel_removes_every_state_of_the_key() {
    let mut q = Queue::new(Order::Lifo);
    assert_eq!(q.cancel(&k("nobody")), Ok(false));
    // Queued.
    enq(&mut q, "q", "q", 0);
    assert_eq!(q.cancel(&k("q")), Ok(true));
    assert_eq!(q.state_counts(), (0, 0, 0, 0));
    // Delayed.
    enq(&mut q, "d", "d", 0);
    let (_, t, ..) = pop1(&mut q, 0, 100, &P);
    q.nack(&k("d"), t, Some(1_000), 10, &P).unwrap();
    assert_eq!(q.cancel(&k("d")), Ok(true));
    assert_eq!(q.state_counts(), (0, 0, 0, 0));
    assert!(!q.tick(10_000, &P).requeued());
    // Dead.
    let p1 = Policy {
        max_attempts: 1,
        ..P
    };
    enq(&mut q, "x", "x", 0);
    let (_, t, ..) = pop1(&mut q, 20_000, 100, &p1);
    q.nack(&k("x"), t, None, 20_000, &p1).unwrap();
    assert_eq!(q.dead_len(), 1);
    assert_eq!(q.cancel(&k("x")), Ok(true));
    assert_eq!(q.dead_len(), 0);
    // Everything at once: queued + several leases.
    enq(&mut q, "m", "m1", 30_000);
    let (_, t1, ..) = pop1(&mut q, 30_000, 100, &P);
    enq(&mut q, "m", "m2", 30_001);
    let (_, t2, ..) = pop1(&mut q, 30_002, 200, &P);
    enq(&mut q, "m", "m3", 30_003);
    assert_eq!(q.state_counts(), (1, 0, 2, 0));
    assert_eq!(q.cancel(&k("m")), Ok(true));
    q.check().unwrap();
    assert_eq!(q.state_counts(), (0, 0, 0, 0));
    assert_eq!(q.cancel(&k("m")), Ok(false));
    // No expiry brings it back.
    let r = q.tick(1_000_000, &P);
    assert_eq!((r.expired, r.retried, r.died), (0, 0, 0));
    assert!(pop_n(&mut q, 1_000_000, 10, 10, &P).is_empty());
    assert_eq!(
        q.ack(&k("m"), t1, None, 30_010, 0),
        Err(QueueError::LeaseNotHeld),
        "forgotten by the tick past the memory"
    );
    let _ = t2;
}

#[test]
pub fn states_counts_and_next_deadline() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "s", "v1", 0);
    let (_, t1, d1, _) = pop1(&mut q, 0, 1_000, &P);
    enq(&mut q, "s", "v2", 10);
    let (_, t2, d2, _) = pop1(&mut q, 10, 500, &P);
    enq(&mut q, "s", "v3", 20);
    enq(&mut q, "other", "o", 30);
    let st = q.states(&k("s")).unwrap();
    assert_eq!(st.len(), 3);
    match &st[0] {
        State::Queued(info, pos) => assert_eq!((info.payload.as_ref(), *pos), (&b"v3"[..], 1)),
        s => panic!("{s:?}"),
    }
    match (&st[1], &st[2]) {
        (State::Leased(_, a, la), State::Leased(_, b, lb)) => {
            assert_eq!((*a, la.deadline, *b, lb.deadline), (t1, d1, t2, d2));
            // v2 superseded v1's lease, v3 superseded v2's.
            assert!(la.superseded && lb.superseded);
        }
        s => panic!("{s:?}"),
    }
    assert_eq!(q.state_counts(), (2, 0, 2, 0));
    assert_eq!(q.next_deadline(), Some(d2.min(d1)));
    assert_eq!(
        q.nack(&k("s"), t2, Some(50), 100, &P),
        Ok(NackOutcome::Superseded)
    );
    q.ack(&k("s"), t1, Some(b"r"), 100, 40).unwrap();
    assert_eq!(q.next_deadline(), Some(140));
    assert_eq!(q.state_counts(), (2, 0, 0, 0));
}

#[test]
pub fn tick_handles_lease_before_retry_of_the_same_key() {
    // A key with an expiring lease (the old attempt, superseded by a
    // regrade) and a due retry (the regrade's attempt) in the same tick: the
    // superseded lease is dropped, the retry of the newest config comes back.
    // (Before supersession the stale attempt could win, see
    // `design_stale_attempt_beats_regrade`.)
    let p0 = Policy {
        max_attempts: 0,
        ..P
    };
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "t", "old", 0);
    let (_, t_old, ..) = pop1(&mut q, 0, 100, &p0); // lease on "old" until 100
    enq(&mut q, "t", "new", 5);
    let (_, t_new, ..) = pop1(&mut q, 5, 10_000, &p0);
    assert_eq!(lease_flags(&q, "t"), vec![(t_old, true), (t_new, false)]);
    assert_eq!(
        q.nack(&k("t"), t_new, Some(50), 10, &p0),
        Ok(NackOutcome::Retry {
            retry_at: 60,
            attempts: 1
        })
    );
    assert_eq!(q.state_counts(), (0, 1, 1, 0));
    let r = q.tick(200, &p0);
    assert_eq!(
        (r.expired, r.retried, r.requeued, r.died),
        (1, 1, 1, 0),
        "{r:?}"
    );
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    let i = q.info(&k("t")).unwrap();
    assert_eq!((i.payload.as_ref(), i.attempts), (&b"new"[..], 1));
    q.check().unwrap();
}

#[test]
pub fn result_and_lease_errors_on_out_of_range_time() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "o", "o", 0);
    let (_, t, ..) = pop1(&mut q, 0, 100, &P);
    let before = q.encode();
    assert_eq!(
        q.ack(&k("o"), t, Some(b"r"), -1, 10),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.nack(&k("o"), t, None, -1, &P),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(q.extend(&k("o"), t, 10, -1), Err(QueueError::TimeOverflow));
    assert_eq!(
        q.pop_deliveries(-1, 10, 1, &P).map(|_| ()),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.pop_deliveries(0, -1, 1, &P).map(|_| ()),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(q.encode(), before);
    // A huge TTL is clamped to the time range.
    q.ack(&k("o"), t, Some(b"r"), 10, MAX_TIME).unwrap();
    assert_eq!(q.next_deadline(), Some(MAX_TIME));
    q.check().unwrap();
    roundtrip(&q);
}

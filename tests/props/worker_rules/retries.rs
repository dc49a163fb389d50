//! Retries and dead letters: NACK backoff doubles up to the cap, explicit
//! and zero delays, a delayed retry never pops before its time, death
//! exactly at `max_attempts`, dead requeue and purge; regrades supersede
//! the older attempts, and a stale attempt never comes back.

use orca::core::worker::DeathCause;
use orca::core::{NackOutcome, Order, Policy, Queue, QueueError, State, MAX_TIME};

use crate::support::*;

use super::*;

#[test]
pub fn nack_backoff_doubles_up_to_the_cap() {
    assert_eq!(
        (1..=7).map(|a| P.backoff(a)).collect::<Vec<_>>(),
        vec![100, 200, 400, 800, 1_000, 1_000, 1_000]
    );
    let p = Policy {
        max_attempts: 0,
        retry_base: 100,
        retry_cap: 1_000,
    };
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "b", "b", 0);
    let mut now = 0;
    for (attempt, want) in [
        (1u32, 100i64),
        (2, 200),
        (3, 400),
        (4, 800),
        (5, 1_000),
        (6, 1_000),
    ] {
        let (_, t, _, info) = pop1(&mut q, now, 10_000, &p);
        assert_eq!(info.attempts, attempt);
        let out = q.nack(&k("b"), t, None, now, &p).unwrap();
        assert_eq!(
            out,
            NackOutcome::Retry {
                retry_at: now + want,
                attempts: attempt
            }
        );
        assert_eq!(q.next_deadline(), Some(now + want));
        now += want;
    }
    // Huge attempt numbers saturate at the cap.
    assert_eq!(p.backoff(u32::MAX), 1_000);
    assert_eq!(
        Policy {
            max_attempts: 0,
            retry_base: 7,
            retry_cap: MAX_TIME
        }
        .backoff(200),
        MAX_TIME
    );
    assert_eq!(
        Policy {
            max_attempts: 0,
            retry_base: 0,
            retry_cap: 50
        }
        .backoff(9),
        0
    );
}

#[test]
pub fn nack_with_explicit_delay_or_zero_delay() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "n", "n", 50);
    enq(&mut q, "other", "o", 60);
    let (_, t, ..) = pop1(&mut q, 100, 1_000, &P);
    // Zero delay: back in the queue at once, immediate at its arrival time.
    assert_eq!(
        q.nack(&k("n"), t, Some(0), 200, &P),
        Ok(NackOutcome::Retry {
            retry_at: 200,
            attempts: 1
        })
    );
    q.check().unwrap();
    let i = conv(&q.info(&k("n")).unwrap());
    assert_eq!(
        (i.created_at, i.release_at, i.immediate, i.attempts),
        (50, 50, true, 1)
    );
    assert_eq!(order_of(&q), strs(&["n", "other"]));
    // Explicit delay: parked until then.
    let (_, t, ..) = pop1(&mut q, 300, 1_000, &P);
    assert_eq!(
        q.nack(&k("n"), t, Some(5_000), 300, &P),
        Ok(NackOutcome::Retry {
            retry_at: 5_300,
            attempts: 2
        })
    );
    assert_eq!(q.state_counts(), (1, 1, 0, 0));
    // Invalid delays change nothing.
    imm(&mut q, "x", "x", 0);
    let (name, tx, ..) = pop1(&mut q, 400, 1_000, &P);
    assert_eq!(name, "x");
    let before = q.encode();
    assert_eq!(
        q.nack(&k("x"), tx, Some(-1), 400, &P),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.nack(&k("x"), tx, Some(MAX_TIME), 400, &P),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.extend(&k("x"), tx, -1, 400),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.pop_deliveries(400, MAX_TIME, 1, &P).map(|_| ()),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(q.encode(), before);
}

#[test]
pub fn delayed_retry_never_pops_before_its_time() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "d", "d", 0);
    let (_, t, ..) = pop1(&mut q, 10, 1_000, &P);
    assert_eq!(
        q.nack(&k("d"), t, None, 20, &P),
        Ok(NackOutcome::Retry {
            retry_at: 120,
            attempts: 1
        })
    );
    // Nothing else waiting: the pop finds nothing before 120.
    assert!(pop_n(&mut q, 119, 1_000, 3, &P).is_empty());
    // Other jobs waiting, even far-future ones: they go first.
    enq_coll(&mut q, "far", "user.1", 1_000_000, 30);
    enq(&mut q, "near", "n", 40);
    assert_eq!(popped_names(&mut q, 119, 3, &P), strs(&["near", "far"]));
    assert_eq!(q.state_counts(), (0, 1, 2, 0));
    // At 120 it is due and comes back first: immediate at its arrival (0).
    enq(&mut q, "late", "l", 100);
    let (ds, report) = q.pop_deliveries(120, 1_000, 1, &P).unwrap();
    assert_eq!(
        (report.retried, report.requeued, report.expired),
        (1, 1, 0),
        "{report:?}"
    );
    let d = conv(&ds[0].job);
    assert_eq!(kname(&d.key), "d");
    assert_eq!(
        (d.created_at, d.release_at, d.immediate, d.attempts),
        (0, 0, true, 2)
    );
}

#[test]
pub fn dead_exactly_at_max_attempts() {
    // NACK on the last attempt.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "f", "f", 0);
    let mut now = 0;
    for attempt in 1..=3u32 {
        let (_, t, _, info) = pop1(&mut q, now, 1_000, &P);
        assert_eq!(info.attempts, attempt);
        let out = q.nack(&k("f"), t, Some(0), now, &P).unwrap();
        if attempt < 3 {
            assert_eq!(
                out,
                NackOutcome::Retry {
                    retry_at: now,
                    attempts: attempt
                }
            );
        } else {
            assert_eq!(out, NackOutcome::Dead { attempts: 3 });
        }
        now += 10;
    }
    let dl = q.dead_list(0, 10);
    assert_eq!(dl.len(), 1);
    assert_eq!(
        (dl[0].1.cause, dl[0].1.job.attempts, dl[0].1.died_at),
        (DeathCause::Failed, 3, 20)
    );
    assert_eq!(q.state_counts(), (0, 0, 0, 1));
    assert!(
        pop_n(&mut q, 1_000_000, 1_000, 3, &P).is_empty(),
        "dead jobs are not handed out"
    );

    // Lease expiry on the last attempt.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "e", "e", 0);
    for attempt in 1..=3u32 {
        let (_, _, deadline, info) = pop1(&mut q, (attempt as i64 - 1) * 100, 100, &P);
        assert_eq!(info.attempts, attempt);
        assert_eq!(deadline, attempt as i64 * 100);
    }
    // It ended by expiry (counted in `expired`) and was buried (`died`);
    // nothing came back to the queue.
    let r = q.tick(300, &P);
    assert_eq!((r.died, r.expired, r.requeued), (1, 1, 0), "{r:?}");
    assert!(r.changed() && !r.requeued());
    let dl = q.dead_list(0, 10);
    assert_eq!(
        (dl[0].1.cause, dl[0].1.job.attempts, dl[0].1.died_at),
        (DeathCause::Expired, 3, 300)
    );

    // max_attempts 1: the first failure kills.
    let p1 = Policy {
        max_attempts: 1,
        ..P
    };
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "one", "1", 0);
    let (_, t, ..) = pop1(&mut q, 0, 100, &p1);
    assert_eq!(
        q.nack(&k("one"), t, None, 0, &p1),
        Ok(NackOutcome::Dead { attempts: 1 })
    );
}

#[test]
pub fn nack_of_a_regraded_job_is_superseded_and_ack_keeps_the_new_one() {
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "g", "v1", 0);
    let (_, t1, _, i1) = pop1(&mut q, 10, 1_000, &P);
    assert_eq!(i1.payload, b"v1");
    assert_eq!(lease_flags(&q, "g"), vec![(t1, false)]);
    // Regrade while leased: a new job is queued and the running lease is
    // marked superseded.
    enq(&mut q, "g", "v2", 20);
    assert_eq!(q.state_counts(), (1, 0, 1, 0));
    let st = q.states(&k("g")).unwrap();
    assert!(matches!(st[0], State::Queued(..)) && matches!(st[1], State::Leased(..)));
    assert_eq!(lease_flags(&q, "g"), vec![(t1, true)]);
    // An update of the queued job is not a new job: nothing more happens.
    enq(&mut q, "g", "v2b", 25);
    assert_eq!(lease_flags(&q, "g"), vec![(t1, true)]);
    assert_eq!(
        q.nack(&k("g"), t1, None, 30, &P),
        Ok(NackOutcome::Superseded)
    );
    q.check().unwrap();
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    assert_eq!(q.info(&k("g")).unwrap().payload.as_ref(), b"v2b");
    assert_eq!(
        q.next_deadline(),
        None,
        "no retry of the superseded attempt"
    );

    // ACK of a superseded lease works as usual (its result is kept) and does
    // not remove the new job.
    let (_, t2, _, i2) = pop1(&mut q, 40, 1_000, &P);
    assert_eq!((i2.payload.as_slice(), i2.attempts), (&b"v2b"[..], 1));
    imm(&mut q, "g", "v3", 50);
    assert_eq!(lease_flags(&q, "g"), vec![(t2, true)]);
    q.ack(&k("g"), t2, Some(b"res-v2"), 60, 1_000).unwrap();
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    assert_eq!(q.info(&k("g")).unwrap().payload.as_ref(), b"v3");
    assert_eq!(q.result(&k("g"), 60), Some(&b"res-v2"[..]));

    // NACK of a superseded lease while the newest job waits as a delayed
    // retry: superseded, and the retry stays as it is.
    let (_, ta, ..) = pop1(&mut q, 70, 1_000, &P);
    enq(&mut q, "g", "v4", 80);
    let (_, tb, ..) = pop1(&mut q, 90, 1_000, &P);
    assert_eq!(lease_flags(&q, "g"), vec![(ta, true), (tb, false)]);
    assert_eq!(
        q.nack(&k("g"), tb, Some(500), 100, &P),
        Ok(NackOutcome::Retry {
            retry_at: 600,
            attempts: 1
        })
    );
    assert_eq!(
        q.nack(&k("g"), ta, Some(500), 110, &P),
        Ok(NackOutcome::Superseded)
    );
    assert_eq!(q.state_counts(), (0, 1, 0, 0));
    assert_eq!(q.next_deadline(), Some(600));
    q.check().unwrap();

    // Superseded on its last attempt: still dropped, not dead.
    let p1 = Policy {
        max_attempts: 1,
        ..P
    };
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "h", "v1", 0);
    let (_, t, _, i) = pop1(&mut q, 0, 1_000, &p1);
    assert_eq!(i.attempts, 1);
    enq(&mut q, "h", "v2", 10);
    assert_eq!(
        q.nack(&k("h"), t, None, 20, &p1),
        Ok(NackOutcome::Superseded)
    );
    assert_eq!(q.dead_len(), 0);
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    assert_eq!(q.info(&k("h")).unwrap().payload.as_ref(), b"v2");
    // A superseded NACK with a bad time is refused like any other.
    let (_, t, ..) = pop1(&mut q, 30, 1_000, &p1);
    enq(&mut q, "h", "v3", 40);
    let before = q.encode();
    assert_eq!(
        q.nack(&k("h"), t, Some(-1), 50, &p1),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(
        q.nack(&k("h"), t, None, -1, &p1),
        Err(QueueError::TimeOverflow)
    );
    assert_eq!(q.encode(), before);
    assert_eq!(
        q.nack(&k("h"), t, None, 50, &p1),
        Ok(NackOutcome::Superseded)
    );
    assert_eq!(
        q.nack(&k("h"), t, None, 50, &p1),
        Err(QueueError::LeaseNotHeld),
        "the NACK took the lease"
    );
    q.check().unwrap();
}

#[test]
pub fn regrade_drops_the_superseded_lease_and_the_pending_retry() {
    // An expiring superseded lease is dropped: counted as expired, not
    // requeued, not dead.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "x", "old", 0);
    let (_, t_old, ..) = pop1(&mut q, 0, 100, &P);
    enq(&mut q, "x", "new", 50);
    assert_eq!(lease_flags(&q, "x"), vec![(t_old, true)]);
    let r = q.tick(100, &P);
    assert_eq!(
        (r.expired, r.requeued, r.died, r.retried),
        (1, 0, 0, 0),
        "dropped, not requeued: {r:?}"
    );
    assert!(r.changed() && !r.requeued());
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    assert_eq!(q.info(&k("x")).unwrap().payload.as_ref(), b"new");
    assert_eq!(q.info(&k("x")).unwrap().created_at, 50);
    assert_eq!(
        q.nack(&k("x"), t_old, None, 100, &P),
        Err(QueueError::LeaseNotHeld)
    );

    // A regrade drops the key's pending retry at once, not at its retry time.
    let (_, t, ..) = pop1(&mut q, 200, 1_000, &P);
    q.nack(&k("x"), t, Some(100), 210, &P).unwrap(); // retry at 310
    assert_eq!(
        (q.state_counts(), q.next_deadline()),
        ((0, 1, 0, 0), Some(310))
    );
    enq(&mut q, "x", "newer", 250);
    assert_eq!(q.state_counts(), (1, 0, 0, 0), "the retry is gone");
    assert_eq!(q.next_deadline(), None);
    let st = q.states(&k("x")).unwrap();
    assert_eq!(st.len(), 1);
    assert!(matches!(st[0], State::Queued(..)));
    let r = q.tick(310, &P);
    assert!(!r.changed(), "nothing due any more: {r:?}");
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    let i = q.info(&k("x")).unwrap();
    assert_eq!(
        (i.payload.as_ref(), i.created_at, i.attempts, i.immediate),
        (&b"newer"[..], 250, 0, false)
    );

    // The same for an immediate job created under the key.
    let (_, t, ..) = pop1(&mut q, 400, 1_000, &P);
    q.nack(&k("x"), t, Some(1_000), 410, &P).unwrap();
    imm(&mut q, "x", "imm", 420);
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    assert_eq!(q.next_deadline(), None);
    assert_eq!(q.info(&k("x")).unwrap().payload.as_ref(), b"imm");
    assert!(!q.tick(5_000, &P).changed());
    q.check().unwrap();

    // A superseded lease on its last attempt expires: dropped, not dead.
    let p1 = Policy {
        max_attempts: 1,
        ..P
    };
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "y", "v1", 0);
    let _ = pop1(&mut q, 0, 100, &p1);
    enq(&mut q, "y", "v2", 10);
    let r = q.tick(100, &p1);
    assert_eq!((r.expired, r.died, r.requeued), (1, 0, 0), "{r:?}");
    assert_eq!(q.dead_len(), 0);
    assert_eq!(q.info(&k("y")).unwrap().payload.as_ref(), b"v2");

    // DEAD REQUEUE creates the key's job again: it supersedes the leases on
    // the key too.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "z", "first", 0);
    let (_, t, ..) = pop1(&mut q, 0, 1_000, &p1);
    assert_eq!(
        q.nack(&k("z"), t, None, 10, &p1),
        Ok(NackOutcome::Dead { attempts: 1 })
    );
    enq(&mut q, "z", "second", 20);
    let (_, t2, ..) = pop1(&mut q, 20, 1_000, &p1);
    assert_eq!(lease_flags(&q, "z"), vec![(t2, false)]);
    let i = conv(&q.dead_requeue(&k("z"), 30).unwrap());
    assert_eq!((i.payload.as_slice(), i.attempts), (&b"first"[..], 0));
    assert_eq!(lease_flags(&q, "z"), vec![(t2, true)]);
    // "second" was on its last attempt: its NACK is superseded, not dead.
    assert_eq!(
        q.nack(&k("z"), t2, None, 40, &p1),
        Ok(NackOutcome::Superseded)
    );
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    assert_eq!(q.info(&k("z")).unwrap().payload.as_ref(), b"first");
    q.check().unwrap();
    roundtrip(&q);
}

#[test]
pub fn returning_attempt_is_dropped_when_its_key_waits_again() {
    // Through the public operations a key never has a waiting job and a
    // lease that is not superseded at once (see the ledger); an import
    // (`absorb`, ORCA.IMPORT) can join them. Such an attempt, when it comes
    // back, is dropped: the waiting job stays.
    for (how, waiting) in [
        ("expiry", "queued"),
        ("expiry", "delayed"),
        ("nack", "queued"),
    ] {
        let mut q = Queue::new(Order::Lifo);
        enq(&mut q, "w", "waiting", 0);
        if waiting == "delayed" {
            let (_, t, ..) = pop1(&mut q, 0, 1_000, &P);
            q.nack(&k("w"), t, Some(10_000), 0, &P).unwrap();
        }
        let (o, t) = one_lease("w", "returning", 5, 100, &P);
        q.absorb(o).unwrap();
        q.check().unwrap();
        assert_eq!(lease_flags(&q, "w"), vec![(t, false)], "{how}/{waiting}");
        let counts = q.state_counts();
        if how == "expiry" {
            let r = q.tick(105, &P);
            assert_eq!(
                (r.expired, r.requeued, r.died, r.retried),
                (1, 0, 0, 0),
                "{how}/{waiting}: {r:?}"
            );
        } else {
            assert_eq!(
                q.nack(&k("w"), t, Some(0), 50, &P),
                Ok(NackOutcome::Superseded)
            );
        }
        q.check().unwrap();
        assert_eq!(
            q.state_counts(),
            (counts.0, counts.1, 0, 0),
            "{how}/{waiting}: only the lease is gone"
        );
        let payload = match &q.states(&k("w")).unwrap()[0] {
            State::Queued(i, _) => i.payload.to_vec(),
            State::Delayed(_, d) => d.job.payload.to_vec(),
            s => panic!("{s:?}"),
        };
        assert_eq!(payload, b"waiting", "{how}/{waiting}");
    }
    // A due retry whose key is queued is dropped too, and still counted.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "w", "waiting", 0);
    let (mut o, t) = one_lease("w", "returning", 5, 100, &P);
    o.nack(&k("w"), t, Some(50), 10, &P).unwrap();
    q.absorb(o).unwrap();
    q.check().unwrap();
    assert_eq!(q.state_counts(), (1, 1, 0, 0));
    let r = q.tick(60, &P);
    assert_eq!((r.retried, r.requeued, r.expired), (1, 0, 0), "{r:?}");
    assert!(r.changed() && !r.requeued());
    assert_eq!(q.state_counts(), (1, 0, 0, 0));
    assert_eq!(q.info(&k("w")).unwrap().payload.as_ref(), b"waiting");
    // On its last attempt the returning lease dies, as before.
    let p1 = Policy {
        max_attempts: 1,
        ..P
    };
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "w", "waiting", 0);
    let (o, _) = one_lease("w", "returning", 5, 100, &p1);
    q.absorb(o).unwrap();
    let r = q.tick(105, &p1);
    assert_eq!((r.expired, r.died, r.requeued), (1, 1, 0), "{r:?}");
    assert_eq!(q.state_counts(), (1, 0, 0, 1));
}

#[test]
pub fn dead_requeue_and_purge() {
    let p1 = Policy {
        max_attempts: 1,
        ..P
    };
    let mut q = Queue::new(Order::Lifo);
    assert_eq!(
        q.dead_requeue(&k("a"), 0).map(|_| ()),
        Err(QueueError::NoSuchJob)
    );
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        enq(&mut q, name, name, i as i64);
    }
    for now in [10, 20, 30] {
        let (name, t, ..) = pop1(&mut q, now, 100, &p1);
        assert_eq!(
            q.nack(&k(&name), t, None, now, &p1),
            Ok(NackOutcome::Dead { attempts: 1 })
        );
    }
    let names: Vec<String> = q.dead_list(0, 10).iter().map(|(k, _)| kname(k)).collect();
    assert_eq!(names, strs(&["a", "b", "c"]), "in the order they died");
    assert_eq!(q.dead_list(1, 1).len(), 1);
    assert_eq!(kname(&q.dead_list(1, 1)[0].0), "b");
    // Requeue: immediate at now, attempts 0, original created_at.
    let i = conv(&q.dead_requeue(&k("b"), 500).unwrap());
    assert_eq!(
        (i.immediate, i.release_at, i.created_at, i.attempts),
        (true, 500, 1, 0)
    );
    q.check().unwrap();
    let (_, tb, _, ib) = pop1(&mut q, 600, 100, &p1);
    assert_eq!(ib.attempts, 1, "a fresh set of attempts");
    q.ack(&k("b"), tb, None, 600, 0).unwrap();
    // AlreadyQueued when the key waits again (queued or delayed).
    enq(&mut q, "a", "a2", 700);
    let before = q.encode();
    assert_eq!(
        q.dead_requeue(&k("a"), 700).map(|_| ()),
        Err(QueueError::AlreadyQueued)
    );
    assert_eq!(q.encode(), before);
    let p0 = Policy {
        max_attempts: 0,
        ..P
    };
    let (_, ta, ..) = pop1(&mut q, 700, 100, &p0);
    q.nack(&k("a"), ta, Some(1_000), 700, &p0).unwrap();
    assert_eq!(
        q.dead_requeue(&k("a"), 710).map(|_| ()),
        Err(QueueError::AlreadyQueued)
    );
    assert_eq!(
        q.dead_requeue(&k("a"), -1).map(|_| ()),
        Err(QueueError::TimeOverflow)
    );
    // Purge.
    assert_eq!(q.dead_purge(), 2);
    assert_eq!(q.dead_len(), 0);
    assert_eq!(q.dead_purge(), 0);
    q.check().unwrap();
}

#[test]
pub fn dying_again_replaces_the_dead_entry() {
    let p1 = Policy {
        max_attempts: 1,
        ..P
    };
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "r", "v1", 0);
    let (_, t, ..) = pop1(&mut q, 0, 100, &p1);
    q.nack(&k("r"), t, None, 0, &p1).unwrap();
    enq(&mut q, "s", "s", 5);
    let (_, ts, ..) = pop1(&mut q, 5, 100, &p1);
    q.nack(&k("s"), ts, None, 5, &p1).unwrap();
    enq(&mut q, "r", "v2", 10);
    let _ = pop1(&mut q, 10, 100, &p1);
    assert_eq!(q.tick(110, &p1).died, 1);
    let dl = q.dead_list(0, 10);
    assert_eq!(dl.len(), 2);
    assert_eq!(kname(&dl[1].0), "r");
    assert_eq!(&*dl[1].1.job.payload, b"v2");
    assert_eq!(dl[1].1.cause, DeathCause::Expired);
    q.check().unwrap();
}

// ---------------------------------------------------------------------------
// A design hazard this suite found, ruled out since by regrade supersession:
// a stale attempt that was waiting (a delayed retry, or an expired lease that
// came back) won over the regrade that was running, so the newest config was
// silently dropped and the old one ran again. Now the regrade supersedes the
// old attempt: the newest config runs, the stale attempt never comes back.
// ---------------------------------------------------------------------------

#[test]
pub fn design_stale_attempt_beats_regrade() {
    let p0 = Policy {
        max_attempts: 0,
        ..P
    };
    // The stale attempt fails and asks for a retry while the regrade runs.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "s", "v1", 0);
    let (_, t1, ..) = pop1(&mut q, 0, 1_000, &p0); // v1 running
    enq(&mut q, "s", "v2", 10); // student resubmits
    assert_eq!(lease_flags(&q, "s"), vec![(t1, true)]);
    let (_, t2, _, i2) = pop1(&mut q, 20, 1_000, &p0); // v2 running
    assert_eq!(i2.payload, b"v2");
    // v1's worker fails: superseded, no retry is parked.
    assert_eq!(
        q.nack(&k("s"), t1, Some(100), 30, &p0),
        Ok(NackOutcome::Superseded)
    );
    assert_eq!(q.state_counts(), (0, 0, 1, 0));
    // v2's worker fails too: v2 is retried (its key is not waiting).
    assert_eq!(
        q.nack(&k("s"), t2, None, 40, &p0),
        Ok(NackOutcome::Retry {
            retry_at: 140,
            attempts: 1
        })
    );
    let r = q.tick(200, &p0);
    assert_eq!((r.retried, r.requeued), (1, 1), "{r:?}");
    let payload = q.info(&k("s")).unwrap().payload.to_vec();
    assert_eq!(
        payload, b"v2",
        "the newest config should be the one that runs"
    );
    q.check().unwrap();
    assert_eq!(
        drain(&mut q, 200, &p0),
        strs(&["v2"]),
        "v1 never comes back"
    );

    // The stale attempt's lease expires while the regrade runs, then the
    // regrade fails.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "s", "v1", 0);
    let _ = pop1(&mut q, 0, 100, &p0); // v1 running until 100
    enq(&mut q, "s", "v2", 10);
    let (_, t2, ..) = pop1(&mut q, 20, 1_000, &p0); // v2 running
    let r = q.tick(100, &p0);
    assert_eq!((r.expired, r.requeued), (1, 0), "v1 dropped: {r:?}");
    assert_eq!(q.state_counts(), (0, 0, 1, 0));
    assert!(matches!(
        q.nack(&k("s"), t2, Some(0), 110, &p0),
        Ok(NackOutcome::Retry { .. })
    ));
    assert_eq!(q.info(&k("s")).unwrap().payload.as_ref(), b"v2");
    assert_eq!(
        drain(&mut q, 110, &p0),
        strs(&["v2"]),
        "v1 never comes back"
    );

    // A retry of the stale attempt already parked when the regrade comes.
    let mut q = Queue::new(Order::Lifo);
    enq(&mut q, "s", "v1", 0);
    let (_, t1, ..) = pop1(&mut q, 0, 1_000, &p0);
    q.nack(&k("s"), t1, Some(1_000), 10, &p0).unwrap(); // retry at 1010
    enq(&mut q, "s", "v2", 20);
    assert_eq!(
        q.state_counts(),
        (1, 0, 0, 0),
        "the retry is dropped at once"
    );
    assert_eq!(drain(&mut q, 20, &p0), strs(&["v2"]), "v1 never comes back");
}

//! At-least-once end to end: workers that die mid-job, a producer, leases
//! that expire and jobs that come back; no job is ever lost.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::*;
use redis::Value;

/// Sets the flag when dropped (also when the test panics), so scoped worker
/// threads end.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn chaos_workers_never_lose_a_job() {
    const WORKERS: u64 = 8;
    const JOBS: usize = 300;
    const Q: &str = "chaos";
    let s = Server::start_with(&["max-attempts", "0"], &[]);
    let mut c = s.conn();
    let started = Instant::now();

    let names: Vec<String> = (0..JOBS).map(|i| format!("chaos-{i}")).collect();
    let key_to_name: HashMap<String, String> =
        names.iter().map(|n| (key_of(n), n.clone())).collect();
    let stop = AtomicBool::new(false);
    // Successful ACKs per orca key.
    let acks: Mutex<HashMap<String, u32>> = Mutex::new(HashMap::new());
    // Every delivery read by a worker: (key, attempt).
    let deliveries: Mutex<Vec<(String, i64)>> = Mutex::new(Vec::new());
    // Deliveries that did not complete (worker died, NACK, too slow): the
    // job must be handed out again later.
    let unfinished: Mutex<Vec<(String, i64, &'static str)>> = Mutex::new(Vec::new());
    let counts: Mutex<HashMap<&'static str, usize>> = Mutex::new(HashMap::new());
    let failures: Mutex<Vec<String>> = Mutex::new(Vec::new());

    thread::scope(|scope| {
        for w in 0..WORKERS {
            let (s, stop, acks, deliveries) = (&s, &stop, &acks, &deliveries);
            let (unfinished, counts, failures) = (&unfinished, &counts, &failures);
            scope.spawn(move || {
                let count =
                    |what: &'static str| *counts.lock().unwrap().entry(what).or_insert(0) += 1;
                let fail = |what: String| failures.lock().unwrap().push(what);
                let mut rng = Rng::new(0xC4A05 + w);
                let mut con = blocking_conn(s);
                while !stop.load(Ordering::Relaxed) {
                    // Sometimes die while waiting in a blocking pop: the
                    // reply (maybe a job, now leased to nobody) is never read.
                    if rng.chance(2) {
                        let cmd = redis::cmd("ORCA.POP")
                            .arg(Q)
                            .arg("LEASE")
                            .arg(300)
                            .arg("BLOCK")
                            .arg(200)
                            .get_packed_command();
                        let _ = con.send_packed_command(&cmd);
                        thread::sleep(Duration::from_millis(rng.below(5)));
                        count("blind death");
                        con = blocking_conn(s);
                        continue;
                    }
                    let v = raw(&mut con, &args!["ORCA.POP", Q, "LEASE", 300, "BLOCK", 200]);
                    if v == Value::Nil {
                        continue;
                    }
                    if let Some(e) = error_text(&v) {
                        fail(format!("POP: {e}"));
                        continue;
                    }
                    let f = fields(v);
                    let (key, token, attempt) = (text(&f, "key"), lease(&f), int(&f, "attempt"));
                    deliveries.lock().unwrap().push((key.clone(), attempt));
                    thread::sleep(Duration::from_millis(rng.below(6)));
                    let roll = rng.below(100);
                    if roll < 10 {
                        // Die mid-job: no ACK; a new worker takes this place.
                        count("death mid-job");
                        unfinished.lock().unwrap().push((key, attempt, "died"));
                        drop(con);
                        con = blocking_conn(s);
                        continue;
                    }
                    if roll < 18 {
                        // Fail the job: it is retried (no dead list here).
                        let delay = rng.below(100) as i64;
                        let v = raw(
                            &mut con,
                            &args!["ORCA.NACK", Q, &key, &token, "DELAY", delay],
                        );
                        match error_text(&v) {
                            None => {
                                let n = fields(v);
                                if text(&n, "outcome") != "retry" {
                                    fail(format!("NACK {key}: {n:?}"));
                                }
                                count("nack");
                                unfinished.lock().unwrap().push((key, attempt, "nacked"));
                            }
                            Some(e) if e.starts_with(LEASE_NOT_HELD) => count("late nack"),
                            Some(e) => fail(format!("NACK {key}: {e}")),
                        }
                        continue;
                    }
                    if roll < 22 {
                        // A long job with heartbeats: the lease must hold.
                        let mut held = true;
                        for _ in 0..4 {
                            let v = raw(&mut con, &args!["ORCA.EXTEND", Q, &key, &token, 1500]);
                            if let Some(e) = error_text(&v) {
                                fail(format!("EXTEND {key} (attempt {attempt}): {e}"));
                                held = false;
                                break;
                            }
                            thread::sleep(Duration::from_millis(100));
                        }
                        if held {
                            count("heartbeat");
                            match raw(
                                &mut con,
                                &args!["ORCA.ACK", Q, &key, &token, "RESULT", &key],
                            ) {
                                Value::Int(1) => *acks.lock().unwrap().entry(key).or_insert(0) += 1,
                                v => fail(format!("ACK after heartbeats {key}: {v:?}")),
                            }
                        }
                        continue;
                    }
                    if roll < 25 {
                        // Too slow, no heartbeat: the lease (300 ms) runs out.
                        thread::sleep(Duration::from_millis(450));
                        count("slow");
                    }
                    let v = raw(
                        &mut con,
                        &args!["ORCA.ACK", Q, &key, &token, "RESULT", &key],
                    );
                    match (&v, error_text(&v)) {
                        (Value::Int(1), _) => *acks.lock().unwrap().entry(key).or_insert(0) += 1,
                        (_, Some(e)) if e.starts_with(LEASE_NOT_HELD) => {
                            // The lease expired and the job went back to the
                            // queue or to another worker: fenced off.
                            count("late ack refused");
                            unfinished.lock().unwrap().push((key, attempt, "late"));
                        }
                        _ => fail(format!("ACK {key}: {v:?}")),
                    }
                }
            });
        }

        // Whatever happens below, the workers stop.
        let _stop = StopOnDrop(&stop);
        // The producer, over about two seconds.
        let mut p = s.conn();
        let mut rng = Rng::new(42);
        for (i, n) in names.iter().enumerate() {
            let coll = match i % 3 {
                0 => None,
                1 => Some(format!("user.{}", rng.below(7))),
                _ => Some(format!("team.{}", rng.below(3))),
            };
            let priority = if rng.chance(20) {
                rng.below(2000) as i64
            } else {
                0
            };
            let cfg = config(n, coll.as_deref(), priority);
            let e = enqueue(&mut p, Q, &cfg);
            assert_eq!(int(&e, "created"), 1);
            if i % 5 == 4 {
                thread::sleep(Duration::from_millis(10 + rng.below(40)));
            }
        }

        // Wait until every job was acked (expired leases of dead workers
        // and retries come back by themselves), bounded.
        let deadline = Instant::now() + Duration::from_secs(20);
        while acks.lock().unwrap().len() < JOBS && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
    });

    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "worker errors: {failures:?}");
    let acks = acks.into_inner().unwrap();
    let deliveries = deliveries.into_inner().unwrap();
    let unfinished = unfinished.into_inner().unwrap();
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !acks.contains_key(&key_of(n)))
        .collect();
    let mut diag = String::new();
    for n in missing.iter().take(5) {
        diag.push_str(&format!(
            "\n{n}: {:?}",
            raw(&mut c, &args!["ORCA.STATUS", Q, key_of(n)])
        ));
    }
    assert!(
        missing.is_empty(),
        "{} of {JOBS} jobs never acked (len {}):{diag}",
        missing.len(),
        qlen(&mut c, Q)
    );
    // Every job completed exactly once: a second completion would mean two
    // workers held valid leases on the same job.
    for (k, n) in &acks {
        assert!(key_to_name.contains_key(k), "acked an unknown key {k}");
        assert_eq!(*n, 1, "{} acked {n} times", key_to_name[k]);
    }
    // No delivery handed out twice: (key, attempt) pairs are unique.
    let mut seen = HashSet::new();
    for d in &deliveries {
        assert!(d.1 >= 1, "attempt {} of {}", d.1, d.0);
        assert!(seen.insert(d.clone()), "delivery {d:?} handed out twice");
    }
    // Every delivery that did not complete was followed by another one,
    // with its attempts counted.
    for (k, a, why) in &unfinished {
        assert!(
            deliveries.iter().any(|(k2, a2)| k2 == k && a2 > a),
            "{} ({why} at attempt {a}) never came back",
            key_to_name[k]
        );
    }

    // Drained: nothing queued, leased, delayed or dead; results kept.
    wait_for("no job state left", Duration::from_secs(10), || {
        names
            .iter()
            .all(|n| pending_status(&mut c, Q, &key_of(n)).is_none())
    });
    assert_eq!(qlen(&mut c, Q), 0);
    assert!(dead_list(&mut c, Q, &[]).is_empty());
    for n in names.iter().step_by(37) {
        assert_eq!(result(&mut c, Q, &key_of(n)), Some(key_of(n).into_bytes()));
    }
    assert_check(&mut c, Q);
    let counts = counts.into_inner().unwrap();
    eprintln!(
        "chaos: {} deliveries, {counts:?}, {:?}",
        deliveries.len(),
        started.elapsed()
    );
    for what in ["death mid-job", "nack", "heartbeat"] {
        assert!(
            counts.get(what).copied().unwrap_or(0) > 0,
            "no {what} happened"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(40));
}

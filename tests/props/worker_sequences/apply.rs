//! One step: the operation on the queue, its decoded twin and the model;
//! every answer compared.

use orca::core::{JobKey, NackOutcome, QueueError, MAX_TIME};

use crate::support::*;
use crate::worker_model::*;
use crate::worker_views::*;

use super::*;

impl Harness {
    /// Apply `op` to the queue, the twin and the model; compare answers.
    /// Returns a label for the coverage statistics.
    pub(super) fn apply(&mut self, op: &Op) -> Result<String, String> {
        let before = self.q.encode();
        let policy = self.policy;
        // The probe: what `pop_deliveries` must do is `tick(now)` followed by
        // `count` plain pops.
        let probe = match op {
            Op::Pop { now, count, .. } => {
                let mut p = self.q.clone();
                let report = p.tick(*now, &policy);
                let order = p.pop_order();
                let mut infos = Vec::new();
                for _ in 0..*count {
                    match p.pop() {
                        Ok(Some(i)) => infos.push(conv(&i)),
                        Ok(None) => break,
                        Err(e) => return err(format!("probe pop failed: {e}")),
                    }
                }
                Some((report, order, infos))
            }
            _ => None,
        };
        let out = run_core(&mut self.q, op, &policy, &self.keys);
        let tout = run_core(&mut self.twin, op, &policy, &self.keys);
        let (a, b) = (format!("{out:?}"), format!("{tout:?}"));
        ensure!(
            a == b,
            "the decoded twin answered differently:\n    queue: {a}\n    twin:  {b}"
        );
        if out.is_err() {
            ensure!(
                self.q.encode() == before,
                "a failing operation changed the queue: {a}"
            );
        }
        let m = &mut self.model;
        let keys = &self.keys;
        let label = match (op, out) {
            (
                Op::Enqueue {
                    key,
                    coll,
                    priority,
                    payload,
                    now,
                },
                Out::Put(r),
            ) => {
                let kk = keys[*key];
                let created = m.enqueue(kk, *coll, *priority, payload, *now);
                let (info, c) = r.map_err(|e| format!("enqueue failed: {e}"))?;
                ensure!(c == created, "enqueue: created={c}, model says {created}");
                let j = &m.queued[&kk];
                ensure!(
                    pj_info(&info) == j.pj() && info.key == kk,
                    "enqueue returned {info:?}, model has {:?}",
                    j.pj()
                );
                if let Some(rel) = j.release {
                    ensure!(info.release_at == rel, "enqueue: release {info:?} != {rel}");
                }
                let leased = m.leases.values().any(|l| l.key == kk);
                match (c, leased) {
                    (true, true) => "enqueue: new (regrade of a leased key)".into(),
                    (true, false) => "enqueue: new".into(),
                    (false, _) => "enqueue: update".into(),
                }
            }
            (
                Op::Immediate {
                    key,
                    coll,
                    payload,
                    arrival,
                },
                Out::Put(r),
            ) => {
                let kk = keys[*key];
                let created = m.put_immediate(kk, *coll, payload, *arrival);
                let (info, c) = r.map_err(|e| format!("put_immediate failed: {e}"))?;
                ensure!(
                    c == created,
                    "put_immediate: created={c}, model says {created}"
                );
                let j = &m.queued[&kk];
                ensure!(
                    pj_info(&info) == j.pj() && info.key == kk,
                    "put_immediate returned {info:?}, model has {:?}",
                    j.pj()
                );
                if let Some(rel) = j.release {
                    ensure!(
                        info.release_at == rel,
                        "put_immediate: release {info:?} != {rel}"
                    );
                }
                let leased = m.leases.values().any(|l| l.key == kk);
                match (c, leased) {
                    (true, true) => "immediate: new (regrade of a leased key)".into(),
                    (true, false) => "immediate: new".into(),
                    (false, _) => "immediate: update".into(),
                }
            }
            (Op::Move { key, release, .. }, Out::Move(r)) => {
                let want = m.move_job(&keys[*key], *release);
                match (r, want) {
                    (Ok(info), Ok(())) => {
                        let j = &m.queued[&keys[*key]];
                        ensure!(
                            pj_info(&info) == j.pj(),
                            "move returned {info:?}, model {:?}",
                            j.pj()
                        );
                        "move: ok".into()
                    }
                    (Err(e), Err(w)) if e == w => format!("move: {e:?}"),
                    (got, want) => return err(format!("move: got {got:?}, model says {want:?}")),
                }
            }
            (Op::Delete { key }, Out::Delete(r)) => {
                let want = m.delete(&keys[*key]);
                ensure!(r == Ok(want), "delete: got {r:?}, model says {want}");
                format!("delete: {want}")
            }
            (
                Op::Pop {
                    now,
                    lease_ms,
                    count,
                },
                Out::Pop(r),
            ) => {
                let bad = !(0..=MAX_TIME).contains(now)
                    || !(0..=MAX_TIME).contains(lease_ms)
                    || *lease_ms > MAX_TIME - *now;
                if bad {
                    ensure!(
                        r == Err(QueueError::TimeOverflow),
                        "pop with now={now} lease={lease_ms}: got {r:?}, want TimeOverflow"
                    );
                    return Ok("pop: TimeOverflow".into());
                }
                let (ds, report) = r.map_err(|e| format!("pop failed: {e}"))?;
                let (probe_report, probe_order, probe_infos) = probe.unwrap();
                let want_report = m.tick(*now, &policy);
                ensure!(
                    report == want_report && report == probe_report,
                    "pop's tick report {report:?}; model {want_report:?}; tick alone {probe_report:?}"
                );
                let mut order_set: Vec<JobKey> = probe_order.clone();
                order_set.sort_unstable();
                let mut model_set: Vec<JobKey> = m.queued.keys().copied().collect();
                model_set.sort_unstable();
                ensure!(
                    order_set == model_set,
                    "after tick the queue holds {:?}, model says {:?}",
                    order_set.iter().map(kname).collect::<Vec<_>>(),
                    model_set.iter().map(kname).collect::<Vec<_>>()
                );
                let got: Vec<Info> = ds.iter().map(|(i, _)| i.clone()).collect();
                ensure!(
                    got == probe_infos,
                    "pop_deliveries handed out {got:?}\n    but tick + pop x{count} gives {probe_infos:?}"
                );
                ensure!(
                    got.len() == (*count).min(m.queued.len()),
                    "pop handed out {} of {} queued (count {count})",
                    got.len(),
                    m.queued.len()
                );
                for (info, lease) in &ds {
                    let kk = info.key;
                    if let Some((at, dj)) = m.delayed.get(&kk) {
                        ensure!(
                            dj.payload != info.payload || *at <= *now,
                            "a delayed job was handed out before its retry time {at}: {info:?}"
                        );
                    }
                    if let Some(f) = m.ended_payloads.get(&info.payload) {
                        return err(format!("a job that ended ({f:?}) was handed out: {info:?}"));
                    }
                    let mut j = match m.queued.remove(&kk) {
                        Some(j) => j,
                        None => {
                            return err(format!(
                                "handed out {info:?}, which the model has not queued"
                            ))
                        }
                    };
                    ensure!(
                        m.newest.get(&kk) == Some(&j.id),
                        "handed out {info:?}, which is not the newest job of its key"
                    );
                    let last = m.last_attempt.get(&j.id).copied().unwrap_or(0);
                    ensure!(
                        info.attempts == j.attempts + 1 && info.attempts == last + 1,
                        "delivery attempts {} but the job had {} (last delivery {last})",
                        info.attempts,
                        j.attempts
                    );
                    j.attempts += 1;
                    m.last_attempt.insert(j.id, j.attempts);
                    ensure!(
                        pj_info(info) == j.pj(),
                        "delivery {info:?} but model job {:?}",
                        j.pj()
                    );
                    if let Some(rel) = j.release {
                        ensure!(
                            info.release_at == rel,
                            "delivery {info:?}: release != {rel}"
                        );
                    }
                    if policy.max_attempts > 0 && self.policy_fixed {
                        ensure!(
                            j.attempts <= policy.max_attempts,
                            "delivery number {} of a job allowed {}",
                            j.attempts,
                            policy.max_attempts
                        );
                    }
                    match (lease, *lease_ms) {
                        (None, 0) => m.end(&j, Fate::Consumed),
                        (Some((token, deadline)), ms) if ms > 0 => {
                            ensure!(*token != 0, "token 0 handed out");
                            ensure!(
                                !m.issued.contains_key(token),
                                "token {token} handed out twice"
                            );
                            ensure!(
                                *deadline == now + ms,
                                "lease deadline {deadline}, want {}",
                                now + ms
                            );
                            m.issued.insert(*token, kk);
                            m.issued_log.push(*token);
                            m.leases.insert(
                                *token,
                                MLease {
                                    key: kk,
                                    deadline: *deadline,
                                    job: j,
                                },
                            );
                        }
                        (l, ms) => return err(format!("lease_ms {ms} gave lease {l:?}")),
                    }
                }
                if *lease_ms == 0 {
                    format!("pop: at-most-once, {} handed out", ds.len())
                } else {
                    format!("pop: leased {} of count {count}", ds.len())
                }
            }
            (
                Op::Ack {
                    key,
                    token,
                    why,
                    result,
                    ttl,
                    now,
                },
                Out::Ack(r),
            ) => {
                let superseded = m.leases.get(token).is_some_and(|l| m.regraded_since(l));
                let want = m.ack(&keys[*key], *token, result.as_deref(), *now, *ttl);
                ensure!(r == want, "ack: got {r:?}, model says {want:?}");
                match r {
                    Ok(()) if superseded => "ack: ok (superseded lease)".into(),
                    Ok(()) if result.is_some() && *ttl > 0 => "ack: ok, result kept".into(),
                    Ok(()) => "ack: ok".into(),
                    Err(e) => format!("ack: {e:?} ({why})"),
                }
            }
            (
                Op::Nack {
                    key,
                    token,
                    why,
                    delay,
                    now,
                },
                Out::Nack(r),
            ) => {
                let want = m.nack(&keys[*key], *token, *delay, *now, &policy);
                ensure!(r == want, "nack: got {r:?}, model says {want:?}");
                match r {
                    Ok(NackOutcome::Retry { retry_at, .. }) if retry_at <= *now => {
                        "nack: retry at once".into()
                    }
                    Ok(NackOutcome::Retry { .. }) if delay.is_none() => {
                        "nack: retry delayed (backoff)".into()
                    }
                    Ok(NackOutcome::Retry { .. }) => "nack: retry delayed (explicit)".into(),
                    Ok(NackOutcome::Dead { .. }) => "nack: dead".into(),
                    Ok(NackOutcome::Superseded) => "nack: superseded lease".into(),
                    Err(e) => format!("nack: {e:?} ({why})"),
                }
            }
            (
                Op::Extend {
                    key,
                    token,
                    why,
                    ms,
                    now,
                },
                Out::Extend(r),
            ) => {
                let want = m.extend(&keys[*key], *token, *ms, *now);
                ensure!(r == want, "extend: got {r:?}, model says {want:?}");
                match r {
                    Ok(_) => "extend: ok".into(),
                    Err(e) => format!("extend: {e:?} ({why})"),
                }
            }
            (Op::Cancel { key }, Out::Cancel(r)) => {
                let want = m.cancel(&keys[*key]);
                ensure!(r == Ok(want), "cancel: got {r:?}, model says {want}");
                format!("cancel: {want}")
            }
            (Op::Tick { now }, Out::Tick(r)) => {
                let want = m.tick(*now, &policy);
                ensure!(r == want, "tick: got {r:?}, model says {want:?}");
                format!("tick: changed={}", r.changed())
            }
            (Op::DeadRequeue { key, now }, Out::Requeue(r)) => {
                let kk = keys[*key];
                let want = m.dead_requeue(&kk, *now);
                match (r, want) {
                    (Ok(info), Ok(())) => {
                        let j = &m.queued[&kk];
                        ensure!(
                            pj_info(&info) == j.pj()
                                && info.release_at == *now
                                && info.attempts == 0
                                && info.immediate,
                            "dead_requeue returned {info:?}, model {:?} at {now}",
                            j.pj()
                        );
                        "dead_requeue: ok".into()
                    }
                    (Err(e), Err(w)) if e == w => format!("dead_requeue: {e:?}"),
                    (got, want) => {
                        return err(format!("dead_requeue: got {got:?}, model says {want:?}"))
                    }
                }
            }
            (Op::DeadPurge, Out::Purge(n)) => {
                let want = m.dead_purge();
                ensure!(n == want, "dead_purge: {n}, model says {want}");
                format!("dead_purge: {}", if n > 0 { "some" } else { "none" })
            }
            (Op::DeadList { offset, limit }, Out::List(got)) => {
                let want: Vec<DeadView> = m
                    .dead_list()
                    .into_iter()
                    .skip(*offset)
                    .take(*limit)
                    .map(|(key, d)| DeadView {
                        key: kname(&key),
                        died_at: d.died_at,
                        cause: d.cause,
                        job: d.job.pj(),
                    })
                    .collect();
                ensure!(got == want, "dead_list: got {got:?}, model {want:?}");
                "dead_list".into()
            }
            (Op::SetPolicy(p), Out::None) => {
                self.policy = *p;
                "set policy".into()
            }
            (op, out) => return err(format!("harness: {op:?} answered {out:?}")),
        };
        Ok(label)
    }
}

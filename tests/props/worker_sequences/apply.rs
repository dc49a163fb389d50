//! One step: the operation on the queue, its decoded twin and the model;
//! every answer compared.

use orca::core::{NackOutcome, QueueError, TickReport, MAX_TIME};

use crate::support::*;
use crate::worker_model::*;
use crate::worker_views::*;

use super::*;

/// A tick report without the wake-up hint, which the model checks apart
/// (`Harness::check_wake`).
fn sans_wake(r: &TickReport) -> TickReport {
    TickReport {
        uncapped: false,
        ..r.clone()
    }
}

/// A delivery as the model predicts it: everything but the nonce (which
/// counts sequence numbers the docs do not account for).
fn sans_nonce(i: &Info) -> Info {
    Info {
        nonce: 0,
        ..i.clone()
    }
}

/// A put (enqueue, put_immediate) against the model's: what it did, and
/// the job as it replied; a coverage label.
fn compare_put(
    m: &Model,
    name: &str,
    r: Result<(Info, Put), QueueError>,
    want: Result<Put, QueueError>,
    leased: bool,
) -> Result<String, String> {
    let (info, put) = r.map_err(|e| format!("{name} failed: {e}"))?;
    ensure!(Ok(put) == want, "{name}: {put:?}, model says {want:?}");
    let w = m.info(&info.key).unwrap();
    ensure!(
        sans_nonce(&info) == sans_nonce(&w),
        "{name} returned {info:?}, model has {w:?}"
    );
    let what = match (put.held, put.delay > 0) {
        (true, _) => "held",
        (false, true) => "auto-delayed",
        (false, false) => "queued",
    };
    Ok(match (put.created, leased) {
        (true, true) => format!("{name}: new, {what} (regrade of a leased key)"),
        (true, false) => format!("{name}: new, {what}"),
        (false, _) => format!("{name}: update ({what})"),
    })
}

impl Harness {
    /// Apply `op` to the queue, the twin and the model; compare answers.
    /// Returns a label for the coverage statistics.
    pub(super) fn apply(&mut self, op: &Op) -> Result<String, String> {
        let before = self.q.encode();
        let policy = self.policy;
        self.model.uncapped.clear();
        // The probe: without a running cap (which counts the leases a pop
        // makes as it goes), what `pop_deliveries` must do is `tick(now)`
        // followed by `count` plain pops.
        let probe = match op {
            Op::Pop { now, count, .. } if self.q.settings().max_running == 0 || *count == 1 => {
                let mut p = self.q.clone();
                let report = p.tick(*now, &policy);
                let mut infos = Vec::new();
                for _ in 0..*count {
                    match p.pop() {
                        Ok(Some(i)) => infos.push(conv(&i)),
                        Ok(None) => break,
                        Err(e) => return err(format!("probe pop failed: {e}")),
                    }
                }
                Some((report, infos))
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
        // The core's wake-up hint since the last step (kept in step on the
        // twin too).
        let woken = self.q.take_woken();
        self.twin.take_woken();
        let m = &mut self.model;
        let keys = &self.keys;
        let label = match (op, out) {
            (
                Op::Enqueue {
                    key,
                    coll,
                    priority,
                    gate,
                    payload,
                    now,
                },
                Out::Put(r),
            ) => {
                let kk = keys[*key];
                let leased = m.leases.values().any(|l| l.key == kk);
                let c = job_config(kk, *coll, *priority, *gate);
                let want = m.enqueue(&c, payload, *now);
                compare_put(m, "enqueue", r, want, leased)?
            }
            (
                Op::Immediate {
                    key,
                    coll,
                    gate,
                    payload,
                    arrival,
                },
                Out::Put(r),
            ) => {
                let kk = keys[*key];
                let leased = m.leases.values().any(|l| l.key == kk);
                let c = job_config(kk, *coll, 0, *gate);
                let want = m.put_immediate(&c, payload, *arrival);
                compare_put(m, "put_immediate", r, want, leased)?
            }
            (
                Op::Move {
                    key,
                    release,
                    buffer,
                    now,
                },
                Out::Move(r),
            ) => {
                let how = if *release {
                    Move::Release
                } else {
                    Move::Delay { buffer: *buffer }
                };
                let want = m.move_job(&keys[*key], how, *now);
                match (r, want) {
                    (Ok(info), Ok(w)) => {
                        ensure!(
                            sans_nonce(&info) == sans_nonce(&w),
                            "move returned {info:?}, model {w:?}"
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
                let want_report = m.tick(*now, &policy);
                ensure!(
                    sans_wake(&report) == want_report,
                    "pop's tick report {report:?}; model {want_report:?}"
                );
                if m.take_must_wake() {
                    ensure!(
                        report.uncapped || woken,
                        "pop's tick brought a capped collation with jobs below its cap and woke nobody: {report:?}"
                    );
                }
                let got: Vec<Info> = ds.iter().map(|(i, _)| i.clone()).collect();
                if let Some((probe_report, probe_infos)) = probe {
                    ensure!(
                        report == probe_report && got == probe_infos,
                        "pop_deliveries gave {got:?} ({report:?})\n    but tick + pop x{count} gives {probe_infos:?} ({probe_report:?})"
                    );
                }
                let capped_skip = m.settings.max_running > 0
                    && m.order
                        .pop_order()
                        .first()
                        .is_some_and(|k| m.waits_for_cap(k));
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
                    let Some((mk, j, w)) = m.pop_one() else {
                        return err(format!(
                            "handed out {info:?}, but the model has nothing to hand out (queued {:?})",
                            names(&m.order.pop_order())
                        ));
                    };
                    ensure!(
                        mk == kk && sans_nonce(info) == sans_nonce(&w),
                        "handed out {info:?}, the model hands out {w:?}"
                    );
                    ensure!(
                        m.newest.get(&kk) == Some(&j.id),
                        "handed out {info:?}, which is not the newest job of its key"
                    );
                    let last = m.last_attempt.get(&j.id).copied().unwrap_or(0);
                    ensure!(
                        info.attempts == j.attempts && info.attempts == last + 1,
                        "delivery attempts {} but the job had {} (last delivery {last})",
                        info.attempts,
                        j.attempts - 1
                    );
                    m.last_attempt.insert(j.id, j.attempts);
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
                if ds.len() < *count {
                    let next = m.peek_pop();
                    ensure!(
                        next.is_none(),
                        "pop handed out {} of count {count}, but the model would hand out {} next",
                        ds.len(),
                        kname(&next.unwrap())
                    );
                }
                let skip = if capped_skip { ", front capped" } else { "" };
                if *lease_ms == 0 {
                    format!("pop: at-most-once, {} handed out{skip}", ds.len())
                } else {
                    format!("pop: leased {} of count {count}{skip}", ds.len())
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
                if m.take_must_wake() {
                    ensure!(
                        woken,
                        "an ack brought a capped collation with jobs below its cap and woke nobody"
                    );
                }
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
                if m.take_must_wake() {
                    ensure!(
                        woken,
                        "a nack brought a capped collation with jobs below its cap and woke nobody"
                    );
                }
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
                if m.take_must_wake() {
                    ensure!(woken, "a cancellation brought a capped collation with jobs below its cap and woke nobody");
                }
                format!("cancel: {want}")
            }
            (Op::Tick { now }, Out::Tick(r)) => {
                let want = m.tick(*now, &policy);
                ensure!(
                    sans_wake(&r) == want,
                    "tick: got {r:?}, model says {want:?}"
                );
                if m.take_must_wake() {
                    ensure!(
                        r.uncapped || woken,
                        "a tick brought a capped collation with jobs below its cap and woke nobody: {r:?}"
                    );
                }
                format!(
                    "tick: changed={}{}",
                    r.changed(),
                    if r.lifetime > 0 {
                        ", lifetimes over"
                    } else {
                        ""
                    }
                )
            }
            (Op::DeadRequeue { key, now }, Out::Requeue(r)) => {
                let kk = keys[*key];
                let want = m.dead_requeue(&kk, *now);
                match (r, want) {
                    (Ok(info), Ok(())) => {
                        let j = &m.queued[&kk];
                        ensure!(
                            sans_nonce(&info) == sans_nonce(&m.info(&kk).unwrap())
                                && pj_info(&info) == j.pj()
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
                    .dead_views()
                    .into_iter()
                    .skip(*offset)
                    .take(*limit)
                    .collect();
                ensure!(got == want, "dead_list: got {got:?}, model {want:?}");
                "dead_list".into()
            }
            (Op::SetPolicy(p), Out::None) => {
                self.policy = *p;
                "set policy".into()
            }
            (Op::Gate { gate, op }, out) => {
                let g = GATES[*gate];
                let n = m.order.held_keys(g).len().min(3);
                let closed = m.order.gates.contains(g);
                match (op, out) {
                    (GateOp::Close, Out::GateClose(r)) => {
                        let want = m.order.close_gate(g);
                        ensure!(r == Ok(want), "close_gate: {r:?}, model says {want}");
                        format!("gate close: was open {want}")
                    }
                    (GateOp::Open, Out::GateOpen(r)) => {
                        let want = m.order.open_gate(g);
                        ensure!(r == Ok(want), "open_gate: {r:?}, model says {want}");
                        format!("gate open: closed {closed}, released {n}")
                    }
                    (GateOp::Drop, Out::GateDrop(r)) => {
                        let want = m.drop_gate(g);
                        ensure!(
                            r == Ok(want.clone()),
                            "drop_gate: {r:?}, model says {want:?}"
                        );
                        format!("gate drop: closed {closed}, dropped {n}")
                    }
                    (op, out) => return err(format!("harness: {op:?} answered {out:?}")),
                }
            }
            (Op::SetSettings(s), Out::Settings(r)) => {
                ensure!(r.is_ok(), "set_settings({s:?}) failed: {r:?}");
                m.set_settings(*s);
                format!(
                    "settings: lifetime {}, cap {}, autodelay {}",
                    s.lifetime > 0,
                    s.max_running,
                    s.autodelay.window > 0
                )
            }
            (op, out) => return err(format!("harness: {op:?} answered {out:?}")),
        };
        Ok(label)
    }
}

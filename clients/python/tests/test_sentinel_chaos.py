"""Chaos under Sentinel: one master, two replicas and three Sentinels; a producer enqueues
steadily and two workers ack, all through ``Sentinel.master_for``; the master is SIGKILLed
mid-run and Sentinel promotes a replica.

With durable writes (``wait_replicas=1``) nothing acknowledged is lost: every enqueue that
returned is completed in the end, no job runs again after an ACK that returned confirmed, no
job is ever run by two deliveries at once, ``ORCA.CHECK`` is OK on the new master and the
replicas agree with it (``DEBUG DIGEST-VALUE``). The same run without durable writes reports
what it lost (printed, not asserted: a failover may lose unreplicated writes, and how many
depends on timing). Figures: docs/operations.md.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis
from deploy import SentinelSet, wait_link_up, wait_until

from orca_queue import Job, NotReplicatedError, Queue, Worker

NAME = "chaos"
RUN_S = 5.0  # the producer's run
KILL_AT_S = 2.0  # the master is killed this far into it
LEASE_MS = 8000  # above the failover time: a lease replicated before the kill is still held


@dataclass
class Record:
    """What the clients saw: acknowledged enqueues, handler runs, confirmed completions."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    enqueued: dict[str, float] = field(default_factory=dict)  # orca key -> when acknowledged
    # (key, lease, start, end) of every handler run
    runs: list[tuple[str, str, float, float]] = field(default_factory=list)
    completed: dict[tuple[str, str], float] = field(default_factory=dict)  # (key, lease) -> when
    unconfirmed: set[str] = field(default_factory=set)  # keys named in "not confirmed" warnings
    first_ok_after_kill: float = 0.0
    kill_at: float = 0.0
    enqueue_errors: int = 0


class Unconfirmed(logging.Handler):
    """Collects the orca keys of finishes the worker logged as not confirmed by replicas."""

    def __init__(self, rec: Record) -> None:
        super().__init__(logging.WARNING)
        self.rec = rec

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "not confirmed" in text or "could not wait" in text:
            with self.rec.lock:
                self.rec.unconfirmed.update(w.strip(",") for w in text.split() if len(w) >= 44)


def master_client(dep: SentinelSet) -> redis.Redis:
    sentinel = redis.Sentinel(dep.addresses, socket_timeout=2)  # type: ignore[no-untyped-call]
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        dep.name, socket_timeout=5, socket_connect_timeout=1
    )
    return client


def producer(dep: SentinelSet, wait: int, rec: Record, stop: threading.Event) -> None:
    q = Queue(master_client(dep), NAME, wait_replicas=wait, wait_timeout_ms=2000)
    rng = random.Random(11)
    i = 0
    t_end = time.monotonic() + RUN_S
    while time.monotonic() < t_end and not stop.is_set():
        # Every 15th job runs long, across the failover; the others briefly.
        config = {"key": f"job-{i}", "sleep_ms": 2000 if i % 15 == 0 else rng.randint(5, 30)}
        while not stop.is_set():  # an enqueue is a PUT: sent again until acknowledged
            try:
                job = q.enqueue(config)
            except (redis.ConnectionError, redis.TimeoutError, NotReplicatedError,
                    redis.ReadOnlyError):
                rec.enqueue_errors += 1
                time.sleep(0.05)
                continue
            now = time.monotonic()
            with rec.lock:
                rec.enqueued[job.key] = now
                if rec.kill_at and not rec.first_ok_after_kill:
                    rec.first_ok_after_kill = now
            break
        i += 1
        time.sleep(0.004)


def run_chaos(wait: int) -> tuple[Record, dict[str, Any], SentinelSet]:
    dep = SentinelSet(NAME)
    rec = Record()
    log = logging.getLogger(f"orca_queue.test.chaos{wait}")
    log.addHandler(Unconfirmed(rec))
    stop = threading.Event()

    def handler(job: Job) -> dict[str, Any]:
        start = time.monotonic()
        time.sleep(job.config["sleep_ms"] / 1000)
        with rec.lock:
            rec.runs.append((job.key, job.lease or "", start, time.monotonic()))
        return {"lease": job.lease}

    def completed(job: Job, result: Any) -> None:
        with rec.lock:
            rec.completed[(job.key, job.lease or "")] = time.monotonic()

    workers = [
        Worker(
            Queue(master_client(dep), NAME, wait_replicas=wait, wait_timeout_ms=2000),
            handler,
            concurrency=4,
            lease_ms=LEASE_MS,
            block_ms=1000,
            grace_ms=5000,
            handle_signals=False,
            on_completed=completed,
            logger=log,
        )
        for _ in range(2)
    ]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    prod = threading.Thread(target=producer, args=(dep, wait, rec, stop), daemon=True)
    try:
        for t in [*threads, prod]:
            t.start()
        time.sleep(KILL_AT_S)
        old = dep.master
        rec.kill_at = time.monotonic()
        old.kill()
        prod.join(RUN_S + 60)
        new = dep.current_master()
        wait_until("Sentinel to promote a replica", lambda: dep.current_master() is not old, 30)
        new = dep.current_master()
        q = Queue(new.client(), NAME)
        # Drained: what the workers could not ack comes back when its lease expires.
        def drained() -> bool:
            s = q.stats()
            return s.queued == s.leased == s.delayed == 0

        wait_until("the queue to drain", drained, LEASE_MS / 1000 * 3 + 30)
    finally:
        stop.set()
        for w in workers:
            w.stop(now=True)
        for t in threads:
            t.join(15)
    counts = [w.counts for w in workers]
    return rec, {"counts": counts, "new": new, "old": old}, dep


def overlaps(rec: Record) -> list[str]:
    by_key: dict[str, list[tuple[float, float]]] = {}
    for key, _, start, end in rec.runs:
        by_key.setdefault(key, []).append((start, end))
    bad = []
    for key, spans in by_key.items():
        spans.sort()
        bad += [key for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    return bad


def rerun_after_ack(rec: Record) -> list[str]:
    """Jobs run again after a completion the worker reported confirmed."""
    acked: dict[str, float] = {}
    for (key, _), when in rec.completed.items():
        if key not in rec.unconfirmed:
            acked[key] = min(when, acked.get(key, when))
    return [key for key, _, start, _ in rec.runs if key in acked and start > acked[key]]


def lost_enqueues(rec: Record, q: Queue) -> list[str]:
    return [k for k in rec.enqueued if q.result(k) is None and q.status(k) is None]


def summary(rec: Record, q: Queue, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "acknowledged_enqueues": len(rec.enqueued),
        "enqueue_errors_retried": rec.enqueue_errors,
        "handler_runs": len(rec.runs),
        "completions_reported": len(rec.completed),
        "unconfirmed_finishes": len(rec.unconfirmed),
        "lost_enqueues": len(lost_enqueues(rec, q)),
        "reruns_after_confirmed_ack": len(rerun_after_ack(rec)),
        "concurrent_runs": len(overlaps(rec)),
        "producer_recovery_s": round(rec.first_ok_after_kill - rec.kill_at, 2)
        if rec.first_ok_after_kill
        else None,
        "worker_counts": extra["counts"],
    }


def report(name: str, data: dict[str, Any]) -> None:
    text = json.dumps(data, default=str)
    print(f"\n{name}: {text}")
    out = os.environ.get("ORCA_CHAOS_REPORT")
    if out:
        with open(out, "a") as f:
            f.write(f"{name}: {text}\n")


def test_sentinel_failover_loses_no_acknowledged_write() -> None:
    rec, extra, dep = run_chaos(wait=1)
    try:
        new = extra["new"]
        q = Queue(new.client(), NAME)
        data = summary(rec, q, extra)
        report("durable (wait_replicas=1)", data)
        # Work before and after the kill (counts depend on the machine's load).
        assert len(rec.enqueued) > 50 and rec.first_ok_after_kill > rec.kill_at, data
        assert lost_enqueues(rec, q) == [], data
        assert rerun_after_ack(rec) == [], data
        assert overlaps(rec) == [], data
        q.check()
        # Every job ran and has its result; the replicas agree with the new master.
        assert all(q.result(k) is not None for k in rec.enqueued)
        digest = new.client().execute_command("DEBUG", "DIGEST-VALUE", NAME)
        for node in dep.nodes():
            if node is extra["old"] or node is new:
                continue
            # Sentinel moves the other replicas over within failover-timeout
            # (10 s) after the failover; give a loaded machine room.
            wait_link_up(node, timeout=60.0)
            c = node.client()
            wait_until(
                f"replica {node.port} to agree",
                lambda c=c: c.execute_command("DEBUG", "DIGEST-VALUE", NAME) == digest,  # type: ignore[misc]
                15,
            )
    finally:
        dep.close()


def test_sentinel_failover_without_durable_writes_reports_losses() -> None:
    rec, extra, dep = run_chaos(wait=0)
    try:
        q = Queue(extra["new"].client(), NAME)
        report("not durable (wait_replicas=0)", summary(rec, q, extra))
        q.check()
    finally:
        dep.close()

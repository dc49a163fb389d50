"""The thread worker with ACK ... NEXT and ORCA.MPOP, on servers of their own so that
INFO commandstats counts exactly this worker's commands."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
from conftest import Server, cfg
from workers import Commands, Running, calls, start, wait_for

from orca_queue import Job, Queue

JOBS = 120


@pytest.fixture
def own() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


def run_all(own: Server, started: list[Running], **options: object) -> Queue:
    """Processes JOBS jobs with a worker of concurrency 4; returns the queue."""
    r = own.client()
    q = Queue(r, "cycle")
    q.enqueue_many([cfg(f"k{i}") for i in range(JOBS)])
    r.config_resetstat()
    run = start(started, q, lambda job: {"ok": job.config["key"]}, concurrency=4, **options)
    wait_for(lambda: run.worker.counts["completed"] == JOBS)
    run.stop()
    return q


def test_a_busy_worker_acks_in_batches(own: Server, started: list[Running]) -> None:
    q = run_all(own, started, lease_ms=60_000)
    r = own.client()
    macks, pops = calls(r, "orca.mack"), calls(r, "orca.pop")
    # The successes that finished while a MACK was on the wire go in the next one, whose
    # reply brings their slots' next jobs: fewer commands than jobs, a handful of pops.
    assert calls(r, "orca.ack") == 0
    assert macks < JOBS, f"{macks} ORCA.MACK for {JOBS} jobs"
    assert pops <= 6, f"{pops} ORCA.POP for {JOBS} jobs"
    assert calls(r, "orca.nack") == calls(r, "orca.extend") == 0
    st = q.stats()
    assert (st.queued, st.leased, st.results) == (0, 0, JOBS)


def test_at_a_trickle_about_one_command_per_job(own: Server, started: list[Running]) -> None:
    """Jobs arriving one at a time: each finish acks its job and waits for the next in one
    command (ORCA.MACK ... NEXT ... BLOCK), with no empty pops in between."""
    r = own.client()
    q = Queue(r, "trickle")
    seen: list[float] = []
    run = start(started, q, lambda job: seen.append(time.monotonic()), concurrency=4)
    time.sleep(0.5)  # blocked in its pop
    commands = Commands(own.port)
    sent: list[float] = []
    for i in range(30):
        sent.append(time.monotonic())
        q.enqueue(cfg(f"t{i}"))
        time.sleep(0.03)
    wait_for(lambda: run.worker.counts["completed"] == 30)
    worker = {
        k: n for k, n in commands.stop().items() if k.startswith("orca.") and k != "orca.enqueue"
    }
    # One per job (+ the wait armed at the end); a POP + an ACK per job would be 60. A few
    # more on a loaded machine: a finish that comes after the fetcher stopped waiting for it.
    assert sum(worker.values()) <= 40, worker
    assert max(s - e for s, e in zip(seen, sent, strict=True)) < 1.0
    run.stop()
    assert run.worker.counts["completed"] == 30


def test_from_a_trickle_to_a_burst_and_back(own: Server, started: list[Running]) -> None:
    """As the asyncio Worker's test: trickle, burst, trickle; every job once, none left."""
    r = own.client()
    q = Queue(r, "burst")
    seen: list[str] = []
    lock = threading.Lock()

    def handler(job: Job) -> None:
        with lock:
            seen.append(job.config["key"])
            n = len(seen)
        time.sleep(0.001 if n % 7 else 0.02)

    run = start(started, q, handler, concurrency=4, lease_ms=60_000)
    for rnd in range(2):
        for i in range(6):
            q.enqueue(cfg(f"t{rnd}-{i}"))
            time.sleep(0.03)
        q.enqueue_many([cfg(f"b{rnd}-{i}") for i in range(150)])
    wait_for(lambda: run.worker.counts["completed"] == 312, timeout=30)
    run.stop()
    assert sorted(seen) == sorted(
        [f"t{r}-{i}" for r in range(2) for i in range(6)]
        + [f"b{r}-{i}" for r in range(2) for i in range(150)]
    )
    st = q.stats()
    assert (st.queued, st.leased) == (0, 0)


def test_without_ack_next_free_slots_are_refilled_by_pops(
    own: Server, started: list[Running]
) -> None:
    run_all(own, started, lease_ms=60_000, ack_next=False)
    r = own.client()
    assert calls(r, "orca.ack") == JOBS
    assert calls(r, "orca.pop") > JOBS // 4  # the same workload, a pop per freed slot or so


def test_several_queues_in_order_and_woken_by_any(
    own: Server, started: list[Running], caplog: pytest.LogCaptureFixture
) -> None:
    # The user's client has a short socket timeout: the blocking MPOP (BLOCK 30 s) runs on
    # the worker's own connection and never races it.
    r = own.client(socket_timeout=1.0)
    qa, qb, qc = (Queue(r, f"{{grading}}:{x}") for x in "abc")
    for i in range(3):
        qb.enqueue(cfg(f"b{i}", priority=i))
    for i in range(3):
        qa.enqueue(cfg(f"a{i}", priority=i))
    seen: list[str] = []

    def handler(job: Job) -> None:
        seen.append(job.config["key"])
        if job.config["key"] == "b0":
            qa.enqueue(cfg("a-late"))  # arrives in the first queue while b0 runs

    caplog.set_level(logging.WARNING, logger="orca_queue.worker")
    start(started, [qa, qb, qc], handler, concurrency=1, block_ms=30_000)
    wait_for(lambda: len(seen) == 7)
    assert seen == ["a0", "a1", "a2", "b0", "a-late", "b1", "b2"]
    time.sleep(0.3)  # now blocked in one ORCA.MPOP over the three queues
    admin = own.client()
    admin.config_resetstat()
    time.sleep(1.5)  # idle: no polling, no rotation
    assert calls(admin, "orca.pop") == 0 and calls(admin, "orca.mpop") == 0
    t0 = time.monotonic()
    qc.enqueue(cfg("c0"))  # the last queue wakes it
    wait_for(lambda: len(seen) == 8)
    assert seen[-1] == "c0" and time.monotonic() - t0 < 1.0
    time.sleep(0.2)
    qb.enqueue(cfg("b-late"))
    wait_for(lambda: len(seen) == 9)
    assert not [r for r in caplog.records if "fetching jobs failed" in r.getMessage()]


def test_a_job_leased_by_next_during_shutdown_is_handed_back(
    own: Server, started: list[Running]
) -> None:
    r = own.client()
    q = Queue(r, "stopping")
    first = q.enqueue(cfg("first")).key
    second = q.enqueue(cfg("second", priority=10)).key
    created = q.status(second).created_at  # type: ignore[union-attr]
    began, release = threading.Event(), threading.Event()
    handled: list[str] = []

    def handler(job: Job) -> str:
        handled.append(job.key)
        began.set()
        release.wait(20)
        return "done"

    run = start(started, q, handler, concurrency=1, lease_ms=60_000, grace_ms=10_000)
    assert began.wait(10)
    r.config_resetstat()
    popped = int(r.info("orca")["orca_popped"])
    # Hold write commands at the server: the finish's MACK ... NEXT waits there while the
    # worker is told to stop, and its reply then leases "second" to a stopping worker.
    r.client_pause(1500, all=False)
    release.set()
    time.sleep(0.4)
    run.worker.stop()
    run.thread.join(15)
    assert not run.thread.is_alive()
    assert handled == [first]  # never started
    assert q.result(first) == b'"done"'
    st = q.status(second)
    assert st is not None and (st.state, st.immediate, st.created_at) == ("queued", True, created)
    assert st.leases == []  # its lease was superseded by the hand-back
    # It was leased once more, by the MACK ... NEXT (no pop ran), then handed back.
    assert int(r.info("orca")["orca_popped"]) == popped + 1
    assert calls(r, "orca.mack") == 1 and calls(r, "orca.pop") == 0
    assert run.worker.counts == {"completed": 1, "failed": 0, "lost": 0, "handed_back": 1}


def test_failures_report_their_outcome_and_refill_the_slot(
    own: Server, started: list[Running]
) -> None:
    r = own.client()
    q = Queue(r, "failing")
    for i in range(10):
        q.enqueue(cfg(f"f{i}", priority=i))
    outcomes: list[str] = []

    def handler(job: Job) -> None:
        raise RuntimeError("broken grader")

    r.config_resetstat()
    run = start(
        started,
        q,
        handler,
        concurrency=1,
        nack_delay_ms=600_000,
        on_failed=lambda job, exc, out: outcomes.append(out.outcome if out else "?"),
    )
    wait_for(lambda: len(outcomes) == 10)
    run.stop()
    # Each NACK (whose outcome the hook gets) went with the pop of the slot's next job:
    # one pop to start, ten with the NACKs, at most two once the queue ran dry (a quick
    # one, and the blocking one the stop ended).
    assert outcomes == ["retry"] * 10
    assert calls(r, "orca.nack") == 10 and 11 <= calls(r, "orca.pop") <= 13
    assert q.stats().delayed == 10


def test_a_worker_never_holds_more_jobs_than_slots(own: Server, started: list[Running]) -> None:
    r = own.client()
    q = Queue(r, "slots")
    q.enqueue_many([cfg(f"s{i}") for i in range(40)])
    run = start(started, q, lambda job: time.sleep(0.01), concurrency=3, lease_ms=60_000)
    most = 0
    while run.worker.counts["completed"] < 40:
        most = max(most, q.stats().leased)
        time.sleep(0.005)
    run.stop()
    assert 1 <= most <= 3

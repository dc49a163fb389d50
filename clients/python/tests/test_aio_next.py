"""The asyncio API's new commands and the asyncio worker with ACK ... NEXT and ORCA.MPOP,
on servers of their own (INFO commandstats counts exactly this worker's commands)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from conftest import Server, cfg
from workers import Commands

from orca_queue import Job, JobNotQueuedError, NackOutcome, ResultTooLargeError
from orca_queue.aio import Queue, Worker, mpop, mpop_many
from orca_queue.keys import config_orca_key


@pytest.fixture
async def own() -> AsyncIterator[tuple[Server, redis.asyncio.Redis]]:
    s = Server()
    c = redis.asyncio.Redis(port=s.port, protocol=3)
    yield s, c
    await c.aclose()
    s.stop()


async def calls(c: redis.asyncio.Redis, command: str) -> int:
    stats = (await c.info("commandstats")).get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0))


async def until(cond: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def make(queue: Queue | list[Queue], handler: Any, **kw: Any) -> tuple[Worker, asyncio.Task[None]]:
    w = Worker(queue, handler, handle_signals=False, **kw)
    return w, asyncio.create_task(w.run())


async def test_queue_next_mpop_gates_settings(own: tuple[Server, redis.asyncio.Redis]) -> None:
    _, c = own
    qa, qb = Queue(c, "a"), Queue(c, "b")
    await qb.enqueue(cfg("b1"))
    await qb.enqueue(cfg("b2", priority=5))
    job = await mpop([qa, qb], lease_ms=60_000)
    assert job is not None and job.queue == "b"
    nxt = await qb.ack_next(job, result="ok", lease_ms=60_000)
    assert nxt is not None and nxt.config["key"] == "b2" and nxt.queue == "b"
    assert await qb.nack_next(nxt, delay_ms=60_000) is None
    assert await mpop_many([qa, qb], 3) == []
    assert await qa.close_gate("img")
    held = await qa.enqueue(cfg("h", gate="img"))
    assert held.state == "held"
    with pytest.raises(JobNotQueuedError):
        await qa.release(held.key)
    assert [j.key async for j in qa.list(state="held", gate="img")] == [held.key]
    assert (await qa.stats()).gates == {"img": 1}
    assert await qa.drop_gate("img") == [cfg("h", gate="img")]
    s = await qa.settings(max_running=3, lifetime_ms=1000, autodelay=(1000, 10))
    assert (s.max_running, s.lifetime_ms, s.autodelay.step_ms) == (3, 1000, 10)
    assert await qa.open_gate("img") == 0


async def test_worker_acks_slots_finishing_together_in_one_command(
    own: tuple[Server, redis.asyncio.Redis],
) -> None:
    """Slots that finish in one event-loop iteration share one ORCA.MACK ... NEXT (at most
    half the slots each), whose reply refills them: no ACK, few pops."""
    _, c = own
    q = Queue(c, "cycle")
    await q.enqueue_many([cfg(f"k{i}") for i in range(100)])
    await c.config_resetstat()

    async def handler(job: Job) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"k": job.config["key"]}

    w, task = make(q, handler, concurrency=8, lease_ms=60_000)
    await until(lambda: w.counts["completed"] == 100)
    await w.close()
    await task
    assert await calls(c, "orca.ack") == 0
    assert 25 <= await calls(c, "orca.mack") <= 50  # batches of 2-4 (half of 8 slots)
    assert await calls(c, "orca.pop") <= 6
    for i in (0, 57, 99):
        assert await q.result(config_orca_key(cfg(f"k{i}"))) == f'{{"k":"k{i}"}}'.encode()


async def test_worker_at_a_trickle_sends_about_one_command_per_job(
    own: tuple[Server, redis.asyncio.Redis],
) -> None:
    """Jobs arriving one at a time: each finish acks its job and waits for the next in one
    command (ORCA.MACK ... NEXT ... BLOCK), with no empty pops in between."""
    s, c = own
    q = Queue(c, "trickle")
    seen: list[float] = []

    async def handler(job: Job) -> None:
        seen.append(time.monotonic())

    w, task = make(q, handler, concurrency=4, lease_ms=60_000)
    await asyncio.sleep(0.5)  # blocked in its pop
    commands = await asyncio.to_thread(Commands, s.port)
    sent: list[float] = []
    for i in range(30):
        sent.append(time.monotonic())
        await q.enqueue(cfg(f"t{i}"))
        await asyncio.sleep(0.03)
    await until(lambda: w.counts["completed"] == 30)
    worker = {
        k: n
        for k, n in (await asyncio.to_thread(commands.stop)).items()
        if k.startswith("orca.") and k != "orca.enqueue"
    }
    # One per job (+ the wait armed at the end); a POP + an ACK per job would be 60. A few
    # more on a loaded machine: a finish that comes after the fetcher stopped waiting for it.
    assert sum(worker.values()) <= 40, worker
    assert worker.get("orca.ack", 0) == 0, worker
    assert max(s - e for s, e in zip(seen, sent, strict=True)) < 1.0
    await w.close()
    await task
    assert w.counts["completed"] == 30


async def test_worker_from_a_trickle_to_a_burst_and_back(
    own: tuple[Server, redis.asyncio.Redis],
) -> None:
    """The worker waits for work inside its finishes at a trickle, then a burst fills every
    slot (the wait brings a full batch, the worker polls again), then a trickle again: every
    job runs once, none is left leased."""
    _, c = own
    q = Queue(c, "burst")
    seen: list[str] = []

    async def handler(job: Job) -> None:
        seen.append(job.config["key"])
        await asyncio.sleep(0.001 if len(seen) % 7 else 0.02)

    w, task = make(q, handler, concurrency=4, lease_ms=60_000)
    for rnd in range(2):
        for i in range(6):
            await q.enqueue(cfg(f"t{rnd}-{i}"))
            await asyncio.sleep(0.03)
        await q.enqueue_many([cfg(f"b{rnd}-{i}") for i in range(150)])
    await until(lambda: w.counts["completed"] == 312, timeout=30)
    await w.close()
    await task
    assert sorted(seen) == sorted(
        [f"t{r}-{i}" for r in range(2) for i in range(6)]
        + [f"b{r}-{i}" for r in range(2) for i in range(150)]
    )
    st = await q.stats()
    assert (st.queued, st.leased, st.results) == (0, 0, 0)


async def test_worker_serves_queues_in_order_with_mpop(
    own: tuple[Server, redis.asyncio.Redis],
) -> None:
    _, c = own
    qa, qb = Queue(c, "{g}:a"), Queue(c, "{g}:b")
    for i in range(2):
        await qb.enqueue(cfg(f"b{i}", priority=i))
        await qa.enqueue(cfg(f"a{i}", priority=i))
    seen: list[str] = []
    w, task = make([qa, qb], lambda job: seen.append(job.config["key"]), block_ms=30_000)
    await until(lambda: len(seen) == 4)
    assert seen == ["a0", "a1", "b0", "b1"]
    await asyncio.sleep(0.3)
    await c.config_resetstat()
    await asyncio.sleep(1.0)
    assert await calls(c, "orca.mpop") == 0 and await calls(c, "orca.pop") == 0  # blocked
    t0 = time.monotonic()
    await qb.enqueue(cfg("b-late"))
    await until(lambda: len(seen) == 5)
    assert time.monotonic() - t0 < 1.0
    await w.close()
    await task


async def test_next_job_during_shutdown_is_handed_back(
    own: tuple[Server, redis.asyncio.Redis],
) -> None:
    _, c = own
    q = Queue(c, "stopping")
    first = (await q.enqueue(cfg("first"))).key
    second = (await q.enqueue(cfg("second", priority=10))).key
    began, release = asyncio.Event(), asyncio.Event()
    handled: list[str] = []

    async def handler(job: Job) -> str:
        handled.append(job.key)
        began.set()
        await release.wait()
        return "done"

    w, task = make(q, handler, lease_ms=60_000, grace_ms=10_000)
    await asyncio.wait_for(began.wait(), 10)
    await c.client_pause(1500, all=False)  # the ACK ... NEXT waits at the server
    release.set()
    await asyncio.sleep(0.4)
    await w.close()
    await task
    assert handled == [first]
    st = await q.status(second)
    assert st is not None and (st.state, st.immediate, st.leases) == ("queued", True, [])
    assert w.counts["handed_back"] == 1 and w.counts["completed"] == 1
    assert await q.result(first) == b'"done"'


@pytest.mark.parametrize("shape", ["ack-next", "plain-ack", "second-queue"])
async def test_result_over_the_payload_limit_is_a_failure(
    shape: str, own: tuple[Server, redis.asyncio.Redis]
) -> None:
    """An ACK refused for a result over orca.max-payload-bytes NACKs the delivery (on_failed
    with the server's error), and the worker goes on taking jobs."""
    _, c = own
    await c.config_set("orca.max-payload-bytes", 1000)
    q, other = Queue(c, "big"), Queue(c, "first")
    big = (await q.enqueue(cfg("big"))).key
    small = (await q.enqueue(cfg("small", priority=10))).key
    failed: list[tuple[str, BaseException, NackOutcome | None]] = []

    async def handler(job: Job) -> str:
        return "x" * 5000 if job.config["key"] == "big" else "ok"

    w, task = make(
        [other, q] if shape == "second-queue" else q,
        handler,
        lease_ms=60_000,
        nack_delay_ms=60_000,
        ack_next=shape != "plain-ack",
        on_failed=lambda job, exc, out: failed.append((job.key, exc, out)),
    )
    await until(lambda: bool(failed) and w.counts["completed"] == 1, timeout=5)
    await w.close()
    await task
    key, exc, out = failed[0]
    assert key == big and isinstance(exc, ResultTooLargeError)
    assert out is not None and out.outcome == "retry"
    st = await q.status(big)
    assert st is not None and st.state == "delayed"
    assert await q.result(small) == b'"ok"'
    assert w.counts == {"completed": 1, "failed": 1, "lost": 0, "handed_back": 0}


async def test_ack_many(own: tuple[Server, redis.asyncio.Redis]) -> None:
    _, c = own
    q = Queue(c, "batch")
    for i in range(5):
        await q.enqueue(cfg(f"b{i}", priority=i))
    jobs = await q.pop_many(3, lease_ms=60_000)
    await q.ack(jobs[1])
    got = await q.ack_many(jobs, [None, None, {"ok": True}], next=True)
    assert [o is None for o in got.outcomes] == [True, False, True]
    assert len(got.jobs) == 2  # one per delivery given, as many as there are
    assert await q.result(jobs[2].key) == b'{"ok":true}'
    assert await q.result(jobs[0].key) is None
    st = await q.stats()
    assert (st.queued, st.leased) == (0, 2)

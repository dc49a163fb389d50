"""The asyncio API against a real server, under RESP2 and RESP3."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from conftest import Server, cfg

from orca_queue import BadConfigError, Job, LeaseLostError, NoSuchJobError, orca_key
from orca_queue.aio import Queue, Worker


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
async def ar(server: Server, request: pytest.FixtureRequest) -> AsyncIterator[redis.asyncio.Redis]:
    c = redis.asyncio.Redis(port=server.port, protocol=request.param)
    yield c
    await c.aclose()


async def until(cond: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not (await cond() if asyncio.iscoroutinefunction(cond) else cond()):
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_queue_commands(ar: redis.asyncio.Redis, qname: str) -> None:
    q = Queue(ar, qname)
    a = await q.enqueue(cfg("a", collation={"type": "user", "id": "1"}, priority=5))
    assert a.key == orca_key("a", "http://cb/a") and a.created
    b = await q.immediate(cfg("b"))
    assert [j.key async for j in q.list(page_size=1)] == [b.key, a.key]
    await q.release(a.key)
    assert (await q.status(a.key) or Job("")).position == 1
    out = await q.enqueue_many([cfg("c"), "{"])
    assert isinstance(out[0], Job) and isinstance(out[1], BadConfigError)
    assert await q.len() == 3
    job = await q.pop(lease_ms=60000)
    assert job is not None and job.key == a.key and job.config["key"] == "a"
    assert await q.extend(job, ms=5000) > 0
    await q.ack(job, result=[1, 2])
    assert json.loads(await q.result(a.key) or b"") == [1, 2]
    with pytest.raises(LeaseLostError):
        await q.nack(job)
    jobs = await q.pop_many(5, lease_ms=60000)
    assert len(jobs) == 2
    assert (await q.nack(jobs[0], delay_ms=0)).outcome == "retry"
    st = await q.stats()
    assert (st.queued, st.leased) == (1, 1)
    assert (await q.settings()).jobs == 1
    assert (await q.tick()).died == 0
    await q.check()
    assert await q.delete(jobs[0].key)
    with pytest.raises(NoSuchJobError):
        await q.requeue_dead(jobs[0].key)
    assert [j async for j in q.iter_dead()] == [] and await q.dead() == []
    assert await q.purge_dead() == 0


def make(queue: Queue, handler: Any, **kw: Any) -> tuple[Worker, asyncio.Task[None]]:
    w = Worker(queue, handler, handle_signals=False, **kw)
    return w, asyncio.create_task(w.run())


async def test_worker_acks_nacks_and_async_handlers(ar: redis.asyncio.Redis, qname: str) -> None:
    q = Queue(ar, qname)
    keys = [(await q.enqueue(cfg(f"k{i}", n=i))).key for i in range(30)]
    failed: list[str] = []

    async def handler(job: Job) -> Any:
        await asyncio.sleep(0.01)
        if job.config["n"] == 7 and job.attempt == 1:
            raise ValueError("bad input")
        return {"n": job.config["n"]}

    w, task = make(
        q,
        handler,
        concurrency=8,
        nack_delay_ms=0,
        on_failed=lambda job, exc, out: failed.append(f"{exc}/{out.outcome if out else None}"),
    )

    async def all_done() -> bool:
        return all([await q.result(k) is not None for k in keys])

    await until(all_done)
    await w.close()
    await task
    assert failed == ["bad input/retry"]
    assert w.counts["completed"] == 30
    assert json.loads(await q.result(keys[7]) or b"") == {"n": 7}


async def test_sync_handler_runs_in_a_thread(ar: redis.asyncio.Redis, qname: str) -> None:
    q = Queue(ar, qname)
    key = (await q.enqueue(cfg("t"))).key

    def handler(job: Job) -> str:
        time.sleep(0.2)  # would block the loop if not in a thread
        return "threaded"

    w, task = make(q, handler)
    await until(lambda: w.counts["completed"] == 1)
    await w.close()
    await task
    assert await q.result(key) == b'"threaded"'


async def test_worker_heartbeats_and_lost_lease(ar: redis.asyncio.Redis, qname: str) -> None:
    q = Queue(ar, qname)
    long_key = (await q.enqueue(cfg("long"))).key
    doomed = (await q.enqueue(cfg("doomed"))).key
    lost: list[str] = []
    calls: list[str] = []

    async def handler(job: Job) -> str:
        calls.append(job.key)
        await asyncio.sleep(2.5)  # longer than the 1 s lease
        return "done"

    w, task = make(
        q, handler, concurrency=2, lease_ms=1000, on_lost=lambda job, why: lost.append(why)
    )
    await until(lambda: len(calls) == 2)
    await q.delete(doomed)
    await until(lambda: lost == ["job was cancelled"])
    await until(lambda: w.counts["completed"] == 1, timeout=10)
    await w.close()
    await task
    assert sorted(calls) == sorted([long_key, doomed])  # each handed out once
    assert await q.result(long_key) == b'"done"' and await q.result(doomed) is None


async def test_worker_stop_hands_back_and_wakes_at_once(
    ar: redis.asyncio.Redis, qname: str
) -> None:
    q = Queue(ar, qname)
    w, task = make(q, lambda job: None, block_ms=30000)
    await asyncio.sleep(0.4)  # blocked in ORCA.POP ... BLOCK 30000
    t0 = time.monotonic()
    await w.close()
    await task
    assert time.monotonic() - t0 < 2

    slow = (await q.enqueue(cfg("slow"))).key
    created = (await q.status(slow) or Job("")).created_at
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def handler(job: Job) -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    w, task = make(q, handler, grace_ms=200)
    await asyncio.wait_for(started.wait(), 10)
    await w.close()
    await task
    st = await q.status(slow)
    assert st is not None and st.state == "queued" and st.immediate and st.created_at == created
    assert cancelled == [True] and w.counts["handed_back"] == 1

"""The asyncio API against a real server, under RESP2 and RESP3."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
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
    # A priority far above the time the next command can take on a loaded machine: the
    # immediate job must come first.
    a = await q.enqueue(cfg("a", collation={"type": "user", "id": "1"}, priority=60000))
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


@pytest.mark.parametrize("protocol", [2, 3])
async def test_result_is_bytes_even_with_decode_responses(
    server: Server, qname: str, protocol: int
) -> None:
    c = redis.asyncio.Redis(port=server.port, protocol=protocol, decode_responses=True)
    q = Queue(c, qname)
    await q.enqueue(cfg("bin"))
    job = await q.pop(lease_ms=10000)
    assert job is not None
    await q.ack(job, result=b"\xff\x00\xfe")
    assert await q.result(job.key) == b"\xff\x00\xfe"
    assert await q.result("no-such-key") is None
    await c.aclose()


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


async def blocked_pop_id(ar: redis.asyncio.Redis, w: Worker) -> int:
    """The client id of ``w``'s blocking connection once its ORCA.POP blocks (waits)."""
    for _ in range(500):
        if w._blocker_id is not None:
            for c in await ar.client_list():
                if int(c["id"]) == w._blocker_id and c.get("cmd") == "orca.pop":
                    return w._blocker_id
        await asyncio.sleep(0.02)
    raise AssertionError("the worker's pop never blocked")


async def test_worker_close_is_not_held_up_by_a_slow_unblock(
    ar: redis.asyncio.Redis, qname: str
) -> None:
    """Against a server going away, CLIENT UNBLOCK retries for seconds while the blocking pop
    has already failed: close() goes on as soon as the pop is back."""
    q = Queue(ar, qname)
    w, task = make(q, lambda job: None, block_ms=30000)
    blocked = await blocked_pop_id(ar, w)

    async def slow_unblock() -> None:
        await asyncio.sleep(5)

    w._unblock = slow_unblock  # type: ignore[method-assign]
    t0 = time.monotonic()
    closing = asyncio.create_task(w.close())
    await asyncio.sleep(0.2)
    await ar.client_kill_filter(_id=str(blocked))  # the blocking pop fails, as if the server went
    await closing
    await task
    assert time.monotonic() - t0 < 2


async def test_worker_a_second_stop_or_close_keeps_the_grace(
    ar: redis.asyncio.Redis, qname: str
) -> None:
    """Only a second SIGTERM/SIGINT skips the grace; stop() then close() (or two close()
    calls) let running handlers finish."""

    async def handler(job: Job) -> str:
        await asyncio.sleep(0.5)
        return "ok"

    for how in ("stop-close", "close-close"):
        q = Queue(ar, f"{qname}-{how}")
        for k in range(3):
            await q.enqueue(cfg(f"r{k}"))
        w, task = make(q, handler, concurrency=3, grace_ms=5000)
        await until(lambda w=w: len(w._running) == 3)
        if how == "stop-close":
            w.stop()
            await w.close()
        else:
            await asyncio.gather(w.close(), w.close())
        await task
        assert w.counts["completed"] == 3 and w.counts["handed_back"] == 0, (how, w.counts)


async def test_worker_base_exception_from_a_handler_is_a_failure(
    ar: redis.asyncio.Redis, qname: str
) -> None:
    """A handler raising a BaseException that is not an Exception fails the delivery like any
    exception (on_failed, NACK); the worker goes on."""
    q = Queue(ar, qname)
    odd = (await q.enqueue(cfg("odd"))).key
    fine = (await q.enqueue(cfg("fine", priority=10))).key
    failed: list[BaseException] = []

    async def handler(job: Job) -> str:
        if job.key == odd:
            raise GeneratorExit("odd")
        return "ok"

    w, task = make(
        q, handler, nack_delay_ms=60_000, on_failed=lambda job, exc, out: failed.append(exc)
    )
    await until(lambda: w.counts["completed"] == 1, timeout=5)
    await w.close()
    await task
    assert len(failed) == 1 and isinstance(failed[0], GeneratorExit)
    assert (await q.status(odd) or Job("")).state == "delayed"
    assert await q.result(fine) == b'"ok"'


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is Python 3.11+")
async def test_worker_cancelled_error_inside_a_handler_is_a_failure(
    ar: redis.asyncio.Redis, qname: str
) -> None:
    """A CancelledError raised inside a handler (it awaited a task that was cancelled) while
    its own task is not being cancelled fails the delivery; the slot goes on."""
    q = Queue(ar, qname)
    odd = (await q.enqueue(cfg("odd"))).key
    fine = (await q.enqueue(cfg("fine", priority=10))).key
    failed: list[BaseException] = []

    async def handler(job: Job) -> str:
        if job.key == odd:
            sub = asyncio.create_task(asyncio.sleep(10))
            await asyncio.sleep(0)
            sub.cancel()
            await sub
        return "ok"

    w, task = make(
        q, handler, nack_delay_ms=60_000, on_failed=lambda job, exc, out: failed.append(exc)
    )
    await until(lambda: w.counts["completed"] == 1, timeout=5)
    await w.close()
    await task
    assert len(failed) == 1 and isinstance(failed[0], asyncio.CancelledError)
    assert (await q.status(odd) or Job("")).state == "delayed"
    assert await q.result(fine) == b'"ok"'


@pytest.mark.parametrize(
    ("exc_type", "threaded"), [(SystemExit, False), (KeyboardInterrupt, False), (SystemExit, True)]
)
async def test_worker_system_exit_in_a_handler_stops_gracefully(
    ar: redis.asyncio.Redis, qname: str, exc_type: type[BaseException], threaded: bool
) -> None:
    """SystemExit / KeyboardInterrupt from a handler (async, or plain in a thread): the
    delivery is NACKed as failed, the worker stops as on SIGTERM (the other running job
    finishes within the grace, heartbeats and the event loop carry on), and run() re-raises
    it."""
    q = Queue(ar, qname)
    slow = (await q.enqueue(cfg("slow", priority=0))).key
    leaving = (await q.enqueue(cfg("leaving", priority=5))).key
    later = (await q.enqueue(cfg("later", priority=10))).key
    slow_began, release = threading.Event(), threading.Event()
    failed: list[tuple[str, BaseException]] = []

    def plain(job: Job) -> str:
        if job.key == slow:
            slow_began.set()
            assert release.wait(20)
            return "slow done"
        assert slow_began.wait(20)
        raise exc_type("bye")

    async def handler(job: Job) -> str:
        if job.key == slow:
            slow_began.set()
            while not release.is_set():
                await asyncio.sleep(0.01)
            return "slow done"
        while not slow_began.is_set():
            await asyncio.sleep(0.01)
        raise exc_type("bye")

    w = Worker(
        q,
        plain if threaded else handler,
        concurrency=2,
        lease_ms=1000,  # heartbeats must go on while the slow job finishes
        grace_ms=10_000,
        nack_delay_ms=60_000,
        handle_signals=False,
        on_failed=lambda job, exc, out: failed.append((job.key, exc)),
    )
    raised: list[BaseException] = []

    async def runner() -> None:
        try:
            await w.run()
        except BaseException as e:
            raised.append(e)

    task = asyncio.create_task(runner())
    try:
        await until(lambda: bool(failed), timeout=5)
        assert failed[0][0] == leaving and isinstance(failed[0][1], exc_type)
        await asyncio.sleep(1.5)  # longer than the lease: the slow job's lease is extended
        assert not task.done()  # waiting for the slow job, within the grace
        release.set()
        await asyncio.wait_for(task, 10)
    finally:
        release.set()
        w.stop(now=True)
        await asyncio.wait_for(task, 10)
    assert len(raised) == 1 and isinstance(raised[0], exc_type)
    assert await q.result(slow) == b'"slow done"'
    assert (await q.status(leaving) or Job("")).state == "delayed"
    st = await q.status(later)
    assert st is not None and st.state == "queued" and st.leases == []
    assert w.counts == {"completed": 1, "failed": 1, "lost": 0, "handed_back": 0}

"""Why a job failed and who runs it: ``nack(error=...)`` and ``WORKER`` names on pops
(sync and asyncio), and the Workers sending the handler's exception text and
``host:pid[:name]``, read back through ORCA.STATUS, LIST and DEAD LIST."""

from __future__ import annotations

import asyncio
import os
import socket
import threading

import pytest
import redis
import redis.asyncio
from conftest import Server, cfg
from workers import Running, start, wait_for

from orca_queue import Job, Queue, aio
from orca_queue.protocol import MAX_ERROR_CHARS, error_arg
from orca_queue.runtime import worker_name

HOST = socket.gethostname()


def test_nack_keeps_the_error_and_pops_name_their_worker(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    key = q.enqueue(cfg("sub-1")).key
    job = q.pop(lease_ms=60_000, worker="grader-7")
    assert job is not None and job.key == key
    st = q.status(key)
    assert st is not None and st.state == "leased"
    assert st.worker == "grader-7"
    assert st.started_at is not None and st.started_at > 0
    assert [(x.lease, x.worker) for x in st.leases] == [(job.lease, "grader-7")]
    running = list(q.list(state="LEASED"))
    assert [(j.key, j.worker) for j in running] == [(key, "grader-7")]
    out = q.nack(job, delay_ms=60_000, error="AssertionError: expected 4, got 5")
    assert out.outcome == "retry"
    st = q.status(key)
    assert st is not None and st.state == "delayed"
    assert st.error == "AssertionError: expected 4, got 5"


def test_the_dead_letter_keeps_the_last_error(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    key = q.enqueue(cfg("sub-2")).key
    for i in range(5):
        q.tick()
        job = q.pop(lease_ms=60_000)
        assert job is not None, f"attempt {i + 1}"
        q.nack(job, delay_ms=0, error=f"failure {i + 1}")
    dead = q.dead()
    assert [(j.key, j.error) for j in dead] == [(key, "failure 5")]
    st = q.status(key)
    assert st is not None and (st.state, st.error) == ("dead", "failure 5")


def test_long_errors_are_cut_before_sending() -> None:
    assert error_arg(None) is None
    assert error_arg("short") == "short"
    long = error_arg("x" * (MAX_ERROR_CHARS * 2))
    assert long is not None and len(long) == MAX_ERROR_CHARS and long.endswith("\u2026")


def test_worker_names() -> None:
    assert worker_name() == f"{HOST}:{os.getpid()}"
    assert worker_name("w1") == f"{HOST}:{os.getpid()}:w1"


def test_the_worker_sends_its_name_and_the_exception(
    r: redis.Redis, qname: str, started: list[Running]
) -> None:
    q = Queue(r, qname)
    gate = threading.Event()
    hold = q.enqueue(cfg("slow")).key
    fail = q.enqueue(cfg("bad")).key

    def handler(job: Job) -> str:
        if job.key == fail:
            raise ValueError("test 3 timed out")
        gate.wait(10)
        return "ok"

    start(started, q, handler, concurrency=2, nack_delay_ms=60_000, name="box-2")
    wait_for(lambda: (q.status(fail) or Job(key="")).state == "delayed")
    st = q.status(fail)
    assert st is not None and st.error == "ValueError: test 3 timed out"
    running = q.status(hold)
    assert running is not None and running.state == "leased"
    assert running.worker == f"{HOST}:{os.getpid()}:box-2"
    gate.set()
    wait_for(lambda: q.result(hold) == b'"ok"')


@pytest.mark.parametrize("protocol", [2, 3])
async def test_asyncio_queue_and_worker(server: Server, qname: str, protocol: int) -> None:
    c = redis.asyncio.Redis(port=server.port, protocol=protocol)
    q = aio.Queue(c, qname)
    key = (await q.enqueue(cfg("a1"))).key
    job = await q.pop(lease_ms=60_000, worker="aio-1")
    assert job is not None
    st = await q.status(key)
    assert st is not None and st.worker == "aio-1"
    await q.nack(job, delay_ms=60_000, error="RuntimeError: no output")
    st = await q.status(key)
    assert st is not None and st.error == "RuntimeError: no output"

    bad = (await q.enqueue(cfg("a2"))).key

    async def handler(job: Job) -> None:
        raise KeyError("missing file")

    w = aio.Worker(q, handler, nack_delay_ms=60_000, handle_signals=False, name="aio-box")
    task = asyncio.create_task(w.run())
    for _ in range(500):
        s = await q.status(bad)
        if s is not None and s.state == "delayed":
            break
        await asyncio.sleep(0.02)
    await w.close()
    await task
    s = await q.status(bad)
    assert s is not None and s.error == "KeyError: 'missing file'"
    await c.aclose()

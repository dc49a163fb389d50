"""Hand-offs from the client: ``Queue.ack(..., forward=...)`` and ``Queue.nack(...,
forward=...)`` (sync and asyncio) against a real server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis
from conftest import Server, cfg

from orca_queue import LeaseLostError, Queue
from orca_queue import aio as orca_aio


@pytest.fixture(scope="module")
def two_attempts() -> Iterator[Server]:
    s = Server("max-attempts", "2", "retry-base", "1")
    yield s
    s.stop()


def test_ack_forward_hands_the_job_to_the_next_queue(r: redis.Redis, qname: str) -> None:
    compile_q, test_q = Queue(r, f"{{{qname}}}:compile"), Queue(r, f"{{{qname}}}:test")
    compile_q.enqueue(cfg("sub-41"))
    job = compile_q.pop(lease_ms=60_000)
    assert job is not None
    succ = compile_q.ack(job, result={"built": True}, forward=(test_q, cfg("sub-41", stage="test")))
    assert succ is not None and succ.created and succ.key == job.key
    done = compile_q.status(job.key)  # finished, its result kept
    assert done is not None and done.state == "done" and done.finished_at
    st = test_q.status(job.key)
    assert st is not None and st.state == "queued" and st.config["stage"] == "test"
    # A refused ACK forwards nothing.
    with pytest.raises(LeaseLostError):
        compile_q.ack(job, forward=(test_q, cfg("other")))
    assert test_q.len() == 1


def test_nack_forward_only_on_death(two_attempts: Server, qname: str) -> None:
    r = two_attempts.client()
    q, failures = Queue(r, qname), Queue(r, f"{qname}:failures")
    q.enqueue(cfg("a"))
    job = q.pop(lease_ms=60_000)
    assert job is not None
    first = q.nack(job, delay_ms=0, forward=(failures, cfg("report-a")))
    assert first.outcome == "retry" and first.successor is None
    job = q.pop(lease_ms=60_000)
    assert job is not None
    dead = q.nack(job, forward=(failures.name, cfg("report-a")))
    assert dead.outcome == "dead" and dead.successor is not None
    assert dead.successor.created
    assert failures.len() == 1
    r.close()


def test_the_asyncio_queue_forwards_too(server: Server, qname: str) -> None:
    async def main() -> None:
        client = redis.asyncio.Redis(port=server.port)
        q = orca_aio.Queue(client, qname)
        await q.enqueue(cfg("a"))
        job = await q.pop(lease_ms=60_000)
        assert job is not None
        succ = await q.ack(job, forward=(f"{qname}:next", cfg("a")))
        assert succ is not None and succ.created
        assert await orca_aio.Queue(client, f"{qname}:next").len() == 1
        await q.enqueue(cfg("b"))
        job = await q.pop(lease_ms=60_000)
        assert job is not None
        out = await q.nack(job, forward=(f"{qname}:next", cfg("b")))
        assert out.outcome == "retry" and out.successor is None
        await client.aclose()

    asyncio.run(main())

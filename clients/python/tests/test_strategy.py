"""The worker's fetch strategy: the commands it issues (no server needed)."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio

from orca_queue import Job, Queue, Worker
from orca_queue.aio import Queue as AioQueue
from orca_queue.aio import Worker as AioWorker
from orca_queue.protocol import VALUES
from orca_queue.strategy import MAX_POP_COUNT, FetchStrategy


def job(queue: str) -> Job:
    return Job(key="K", payload=b'{"key":"k"}', created_at=42, lease="7", queue=queue)


def test_one_queue_pops_and_several_use_mpop() -> None:
    one = FetchStrategy(["a"], lease_ms=5000, block_ms=5000)
    assert one.quick(5000).args == ("ORCA.POP", "a", "LEASE", 5000, "COUNT", MAX_POP_COUNT, *VALUES)
    assert one.blocking(3).args == (
        "ORCA.POP",
        "a",
        "LEASE",
        5000,
        "BLOCK",
        5000,
        "COUNT",
        3,
        *VALUES,
    )
    two = FetchStrategy(["a", "b"], lease_ms=5000, block_ms=7000)
    assert two.quick(2).args == ("ORCA.MPOP", 2, "a", "b", "LEASE", 5000, "COUNT", 2, *VALUES)
    # One blocking MPOP over every queue, with the full BLOCK: woken by any of them.
    assert two.blocking(3).args == (
        "ORCA.MPOP", 2, "a", "b", "LEASE", 5000, "BLOCK", 7000, "COUNT", 3, "FORMAT", "VALUES",
    )  # fmt: skip


def test_finish_takes_the_next_job_in_the_same_round_trip() -> None:
    s = FetchStrategy(["a", "b"], lease_ms=5000, block_ms=1000, result_ttl_ms=9)
    # First queue: ACK ... NEXT (the next job of that queue is what MPOP would take).
    assert [c.args for c in s.finish(job("a"), b"r", failed=False, take_next=True)] == [
        ("ORCA.ACK", "a", "K", "7", "RESULT", b"r", "TTL", 9, "NEXT", "LEASE", 5000, *VALUES)
    ]
    # Another queue: NEXT would skip the first one; ACK pipelined with an MPOP of one.
    assert [c.args for c in s.finish(job("b"), None, failed=False, take_next=True)] == [
        ("ORCA.ACK", "b", "K", "7"),
        ("ORCA.MPOP", 2, "a", "b", "LEASE", 5000, "COUNT", 1, *VALUES),
    ]
    # A failure is a plain NACK (its outcome is reported), plus the pop for the slot.
    assert [c.args[0] for c in s.finish(job("a"), None, failed=True, take_next=True)] == [
        "ORCA.NACK",
        "ORCA.MPOP",
    ]
    # Stopping (no next job): a plain ACK.
    assert [c.args for c in s.finish(job("a"), None, failed=False, take_next=False)] == [
        ("ORCA.ACK", "a", "K", "7")
    ]
    off = FetchStrategy(["a"], lease_ms=5000, block_ms=1000, ack_next=False)
    assert [c.args for c in off.finish(job("a"), None, failed=False, take_next=True)] == [
        ("ORCA.ACK", "a", "K", "7")
    ]


def test_hand_back_is_reenqueue_at_arrival_then_nack() -> None:
    s = FetchStrategy(["q"], lease_ms=5000, block_ms=1000)
    assert [c.args for c in s.hand_back(job("q"))] == [
        ("ORCA.REENQUEUE", "q", b'{"key":"k"}', 42),
        ("ORCA.NACK", "q", "K", "7", "DELAY", 0),
    ]
    with pytest.raises(ValueError):
        FetchStrategy([], lease_ms=5000, block_ms=1000)
    with pytest.raises(ValueError):
        FetchStrategy(["q"], lease_ms=0, block_ms=1000)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("concurrency", 0, "concurrency must be an integer >= 1"),
        ("concurrency", 1.5, "concurrency must be an integer >= 1"),
        ("lease_ms", 999, "lease_ms must be an integer >= 1000"),
        ("lease_ms", 1500.5, "lease_ms must be an integer >= 1000"),
        ("block_ms", 0, "block_ms must be an integer >= 1"),
        ("block_ms", 0.5, "block_ms must be an integer >= 1"),
        ("grace_ms", -1, "grace_ms must be >= 0"),
        ("grace_ms", float("nan"), "grace_ms must be >= 0"),
        ("heartbeat_ms", 0, "heartbeat_ms must be between 0 and lease_ms"),
        ("heartbeat_ms", float("nan"), "heartbeat_ms must be between 0 and lease_ms"),
        ("result_ttl_ms", -1, "result_ttl_ms must be an integer >= 0"),
        ("result_ttl_ms", 1.5, "result_ttl_ms must be an integer >= 0"),
        ("nack_delay_ms", -1, "nack_delay_ms must be an integer >= 0"),
        ("nack_delay_ms", True, "nack_delay_ms must be an integer >= 0"),
    ],
)
def test_worker_options_are_validated(option: str, value: object, message: str) -> None:
    """Every numeric option is checked when the worker is made (as the TypeScript client
    does), not refused by the server at the first pop or ACK."""
    q = Queue(redis.Redis(), "q")  # never connects
    with pytest.raises(ValueError, match=message):
        Worker(q, lambda job: None, **{option: value})  # type: ignore[arg-type]
    aq = AioQueue(redis.asyncio.Redis(), "q")
    with pytest.raises(ValueError, match=message):
        AioWorker(aq, lambda job: None, **{option: value})  # type: ignore[arg-type]
    Worker(q, lambda job: None, grace_ms=0, result_ttl_ms=0, nack_delay_ms=0)  # the lowest

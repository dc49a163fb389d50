"""Deliveries as values: every command of the client that hands out jobs asks for
``FORMAT VALUES`` and reads each job by position, with the same Jobs as the maps give, and
falls back to maps (once per connection pool) on a server that refuses the option (a module
older than this client)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from conftest import Server, cfg
from redis.exceptions import ResponseError

from orca_queue import Job, Queue, aio, mpop, mpop_many
from orca_queue.protocol import VALUES, execute
from orca_queue.types import delivery

# What the module answered before FORMAT existed (an unknown option: nothing changed).
REFUSAL = "unknown option 'FORMAT' (allowed: LEASE, BLOCK, COUNT, NOW, MAXATTEMPTS)"


def same(a: Job, b: Job) -> None:
    """The fields a delivery carries, equal (the lease tokens differ between deliveries)."""
    for f in ("key", "attempts", "collation", "created_at", "release_at", "immediate", "nonce",
              "payload", "attempt", "queue"):  # fmt: skip
        assert getattr(a, f) == getattr(b, f), f


@pytest.fixture(params=[(2, False), (3, False), (2, True), (3, True)],
                ids=["resp2", "resp3", "resp2-decoded", "resp3-decoded"])  # fmt: skip
def rc(server: Server, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    protocol, decode = request.param
    c = server.client(protocol=protocol, decode_responses=decode)
    yield c
    c.close()


def test_pops_read_values_as_the_maps_would(rc: redis.Redis, qname: str) -> None:
    # Two queues given the same jobs at the same (pinned) time: one popped as values, one as
    # maps; every field of the deliveries agrees (the lease tokens and deadlines aside).
    q, twin = Queue(rc, qname), Queue(rc, qname + "-twin")
    for queue in (q, twin):
        queue.enqueue(cfg("a", collation={"type": "user", "id": "7"}), now=1_000_000)
        queue.immediate(cfg("b"), now=1_000_500)
    for _ in range(2):
        raw = execute(rc, ("ORCA.POP", qname, "LEASE", 60_000, *VALUES))
        assert isinstance(raw, list) and len(raw) == 11 and isinstance(raw[0], int)
        by_values = delivery(raw, qname)
        by_map = Job.from_reply(execute(rc, ("ORCA.POP", twin.name, "LEASE", 60_000)), qname)
        same(by_values, by_map)
        assert by_values.lease and by_values.deadline and by_values.queue == qname
        assert isinstance(by_values.payload, bytes) and by_values.config == by_map.config
    # Queue.pop reads values too.
    q.enqueue(cfg("c", collation={"type": "team", "id": "9"}))
    job = q.pop(lease_ms=60_000)
    assert job is not None and job.collation == "team.9" and job.config["key"] == "c"
    assert not job.immediate and job.attempt == 1 and job.queue == qname


def test_every_delivering_command_asks_for_values(rc: redis.Redis, qname: str) -> None:
    q, other = Queue(rc, qname), Queue(rc, qname + "-2")
    for i in range(8):
        q.enqueue(cfg(f"k{i}", priority=i))
    other.enqueue(cfg("o"))
    sent: list[tuple[Any, ...]] = []
    real: Any = rc.execute_command

    def spy(*args: Any, **options: Any) -> Any:
        sent.append(args)
        return real(*args, **options)

    rc.execute_command = spy  # type: ignore[method-assign]
    jobs = q.pop_many(2, lease_ms=60_000)
    nxt = q.ack_next(jobs[0], lease_ms=60_000)
    assert nxt is not None
    after_nack = q.nack_next(jobs[1], delay_ms=60_000)
    assert after_nack is not None
    reply = q.ack_many([nxt, after_nack], next=True, count=3)
    assert reply.outcomes == [None, None] and len(reply.jobs) == 3
    assert all(j.queue == qname and j.lease for j in reply.jobs)
    m = mpop([other, q], lease_ms=60_000)
    assert m is not None and m.queue == other.name and m.config["key"] == "o"
    ms = mpop_many([other, q], 5, lease_ms=60_000)
    assert [j.queue for j in ms] == [qname]  # the one left in the second queue
    one = q.pop(lease_ms=60_000)
    assert one is None
    delivering = [a for a in sent if a[0] in ("ORCA.POP", "ORCA.MPOP") or "NEXT" in a]
    assert len(delivering) == 7 and all(a[-2:] == VALUES for a in delivering)


class OlderModule(redis.Redis):
    """A server that does not know FORMAT: it refuses the option, changing nothing."""

    refused = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if "FORMAT" in args:
            OlderModule.refused += 1
            raise ResponseError(REFUSAL)
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def test_falls_back_to_maps_once_on_an_older_module(server: Server, qname: str) -> None:
    OlderModule.refused = 0
    c = OlderModule(host="127.0.0.1", port=server.port)
    q = Queue(c, qname)
    for i in range(4):
        q.enqueue(cfg(f"k{i}", priority=i))
    job = q.pop(lease_ms=60_000)
    assert job is not None and job.config["key"] == "k0" and job.lease
    nxt = q.ack_next(job, lease_ms=60_000)
    assert nxt is not None and nxt.config["key"] == "k1"
    reply = q.ack_many([nxt], next=True, count=2)
    assert reply.outcomes == [None] and [j.config["key"] for j in reply.jobs] == ["k2", "k3"]
    assert OlderModule.refused == 1  # refused once; that pool then sends maps
    assert q.stats().leased == 2
    c.close()


async def test_asyncio_falls_back_to_maps_once_on_an_older_module(
    server: Server, qname: str
) -> None:
    refused: list[tuple[Any, ...]] = []

    class AioOlderModule(redis.asyncio.Redis):
        async def execute_command(self, *args: Any, **options: Any) -> Any:
            if "FORMAT" in args:
                refused.append(args)
                raise ResponseError(REFUSAL)
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    c = AioOlderModule(host="127.0.0.1", port=server.port)
    q = aio.Queue(c, qname)
    for i in range(3):
        await q.enqueue(cfg(f"k{i}", priority=i))
    first, second = await asyncio.gather(q.pop(lease_ms=60_000), q.pop(lease_ms=60_000))
    assert first is not None and second is not None
    assert {first.config["key"], second.config["key"]} == {"k0", "k1"}
    last = await q.ack_next(first)
    assert last is not None and last.config["key"] == "k2"
    assert 1 <= len(refused) <= 2  # those already in flight when the first was refused
    await c.aclose()


def test_other_errors_are_not_mistaken_for_a_refusal(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    with pytest.raises(ResponseError, match="COUNT"):
        q.pop_many(0)
    q.enqueue(cfg("a"))
    assert q.pop_many(1)[0].config["key"] == "a"  # still values, still works


def test_a_values_delivery_is_told_from_a_map_by_its_first_item() -> None:
    values: list[Any] = [1, 1, b"user.7", 10, 20, 0, b"K", b"12", 3, b"{}", 15]
    job = delivery(values, "q")
    assert (job.key, job.lease, job.collation, job.nonce, job.queue) == (
        "K",
        "12",
        "user.7",
        3,
        "q",
    )
    assert delivery([None, *values[1:]], "q").attempt is None  # a nil first value is values too
    mapped: list[Any] = ["attempt", 1, "attempts", 1, "key", "K"]
    assert delivery(mapped, "q").key == "K"  # RESP2 field/value pairs (decoded names)
    assert delivery({b"key": b"K", b"attempts": 1}, "q").key == "K"  # RESP3 map
    assert delivery([*values, b"q2"], None, True).queue == "q2"  # MPOP: the 12th value
    assert delivery([*values, b"later"], "q").queue == "q"  # values added later are ignored
    with pytest.raises(ValueError, match="12 values"):
        delivery(values, None, True)

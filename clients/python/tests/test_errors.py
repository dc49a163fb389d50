"""Every error code the client maps (docs/commands.md, "Error codes"), provoked on a real
server (``make test-python`` runs this file against Redis 7.0 and again against Valkey 8),
under RESP2 and RESP3: the class comes from the code, the fields from the fields, the message
is the text. Codes a healthy server cannot be made to give (INVARIANT, NOTQUEUED) are checked
on the reply's form alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from conftest import Server, cfg
from redis.exceptions import ResponseError

from orca_queue import (
    BadConfigError,
    InvalidArgumentError,
    InvariantError,
    JobCancelledError,
    JobNotQueuedError,
    JobStateError,
    LeaseLostError,
    NoSuchJobError,
    OrcaError,
    Queue,
    QueueFullError,
    ResultTooLargeError,
    WrongTypeError,
)
from orca_queue.aio import Queue as AsyncQueue
from orca_queue.errors import map_error


def raw(r: redis.Redis, *args: object) -> object:
    """A command sent as it is (redis-py raises its error replies as they come)."""
    return r.execute_command(*args)  # type: ignore[no-untyped-call]


@contextmanager
def setting(server: Server, name: str, value: int) -> Iterator[None]:
    admin = server.client(decode_responses=True)
    old = str(admin.config_get(name)[name])
    admin.config_set(name, value)
    try:
        yield
    finally:
        admin.config_set(name, old)
        admin.close()


def test_err_is_an_invalid_argument(r: redis.Redis, qname: str) -> None:
    with pytest.raises(ResponseError) as ei:
        raw(r, "ORCA.POP", qname, "SIDEWAYS", 1)
    e = map_error(ei.value)
    assert type(e) is InvalidArgumentError and e.code == "ERR"
    assert str(e).startswith("unknown option 'SIDEWAYS'")
    # Redis's own refusals stay redis-py's.
    with pytest.raises(ResponseError) as arity:
        raw(r, "ORCA.POP")
    assert type(map_error(arity.value)) is ResponseError


def test_wrongtype(r: redis.Redis, qname: str) -> None:
    r.set(qname, "a string")
    with pytest.raises(WrongTypeError) as ei:
        Queue(r, qname).enqueue(cfg("a"))
    assert ei.value.code == "WRONGTYPE" and "wrong kind of value" in str(ei.value)


def test_badconfig(r: redis.Redis, qname: str) -> None:
    with pytest.raises(BadConfigError) as ei:
        Queue(r, qname).enqueue(cfg("a", priority=1.5))
    assert ei.value.code == "BADCONFIG"
    assert str(ei.value) == "priority must be an integer number of ms, not a fraction"


def test_nojob_and_immediate(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    with pytest.raises(NoSuchJobError) as ei:
        q.release("A" * 43 + "=")
    assert ei.value.code == "NOJOB" and str(ei.value) == "no such job"
    job = q.immediate(cfg("imm"))
    with pytest.raises(JobStateError) as st:
        q.delay(job.key)
    assert type(st.value) is JobStateError and st.value.code == "IMMEDIATE"


def test_not_queued_states_and_their_fields(server: Server, r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    gate = "hw 3/é"  # a space and non-ASCII: the field is percent-encoded
    q.close_gate(gate)
    held = q.enqueue(cfg("held", gate=gate))
    q.enqueue(cfg("run"))
    q.enqueue(cfg("retry"))
    q.enqueue(cfg("dies"))
    running = q.pop(lease_ms=60_000)
    retry = q.pop(lease_ms=60_000)
    dies = q.pop(lease_ms=60_000)
    assert running is not None and retry is not None and dies is not None
    out = q.nack(retry, delay_ms=60_000)
    with setting(server, "orca.max-attempts", 1):
        assert q.nack(dies).outcome == "dead"
    want = {
        running.key: ("LEASED", "leased", None, None),
        retry.key: ("DELAYED", "delayed", None, out.retry_at),
        dies.key: ("DEAD", "dead", None, None),
        held.key: ("HELD", "held", gate, None),
    }
    for key, (code, state, g, retry_at) in want.items():
        with pytest.raises(JobNotQueuedError) as ei:
            q.release(key)
        e = ei.value
        assert (e.code, e.state, e.gate, e.retry_at) == (code, state, g, retry_at), e
        assert isinstance(e, JobStateError) and str(e).startswith("job is ")


def test_alreadyqueued(server: Server, r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("d"))
    job = q.pop(lease_ms=60_000)
    assert job is not None
    with setting(server, "orca.max-attempts", 1):
        q.nack(job)
    q.enqueue(cfg("d"))  # a regrade: the key is queued again
    with pytest.raises(JobStateError) as ei:
        q.requeue_dead(job.key)
    assert type(ei.value) is JobStateError and ei.value.code == "ALREADYQUEUED"


def test_nolease_and_cancelled(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("a"))
    job = q.pop(lease_ms=60_000)
    assert job is not None
    with pytest.raises(LeaseLostError) as ei:
        q.ack(job.key, "999999")
    assert type(ei.value) is LeaseLostError and ei.value.code == "NOLEASE"
    assert str(ei.value).startswith("lease not held")
    # Per lease in ORCA.MACK: the same classes in the outcomes.
    out = q.ack_many([(job.key, "999999")])
    assert [type(o) for o in out.outcomes] == [LeaseLostError]
    q.delete(job.key)
    with pytest.raises(JobCancelledError) as ce:
        q.ack(job)
    assert ce.value.code == "CANCELLED" and str(ce.value) == "job was cancelled"


def test_queuefull(server: Server, r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("one"))
    with setting(server, "orca.max-queue-length", 1), pytest.raises(QueueFullError) as ei:
        q.enqueue(cfg("two"))
    assert ei.value.code == "QUEUEFULL"


def test_toolarge(server: Server, r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("a"))
    job = q.pop(lease_ms=60_000)
    assert job is not None
    too_large = pytest.raises(ResultTooLargeError)
    with setting(server, "orca.max-payload-bytes", 1000), too_large as ei:
        q.ack(job, result=b"x" * 2000)
    assert ei.value.code == "TOOLARGE"
    q.ack(job)  # refused whole: the lease is still held


def test_toomany_and_timerange(server: Server, r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    with setting(server, "orca.max-pop-count", 3), pytest.raises(InvalidArgumentError) as ei:
        q.list_page(limit=4)
    assert ei.value.code == "TOOMANY" and str(ei.value) == "LIMIT must be between 0 and 3"
    q.enqueue(cfg("a"))
    with pytest.raises(InvalidArgumentError) as tr:
        q.pop(lease_ms=2**53 - 1)
    assert tr.value.code == "TIMERANGE"


def test_corrupt(r: redis.Redis, qname: str) -> None:
    with pytest.raises(ResponseError) as ei:
        raw(r, "ORCA.IMPORT", qname, b"not a queue")
    e = map_error(ei.value)
    assert type(e) is InvalidArgumentError and e.code == "CORRUPT"
    assert str(e).startswith("corrupt queue data")


def test_internal() -> None:
    s = Server("debug-panic-in", "command")
    try:
        c = s.client()
        with pytest.raises(OrcaError) as ei:
            Queue(c, "q").len()
        assert type(ei.value) is OrcaError and ei.value.code == "INTERNAL"
        c.close()
    finally:
        s.stop()


@pytest.mark.parametrize(
    "reply, cls, code",
    [
        ("INVARIANT queue invariant broken: x", InvariantError, "INVARIANT"),
        ("NOTQUEUED job is not in the queue order", JobNotQueuedError, "NOTQUEUED"),
        ("SOMEDAY a code added later", InvalidArgumentError, "ERR"),
    ],
)
def test_codes_by_form(reply: str, cls: type[OrcaError], code: str) -> None:
    e = map_error(ResponseError(reply))
    assert type(e) is cls and isinstance(e, OrcaError) and e.code == code


async def test_asyncio_maps_the_same(server: Server, qname: str) -> None:
    c = redis.asyncio.Redis(host="127.0.0.1", port=server.port)
    try:
        q = AsyncQueue(c, qname)
        await q.enqueue(cfg("a"))
        job = await q.pop(lease_ms=60_000)
        assert job is not None
        with pytest.raises(LeaseLostError) as ei:
            await q.ack(job.key, "999999")
        assert ei.value.code == "NOLEASE"
        with pytest.raises(JobNotQueuedError) as nq:
            await q.release(job.key)
        assert nq.value.state == "leased"
    finally:
        await c.aclose()

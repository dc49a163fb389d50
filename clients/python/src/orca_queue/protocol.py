"""The ORCA.* commands as data: the arguments to send and how to read the reply.

Shared by the sync and the asyncio APIs, so each command is spelled out once. Nothing here
does I/O.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Optional, TypeVar

from redis.client import NEVER_DECODE
from redis.exceptions import ResponseError

from .errors import InvariantError, LeaseLostError, OrcaError, map_error
from .keys import Config, encode_config
from .types import (
    AutoDelay,
    AutoDelayArg,
    Job,
    NackOutcome,
    QueueSettings,
    QueueStats,
    TickReport,
    deliveries,
    jobs_from_reply,
    opt_delivery,
    opt_job,
    raw,
    text,
)

T = TypeVar("T")


# Appended to every command that hands out jobs: each job comes as its values, read by
# position (docs/commands.md, "Deliveries as values"): half the items per job for the client's
# RESP parser, no field names to tell apart.
VALUES = ("FORMAT", "VALUES")

# The connection pools (or clients, where there is no pool) whose server refused FORMAT: a
# module older than this client. Their commands go without it from then on.
_NO_VALUES: weakref.WeakSet[Any] = weakref.WeakSet()


def refused_format(e: BaseException) -> bool:
    """An older module's refusal of FORMAT (an unknown option: nothing was changed)."""
    return isinstance(e, ResponseError) and "unknown option 'FORMAT'" in str(e)


def execute(client: Any, args: tuple[Any, ...], options: Optional[Mapping[str, Any]] = None) -> Any:
    """``client.execute_command(*args, **options)`` (redis-py leaves it untyped); on a
    pipeline it queues the command. A command that asks for ``FORMAT VALUES`` goes without it
    to a server that refused the option (once, from then on on that client's pool): the
    parsers read maps as well as values."""
    opts = options or {}
    if args[-2:] != VALUES:
        return client.execute_command(*args, **opts)
    pool = getattr(client, "connection_pool", client)
    if pool in _NO_VALUES:
        return client.execute_command(*args[:-2], **opts)
    try:
        reply = client.execute_command(*args, **opts)
    except ResponseError as e:
        if not refused_format(e):
            raise
        _NO_VALUES.add(pool)
        return client.execute_command(*args[:-2], **opts)
    if asyncio.iscoroutine(reply):
        return _fallback(client, pool, reply, args[:-2], opts)
    return reply


async def _fallback(
    client: Any,
    pool: Any,
    sent: Coroutine[Any, Any, Any],
    legacy: tuple[Any, ...],
    opts: Mapping[str, Any],
) -> Any:
    try:
        return await sent
    except ResponseError as e:
        if not refused_format(e):
            raise
        _NO_VALUES.add(pool)
        return await client.execute_command(*legacy, **opts)


# redis-py's own option (what its DUMP uses): read this reply as bytes, even on a client with
# decode_responses=True. Honoured by redis.Redis, redis.asyncio.Redis and their pipelines.
_RAW_REPLY: Mapping[str, Any] = {NEVER_DECODE: []}


@dataclass(frozen=True)
class Command(Generic[T]):
    """One command: its arguments, the function that decodes its reply, and redis-py's
    options for ``execute_command`` (how the reply is read)."""

    args: tuple[Any, ...]
    parse: Callable[[Any], T]
    options: Mapping[str, Any] = field(default_factory=dict)


def encode_result(value: Any) -> Optional[bytes]:
    """An ACK result as bytes: ``None`` keeps none, bytes-like values are sent as they are,
    anything else (``str`` included) as JSON."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _job(reply: Any) -> Job:
    return Job.from_reply(reply)


def _opt_job(reply: Any) -> Optional[Job]:
    return opt_job(reply)


def _ok(reply: Any) -> None:
    return None


def _check(reply: Any) -> None:
    if text(reply) != "OK":
        raise InvariantError(f"unexpected ORCA.CHECK reply {reply!r}")


def _opt_raw(reply: Any) -> Optional[bytes]:
    return None if reply is None else raw(reply)


def _with(args: list[Any], name: str, value: Any) -> list[Any]:
    if value is not None:
        args += [name, value]
    return args


def enqueue(q: str, config: Config, now: Optional[int] = None) -> Command[Job]:
    return Command(tuple(_with(["ORCA.ENQUEUE", q, encode_config(config)], "NOW", now)), _job)


def immediate(q: str, config: Config, now: Optional[int] = None) -> Command[Job]:
    return Command(tuple(_with(["ORCA.IMMEDIATE", q, encode_config(config)], "NOW", now)), _job)


def reenqueue(q: str, config: Config, created_at: int) -> Command[Job]:
    return Command(("ORCA.REENQUEUE", q, encode_config(config), int(created_at)), _job)


def move(
    q: str, key: str, where: str, now: Optional[int] = None, buffer_ms: Optional[int] = None
) -> Command[Job]:
    where = where.upper()
    if where not in ("RELEASE", "DELAY"):
        raise ValueError("move must be RELEASE or DELAY")
    args = _with(["ORCA.MOVE", q, key, where], "NOW", now)
    return Command(tuple(_with(args, "BUFFER", buffer_ms)), _job)


def delete(q: str, key: str) -> Command[bool]:
    return Command(("ORCA.DELETE", q, key), lambda r: bool(int(r)))


def status(q: str, key: str) -> Command[Optional[Job]]:
    return Command(("ORCA.STATUS", q, key), _opt_job)


LIST_STATES = ("queued", "held", "leased", "delayed", "dead")


def list_page(
    q: str,
    offset: int,
    limit: int,
    filter: Optional[tuple[str, str]],
    *,
    state: Optional[str] = None,
    gate: Optional[str] = None,
) -> Command[list[Job]]:
    args: list[Any] = ["ORCA.LIST", q]
    if state is not None:
        if state.lower() not in LIST_STATES:
            raise ValueError(f"state must be one of {', '.join(LIST_STATES)}")
        args += ["STATE", state.upper()]
    if gate is not None:
        args += ["GATE", gate]
    args += ["OFFSET", offset, "LIMIT", limit]
    if filter is not None:
        args += ["FILTER", filter[0], filter[1]]
    return Command(tuple(args), jobs_from_reply)


def stats(q: str) -> Command[QueueStats]:
    return Command(("ORCA.STATS", q), QueueStats.from_reply)


def length(q: str) -> Command[int]:
    return Command(("ORCA.LEN", q), int)


def check(q: str) -> Command[None]:
    return Command(("ORCA.CHECK", q), _check)


def dead_list(q: str, offset: int, limit: int) -> Command[list[Job]]:
    return Command(("ORCA.DEAD", q, "LIST", "OFFSET", offset, "LIMIT", limit), jobs_from_reply)


def dead_requeue(q: str, key: str) -> Command[Job]:
    return Command(("ORCA.DEAD", q, "REQUEUE", key), _job)


def dead_purge(q: str) -> Command[int]:
    return Command(("ORCA.DEAD", q, "PURGE"), int)


def result(q: str, key: str) -> Command[Optional[bytes]]:
    """ORCA.RESULT: the bytes as stored (any bytes, not decoded whatever the client's
    ``decode_responses``)."""
    return Command(("ORCA.RESULT", q, key), _opt_raw, _RAW_REPLY)


def _autodelay(value: AutoDelayArg) -> list[Any]:
    d = value if isinstance(value, AutoDelay) else AutoDelay(*value)
    args: list[Any] = ["AUTODELAY", int(d.window_ms), int(d.step_ms)]
    if d.cap_ms:
        args += ["CAP", int(d.cap_ms)]
    return args


def settings(
    q: str,
    order: Optional[str] = None,
    *,
    lifetime_ms: Optional[int] = None,
    autodelay: Optional[AutoDelayArg] = None,
    max_running: Optional[int] = None,
    dead_max: Optional[int] = None,
    dead_ttl_ms: Optional[int] = None,
    result_max: Optional[int] = None,
) -> Command[QueueSettings]:
    args = _with(["ORCA.SETTINGS", q], "ORDER", None if order is None else order.upper())
    args = _with(args, "LIFETIME", lifetime_ms)
    if autodelay is not None:
        args += _autodelay(autodelay)
    args = _with(args, "MAXRUNNING", max_running)
    args = _with(args, "DEADMAX", dead_max)
    args = _with(args, "DEADTTL", dead_ttl_ms)
    args = _with(args, "RESULTMAX", result_max)
    return Command(tuple(args), QueueSettings.from_reply)


def gate_close(q: str, gate: str) -> Command[bool]:
    return Command(("ORCA.GATE", q, gate, "CLOSE"), lambda r: bool(int(r)))


def gate_open(q: str, gate: str) -> Command[int]:
    return Command(("ORCA.GATE", q, gate, "OPEN"), int)


def gate_drop(q: str, gate: str) -> Command[list[Any]]:
    """The configs of the dropped jobs, parsed (in arrival order)."""
    return Command(
        ("ORCA.GATE", q, gate, "DROP"), lambda r: [json.loads(raw(c)) for c in (r or [])]
    )


def tick(q: str) -> Command[TickReport]:
    return Command(("ORCA.TICK", q), TickReport.from_reply)


# The longest failure text a client sends with ORCA.NACK ... ERROR (characters; the server
# keeps at most its own bound, orca.max-error-length, of it).
MAX_ERROR_CHARS = 4096


def error_arg(error: Optional[str]) -> Optional[str]:
    """A failure text as sent: at most ``MAX_ERROR_CHARS`` characters."""
    if error is None:
        return None
    text = str(error)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "\u2026"


def pop_args(
    q: str,
    lease_ms: Optional[int],
    block_ms: Optional[int],
    count: Optional[int],
    worker: Optional[str] = None,
) -> tuple[Any, ...]:
    args = _with(["ORCA.POP", q], "LEASE", lease_ms)
    args = _with(args, "BLOCK", block_ms)
    args = _with(args, "COUNT", count)
    return tuple(_with(args, "WORKER", worker))


def pop(
    q: str, lease_ms: Optional[int], block_ms: Optional[int], worker: Optional[str] = None
) -> Command[Optional[Job]]:
    return Command(
        (*pop_args(q, lease_ms, block_ms, None, worker), *VALUES), lambda r: opt_delivery(r, q)
    )


def pop_many(
    q: str,
    count: int,
    lease_ms: Optional[int],
    block_ms: Optional[int],
    worker: Optional[str] = None,
) -> Command[list[Job]]:
    return Command(
        (*pop_args(q, lease_ms, block_ms, count, worker), *VALUES), lambda r: deliveries(r, q)
    )


def mpop_args(
    queues: Sequence[str],
    lease_ms: Optional[int],
    block_ms: Optional[int],
    count: Optional[int],
    worker: Optional[str] = None,
) -> tuple[Any, ...]:
    if not queues:
        raise ValueError("ORCA.MPOP needs at least one queue")
    args = _with(["ORCA.MPOP", len(queues), *queues], "LEASE", lease_ms)
    args = _with(args, "BLOCK", block_ms)
    args = _with(args, "COUNT", count)
    return tuple(_with(args, "WORKER", worker))


def mpop(
    queues: Sequence[str],
    lease_ms: Optional[int],
    block_ms: Optional[int],
    worker: Optional[str] = None,
) -> Command[Optional[Job]]:
    """ORCA.MPOP: the job names its queue (``Job.queue``)."""
    return Command(
        (*mpop_args(queues, lease_ms, block_ms, None, worker), *VALUES),
        lambda r: opt_delivery(r, None, True),
    )


def mpop_many(
    queues: Sequence[str],
    count: int,
    lease_ms: Optional[int],
    block_ms: Optional[int],
    worker: Optional[str] = None,
) -> Command[list[Job]]:
    return Command(
        (*mpop_args(queues, lease_ms, block_ms, count, worker), *VALUES),
        lambda r: deliveries(r, None, True),
    )


def _next(
    args: list[Any], lease_ms: Optional[int], worker: Optional[str] = None
) -> tuple[Any, ...]:
    return (*_with(_with([*args, "NEXT"], "LEASE", lease_ms), "WORKER", worker), *VALUES)


def ack_args(
    q: str, key: str, lease: str, result: Optional[bytes], ttl_ms: Optional[int]
) -> list[Any]:
    args = _with(["ORCA.ACK", q, key, lease], "RESULT", result)
    return _with(args, "TTL", ttl_ms)


def ack(
    q: str, key: str, lease: str, result: Optional[bytes] = None, ttl_ms: Optional[int] = None
) -> Command[None]:
    return Command(tuple(ack_args(q, key, lease, result, ttl_ms)), _ok)


def queue_name(q: Any) -> str:
    """A queue's name: a str, or anything with a ``name`` (a Queue)."""
    return q if isinstance(q, str) else str(q.name)


def ack_forward(
    q: str,
    key: str,
    lease: str,
    forward: tuple[str, Config],
    *,
    result: Optional[bytes] = None,
    ttl_ms: Optional[int] = None,
) -> Command[Job]:
    """ORCA.ACK ... FORWARD <queue2> <config>: the successor's write reply."""
    args = ack_args(q, key, lease, result, ttl_ms)
    args += ["FORWARD", forward[0], encode_config(forward[1])]
    return Command(tuple(args), lambda r: Job.from_reply(r[1]))


def nack_forward(
    q: str,
    key: str,
    lease: str,
    forward: tuple[str, Config],
    delay_ms: Optional[int] = None,
    *,
    error: Optional[str] = None,
) -> Command[NackOutcome]:
    """ORCA.NACK ... FORWARD <queue2> <config>: the outcome, with the successor if it died."""
    args = nack_args(q, key, lease, delay_ms, error)
    args += ["FORWARD", forward[0], encode_config(forward[1])]
    return Command(tuple(args), NackOutcome.with_successor)


def ack_next(
    q: str,
    key: str,
    lease: str,
    result: Optional[bytes] = None,
    ttl_ms: Optional[int] = None,
    *,
    lease_ms: Optional[int] = None,
    worker: Optional[str] = None,
) -> Command[Optional[Job]]:
    """ORCA.ACK ... NEXT [LEASE ms] [WORKER name]: the next job of the same queue, leased,
    or None."""
    return Command(
        _next(ack_args(q, key, lease, result, ttl_ms), lease_ms, worker),
        lambda r: opt_delivery(r, q),
    )


@dataclass
class MackReply:
    """What ORCA.MACK did: one outcome per delivery, in order (``None``: acked; else the error
    ORCA.ACK would have raised, :class:`LeaseLostError` or :class:`JobCancelledError`), and
    with ``next`` the jobs it leased (empty without)."""

    outcomes: list[Optional[OrcaError]]
    jobs: list[Job] = field(default_factory=list)


def _outcomes(reply: Any) -> list[Optional[OrcaError]]:
    if not isinstance(reply, list):
        raise InvariantError(f"ORCA.MACK replied without its outcomes: {reply!r}")
    out: list[Optional[OrcaError]] = []
    for o in reply:
        if isinstance(o, ResponseError):
            e = map_error(o)
            out.append(e if isinstance(e, OrcaError) else OrcaError(str(e)))
        else:
            out.append(None)
    return out


MackItem = tuple[str, str, Optional[bytes]]


def mack(
    q: str,
    items: Sequence[MackItem],
    ttl_ms: Optional[int] = None,
    *,
    next: bool = False,
    lease_ms: Optional[int] = None,
    count: Optional[int] = None,
) -> Command[MackReply]:
    """ORCA.MACK of ``(orca key, lease, result or None)`` items: every item with a result, or
    none (the server takes one result per delivery or none)."""
    if not items:
        raise ValueError("ORCA.MACK needs at least one delivery")
    with_result = sum(r is not None for _, _, r in items)
    if with_result not in (0, len(items)):
        raise ValueError("ORCA.MACK takes a result for every delivery or for none")
    args: list[Any] = ["ORCA.MACK", q, len(items)]
    for key, lease, _ in items:
        args += [key, lease]
    if with_result:
        args += ["RESULTS", *(r for _, _, r in items)]
    _with(args, "TTL", ttl_ms)
    if not next:
        return Command(tuple(args), lambda r: MackReply(_outcomes(r)))
    args.append("NEXT")
    _with(_with(args, "LEASE", lease_ms), "COUNT", count)
    args += VALUES

    def parse(r: Any) -> MackReply:
        if not isinstance(r, list) or len(r) != 2:
            raise InvariantError(f"ORCA.MACK ... NEXT replies [outcomes, jobs], got {r!r}")
        return MackReply(_outcomes(r[0]), deliveries(r[1], q))

    return Command(tuple(args), parse)


# What the server answers for a lease it does not hold (docs/commands.md, ORCA.ACK).
LEASE_NOT_HELD = (
    "lease not held (it expired and the job was handed out again, was already acked or "
    "nacked, or never existed)"
)


def mack_plan(
    q: str,
    items: Sequence[MackItem],
    ttl_ms: Optional[int] = None,
    *,
    next: bool = False,
    lease_ms: Optional[int] = None,
    count: Optional[int] = None,
) -> tuple[list[Command[MackReply]], Callable[[list[MackReply | OrcaError]], MackReply]]:
    """The ORCA.MACK commands for ``items`` and how to merge their replies back into the
    items' order (``count`` defaults to one job per item; the server takes at most
    ``orca.max-pop-count``). Run them in order: an error reply to the first means nothing
    changed (raise it); an error reply to the second is the outcome of each of its items
    (not acked), since the first's are already done.

    One command when every item has a result or none does. Otherwise two (the server takes a
    result for every delivery of a command or for none): those with a result first, so that
    one refused as a whole (a result over ``orca.max-payload-bytes``) leaves everything as it
    was; then those without, which carries ``next``. A delivery given twice is sent once; its
    repeats get what the server answers a repeat, "lease not held" (or the first one's error),
    so the outcomes are those of acking in the order given."""
    if not items:
        raise ValueError("ack_many needs at least one delivery")
    if next and count is None:
        count = len(items)
    with_result = sum(i[2] is not None for i in items)
    if with_result in (0, len(items)):
        cmd = mack(q, items, ttl_ms, next=next, lease_ms=lease_ms, count=count)
        return [cmd], lambda replies: replies[0]
    first: dict[tuple[str, str], int] = {}
    for n, (key, lease, _) in enumerate(items):
        first.setdefault((key, lease), n)
    firsts = [n for n, (key, lease, _) in enumerate(items) if first[(key, lease)] == n]
    kept = [n for n in firsts if items[n][2] is not None]
    bare = [n for n in firsts if items[n][2] is None]
    cmds: list[Command[MackReply]] = []
    if kept:
        cmds.append(mack(q, [items[n] for n in kept], ttl_ms))
    if bare:
        cmds.append(
            mack(q, [items[n] for n in bare], ttl_ms, next=next, lease_ms=lease_ms, count=count)
        )
    elif next:  # every first occurrence has a result: NEXT goes with them
        cmds[0] = mack(
            q, [items[n] for n in kept], ttl_ms, next=True, lease_ms=lease_ms, count=count
        )

    def merge(replies: list[MackReply | OrcaError]) -> MackReply:
        got: dict[int, Optional[OrcaError]] = {}
        groups = [g for g in (kept, bare) if g]
        for group, reply in zip(groups, replies, strict=True):
            if isinstance(reply, OrcaError):  # refused as a whole: none of them acked
                got.update((n, reply) for n in group)
            else:
                got.update(zip(group, reply.outcomes, strict=True))
        outcomes: list[Optional[OrcaError]] = []
        for n, (key, lease, _) in enumerate(items):
            f = first[(key, lease)]
            if f == n:
                outcomes.append(got[n])
            else:
                lost = LeaseLostError(LEASE_NOT_HELD, "NOLEASE")
                outcomes.append(got[f] if got[f] is not None else lost)
        last = replies[-1]
        return MackReply(outcomes, [] if isinstance(last, OrcaError) else last.jobs)

    return cmds, merge


def mack_items(
    deliveries: Sequence[Job | tuple[str, str]], results: Optional[Sequence[Any]]
) -> list[MackItem]:
    """``(key, lease, encoded result)`` of each delivery (a popped Job, or ``(key, lease)``)."""
    if results is not None and len(results) != len(deliveries):
        raise ValueError("results must give one value per delivery (None keeps none)")
    items: list[MackItem] = []
    for i, d in enumerate(deliveries):
        key, lease = job_and_lease(d, None) if isinstance(d, Job) else (str(d[0]), str(d[1]))
        items.append((key, lease, encode_result(results[i]) if results is not None else None))
    return items


def nack_args(
    q: str, key: str, lease: str, delay_ms: Optional[int], error: Optional[str]
) -> list[Any]:
    args = _with(["ORCA.NACK", q, key, lease], "DELAY", delay_ms)
    return _with(args, "ERROR", error_arg(error))


def nack(
    q: str,
    key: str,
    lease: str,
    delay_ms: Optional[int] = None,
    error: Optional[str] = None,
) -> Command[NackOutcome]:
    """ORCA.NACK [DELAY ms] [ERROR text]: ``error`` (why it failed) is kept with the attempt,
    the delayed job and the dead letter; STATUS and the dashboard show it."""
    return Command(tuple(nack_args(q, key, lease, delay_ms, error)), NackOutcome.from_reply)


def nack_next(
    q: str,
    key: str,
    lease: str,
    delay_ms: Optional[int] = None,
    *,
    lease_ms: Optional[int] = None,
    error: Optional[str] = None,
    worker: Optional[str] = None,
) -> Command[Optional[Job]]:
    """ORCA.NACK ... NEXT [LEASE ms] [WORKER name]: the next job, or None (the server then
    does not say what became of the failed one: retry, dead or superseded)."""
    args = nack_args(q, key, lease, delay_ms, error)
    return Command(_next(args, lease_ms, worker), lambda r: opt_delivery(r, q))


def extend(q: str, key: str, lease: str, ms: int) -> Command[int]:
    return Command(("ORCA.EXTEND", q, key, lease, int(ms)), int)


def job_and_lease(job: Job | str, lease: Optional[str]) -> tuple[str, str]:
    """(orca key, lease) from a popped Job, or from a key and an explicit lease."""
    if isinstance(job, Job):
        if job.lease is None and lease is None:
            raise ValueError("job has no lease (it was not popped with a lease)")
        return job.key, lease if lease is not None else str(job.lease)
    if lease is None:
        raise ValueError("a lease token is needed with an orca key")
    return job, lease


def filter_pair(filter: Optional[Mapping[str, str] | tuple[str, str]]) -> Optional[tuple[str, str]]:
    """The FILTER of ORCA.LIST from ``{"field": "value"}`` or ``("field", "value")``."""
    if filter is None:
        return None
    if isinstance(filter, Mapping):
        if len(filter) != 1:
            raise ValueError("ORCA.LIST filters on exactly one metadata field")
        ((k, v),) = filter.items()
        return str(k), str(v)
    return str(filter[0]), str(filter[1])


def parse_pipeline(cmds: list[Command[T]], replies: list[Any]) -> list[T | OrcaError]:
    """Decode pipelined replies; an error reply becomes its exception, in its place."""
    out: list[T | OrcaError] = []
    for c, r in zip(cmds, replies, strict=True):
        if isinstance(r, ResponseError):
            e = map_error(r)
            if not isinstance(e, OrcaError):
                raise e
            out.append(e)
        else:
            out.append(c.parse(r))
    return out

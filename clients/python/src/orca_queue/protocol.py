"""The ORCA.* commands as data: the arguments to send and how to read the reply.

Shared by the sync and the asyncio APIs, so each command is spelled out once. Nothing here
does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Optional, TypeVar

from redis.exceptions import ResponseError

from .errors import InvariantError, OrcaError, map_error
from .keys import Config, encode_config
from .types import (
    Job,
    NackOutcome,
    QueueSettings,
    QueueStats,
    TickReport,
    jobs_from_reply,
    raw,
    text,
)

T = TypeVar("T")


def execute(client: Any, args: tuple[Any, ...]) -> Any:
    """``client.execute_command(*args)`` (redis-py leaves it untyped); on a pipeline it
    queues the command."""
    return client.execute_command(*args)


@dataclass(frozen=True)
class Command(Generic[T]):
    """One command: its arguments and the function that decodes its reply."""

    args: tuple[Any, ...]
    parse: Callable[[Any], T]


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
    return None if reply is None else Job.from_reply(reply)


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


def list_page(
    q: str, offset: int, limit: int, filter: Optional[tuple[str, str]]
) -> Command[list[Job]]:
    args: list[Any] = ["ORCA.LIST", q, "OFFSET", offset, "LIMIT", limit]
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
    return Command(("ORCA.RESULT", q, key), _opt_raw)


def settings(q: str, order: Optional[str] = None) -> Command[QueueSettings]:
    args = _with(["ORCA.SETTINGS", q], "ORDER", None if order is None else order.upper())
    return Command(tuple(args), QueueSettings.from_reply)


def tick(q: str) -> Command[TickReport]:
    return Command(("ORCA.TICK", q), TickReport.from_reply)


def pop_args(
    q: str, lease_ms: Optional[int], block_ms: Optional[int], count: Optional[int]
) -> tuple[Any, ...]:
    args = _with(["ORCA.POP", q], "LEASE", lease_ms)
    args = _with(args, "BLOCK", block_ms)
    return tuple(_with(args, "COUNT", count))


def pop(q: str, lease_ms: Optional[int], block_ms: Optional[int]) -> Command[Optional[Job]]:
    return Command(
        pop_args(q, lease_ms, block_ms, None), lambda r: None if r is None else Job.from_reply(r, q)
    )


def pop_many(
    q: str, count: int, lease_ms: Optional[int], block_ms: Optional[int]
) -> Command[list[Job]]:
    return Command(pop_args(q, lease_ms, block_ms, count), lambda r: jobs_from_reply(r, q))


def ack(
    q: str, key: str, lease: str, result: Optional[bytes] = None, ttl_ms: Optional[int] = None
) -> Command[None]:
    args = _with(["ORCA.ACK", q, key, lease], "RESULT", result)
    return Command(tuple(_with(args, "TTL", ttl_ms)), _ok)


def nack(q: str, key: str, lease: str, delay_ms: Optional[int] = None) -> Command[NackOutcome]:
    return Command(
        tuple(_with(["ORCA.NACK", q, key, lease], "DELAY", delay_ms)), NackOutcome.from_reply
    )


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

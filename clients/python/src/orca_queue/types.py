"""Typed replies of the ORCA.* commands, decoded from RESP2 flat arrays or RESP3 maps alike.

Every job reply is a set of field/value pairs: a flat ``[field, value, ...]`` array under
RESP2, a map under RESP3 (docs/commands.md, "The job reply"). Field names and strings may
arrive as ``bytes`` or as ``str`` (a client made with ``decode_responses=True``); both are
accepted. Payloads are always handed out as ``bytes``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional


def text(value: Any) -> str:
    """A reply string as ``str`` (bytes are UTF-8; invalid bytes are replaced)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def raw(value: Any) -> bytes:
    """A reply string as ``bytes`` (a ``str`` from a decoding client is re-encoded)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return str(value).encode("utf-8")


def fields(reply: Any) -> dict[str, Any]:
    """Field/value pairs of a reply: a RESP3 map or a RESP2 flat array."""
    if isinstance(reply, Mapping):
        return {text(k): v for k, v in reply.items()}
    if isinstance(reply, (list, tuple)):
        if len(reply) % 2:
            raise ValueError(f"expected field/value pairs, got {len(reply)} elements")
        return {text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
    raise ValueError(f"expected a map or a field/value array, got {type(reply).__name__}")


def _int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def _opt_text(value: Any) -> Optional[str]:
    return None if value is None else text(value)


@dataclass
class LeaseInfo:
    """One running delivery of a job (``leases`` of ORCA.STATUS)."""

    lease: str
    deadline: int
    attempts: int


@dataclass
class Job:
    """A job as the server describes it (POP, STATUS, LIST, DEAD LIST or a write reply).

    ``payload`` is the config exactly as given (``None`` in the write replies of
    ENQUEUE/IMMEDIATE/REENQUEUE/MOVE, which do not echo it); ``config`` is that payload
    parsed as JSON. ``lease``/``deadline``/``attempt`` are set for a popped job,
    ``state``/``position``/``leases``/``retry_at``/``died_at``/``cause`` by the inspection
    commands, ``created`` by the write replies. ``queue`` names the queue it came from.

    ``abandoned`` is set by a :class:`~orca_queue.Worker` when this delivery's result will
    be dropped (its lease was lost, the job was cancelled, or it was handed back at
    shutdown): a long handler may poll it and stop early.
    """

    key: str
    attempts: int = 0
    collation: Optional[str] = None
    created_at: int = 0
    release_at: int = 0
    immediate: bool = False
    nonce: int = 0
    payload: Optional[bytes] = None
    attempt: Optional[int] = None
    lease: Optional[str] = None
    deadline: Optional[int] = None
    created: Optional[bool] = None
    state: Optional[str] = None
    position: Optional[int] = None
    retry_at: Optional[int] = None
    died_at: Optional[int] = None
    cause: Optional[str] = None
    leases: list[LeaseInfo] = field(default_factory=list)
    queue: Optional[str] = None
    abandoned: Optional[str] = field(default=None, compare=False)
    _config: Any = field(default=None, repr=False, compare=False)

    @property
    def config(self) -> Any:
        """The payload parsed as JSON (parsed once; ``None`` without a payload)."""
        if self._config is None and self.payload is not None:
            self._config = json.loads(self.payload)
        return self._config

    @classmethod
    def from_reply(cls, reply: Any, queue: Optional[str] = None) -> Job:
        f = fields(reply)
        if "key" not in f:
            raise ValueError("job reply without a 'key' field")
        leases = [
            LeaseInfo(
                lease=text(g["lease"]), deadline=int(g["deadline"]), attempts=int(g["attempts"])
            )
            for g in (fields(x) for x in (f.get("leases") or []))
        ]
        created = f.get("created")
        return cls(
            key=text(f["key"]),
            attempts=int(f.get("attempts") or 0),
            collation=_opt_text(f.get("collation")),
            created_at=int(f.get("created_at") or 0),
            release_at=int(f.get("release_at") or 0),
            immediate=bool(int(f.get("immediate") or 0)),
            nonce=int(f.get("nonce") or 0),
            payload=None if f.get("payload") is None else raw(f["payload"]),
            attempt=_int(f.get("attempt")),
            lease=_opt_text(f.get("lease")),
            deadline=_int(f.get("deadline")),
            created=None if created is None else bool(int(created)),
            state=_opt_text(f.get("state")),
            position=_int(f.get("position")),
            retry_at=_int(f.get("retry_at")),
            died_at=_int(f.get("died_at")),
            cause=_opt_text(f.get("cause")),
            leases=leases,
            queue=queue,
        )


def jobs_from_reply(reply: Any, queue: Optional[str] = None) -> list[Job]:
    """An array of job replies (POP with COUNT, LIST, DEAD LIST); nil is empty."""
    if reply is None:
        return []
    return [Job.from_reply(x, queue) for x in reply]


@dataclass
class NackOutcome:
    """What ORCA.NACK did: ``retry`` (at ``retry_at``), ``dead``, or ``superseded``."""

    outcome: str
    retry_at: Optional[int] = None
    attempts: Optional[int] = None

    @classmethod
    def from_reply(cls, reply: Any) -> NackOutcome:
        f = fields(reply)
        return cls(text(f["outcome"]), _int(f.get("retry_at")), _int(f.get("attempts")))


@dataclass
class WaitStats:
    """Wait times (ms) of queued jobs: ``min``/``max``/``avg`` are ``None`` when empty."""

    count: int
    avg: Optional[int]
    min: Optional[int]
    max: Optional[int]

    @classmethod
    def from_reply(cls, reply: Any) -> WaitStats:
        f = fields(reply)
        return cls(int(f["count"]), _int(f.get("avg")), _int(f.get("min")), _int(f.get("max")))


@dataclass
class QueueStats:
    """ORCA.STATS: counts by state and wait-time statistics."""

    order: str
    queued: int
    delayed: int
    leased: int
    dead: int
    results: int
    collations: int
    immediate: int
    wait_all: WaitStats
    wait_released: WaitStats

    @classmethod
    def from_reply(cls, reply: Any) -> QueueStats:
        f = fields(reply)
        return cls(
            order=text(f["order"]),
            queued=int(f["queued"]),
            delayed=int(f["delayed"]),
            leased=int(f["leased"]),
            dead=int(f["dead"]),
            results=int(f["results"]),
            collations=int(f["collations"]),
            immediate=int(f["immediate"]),
            wait_all=WaitStats.from_reply(f["wait_all"]),
            wait_released=WaitStats.from_reply(f["wait_released"]),
        )


@dataclass
class QueueSettings:
    """ORCA.SETTINGS: the collation order and the queue's size."""

    order: str
    jobs: int
    collations: int

    @classmethod
    def from_reply(cls, reply: Any) -> QueueSettings:
        f = fields(reply)
        return cls(text(f["order"]), int(f["jobs"]), int(f["collations"]))


@dataclass
class TickReport:
    """ORCA.TICK: how many time-driven changes were applied."""

    died: int
    expired: int
    forgotten: int
    retried: int

    @classmethod
    def from_reply(cls, reply: Any) -> TickReport:
        f = fields(reply)
        return cls(int(f["died"]), int(f["expired"]), int(f["forgotten"]), int(f["retried"]))

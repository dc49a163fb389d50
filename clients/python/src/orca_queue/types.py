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
from typing import Any, Optional, Union


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


def _name(value: Any) -> str:
    return value.decode("utf-8", "replace") if type(value) is bytes else text(value)


def fields(reply: Any) -> dict[str, Any]:
    """Field/value pairs of a reply: a RESP3 map or a RESP2 flat array."""
    if isinstance(reply, Mapping):
        return dict(zip(map(_name, reply.keys()), reply.values(), strict=True))
    if isinstance(reply, (list, tuple)):
        if len(reply) % 2:
            raise ValueError(f"expected field/value pairs, got {len(reply)} elements")
        return dict(zip(map(_name, reply[0::2]), reply[1::2], strict=True))
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
    #: who took it (``WORKER`` of the pop) and when it was handed out (ms)
    worker: Optional[str] = None
    started_at: Optional[int] = None


@dataclass
class Job:
    """A job as the server describes it (POP, STATUS, LIST, DEAD LIST or a write reply).

    ``payload`` is the config exactly as given (``None`` in the write replies of
    ENQUEUE/IMMEDIATE/REENQUEUE/MOVE, which do not echo it); ``config`` is that payload
    parsed as JSON. ``lease``/``deadline``/``attempt`` are set for a popped job,
    ``state``/``position``/``leases``/``retry_at``/``died_at``/``cause`` by the inspection
    commands, ``created`` (and ``delay``, the automatic delay given, when the queue has
    one) by the write replies. ``state`` is ``queued``, ``held``, ``delayed``, ``leased``
    or ``dead``; a held job names its ``gate``; ``capped`` is True for a queued job that
    waits only because its collation is at the queue's running cap. ``queue`` names the
    queue it came from (the ``queue`` field of ORCA.MPOP, or the queue it was popped from).
    A running job names its ``worker`` (``WORKER`` of the pop; a Worker sends
    ``host:pid[:name]``) and ``started_at`` (when it was handed out); a job waiting for a
    retry (``delayed``) or ``dead`` carries its last failure's ``error`` (the text of
    ``ORCA.NACK ... ERROR``); a finished job whose result is kept has ``state``
    ``done`` and ``finished_at``.

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
    gate: Optional[str] = None
    capped: Optional[bool] = None
    delay: Optional[int] = None
    queue: Optional[str] = None
    worker: Optional[str] = None
    started_at: Optional[int] = None
    error: Optional[str] = None
    finished_at: Optional[int] = None
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
                lease=text(g["lease"]),
                deadline=int(g["deadline"]),
                attempts=int(g["attempts"]),
                worker=_opt_text(g.get("worker")),
                started_at=_int(g.get("started_at")),
            )
            for g in (fields(x) for x in (f.get("leases") or []))
        ]
        created = f.get("created")
        capped = f.get("capped")
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
            gate=_opt_text(f.get("gate")),
            capped=None if capped is None else bool(int(capped)),
            delay=_int(f.get("delay")),
            queue=_opt_text(f.get("queue")) or queue,
            worker=_opt_text(f.get("worker")),
            started_at=_int(f.get("started_at")),
            error=_opt_text(f.get("error")),
            finished_at=_int(f.get("finished_at")),
        )


# FORMAT VALUES (docs/commands.md, "Deliveries as values"): a delivery's values in this order,
# with MPOP's queue 12th; a later module may add values after these, which are ignored.
_VALUES = 11


def _from_values(v: list[Any], queue: Optional[str], mpop: bool) -> Job:
    """A ``FORMAT VALUES`` delivery, read by position (no field names to match)."""
    want = _VALUES + 1 if mpop else _VALUES
    if len(v) < want:
        raise ValueError(f"a FORMAT VALUES delivery has {want} values, got {len(v)}")
    attempt, attempts, collation, created_at, deadline, immediate, key, lease, nonce = v[:9]
    payload, release_at = v[9], v[10]
    job = Job(
        key=_name(key),
        attempts=int(attempts),
        collation=None if collation is None else _name(collation),
        created_at=int(created_at),
        release_at=int(release_at),
        immediate=immediate == 1,
        nonce=int(nonce),
        payload=None if payload is None else raw(payload),
        attempt=None if attempt is None else int(attempt),
        lease=None if lease is None else _name(lease),
        deadline=None if deadline is None else int(deadline),
        queue=_name(v[_VALUES]) if mpop else queue,
    )
    if not job.key:
        raise ValueError("job reply without a 'key' field")
    return job


def delivery(reply: Any, queue: Optional[str] = None, mpop: bool = False) -> Job:
    """One job handed out by POP/MPOP/ACK ... NEXT/NACK ... NEXT/MACK ... NEXT: its values
    (``FORMAT VALUES``: an array whose first item is ``attempt``, a number) or its map (a
    server that does not know ``FORMAT``: a RESP3 map, or a RESP2 array whose first item is
    the name ``attempt``). ``mpop``: the 12th value names the queue."""
    if type(reply) is list and reply and not isinstance(reply[0], (bytes, str)):
        return _from_values(reply, queue, mpop)
    return Job.from_reply(reply, queue)


def deliveries(reply: Any, queue: Optional[str] = None, mpop: bool = False) -> list[Job]:
    """An array of deliveries (POP/MPOP with COUNT, MACK ... NEXT); nil is empty."""
    if reply is None:
        return []
    return [delivery(x, queue, mpop) for x in reply]


def opt_delivery(reply: Any, queue: Optional[str] = None, mpop: bool = False) -> Optional[Job]:
    """One delivery or nil."""
    return None if reply is None else delivery(reply, queue, mpop)


def jobs_from_reply(reply: Any, queue: Optional[str] = None) -> list[Job]:
    """An array of job replies (POP/MPOP with COUNT, LIST, DEAD LIST); nil is empty."""
    if reply is None:
        return []
    return [Job.from_reply(x, queue) for x in reply]


def opt_job(reply: Any, queue: Optional[str] = None) -> Optional[Job]:
    """One job reply or nil (POP, MPOP, ACK/NACK ... NEXT, STATUS)."""
    return None if reply is None else Job.from_reply(reply, queue)


def counts(reply: Any) -> dict[str, int]:
    """A name -> count map (``gates`` and ``running`` of ORCA.STATS)."""
    return {k: int(v) for k, v in fields(reply).items()}


@dataclass
class NackOutcome:
    """What ORCA.NACK did: ``retry`` (at ``retry_at``), ``dead``, or ``superseded``."""

    outcome: str
    retry_at: Optional[int] = None
    attempts: Optional[int] = None
    #: ``nack(..., forward=...)``: the successor enqueued because the job died.
    successor: Optional[Job] = None

    @classmethod
    def from_reply(cls, reply: Any) -> NackOutcome:
        f = fields(reply)
        return cls(text(f["outcome"]), _int(f.get("retry_at")), _int(f.get("attempts")))

    @classmethod
    def with_successor(cls, reply: Any) -> NackOutcome:
        """The reply of ``ORCA.NACK ... FORWARD``: [outcome, successor or nil]."""
        outcome, successor = reply
        o = cls.from_reply(outcome)
        if successor is not None:
            o.successor = Job.from_reply(successor)
        return o


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
class AutoDelay:
    """Automatic delay by submission rate (``ORCA.SETTINGS ... AUTODELAY``): a new
    collation job is delayed by ``step_ms`` x (the jobs its collation submitted in the
    ``window_ms`` before it), at most ``cap_ms`` (0 = no cap). ``window_ms`` 0 is off."""

    window_ms: int
    step_ms: int
    cap_ms: int = 0

    @property
    def enabled(self) -> bool:
        return self.window_ms > 0


AutoDelayArg = Union[AutoDelay, tuple[int, int], tuple[int, int, int]]


@dataclass
class QueueSettings:
    """A queue's own settings (ORCA.SETTINGS, and ``settings`` of ORCA.STATS), with its
    size: ``jobs`` queued, ``held`` behind closed gates, ``collations``.

    ``lifetime_ms``: a waiting job not handed out this long after its release time becomes
    a dead letter (0 = never). ``max_running``: the running cap per collation (0 = none).
    ``dead_max`` / ``dead_ttl_ms``: bounds of the dead-letter list (0 = none).
    ``result_max``: most kept ACK results (0 = no bound)."""

    order: str
    jobs: int
    collations: int
    held: int = 0
    lifetime_ms: int = 0
    autodelay: AutoDelay = field(default_factory=lambda: AutoDelay(0, 0, 0))
    max_running: int = 0
    dead_max: int = 0
    dead_ttl_ms: int = 0
    result_max: int = 0

    @classmethod
    def from_reply(
        cls, reply: Any, *, jobs: int = 0, held: int = 0, collations: int = 0
    ) -> QueueSettings:
        """``jobs``/``held``/``collations`` fill in what the reply lacks (the ``settings`` map
        of ORCA.STATS has only the settings; ORCA.STATS counts them itself)."""
        f = fields(reply)
        return cls(
            order=text(f["order"]),
            jobs=int(f.get("jobs", jobs)),
            collations=int(f.get("collations", collations)),
            held=int(f.get("held", held)),
            lifetime_ms=int(f.get("lifetime") or 0),
            autodelay=AutoDelay(
                int(f.get("autodelay_window") or 0),
                int(f.get("autodelay_step") or 0),
                int(f.get("autodelay_cap") or 0),
            ),
            max_running=int(f.get("maxrunning") or 0),
            dead_max=int(f.get("deadmax") or 0),
            dead_ttl_ms=int(f.get("deadttl") or 0),
            result_max=int(f.get("resultmax") or 0),
        )


@dataclass
class QueueStats:
    """ORCA.STATS: counts by state, closed gates (gate -> held jobs), the collations with
    leased jobs (collation -> leased jobs, the 100 busiest), the queue's settings and
    wait-time statistics."""

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
    held: int = 0
    gates: dict[str, int] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)
    settings: Optional[QueueSettings] = None

    @classmethod
    def from_reply(cls, reply: Any) -> QueueStats:
        f = fields(reply)
        queued, held, collations = int(f["queued"]), int(f.get("held") or 0), int(f["collations"])
        settings = f.get("settings")
        return cls(
            order=text(f["order"]),
            queued=queued,
            delayed=int(f["delayed"]),
            leased=int(f["leased"]),
            dead=int(f["dead"]),
            results=int(f["results"]),
            collations=collations,
            immediate=int(f["immediate"]),
            wait_all=WaitStats.from_reply(f["wait_all"]),
            wait_released=WaitStats.from_reply(f["wait_released"]),
            held=held,
            gates=counts(f.get("gates") or []),
            running=counts(f.get("running") or []),
            settings=None
            if settings is None
            else QueueSettings.from_reply(settings, jobs=queued, held=held, collations=collations),
        )


@dataclass
class TickReport:
    """ORCA.TICK: how many time-driven changes were applied (``lifetime``: waiting jobs
    whose lifetime ran out; they are counted in ``died`` too)."""

    died: int
    expired: int
    forgotten: int
    retried: int
    lifetime: int = 0

    @classmethod
    def from_reply(cls, reply: Any) -> TickReport:
        f = fields(reply)
        return cls(
            int(f["died"]),
            int(f["expired"]),
            int(f["forgotten"]),
            int(f["retried"]),
            int(f.get("lifetime") or 0),
        )

"""Durable writes: a write that returns only once replicas (or AOF fsyncs) confirm it.

A :class:`~orca_queue.Queue` made with ``wait_replicas=n`` (and/or ``wait_aof=True``) sends
each write pipelined with ``WAIT n timeout`` (or ``WAITAOF 1 n timeout``) on the same
connection, in one round trip: ``WAIT`` counts the replicas that acknowledged everything this
connection wrote, so its answer covers the write just before it. Fewer than asked within the
timeout raises :class:`~orca_queue.NotReplicatedError` (the write itself stands on the master).

What a caller may assume:

- **Success**: the write is on the master and on at least ``n`` replicas (with ``wait_aof``:
  fsynced to the master's AOF and to ``n`` replicas' AOFs). A Sentinel failover promotes the
  replica with the most data, so the write survives the loss of the master.
- **NotReplicatedError**: the write was applied on the master and may or may not survive its
  loss. An enqueue can be sent again (it is a PUT: the same job is created or updated once);
  an ACK sent again after it was applied is refused as ``LeaseLostError`` (it was acked).
- **A connection error**: the write may or may not have been applied. The same as above: an
  enqueue may be sent again; a worker re-sends an ACK/NACK while the lease may be held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from redis.exceptions import ResponseError

from .errors import NotReplicatedError, map_error

# The commands that change nothing: no WAIT after them. Anything else is a write (a read form
# of ORCA.SETTINGS or ORCA.DEAD LIST gets a WAIT that returns at once: nothing new to confirm).
READS = frozenset(
    {"ORCA.STATUS", "ORCA.LIST", "ORCA.STATS", "ORCA.LEN", "ORCA.CHECK", "ORCA.RESULT"}
)


def is_write(args: tuple[Any, ...]) -> bool:
    return str(args[0]).upper() not in READS


@dataclass(frozen=True)
class Durability:
    """How a queue's writes wait: ``replicas`` replicas (``WAIT``), the AOF too with ``aof``
    (``WAITAOF 1 replicas``, Redis 7.2+ / Valkey), for at most ``timeout_ms``."""

    replicas: int = 0
    timeout_ms: int = 1000
    aof: bool = False

    def __post_init__(self) -> None:
        checks = (("wait_replicas", self.replicas, 0), ("wait_timeout_ms", self.timeout_ms, 1))
        for name, value, low in checks:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}")

    @property
    def on(self) -> bool:
        return self.replicas > 0 or self.aof

    def command(self) -> tuple[Any, ...]:
        if self.aof:
            return ("WAITAOF", 1, self.replicas, self.timeout_ms)
        return ("WAIT", self.replicas, self.timeout_ms)

    def shortfall(self, reply: Any) -> Optional[tuple[str, int, Optional[bool]]]:
        """None if ``reply`` (of :meth:`command`) confirms the write, else (why, replicas that
        confirmed, local fsync confirmed or None)."""
        if self.aof:
            local, replicas = int(reply[0]), int(reply[1])
            if local >= 1 and replicas >= self.replicas:
                return None
            why = f"WAITAOF: local fsync {local}/1, {replicas}/{self.replicas} replicas"
            return why, replicas, local >= 1
        replicas = int(reply)
        if replicas >= self.replicas:
            return None
        return f"WAIT: {replicas}/{self.replicas} replicas", replicas, None

    def check(self, reply: Any, value: Any) -> None:
        """Raises :class:`NotReplicatedError` (carrying ``value``, what the write returned)
        unless ``reply`` confirms the write."""
        short = self.shortfall(reply)
        if short is None:
            return
        why, replicas, local = short
        raise NotReplicatedError(
            f"the write was applied by the master but not confirmed within "
            f"{self.timeout_ms} ms ({why})",
            value,
            replicas,
            self.replicas,
            local,
        )


NO_WAIT = Durability()

WAITAOF_MISSING = (
    "wait_aof needs WAITAOF (Redis 7.2+, Valkey 7.2+); this server does not have it: "
    "use wait_replicas alone"
)


def finish(durability: Durability, parse: Any, replies: list[Any]) -> Any:
    """The value of a durable write from the replies of ``[write, WAIT]``: the write's error
    reply raised (mapped), the WAIT checked (see :meth:`Durability.check`)."""
    reply, waited = replies
    if isinstance(reply, ResponseError):
        raise map_error(reply)
    value = parse(reply)
    if isinstance(waited, ResponseError):
        if durability.aof and "unknown command" in str(waited).lower():
            raise NotReplicatedError(WAITAOF_MISSING, value, 0, durability.replicas, None)
        raise waited
    durability.check(waited, value)
    return value


def check_durable_client(client: Any, durability: Durability) -> None:
    """Durable writes need the WAIT on the connection that wrote: not offered on a cluster
    client, whose pipelines route each command by its key (WAIT has none)."""
    if durability.on and hasattr(client, "get_node_from_key"):
        raise ValueError(
            "wait_replicas / wait_aof are not supported on a Redis Cluster client: a cluster "
            "client may send WAIT on another connection than the write it should confirm"
        )

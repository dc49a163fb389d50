"""Exception classes for the server's error replies (docs/commands.md), and
:class:`JobFailed` for a handler's expected failures.

Every reply class derives from :class:`OrcaError`, itself a ``redis.exceptions.ResponseError``,
so code that already catches redis-py's errors keeps working. The message is the server's text
without the ``ERR`` prefix (redis-py strips it).
"""

from __future__ import annotations

import re
from typing import Any, Optional

from redis.exceptions import RedisError, ResponseError


class JobFailed(Exception):
    """Raise it (or a subclass) from a worker's handler for an expected failure (a result the
    web app did not accept, a grader that is down): the delivery is NACKed like for any
    exception, but the worker logs one line without a traceback. Not a server error."""


class OrcaError(ResponseError):
    """An error reply of an ORCA.* command."""


class LeaseLostError(OrcaError):
    """The lease is not held: it expired and the job was handed out again, or it was
    already acked or nacked. The worker must drop its result."""


class JobCancelledError(LeaseLostError):
    """The job was deleted (ORCA.DELETE) while it ran: its lease is cancelled."""


class QueueFullError(OrcaError):
    """The queue holds ``orca.max-queue-length`` waiting jobs (or a key's 2^30 - 1)."""


class BadConfigError(OrcaError):
    """The job config was refused (not a JSON object, no ``key``, bad priority, collation
    or gate, over a size limit)."""


class NoSuchJobError(OrcaError):
    """No job under that orca key (or no such queue)."""


class JobStateError(OrcaError):
    """The job is in a state that does not allow this (an immediate job cannot be moved;
    a dead job whose key is queued again cannot be requeued)."""


class JobNotQueuedError(JobStateError):
    """ORCA.MOVE of a job that exists but is not in the queue order: ``state`` says where it
    is (``leased``: running; ``delayed``: waiting for its retry at ``retry_at``; ``dead``:
    a dead letter; ``held``: behind the closed gate ``gate``), ``None`` if the server did
    not say."""

    state: Optional[str]
    gate: Optional[str]
    retry_at: Optional[int]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.state, self.gate, self.retry_at = None, None, None
        for prefix, state in _NOT_QUEUED:
            if message.startswith(prefix):
                self.state = state
        held = re.match(r"job is held behind gate '(.*)' \(ORCA\.GATE", message, re.S)
        if held:
            self.gate = held.group(1)
        retry = re.match(r"job is waiting to be retried \(at (\d+)\)", message)
        if retry:
            self.retry_at = int(retry.group(1))


_NOT_QUEUED = (
    ("job is running", "leased"),
    ("job is waiting to be retried", "delayed"),
    ("job is a dead letter", "dead"),
    ("job is held behind gate", "held"),
)


class WrongTypeError(OrcaError):
    """The key holds another Redis type than an Orca queue."""


class InvariantError(OrcaError):
    """ORCA.CHECK found a broken queue invariant."""


class InvalidArgumentError(OrcaError):
    """An option or argument was refused (bad integer, unknown option, COUNT out of range,
    time out of range, BLOCK inside MULTI, ...)."""


class ResultTooLargeError(InvalidArgumentError):
    """ORCA.ACK refused its ``RESULT``: over ``orca.max-payload-bytes``. Nothing changed (the
    lease is still held); a worker NACKs the delivery as failed with this error."""


class NotReplicatedError(RedisError):
    """A durable write (a :class:`~orca_queue.Queue` with ``wait_replicas`` / ``wait_aof``) was
    applied by the master, but fewer replicas than asked confirmed it (``WAIT`` / ``WAITAOF``)
    within ``wait_timeout_ms``. The write is not undone: it holds on the master and may still
    reach the replicas, or be lost if the master fails before they have it. ``value`` is what
    the write returned (its parsed reply), ``replicas`` how many replicas confirmed, ``wanted``
    how many were asked for, ``local`` whether the master's own AOF fsync was confirmed
    (``WAITAOF``; ``None`` for ``WAIT``)."""

    def __init__(
        self, message: str, value: Any, replicas: int, wanted: int, local: Optional[bool]
    ) -> None:
        super().__init__(message)
        self.value, self.replicas, self.wanted, self.local = value, replicas, wanted, local


# (server text prefix, class), first match wins. "ERR " is already stripped by redis-py.
_BY_PREFIX: tuple[tuple[str, type[OrcaError]], ...] = (
    ("lease not held", LeaseLostError),
    ("job was cancelled", JobCancelledError),
    ("queue is full", QueueFullError),
    ("import would exceed", QueueFullError),
    ("no such job", NoSuchJobError),
    ("immediate jobs cannot be moved", JobStateError),
    ("job is already queued", JobStateError),
    *((prefix, JobNotQueuedError) for prefix, _ in _NOT_QUEUED),
    ("job is not in the queue order", JobNotQueuedError),
    ("WRONGTYPE", WrongTypeError),
    ("queue invariant broken", InvariantError),
    ("config ", BadConfigError),
    ("invalid config JSON", BadConfigError),
    ("priority ", BadConfigError),
    ("collation ", BadConfigError),
    ("'gate' must be", BadConfigError),
    ("gate must not be empty", BadConfigError),
    ("gate is ", BadConfigError),
    ("result is ", ResultTooLargeError),
    ("internal error in the orca module", OrcaError),
)

# Errors that mean "this is not an ORCA.* problem": leave redis-py's own classes alone.
_FOREIGN = ("unknown command", "wrong number of arguments", "CROSSSLOT")


def strip_err(message: str) -> str:
    return message[4:] if message.startswith("ERR ") else message


def map_error(exc: ResponseError) -> ResponseError:
    """The Orca exception for a redis-py ``ResponseError`` (or the error itself when it is
    not one of the module's replies, e.g. ``OutOfMemoryError`` or ``ReadOnlyError``)."""
    if isinstance(exc, OrcaError) or type(exc) is not ResponseError:
        return exc
    message = strip_err(str(exc))
    for prefix, cls in _BY_PREFIX:
        if message.startswith(prefix):
            return cls(message)
    if any(message.startswith(p) for p in _FOREIGN):
        return exc
    return InvalidArgumentError(message)

"""Exception classes for the server's error replies (docs/commands.md), and
:class:`JobFailed` for a handler's expected failures.

Every reply class derives from :class:`OrcaError`, itself a ``redis.exceptions.ResponseError``,
so code that already catches redis-py's errors keeps working. Every error reply starts with a
code (docs/commands.md, "Error codes"): the class is chosen by that code alone, never by the
text. ``code`` holds it; the message is the text after the code and its fields.
"""

from __future__ import annotations

from typing import Any, Optional
from urllib.parse import unquote

from redis.exceptions import RedisError, ResponseError


class JobFailed(Exception):
    """Raise it (or a subclass) from a worker's handler for an expected failure (a result the
    web app did not accept, a grader that is down): the delivery is NACKed like for any
    exception, but the worker logs one line without a traceback. Not a server error.

    ``delay_ms``: when to retry (the NACK's ``DELAY``: a receiver's ``Retry-After``), instead
    of the worker's ``nack_delay_ms`` or the server's backoff."""

    def __init__(self, *args: object, delay_ms: Optional[int] = None) -> None:
        super().__init__(*args)
        if delay_ms is not None and (isinstance(delay_ms, bool) or not isinstance(delay_ms, int)):
            raise TypeError("delay_ms must be an integer (ms)")
        self.delay_ms = None if delay_ms is None else max(0, delay_ms)


class OrcaError(ResponseError):
    """An error reply of an ORCA.* command. ``code`` is the reply's code (``"NOLEASE"``,
    ``"ERR"``, ...), the message its text."""

    code: str

    def __init__(self, message: str, code: str = "ERR") -> None:
        super().__init__(message)
        self.code = code


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

    def __init__(
        self,
        message: str,
        code: str = "NOTQUEUED",
        *,
        gate: Optional[str] = None,
        retry_at: Optional[int] = None,
    ) -> None:
        super().__init__(message, code)
        self.state = _NOT_QUEUED.get(code)
        self.gate, self.retry_at = gate, retry_at


# The code of each state a job can be in outside the queue order.
_NOT_QUEUED = {"LEASED": "leased", "DELAYED": "delayed", "DEAD": "dead", "HELD": "held"}


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


# The class of each code of docs/commands.md's table. ERR (a malformed command) and any code
# added later give InvalidArgumentError.
_BY_CODE: dict[str, type[OrcaError]] = {
    "WRONGTYPE": WrongTypeError,
    "BADCONFIG": BadConfigError,
    "NOJOB": NoSuchJobError,
    "IMMEDIATE": JobStateError,
    **{code: JobNotQueuedError for code in (*_NOT_QUEUED, "NOTQUEUED")},
    "ALREADYQUEUED": JobStateError,
    "NOLEASE": LeaseLostError,
    "CANCELLED": JobCancelledError,
    "QUEUEFULL": QueueFullError,
    "TOOLARGE": ResultTooLargeError,
    "TOOMANY": InvalidArgumentError,
    "TIMERANGE": InvalidArgumentError,
    "CORRUPT": InvalidArgumentError,
    "INVARIANT": InvariantError,
    "INTERNAL": OrcaError,
}

# How many fixed fields follow each code (docs/commands.md): DELAYED <retry_at>, HELD <gate>,
# TOOMANY <max>.
_FIELDS = {"DELAYED": 1, "HELD": 1, "TOOMANY": 1}

# Replies that are not the module's own: leave redis-py's error alone.
_FOREIGN = ("unknown command", "wrong number of arguments", "CROSSSLOT")


def split_reply(message: str) -> tuple[str, list[str], str]:
    """``(code, fields, text)`` of a reply as redis-py gives it: a module code stays in the
    text (redis-py strips only the codes it knows, as ``ERR``); a text without one of the
    module's codes is an ``ERR`` whose code redis-py already stripped."""
    code, _, rest = message.partition(" ")
    if code not in _BY_CODE:
        return "ERR", [], message[4:] if message.startswith("ERR ") else message
    n = _FIELDS.get(code, 0)
    parts = rest.split(" ", n)
    return code, parts[:n], parts[n] if len(parts) > n else ""


def strip_err(message: str) -> str:
    """The text of a reply, without its code and fields."""
    return split_reply(message)[2]


def error_for(code: str, fields: list[str], text: str) -> OrcaError:
    """The Orca exception for a reply's code, fields and text."""
    cls = _BY_CODE.get(code, InvalidArgumentError)
    if cls is JobNotQueuedError:
        field = fields[0] if fields else ""
        return JobNotQueuedError(
            text,
            code,
            gate=unquote(field) if code == "HELD" and field else None,
            retry_at=int(field) if code == "DELAYED" and field.isdigit() else None,
        )
    return cls(text, code)


def map_error(exc: ResponseError) -> ResponseError:
    """The Orca exception for a redis-py ``ResponseError`` (or the error itself when it is
    not one of the module's replies, e.g. ``OutOfMemoryError`` or ``ReadOnlyError``)."""
    if isinstance(exc, OrcaError) or type(exc) is not ResponseError:
        return exc
    code, fields, text = split_reply(str(exc))
    if code == "ERR" and text.startswith(_FOREIGN):
        return exc
    return error_for(code, fields, text)

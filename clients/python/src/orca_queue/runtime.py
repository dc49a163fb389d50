"""What the thread and asyncio workers share: options, hooks, bookkeeping of running jobs."""

from __future__ import annotations

import logging
import os
import socket
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from . import protocol as P
from .durability import NO_WAIT, Durability, is_write
from .errors import JobCancelledError, JobFailed, LeaseLostError, ResultTooLargeError, map_error
from .handoff import Forward
from .strategy import FetchStrategy
from .types import Job, NackOutcome

log = logging.getLogger("orca_queue.worker")

OnCompleted = Callable[[Job, Any], None]
OnFailed = Callable[[Job, BaseException, Optional[NackOutcome]], None]
OnLost = Callable[[Job, str], None]


def _integer(name: str, value: object, low: int, why: str = "") -> None:
    if isinstance(value, bool) or not (isinstance(value, int) and value >= low):
        raise ValueError(f"{name} must be an integer >= {low}{why}")


@dataclass
class WorkerOptions:
    """Settings of a worker (see :class:`orca_queue.Worker`)."""

    concurrency: int = 1
    lease_ms: int = 300_000
    block_ms: int = 5_000
    grace_ms: int = 30_000
    heartbeat_ms: Optional[int] = None
    result_ttl_ms: Optional[int] = None
    nack_delay_ms: Optional[int] = None
    handle_signals: bool = True
    ack_next: bool = True

    def __post_init__(self) -> None:
        # The same rules (and words) as the TypeScript client's. What the server gets (LEASE,
        # BLOCK, TTL, DELAY) must be integers; grace and heartbeat periods are local times.
        _integer("concurrency", self.concurrency, 1)
        _integer("lease_ms", self.lease_ms, 1000, " (heartbeats run at about a third of it)")
        _integer("block_ms", self.block_ms, 1, " (the worker must notice a stop)")
        if self.heartbeat_ms is None:
            self.heartbeat_ms = self.lease_ms // 3
        if not 0 < self.heartbeat_ms < self.lease_ms:
            raise ValueError("heartbeat_ms must be between 0 and lease_ms")
        if not self.grace_ms >= 0:  # NaN too
            raise ValueError("grace_ms must be >= 0")
        if self.result_ttl_ms is not None:
            _integer("result_ttl_ms", self.result_ttl_ms, 0)
        if self.nack_delay_ms is not None:
            _integer("nack_delay_ms", self.nack_delay_ms, 0)

    @property
    def beat_s(self) -> float:
        return (self.heartbeat_ms or self.lease_ms // 3) / 1000

    @property
    def tick_s(self) -> float:
        """How often the heartbeat loop looks for jobs due a heartbeat."""
        return max(0.05, min(self.beat_s / 4, 1.0))


@dataclass
class Hooks:
    """Callbacks for job events; an exception in one is logged, never propagated."""

    on_completed: Optional[OnCompleted] = None
    on_failed: Optional[OnFailed] = None
    on_lost: Optional[OnLost] = None

    def completed(self, job: Job, result: Any) -> None:
        log.debug("job %s completed (queue %s, attempt %s)", job.key, job.queue, job.attempt)
        _call(self.on_completed, job, result)

    def failed(self, job: Job, exc: BaseException, outcome: Optional[NackOutcome]) -> None:
        what = outcome.outcome if outcome else "not nacked"
        # An expected failure (JobFailed) is one line; anything else carries its traceback.
        trace = (
            ""
            if isinstance(exc, JobFailed)
            else "\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
        )
        log.warning(
            "job %s failed (queue %s, attempt %s; %s): %s%s",
            job.key,
            job.queue,
            job.attempt,
            what,
            error_text(exc),
            trace,
        )
        _call(self.on_failed, job, exc, outcome)

    def lost(self, job: Job, reason: str) -> bool:
        """Mark the delivery abandoned (first reason wins); False if it already was."""
        if job.abandoned is not None:
            return False
        job.abandoned = reason
        log.warning(
            "job %s (queue %s, lease %s): %s; its result will be dropped",
            job.key,
            job.queue,
            job.lease,
            reason,
        )
        _call(self.on_lost, job, reason)
        return True


def _call(hook: Optional[Callable[..., None]], *args: Any) -> None:
    if hook is None:
        return
    try:
        hook(*args)
    except Exception:
        log.exception("worker hook %r raised", hook)


def worker_name(name: Optional[str] = None) -> str:
    """``host:pid``, or ``host:pid:name``: how a Worker names itself on its pops."""
    base = f"{socket.gethostname()}:{os.getpid()}"
    return f"{base}:{name}" if name else base


def error_text(exc: BaseException) -> str:
    """``Type: message`` of a handler's exception (what a failed event carries)."""
    return f"{type(exc).__name__}: {exc}"


def lost_reason(exc: LeaseLostError) -> str:
    return "job was cancelled" if isinstance(exc, JobCancelledError) else "lease lost"


@dataclass
class Running:
    """A job being handled: when it was last extended and whether its result still counts."""

    job: Job
    last_beat: float = field(default_factory=time.monotonic)
    finished: bool = False


def queue_names(queue_or_queues: Any) -> list[Any]:
    """The queues a worker serves, all on one client."""
    queues: list[Any] = (
        list(queue_or_queues) if isinstance(queue_or_queues, (list, tuple)) else [queue_or_queues]
    )
    if not queues:
        raise ValueError("a worker needs at least one queue")
    clients = {id(q.client) for q in queues}
    if len(clients) != 1:
        raise ValueError("every queue of a worker must use the same Redis client")
    names = [q.name for q in queues]
    if len(set(names)) != len(names):
        raise ValueError("a queue is named twice")
    return queues


def is_connection_error(value: Any) -> bool:
    """A connection lost or timed out (the command may or may not have run), as opposed to an
    error reply (which is final)."""
    return isinstance(value, (ConnectionError, TimeoutError, OSError)) and not isinstance(
        value, ResponseError
    )


# Commands whose third argument is an orca key (named in a "not confirmed" warning).
_KEYED = frozenset({"ORCA.ACK", "ORCA.NACK", "ORCA.EXTEND"})

# A finish (ACK/NACK) that failed on a connection error is re-sent until this long before its
# lease would end, then given up (the job comes back once the lease expires).
RETRY_MARGIN_S = 0.25

# At a stop, how long the worker waits for the ACK/NACKs in flight (whose replies may bring
# a job leased by NEXT, to hand back) after the grace period.
FINISH_WAIT_S = 10.0


class WorkerBase:
    """Options, hooks, counts and the I/O-free steps shared by the thread and asyncio workers.

    ``queue_or_queues``: one queue or a list (all on one client; served in that order, with
    ``ORCA.MPOP``). ``lease_ms``: lease of each delivery (heartbeats extend it every
    ``heartbeat_ms``, a third of the lease by default). ``block_ms``: how long one blocking
    pop waits. ``grace_ms``: at a stop, how long running handlers may take before their jobs
    are handed back. ``ack_next``: a slot that finishes a job takes its next one in the same
    round trip (``ORCA.ACK ... NEXT``); False: plain ACK/NACK, free slots are refilled by
    the fetcher. ``name``: the Worker names itself ``host:pid:name`` (``host:pid`` without
    one) on every pop, so ``ORCA.STATUS``, ``ORCA.LIST ... STATE LEASED`` and the dashboard
    show who runs each job; a failed job is NACKed with ``ERROR <Type: message>`` of the
    handler's exception. Hooks ``on_completed(job, result)``, ``on_failed(job, exc, outcome)``,
    ``on_lost(job, reason)``; their exceptions are logged. A bad number (``concurrency`` or
    ``lease_ms``/``block_ms``/``result_ttl_ms``/``nack_delay_ms`` not an integer in range,
    ``heartbeat_ms`` not within the lease, ``grace_ms`` < 0) raises ``ValueError`` here.
    """

    def __init__(
        self,
        queue_or_queues: Any,
        handler: Callable[[Job], Any],
        *,
        concurrency: int = 1,
        lease_ms: int = 300_000,
        block_ms: int = 5_000,
        grace_ms: int = 30_000,
        heartbeat_ms: Optional[int] = None,
        result_ttl_ms: Optional[int] = None,
        nack_delay_ms: Optional[int] = None,
        handle_signals: bool = True,
        ack_next: bool = True,
        name: Optional[str] = None,
        on_completed: Optional[OnCompleted] = None,
        on_failed: Optional[OnFailed] = None,
        on_lost: Optional[OnLost] = None,
        logger: Optional[logging.Logger] = None,
    ) -> None:
        self.queues = queue_names(queue_or_queues)
        self.handler = handler
        self.options = WorkerOptions(
            concurrency,
            lease_ms,
            block_ms,
            grace_ms,
            heartbeat_ms,
            result_ttl_ms,
            nack_delay_ms,
            handle_signals,
            ack_next,
        )
        self.hooks = Hooks(on_completed, on_failed, on_lost)
        self.log = logger or log
        # who takes the jobs (WORKER on every pop): STATUS, LIST and the dashboard show it
        self.name = worker_name(name)
        self.strategy = FetchStrategy(
            [q.name for q in self.queues],
            worker=self.name,
            lease_ms=lease_ms,
            block_ms=block_ms,
            result_ttl_ms=result_ttl_ms,
            nack_delay_ms=nack_delay_ms,
            ack_next=ack_next,
        )
        self.counts = {"completed": 0, "failed": 0, "lost": 0, "handed_back": 0}
        # Durable writes: a Worker built on a Queue with wait_replicas / wait_aof waits as it
        # does (every pop, ACK, NACK and hand-back pipelined with WAIT / WAITAOF).
        self.durability: Durability = getattr(self.queues[0], "durability", NO_WAIT)
        if self.durability.on:
            self.counts["unconfirmed"] = 0
        # A SystemExit / KeyboardInterrupt a handler raised: run() re-raises it once stopped.
        self._exit: Optional[BaseException] = None
        self._setup()

    def _setup(self) -> None:
        """The runtime's own state (called at the end of ``__init__``)."""

    def _count(self, what: str, n: int = 1) -> None:
        self.counts[what] += n

    def _begin_stop(self) -> None:
        """Stop taking jobs, with the grace period (as a first SIGTERM)."""
        raise NotImplementedError

    def _handler_raised(self, exc: BaseException) -> None:
        """A handler raised ``exc``, which is not an ``Exception`` (its delivery is NACKed as
        failed like for any exception). For ``SystemExit`` / ``KeyboardInterrupt`` the worker
        begins its graceful stop and ``run()`` re-raises the first one once stopped."""
        if not isinstance(exc, (SystemExit, KeyboardInterrupt)):
            return
        self.log.error(
            "a handler raised %s: the worker stops (running jobs get the grace period) and "
            "run() re-raises it",
            type(exc).__name__,
        )
        if self._exit is None:
            self._exit = exc
        self._begin_stop()

    @staticmethod
    def _encode(
        value: Any, error: Optional[BaseException]
    ) -> tuple[Optional[bytes], Optional[BaseException]]:
        """The ACK result of a handler's value, or the error to NACK with."""
        if error is not None:
            return None, error
        try:
            return P.encode_result(value), None
        except (TypeError, ValueError) as e:
            return None, TypeError(f"handler result is not JSON-serializable: {e}")

    def _finish_commands(
        self, job: Job, value: Any, error: Optional[BaseException], take_next: bool
    ) -> tuple[list[P.Command[Any]], Optional[BaseException]]:
        """The commands that finish ``job`` (see :meth:`FetchStrategy.finish`) and the
        error it failed with (a result that cannot be encoded is one)."""
        if error is None and isinstance(value, Forward):
            result, error = self._encode(value.result, None)
            if error is None:
                to = (P.queue_name(value.queue), value.config)
                return self.strategy.finish_forward(job, result, to, take_next), None
        result, error = self._encode(value, error)
        delay = error.delay_ms if isinstance(error, JobFailed) else None
        text = error_text(error) if error is not None else None
        return (
            self.strategy.finish(job, result, error is not None, take_next, delay, error=text),
            error,
        )

    def _refused_result(
        self,
        job: Job,
        error: Optional[BaseException],
        cmds: list[P.Command[Any]],
        replies: list[Any],
        take_next: bool,
    ) -> Optional[tuple[list[P.Command[Any]], BaseException]]:
        """When the server refused the ACK's result (over ``orca.max-payload-bytes``; the
        lease is still held, nothing was handed out): the commands that NACK the delivery
        instead, and the error it failed with. A pop that went with the refused ACK already
        took its job, so the NACK then goes alone; after a refused ``ACK ... NEXT`` it comes
        with a pop for the slot (see :meth:`FetchStrategy.finish`). None otherwise."""
        if error is not None or not isinstance(replies[0], ResultTooLargeError):
            return None
        error = replies[0]
        return (
            self.strategy.finish(
                job, None, True, take_next and len(cmds) == 1, error=error_text(error)
            ),
            error,
        )

    def _after_finish(
        self,
        job: Job,
        value: Any,
        error: Optional[BaseException],
        replies: list[Any],
    ) -> list[Job]:
        """Counts and hooks for a finished delivery, from the replies of its commands (each
        a parsed reply or the exception it raised); returns the jobs leased for its slot."""
        first, rest = replies[0], replies[1:]
        leased: list[Job] = []
        if isinstance(first, LeaseLostError):
            self._lost(job, first)
        elif isinstance(first, BaseException):
            self.log.error(
                "job %s: could not %s (%s); its lease will expire and it comes back",
                job.key,
                "ack" if error is None else "nack",
                first,
            )
        elif error is None:
            if isinstance(first, Job):
                leased.append(first)
            self._count("completed")
            self.hooks.completed(job, value)
        else:
            self._count("failed")
            self.hooks.failed(job, error, first if isinstance(first, NackOutcome) else None)
        for reply in rest:
            if isinstance(reply, BaseException):
                self.log.warning("taking the next job after %s: %s", job.key, reply)
            else:
                leased.extend(reply)
        return leased

    def _lost(self, job: Job, exc: LeaseLostError) -> None:
        if self.hooks.lost(job, lost_reason(exc)):
            self._count("lost")

    def _hand_back_commands(self, jobs: list[Job], reason: str) -> list[P.Command[object]]:
        for job in jobs:
            self.hooks.lost(job, reason)
        self._count("handed_back", len(jobs))
        return [c for job in jobs for c in self.strategy.hand_back(job)]

    def _after_hand_back(self, cmds: list[P.Command[object]], replies: list[Any]) -> None:
        for c, r in zip(cmds, replies, strict=True):
            if isinstance(r, ResponseError):
                self.log.warning("%s %s: %s", c.args[0], c.args[1], map_error(r))

    def _after_beats(self, due: list[Running], replies: list[Any], now: float) -> None:
        for r, reply in zip(due, replies, strict=True):
            if isinstance(reply, ResponseError):
                err = map_error(reply)
                if isinstance(err, LeaseLostError):
                    self._lost(r.job, err)
                else:
                    self.log.warning("heartbeat of job %s: %s", r.job.key, err)
            else:
                r.last_beat = now

    # -- durable writes and connection errors -------------------------------------------
    def _wait_args(self, cmds: Sequence[P.Command[Any]]) -> Optional[tuple[Any, ...]]:
        """The WAIT (WAITAOF) to pipeline after ``cmds``, if the worker waits and any writes."""
        if self.durability.on and any(is_write(c.args) for c in cmds):
            return self.durability.command()
        return None

    def _waited(self, reply: Any, cmds: Sequence[P.Command[Any]]) -> None:
        """A WAIT's reply: fewer replicas than asked is logged and counted, not raised (the
        writes stand on the master; the worker goes on)."""
        names = sorted({str(c.args[0]) for c in cmds})
        keys = sorted({str(c.args[2]) for c in cmds if str(c.args[0]) in _KEYED})
        what = " ".join(names) + (f" of {', '.join(keys)}" if keys else "")
        if isinstance(reply, BaseException):
            self.log.warning("%s: could not wait for replicas: %s", what, reply)
            short: Any = True
        else:
            short = self.durability.shortfall(reply)
            if short is not None:
                self.log.warning(
                    "%s not confirmed within %d ms (%s)", what, self.durability.timeout_ms, short[0]
                )
        if short is not None:
            self._count("unconfirmed")

    def _lease_end(self, r: Running) -> float:
        """The monotonic time until which ``r``'s lease may still be held (its last confirmed
        heartbeat, or its start, plus the lease), less a margin for the round trip."""
        return r.last_beat + self.options.lease_ms / 1000 - RETRY_MARGIN_S

    def _retrying(self, job: Job, what: str, error: BaseException, pause: float) -> None:
        self.log.warning(
            "job %s: %s failed on a connection error (%s); retrying in %.2fs on a new "
            "connection while its lease may be held",
            job.key,
            what,
            error,
            pause,
        )

    def _started_log(self) -> None:
        self.log.info(
            "worker started: queues %s, concurrency %d, lease %d ms",
            self.strategy.queues,
            self.options.concurrency,
            self.options.lease_ms,
        )

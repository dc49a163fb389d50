"""Finished deliveries acked together (I/O-free; shared by the thread and asyncio Workers).

A Worker's slots that finish successfully go in batches: one ``ORCA.MACK ... NEXT COUNT n``
acks a batch of the first queue's deliveries and leases the jobs that refill their slots in
the same round trip (the per-command costs of a client, a write, its layers and a round of
futures, are then paid once per batch instead of once per job). When the queue was found
empty, jobs have been arriving one by one (a trickle), no other job runs and no blocking
command is waiting for this worker, the batch is sent as ``ORCA.MACK ... NEXT COUNT <free
slots> BLOCK <ms>`` on the worker's blocking connection: acks now, and waits there for the
next job (one command per job at a trickle), for at most ACK_WAIT_MS.

Failures (NACK), hand-offs (``Forward``), jobs of other queues, and every finish once the worker
stops go one by one (:meth:`orca_queue.runtime.WorkerBase._finish_commands`), as before batching.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from . import protocol as P
from .errors import LeaseLostError, OrcaError, ResultTooLargeError
from .handoff import Forward
from .runtime import Running, WorkerBase
from .types import Job

# How long at most a fetcher that found the queue empty waits for a running job to finish
# before it blocks on its own: the finishing slot then waits for the next job in its ACK (one
# command per job at a trickle, instead of a blocking pop and an ACK). It waits about twice
# the handlers' recent run time, and only while that is below half of this: a job arriving
# meanwhile waits at most about one handler run; slower handlers never delay a blocking pop.
LINGER_S = 0.010


# The longest a finish waits for the next job (MACK ... NEXT BLOCK) before it replies with
# its outcomes alone: its hooks (on_completed, on_lost) and counts come with the reply, so
# they are never later than this; the fetcher then blocks as usual (block_ms).
ACK_WAIT_MS = 100


@dataclass
class Done:
    """A delivery whose handler succeeded, waiting to be acked in a batch."""

    run: Running
    value: Any
    result: Optional[bytes]


Merge = Callable[[list[P.MackReply | OrcaError]], P.MackReply]


class Batches:
    """The commands of a batch and what their replies mean, for ``worker``."""

    def __init__(self, worker: WorkerBase) -> None:
        self.w = worker
        opts = worker.options
        # At most half the slots per batch: with two batches, the server acks one while the
        # worker runs the other's jobs (as the Node Worker does).
        self.cap = max(1, (opts.concurrency + 1) // 2)
        # How long a job takes from the worker getting it to its handler's return (seconds, a
        # moving average; with the wait for a handler thread or a task step), for LINGER_S.
        self.handler_s = 0.0

    def took(self, received: float) -> None:
        """A handler returned, for a job the worker got at ``received`` (time.monotonic()):
        its run time and its wait for a thread or a task step."""
        self.handler_s += (time.monotonic() - received - self.handler_s) * 0.125

    @property
    def linger_s(self) -> float:
        """How long the fetcher waits for a finish before blocking itself (0: not at all)."""
        if self.handler_s >= LINGER_S / 2:
            return 0.0
        return min(LINGER_S, 2 * self.handler_s + 0.001)

    def batchable(
        self, job: Job, value: Any, error: Optional[BaseException], stopping: bool
    ) -> bool:
        """Whether this finish may wait for a batch (else it goes on its own: a failure, a
        hand-off (:class:`~orca_queue.Forward`, one ``ORCA.ACK ... FORWARD``), or any finish
        once the worker stops)."""
        return (
            error is None
            and not stopping
            and not isinstance(value, Forward)
            and self.w.strategy.chains(job)
        )

    def commands(
        self,
        done: Sequence[Done],
        *,
        next: bool,
        count: int,
        block_ms: Optional[int] = None,
    ) -> tuple[list[P.Command[P.MackReply]], Merge]:
        """The MACK(s) of a batch (two when some results are None and others not) and how
        to merge their replies; ``next``: take up to ``count`` jobs (``block_ms``: wait for
        them)."""
        job = done[0].run.job
        items = [(d.run.job.key, d.run.job.lease or "", d.result) for d in done]
        opts = self.w.options
        return P.mack_plan(
            job.queue or "",
            items,
            opts.result_ttl_ms,
            next=next,
            lease_ms=opts.lease_ms if next else None,
            count=count if next else None,
            block_ms=block_ms if next else None,
            worker=self.w.strategy.worker if next else None,
        )

    def settle(self, done: Sequence[Done], reply: P.MackReply) -> list[Done]:
        """Counts and hooks for each delivery of a batch from its outcome; returns those whose
        result the server refused as too large (nothing changed for them: they are to be
        finished one by one, which NACKs them)."""
        redo: list[Done] = []
        for d, outcome in zip(done, reply.outcomes, strict=True):
            job = d.run.job
            if outcome is None:
                self.w._count("completed")
                self.w.hooks.completed(job, d.value)
            elif isinstance(outcome, ResultTooLargeError):
                redo.append(d)
            elif isinstance(outcome, LeaseLostError):
                self.w._lost(job, outcome)
            else:
                self.w.log.error(
                    "job %s: could not ack (%s); its lease will expire and it comes back",
                    job.key,
                    outcome,
                )
        return redo

    def failed(self, done: Sequence[Done], error: BaseException) -> None:
        """A batch that could not be sent (its leases expire, the jobs come back)."""
        for d in done:
            self.w.log.error(
                "job %s: could not ack (%s); its lease will expire and it comes back",
                d.run.job.key,
                error,
            )

    def lease_end(self, done: Sequence[Done]) -> float:
        """Until when a batch may be re-sent after a connection error: its earliest lease."""
        return min(self.w._lease_end(d.run) for d in done)


def merged(
    cmds: Sequence[P.Command[P.MackReply]], merge: Merge, replies: Sequence[Any]
) -> P.MackReply | BaseException:
    """The batch's reply from the raw replies of its commands (an error reply of the first
    command refuses the batch as a whole: that error; of the second, the outcome of each of
    its deliveries, see :func:`orca_queue.protocol.mack_plan`)."""
    parsed = P.parse_pipeline(list(cmds), list(replies))
    if len(parsed) == 1 and isinstance(parsed[0], OrcaError):
        return parsed[0]
    return merge(parsed)


def refused_block(e: BaseException) -> bool:
    """An older module's refusal of ``NEXT ... BLOCK`` (nothing was changed)."""
    return "unknown option 'BLOCK'" in str(e)

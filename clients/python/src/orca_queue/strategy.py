"""How a worker takes and finishes jobs: the one place that decides which commands do it.

Both worker runtimes (threads and asyncio) ask this class for commands and only execute
them, so a new way of fetching (a combined ack-and-next, a multi-queue pop) changes this
file alone.

Today: a non-blocking ``ORCA.POP ... COUNT n`` per queue (first queue first) on the shared
connection; when every queue is empty, one ``ORCA.POP ... BLOCK`` on the worker's own
blocking connection. With several queues the blocking pop rotates over them with a short
``BLOCK`` (``poll_ms``), so a job arriving in another queue waits at most that long.
Finishing is ``ORCA.ACK`` / ``ORCA.NACK``; heartbeats ``ORCA.EXTEND``; a job handed back
at shutdown is ``ORCA.REENQUEUE <q> <config> <created_at>`` (immediate at its original
arrival, seed 000's shutdown rule) then ``ORCA.NACK`` of the old lease, which the server
reports ``superseded`` and drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from . import protocol as P
from .types import Job, NackOutcome

# The server's default orca.max-pop-count: one pop never asks for more.
MAX_POP_COUNT = 1000


class FetchStrategy:
    def __init__(
        self,
        queues: Sequence[str],
        *,
        lease_ms: int,
        block_ms: int,
        poll_ms: int = 500,
        result_ttl_ms: Optional[int] = None,
        nack_delay_ms: Optional[int] = None,
    ) -> None:
        if not queues:
            raise ValueError("a worker needs at least one queue")
        if lease_ms <= 0:
            raise ValueError("lease_ms must be > 0 (a worker always leases its jobs)")
        if block_ms <= 0:
            raise ValueError("block_ms must be > 0 (the worker must wake up to notice a stop)")
        self.queues = list(queues)
        self.lease_ms = lease_ms
        self.block_ms = block_ms if len(self.queues) == 1 else min(block_ms, poll_ms)
        self.result_ttl_ms = result_ttl_ms
        self.nack_delay_ms = nack_delay_ms
        self._turn = 0

    def quick(self, queue: str, want: int) -> P.Command[list[Job]]:
        """A non-blocking pop of up to ``want`` jobs from ``queue``."""
        return P.pop_many(queue, min(want, MAX_POP_COUNT), self.lease_ms, None)

    def blocking(self, want: int) -> P.Command[list[Job]]:
        """The blocking pop to issue when every queue was empty (rotating over queues)."""
        queue = self.queues[self._turn % len(self.queues)]
        self._turn += 1
        return P.pop_many(queue, min(want, MAX_POP_COUNT), self.lease_ms, self.block_ms)

    def ack(self, job: Job, result: Optional[bytes]) -> P.Command[None]:
        return P.ack(
            _queue(job), job.key, _lease(job), result, self.result_ttl_ms if result else None
        )

    def nack(self, job: Job) -> P.Command[NackOutcome]:
        return P.nack(_queue(job), job.key, _lease(job), self.nack_delay_ms)

    def extend(self, job: Job) -> P.Command[int]:
        return P.extend(_queue(job), job.key, _lease(job), self.lease_ms)

    def hand_back(self, job: Job) -> list[P.Command[object]]:
        """Commands that give a running job back at shutdown (to pipeline, in order)."""
        if job.payload is None:
            raise ValueError("a popped job always has its payload")
        return [
            P.reenqueue(_queue(job), job.payload, job.created_at),  # type: ignore[list-item]
            P.nack(_queue(job), job.key, _lease(job), 0),  # type: ignore[list-item]
        ]


def _queue(job: Job) -> str:
    if job.queue is None:
        raise ValueError("job does not name its queue")
    return job.queue


def _lease(job: Job) -> str:
    if job.lease is None:
        raise ValueError("job has no lease")
    return job.lease

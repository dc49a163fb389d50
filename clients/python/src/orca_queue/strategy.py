"""How a worker takes and finishes jobs: the one place that decides which commands do it.

Both worker runtimes (threads and asyncio) ask this class for commands and only execute
them.

Fetching: a non-blocking ``ORCA.POP ... COUNT n`` (one queue) or ``ORCA.MPOP ... COUNT n``
(several: the first queue in argument order that has jobs) on the shared connection; when
nothing can be handed out, one blocking ``ORCA.POP``/``ORCA.MPOP ... BLOCK`` on the worker's
own blocking connection (MPOP waits on every queue and is woken by any).

Finishing (:meth:`FetchStrategy.finish`): a slot that may take another job asks for its own
next job in the same round trip: ``ORCA.ACK ... NEXT`` when the job came from the first
queue (NEXT takes the next job of the same queue, which for the first queue is what MPOP
would take too); otherwise ``ORCA.ACK`` / ``ORCA.NACK`` pipelined with a non-blocking pop of
one job. A failure is a plain ``ORCA.NACK`` (plus that pop), not ``NACK ... NEXT``: the
server's reply to ``NACK ... NEXT`` is the next job only, and the worker reports the
failed job's outcome (retry, dead, superseded) to ``on_failed`` and the log. A slot that
may not take another job (the worker is stopping, or ``ack_next=False``) finishes with a
plain ACK / NACK.

Heartbeats are ``ORCA.EXTEND``; a job handed back at shutdown is ``ORCA.REENQUEUE <q>
<config> <created_at>`` (immediate at its original arrival, the design's shutdown rule) then
``ORCA.NACK`` of the old lease, which the server reports ``superseded`` and drops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional

from . import protocol as P
from .keys import Config
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
        result_ttl_ms: Optional[int] = None,
        nack_delay_ms: Optional[int] = None,
        ack_next: bool = True,
        worker: Optional[str] = None,
    ) -> None:
        if not queues:
            raise ValueError("a worker needs at least one queue")
        if lease_ms <= 0:
            raise ValueError("lease_ms must be > 0 (a worker always leases its jobs)")
        if block_ms <= 0:
            raise ValueError("block_ms must be > 0 (the worker must wake up to notice a stop)")
        self.queues = list(queues)
        self.lease_ms = lease_ms
        self.block_ms = block_ms
        self.result_ttl_ms = result_ttl_ms
        self.nack_delay_ms = nack_delay_ms
        self.ack_next = ack_next
        # WORKER <name> on every pop and NEXT: the lease shows who runs the job
        self.worker = worker
        # On a Redis Cluster, queues in several hash slots (one MPOP takes keys of one slot):
        # the fetcher pops from each slot's group; a finish pipelines no pop (see finish()).
        self.sharded = False

    def by_slot(self, slot_of: Callable[[str], int]) -> list[FetchStrategy]:
        """The queues grouped by hash slot (in the order their first queue is given), one
        strategy each with the same settings; marks this one ``sharded`` if there are
        several. Queues sharing a hash tag (``{course}:a``, ``{course}:b``) share a group."""
        groups: dict[int, list[str]] = {}
        for name in self.queues:
            groups.setdefault(slot_of(name), []).append(name)
        self.sharded = len(groups) > 1
        return [
            FetchStrategy(
                names,
                lease_ms=self.lease_ms,
                block_ms=self.block_ms,
                result_ttl_ms=self.result_ttl_ms,
                nack_delay_ms=self.nack_delay_ms,
                ack_next=self.ack_next,
                worker=self.worker,
            )
            for names in groups.values()
        ]

    @property
    def several(self) -> bool:
        return len(self.queues) > 1

    def quick(self, want: int) -> P.Command[list[Job]]:
        """A non-blocking pop of up to ``want`` jobs (from the first queue that has any)."""
        n = min(want, MAX_POP_COUNT)
        if self.several:
            return P.mpop_many(self.queues, n, self.lease_ms, None, self.worker)
        return P.pop_many(self.queues[0], n, self.lease_ms, None, self.worker)

    def blocking(self, want: int) -> P.Command[list[Job]]:
        """The blocking pop to issue when nothing could be handed out (on every queue)."""
        n = min(want, MAX_POP_COUNT)
        if self.several:
            return P.mpop_many(self.queues, n, self.lease_ms, self.block_ms, self.worker)
        return P.pop_many(self.queues[0], n, self.lease_ms, self.block_ms, self.worker)

    def chains(self, job: Job) -> bool:
        """Whether ``ACK ... NEXT`` gives this job's slot the job a pop would: NEXT takes
        from the job's own queue, so only for the first queue (argument order)."""
        return self.ack_next and job.queue == self.queues[0]

    def ack(self, job: Job, result: Optional[bytes]) -> P.Command[None]:
        return P.ack(_queue(job), job.key, _lease(job), result, self._ttl(result))

    def ack_then_next(self, job: Job, result: Optional[bytes]) -> P.Command[Optional[Job]]:
        return P.ack_next(
            _queue(job),
            job.key,
            _lease(job),
            result,
            self._ttl(result),
            lease_ms=self.lease_ms,
            worker=self.worker,
        )

    def nack(
        self, job: Job, delay_ms: Optional[int] = None, error: Optional[str] = None
    ) -> P.Command[NackOutcome]:
        """ORCA.NACK with its retry delay and ``error``, the failure's text."""
        delay = self.nack_delay_ms if delay_ms is None else delay_ms
        return P.nack(_queue(job), job.key, _lease(job), delay, error)

    def extend(self, job: Job) -> P.Command[int]:
        return P.extend(_queue(job), job.key, _lease(job), self.lease_ms)

    def finish(
        self,
        job: Job,
        result: Optional[bytes],
        failed: bool,
        take_next: bool,
        delay_ms: Optional[int] = None,
        *,
        error: Optional[str] = None,
    ) -> list[P.Command[Any]]:
        """The commands that finish a delivery (to send in one round trip, in order). The
        first one's reply is None (ACK), a :class:`NackOutcome` (NACK, with ``error``: why)
        or the next job or None (ACK ... NEXT); a second one, if any, is a pop of one job
        for the same slot. ``take_next``: the slot may take another job now. ``delay_ms``:
        a failure's own retry delay (:class:`JobFailed`), else ``nack_delay_ms``."""
        take_next = take_next and self.ack_next
        if not failed and take_next and self.chains(job):
            return [self.ack_then_next(job, result)]
        first: P.Command[Any] = self.nack(job, delay_ms, error) if failed else self.ack(job, result)
        # Sharded: an MPOP over every queue would span slots; the fetcher refills the slot.
        return [first, self.quick(1)] if take_next and not self.sharded else [first]

    def finish_forward(
        self, job: Job, result: Optional[bytes], to: tuple[str, Config], take_next: bool
    ) -> list[P.Command[Any]]:
        """The commands that finish a delivery with a hand-off (``ORCA.ACK ... FORWARD``,
        whose reply the worker does not need), and a pop for the slot as :meth:`finish`."""
        fwd = P.ack_forward(
            _queue(job), job.key, _lease(job), to, result=result, ttl_ms=self._ttl(result)
        )
        first: P.Command[Any] = P.Command(fwd.args, _nothing)
        take_next = take_next and self.ack_next
        return [first, self.quick(1)] if take_next and not self.sharded else [first]

    def hand_back(self, job: Job) -> list[P.Command[object]]:
        """Commands that give a running job back at shutdown (to pipeline, in order)."""
        if job.payload is None:
            raise ValueError("a popped job always has its payload")
        return [
            P.reenqueue(_queue(job), job.payload, job.created_at),  # type: ignore[list-item]
            P.nack(_queue(job), job.key, _lease(job), 0),  # type: ignore[list-item]
        ]

    def _ttl(self, result: Optional[bytes]) -> Optional[int]:
        return self.result_ttl_ms if result else None


def _nothing(reply: Any) -> None:
    return None


def _queue(job: Job) -> str:
    if job.queue is None:
        raise ValueError("job does not name its queue")
    return job.queue


def _lease(job: Job) -> str:
    if job.lease is None:
        raise ValueError("job has no lease")
    return job.lease

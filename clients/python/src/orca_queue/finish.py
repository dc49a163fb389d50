"""The thread Worker's handling and finishing of jobs (see :mod:`orca_queue.worker`).

``concurrency`` handler threads take jobs from an inbox and run the handler. A success of the
first queue goes to the outbox; the fetcher thread acks what the outbox holds in one
``ORCA.MACK ... NEXT COUNT n`` (while one is on the wire the next batch gathers) and puts the
jobs its reply brings in the inbox (:mod:`orca_queue.batch`). Failures, jobs of other queues,
and finishes while the fetcher waits on its blocking connection or the worker stops are
finished by the handler thread itself, one by one (NACK, ACK ... NEXT), as before batching.
"""

from __future__ import annotations

import queue as stdqueue
import threading
import time
from collections.abc import Sequence
from typing import Any, Optional, TypeVar

import redis
from redis.exceptions import RedisError, ResponseError

from . import protocol as P
from .batch import Batches, Done, merged
from .errors import ResultTooLargeError, map_error
from .protocol import execute
from .runtime import Running, WorkerBase, is_connection_error
from .types import Job

T = TypeVar("T")
_Token = tuple[str, str, str]  # (queue, orca key, lease)


def _token(job: Job) -> _Token:
    return (job.queue or "", job.key, job.lease or "")


class ThreadFinisher(WorkerBase):
    """Handling and finishing, the part of the thread Worker that runs per job."""

    client: redis.Redis
    _cond: threading.Condition
    _running: dict[_Token, Running]
    _stop: threading.Event
    _closed: threading.Event

    def _setup_finishing(self) -> None:
        self._inbox: stdqueue.SimpleQueue[Optional[Running]] = stdqueue.SimpleQueue()
        self._batches = Batches(self)
        self._outbox: list[Done] = []  # successes for the fetcher to ack (under _cond)
        self._dispatching = False  # the fetcher takes the outbox (it is running)
        # As in the asyncio Worker (aio/finish.py): the queue was found empty; a blocking
        # command waits on the blocking connection; jobs arrive one by one.
        self._empty = False
        self._armed = False
        self._trickle = False
        self._block_next = False

    def _count(self, what: str, n: int = 1) -> None:
        with self._cond:
            self.counts[what] += n

    def _register(self, jobs: Sequence[Job]) -> None:
        """New jobs in the table and the inbox (the caller holds no lock)."""
        runs = [Running(job) for job in jobs]
        with self._cond:
            for r in runs:
                self._running[_token(r.job)] = r
        for r in runs:
            self._inbox.put(r)

    # -- handling ---------------------------------------------------------------------------
    def _handle_loop(self) -> None:
        while True:
            r = self._inbox.get()
            if r is None:
                return
            while r is not None:
                value: Any = None
                error: Optional[BaseException] = None
                try:
                    value = self.handler(r.job)
                except BaseException as e:  # SystemExit too: see _handler_raised
                    error = e
                    if not isinstance(e, Exception):
                        self._handler_raised(e)
                self._batches.took(r.received)
                if self._batches.batchable(r.job, value, error, self._stop.is_set()) and self._join(
                    r, value
                ):
                    break
                r = self._finish(r, value, error)  # the slot's next job, if it took one

    def _join(self, r: Running, value: Any) -> bool:
        """Hand a success to the fetcher's next batch; False if it is to be finished here (the
        fetcher waits on its blocking connection or is gone, or the result cannot be
        encoded)."""
        result, error = self._encode(value, None)
        if error is not None:
            return False
        with self._cond:
            if r.finished or r.job.abandoned is not None:
                return False  # _finish drops it
            if not self._dispatching or self._armed or self._stop.is_set():
                return False
            r.finished = True
            self._outbox.append(Done(r, value, result))
            self._cond.notify_all()
        return True

    def _waits_with_fetcher(self, done: Sequence[Done]) -> bool:
        """Whether the fetcher sends ``done`` with its blocking wait (see :mod:`.batch`)."""
        if not (self._block_next and self._trickle and self._empty) or self._stop.is_set():
            return False
        with self._cond:
            return not any(not r.finished for r in self._running.values())

    def _send_batch(self, done: list[Done], take_next: bool) -> list[Job]:
        """One batch (MACK ... NEXT COUNT n) on the shared client, re-sent after a connection
        error while its leases may still be held; the jobs its reply brings (registered)."""
        cmds, merge = self._batches.commands(done, next=take_next, count=len(done))
        pause = 0.05
        while True:
            try:
                reply = merged(cmds, merge, self._pipeline(cmds))
                break
            except (RedisError, OSError) as e:
                if not is_connection_error(e) or time.monotonic() + pause >= (
                    self._batches.lease_end(done)
                ):
                    reply = e
                    break
                self._retrying(done[0].run.job, f"ack of {len(done)} jobs", e, pause)
                if self._closed.wait(pause):
                    reply = e
                    break
                pause = min(pause * 2, 1.0)
        return self._settled(done, reply, len(done) if take_next else 0)

    def _settled(
        self, done: Sequence[Done], reply: P.MackReply | BaseException, asked: int
    ) -> list[Job]:
        """A batch's reply: hooks for each delivery; the jobs it leased registered in the
        freed slots (handed back at a stop); those refused as too large finished one by one
        here. Returns the jobs registered."""
        jobs: list[Job] = []
        try:
            if isinstance(reply, ResultTooLargeError):
                # Refused as a whole (nothing changed): each on its own, the big one NACKed.
                reply = P.MackReply([reply] * len(done))
            if isinstance(reply, BaseException):
                self._batches.failed(done, reply)
                return []
            redo = self._batches.settle(done, reply)
            jobs = reply.jobs
            if asked and not self.strategy.several:
                self._empty = len(jobs) < asked
                self._trickle = self._trickle and self._empty
            if self._stop.is_set():
                self._hand_back(jobs, "leased by MACK ... NEXT while stopping, handed back")
                jobs = []
            else:
                self._register(jobs)
            for d in redo:  # nothing changed for them: NACKed one by one
                d.run.finished = False
                nxt = self._finish(d.run, d.value, None)
                if nxt is not None:
                    self._inbox.put(nxt)
            return jobs
        finally:
            with self._cond:
                for d in done:
                    if d.run.finished and self._running.get(_token(d.run.job)) is d.run:
                        del self._running[_token(d.run.job)]
                self._cond.notify_all()

    # -- one by one -------------------------------------------------------------------------
    def _pipeline(self, cmds: Sequence[P.Command[Any]]) -> list[Any]:
        """``cmds`` in one round trip (and their WAIT, when the worker waits for replicas):
        each raw reply, an error reply as its exception."""
        wait = self._wait_args(cmds)
        if len(cmds) == 1 and wait is None:
            try:
                return [execute(self.client, cmds[0].args, cmds[0].options)]
            except ResponseError as e:
                return [e]
        pipe = self.client.pipeline(transaction=False)
        for c in cmds:
            execute(pipe, c.args, c.options)
        if wait is not None:
            execute(pipe, wait)
        replies = list(pipe.execute(raise_on_error=False))
        if wait is not None:
            self._waited(replies.pop(), cmds)
        return replies

    def _run(self, client: redis.Redis, cmd: P.Command[T]) -> T:
        try:
            reply = execute(client, cmd.args, cmd.options)
        except ResponseError as e:
            raise map_error(e) from None
        return cmd.parse(reply)

    def _hand_back(self, jobs: list[Job], reason: str) -> None:
        if not jobs:
            return
        cmds = self._hand_back_commands(jobs, reason)
        try:
            replies = self._pipeline(cmds)
        except RedisError as e:
            self.log.error(
                "could not hand back %d jobs (%s): their leases will expire and "
                "they come back by themselves",
                len(jobs),
                e,
            )
            return
        self._after_hand_back(cmds, replies)

    def _try_execute(self, cmds: list[P.Command[Any]]) -> list[Any]:
        """The commands in one round trip: each parsed reply or its Orca error; a connection
        error as the first command's reply."""
        try:
            return P.parse_pipeline(cmds, self._pipeline(cmds))
        except RedisError as e:
            return [e]

    def _finish_execute(
        self, r: Running, cmds: list[P.Command[Any]], error: Optional[BaseException]
    ) -> list[Any]:
        """:meth:`_try_execute` of a finish (ACK / NACK, maybe with NEXT or a pop), re-sent on a
        new connection after a connection error while the lease may still be held: a blip
        (a failover, a restart) must not drop finished work. Its answer is final: a lease the
        server says is lost (also when an earlier try did ack it) is never acked again."""
        replies = self._try_execute(cmds)
        pause = 0.05
        while is_connection_error(replies[0]) and time.monotonic() + pause < self._lease_end(r):
            self._retrying(r.job, "ack" if error is None else "nack", replies[0], pause)
            if self._closed.wait(pause):
                break
            pause = min(pause * 2, 1.0)
            replies = self._try_execute(cmds)
        return replies

    def _finish(self, r: Running, value: Any, error: Optional[BaseException]) -> Optional[Running]:
        """Acks or nacks ``r`` on its own; returns the slot's next job (registered) when one
        was taken."""
        job = r.job
        with self._cond:
            claimed = not r.finished
            r.finished = True
            take_next = not self._stop.is_set() and not (self._empty and self._armed)
        leased: list[Job] = []
        try:
            if not claimed or job.abandoned is not None:
                self.log.info("job %s: result dropped (%s)", job.key, job.abandoned)
                return None
            cmds, error = self._finish_commands(job, value, error, take_next)
            replies = self._finish_execute(r, cmds, error)
            refused = self._refused_result(job, error, cmds, replies, take_next)
            if refused is not None:
                nack, error = refused
                again = self._finish_execute(r, nack, error)
                replies = [again[0], *replies[1:], *again[1:]]
            leased = self._after_finish(job, value, error, replies)
            chains = not self.strategy.several and self.strategy.chains(job)
            if take_next and error is None and not leased and chains:
                self._empty = True  # ACK ... NEXT came back empty
            return self._take(leased)
        finally:
            with self._cond:
                if claimed and self._running.get(_token(job)) is r:
                    del self._running[_token(job)]
                self._cond.notify_all()

    def _take(self, leased: list[Job]) -> Optional[Running]:
        """Registers the job leased for a slot that just finished (at most one), or hands it
        back if the worker is stopping (before the finished job leaves the table, so the
        shutdown waits for it)."""
        if not leased:
            return None
        with self._cond:
            if not self._stop.is_set():
                runs = [Running(job) for job in leased]
                for run in runs:
                    self._running[_token(run.job)] = run
                for extra in runs[1:]:  # never more than one, but never lose one either
                    self._inbox.put(extra)
                return runs[0]
        self._hand_back(leased, "leased by NEXT while stopping, handed back")
        return None

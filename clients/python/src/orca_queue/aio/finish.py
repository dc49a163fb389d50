"""The asyncio Worker's handling and finishing of jobs (see :mod:`orca_queue.aio.worker`).

One task per job runs its handler. A success of the first queue joins the finishes of the
event-loop iteration (at most half the slots at a time) in one ``ORCA.MACK ... NEXT COUNT n``,
whose reply brings the jobs that run in the freed slots (:mod:`orca_queue.batch`). When the
queue was found empty and the worker's blocking connection is free, the batch goes to the
fetcher instead, which sends it with ``BLOCK``: it acks at once and waits there for work.
Failures, jobs of other queues and finishes at a stop go one by one (NACK, ACK ... NEXT).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio
from redis.exceptions import RedisError, ResponseError

from .. import protocol as P
from ..batch import Batches, Done, merged
from ..errors import ResultTooLargeError, map_error
from ..protocol import execute
from ..runtime import Running, WorkerBase, is_connection_error
from ..types import Job

T = TypeVar("T")

Handler = Callable[[Job], Any] | Callable[[Job], Awaitable[Any]]


def _key(job: Job) -> tuple[str, str]:
    """Lease tokens are unique within a queue."""
    return (job.queue or "", job.lease or "")


def _cancel_requested() -> bool:
    """Whether the current task has been asked to cancel (``Task.cancelling()``, Python
    3.11+; on 3.10, where it cannot be told apart, every CancelledError counts as one)."""
    cancelling = getattr(asyncio.current_task(), "cancelling", None)
    return cancelling is None or cancelling() > 0


class AsyncFinisher(WorkerBase):
    """Handling and finishing, the part of the asyncio Worker that runs per job."""

    client: redis.asyncio.Redis
    _running: dict[tuple[str, str], tuple[Running, asyncio.Task[None]]]
    _stopping: bool
    _changed: asyncio.Event | None

    def _setup_finishing(self) -> None:
        self._batches = Batches(self)
        self._async_handler = inspect.iscoroutinefunction(self.handler)
        self._done: list[Done] = []  # successes of this loop iteration, not yet sent
        self._flush_handle: asyncio.Handle | None = None
        self._sends: set[asyncio.Task[None]] = set()  # batches in flight
        # The queue was found empty (a pop or NEXT brought fewer jobs than asked): the fetcher
        # blocks instead of polling, and a batch may wait for work (see _flush).
        self._empty = False
        # A blocking command of this worker waits on its blocking connection.
        self._armed = False
        # Jobs arrive one by one (a blocking command brought fewer than asked), as opposed to
        # a queue that was drained (then the worker's last finishes are acked at once).
        self._trickle = False
        # Finishes the fetcher is to send with its blocking wait (MACK ... NEXT BLOCK).
        self._arm_with: list[Done] = []
        # Whether the fetcher may wait inside a MACK (one queue, one server, no WAIT, a module
        # that knows NEXT ... BLOCK): set by the Worker.
        self._block_next = False

    def _chains_alone(self, job: Job) -> bool:
        """Whether an empty NEXT for ``job`` means the worker's only queue is empty."""
        return not self.strategy.several and self.strategy.chains(job)

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    # -- handling ---------------------------------------------------------------------------
    def _start(self, job: Job) -> None:
        r = Running(job)
        self._running[_key(job)] = (r, asyncio.get_running_loop().create_task(self._handle(r)))

    async def _call_handler(self, job: Job) -> Any:
        if self._async_handler:
            return await self.handler(job)
        value = await asyncio.to_thread(self.handler, job)
        if inspect.isawaitable(value):
            value = await value
        return value

    async def _handle(self, first: Running) -> None:
        r: Running | None = first
        while r is not None:
            value: Any = None
            error: BaseException | None = None
            try:
                value = await self._call_handler(r.job)
            except asyncio.CancelledError as e:
                if r.finished or _cancel_requested():
                    raise  # the task is cancelled (at shutdown: its job was handed back)
                error = e  # raised inside the handler (it awaited something cancelled)
            except BaseException as e:  # SystemExit too: see _handler_raised
                error = e
                if not isinstance(e, Exception):
                    self._handler_raised(e)
            self._batches.took(r.received)
            if self._batches.batchable(r.job, value, error, self._stopping) and self._join(
                r, value
            ):
                return
            r = await self._finish(r, value, error)  # the slot's next job, if it took one

    def _join(self, r: Running, value: Any) -> bool:
        """Queue a success for this iteration's batch; False if it must go on its own (a
        result that cannot be encoded fails the delivery)."""
        if r.finished or r.job.abandoned is not None:
            return False  # _finish drops it
        result, error = self._encode(value, None)
        if error is not None:
            return False
        r.finished = True
        self._done.append(Done(r, value, result))
        if len(self._done) >= self._batches.cap:
            self._flush()
        elif self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)
        return True

    def _flush(self) -> None:
        """Send the successes queued in this iteration (the event loop calls it once the
        iteration's handlers have run, or at once when a batch is full)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        done, self._done = self._done, []
        if not done:
            return
        if self._waits_with_fetcher():
            # Nothing to take now, no one waiting for work, nothing else running: the fetcher
            # sends these with its blocking wait (ack, then wait for the next job).
            self._arm_with.extend(done)
            self._wake()
            return
        # The queue is known empty while a blocking command waits for work: plain MACK.
        take_next = not self._stopping and not (self._empty and self._armed)
        cap = self._batches.cap
        for i in range(0, len(done), cap):
            self._send_later(done[i : i + cap], take_next)

    def _waits_with_fetcher(self) -> bool:
        """Whether finishes now go with the fetcher's blocking wait (see :mod:`..batch`)."""
        if not (self._block_next and self._trickle and self._empty) or self._stopping:
            return False
        return bool(self._arm_with) or not (self._armed or self._others_running())

    def _others_running(self) -> bool:
        return any(not r.finished for r, _ in self._running.values())

    def _send_later(self, done: list[Done], take_next: bool) -> None:
        t = asyncio.get_running_loop().create_task(self._send(done, take_next))
        self._sends.add(t)
        t.add_done_callback(self._sends.discard)

    async def _send(self, done: list[Done], take_next: bool) -> None:
        """One batch (MACK ... NEXT COUNT n, or MACK at a stop) on the shared client, re-sent
        after a connection error while its leases may still be held."""
        cmds, merge = self._batches.commands(done, next=take_next, count=len(done))
        pause = 0.05
        while True:
            try:
                reply = merged(cmds, merge, await self._pipeline(cmds))
                break
            except (RedisError, OSError) as e:
                if not is_connection_error(e) or time.monotonic() + pause >= (
                    self._batches.lease_end(done)
                ):
                    reply = e
                    break
                self._retrying(done[0].run.job, f"ack of {len(done)} jobs", e, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
        await self._settled(done, reply, len(done) if take_next else 0)

    async def _settled(
        self, done: Sequence[Done], reply: P.MackReply | BaseException, asked: int
    ) -> None:
        """A batch's reply: hooks for each delivery, the jobs it leased started in the freed
        slots (handed back at a stop), those refused as too large finished one by one."""
        try:
            if isinstance(reply, ResultTooLargeError):
                # Refused as a whole (nothing changed): each on its own, the big one NACKed.
                reply = P.MackReply([reply] * len(done))
            if isinstance(reply, BaseException):
                self._batches.failed(done, reply)
                return
            redo = self._batches.settle(done, reply)
            jobs = reply.jobs
            if asked and not self.strategy.several:
                self._empty = len(jobs) < asked
                self._trickle = self._trickle and self._empty
            if self._stopping:
                await self._hand_back(jobs, "leased by MACK ... NEXT while stopping, handed back")
            else:
                for job in jobs:
                    self._start(job)
            for d in redo:  # nothing changed for them: NACKed one by one
                d.run.finished = False
                self._running[_key(d.run.job)] = (d.run, self._redo(d))
        finally:
            for d in done:
                entry = self._running.get(_key(d.run.job))
                if entry is not None and entry[0] is d.run and d.run.finished:
                    del self._running[_key(d.run.job)]
            self._wake()

    def _redo(self, d: Done) -> asyncio.Task[None]:
        async def one() -> None:
            nxt = await self._finish(d.run, d.value, None)
            if nxt is not None:
                await self._handle(nxt)

        return asyncio.get_running_loop().create_task(one())

    # -- one by one -------------------------------------------------------------------------
    async def _run(self, client: redis.asyncio.Redis, cmd: P.Command[T]) -> T:
        try:
            reply = await execute(client, cmd.args, cmd.options)
        except ResponseError as e:
            raise map_error(e) from None
        return cmd.parse(reply)

    async def _pipeline(self, cmds: Sequence[P.Command[Any]]) -> list[Any]:
        """``cmds`` in one round trip (and their WAIT, when the worker waits for replicas)."""
        wait = self._wait_args(cmds)
        if len(cmds) == 1 and wait is None:
            try:
                return [await execute(self.client, cmds[0].args, cmds[0].options)]
            except ResponseError as e:
                return [e]
        async with self.client.pipeline(transaction=False) as pipe:
            for c in cmds:
                execute(pipe, c.args, c.options)
            if wait is not None:
                execute(pipe, wait)
            replies = list(await pipe.execute(raise_on_error=False))
        if wait is not None:
            self._waited(replies.pop(), cmds)
        return replies

    async def _hand_back(self, jobs: list[Job], reason: str) -> None:
        if not jobs:
            return
        cmds = self._hand_back_commands(jobs, reason)
        try:
            replies = await self._pipeline(cmds)
        except RedisError as e:
            self.log.error(
                "could not hand back %d jobs (%s): their leases will expire and "
                "they come back by themselves",
                len(jobs),
                e,
            )
            return
        self._after_hand_back(cmds, replies)

    async def _execute(self, cmds: list[P.Command[Any]]) -> list[Any]:
        """One command, or several pipelined: each parsed reply or its Orca error."""
        return P.parse_pipeline(cmds, await self._pipeline(cmds))

    async def _try_execute(self, cmds: list[P.Command[Any]]) -> list[Any]:
        """:meth:`_execute`, with a connection error as the first command's reply."""
        try:
            return await self._execute(cmds)
        except (RedisError, OSError) as e:
            return [e]

    async def _finish_execute(
        self, r: Running, cmds: list[P.Command[Any]], error: BaseException | None
    ) -> list[Any]:
        """See :meth:`orca_queue.Worker._finish_execute`: re-sent after a connection error
        while the lease may be held; a lost lease is final."""
        replies = await self._try_execute(cmds)
        pause = 0.05
        while is_connection_error(replies[0]) and time.monotonic() + pause < self._lease_end(r):
            self._retrying(r.job, "ack" if error is None else "nack", replies[0], pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)
            replies = await self._try_execute(cmds)
        return replies

    async def _finish(self, r: Running, value: Any, error: BaseException | None) -> Running | None:
        """One delivery finished on its own (ACK ... NEXT, or NACK with a pop for the slot);
        returns the slot's next job when one came."""
        job = r.job
        claimed = not r.finished
        r.finished = True
        try:
            if not claimed or job.abandoned is not None:
                self.log.info("job %s: result dropped (%s)", job.key, job.abandoned)
                return None
            take_next = not self._stopping and not (self._empty and self._armed)
            cmds, error = self._finish_commands(job, value, error, take_next)
            replies = await self._finish_execute(r, cmds, error)
            refused = self._refused_result(job, error, cmds, replies, take_next)
            if refused is not None:
                nack, error = refused
                again = await self._finish_execute(r, nack, error)
                replies = [again[0], *replies[1:], *again[1:]]
            leased = self._after_finish(job, value, error, replies)
            if take_next and error is None and not leased and self._chains_alone(job):
                self._empty = True  # ACK ... NEXT came back empty
            if not leased:
                return None
            if self._stopping:
                # Handed back before this job leaves the table, so the shutdown waits.
                await self._hand_back(leased, "leased by NEXT while stopping, handed back")
                return None
            task = asyncio.current_task()
            assert task is not None
            runs = [Running(j) for j in leased]
            for run in runs:
                self._running[_key(run.job)] = (run, task)
            for extra in runs[1:]:  # never more than one, but never lose one either
                self._running[_key(extra.job)] = (extra, asyncio.create_task(self._handle(extra)))
            return runs[0]
        finally:
            if claimed:
                entry = self._running.get(_key(job))
                if entry is not None and entry[0] is r:
                    del self._running[_key(job)]
            self._wake()

"""The asyncio worker runtime: :class:`orca_queue.Worker`'s behaviour on one event loop.

``await Worker(queue, handler, concurrency=8).run()``: ``handler`` is an ``async def`` (run as
a task per slot: a task that finishes a job takes the slot's next one in the same round trip,
``ORCA.ACK ... NEXT``, and runs it) or a plain function (run in a thread with
``asyncio.to_thread``). At a stop (``stop()``, ``await close()``, SIGTERM/SIGINT) it stops
taking jobs, waits up to ``grace_ms`` for running handlers, hands the rest back and cancels
their tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import redis.asyncio
from redis.exceptions import ConnectionError, RedisError, ResponseError, TimeoutError

from .. import protocol as P
from ..connection import async_blocking_client
from ..errors import LeaseLostError, map_error
from ..protocol import execute
from ..runtime import FINISH_WAIT_S, Running, WorkerBase, is_connection_error
from ..shards import is_cluster
from ..types import Job
from .queue import Queue
from .shards import AsyncShardBlockers

T = TypeVar("T")


def _key(job: Job) -> tuple[str, str]:
    """Lease tokens are unique within a queue."""
    return (job.queue or "", job.lease or "")


Handler = Callable[[Job], Any] | Callable[[Job], Awaitable[Any]]


def _cancel_requested() -> bool:
    """Whether the current task has been asked to cancel (``Task.cancelling()``, Python
    3.11+; on 3.10, where it cannot be told apart, every CancelledError counts as one)."""
    cancelling = getattr(asyncio.current_task(), "cancelling", None)
    return cancelling is None or cancelling() > 0


class Worker(WorkerBase):
    """Runs ``handler(job)`` for the jobs of one or more asyncio queues (one client). Options
    and hooks as :class:`orca_queue.Worker` (see :class:`~orca_queue.runtime.WorkerBase`);
    hooks run on the event loop."""

    queues: list[Queue]

    def _setup(self) -> None:
        self.client: redis.asyncio.Redis = self.queues[0].client
        self._running: dict[tuple[str, str], tuple[Running, asyncio.Task[None]]] = {}
        self._stopping = False
        self._hurry = False
        self._stop_event: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None
        self._blocker: redis.asyncio.Redis | None = None
        self._blocker_id: int | None = None
        self._started = False
        self._closed = False
        # On a Redis Cluster: the queues by hash slot, each group with its blocking connection.
        self._groups = [self.strategy]
        self._shards: AsyncShardBlockers | None = None
        if is_cluster(self.client):
            cluster: Any = self.client
            self._groups = self.strategy.by_slot(cluster.keyslot)
            self._shards = AsyncShardBlockers(cluster, self._groups, self._run, self.log)

    # -- control ------------------------------------------------------------------------
    def stop(self, *, now: bool = False) -> None:
        """Stop taking jobs; ``run()`` then waits up to ``grace_ms`` for running handlers
        (``now=True``: not at all) and hands back the rest. Calling it again keeps the grace
        (only a second SIGTERM/SIGINT skips it). Call it on the worker's event loop (signal
        handlers installed by ``run()`` do)."""
        if now:
            self._hurry = True
        self._stopping = True
        if self._stop_event is not None:
            self._stop_event.set()
        if self._changed is not None:
            self._changed.set()

    def _on_signal(self) -> None:
        # The first SIGTERM/SIGINT stops with the grace; a second one skips it.
        self.stop(now=self._stopping)

    def _begin_stop(self) -> None:
        self.stop()

    async def close(self) -> None:
        """``stop()`` and wait until ``run()`` has shut down."""
        self.stop()
        while self._started and self._stop_event is not None and not self._closed:
            await asyncio.sleep(0.02)

    async def run(self) -> None:
        """Work until ``stop()`` / ``close()`` or SIGTERM/SIGINT (a second one skips the grace).
        A ``SystemExit`` / ``KeyboardInterrupt`` raised by a handler stops the worker the same
        way (its delivery NACKed as failed), then is raised here."""
        if self._started:
            raise RuntimeError("a Worker runs once")
        self._started = True
        self._stop_event = asyncio.Event()
        self._changed = asyncio.Event()
        if self._stopping:
            self._stop_event.set()
        loop = asyncio.get_running_loop()
        signals: list[signal.Signals] = []
        if self.options.handle_signals and threading.current_thread() is threading.main_thread():
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(s, self._on_signal)
                signals.append(s)
        beat = asyncio.create_task(self._beat_loop())
        fetcher = asyncio.create_task(self._fetch_loop())
        self._started_log()
        try:
            stop_wait = asyncio.create_task(self._stop_event.wait())
            await asyncio.wait({stop_wait, fetcher}, return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
        finally:
            self._stopping = True
            await self._shutdown(fetcher, beat)
            for s in signals:
                loop.remove_signal_handler(s)
            self._closed = True
        if self._exit is not None:
            raise self._exit

    # -- shutdown -----------------------------------------------------------------------
    async def _shutdown(self, fetcher: asyncio.Task[None], beat: asyncio.Task[None]) -> None:
        deadline = time.monotonic() + self.options.grace_ms / 1000
        self.log.info("worker stopping: no new jobs; %d running", len(self._running))
        while not fetcher.done():
            # Raced with the fetcher: against a server going away, CLIENT UNBLOCK retries
            # (the client's own retry policy) while the blocking pop has already failed.
            unblock = asyncio.create_task(self._unblock())
            await asyncio.wait({fetcher, unblock}, return_when=asyncio.FIRST_COMPLETED)
            if fetcher.done():
                unblock.cancel()
                await asyncio.gather(unblock, return_exceptions=True)
                break
            await asyncio.wait({fetcher}, timeout=0.1)
        while self._running and not self._hurry and time.monotonic() < deadline:
            await self._wait_changed(deadline - time.monotonic())
        leftovers = [(r, t) for r, t in self._running.values() if not r.finished]
        for r, _ in leftovers:
            r.finished = True
            del self._running[_key(r.job)]
        await self._hand_back(
            [r.job for r, _ in leftovers if r.job.abandoned is None], "handed back at shutdown"
        )
        for _, task in leftovers:
            task.cancel()
        # What is left are finishes in flight (ACK ... NEXT): their tasks hand back a job the
        # reply brings, then leave the table.
        end = time.monotonic() + FINISH_WAIT_S
        while self._running and time.monotonic() < end:
            await self._wait_changed(end - time.monotonic())
        if self._running:
            self.log.error(
                "%d acks still unanswered after %.0fs; a job they lease comes back when its "
                "lease expires",
                len(self._running),
                FINISH_WAIT_S,
            )
        self._running.clear()
        beat.cancel()
        await asyncio.gather(beat, *(t for _, t in leftovers), return_exceptions=True)
        if self._blocker is not None:
            await self._blocker.aclose()
        if self._shards is not None:
            await self._shards.close()
        self.log.info("worker stopped: %s", self.counts)

    async def _wait_changed(self, timeout: float) -> None:
        assert self._changed is not None
        self._changed.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), max(timeout, 0))

    async def _unblock(self) -> None:
        if self._shards is not None:
            await self._shards.unblock()
            return
        if self._blocker_id is None:
            return
        try:
            await self.client.client_unblock(self._blocker_id)
        except RedisError as e:
            self.log.debug("CLIENT UNBLOCK failed: %s", e)

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

    async def _pipeline(self, cmds: Sequence[P.Command[Any]]) -> list[Any]:
        """``cmds`` in one round trip (and their WAIT, when the worker waits for replicas)."""
        wait = self._wait_args(cmds)
        async with self.client.pipeline(transaction=False) as pipe:
            for c in cmds:
                execute(pipe, c.args, c.options)
            if wait is not None:
                execute(pipe, wait)
            replies = list(await pipe.execute(raise_on_error=False))
        if wait is not None:
            self._waited(replies.pop(), cmds)
        return replies

    async def _call(self, cmd: P.Command[T]) -> T:
        """One command on the shared client (with its WAIT when the worker waits)."""
        if not self.durability.on:
            return await self._run(self.client, cmd)
        (reply,) = await self._pipeline([cmd])
        if isinstance(reply, ResponseError):
            raise map_error(reply)
        return cmd.parse(reply)

    async def _confirm(self, jobs: list[Job]) -> list[Job]:
        """See :meth:`orca_queue.Worker._confirm`."""
        if not jobs or not self.durability.on:
            return jobs
        replies = await self._pipeline([self.strategy.extend(j) for j in jobs])
        kept = []
        for job, reply in zip(jobs, replies, strict=True):
            err = map_error(reply) if isinstance(reply, ResponseError) else None
            if isinstance(err, LeaseLostError):
                self.log.warning("job %s: lease lost before it started (%s)", job.key, err)
            else:
                kept.append(job)
        return kept

    # -- fetching -----------------------------------------------------------------------
    async def _run(self, client: redis.asyncio.Redis, cmd: P.Command[T]) -> T:
        try:
            reply = await execute(client, cmd.args, cmd.options)
        except ResponseError as e:
            raise map_error(e) from None
        return cmd.parse(reply)

    async def _fetch(self, free: int) -> list[Job]:
        jobs: list[Job] = []
        for group in self._groups:  # one, unless on a cluster with queues in several slots
            while len(jobs) < free:
                got: list[Job] = await self._call(group.quick(free - len(jobs)))
                jobs.extend(got)
                # A short MPOP that brought jobs may leave some in the next queues.
                if not got or not group.several:
                    break
        if jobs or self._stopping:
            return jobs
        if self._shards is not None:
            jobs = await self._shards.pop(free)
            extra, jobs = jobs[free:], await self._confirm(jobs[:free])
            await self._hand_back(extra, "brought by pops on several shards at once, handed back")
            return jobs
        if self._blocker is None:
            self._blocker = async_blocking_client(self.client, self.strategy.block_ms)
        if self._blocker_id is None:
            self._blocker_id = int(await self._blocker.client_id())
        return await self._confirm(await self._run(self._blocker, self.strategy.blocking(free)))

    async def _fetch_loop(self) -> None:
        backoff = 0.1
        while not self._stopping:
            free = self.options.concurrency - len(self._running)
            if free <= 0:
                await self._wait_changed(0.5)
                continue
            try:
                jobs = await self._fetch(free)
                backoff = 0.1
            except (ConnectionError, TimeoutError, OSError) as e:
                self._blocker_id = None
                self.log.warning("fetching jobs failed (%s); retrying in %.1fs", e, backoff)
                await self._wait_changed(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except RedisError as e:
                self.log.error("fetching jobs failed: %s; retrying in %.1fs", e, backoff)
                await self._wait_changed(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if self._stopping:
                await self._hand_back(jobs, "popped while stopping, handed back")
                return
            for job in jobs:
                r = Running(job)
                self._running[_key(job)] = (r, asyncio.create_task(self._handle(r)))

    # -- handling -------------------------------------------------------------------------
    async def _call_handler(self, job: Job) -> Any:
        if inspect.iscoroutinefunction(self.handler):
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
            r = await self._finish(r, value, error)  # the slot's next job, if it took one

    async def _execute(self, cmds: list[P.Command[Any]]) -> list[Any]:
        """One command, or several pipelined: each parsed reply or its Orca error."""
        if len(cmds) == 1 and not self.durability.on:
            try:
                return [await self._run(self.client, cmds[0])]
            except ResponseError as e:
                return [map_error(e)]
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
        job = r.job
        claimed = not r.finished
        r.finished = True
        try:
            if not claimed or job.abandoned is not None:
                self.log.info("job %s: result dropped (%s)", job.key, job.abandoned)
                return None
            take_next = not self._stopping
            cmds, error = self._finish_commands(job, value, error, take_next)
            replies = await self._finish_execute(r, cmds, error)
            refused = self._refused_result(job, error, cmds, replies, take_next)
            if refused is not None:
                nack, error = refused
                again = await self._finish_execute(r, nack, error)
                replies = [again[0], *replies[1:], *again[1:]]
            leased = self._after_finish(job, value, error, replies)
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
                self._running.pop(_key(job), None)
            if self._changed is not None:
                self._changed.set()

    # -- heartbeats -------------------------------------------------------------------------
    async def _beat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.tick_s)
            now = time.monotonic()
            due = [
                r
                for r, _ in self._running.values()
                if not r.finished
                and r.job.abandoned is None
                and now - r.last_beat >= self.options.beat_s
            ]
            if due:
                await self._beat(due, now)

    async def _beat(self, due: list[Running], now: float) -> None:
        try:
            replies = await self._pipeline([self.strategy.extend(r.job) for r in due])
        except RedisError as e:
            self.log.warning("heartbeat of %d jobs failed: %s", len(due), e)
            return
        self._after_beats(due, replies, now)

"""The asyncio worker runtime: :class:`orca_queue.Worker`'s behaviour on one event loop.

``await Worker(queue, handler, concurrency=8).run()``: ``handler`` is an ``async def`` (run as
a task per job) or a plain function (run in a thread with ``asyncio.to_thread``). Slots that
finish in the same event-loop iteration share one ``ORCA.MACK ... NEXT COUNT n``, whose reply
brings their next jobs (:mod:`orca_queue.aio.finish`); the fetcher fills slots left free,
and once the queue is found empty waits on the worker's blocking connection: with a blocking
pop, or by sending the slots that just finished as ``MACK ... NEXT BLOCK`` (ack, then wait for
the next job: one command per job at a trickle). At a stop (``stop()``, ``await close()``,
SIGTERM/SIGINT) it stops taking jobs, waits up to ``grace_ms`` for running handlers, hands
the rest back and cancels their tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from typing import Any

import redis.asyncio
from redis.exceptions import ConnectionError, RedisError, ResponseError, TimeoutError

from .. import protocol as P
from ..batch import ACK_WAIT_MS, Done, merged, refused_block
from ..connection import async_blocking_client
from ..errors import LeaseLostError, map_error
from ..runtime import FINISH_WAIT_S, Running
from ..shards import is_cluster
from ..types import Job
from .finish import AsyncFinisher, Handler, _key
from .queue import Queue
from .shards import AsyncShardBlockers

__all__ = ["Handler", "Worker"]


class Worker(AsyncFinisher):
    """Runs ``handler(job)`` for the jobs of one or more asyncio queues (one client). Options
    and hooks as :class:`orca_queue.Worker` (see :class:`~orca_queue.runtime.WorkerBase`);
    hooks run on the event loop."""

    queues: list[Queue]

    def _setup(self) -> None:
        self.client = self.queues[0].client
        self._running = {}
        self._stopping = False
        self._hurry = False
        self._stop_event: asyncio.Event | None = None
        self._changed = None
        self._blocker: redis.asyncio.Redis | None = None
        self._blocker_id: int | None = None
        self._started = False
        self._closed = False
        self._reserved = 0  # free slots a pop in flight (or a blocking MACK) may fill
        self._setup_finishing()
        # On a Redis Cluster: the queues by hash slot, each group with its blocking connection.
        self._groups = [self.strategy]
        self._shards: AsyncShardBlockers | None = None
        if is_cluster(self.client):
            cluster: Any = self.client
            self._groups = self.strategy.by_slot(cluster.keyslot)
            self._shards = AsyncShardBlockers(cluster, self._groups, self._run, self.log)
        self._block_next = (
            self._shards is None
            and not self.strategy.several
            and self.strategy.ack_next
            and not self.durability.on
        )

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
        self._wake()

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
        self._flush()  # successes of this iteration: acked now (plain MACK)
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
        # What is left are finishes in flight (MACK / ACK ... NEXT): a job their reply brings
        # is handed back, then they leave the table.
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

    async def _call(self, cmd: P.Command[Any]) -> Any:
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
    # The fetcher fills the slots left free. Until the queue is found empty it pops without
    # blocking; then it waits on the blocking connection, at most one command at a time: a
    # blocking pop, or (while slots finish) their MACK ... NEXT BLOCK. A fetcher that finds the
    # queue empty while quick handlers run waits a little for one of them to finish (see
    # batch.LINGER_S), so that the finish itself waits for the next job (the blocking pop
    # would else take it, and the finish be a command of its own).
    async def _fetch_loop(self) -> None:
        backoff = 0.1
        linger_until = 0.0
        while not self._stopping:
            free = self.options.concurrency - len(self._running) - self._reserved
            if self._arm_with:
                if not self._empty or self._others_running() or self._armed:
                    # Work came meanwhile: these go as a plain batch, NEXT refilling them.
                    done, self._arm_with = self._arm_with, []
                    self._send_later(done, True)
                    continue
                free += len(self._arm_with)  # their slots are in the table still
            if free <= 0:
                await self._wait_changed(0.5)
                continue
            try:
                if not self._empty:
                    linger_until = 0.0
                    self._launch(await self._fetch(free))
                    continue
                linger = self._batches.linger_s if self._block_next and self._trickle else 0.0
                if not self._arm_with and linger:
                    busy = self._others_running() or bool(self._done)
                    now = time.monotonic()
                    if busy and linger_until == 0.0:
                        linger_until = now + linger
                    if busy and now < linger_until:
                        await self._wait_changed(linger_until - now)
                        continue
                linger_until = 0.0
                self._launch(await self._wait_for_work(free))
                backoff = 0.1
            except (ConnectionError, TimeoutError, OSError) as e:
                self._blocker_id = None
                self.log.warning("fetching jobs failed (%s); retrying in %.1fs", e, backoff)
                await self._wait_changed(backoff)
                backoff = min(backoff * 2, 5.0)
            except RedisError as e:
                self.log.error("fetching jobs failed: %s; retrying in %.1fs", e, backoff)
                await self._wait_changed(backoff)
                backoff = min(backoff * 2, 5.0)
        if self._arm_with:  # stopping: acked with the rest of the iteration's
            self._done[:0] = self._arm_with
            self._arm_with = []
            self._flush()

    def _launch(self, jobs: list[Job]) -> None:
        for job in jobs:
            self._start(job)

    async def _fetch(self, free: int) -> list[Job]:
        """Non-blocking pops for ``free`` slots (the queue is not known to be empty)."""
        jobs: list[Job] = []
        self._reserved += free
        try:
            for group in self._groups:  # one, unless on a cluster with queues in several slots
                while len(jobs) < free:
                    got: list[Job] = await self._call(group.quick(free - len(jobs)))
                    jobs.extend(got)
                    # A short MPOP that brought jobs may leave some in the next queues.
                    if not got or not group.several:
                        break
        finally:
            self._reserved -= free
        if len(jobs) < free:
            self._empty = True
        else:
            self._trickle = False
        if self._stopping:
            await self._hand_back(jobs, "popped while stopping, handed back")
            return []
        return jobs

    async def _wait_for_work(self, free: int) -> list[Job]:
        """One blocking command for ``free`` slots: the pending finishes' MACK ... NEXT BLOCK
        (whose jobs it starts itself), or a blocking pop (whose jobs it returns)."""
        done, self._arm_with = self._arm_with, []
        held = free - len(done)  # slots the reply may fill besides the finishing ones
        self._reserved += held
        self._armed = True
        jobs: list[Job] = []
        try:
            if done:
                got = await self._ack_and_wait(done, free)
            else:
                jobs = await self._blocking_pop(free)
                got = len(jobs)
        finally:
            self._armed = False
            self._reserved -= held
        if got >= free:
            self._empty = self._trickle = False  # there may be more
        elif got:
            self._trickle = True  # work arrives one job at a time
        if self._stopping:
            await self._hand_back(jobs, "popped while stopping, handed back")
            return []
        return jobs

    async def _blocking_pop(self, free: int) -> list[Job]:
        if self._shards is not None:
            jobs = await self._shards.pop(free)
            extra, jobs = jobs[free:], await self._confirm(jobs[:free])
            await self._hand_back(extra, "brought by pops on several shards at once, handed back")
            return jobs
        blocker = await self._blocking_client()
        return await self._confirm(await self._run(blocker, self.strategy.blocking(free)))

    async def _blocking_client(self) -> redis.asyncio.Redis:
        if self._blocker is None:
            self._blocker = async_blocking_client(self.client, self.strategy.block_ms)
        if self._blocker_id is None:
            self._blocker_id = int(await self._blocker.client_id())
        return self._blocker

    async def _ack_and_wait(self, done: list[Done], free: int) -> int:
        """``done`` acked with ``MACK ... NEXT COUNT free BLOCK`` on the blocking connection,
        the jobs it brings started (:meth:`_settled`); how many it brought. After a connection
        error the batch is re-sent without BLOCK on the shared client."""
        wait = min(self.strategy.block_ms, ACK_WAIT_MS)
        cmds, merge = self._batches.commands(done, next=True, count=free, block_ms=wait)
        try:
            blocker = await self._blocking_client()
            # Some results None, some not: the first MACK (results, no NEXT) goes first on
            # the shared client, the one that waits last on the blocking connection.
            raw = await self._pipeline(cmds[:-1]) if len(cmds) > 1 else []
            try:
                raw.append(await P.execute(blocker, cmds[-1].args, cmds[-1].options))
            except ResponseError as e:
                raw.append(e)
            reply = merged(cmds, merge, raw)
        except (ConnectionError, TimeoutError, OSError) as e:
            self._blocker_id = None
            self.log.warning("waiting for jobs failed (%s); acking without waiting", e)
            self._send_later(done, False)
            return 0
        if isinstance(reply, BaseException) and refused_block(reply):
            self.log.warning("the server has no NEXT ... BLOCK (an older module): blocking pops")
            self._block_next = False
            self._send_later(done, True)
            return 0
        await self._settled(done, reply, 0)
        return 0 if isinstance(reply, BaseException) else len(reply.jobs)

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

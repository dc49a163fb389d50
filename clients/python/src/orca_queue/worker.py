"""The thread-based worker runtime.

``Worker(queue, handler, concurrency=4).run()`` takes jobs, runs ``handler(job)`` on up to
``concurrency`` threads, acks each with its return value as the result, nacks on an
exception, keeps leases alive with heartbeats, and on SIGTERM/SIGINT (or ``stop()``) stops
taking jobs, lets running ones finish within ``grace_ms`` and hands the rest back.

Threads: the caller's (``run()``: waits for a stop, then shuts down), one fetcher (pops on
the shared client for free slots, and blocking pops on a connection of its own), one
heartbeat thread and ``concurrency`` handler threads. A handler thread that finishes a job
takes its slot's next job in the same round trip (``ORCA.ACK ... NEXT``, see
:mod:`orca_queue.strategy`) and runs it itself, so a busy worker sends one command per job;
the fetcher only fills slots left free. Handler threads are daemons: a handler still stuck
after the grace period does not keep the process alive (its job has been handed back and
its result is dropped).
"""

from __future__ import annotations

import queue as stdqueue
import signal
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, Optional, TypeVar

import redis
from redis.exceptions import ConnectionError, RedisError, ResponseError, TimeoutError

from . import protocol as P
from .connection import blocking_client
from .errors import LeaseLostError, map_error
from .protocol import execute
from .queue import Queue
from .runtime import FINISH_WAIT_S, Running, WorkerBase, is_connection_error
from .shards import ShardBlockers, is_cluster
from .types import Job

T = TypeVar("T")
Handler = Callable[[Job], Any]
_Token = tuple[str, str, str]  # (queue, orca key, lease)


def _token(job: Job) -> _Token:
    return (job.queue or "", job.key, job.lease or "")


class Worker(WorkerBase):
    """Runs ``handler(job)`` for the jobs of one or more queues (all on one Redis client), on
    ``concurrency`` threads; hooks run on worker threads. Options: see
    :class:`~orca_queue.runtime.WorkerBase`."""

    queues: list[Queue]

    def _setup(self) -> None:
        self.client: redis.Redis = self.queues[0].client
        self._cond = threading.Condition()
        self._running: dict[_Token, Running] = {}
        self._inbox: stdqueue.SimpleQueue[Optional[Running]] = stdqueue.SimpleQueue()
        self._stop = threading.Event()  # no more jobs taken
        self._closed = threading.Event()  # heartbeats end
        self._hurry = False  # skip what is left of the grace period
        self._signals = 0  # set by signal handlers (which must not take locks)
        self._blocker: Optional[redis.Redis] = None
        self._blocker_id: Optional[int] = None
        self._started = False
        # On a Redis Cluster: the queues by hash slot, each group with its blocking connection.
        self._groups = [self.strategy]
        self._shards: Optional[ShardBlockers] = None
        if is_cluster(self.client):
            cluster: Any = self.client
            self._groups = self.strategy.by_slot(cluster.keyslot)
            self._shards = ShardBlockers(self.client, self._groups, self._run, self.log)

    # -- control ------------------------------------------------------------------------
    def stop(self, *, now: bool = False) -> None:
        """Stop taking jobs; ``run()`` then waits up to ``grace_ms`` for running handlers
        (``now=True``: not at all) and hands back the rest. Thread-safe."""
        if now:
            self._hurry = True
        self._stop.set()

    def _begin_stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Work until ``stop()`` or SIGTERM/SIGINT (a second signal skips the grace). A
        ``SystemExit`` / ``KeyboardInterrupt`` raised by a handler stops the worker the same
        way (its delivery NACKed as failed), then is raised here."""
        if self._started:
            raise RuntimeError("a Worker runs once")
        self._started = True
        restore = self._install_signals()
        threads = [
            threading.Thread(target=self._handle_loop, name=f"orca-handler-{i}", daemon=True)
            for i in range(self.options.concurrency)
        ]
        beat = threading.Thread(target=self._beat_loop, name="orca-heartbeat", daemon=True)
        fetcher = threading.Thread(target=self._fetch_loop, name="orca-fetcher", daemon=True)
        for t in [*threads, beat, fetcher]:
            t.start()
        self._started_log()
        try:
            while not self._stop.is_set() and fetcher.is_alive():
                if self._signals:
                    self._stop.set()
                time.sleep(0.05)
        finally:
            self._stop.set()
            self._shutdown(fetcher, beat)
            restore()
        if self._exit is not None:
            raise self._exit

    def _install_signals(self) -> Callable[[], None]:
        if (
            not self.options.handle_signals
            or threading.current_thread() is not threading.main_thread()
        ):
            return lambda: None

        def on_signal(signum: int, frame: Optional[FrameType]) -> None:
            # Only plain assignments here: a signal handler runs on the main thread between
            # two bytecodes, possibly while that thread holds a lock.
            self._signals += 1
            if self._signals > 1:
                self._hurry = True

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for s, h in old.items():
                signal.signal(s, h)

        return restore

    def _count(self, what: str, n: int = 1) -> None:
        with self._cond:
            self.counts[what] += n

    # -- shutdown -----------------------------------------------------------------------
    def _shutdown(self, fetcher: threading.Thread, beat: threading.Thread) -> None:
        deadline = time.monotonic() + self.options.grace_ms / 1000
        self.log.info("worker stopping: no new jobs; %d running", len(self._running))
        while fetcher.is_alive():
            # In a thread of its own, raced with the fetcher: against a server going away,
            # CLIENT UNBLOCK retries (the client's own retry policy) while the blocking pop
            # has already failed.
            unblock = threading.Thread(target=self._unblock, name="orca-unblock", daemon=True)
            unblock.start()
            while fetcher.is_alive() and unblock.is_alive():
                fetcher.join(0.02)
            fetcher.join(0.1)
        with self._cond:
            while self._running and not self._hurry and not self._signals > 1:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
            leftovers = [r for r in self._running.values() if not r.finished]
            for r in leftovers:
                r.finished = True
                del self._running[_token(r.job)]
        # A delivery whose lease is already lost is not ours to hand back.
        self._hand_back(
            [r.job for r in leftovers if r.job.abandoned is None], "handed back at shutdown"
        )
        # What is left are finishes in flight (ACK ... NEXT): their threads hand back a job
        # the reply brings, then leave the table.
        with self._cond:
            end = time.monotonic() + FINISH_WAIT_S
            while self._running and time.monotonic() < end:
                self._cond.wait(0.05)
            if self._running:
                self.log.error(
                    "%d acks still unanswered after %.0fs; a job they lease comes back when "
                    "its lease expires",
                    len(self._running),
                    FINISH_WAIT_S,
                )
        self._closed.set()
        for _ in range(self.options.concurrency):
            self._inbox.put(None)
        beat.join(2)
        if self._blocker is not None:
            self._blocker.close()
        if self._shards is not None:
            self._shards.close()
        self.log.info("worker stopped: %s", self.counts)

    def _unblock(self) -> None:
        """Wake the fetcher's blocking pop (it then sees the stop)."""
        if self._shards is not None:
            self._shards.unblock()
            return
        if self._blocker_id is None:
            return
        try:
            self.client.client_unblock(self._blocker_id)
        except RedisError as e:
            self.log.debug("CLIENT UNBLOCK failed: %s", e)

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

    def _pipeline(self, cmds: Sequence[P.Command[Any]]) -> list[Any]:
        """``cmds`` in one round trip (and their WAIT, when the worker waits for replicas):
        each raw reply, an error reply as its exception."""
        wait = self._wait_args(cmds)
        pipe = self.client.pipeline(transaction=False)
        for c in cmds:
            execute(pipe, c.args, c.options)
        if wait is not None:
            execute(pipe, wait)
        replies = list(pipe.execute(raise_on_error=False))
        if wait is not None:
            self._waited(replies.pop(), cmds)
        return replies

    # -- fetching -----------------------------------------------------------------------
    def _run(self, client: redis.Redis, cmd: P.Command[T]) -> T:
        try:
            reply = execute(client, cmd.args, cmd.options)
        except ResponseError as e:
            raise map_error(e) from None
        return cmd.parse(reply)

    def _call(self, cmd: P.Command[T]) -> T:
        """One command on the shared client (with its WAIT when the worker waits)."""
        if not self.durability.on:
            return self._run(self.client, cmd)
        (reply,) = self._pipeline([cmd])
        if isinstance(reply, ResponseError):
            raise map_error(reply)
        return cmd.parse(reply)

    def _confirm(self, jobs: list[Job]) -> list[Job]:
        """Jobs a blocking pop brought, once replicas have their leases: the pop ran on the
        blocking connection, so a WAIT there may not cover it; an EXTEND of each lease on the
        shared connection, with its WAIT, does (replication keeps the server's order). A
        lease already lost is dropped."""
        if not jobs or not self.durability.on:
            return jobs
        replies = self._pipeline([self.strategy.extend(j) for j in jobs])
        kept = []
        for job, reply in zip(jobs, replies, strict=True):
            err = map_error(reply) if isinstance(reply, ResponseError) else None
            if isinstance(err, LeaseLostError):
                self.log.warning("job %s: lease lost before it started (%s)", job.key, err)
            else:
                kept.append(job)
        return kept

    def _free_slots(self) -> int:
        with self._cond:
            while not self._stop.is_set():
                free = self.options.concurrency - len(self._running)
                if free > 0:
                    return free
                self._cond.wait(0.2)
        return 0

    def _fetch(self, free: int) -> list[Job]:
        jobs: list[Job] = []
        for group in self._groups:  # one, unless on a cluster with queues in several slots
            while len(jobs) < free:
                got: list[Job] = self._call(group.quick(free - len(jobs)))
                jobs.extend(got)
                # A short pop of one queue means it is empty; MPOP takes from one queue at a
                # time, so a short MPOP that brought jobs may leave others in the next queues.
                if not got or not group.several:
                    break
        if jobs or self._stop.is_set():
            return jobs
        if self._shards is not None:
            jobs = self._shards.pop(free)
            extra, jobs = jobs[free:], self._confirm(jobs[:free])
            self._hand_back(extra, "brought by pops on several shards at once, handed back")
            return jobs
        if self._blocker is None:
            self._blocker = blocking_client(self.client, self.strategy.block_ms)
        if self._blocker_id is None:
            self._blocker_id = int(self._blocker.client_id())
        return self._confirm(self._run(self._blocker, self.strategy.blocking(free)))

    def _fetch_loop(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            free = self._free_slots()
            if not free:
                break
            try:
                jobs = self._fetch(free)
                backoff = 0.1
            except (ConnectionError, TimeoutError) as e:
                self._blocker_id = None
                self.log.warning("fetching jobs failed (%s); retrying in %.1fs", e, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except RedisError as e:
                self.log.error("fetching jobs failed: %s; retrying in %.1fs", e, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if self._stop.is_set():
                self._hand_back(jobs, "popped while stopping, handed back")
                break
            with self._cond:
                runs = [Running(job) for job in jobs]
                for r in runs:
                    self._running[_token(r.job)] = r
            for r in runs:
                self._inbox.put(r)

    # -- handling -------------------------------------------------------------------------
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
                r = self._finish(r, value, error)  # the slot's next job, if it took one

    def _execute(self, cmds: list[P.Command[Any]]) -> list[Any]:
        """One command, or several pipelined (one round trip): each parsed reply, or the
        Orca error it got. A connection error raises."""
        if len(cmds) == 1 and not self.durability.on:
            try:
                return [self._run(self.client, cmds[0])]
            except ResponseError as e:
                return [map_error(e)]
        return P.parse_pipeline(cmds, self._pipeline(cmds))

    def _try_execute(self, cmds: list[P.Command[Any]]) -> list[Any]:
        """:meth:`_execute`, with a connection error as the first command's reply."""
        try:
            return self._execute(cmds)
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
        """Acks or nacks ``r``; returns the slot's next job (registered) when one was taken."""
        job = r.job
        with self._cond:
            claimed = not r.finished
            r.finished = True
            take_next = not self._stop.is_set()
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
            return self._take(leased)
        finally:
            with self._cond:
                if claimed:
                    self._running.pop(_token(job), None)
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

    # -- heartbeats -------------------------------------------------------------------------
    def _beat_loop(self) -> None:
        while not self._closed.wait(self.options.tick_s):
            now = time.monotonic()
            with self._cond:
                due = [
                    r
                    for r in self._running.values()
                    if not r.finished
                    and r.job.abandoned is None
                    and now - r.last_beat >= self.options.beat_s
                ]
            if due:
                self._beat(due, now)

    def _beat(self, due: list[Running], now: float) -> None:
        try:
            replies = self._pipeline([self.strategy.extend(r.job) for r in due])
        except RedisError as e:
            self.log.warning("heartbeat of %d jobs failed: %s", len(due), e)
            return
        self._after_beats(due, replies, now)

"""The thread-based worker runtime.

``Worker(queue, handler, concurrency=4).run()`` takes jobs, runs ``handler(job)`` on up to
``concurrency`` threads, acks each with its return value as the result, nacks on an
exception, keeps leases alive with heartbeats, and on SIGTERM/SIGINT (or ``stop()``) stops
taking jobs, lets running ones finish within ``grace_ms`` and hands the rest back.

Threads: the caller's (``run()``: waits for a stop, then shuts down), one fetcher, one
heartbeat thread and ``concurrency`` handler threads. The fetcher does the worker's I/O in the
common case: it acks the handler threads' successes in batches, one ``ORCA.MACK ... NEXT COUNT
n`` each, whose reply brings the jobs for the freed slots (a busy worker sends one command per
batch, not per job: :mod:`orca_queue.finish`); it fills slots left free with pops; once the
queue is found empty it waits on a blocking connection of its own (a blocking pop, or at a
trickle the last finishes' ``MACK ... NEXT BLOCK``: one command per job). Handler threads are
daemons: a handler still stuck after the grace period does not keep the process alive (its
job has been handed back and its result is dropped).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Optional, TypeVar

import redis
from redis.exceptions import ConnectionError, RedisError, ResponseError, TimeoutError

from . import protocol as P
from .batch import ACK_WAIT_MS, Done, merged, refused_block
from .connection import blocking_client
from .errors import LeaseLostError, map_error
from .finish import ThreadFinisher, _token
from .queue import Queue
from .runtime import FINISH_WAIT_S, Running
from .shards import ShardBlockers, is_cluster
from .types import Job

T = TypeVar("T")
Handler = Callable[[Job], Any]


class Worker(ThreadFinisher):
    """Runs ``handler(job)`` for the jobs of one or more queues (all on one Redis client), on
    ``concurrency`` threads; hooks run on worker threads. Options: see
    :class:`~orca_queue.runtime.WorkerBase`."""

    queues: list[Queue]

    def _setup(self) -> None:
        self.client = self.queues[0].client
        self._cond = threading.Condition()
        self._running = {}
        self._stop = threading.Event()  # no more jobs taken
        self._closed = threading.Event()  # heartbeats end
        self._hurry = False  # skip what is left of the grace period
        self._signals = 0  # set by signal handlers (which must not take locks)
        self._blocker: Optional[redis.Redis] = None
        self._blocker_id: Optional[int] = None
        self._started = False
        self._reserved = 0  # free slots a pop in flight (or a blocking MACK) may fill
        self._setup_finishing()
        # On a Redis Cluster: the queues by hash slot, each group with its blocking connection.
        self._groups = [self.strategy]
        self._shards: Optional[ShardBlockers] = None
        if is_cluster(self.client):
            cluster: Any = self.client
            self._groups = self.strategy.by_slot(cluster.keyslot)
            self._shards = ShardBlockers(self.client, self._groups, self._run, self.log)
        self._block_next = (
            self._shards is None
            and not self.strategy.several
            and self.strategy.ack_next
            and not self.durability.on
        )

    # -- control ------------------------------------------------------------------------
    def stop(self, *, now: bool = False) -> None:
        """Stop taking jobs; ``run()`` then waits up to ``grace_ms`` for running handlers
        (``now=True``: not at all) and hands back the rest. Thread-safe."""
        if now:
            self._hurry = True
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    def _begin_stop(self) -> None:
        self.stop()

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
        self._dispatching = True
        for t in [*threads, beat, fetcher]:
            t.start()
        self._started_log()
        try:
            while not self._stop.is_set() and fetcher.is_alive():
                if self._signals:
                    self.stop()
                time.sleep(0.05)
        finally:
            self.stop()
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
        self._dispatching = False
        self._ack_outbox()  # successes the fetcher had not sent: plain MACK
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

    def _ack_outbox(self) -> None:
        with self._cond:
            done, self._outbox = self._outbox, []
        if done:
            self._send_batch(done, False)

    def _unblock(self) -> None:
        """Wake the fetcher's blocking pop (it then sees the stop)."""
        if self._shards is not None:
            self._shards.unblock()
            return
        if self._blocker_id is None:
            return
        try:
            self.client.client_unblock(self._blocker_id)
        except (RedisError, OSError, ValueError) as e:
            # OSError / ValueError: the client was closed under this daemon thread (the
            # worker had stopped and its owner closed the client while the call retried).
            self.log.debug("CLIENT UNBLOCK failed: %s", e)

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

    # -- fetching -----------------------------------------------------------------------
    # The fetcher thread: acks the outbox in batches (MACK ... NEXT, the reply refilling the
    # slots), fills slots left free with pops until the queue is found empty, then waits on
    # the blocking connection (a blocking pop, or at a trickle the last finishes' MACK ...
    # NEXT BLOCK, after waiting a little for them: see batch.LINGER_S).
    def _next_step(self, linger_until: float) -> tuple[list[Done], int, float]:
        """Waits until there is something to do: (finishes to ack, free slots, linger
        deadline). Nothing (and 0) once the worker stops."""
        with self._cond:
            while not self._stop.is_set():
                free = self.options.concurrency - len(self._running) - self._reserved
                if self._outbox:
                    done, self._outbox = self._outbox, []
                    return done, free + len(done), 0.0
                if free <= 0:
                    self._cond.wait(0.5)
                    continue
                if not self._empty:
                    return [], free, 0.0
                busy = any(not r.finished for r in self._running.values())
                linger = self._batches.linger_s if self._block_next and self._trickle else 0.0
                if busy and linger:
                    now = time.monotonic()
                    if linger_until == 0.0:
                        linger_until = now + linger
                    if now < linger_until:
                        self._cond.wait(linger_until - now)
                        continue
                return [], free, 0.0
        return [], 0, 0.0

    def _fetch_loop(self) -> None:
        backoff = 0.1
        linger_until = 0.0
        while not self._stop.is_set():
            done, free, linger_until = self._next_step(linger_until)
            try:
                if done and self._waits_with_fetcher(done):
                    self._wait_for_work(free, done)
                elif done:
                    # The queue is known empty while nobody waits: ack, and NEXT finds out.
                    self._send_batch(done, True)
                elif free and not self._empty:
                    self._register(self._fetch(free))
                elif free:
                    self._wait_for_work(free, [])
                backoff = 0.1
            except (ConnectionError, TimeoutError) as e:
                self._blocker_id = None
                self.log.warning("fetching jobs failed (%s); retrying in %.1fs", e, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except RedisError as e:
                self.log.error("fetching jobs failed: %s; retrying in %.1fs", e, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)

    def _fetch(self, free: int) -> list[Job]:
        """Non-blocking pops for ``free`` slots (the queue is not known to be empty)."""
        jobs: list[Job] = []
        with self._cond:
            self._reserved += free
        try:
            for group in self._groups:  # one, unless on a cluster with queues in several slots
                while len(jobs) < free:
                    got: list[Job] = self._call(group.quick(free - len(jobs)))
                    jobs.extend(got)
                    # A short pop of one queue means it is empty; MPOP takes from one queue at
                    # a time, so a short MPOP that brought jobs may leave others in the next.
                    if not got or not group.several:
                        break
        finally:
            with self._cond:
                self._reserved -= free
        if len(jobs) < free:
            self._empty = True
        else:
            self._trickle = False
        if self._stop.is_set():
            self._hand_back(jobs, "popped while stopping, handed back")
            return []
        return jobs

    def _wait_for_work(self, free: int, done: list[Done]) -> None:
        """One blocking command for ``free`` slots: ``done``'s MACK ... NEXT BLOCK, or a
        blocking pop; the jobs it brings registered."""
        held = free - len(done)  # slots the reply may fill besides the finishing ones
        with self._cond:
            self._reserved += held
            self._armed = True
        got = 0
        try:
            if done:
                got = self._ack_and_wait(done, free)
            else:
                jobs = self._blocking_pop(free)
                got = len(jobs)
                self._disarm()
                if self._stop.is_set():
                    self._hand_back(jobs, "popped while stopping, handed back")
                else:
                    self._register(jobs)
        finally:
            with self._cond:
                self._armed = False
                self._reserved -= held
                self._cond.notify_all()
        if got >= free:
            self._empty = self._trickle = False  # there may be more
        elif got:
            self._trickle = True  # work arrives one job at a time

    def _disarm(self) -> None:
        """The blocking command is back: from now on, finishes go to the fetcher again (before
        the jobs it brought start, so that theirs do)."""
        with self._cond:
            self._armed = False

    def _blocking_pop(self, free: int) -> list[Job]:
        if self._shards is not None:
            jobs = self._shards.pop(free)
            extra, jobs = jobs[free:], self._confirm(jobs[:free])
            self._hand_back(extra, "brought by pops on several shards at once, handed back")
            return jobs
        return self._confirm(self._run(self._blocking_client(), self.strategy.blocking(free)))

    def _blocking_client(self) -> redis.Redis:
        if self._blocker is None:
            self._blocker = blocking_client(self.client, self.strategy.block_ms)
        if self._blocker_id is None:
            self._blocker_id = int(self._blocker.client_id())
        return self._blocker

    def _ack_and_wait(self, done: list[Done], free: int) -> int:
        """``done`` acked with ``MACK ... NEXT COUNT free BLOCK`` on the blocking connection,
        the jobs it brings registered; how many. After a connection error the batch is
        re-sent without BLOCK on the shared client."""
        wait = min(self.strategy.block_ms, ACK_WAIT_MS)
        cmds, merge = self._batches.commands(done, next=True, count=free, block_ms=wait)
        try:
            blocker = self._blocking_client()
            # Some results None, some not: the first MACK (results, no NEXT) goes first on
            # the shared client, the one that waits last on the blocking connection.
            raw = self._pipeline(cmds[:-1]) if len(cmds) > 1 else []
            try:
                raw.append(P.execute(blocker, cmds[-1].args, cmds[-1].options))
            except ResponseError as e:
                raw.append(e)
            reply = merged(cmds, merge, raw)
        except (ConnectionError, TimeoutError, OSError) as e:
            self._blocker_id = None
            self._disarm()
            self.log.warning("waiting for jobs failed (%s); acking without waiting", e)
            self._send_batch(done, False)
            return 0
        self._disarm()
        if isinstance(reply, BaseException) and refused_block(reply):
            self.log.warning("the server has no NEXT ... BLOCK (an older module): blocking pops")
            self._block_next = False
            return len(self._send_batch(done, True))
        return len(self._settled(done, reply, 0))

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

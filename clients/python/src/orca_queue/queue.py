"""The synchronous ``Queue``: one method per ORCA.* command, on a redis-py client."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Optional, TypeVar, Union

import redis
from redis.exceptions import ResponseError

from . import protocol as P
from .connection import check_block_timeout, connection_kwargs
from .durability import WAITAOF_MISSING, Durability, check_durable_client, is_write
from .durability import finish as finish_durable
from .errors import OrcaError, map_error
from .keys import Config
from .protocol import execute
from .types import AutoDelayArg, Job, NackOutcome, QueueSettings, QueueStats, TickReport

T = TypeVar("T")
Filter = Union[Mapping[str, str], tuple[str, str], None]


class Queue:
    """An Orca queue (one Redis key of type ``orcaqueue``) reached through ``client``.

    ``client`` is any ``redis.Redis`` (RESP2 or RESP3, ``decode_responses`` on or off; a
    ``Sentinel(...).master_for(...)`` client follows failovers) or a ``redis.RedisCluster``
    (each command goes to the node that serves the queue's slot).
    Orca keys are the 44-character strings of :func:`orca_queue.orca_key`; a popped
    :class:`Job` can be passed wherever a key and a lease are needed.
    """

    def __init__(
        self,
        client: Union[redis.Redis, redis.RedisCluster],
        name: str,
        *,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
        wait_aof: bool = False,
    ) -> None:
        self.client: Any = client  # redis.Redis, or redis.RedisCluster
        self.name = name
        self.durability = Durability(wait_replicas, wait_timeout_ms, wait_aof)
        self._waitaof_checked = False
        check_durable_client(client, self.durability)

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    def with_wait(
        self,
        wait_replicas: Optional[int] = None,
        *,
        wait_timeout_ms: Optional[int] = None,
        wait_aof: Optional[bool] = None,
    ) -> Queue:
        """The same queue on the same client with other durable-write settings (those not
        given are kept): ``q.with_wait(0).enqueue(...)`` for one write that does not wait."""
        d = self.durability
        return Queue(
            self.client,
            self.name,
            wait_replicas=d.replicas if wait_replicas is None else wait_replicas,
            wait_timeout_ms=d.timeout_ms if wait_timeout_ms is None else wait_timeout_ms,
            wait_aof=d.aof if wait_aof is None else wait_aof,
        )

    def _run(self, cmd: P.Command[T]) -> T:
        if self.durability.on and is_write(cmd.args):
            return self._run_durable(cmd)
        try:
            reply = execute(self.client, cmd.args, cmd.options)
        except ResponseError as e:
            raise map_error(e) from None
        return cmd.parse(reply)

    def _run_durable(self, cmd: P.Command[T]) -> T:
        """The write and its WAIT (WAITAOF) in one round trip on one connection."""
        self._check_waitaof()
        pipe = self.client.pipeline(transaction=False)
        execute(pipe, cmd.args, cmd.options)
        execute(pipe, self.durability.command())
        value: T = finish_durable(self.durability, cmd.parse, pipe.execute(raise_on_error=False))
        return value

    def _check_waitaof(self) -> None:
        """With ``wait_aof``, once: refuse before writing on a server without WAITAOF."""
        if not self.durability.aof or self._waitaof_checked:
            return
        try:
            execute(self.client, ("WAITAOF", 0, 0, 0))
        except ResponseError as e:
            if "unknown command" in str(e).lower():
                raise ValueError(WAITAOF_MISSING) from None
            raise
        self._waitaof_checked = True

    # -- putting jobs in ------------------------------------------------------------
    def enqueue(self, config: Config, *, now: Optional[int] = None) -> Job:
        """ORCA.ENQUEUE: create-or-update a job in its collation (a PUT). ``config`` is a
        mapping (sent as JSON) or the JSON text itself. The reply has no payload."""
        return self._run(P.enqueue(self.name, config, now))

    def enqueue_many(self, configs: Iterable[Config]) -> builtins.list[Union[Job, OrcaError]]:
        """ORCA.ENQUEUE of many configs in one pipeline (one round trip). Each entry of the
        result is the write reply, or the :class:`OrcaError` that config got (the others
        are enqueued all the same)."""
        return self._pipeline([P.enqueue(self.name, c) for c in configs])

    def immediate(self, config: Config, *, now: Optional[int] = None) -> Job:
        """ORCA.IMMEDIATE: create-or-update as an immediate job (upgrading a waiting one)."""
        return self._run(P.immediate(self.name, config, now))

    def reenqueue(self, config: Config, created_at: int) -> Job:
        """ORCA.REENQUEUE: hand a job back, immediate at its original arrival time."""
        return self._run(P.reenqueue(self.name, config, created_at))

    def move(
        self, key: str, where: str, *, now: Optional[int] = None, buffer_ms: Optional[int] = None
    ) -> Job:
        """ORCA.MOVE ``RELEASE`` (to the very front) or ``DELAY`` (to the very back)."""
        return self._run(P.move(self.name, key, where, now, buffer_ms))

    def release(self, key: str) -> Job:
        """ORCA.MOVE ... RELEASE."""
        return self.move(key, "RELEASE")

    def delay(self, key: str, *, buffer_ms: Optional[int] = None) -> Job:
        """ORCA.MOVE ... DELAY [BUFFER ms]."""
        return self.move(key, "DELAY", buffer_ms=buffer_ms)

    def delete(self, key: str) -> bool:
        """ORCA.DELETE: remove the job in any state (a running lease is cancelled)."""
        return self._run(P.delete(self.name, key))

    # -- inspecting ----------------------------------------------------------------
    def status(self, key: str) -> Optional[Job]:
        """ORCA.STATUS: the job with its ``state`` (and ``position`` when queued), or None."""
        return self._run(P.status(self.name, key))

    def list_page(
        self,
        offset: int = 0,
        limit: int = 100,
        filter: Filter = None,
        *,
        state: Optional[str] = None,
        gate: Optional[str] = None,
    ) -> builtins.list[Job]:
        """One page of ORCA.LIST: queued jobs in pop order with their positions, or with
        ``state`` (``held``, ``leased``, ``delayed``, ``dead``) the jobs in that state;
        ``gate`` keeps the held jobs of one gate."""
        pair = P.filter_pair(filter)
        return self._run(P.list_page(self.name, offset, limit, pair, state=state, gate=gate))

    def list(
        self,
        filter: Filter = None,
        *,
        page_size: int = 100,
        offset: int = 0,
        state: Optional[str] = None,
        gate: Optional[str] = None,
    ) -> Iterator[Job]:
        """Every job of the listing (see :meth:`list_page`), fetched page by page
        (``page_size`` per round trip). Pages are read lazily: jobs that change state
        meanwhile shift later pages."""
        pair = P.filter_pair(filter)
        while True:
            page = self._run(
                P.list_page(self.name, offset, page_size, pair, state=state, gate=gate)
            )
            yield from page
            if len(page) < page_size:
                return
            offset += len(page)

    def stats(self) -> QueueStats:
        """ORCA.STATS: counts by state and wait-time statistics."""
        return self._run(P.stats(self.name))

    def len(self) -> int:
        """ORCA.LEN: number of queued jobs (O(1))."""
        return self._run(P.length(self.name))

    def check(self) -> None:
        """ORCA.CHECK: raises :class:`InvariantError` if an invariant is broken."""
        self._run(P.check(self.name))

    def settings(
        self,
        order: Optional[str] = None,
        *,
        lifetime_ms: Optional[int] = None,
        autodelay: Optional[AutoDelayArg] = None,
        max_running: Optional[int] = None,
        dead_max: Optional[int] = None,
        dead_ttl_ms: Optional[int] = None,
        result_max: Optional[int] = None,
    ) -> QueueSettings:
        """ORCA.SETTINGS: without arguments, read them; else change those given (the others
        stay) and return them all. ``order`` ``"lifo"``/``"fifo"``; ``lifetime_ms`` (0 =
        never); ``autodelay`` an :class:`AutoDelay` or ``(window_ms, step_ms[, cap_ms])``
        (``(0, 0)`` turns it off); ``max_running`` the running cap per collation (0 =
        none); ``dead_max``, ``dead_ttl_ms``, ``result_max`` bound dead letters and results."""
        return self._run(
            P.settings(
                self.name,
                order,
                lifetime_ms=lifetime_ms,
                autodelay=autodelay,
                max_running=max_running,
                dead_max=dead_max,
                dead_ttl_ms=dead_ttl_ms,
                result_max=result_max,
            )
        )

    # -- gates ---------------------------------------------------------------------------
    def close_gate(self, gate: str) -> bool:
        """ORCA.GATE ... CLOSE: new jobs naming ``gate`` (config field ``"gate"``) are held
        from now on. True if the gate was open, False if it was already closed."""
        return self._run(P.gate_close(self.name, gate))

    def open_gate(self, gate: str) -> int:
        """ORCA.GATE ... OPEN: every held job of the gate enters the queue as if enqueued at
        its own arrival time; returns how many."""
        return self._run(P.gate_open(self.name, gate))

    def drop_gate(self, gate: str) -> builtins.list[Any]:
        """ORCA.GATE ... DROP: removes every held job of the gate and returns their configs
        (parsed, in arrival order), so the caller can tell each ``response_url``."""
        return self._run(P.gate_drop(self.name, gate))

    def tick(self) -> TickReport:
        """ORCA.TICK: apply the time-driven changes due now (the server does it itself)."""
        return self._run(P.tick(self.name))

    # -- dead letters and results ------------------------------------------------------
    def dead(self, offset: int = 0, limit: int = 100) -> builtins.list[Job]:
        """ORCA.DEAD LIST: one page of dead letters in the order they died."""
        return self._run(P.dead_list(self.name, offset, limit))

    def iter_dead(self, *, page_size: int = 100) -> Iterator[Job]:
        """Every dead letter, page by page."""
        offset = 0
        while True:
            page = self.dead(offset, page_size)
            yield from page
            if len(page) < page_size:
                return
            offset += len(page)

    def requeue_dead(self, key: str) -> Job:
        """ORCA.DEAD REQUEUE: put a dead job back, immediate, with fresh attempts."""
        return self._run(P.dead_requeue(self.name, key))

    def purge_dead(self) -> int:
        """ORCA.DEAD PURGE: forget every dead letter; returns how many."""
        return self._run(P.dead_purge(self.name))

    def result(self, key: str) -> Optional[bytes]:
        """ORCA.RESULT: the result kept by the job's last ACK, or None."""
        return self._run(P.result(self.name, key))

    # -- worker commands ---------------------------------------------------------------
    def pop(
        self,
        *,
        lease_ms: Optional[int] = None,
        block_ms: Optional[int] = None,
        worker: Optional[str] = None,
    ) -> Optional[Job]:
        """ORCA.POP: lease the next job (``lease_ms=0``: remove it, at-most-once). With
        ``block_ms`` the client's socket timeout must be above it (see
        :func:`orca_queue.blocking_client`); :class:`Worker` does all of this for you.
        ``worker``: who takes it (``WORKER``), shown by STATUS and the dashboard."""
        if block_ms is not None:
            check_block_timeout(connection_kwargs(self.client), block_ms)
        return self._run(P.pop(self.name, lease_ms, block_ms, worker))

    def pop_many(
        self,
        count: int,
        *,
        lease_ms: Optional[int] = None,
        block_ms: Optional[int] = None,
        worker: Optional[str] = None,
    ) -> builtins.list[Job]:
        """ORCA.POP ... COUNT n: up to ``count`` jobs (empty list if none)."""
        if block_ms is not None:
            check_block_timeout(connection_kwargs(self.client), block_ms)
        return self._run(P.pop_many(self.name, count, lease_ms, block_ms, worker))

    def ack(
        self,
        job: Job | str,
        lease: Optional[str] = None,
        *,
        result: Any = None,
        ttl_ms: Optional[int] = None,
        forward: Optional[tuple[Union[str, Queue], Config]] = None,
    ) -> Optional[Job]:
        """ORCA.ACK: the delivery succeeded. ``result`` (bytes as they are, ``None`` keeps
        none, anything else as JSON) is kept for ``ttl_ms``. Raises :class:`LeaseLostError`
        if the lease is not held (:class:`JobCancelledError` if the job was deleted).

        ``forward=(queue, config)``: the hand-off (``ORCA.ACK ... FORWARD``): the ACK and the
        enqueue of ``config`` into ``queue`` (a name or a :class:`Queue`) happen in one atomic
        step, or neither; returns the successor's write reply (else None). In a Cluster both
        queues must share a hash tag."""
        key, token = P.job_and_lease(job, lease)
        res = P.encode_result(result)
        if forward is not None:
            to = (P.queue_name(forward[0]), forward[1])
            return self._run(P.ack_forward(self.name, key, token, to, result=res, ttl_ms=ttl_ms))
        self._run(P.ack(self.name, key, token, res, ttl_ms))
        return None

    def ack_next(
        self,
        job: Job | str,
        lease: Optional[str] = None,
        *,
        result: Any = None,
        ttl_ms: Optional[int] = None,
        lease_ms: Optional[int] = None,
        worker: Optional[str] = None,
    ) -> Optional[Job]:
        """ORCA.ACK ... NEXT: acks like :meth:`ack` and, in the same atomic step, leases the
        next job of this queue for ``lease_ms`` (default ``orca.lease-time``) to ``worker``:
        one round trip per job. Returns that job, or None if nothing can be handed out (it
        never blocks). If the ACK is refused (:class:`LeaseLostError`) nothing is handed out."""
        key, token = P.job_and_lease(job, lease)
        return self._run(
            P.ack_next(
                self.name,
                key,
                token,
                P.encode_result(result),
                ttl_ms,
                lease_ms=lease_ms,
                worker=worker,
            )
        )

    def ack_many(
        self,
        deliveries: Sequence[Job | tuple[str, str]],
        results: Optional[Sequence[Any]] = None,
        *,
        ttl_ms: Optional[int] = None,
        next: bool = False,
        lease_ms: Optional[int] = None,
        count: Optional[int] = None,
    ) -> P.MackReply:
        """ORCA.MACK: acks several deliveries (popped Jobs, or ``(key, lease)`` pairs) in one
        command; ``results`` gives one value per delivery (encoded as for :meth:`ack`;
        ``None`` keeps none). Returns one outcome per delivery, in order: ``None`` if acked,
        else the error :meth:`ack` would have raised (:class:`LeaseLostError`,
        :class:`JobCancelledError`), never raised here: a refused delivery does not stop the
        others. With ``next=True`` it also leases up to ``count`` jobs (default one per
        delivery) for ``lease_ms``, in the same atomic step, whatever the outcomes
        (``.jobs``). Deliveries with and without a result go as two commands: those with a
        result first (refused as a whole, e.g. a result over ``orca.max-payload-bytes``, it
        raises and nothing changed), then the others with ``next`` (an error reply to that one
        is the outcome of each of its deliveries: none acked)."""
        cmds, merge = P.mack_plan(
            self.name,
            P.mack_items(deliveries, results),
            ttl_ms,
            next=next,
            lease_ms=lease_ms,
            count=count,
        )
        replies: builtins.list[P.MackReply | OrcaError] = []
        for i, c in enumerate(cmds):
            try:
                reply = self._run(c)
            except OrcaError as e:
                if i == 0:  # nothing changed yet
                    raise
                replies.append(e)
            else:
                replies.append(reply)
        return merge(replies)

    def nack(
        self,
        job: Job | str,
        lease: Optional[str] = None,
        *,
        delay_ms: Optional[int] = None,
        error: Optional[str] = None,
        forward: Optional[tuple[Union[str, Queue], Config]] = None,
    ) -> NackOutcome:
        """ORCA.NACK: the delivery failed; the reply tells retry, dead or superseded. With
        ``forward=(queue, config)``, a failure that makes the job a dead letter also enqueues
        ``config`` into ``queue`` in the same step (``NackOutcome.successor``). ``error``: why
        (``ERROR``), kept with the attempt and the dead letter."""
        key, token = P.job_and_lease(job, lease)
        if forward is not None:
            to = (P.queue_name(forward[0]), forward[1])
            return self._run(P.nack_forward(self.name, key, token, to, delay_ms, error=error))
        return self._run(P.nack(self.name, key, token, delay_ms, error))

    def nack_next(
        self,
        job: Job | str,
        lease: Optional[str] = None,
        *,
        delay_ms: Optional[int] = None,
        lease_ms: Optional[int] = None,
        error: Optional[str] = None,
        worker: Optional[str] = None,
    ) -> Optional[Job]:
        """ORCA.NACK ... NEXT: fails the delivery like :meth:`nack` and leases the next job
        (or returns None). The server's reply is then the next job only: what became of the
        failed one (retry, dead, superseded) is not returned; use :meth:`nack` to know."""
        key, token = P.job_and_lease(job, lease)
        return self._run(
            P.nack_next(
                self.name, key, token, delay_ms, lease_ms=lease_ms, error=error, worker=worker
            )
        )

    def extend(self, job: Job | str, lease: Optional[str] = None, *, ms: int) -> int:
        """ORCA.EXTEND: the lease now ends ``ms`` from now; returns the new deadline."""
        key, token = P.job_and_lease(job, lease)
        return self._run(P.extend(self.name, key, token, ms))

    # -- helpers ------------------------------------------------------------------------
    def _pipeline(self, cmds: builtins.list[P.Command[T]]) -> builtins.list[Union[T, OrcaError]]:
        """Every command in one round trip; a durable queue adds one WAIT after them all (it
        covers every write before it on the connection)."""
        durable = self.durability.on and any(is_write(c.args) for c in cmds)
        if durable:
            self._check_waitaof()
        pipe = self.client.pipeline(transaction=False)
        for c in cmds:
            execute(pipe, c.args, c.options)
        if durable:
            execute(pipe, self.durability.command())
        replies = pipe.execute(raise_on_error=False)
        if not durable:
            return P.parse_pipeline(cmds, replies)
        return finish_durable(  # type: ignore[no-any-return]
            self.durability,
            lambda rs: P.parse_pipeline(cmds, rs),
            [replies[:-1], replies[-1]],
        )


def _one_client(queues: Sequence[Any]) -> Any:
    if not queues:
        raise ValueError("ORCA.MPOP needs at least one queue")
    client = queues[0].client
    if any(q.client is not client for q in queues):
        raise ValueError("every queue of one ORCA.MPOP must use the same Redis client")
    return client


def mpop(
    queues: Sequence[Queue],
    *,
    lease_ms: Optional[int] = None,
    block_ms: Optional[int] = None,
    worker: Optional[str] = None,
) -> Optional[Job]:
    """ORCA.MPOP: lease one job from the first of ``queues`` (in order) that can hand one
    out; ``Job.queue`` names it. With ``block_ms``, wait on all of them (woken by any); the
    client's socket timeout must then be above it (see :func:`orca_queue.blocking_client`).
    In a Redis Cluster every queue must be in one slot (hash tags: ``{course}:q1``)."""
    client = _one_client(queues)
    if block_ms is not None:
        check_block_timeout(connection_kwargs(client), block_ms)
    return queues[0]._run(P.mpop([q.name for q in queues], lease_ms, block_ms, worker))


def mpop_many(
    queues: Sequence[Queue],
    count: int,
    *,
    lease_ms: Optional[int] = None,
    block_ms: Optional[int] = None,
    worker: Optional[str] = None,
) -> builtins.list[Job]:
    """ORCA.MPOP ... COUNT n: up to ``count`` jobs, all from the first queue that has any."""
    client = _one_client(queues)
    if block_ms is not None:
        check_block_timeout(connection_kwargs(client), block_ms)
    return queues[0]._run(P.mpop_many([q.name for q in queues], count, lease_ms, block_ms, worker))

"""The asyncio ``Queue``: the same methods as :class:`orca_queue.Queue`, awaitable, on a
``redis.asyncio.Redis`` client."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, TypeVar

import redis.asyncio
from redis.exceptions import ResponseError

from .. import protocol as P
from ..connection import check_block_timeout, connection_kwargs
from ..durability import WAITAOF_MISSING, Durability, check_durable_client, is_write
from ..durability import finish as finish_durable
from ..errors import OrcaError, map_error
from ..keys import Config
from ..protocol import execute
from ..queue import Filter, _one_client
from ..types import AutoDelayArg, Job, NackOutcome, QueueSettings, QueueStats, TickReport

T = TypeVar("T")


class Queue:
    """An Orca queue reached through a ``redis.asyncio.Redis`` client (RESP2 or RESP3)."""

    def __init__(
        self,
        client: redis.asyncio.Redis | redis.asyncio.RedisCluster,
        name: str,
        *,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
        wait_aof: bool = False,
    ) -> None:
        self.client: Any = client  # redis.asyncio.Redis, or redis.asyncio.RedisCluster
        self.name = name
        self.durability = Durability(wait_replicas, wait_timeout_ms, wait_aof)
        self._waitaof_checked = False
        check_durable_client(client, self.durability)

    def __repr__(self) -> str:
        return f"aio.Queue({self.name!r})"

    def with_wait(
        self,
        wait_replicas: int | None = None,
        *,
        wait_timeout_ms: int | None = None,
        wait_aof: bool | None = None,
    ) -> Queue:
        """See :meth:`orca_queue.Queue.with_wait`."""
        d = self.durability
        return Queue(
            self.client,
            self.name,
            wait_replicas=d.replicas if wait_replicas is None else wait_replicas,
            wait_timeout_ms=d.timeout_ms if wait_timeout_ms is None else wait_timeout_ms,
            wait_aof=d.aof if wait_aof is None else wait_aof,
        )

    async def _run(self, cmd: P.Command[T]) -> T:
        if self.durability.on and is_write(cmd.args):
            replies = await self._durable_pipeline([cmd])
            value: T = finish_durable(self.durability, cmd.parse, [replies[0], replies[1]])
            return value
        try:
            reply = await execute(self.client, cmd.args, cmd.options)
        except ResponseError as e:
            raise map_error(e) from None
        return cmd.parse(reply)

    async def _durable_pipeline(self, cmds: builtins.list[P.Command[Any]]) -> builtins.list[Any]:
        """The writes and one WAIT (WAITAOF) after them, in one round trip on one connection."""
        if self.durability.aof and not self._waitaof_checked:
            try:
                await execute(self.client, ("WAITAOF", 0, 0, 0))
            except ResponseError as e:
                if "unknown command" in str(e).lower():
                    raise ValueError(WAITAOF_MISSING) from None
                raise
            self._waitaof_checked = True
        async with self.client.pipeline(transaction=False) as pipe:
            for c in cmds:
                execute(pipe, c.args, c.options)
            execute(pipe, self.durability.command())
            return list(await pipe.execute(raise_on_error=False))

    async def enqueue(self, config: Config, *, now: int | None = None) -> Job:
        """ORCA.ENQUEUE (see :meth:`orca_queue.Queue.enqueue`)."""
        return await self._run(P.enqueue(self.name, config, now))

    async def enqueue_many(self, configs: Iterable[Config]) -> builtins.list[Job | OrcaError]:
        """ORCA.ENQUEUE of many configs in one pipeline; each entry the reply or its error."""
        cmds = [P.enqueue(self.name, c) for c in configs]
        if self.durability.on and cmds:
            replies = await self._durable_pipeline(cmds)
            result: builtins.list[Job | OrcaError] = finish_durable(
                self.durability,
                lambda rs: P.parse_pipeline(cmds, rs),
                [replies[:-1], replies[-1]],
            )
            return result
        async with self.client.pipeline(transaction=False) as pipe:
            for c in cmds:
                execute(pipe, c.args, c.options)
            replies = await pipe.execute(raise_on_error=False)
        return P.parse_pipeline(cmds, replies)

    async def immediate(self, config: Config, *, now: int | None = None) -> Job:
        return await self._run(P.immediate(self.name, config, now))

    async def reenqueue(self, config: Config, created_at: int) -> Job:
        return await self._run(P.reenqueue(self.name, config, created_at))

    async def move(
        self, key: str, where: str, *, now: int | None = None, buffer_ms: int | None = None
    ) -> Job:
        return await self._run(P.move(self.name, key, where, now, buffer_ms))

    async def release(self, key: str) -> Job:
        return await self.move(key, "RELEASE")

    async def delay(self, key: str, *, buffer_ms: int | None = None) -> Job:
        return await self.move(key, "DELAY", buffer_ms=buffer_ms)

    async def delete(self, key: str) -> bool:
        return await self._run(P.delete(self.name, key))

    async def status(self, key: str) -> Job | None:
        return await self._run(P.status(self.name, key))

    async def list_page(
        self,
        offset: int = 0,
        limit: int = 100,
        filter: Filter = None,
        *,
        state: str | None = None,
        gate: str | None = None,
    ) -> builtins.list[Job]:
        pair = P.filter_pair(filter)
        return await self._run(P.list_page(self.name, offset, limit, pair, state=state, gate=gate))

    async def list(
        self,
        filter: Filter = None,
        *,
        page_size: int = 100,
        offset: int = 0,
        state: str | None = None,
        gate: str | None = None,
    ) -> AsyncIterator[Job]:
        """Every job of the listing, page by page (``async for``)."""
        pair = P.filter_pair(filter)
        while True:
            page = await self._run(
                P.list_page(self.name, offset, page_size, pair, state=state, gate=gate)
            )
            for job in page:
                yield job
            if len(page) < page_size:
                return
            offset += len(page)

    async def stats(self) -> QueueStats:
        return await self._run(P.stats(self.name))

    async def len(self) -> int:
        return await self._run(P.length(self.name))

    async def check(self) -> None:
        await self._run(P.check(self.name))

    async def settings(
        self,
        order: str | None = None,
        *,
        lifetime_ms: int | None = None,
        autodelay: AutoDelayArg | None = None,
        max_running: int | None = None,
        dead_max: int | None = None,
        dead_ttl_ms: int | None = None,
        result_max: int | None = None,
    ) -> QueueSettings:
        """ORCA.SETTINGS (see :meth:`orca_queue.Queue.settings`)."""
        return await self._run(
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

    async def close_gate(self, gate: str) -> bool:
        return await self._run(P.gate_close(self.name, gate))

    async def open_gate(self, gate: str) -> int:
        return await self._run(P.gate_open(self.name, gate))

    async def drop_gate(self, gate: str) -> builtins.list[Any]:
        return await self._run(P.gate_drop(self.name, gate))

    async def tick(self) -> TickReport:
        return await self._run(P.tick(self.name))

    async def dead(self, offset: int = 0, limit: int = 100) -> builtins.list[Job]:
        return await self._run(P.dead_list(self.name, offset, limit))

    async def iter_dead(self, *, page_size: int = 100) -> AsyncIterator[Job]:
        offset = 0
        while True:
            page = await self.dead(offset, page_size)
            for job in page:
                yield job
            if len(page) < page_size:
                return
            offset += len(page)

    async def requeue_dead(self, key: str) -> Job:
        return await self._run(P.dead_requeue(self.name, key))

    async def purge_dead(self) -> int:
        return await self._run(P.dead_purge(self.name))

    async def result(self, key: str) -> bytes | None:
        return await self._run(P.result(self.name, key))

    async def pop(
        self,
        *,
        lease_ms: int | None = None,
        block_ms: int | None = None,
        worker: str | None = None,
    ) -> Job | None:
        """ORCA.POP; with ``block_ms`` the client's socket timeout must be above it."""
        if block_ms is not None:
            check_block_timeout(connection_kwargs(self.client), block_ms)
        return await self._run(P.pop(self.name, lease_ms, block_ms, worker))

    async def pop_many(
        self,
        count: int,
        *,
        lease_ms: int | None = None,
        block_ms: int | None = None,
        worker: str | None = None,
    ) -> builtins.list[Job]:
        if block_ms is not None:
            check_block_timeout(connection_kwargs(self.client), block_ms)
        return await self._run(P.pop_many(self.name, count, lease_ms, block_ms, worker))

    async def ack(
        self,
        job: Job | str,
        lease: str | None = None,
        *,
        result: Any = None,
        ttl_ms: int | None = None,
        forward: tuple[Any, Config] | None = None,
    ) -> Job | None:
        """ORCA.ACK (see :meth:`orca_queue.Queue.ack`; ``forward``: the hand-off)."""
        key, token = P.job_and_lease(job, lease)
        res = P.encode_result(result)
        if forward is not None:
            to = (P.queue_name(forward[0]), forward[1])
            return await self._run(
                P.ack_forward(self.name, key, token, to, result=res, ttl_ms=ttl_ms)
            )
        await self._run(P.ack(self.name, key, token, res, ttl_ms))
        return None

    async def ack_next(
        self,
        job: Job | str,
        lease: str | None = None,
        *,
        result: Any = None,
        ttl_ms: int | None = None,
        lease_ms: int | None = None,
        worker: str | None = None,
    ) -> Job | None:
        """ORCA.ACK ... NEXT (see :meth:`orca_queue.Queue.ack_next`)."""
        key, token = P.job_and_lease(job, lease)
        return await self._run(
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

    async def ack_many(
        self,
        deliveries: Sequence[Job | tuple[str, str]],
        results: Sequence[Any] | None = None,
        *,
        ttl_ms: int | None = None,
        next: bool = False,
        lease_ms: int | None = None,
        count: int | None = None,
    ) -> P.MackReply:
        """ORCA.MACK (see :meth:`orca_queue.Queue.ack_many`)."""
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
                reply = await self._run(c)
            except OrcaError as e:
                if i == 0:  # nothing changed yet
                    raise
                replies.append(e)
            else:
                replies.append(reply)
        return merge(replies)

    async def nack(
        self,
        job: Job | str,
        lease: str | None = None,
        *,
        delay_ms: int | None = None,
        error: str | None = None,
        forward: tuple[Any, Config] | None = None,
    ) -> NackOutcome:
        """ORCA.NACK [ERROR text] (see :meth:`orca_queue.Queue.nack`; ``forward``: the hand-off on
        death)."""
        key, token = P.job_and_lease(job, lease)
        if forward is not None:
            to = (P.queue_name(forward[0]), forward[1])
            return await self._run(P.nack_forward(self.name, key, token, to, delay_ms, error=error))
        return await self._run(P.nack(self.name, key, token, delay_ms, error))

    async def nack_next(
        self,
        job: Job | str,
        lease: str | None = None,
        *,
        delay_ms: int | None = None,
        lease_ms: int | None = None,
        error: str | None = None,
        worker: str | None = None,
    ) -> Job | None:
        """ORCA.NACK ... NEXT (see :meth:`orca_queue.Queue.nack_next`)."""
        key, token = P.job_and_lease(job, lease)
        return await self._run(
            P.nack_next(
                self.name, key, token, delay_ms, lease_ms=lease_ms, error=error, worker=worker
            )
        )

    async def extend(self, job: Job | str, lease: str | None = None, *, ms: int) -> int:
        key, token = P.job_and_lease(job, lease)
        return await self._run(P.extend(self.name, key, token, ms))


async def mpop(
    queues: Sequence[Queue],
    *,
    lease_ms: int | None = None,
    block_ms: int | None = None,
    worker: str | None = None,
) -> Job | None:
    """ORCA.MPOP (see :func:`orca_queue.mpop`)."""
    client = _one_client(queues)
    if block_ms is not None:
        check_block_timeout(connection_kwargs(client), block_ms)
    return await queues[0]._run(P.mpop([q.name for q in queues], lease_ms, block_ms, worker))


async def mpop_many(
    queues: Sequence[Queue],
    count: int,
    *,
    lease_ms: int | None = None,
    block_ms: int | None = None,
    worker: str | None = None,
) -> builtins.list[Job]:
    """ORCA.MPOP ... COUNT n (see :func:`orca_queue.mpop_many`)."""
    client = _one_client(queues)
    if block_ms is not None:
        check_block_timeout(connection_kwargs(client), block_ms)
    return await queues[0]._run(
        P.mpop_many([q.name for q in queues], count, lease_ms, block_ms, worker)
    )

"""The asyncio Worker's blocking pops on a Redis Cluster (``redis.asyncio.RedisCluster``): the
same rules as :mod:`orca_queue.shards` (one blocking connection per slot group to the node that
serves it, the first pop back wakes the others, redirections reconnect instead of re-sending),
on the event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio
from redis.exceptions import MovedError, RedisError

from .. import protocol as P
from ..connection import blocking_kwargs
from ..shards import REDIRECT_PAUSE_S, REDIRECTS
from ..strategy import FetchStrategy
from ..types import Job


@dataclass
class _Blocker:
    node: str  # host:port
    client: redis.asyncio.Redis  # one connection, read timeout above BLOCK, no retry
    control: redis.asyncio.Redis  # another connection to that node, for CLIENT UNBLOCK
    id: int


def _client(node: Any, kwargs: dict[str, Any]) -> redis.asyncio.Redis:
    pool = redis.asyncio.ConnectionPool(
        connection_class=node.connection_class, max_connections=1, **kwargs
    )
    return redis.asyncio.Redis(connection_pool=pool, single_connection_client=True)


class AsyncShardBlockers:
    """Blocking connections of one asyncio Worker on a cluster, one per slot group."""

    def __init__(
        self,
        cluster: Any,
        groups: list[FetchStrategy],
        run: Callable[[redis.asyncio.Redis, P.Command[list[Job]]], Awaitable[list[Job]]],
        log: logging.Logger,
    ) -> None:
        self.cluster = cluster
        self.groups = groups
        self._run = run
        self.log = log
        self._blockers: dict[int, _Blocker] = {}

    async def _blocker(self, i: int) -> _Blocker:
        group = self.groups[i]
        if not self.cluster.nodes_manager.slots_cache:
            await self.cluster.initialize()
        node = self.cluster.get_node_from_key(group.queues[0])
        have = self._blockers.get(i)
        if have is not None and have.node == node.name:
            return have
        await self._drop(i)
        base = dict(node.connection_kwargs)
        client = _client(node, blocking_kwargs(base, group.block_ms))
        b = _Blocker(node.name, client, _client(node, base), int(await client.client_id()))
        self._blockers[i] = b
        return b

    async def _drop(self, i: int) -> None:
        b = self._blockers.pop(i, None)
        if b is not None:
            await asyncio.gather(b.client.aclose(), b.control.aclose(), return_exceptions=True)

    async def _pop(self, i: int, want: int) -> list[Job]:
        try:
            b = await self._blocker(i)
            return await self._run(b.client, self.groups[i].blocking(want))
        except REDIRECTS as e:
            self.log.info("queues %s moved or moving (%s): reconnecting", self.groups[i].queues, e)
            await self._drop(i)
            if isinstance(e, MovedError):
                await self.cluster.nodes_manager.initialize()
            await asyncio.sleep(REDIRECT_PAUSE_S)
            return []
        except (RedisError, OSError):
            await self._drop(i)
            raise

    async def pop(self, want: int) -> list[Job]:
        """See :meth:`orca_queue.shards.ShardBlockers.pop`."""
        tasks = [asyncio.create_task(self._pop(i, want)) for i in range(len(self.groups))]
        _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        while pending:
            await self.unblock()
            _, pending = await asyncio.wait(pending, timeout=0.02)
        jobs: list[Job] = []
        error: BaseException | None = None
        for t in tasks:
            e = t.exception()
            if e is not None:
                error = error or e
            else:
                jobs.extend(t.result())
        if error is not None and not jobs:
            raise error
        if error is not None:
            self.log.warning("a blocking pop failed (%s); the jobs of the others run", error)
        return jobs

    async def unblock(self) -> None:
        for b in list(self._blockers.values()):
            try:
                await b.control.client_unblock(b.id)
            except RedisError as e:
                self.log.debug("CLIENT UNBLOCK on %s failed: %s", b.node, e)

    async def close(self) -> None:
        for i in list(self._blockers):
            await self._drop(i)

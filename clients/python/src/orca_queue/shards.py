"""A thread Worker's blocking pops on a Redis Cluster (``redis.RedisCluster``).

One ``ORCA.MPOP`` takes keys of one hash slot, so the worker's queues are grouped by slot
(queues sharing a hash tag share a group) and, when every group is empty, each group waits
on a blocking connection of its own to the node that serves its slot: the pops run at once on
a small thread pool, the first that returns wakes the others (``CLIENT UNBLOCK`` on their
nodes), and what all of them brought is collected (jobs beyond the free slots, from pops that
returned at the same moment, are handed back by the worker).

A slot that moved (``MOVED``), is moving (``ASK``, ``TRYAGAIN``) or a cluster that is down
makes that group's blocking connection go: the next one is opened to the slot's new owner,
after the worker's non-blocking pops (through the cluster client, which follows redirections)
have run again. A pop never follows a redirection on a blocking connection by itself: a
blocking pop re-sent elsewhere could lease a job to a reader that is gone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Optional

import redis
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    RedisError,
    TimeoutError,
    TryAgainError,
)

from . import protocol as P
from .connection import blocking_client
from .strategy import FetchStrategy
from .types import Job

REDIRECTS = (MovedError, AskError, TryAgainError, ClusterDownError)

# After a redirection, how long before that group blocks again (the slot is moving).
REDIRECT_PAUSE_S = 0.1


def is_cluster(client: Any) -> bool:
    """A redis-py cluster client (it routes by key over several nodes)."""
    return hasattr(client, "get_node_from_key") and hasattr(client, "nodes_manager")


@dataclass
class _Blocker:
    node: str  # host:port it is connected to
    client: redis.Redis  # one connection, read timeout above BLOCK, no retry
    node_client: redis.Redis  # the cluster's own client of that node (for CLIENT UNBLOCK)
    id: int  # its CLIENT ID


class ShardBlockers:
    """Blocking connections of one Worker on a cluster, one per slot group."""

    def __init__(
        self,
        cluster: Any,
        groups: list[FetchStrategy],
        run: Callable[[redis.Redis, P.Command[list[Job]]], list[Job]],
        log: logging.Logger,
    ) -> None:
        self.cluster = cluster
        self.groups = groups
        self._run = run
        self.log = log
        self._blockers: dict[int, _Blocker] = {}
        self._pool = ThreadPoolExecutor(len(groups), thread_name_prefix="orca-shard-pop")

    def _blocker(self, i: int) -> _Blocker:
        group = self.groups[i]
        node = self.cluster.get_node_from_key(group.queues[0])
        have = self._blockers.get(i)
        if have is not None and have.node == node.name:
            return have
        self._drop(i)
        node_client = self.cluster.get_redis_connection(node)
        client = blocking_client(node_client, group.block_ms)
        b = _Blocker(node.name, client, node_client, int(client.client_id()))
        self._blockers[i] = b
        return b

    def _drop(self, i: int) -> None:
        b = self._blockers.pop(i, None)
        if b is not None:
            b.client.close()

    def _pop(self, i: int, want: int) -> list[Job]:
        try:
            b = self._blocker(i)
            return self._run(b.client, self.groups[i].blocking(want))
        except REDIRECTS as e:
            self.log.info("queues %s moved or moving (%s): reconnecting", self.groups[i].queues, e)
            self._drop(i)
            if isinstance(e, MovedError):
                self.cluster.nodes_manager.initialize()
            time.sleep(REDIRECT_PAUSE_S)
            return []
        except (ConnectionError, TimeoutError):
            self._drop(i)
            raise

    def pop(self, want: int) -> list[Job]:
        """Blocks on every group at once (each for up to ``want`` jobs) until one returns;
        then wakes the others and returns what they all brought (possibly more than
        ``want``). A connection error of any raises once all are back."""
        futures: list[Future[list[Job]]] = [
            self._pool.submit(self._pop, i, want) for i in range(len(self.groups))
        ]
        _, pending = wait(futures, return_when=FIRST_COMPLETED)
        while pending:
            # A pop may not be blocked yet when UNBLOCK arrives: sent again until all are back.
            self.unblock()
            _, pending = wait(pending, timeout=0.02)
        jobs: list[Job] = []
        error: Optional[BaseException] = None
        for f in futures:
            try:
                jobs.extend(f.result())
            except RedisError as e:
                error = error or e
        if error is not None and not jobs:
            raise error
        if error is not None:
            self.log.warning("a blocking pop failed (%s); the jobs of the others run", error)
        return jobs

    def unblock(self) -> None:
        """Wakes every group's blocking pop (at a stop, or once one group has jobs)."""
        for b in list(self._blockers.values()):
            try:
                b.node_client.client_unblock(b.id)
            except RedisError as e:
                self.log.debug("CLIENT UNBLOCK on %s failed: %s", b.node, e)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        for i in list(self._blockers):
            self._drop(i)

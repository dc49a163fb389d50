"""Connections for blocking pops.

A blocking ``ORCA.POP ... BLOCK ms`` must run on a connection whose read timeout is above
``ms`` (else the client gives up while the server still hands the next job to that
connection, and the job waits for its lease to expire), and that never re-sends the
command by itself after a connection error (redis-py's default retry would re-issue the
pop on a new connection while the old one may already have been handed a job).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

# How far a blocking connection's read timeout stays above BLOCK.
TIMEOUT_MARGIN_S = 10.0


def connection_kwargs(client: Any) -> Mapping[str, Any]:
    """The connection settings of a client (a cluster client's: those of its nodes)."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        return dict(pool.connection_kwargs)
    manager = getattr(client, "nodes_manager", None)
    return dict(getattr(manager, "connection_kwargs", {}) or {})


def check_block_timeout(connection_kwargs: Mapping[str, Any], block_ms: int) -> None:
    """Refuse a blocking pop on a connection whose read timeout could fire first."""
    timeout = connection_kwargs.get("socket_timeout")
    if timeout is None:
        return
    if block_ms == 0 or float(timeout) * 1000 <= block_ms:
        raise ValueError(
            f"socket_timeout {timeout}s is not above BLOCK {block_ms} ms: the client would give "
            "up while the server keeps the pop waiting; use orca_queue.blocking_client()"
        )


def blocking_kwargs(pool_kwargs: Mapping[str, Any], block_ms: Optional[int]) -> dict[str, Any]:
    kwargs = dict(pool_kwargs)
    kwargs["socket_timeout"] = None if not block_ms else block_ms / 1000 + TIMEOUT_MARGIN_S
    kwargs["retry"] = Retry(NoBackoff(), 0)
    kwargs["retry_on_timeout"] = False
    kwargs["retry_on_error"] = []
    return kwargs


def blocking_client(client: redis.Redis, block_ms: Optional[int]) -> redis.Redis:
    """A client of its own (one connection) to the same server as ``client``, fit for
    blocking pops of up to ``block_ms`` (``0``/``None``: forever, no read timeout)."""
    pool = client.connection_pool
    kwargs = blocking_kwargs(pool.connection_kwargs, block_ms)
    new_pool = redis.ConnectionPool(
        connection_class=pool.connection_class, max_connections=1, **kwargs
    )
    return redis.Redis(connection_pool=new_pool, single_connection_client=True)


def async_blocking_client(
    client: redis.asyncio.Redis, block_ms: Optional[int]
) -> redis.asyncio.Redis:
    """The asyncio form of :func:`blocking_client`."""
    pool = client.connection_pool
    kwargs = blocking_kwargs(pool.connection_kwargs, block_ms)
    new_pool = redis.asyncio.ConnectionPool(
        connection_class=pool.connection_class, max_connections=1, **kwargs
    )
    return redis.asyncio.Redis(connection_pool=new_pool, single_connection_client=True)

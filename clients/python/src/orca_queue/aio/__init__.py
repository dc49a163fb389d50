"""The asyncio API: ``Queue`` and ``Worker`` on ``redis.asyncio`` (same names and methods
as the sync API, awaitable). The callback notifier: :mod:`orca_queue.aio.notifier` (needs
httpx: ``pip install 'orca-queue[notifier]'``)."""

from ..connection import async_blocking_client as blocking_client
from .queue import Queue, mpop, mpop_many
from .worker import Worker

__all__ = ["Queue", "Worker", "blocking_client", "mpop", "mpop_many"]

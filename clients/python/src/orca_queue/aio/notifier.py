"""The callback notifier on asyncio (:class:`orca_queue.notifier.Notifier`'s behaviour, with
``httpx.AsyncClient``): ``await Notifier(queue).run()``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

import httpx

from ..notifier import callback_request, check_reply, failure
from ..types import Job
from .queue import Queue
from .worker import Worker


class Notifier(Worker):
    """Delivers the callbacks of ``queue`` on the event loop; options as the sync
    :class:`orca_queue.notifier.Notifier` (``http``: an ``httpx.AsyncClient``)."""

    def __init__(
        self,
        queue: Queue,
        *,
        timeout_ms: int = 10_000,
        headers: Optional[Mapping[str, str]] = None,
        http: Optional[httpx.AsyncClient] = None,
        concurrency: int = 8,
        **worker_options: Any,
    ) -> None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise ValueError("timeout_ms must be an integer > 0")
        lease_ms = worker_options.get("lease_ms", 300_000)
        if isinstance(lease_ms, int) and lease_ms <= timeout_ms:
            raise ValueError("lease_ms must be longer than timeout_ms")
        self.timeout_ms = timeout_ms
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(timeout=timeout_ms / 1000, follow_redirects=False)
        self.headers = dict(headers or {})
        super().__init__(queue, self.deliver, concurrency=concurrency, **worker_options)

    async def deliver(self, job: Job) -> dict[str, int]:
        """POST one callback; its ACK result, or ``CallbackFailed``."""
        url, body = callback_request(job)
        try:
            r = await self.http.post(
                url,
                content=json.dumps(body).encode(),
                headers={"content-type": "application/json", **self.headers},
            )
        except httpx.HTTPError as e:
            raise failure(e, self.timeout_ms) from None
        return check_reply(r.status_code, r.headers)

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            if self._own_http:
                await self.http.aclose()

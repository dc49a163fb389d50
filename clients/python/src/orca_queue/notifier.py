"""The callback notifier: a worker that tells submitters their results.

A pipeline's last stage forwards each verdict to a callback queue (``ORCA.ACK ... FORWARD``);
``Notifier(queue).run()`` consumes it: for each job it POSTs the config's ``body`` (or, without
one, the whole config) as JSON to the config's ``response_url``, with a timeout. A 2xx reply
acks the job (its result is ``{"status": <code>}``). Anything else NACKs it, so it is retried
with the queue's backoff (``orca.retry-base``, doubling), or at the time a 429 or 503 reply's
``Retry-After`` asks for; after the queue's attempts (``orca.max-attempts``) it is a dead letter,
whose failure text says the last HTTP status (``HTTP 503``, ``timeout after 10000 ms``,
``connection error: ...``). No callback is ever dropped: a callback is acked only after a 2xx.
It is a :class:`~orca_queue.Worker` (threads, heartbeats, graceful shutdown on SIGTERM, hooks),
so a stop lets the POSTs in flight finish (their timeout bounds it) and hands the rest back.

Uses `httpx <https://www.python-httpx.org>`_ (``pip install 'orca-queue[notifier]'``).
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any, Optional

import httpx

from .errors import JobFailed
from .queue import Queue
from .types import Job
from .worker import Worker

# A Retry-After beyond this is capped (a receiver asking for a week keeps a job a day).
MAX_RETRY_AFTER_MS = 86_400_000


class CallbackFailed(JobFailed):
    """A callback was not accepted: ``status`` is the HTTP status (None for a timeout or a
    connection error); ``delay_ms`` the retry the receiver asked for (``Retry-After``)."""

    def __init__(
        self, message: str, *, status: Optional[int] = None, delay_ms: Optional[int] = None
    ) -> None:
        super().__init__(message, delay_ms=delay_ms)
        self.status = status


def retry_after_ms(value: Optional[str], now: Optional[float] = None) -> Optional[int]:
    """A ``Retry-After`` header's delay in ms: delta-seconds or an HTTP date (RFC 9110
    10.2.3); None if absent or unreadable. Never negative, at most a day."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(int(value) * 1000, MAX_RETRY_AFTER_MS)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    delta = when.timestamp() - (time.time() if now is None else now)
    return min(max(0, int(delta * 1000)), MAX_RETRY_AFTER_MS)


def callback_request(job: Job) -> tuple[str, Any]:
    """(url, JSON body) of a callback job: the config's ``response_url``, and its ``body``
    field if it has one, else the whole config. A config without a string ``response_url``
    cannot be delivered: :class:`CallbackFailed` (retried, then a dead letter: never dropped)."""
    config = job.config
    if not isinstance(config, Mapping):
        raise CallbackFailed("callback config is not a JSON object")
    url = config.get("response_url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise CallbackFailed("callback config has no http(s) response_url")
    return url, config.get("body", config)


def check_reply(status: int, headers: Mapping[str, str]) -> dict[str, int]:
    """The ACK result of a reply, or :class:`CallbackFailed` for anything but a 2xx."""
    if 200 <= status < 300:
        return {"status": status}
    delay = retry_after_ms(headers.get("retry-after")) if status in (429, 503) else None
    raise CallbackFailed(f"HTTP {status}", status=status, delay_ms=delay)


def failure(exc: Exception, timeout_ms: int) -> CallbackFailed:
    """The failure of a request that got no reply (httpx's exceptions)."""
    if isinstance(exc, httpx.TimeoutException):
        return CallbackFailed(f"timeout after {timeout_ms} ms")
    return CallbackFailed(f"connection error: {type(exc).__name__}: {exc}")


class Notifier(Worker):
    """Delivers the callbacks of ``queue`` (see the module doc). ``timeout_ms``: of each POST
    (connect, read and write); ``headers``: added to every request (e.g. a shared secret);
    ``http``: an ``httpx.Client`` of your own (its timeout is then yours). Other options are
    the :class:`~orca_queue.Worker`'s (``concurrency`` defaults to 8 here: callbacks wait on
    the network; the lease must be longer than the timeout)."""

    def __init__(
        self,
        queue: Queue,
        *,
        timeout_ms: int = 10_000,
        headers: Optional[Mapping[str, str]] = None,
        http: Optional[httpx.Client] = None,
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
        self.http = http or httpx.Client(timeout=timeout_ms / 1000, follow_redirects=False)
        self.headers = dict(headers or {})
        super().__init__(queue, self.deliver, concurrency=concurrency, **worker_options)

    def deliver(self, job: Job) -> dict[str, int]:
        """POST one callback; its ACK result, or :class:`CallbackFailed`."""
        url, body = callback_request(job)
        try:
            r = self.http.post(
                url,
                content=json.dumps(body).encode(),
                headers={"content-type": "application/json", **self.headers},
            )
        except httpx.HTTPError as e:
            raise failure(e, self.timeout_ms) from None
        return check_reply(r.status_code, r.headers)

    def run(self) -> None:
        try:
            super().run()
        finally:
            if self._own_http:
                self.http.close()

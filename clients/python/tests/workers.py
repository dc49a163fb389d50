"""Helpers of the worker tests: a worker on a background thread, waiting for a condition,
and counting what a server ran (INFO commandstats)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from orca_queue import Worker


def wait_for(cond: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


class Running:
    """A worker on a background thread (signals are the main thread's: not installed)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 20.0, **kw: Any) -> float:
        t0 = time.monotonic()
        self.worker.stop(**kw)
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "worker did not stop"
        return time.monotonic() - t0


def start(runs: list[Running], *args: Any, **kwargs: Any) -> Running:
    """Starts a Worker(*args, **kwargs) on a thread; the ``started`` fixture stops it."""
    kwargs.setdefault("handle_signals", False)
    run = Running(Worker(*args, **kwargs))
    runs.append(run)
    return run


def calls(client: redis.Redis, command: str) -> int:
    """How many times the server ran ``command`` (lower case) since its last RESETSTAT."""
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("calls", 0))

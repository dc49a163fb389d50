"""Helpers of the worker tests: a worker on a background thread, waiting for a condition,
and counting what a server ran (INFO commandstats, or MONITOR)."""

from __future__ import annotations

import collections
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


class Commands:
    """The commands a server runs from now until :meth:`stop`, by name (MONITOR). INFO
    commandstats would count the same on Redis, but Valkey 8 counts a module command that
    blocked (``ORCA.POP ... BLOCK``, ``MACK ... NEXT BLOCK``) twice: when it blocks and again
    when it is served; MONITOR shows each command once, as the client sent it."""

    END = "orca-tests-monitor-end"

    def __init__(self, port: int) -> None:
        self.port = port
        self.names: collections.Counter[str] = collections.Counter()
        self._monitor = redis.Redis(port=port).monitor()  # type: ignore[no-untyped-call]
        self._monitor.__enter__()  # MONITOR, and its OK
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            command = str(self._monitor.next_command()["command"])
            if command == f"ECHO {self.END}":
                return
            self.names[command.split(" ", 1)[0].lower()] += 1

    def stop(self) -> collections.Counter[str]:
        redis.Redis(port=self.port).echo(self.END)
        self._thread.join(10)
        assert not self._thread.is_alive(), "MONITOR did not see the end"
        self._monitor.__exit__(None, None, None)
        return self.names

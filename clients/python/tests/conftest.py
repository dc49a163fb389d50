"""Real redis-server processes with the built Orca module, on free ports.

The module is ``$ORCA_MODULE`` or ``<repo>/target/release/liborca.so`` (``cargo build
--release``); the server binary ``$REDIS_SERVER`` or ``redis-server`` on PATH. Each server
runs in its own temp dir, is a child of the test process, and is killed by its pid.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from workers import Running

REPO = Path(__file__).resolve().parents[3]
MODULE = Path(os.environ.get("ORCA_MODULE", REPO / "target" / "release" / "liborca.so"))
REDIS_SERVER = os.environ.get("REDIS_SERVER", "redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One redis-server with the module loaded."""

    def __init__(self, *module_args: str) -> None:
        if not MODULE.is_file():
            raise RuntimeError(
                f"orca module not found at {MODULE}: run `cargo build --release` or set ORCA_MODULE"
            )
        if shutil.which(REDIS_SERVER) is None and not os.path.isfile(REDIS_SERVER):
            raise RuntimeError(
                f"{REDIS_SERVER} not found: install redis-server or set REDIS_SERVER"
            )
        self.dir = tempfile.mkdtemp(prefix="orca-py-")
        self.port = free_port()
        self.log = os.path.join(self.dir, "server.log")
        self.proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                self.dir,
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--logfile",
                self.log,
                "--loadmodule",
                str(MODULE),
                *module_args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                info = redis.Redis(port=self.port, socket_timeout=1).info("server")
                # Ours only if it names our process: a port another process
                # took before our bind must not pass for our server.
                if info.get("process_id") != self.proc.pid:
                    self.stop()
                    raise RuntimeError(f"port {self.port} is taken by another server")
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not start; log: {self.tail()}") from None
                time.sleep(0.05)

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)  # type: ignore[arg-type]

    def tail(self) -> str:
        try:
            with open(self.log) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(server: Server, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """A client in each protocol (every test using it runs twice)."""
    c = server.client(protocol=request.param)
    yield c
    c.close()


@pytest.fixture
def r2(server: Server) -> Iterator[redis.Redis]:
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def started() -> Iterator[list[Running]]:
    """Workers started by ``workers.start``; stopped (without grace) after the test."""
    runs: list[Running] = []
    yield runs
    for run in runs:
        if run.thread.is_alive():
            run.stop(now=True)


@pytest.fixture
def qname() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def cfg(key: str, **extra: object) -> dict[str, object]:
    """A job config with the usual fields."""
    c: dict[str, object] = {"key": key, "response_url": f"http://cb/{key}"}
    c.update(extra)
    return c

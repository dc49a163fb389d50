"""A real HTTP server on 127.0.0.1 for the notifier tests: it answers each POST as its script
says (a status, a stall, a Retry-After), records what it received, and can go away and come
back on the same port."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

from conftest import free_port


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    stall_s: float = 0.0


@dataclass
class Received:
    path: str
    body: Any
    headers: dict[str, str]
    at: float


class CallbackServer:
    """``script(path, n)`` says how to answer the ``n``-th POST (0-based) to ``path``."""

    def __init__(self, script: Optional[Callable[[str, int], Reply]] = None) -> None:
        self.script = script or (lambda path, n: Reply())
        self.port = free_port()
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.httpd: Optional[ThreadingHTTPServer] = None
        self.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def posts(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.path == path]

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with outer.lock:
                    n = sum(1 for r in outer.received if r.path == self.path)
                    outer.received.append(
                        Received(
                            self.path,
                            json.loads(body) if body else None,
                            {k.lower(): v for k, v in self.headers.items()},
                            time.monotonic(),
                        )
                    )
                reply = outer.script(self.path, n)
                if reply.stall_s:
                    time.sleep(reply.stall_s)
                try:
                    self.send_response(reply.status)
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the client gave up (timeout)

            def log_message(self, *args: object) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """Go away: connections are refused until ``start()``."""
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

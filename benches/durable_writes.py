"""What a durable write costs: sequential ORCA.ENQUEUEs from one client (one round trip each)
on a master with one replica, without WAIT, with wait_replicas=1 (WAIT 1) and, where the server
has WAITAOF (Redis 7.2+, Valkey), with wait_aof=True (WAITAOF 1 1; master and replica with
appendonly yes, appendfsync everysec and always). Not part of `make test`.

    clients/python/.venv/bin/python benches/durable_writes.py          # redis-server on PATH
    REDIS_SERVER=<valkey-server> REDIS_CLI=<valkey-cli> \
        clients/python/.venv/bin/python benches/durable_writes.py
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "clients", "python", "tests"))

from deploy import Node, replica_of

from orca_queue import Queue

N = 1000


def rate(q: Queue, n: int = N) -> str:
    try:
        q.enqueue({"key": "warm-up"})
    except Exception as e:  # WAITAOF missing, or not confirmed
        return f"{type(e).__name__}: {e}"
    t = time.perf_counter()
    for i in range(n):
        q.enqueue({"key": f"k{i}", "response_url": "http://web/cb"})
    dt = time.perf_counter() - t
    return f"{n / dt:7.0f} enqueues/s, {dt / n * 1e6:6.0f} us each ({n} enqueues)"


def main() -> None:
    server = os.environ.get("REDIS_SERVER", "redis-server")
    print(f"server: {server}; sequential enqueues, one client")
    for fsync in ("everysec", "always"):
        aof = ("--appendonly", "yes", "--appendfsync", fsync)
        m = Node("--repl-diskless-sync-delay", "0", *aof)
        r = replica_of(m, *aof)
        try:
            c = m.client()
            for label, kw in (
                ("no WAIT", {}),
                ("wait_replicas=1", {"wait_replicas": 1}),
                ("wait_aof=True (master's AOF only)", {"wait_aof": True}),
                ("wait_aof=True, wait_replicas=1", {"wait_aof": True, "wait_replicas": 1}),
            ):
                name = f"bench-{fsync}-{label}"
                q = Queue(c, name, wait_timeout_ms=5000, **kw)  # type: ignore[arg-type]
                # WAITAOF may wait for the replica's next ACK: up to a second per write.
                n = 20 if "replicas=1" in label and "aof" in label else N
                print(f"appendfsync {fsync:8} {label:34} {rate(q, n)}")
        finally:
            r.close()
            m.close()


if __name__ == "__main__":
    main()

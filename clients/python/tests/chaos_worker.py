"""A worker process for test_chaos.py: ``python chaos_worker.py <port> <queue>``.

Handles each job by sleeping what its config says, returns ``{"pid": ..., "lease": ...}``
as the ACK result, and records every completion it was told of (after the ACK succeeded)
with RPUSH on ``<queue>:done``; every job it starts with RPUSH on ``<queue>:started:<pid>`` (so
the test kills a worker only once it holds leases). Stops gracefully on SIGTERM (grace 50 ms).
"""

from __future__ import annotations

import logging
import os
import sys
import time

import redis

from orca_queue import Job, Queue, Worker


def main() -> None:
    port, name = int(sys.argv[1]), sys.argv[2]
    logging.basicConfig(level=logging.INFO, format=f"[{os.getpid()}] %(levelname)s %(message)s")
    client = redis.Redis(port=port)
    q = Queue(client, name)

    def handler(job: Job) -> dict[str, object]:
        client.rpush(f"{name}:started:{os.getpid()}", job.key)
        time.sleep(job.config["sleep_ms"] / 1000)
        return {"pid": os.getpid(), "lease": job.lease}

    def completed(job: Job, result: object) -> None:
        client.rpush(f"{name}:done", job.key)

    Worker(
        q, handler, concurrency=4, lease_ms=1000, block_ms=1000, grace_ms=50, on_completed=completed
    ).run()


if __name__ == "__main__":
    main()

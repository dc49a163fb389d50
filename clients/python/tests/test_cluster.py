"""Redis Cluster: three masters with the module; ``Queue`` and ``Worker`` on
``redis.RedisCluster``. Queues live on every shard (two of them share a hash tag, so one MPOP
serves both); two workers drain them while one queue's slot is migrated to another node
(clients meet ASK during the move and MOVED after it): every job is completed, none is run by
two deliveries at once, and every queue checks out."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from deploy import ClusterSet, wait_until

from orca_queue import Job, Queue, Worker, aio, mpop


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterSet]:
    c = ClusterSet(3)
    yield c
    c.close()


def cluster_client(c: ClusterSet) -> redis.RedisCluster:
    nodes = [redis.cluster.ClusterNode(h, p) for h, p in c.startup]  # type: ignore[no-untyped-call]
    return redis.RedisCluster(startup_nodes=nodes, socket_timeout=10)


def spread_names(c: ClusterSet, prefix: str) -> list[str]:
    """Queue names with at least one on every node, plus two sharing a hash tag."""
    names: list[str] = []
    owners: set[int] = set()
    i = 0
    while len(owners) < len(c.nodes) or len(names) < 4:
        name = f"{prefix}-{i}"
        owners.add(c.owner(name).port)
        names.append(name)
        i += 1
    return [*names, f"{{{prefix}-tag}}:a", f"{{{prefix}-tag}}:b"]


def test_queue_commands_route_by_queue(cluster: ClusterSet) -> None:
    rc = cluster_client(cluster)
    for name in spread_names(cluster, "route"):
        q = Queue(rc, name)
        job = q.enqueue({"key": "a", "response_url": ""})
        popped = q.pop(lease_ms=10_000)
        assert popped is not None and popped.key == job.key
        q.ack(popped, result={"x": 1})
        assert q.result(job.key) == b'{"x":1}'
        q.check()
    a, b = Queue(rc, "{route-tag}:a"), Queue(rc, "{route-tag}:b")
    b.enqueue({"key": "t"})
    got = mpop([a, b], lease_ms=10_000)
    assert got is not None and got.queue == "{route-tag}:b"
    with pytest.raises(ValueError, match="not supported on a Redis Cluster"):
        Queue(rc, "x", wait_replicas=1)


def test_workers_drain_every_shard_through_a_slot_migration(cluster: ClusterSet) -> None:
    rc = cluster_client(cluster)
    names = spread_names(cluster, "drain")
    per_queue = 40
    for name in names:
        Queue(rc, name).enqueue_many(
            [{"key": f"{name}-{i}", "sleep_ms": 5 + i % 20} for i in range(per_queue)]
        )
    lock = threading.Lock()
    runs: list[tuple[str, float, float]] = []

    def handler(job: Job) -> dict[str, Any]:
        start = time.monotonic()
        time.sleep(job.config["sleep_ms"] / 1000)
        with lock:
            runs.append((job.key, start, time.monotonic()))
        return {"queue": job.queue}

    clients = [cluster_client(cluster) for _ in range(2)]
    workers = [
        Worker(
            [Queue(c, n) for n in names],
            handler,
            concurrency=3,
            lease_ms=10_000,
            block_ms=1000,
            handle_signals=False,
        )
        for c in clients
    ]
    threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
    moved = names[0]
    total = per_queue * len(names)
    try:
        for t in threads:
            t.start()
        wait_until("work under way", lambda: len(runs) > total // 5, 60)
        src = cluster.owner(moved)
        dst = next(n for n in cluster.nodes if n is not src)
        cluster.migrate(moved, dst, pause_s=0.5)  # clients meet ASK, then MOVED
        assert cluster.owner(moved) is dst
        # Jobs enqueued after the move reach the workers too (blocked on the new owner).
        late = Queue(rc, moved)
        wait_until(
            "the first jobs done",
            lambda: sum(w.counts["completed"] for w in workers) >= total,
            120,
        )
        for i in range(10):
            late.enqueue({"key": f"late-{i}", "sleep_ms": 1})
        wait_until(
            "every job done",
            lambda: sum(w.counts["completed"] for w in workers) == total + 10,
            60,
        )
    finally:
        for w in workers:
            w.stop()
        for t in threads:
            t.join(20)
    by_key: dict[str, list[tuple[float, float]]] = {}
    for key, start, end in runs:
        by_key.setdefault(key, []).append((start, end))
    assert len(by_key) == total + 10
    for spans in by_key.values():
        spans.sort()
        assert all(b[0] >= a[1] for a, b in itertools.pairwise(spans))
    for name in names:
        q = Queue(rc, name)
        st = q.stats()
        assert st.queued == st.leased == st.delayed == st.dead == 0, (name, st)
        q.check()


async def test_an_asyncio_worker_drains_every_shard_through_a_slot_migration(
    cluster: ClusterSet,
) -> None:
    nodes = [redis.asyncio.cluster.ClusterNode(h, p) for h, p in cluster.startup]
    client = redis.asyncio.RedisCluster(startup_nodes=nodes, socket_timeout=10)
    rc = cluster_client(cluster)
    names = spread_names(cluster, "adrain")
    per_queue = 20
    for name in names:
        Queue(rc, name).enqueue_many([{"key": f"{name}-{i}"} for i in range(per_queue)])
    runs: list[tuple[str, float, float]] = []

    async def handler(job: Job) -> dict[str, Any]:
        start = time.monotonic()
        await asyncio.sleep(0.005)
        runs.append((job.key, start, time.monotonic()))
        return {"queue": job.queue}

    worker = aio.Worker(
        [aio.Queue(client, n) for n in names],
        handler,
        concurrency=4,
        lease_ms=10_000,
        block_ms=1000,
        handle_signals=False,
    )
    task = asyncio.create_task(worker.run())
    total = per_queue * len(names)
    try:
        while len(runs) < total // 3:
            await asyncio.sleep(0.02)
        moved = names[1]
        src = cluster.owner(moved)
        await asyncio.to_thread(
            cluster.migrate, moved, next(n for n in cluster.nodes if n is not src), 0.5
        )
        deadline = time.monotonic() + 120
        while worker.counts["completed"] < total and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        # Idle now: blocked on every shard; a job on the moved queue wakes it.
        Queue(rc, moved).enqueue({"key": "late"})
        while worker.counts["completed"] < total + 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        await worker.close()
        await task
        await client.aclose()
    assert worker.counts["completed"] == total + 1
    assert len({k for k, _, _ in runs}) == total + 1
    for name in names:
        st = Queue(rc, name).stats()
        assert st.queued == st.leased == st.delayed == 0, (name, st)

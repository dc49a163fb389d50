"""Durable writes (WAIT / WAITAOF pipelined with each write) and a worker's finishes surviving
a connection blip (re-sent while the lease may be held)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio
from conftest import cfg
from deploy import Node, replica_of, wait_until
from workers import Running, start

from orca_queue import Job, NotReplicatedError, Queue, Worker, aio, config_orca_key


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Node, Node]]:
    master = Node("--repl-diskless-sync-delay", "0")
    replica = replica_of(master)
    yield master, replica
    replica.close()
    master.close()


def test_a_durable_enqueue_is_on_the_replica_when_it_returns(
    pair: tuple[Node, Node], qname: str
) -> None:
    master, replica = pair
    q = Queue(master.client(), qname, wait_replicas=1, wait_timeout_ms=5000)
    for i in range(20):
        job = q.enqueue(cfg(f"d{i}"))
        # No wait here: the WAIT pipelined with the write already had the replica confirm it.
        assert Queue(replica.client(), qname).status(job.key) is not None
    jobs = q.enqueue_many([cfg(f"m{i}") for i in range(5)])
    assert all(isinstance(j, Job) for j in jobs)
    assert Queue(replica.client(), qname).len() == 25


def test_a_write_replicas_do_not_confirm_raises_not_replicated(
    pair: tuple[Node, Node], qname: str
) -> None:
    master, replica = pair
    q = Queue(master.client(), qname, wait_replicas=1, wait_timeout_ms=200)
    assert replica.proc is not None
    os.kill(replica.proc.pid, signal.SIGSTOP)  # the replica stops acknowledging
    try:
        t0 = time.monotonic()
        with pytest.raises(NotReplicatedError) as e:
            q.enqueue(cfg("late"))
        assert 0.15 < time.monotonic() - t0 < 5
        # The write stands on the master; the error carries what it returned.
        assert isinstance(e.value.value, Job) and (e.value.replicas, e.value.wanted) == (0, 1)
        assert Queue(master.client(), qname).status(e.value.value.key) is not None
        # One write that does not wait: with_wait(0).
        assert q.with_wait(0).enqueue(cfg("fast")).key
        with pytest.raises(NotReplicatedError):
            q.with_wait(wait_timeout_ms=100).enqueue(cfg("late2"))
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    wait_until("the replica to catch up", lambda: Queue(replica.client(), qname).len() == 3)


async def test_asyncio_durable_writes(pair: tuple[Node, Node], qname: str) -> None:
    master, replica = pair
    client = redis.asyncio.Redis(port=master.port)
    try:
        q = aio.Queue(client, qname, wait_replicas=1, wait_timeout_ms=5000)
        job = await q.enqueue(cfg("a1"))
        assert Queue(replica.client(), qname).status(job.key) is not None
        assert len(await q.enqueue_many([cfg("a2"), cfg("a3")])) == 2
        assert Queue(replica.client(), qname).len() == 3
        assert replica.proc is not None
        os.kill(replica.proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(NotReplicatedError):
                await q.with_wait(wait_timeout_ms=100).enqueue(cfg("a4"))
        finally:
            os.kill(replica.proc.pid, signal.SIGCONT)
    finally:
        await client.aclose()


def test_wait_aof_is_refused_before_writing_on_a_server_without_waitaof(
    pair: tuple[Node, Node], qname: str
) -> None:
    master, _ = pair
    try:
        master.client().execute_command("WAITAOF", 0, 0, 0)  # type: ignore[no-untyped-call]
        has_waitaof = True
    except redis.ResponseError:
        has_waitaof = False
    q = Queue(master.client(), qname, wait_aof=True)
    if has_waitaof:
        # appendonly is off on this master: WAITAOF 1 ... refuses, after the write.
        with pytest.raises(redis.ResponseError):
            q.enqueue(cfg("x"))
        return
    with pytest.raises(ValueError, match="WAITAOF"):
        q.enqueue(cfg("x"))
    assert Queue(master.client(), qname).len() == 0  # nothing written


def test_a_durable_worker_runs_and_confirms(
    pair: tuple[Node, Node], qname: str, started: list[Running]
) -> None:
    master, replica = pair
    q = Queue(master.client(), qname, wait_replicas=1, wait_timeout_ms=5000)
    for i in range(30):
        q.enqueue(cfg(f"w{i}"))
    run = start(started, q, lambda job: {"ok": job.key}, concurrency=4, lease_ms=10_000)
    wait_until("the worker to finish", lambda: run.worker.counts["completed"] == 30)
    # Idle: the blocking pop waits; a new job wakes it and is confirmed before it runs.
    q.enqueue(cfg("late"))
    wait_until("the late job", lambda: run.worker.counts["completed"] == 31)
    assert run.worker.counts["unconfirmed"] == 0
    rq = Queue(replica.client(), qname)
    wait_until("the replica to have every result", lambda: rq.stats().leased == 0)
    assert all(rq.result(config_orca_key(cfg(f"w{i}"))) is not None for i in range(30))


def test_an_ack_that_hits_a_restart_is_resent_and_completes(qname: str) -> None:
    """The server goes away while a handler runs and comes back (its AOF, fsynced always,
    keeps the lease): the ACK failed on the connection is re-sent, and the job is completed
    once, not run again after its lease."""
    node = Node("--appendonly", "yes", "--appendfsync", "always")
    try:
        q = Queue(node.client(), qname)
        key = q.enqueue(cfg("blip")).key
        go = threading.Event()
        started_run = threading.Event()
        runs: list[str] = []

        def handler(job: Job) -> dict[str, str]:
            runs.append(job.lease or "")
            started_run.set()
            go.wait(30)
            return {"done": "yes"}

        worker = Worker(
            Queue(node.client(socket_timeout=2), qname),
            handler,
            lease_ms=30_000,
            block_ms=1000,
            handle_signals=False,
        )
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            assert started_run.wait(15)
            node.kill()
            go.set()  # the ACK now fails: connection refused, retried
            time.sleep(1.0)
            node.start()
            wait_until("the ACK to be re-sent", lambda: worker.counts["completed"] == 1)
        finally:
            worker.stop()
            thread.join(20)
        assert q.result(key) == b'{"done":"yes"}'
        st = q.status(key)
        assert st is not None and st.state == "done"  # finished once, its result kept
        assert len(runs) == 1 and worker.counts["lost"] == 0
    finally:
        node.close()

"""The orca-queue Python sides of the worker bench: the asyncio Worker and the thread Worker
(clients/python), a filler and an open-loop producer (``Queue.enqueue_many``: one pipeline of
ORCA.ENQUEUE per batch)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import redis
import redis.asyncio
from common import Tally, config, cpu_s, finish, mono_us, open_loop, ready
from redis._parsers import _AsyncRESP2Parser, _RESP2Parser

import orca_queue
from orca_queue import aio


def _client(args: Any) -> redis.Redis:
    """A client of the bench's server: ``--parser python`` forces redis-py's own RESP parser
    even where hiredis is installed (redis-py takes hiredis by itself when present)."""
    kw: dict[str, Any] = {"host": "127.0.0.1", "port": args.port}
    if args.parser == "python":
        kw["parser_class"] = _RESP2Parser
    return redis.Redis(connection_pool=redis.ConnectionPool(**kw))


def _aio_client(args: Any) -> redis.asyncio.Redis:
    kw: dict[str, Any] = {"host": "127.0.0.1", "port": args.port}
    if args.parser == "python":
        kw["parser_class"] = _AsyncRESP2Parser
    return redis.asyncio.Redis(connection_pool=redis.asyncio.ConnectionPool(**kw))


def _result(cfg: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "key": len(cfg["key"])}


def fill(args: Any) -> None:
    q = orca_queue.Queue(_client(args), args.queue)
    for i in range(0, args.n, 1000):
        out = q.enqueue_many(config(k, args.tag) for k in range(i, min(i + 1000, args.n)))
        bad = [x for x in out if isinstance(x, Exception)]
        if bad:
            raise bad[0]


def produce(args: Any) -> None:
    q = orca_queue.Queue(_client(args), args.queue)

    def send(idx: list[int]) -> None:
        ts = mono_us()
        q.enqueue_many([config(i, args.tag, ts=ts, warm=i < args.n // 5) for i in idx])

    finish(open_loop(args.rate, args.n, send))


def worker_sync(args: Any) -> None:
    client = _client(args)
    lock = threading.Lock()
    stopped = threading.Event()
    tally = Tally(args.expect, stopped.set)

    def handler(job: orca_queue.Job) -> Any:
        cfg = job.config
        tally.started(cfg)
        return _result(cfg)

    def completed(job: orca_queue.Job, result: Any) -> None:
        with lock:
            tally.finished()

    w = orca_queue.Worker(
        orca_queue.Queue(client, args.queue),
        handler,
        concurrency=args.concurrency,
        lease_ms=600_000,
        handle_signals=False,
        on_completed=completed,
    )
    t = threading.Thread(target=w.run, daemon=True)
    cpu0 = cpu_s()
    tally.t_start = mono_us()
    t.start()
    ready()
    stopped.wait()
    cpu = cpu_s() - cpu0
    w.stop()
    t.join(10)
    finish(tally.report(cpu, counts=w.counts))


def worker_aio(args: Any) -> None:
    asyncio.run(_worker_aio(args))


async def _worker_aio(args: Any) -> None:
    client = _aio_client(args)
    stopped = asyncio.Event()
    tally = Tally(args.expect, stopped.set)

    async def handler(job: orca_queue.Job) -> Any:
        cfg = job.config
        tally.started(cfg)
        return _result(cfg)

    def completed(job: orca_queue.Job, result: Any) -> None:
        tally.finished()

    w = aio.Worker(
        aio.Queue(client, args.queue),
        handler,
        concurrency=args.concurrency,
        lease_ms=600_000,
        handle_signals=False,
        on_completed=completed,
    )
    cpu0 = cpu_s()
    tally.t_start = mono_us()
    run = asyncio.create_task(w.run())
    ready()
    await stopped.wait()
    cpu = cpu_s() - cpu0
    w.stop()
    await asyncio.wait_for(run, 10)
    finish(tally.report(cpu, counts=w.counts))

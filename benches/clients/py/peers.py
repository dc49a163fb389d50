"""The Python peers of the worker bench, each on its own Redis broker, at a documented setting,
in one process like orca-queue's Workers (see README.md for each choice):

- Dramatiq (RedisBroker): ``dramatiq.Worker`` with 16 worker threads (the CLI's default is
  8 threads in each of one process per CPU: 16 on 2 CPUs).
- taskiq (taskiq-redis ``RedisStreamBroker``, the acknowledging one its README recommends):
  the CLI's ``Receiver`` with its default ``max_async_tasks`` 100, async handler.
- Celery (Redis broker): the default prefork pool, concurrency = CPUs (2), no result backend.
- RQ: the default ``Worker`` (forks a work horse per job) in burst mode.

A peer's job counts as done when its handler returns (before the peer acks it), which if
anything favours the peers. Each handler reads the job's config and returns a small result,
as orca-queue's handlers do.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from common import Tally, config, cpu_s, finish, mono_us, open_loop, open_loop_async, ready

DRAMATIQ_THREADS = 16
TASKIQ_MAX_ASYNC = 100
CELERY_CONCURRENCY = 2


def _result(cfg: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "key": len(cfg["key"])}


# -- Dramatiq ---------------------------------------------------------------------------------
def _dramatiq(args: Any) -> tuple[Any, Any, Tally, threading.Event]:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker

    broker = RedisBroker(host="127.0.0.1", port=args.port)
    dramatiq.set_broker(broker)
    stopped = threading.Event()
    tally = Tally(getattr(args, "expect", 0), stopped.set)
    lock = threading.Lock()

    @dramatiq.actor(queue_name=args.queue, max_retries=0)
    def grade(cfg: dict[str, Any]) -> None:
        tally.started(cfg)
        _result(cfg)  # built, but not returned: Dramatiq keeps results only with a middleware
        with lock:
            tally.finished()

    return broker, grade, tally, stopped


def dramatiq_fill(args: Any) -> None:
    _, grade, _, _ = _dramatiq(args)
    for i in range(args.n):
        grade.send(config(i, args.tag))


def dramatiq_produce(args: Any) -> None:
    _, grade, _, _ = _dramatiq(args)

    def send(idx: list[int]) -> None:
        ts = mono_us()
        for i in idx:
            grade.send(config(i, args.tag, ts=ts, warm=i < args.n // 5))

    finish(open_loop(args.rate, args.n, send))


def dramatiq_worker(args: Any) -> None:
    import dramatiq

    broker, _, tally, stopped = _dramatiq(args)
    cpu0 = cpu_s()
    tally.t_start = mono_us()
    w = dramatiq.Worker(broker, worker_threads=DRAMATIQ_THREADS)
    w.start()
    ready()
    stopped.wait()
    finish(tally.report(cpu_s() - cpu0, setting=f"{DRAMATIQ_THREADS} threads"))


# -- taskiq -----------------------------------------------------------------------------------
def _taskiq(args: Any, tally: Tally | None) -> tuple[Any, Any]:
    from taskiq_redis import RedisStreamBroker

    # consumer_id "0": the group reads the stream from its start, so jobs enqueued before the
    # worker started are taken too (the default "$" would skip them).
    broker = RedisStreamBroker(
        f"redis://127.0.0.1:{args.port}", queue_name=args.queue, consumer_id="0"
    )

    @broker.task(task_name="grade")
    async def grade(cfg: dict[str, Any]) -> Any:
        if tally is not None:
            tally.started(cfg)
            tally.finished()
        return _result(cfg)

    return broker, grade


def taskiq_fill(args: Any) -> None:
    async def go() -> None:
        broker, grade = _taskiq(args, None)
        await broker.startup()
        for i in range(0, args.n, 100):
            await asyncio.gather(
                *(grade.kiq(config(k, args.tag)) for k in range(i, min(i + 100, args.n)))
            )
        await broker.shutdown()

    asyncio.run(go())


def taskiq_produce(args: Any) -> None:
    async def go() -> dict[str, Any]:
        broker, grade = _taskiq(args, None)
        await broker.startup()

        async def send(idx: list[int]) -> None:
            ts = mono_us()
            await asyncio.gather(
                *(grade.kiq(config(i, args.tag, ts=ts, warm=i < args.n // 5)) for i in idx)
            )

        return await open_loop_async(args.rate, args.n, send)

    finish(asyncio.run(go()))


def taskiq_worker(args: Any) -> None:
    asyncio.run(_taskiq_worker(args))


async def _taskiq_worker(args: Any) -> None:
    from taskiq.receiver import Receiver

    stopped = asyncio.Event()
    tally = Tally(args.expect, stopped.set)
    broker, _ = _taskiq(args, tally)
    broker.is_worker_process = True
    cpu0 = cpu_s()
    tally.t_start = mono_us()
    with ThreadPoolExecutor() as pool:
        receiver = Receiver(broker, executor=pool, max_async_tasks=TASKIQ_MAX_ASYNC)
        shutdown = asyncio.Event()
        listen = asyncio.create_task(receiver.listen(shutdown))
        ready()
        await stopped.wait()
        finish(tally.report(cpu_s() - cpu0, setting=f"max_async_tasks {TASKIQ_MAX_ASYNC}"))
        await listen


# -- Celery -----------------------------------------------------------------------------------
# Done jobs are counted in shared memory: the prefork pool's children inherit it.
_celery_done = multiprocessing.Value("q", 0)
_celery_lat: Any = None


def _celery(args: Any) -> tuple[Any, Any]:
    from celery import Celery

    app = Celery("bench", broker=f"redis://127.0.0.1:{args.port}/0")
    app.conf.task_default_queue = args.queue
    app.conf.task_ignore_result = True
    app.conf.worker_hijack_root_logger = False
    app.conf.worker_redirect_stdouts = False

    @app.task(name="grade")
    def grade(cfg: dict[str, Any]) -> Any:
        ts = cfg.get("ts")
        if ts is not None and "warm" not in cfg and _celery_lat is not None:
            _celery_lat.put(mono_us() - ts)
        out = _result(cfg)
        with _celery_done.get_lock():
            _celery_done.value += 1
        return out

    return app, grade


def celery_fill(args: Any) -> None:
    _, grade = _celery(args)
    for i in range(args.n):
        grade.delay(config(i, args.tag))


def celery_produce(args: Any) -> None:
    _, grade = _celery(args)

    def send(idx: list[int]) -> None:
        ts = mono_us()
        for i in idx:
            grade.delay(config(i, args.tag, ts=ts, warm=i < args.n // 5))

    finish(open_loop(args.rate, args.n, send))


def celery_worker(args: Any) -> None:
    global _celery_lat
    _celery_lat = multiprocessing.SimpleQueue()
    app, _ = _celery(args)
    tally = Tally(args.expect, lambda: None)
    cpu0 = cpu_s()
    tally.t_start = mono_us()

    def watch() -> None:
        while _celery_done.value < args.expect:
            time.sleep(0.002)
        tally.done = args.expect - 1
        tally.finished()
        while not _celery_lat.empty():
            tally.lat.append(_celery_lat.get())
        # The pool's children are not reaped yet: their CPU is not in RUSAGE_CHILDREN.
        finish(tally.report(cpu_s() - cpu0, setting=f"prefork, concurrency {CELERY_CONCURRENCY}"))

    threading.Thread(target=watch, daemon=True).start()
    ready()
    app.Worker(
        pool="prefork",
        concurrency=CELERY_CONCURRENCY,
        loglevel="WARNING",
        without_heartbeat=True,
        without_gossip=True,
        without_mingle=True,
        quiet=True,
    ).start()


# -- RQ ---------------------------------------------------------------------------------------
def rq_grade(cfg: dict[str, Any]) -> Any:
    return _result(cfg)


def _rq(args: Any) -> Any:
    import redis
    import rq

    return rq.Queue(args.queue, connection=redis.Redis(host="127.0.0.1", port=args.port))


def rq_fill(args: Any) -> None:
    q = _rq(args)
    for i in range(0, args.n, 500):
        q.enqueue_many(
            [
                q.prepare_data(rq_grade, args=(config(k, args.tag),))
                for k in range(i, min(i + 500, args.n))
            ]
        )


def rq_worker(args: Any) -> None:
    import rq

    q = _rq(args)
    tally = Tally(args.expect, lambda: None)
    cpu0 = cpu_s(children=True)
    tally.t_start = mono_us()
    ready()
    w = rq.Worker([q], connection=q.connection)
    w.work(burst=True, logging_level="WARNING")
    tally.done = args.expect - 1
    tally.finished()
    finish(tally.report(cpu_s(children=True) - cpu0, setting="Worker (fork per job), burst"))

#!/usr/bin/env python3
"""A grading pipeline on Orca's hand-offs: compile -> test -> callback.

    python examples/python/pipeline.py --redis redis://localhost:6379/0 --course cs2500

Three queues of one hash tag (``{cs2500}:compile``, ``{cs2500}:test``, ``{cs2500}:callbacks``),
so the pipeline runs as it is in a Redis Cluster too. A submission enters the compile stage;
each stage's worker finishes its job and enqueues the next stage's job in one atomic step
(its handler returns :class:`orca_queue.Forward`, the worker sends ``ORCA.ACK ... FORWARD``):
a worker killed between "done" and "pass on" loses nothing and runs nothing twice. A
submission that does not compile skips the tests: its verdict goes straight to the
callbacks. The last queue is drained by the notifier (``orca_queue.notifier.Notifier``), which
POSTs each verdict to the submission's ``response_url``, retrying on connection errors, 5xx
and 429 (``Retry-After``), and leaving a dead letter after the queue's attempts.

A submission's config: ``{"key": ..., "response_url": ..., "source": "<python source>",
"tests": [{"call": "<expression>", "expect": <value>}, ...]}``. "Compiling" is Python's
``compile()``; a test evaluates its expression in the compiled module's namespace. (Per-test
jobs that run in parallel and are fanned back in come with fan-out: docs/flows.md.)
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import Any

import redis

from orca_queue import Forward, Job, Queue, Worker
from orca_queue.notifier import Notifier


def stages(r: redis.Redis, course: str) -> tuple[Queue, Queue, Queue]:
    """The pipeline's three queues (one hash tag: one Cluster slot)."""
    return (
        Queue(r, f"{{{course}}}:compile"),
        Queue(r, f"{{{course}}}:test"),
        Queue(r, f"{{{course}}}:callbacks"),
    )


def callback(config: dict[str, Any], verdict: str, **body: Any) -> dict[str, Any]:
    """The callback job of a submission: POSTed by the notifier as its ``body``."""
    return {
        "key": config["key"],
        "response_url": config["response_url"],
        "body": {"key": config["key"], "verdict": verdict, **body},
    }


def compile_stage(test_q: Queue, callbacks: Queue):  # type: ignore[no-untyped-def]
    def handle(job: Job) -> Forward:
        config = job.config
        try:
            compile(config["source"], config["key"], "exec")
        except SyntaxError as e:
            verdict = callback(config, "compile-error", error=f"line {e.lineno}: {e.msg}")
            return Forward(callbacks, verdict, result={"compiled": False})
        return Forward(test_q, config, result={"compiled": True})

    return handle


def test_stage(callbacks: Queue):  # type: ignore[no-untyped-def]
    def handle(job: Job) -> Forward:
        config = job.config
        namespace: dict[str, Any] = {}
        exec(compile(config["source"], config["key"], "exec"), namespace)
        passed = 0
        for t in config["tests"]:
            try:
                ok = eval(t["call"], namespace) == t["expect"]
            except Exception:
                ok = False
            passed += ok
        total = len(config["tests"])
        verdict = "accepted" if passed == total else "wrong-answer"
        return Forward(
            callbacks,
            callback(config, verdict, passed=passed, total=total),
            result={"passed": passed},
        )

    return handle


def workers(r: redis.Redis, course: str, **options: Any) -> list[Worker]:
    """The three stages' workers (not started)."""
    compile_q, test_q, callbacks = stages(r, course)
    return [
        Worker(compile_q, compile_stage(test_q, callbacks), **options),
        Worker(test_q, test_stage(callbacks), **options),
        Notifier(callbacks, timeout_ms=5_000, **options),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", default="redis://localhost:6379/0")
    ap.add_argument("--course", default="cs2500")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    r = redis.Redis.from_url(args.redis)
    ws = workers(r, args.course, handle_signals=False)
    threads = [threading.Thread(target=w.run, name=type(w).__name__) for w in ws]
    for t in threads:
        t.start()
    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.set())
    stop.wait()
    for w in ws:
        w.stop()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()

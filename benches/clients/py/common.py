"""What every Python side of the worker bench shares: the job config, clocks, the open-loop
producer's schedule, and how a side reports (one JSON line on stdout)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = (ROOT / "benches/job.json").read_text().strip()


def mono_us() -> int:
    """CLOCK_MONOTONIC in µs: the clock node's process.hrtime reads too, so a timestamp taken
    by a producer process is comparable with a worker's in any other process."""
    return time.monotonic_ns() // 1000


def config(
    i: int, tag: int, students: int = 0, ts: int | None = None, warm: bool = False
) -> dict[str, Any]:
    """Job i's ~1 KB Orca config (benches/job.json, filled as bench.js fills it): collation
    i/4, or i % students with ``students``; ``ts`` (µs, monotonic) when the job was sent;
    ``warm``: a job of the producer's first fifth, whose latency is not recorded (the worker
    and the producer settle)."""
    parts = TEMPLATE.split("__rand_int__")
    out = parts[0]
    for k in range(1, len(parts)):
        if k == 2:
            n = i % students if students else i // 4
        else:
            n = tag * 1_000_000_000 + i
        out += str(n).zfill(12) + parts[k]
    cfg: dict[str, Any] = json.loads(out)
    if ts is not None:
        cfg["ts"] = ts
    if warm:
        cfg["warm"] = 1
    return cfg


def cpu_s(children: bool = False) -> float:
    """This process's CPU (user + system) so far; with ``children`` also its reaped children's."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    total = r.ru_utime + r.ru_stime
    if children:
        c = resource.getrusage(resource.RUSAGE_CHILDREN)
        total += c.ru_utime + c.ru_stime
    return total


def percentiles(xs: Sequence[float]) -> dict[str, float]:
    """p50 / p99 / p99.9 / max of latencies (µs in, ms out); nearest rank."""
    if not xs:
        return {"p50": float("nan"), "p99": float("nan"), "p999": float("nan"), "max": float("nan")}
    v = sorted(xs)

    def rank(p: float) -> float:
        return v[min(len(v) - 1, max(0, int(round(p * len(v) + 0.5)) - 1))] / 1000

    return {"p50": rank(0.50), "p99": rank(0.99), "p999": rank(0.999), "max": v[-1] / 1000}


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def ready() -> None:
    sys.stdout.write("READY\n")
    sys.stdout.flush()


def finish(obj: dict[str, Any]) -> None:
    """Report and leave at once: a peer's own threads or child processes need not be shut
    down one by one (the bench kills the side's process group after this)."""
    emit(obj)
    os._exit(0)


class Tally:
    """Counts finished jobs, keeps each one's latency (enqueue -> handler start, µs) when
    asked, and knows the first and last finish (monotonic µs)."""

    def __init__(self, expect: int, on_done: Callable[[], None]) -> None:
        self.expect = expect
        self.done = 0
        self.lat: list[int] = []
        self.t_start = mono_us()
        self.t_last = 0
        self._on_done = on_done

    def started(self, cfg: dict[str, Any]) -> None:
        ts = cfg.get("ts")
        if ts is not None and "warm" not in cfg:
            self.lat.append(mono_us() - ts)

    def finished(self) -> None:
        self.done += 1
        if self.done == self.expect:
            self.t_last = mono_us()
            self._on_done()

    def report(self, cpu: float, **extra: Any) -> dict[str, Any]:
        wall = (self.t_last - self.t_start) / 1e6
        return {
            "jobs": self.done,
            "wall": wall,
            "rate": self.done / wall if wall > 0 else 0.0,
            "cpu_us_per_job": cpu * 1e6 / max(self.done, 1),
            "t_last": self.t_last,
            "lat": percentiles(self.lat) if self.lat else None,
            **extra,
        }


def open_loop(rate: float, n: int, send: Callable[[list[int]], None]) -> dict[str, Any]:
    """Calls ``send(indices)`` on the schedule of ``rate`` jobs/s regardless of how the
    worker keeps up (open loop): every ~0.5 ms the jobs due by then go out together.
    Returns the rate achieved and how far behind schedule the producer fell."""
    t0 = time.monotonic()
    sent = 0
    worst_lag = 0.0
    while sent < n:
        now = time.monotonic()
        due = min(n, int((now - t0) * rate) + 1)
        if due > sent:
            worst_lag = max(worst_lag, now - (t0 + sent / rate))
            send(list(range(sent, due)))
            sent = due
        else:
            time.sleep(max(0.0, min(0.0005, t0 + due / rate - now)))
    wall = time.monotonic() - t0
    return {"sent": sent, "rate": sent / wall, "lag_ms": worst_lag * 1000}


async def open_loop_async(
    rate: float, n: int, send: Callable[[list[int]], Awaitable[None]]
) -> dict[str, Any]:
    """:func:`open_loop` for an asyncio client: the jobs due go out together (their sends
    awaited as one batch, at most 100 at a time), then the next jobs due."""
    t0 = time.monotonic()
    sent = 0
    worst_lag = 0.0
    while sent < n:
        now = time.monotonic()
        due = min(n, int((now - t0) * rate) + 1, sent + 100)
        if due > sent:
            worst_lag = max(worst_lag, now - (t0 + sent / rate))
            await send(list(range(sent, due)))
            sent = due
        else:
            await asyncio.sleep(max(0.0, min(0.0005, t0 + due / rate - now)))
    wall = time.monotonic() - t0
    return {"sent": sent, "rate": sent / wall, "lag_ms": worst_lag * 1000}

"""`make bench-workers`: the Python Workers against the Python peers and the Node Worker (and
BullMQ), side by side in one run on one redis-server with the module (see README.md).

    python benches/clients/py/run.py [--sections drain,latency,rush,trickle] [--rounds 3]
                                     [--quick] [--out benches/clients]

Each side runs in processes of its own (sides.py for Python, ../side.js for Node), one side at
a time on the otherwise idle server; the order of the sides alternates from round to round,
ratios are the median of the per-round ratios, and the per-round values are kept. Writes
workers.md (the tables, with the machine's load average next to each) and workers.json (every
sample). Environment: REDIS_SERVER, ORCA_MODULE.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import redis
from report import per_job_commands, put_summary, render

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
MODULE = os.environ.get("ORCA_MODULE", str(ROOT / "target/release/liborca.so"))
REDIS_SERVER = os.environ.get("REDIS_SERVER", "redis-server")
PY = sys.executable


def log(msg: str) -> None:
    print(f"[bench-workers {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# -- the sides ---------------------------------------------------------------------------------
# name -> (how to run it, its setting, jobs per drain at full size). Python peers drain fewer
# jobs: each row is a few seconds at their rates.
DRAIN: dict[str, tuple[str, str, int]] = {
    "orca-aio": ("py:orca-aio:64", "asyncio Worker, concurrency 64", 20_000),
    "orca-sync": ("py:orca-sync:16", "thread Worker, concurrency 16", 20_000),
    "orca-aio, no hiredis": ("pyslow:orca-aio:64", "as orca-aio, redis-py's own parser", 20_000),
    "orca-sync, no hiredis": ("pyslow:orca-sync:16", "as orca-sync, redis-py's own parser", 20_000),
    "dramatiq": ("py:dramatiq:0", "RedisBroker, 16 worker threads", 10_000),
    "taskiq": ("py:taskiq:0", "RedisStreamBroker, max_async_tasks 100", 10_000),
    "celery": ("py:celery:0", "Redis broker, prefork pool, concurrency 2 (CPUs)", 4_000),
    "rq": ("py:rq:0", "Worker (a fork per job), burst", 500),
    "node": (
        "node:node:16",
        "orca-queue Node Worker, concurrency 16 (after 100k warm-up jobs)",
        50_000,
    ),
}
PEERS = ["dramatiq", "taskiq", "celery", "rq"]
LATENCY_SIDES = ["orca-aio", "orca-sync", "dramatiq", "taskiq", "node", "bull"]
LATENCY_PEERS = ["dramatiq", "taskiq"]
# jobs/s -> seconds of producing. At 5k and 20k jobs/s only the best peer at 1k jobs/s runs
# (the lower median p99 so far): a saturated peer takes its whole backlog's time to finish.
RATES = {1000: 5.0, 5000: 1.0, 20000: 0.5}
RUSH_SIDES = {
    "node": "node:node:64",
    "orca-aio": "py:orca-aio:64",
    "orca-sync": "py:orca-sync:16",
    "bull": "node:bull:64",
}
TRICKLE_SIDES = {
    "node": "node:node:16",
    "orca-aio": "py:orca-aio:64",
    "orca-sync": "py:orca-sync:16",
}


class Bench:
    def __init__(self, port: int, server_pid: int) -> None:
        self.port = port
        self.server_pid = server_pid
        self.admin = redis.Redis(port=port)
        self.tag = 0

    def _cmd(self, spec: str, action: str, queue: str, **kw: Any) -> list[str]:
        kind, side, conc = spec.split(":")
        flags = ["--port", str(self.port), "--queue", queue]
        for k, v in kw.items():
            flags += [f"--{k}", str(v)]
        if action == "worker" and int(conc):
            flags += ["--concurrency", conc]
        if kind == "node":
            return ["node", str(HERE.parent / "side.js"), action, side, *flags]
        if kind == "pyslow":
            flags += ["--parser", "python"]
        return [PY, str(HERE / "sides.py"), action, side, *flags]

    @staticmethod
    def _start(cmd: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, start_new_session=True, cwd=HERE
        )

    @staticmethod
    def _end(p: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
        """The JSON line a side prints last; its process group is killed after."""
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            out = ""
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        lines = [x for x in out.splitlines() if x.startswith("{")]
        if not lines:
            raise RuntimeError(f"{p.args}: no result (exit {p.returncode})")
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def _run(self, cmd: list[str], timeout: float = 300) -> dict[str, Any] | None:
        p = self._start(cmd)
        try:
            out, _ = p.communicate(timeout=timeout)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if p.returncode != 0:
            raise RuntimeError(f"{cmd}: exit {p.returncode}")
        lines = [x for x in out.splitlines() if x.startswith("{")]
        return json.loads(lines[-1]) if lines else None

    def _worker(self, spec: str, queue: str, expect: int, **kw: Any) -> subprocess.Popen[str]:
        p = self._start(self._cmd(spec, "worker", queue, expect=expect, **kw))
        assert p.stdout is not None
        line = p.stdout.readline()
        if line.strip() != "READY":
            os.killpg(p.pid, signal.SIGKILL)
            raise RuntimeError(f"{spec}: worker did not start ({line!r})")
        return p

    def fresh(self) -> str:
        self.tag += 1
        self.admin.flushall()
        return f"bench{self.tag}"

    # -- sections ------------------------------------------------------------------------
    def drain(self, side: str, scale: float) -> dict[str, Any]:
        spec, _, jobs = DRAIN[side]
        jobs = max(200, int(jobs * scale))
        q = self.fresh()
        self._run(self._cmd(spec, "fill", q, n=jobs, tag=self.tag))
        extra = {"warmup": int(100_000 * scale)} if side == "node" else {}
        w = self._worker(spec, q, jobs, **extra)
        out = self._end(w, 600)
        if out["jobs"] != jobs:
            raise RuntimeError(f"{side}: {out['jobs']} of {jobs} jobs")
        return out

    def latency(self, side: str, rate: int, seconds: float) -> dict[str, Any]:
        spec = {
            "orca-aio": "py:orca-aio:64",
            "orca-sync": "py:orca-sync:16",
            "dramatiq": "py:dramatiq:0",
            "taskiq": "py:taskiq:0",
            "node": "node:node:16",
            "bull": "node:bull:16",
        }[side]
        n = int(rate * seconds)
        q = self.fresh()
        w = self._worker(spec, q, n)
        time.sleep(1.0)  # the worker reaches its blocking pop / poll
        prod = self._run(self._cmd(spec, "produce", q, n=n, rate=rate, tag=self.tag), 600)
        out = self._end(w, 600)
        assert prod is not None
        out["producer"] = prod
        return out

    def rush(self, side: str, jobs: int) -> dict[str, Any]:
        spec = RUSH_SIDES[side]
        q = self.fresh()
        w = self._worker(spec, q, jobs)
        time.sleep(0.5)
        producer = "node:bull:0" if side == "bull" else "node:node:0"
        prod = self._run(
            self._cmd(producer, "rush", q, n=jobs, students=2000, window=64, tag=self.tag), 900
        )
        out = self._end(w, 900)
        assert prod is not None
        out["producer"] = prod
        out["drain_s"] = (out["t_last"] - prod["t_start"]) / 1e6
        return out

    def trickle(self, side: str, jobs: int, gap_s: float) -> dict[str, Any]:
        spec = TRICKLE_SIDES[side]
        q = self.fresh()
        w = self._worker(spec, q, jobs)
        time.sleep(1.0)  # idle: blocked in its pop
        self.admin.config_resetstat()
        for i in range(jobs):
            cfg = json.dumps({"key": f"t{self.tag}-{i}", "response_url": "http://x/cb"})
            self.admin.execute_command("ORCA.ENQUEUE", q, cfg)
            time.sleep(gap_s)
        out = self._end(w, 120)
        time.sleep(0.2)
        stats = self.admin.info("commandstats")
        # Not the worker's: the enqueues, the bench's own INFO/CONFIG; nor connection upkeep
        # (HELLO, CLIENT ..., QUIT: a worker's start and stop, not per job).
        skip = ("cmdstat_orca.enqueue", "cmdstat_info", "cmdstat_config|resetstat")
        calls = {k[8:]: v["calls"] for k, v in stats.items() if k not in skip}
        out["commands"] = calls
        out["commands_per_job"] = per_job_commands(calls, jobs)
        return out


def best_peer(samples: list[dict[str, Any]]) -> str:
    """The peer with the lower median p99 at 1k jobs/s in the samples so far."""
    p99 = {
        p: sorted(
            s["lat"]["p99"]
            for s in samples
            if s["section"] == "latency" and s["side"] == p and s["offered"] == 1000
        )
        for p in LATENCY_PEERS
    }
    return min(LATENCY_PEERS, key=lambda p: p99[p][len(p99[p]) // 2] if p99[p] else 1e18)


def start_server() -> tuple[subprocess.Popen[bytes], int, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tempfile.mkdtemp(prefix="orca-bench-workers-")
    proc = subprocess.Popen(
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            d,
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            f"{d}/server.log",
            "--loadmodule",
            MODULE,
        ],
        stdout=subprocess.DEVNULL,
    )
    r = redis.Redis(port=port)
    for _ in range(200):
        try:
            r.ping()
            return proc, port, d
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("redis-server did not start")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="drain,latency,rush,trickle")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rush-rounds", type=int, default=2)
    ap.add_argument("--rush-jobs", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="a fifth of the jobs, one round")
    ap.add_argument("--out", default=str(HERE.parent))
    ap.add_argument("--render", action="store_true", help="rewrite workers.md from workers.json")
    a = ap.parse_args()
    out = Path(a.out)
    if a.quick and a.out == str(HERE.parent):
        out = Path(tempfile.gettempdir()) / "orca-bench-workers"  # a smoke run keeps the results
    if a.render:
        data = json.loads((out / "workers.json").read_text())
        (out / "workers.md").write_text(render(data))
        log(f"wrote {out / 'workers.md'} from workers.json")
        if out == HERE.parent and put_summary(ROOT / "docs/benchmarks.md", data):
            log("wrote the summary in docs/benchmarks.md")
        return
    if not Path(MODULE).exists():
        sys.exit(f"{MODULE} not found: run make build")
    scale = 0.2 if a.quick else 1.0
    rounds = 1 if a.quick else a.rounds
    sections = a.sections.split(",")
    proc, port, d = start_server()
    bench = Bench(port, proc.pid)
    info = bench.admin.info("server")
    samples: list[dict[str, Any]] = []
    loads: dict[str, list[str]] = {}
    log(
        f"redis-server {info['redis_version']} pid {proc.pid} port {port}; sections {sections}, "
        f"{rounds} rounds; load {load()}"
    )

    def record(section: str, side: str, rnd: int, m: dict[str, Any], **key: Any) -> None:
        samples.append({"section": section, "side": side, "round": rnd, **key, **m})
        what = " ".join(f"{k}={v}" for k, v in key.items())
        if section == "drain":
            log(f"drain {side:24} {m['rate']:9.0f} jobs/s  {m['cpu_us_per_job']:6.1f} µs CPU/job")
        elif section == "latency":
            lat = m["lat"]
            log(
                f"latency {what} {side:10} p50 {lat['p50']:7.2f} p99 {lat['p99']:8.2f} "
                f"p99.9 {lat['p999']:8.2f} ms (producer {m['producer']['rate']:.0f}/s)"
            )
        elif section == "rush":
            log(
                f"rush {side:10} drained in {m['drain_s']:6.2f} s, enqueue p99 "
                f"{m['producer']['enqueue']['p99']:.2f} ms"
            )
        else:
            log(f"trickle {side:10} {m['commands_per_job']:.2f} commands/job {m['commands']}")

    try:
        for section in sections:
            start = load()
            for rnd in range(
                1, (a.rush_rounds if section == "rush" and not a.quick else rounds) + 1
            ):
                if section == "drain":
                    sides = list(DRAIN)
                elif section == "latency":
                    sides = LATENCY_SIDES
                elif section == "rush":
                    sides = list(RUSH_SIDES)
                else:
                    sides = list(TRICKLE_SIDES)
                order = sides if rnd % 2 else sides[::-1]
                if section == "latency":
                    for rate, secs in RATES.items():
                        best = best_peer(samples)
                        for side in order:
                            if rate != 1000 and side in LATENCY_PEERS and side != best:
                                continue
                            m = bench.latency(side, rate, secs * (0.4 if a.quick else 1))
                            record(section, side, rnd, m, offered=rate)
                    continue
                for side in order:
                    if section == "drain":
                        m = bench.drain(side, scale)
                    elif section == "rush":
                        m = bench.rush(side, int(a.rush_jobs * scale))
                    else:
                        m = bench.trickle(side, 100, 0.02)
                    record(section, side, rnd, m)
            loads[section] = [start, load()]
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["rm", "-rf", d], check=False)
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "redis": info["redis_version"],
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "node": subprocess.run(
            ["node", "--version"], capture_output=True, text=True
        ).stdout.strip(),
        "versions": versions(),
        "rounds": rounds,
        "quick": a.quick,
        "loads": loads,
        "drain_settings": {k: v[1] for k, v in DRAIN.items()},
    }
    out.mkdir(parents=True, exist_ok=True)
    data = {"meta": meta, "samples": samples}
    (out / "workers.json").write_text(json.dumps(data, indent=1) + "\n")
    text = render(data)
    (out / "workers.md").write_text(text)
    if not a.quick and out == HERE.parent and put_summary(ROOT / "docs/benchmarks.md", data):
        log("wrote the summary in docs/benchmarks.md")
    print()
    print(text.split("## Where the time goes")[0])
    log(f"wrote {out / 'workers.md'}")


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ["redis", "hiredis", "dramatiq", "taskiq", "taskiq-redis", "celery", "kombu", "rq"]:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "-"
    bull = ROOT / "benches/clients/node_modules/bullmq/package.json"
    out["bullmq"] = json.loads(bull.read_text())["version"] if bull.exists() else "-"
    return out


if __name__ == "__main__":
    main()

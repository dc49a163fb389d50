"""Chaos: several worker processes, some SIGKILLed mid-job, one stopped with SIGTERM.

Every job must end completed exactly once: its one successful ACK (the server fences every
other delivery) left a result, the server counted exactly one ACK per job, no completion was
reported twice, and nothing is left queued, leased, delayed or dead.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import redis
from conftest import Server

from orca_queue import Queue

JOBS = 200
WORKER = os.path.join(os.path.dirname(__file__), "chaos_worker.py")


def spawn(port: int, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, WORKER, str(port), name], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def busy(r: redis.Redis, name: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Wait until worker ``proc`` has started a job (it is past its start-up, its signal handlers
    are installed and it holds leases): a loaded machine may take seconds to start Python."""
    deadline = time.monotonic() + timeout
    while r.llen(f"{name}:started:{proc.pid}") == 0:
        assert proc.poll() is None, f"worker {proc.pid} exited: {proc.returncode}"
        assert time.monotonic() < deadline, f"worker {proc.pid} never started a job"
        time.sleep(0.01)


def orca_info(server: Server) -> dict[str, int]:
    info = server.client().info("orca")
    return {k: int(v) for k, v in info.items()}


def test_kill_and_sigterm_workers_every_job_done_once() -> None:
    server = Server()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        r = server.client()
        q = Queue(r, "chaos")
        rng = random.Random(7)
        keys = []
        for i in range(JOBS):
            # Mostly short jobs, some longer than a lease (kept alive by heartbeats).
            sleep_ms = 1500 if i % 40 == 0 else rng.randint(200, 500)
            keys.append(
                q.enqueue({"key": f"job-{i}", "response_url": "", "sleep_ms": sleep_ms}).key
            )
        acked_before = orca_info(server)["orca_acked"]
        procs = [spawn(server.port, "chaos") for _ in range(4)]
        busy(r, "chaos", procs[0])
        procs[0].send_signal(signal.SIGKILL)  # mid-job: its leases expire and come back
        busy(r, "chaos", procs[1])
        time.sleep(0.2)
        procs[1].send_signal(signal.SIGKILL)
        procs.append(spawn(server.port, "chaos"))
        busy(r, "chaos", procs[2])
        time.sleep(0.2)
        procs[2].send_signal(signal.SIGTERM)  # graceful: finishes or hands back
        assert procs[2].wait(15) == 0
        term_log = (procs[2].stderr.read() if procs[2].stderr else b"").decode()
        # It was busy: with a 50 ms grace some of its running jobs were handed back.
        assert "'handed_back': 0}" not in term_log and "'handed_back'" in term_log, term_log

        deadline = time.monotonic() + 90
        while True:
            st = q.stats()
            if st.queued == st.leased == st.delayed == 0:
                break
            assert time.monotonic() < deadline, f"jobs left: {st}"
            time.sleep(0.2)

        for k in keys:
            res = q.result(k)
            assert res is not None, f"job {k} has no result"
            assert set(json.loads(res)) == {"pid", "lease"}
        assert q.stats().dead == 0
        info = orca_info(server)
        assert info["orca_acked"] - acked_before == JOBS  # one successful ACK per job
        done = list(r.lrange("chaos:done", 0, -1))
        assert len(done) == len(set(done))  # no completion reported twice
        assert info["orca_expired"] > 0  # the SIGKILLed workers' leases did expire
        q.check()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)
        server.stop()

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

from conftest import Server

from orca_queue import Queue

JOBS = 200
WORKER = os.path.join(os.path.dirname(__file__), "chaos_worker.py")


def spawn(port: int, name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, WORKER, str(port), name], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


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
        time.sleep(1.0)
        procs[0].send_signal(signal.SIGKILL)  # mid-job: its leases expire and come back
        time.sleep(0.7)
        procs[1].send_signal(signal.SIGKILL)
        procs.append(spawn(server.port, "chaos"))
        time.sleep(0.5)
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

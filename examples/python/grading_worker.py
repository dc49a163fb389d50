#!/usr/bin/env python3
"""An Orca grading worker: runs each job's ``script`` in subprocesses and POSTs the result to
the job's ``response_url``.

    python examples/python/grading_worker.py --redis redis://localhost:6379/0 --queue grading

``--queue`` may be given several times: the worker then serves those queues in that order
(one ``ORCA.MPOP`` over all of them; in a Redis Cluster give them one hash tag, e.g.
``{grading}:cs2500``).

The script is the ``script`` list of an Orca grading job config (benches/job.json has one):
steps ``{"cmd": [...], "on_complete": <step>|"output", "on_fail": "abort"|<step>,
"timeout": <seconds>}``, run in order from step 0 in a fresh build directory. A step that
exits 0 goes to ``on_complete`` (the next step by default; ``"output"``: the grade is this
step's stdout); one that fails or times out goes to ``on_fail`` (``"abort"`` by default).
``$BUILD`` in a command is the build directory (``$SUBMISSION``/``$GRADER``: files under it;
fetching them from ``files`` is left to a real deployment).

A failing grading script is still a finished job: its result (with ``errors``) is POSTed and
the job acked. Only a failed POST raises (``PostError``, logged as one line), so the worker
NACKs and the queue retries it with backoff; anything unexpected is logged with its
traceback. SIGTERM/SIGINT stop the worker gracefully; a job whose lease is lost or that is
handed back has its subprocess killed and its result dropped.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from string import Template
from typing import Any

import redis

from orca_queue import Job, JobFailed, Queue, Worker

log = logging.getLogger("grading_worker")
MAX_STEPS = 100
TAIL = 8192  # bytes of stdout/stderr kept per step


class PostError(JobFailed):
    """The response_url did not accept the result (expected: logged as one line, no
    traceback; the worker NACKs and the job is retried)."""


def _tail(data: bytes) -> str:
    return data[-TAIL:].decode("utf-8", "replace")


def run_step(
    cmd: list[str], env: dict[str, str], cwd: str, timeout: float, job: Job
) -> dict[str, Any]:
    """One command; killed on timeout or when the job is abandoned (lease lost, shutdown)."""
    args = [Template(a).safe_substitute(env) for a in cmd]
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            args, cwd=cwd, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as e:
        return {
            "cmd": args,
            "status": None,
            "error": str(e),
            "stdout": "",
            "stderr": "",
            "seconds": 0.0,
        }
    deadline = started + timeout
    error = None
    while True:
        try:
            out, err = proc.communicate(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            if job.abandoned is not None or time.monotonic() > deadline:
                error = (
                    f"abandoned: {job.abandoned}"
                    if job.abandoned
                    else f"timed out after {timeout:g}s"
                )
                proc.kill()
                out, err = proc.communicate()
                break
    return {
        "cmd": args,
        "status": proc.returncode,
        "error": error,
        "stdout": _tail(out),
        "stderr": _tail(err),
        "seconds": round(time.monotonic() - started, 3),
    }


def run_script(script: list[dict[str, Any]], job: Job) -> dict[str, Any]:
    """Runs the steps in a fresh build directory; returns output, errors and every step."""
    build = tempfile.mkdtemp(prefix="orca-grade-")
    env = {
        "BUILD": build,
        "SUBMISSION": os.path.join(build, "submission"),
        "GRADER": os.path.join(build, "grader"),
    }
    steps: list[dict[str, Any]] = []
    errors: list[str] = []
    output = None
    i = 0
    try:
        while 0 <= i < len(script) and len(steps) < MAX_STEPS:
            step = script[i]
            res = run_step(list(step["cmd"]), env, build, float(step.get("timeout", 60)), job)
            steps.append(res)
            if job.abandoned is not None:
                errors.append(res["error"] or "abandoned")
                break
            if res["status"] == 0 and res["error"] is None:
                nxt = step.get("on_complete", i + 1)
                if nxt == "output" or (nxt == i + 1 and i + 1 == len(script)):
                    output = res["stdout"]
                    break
            else:
                errors.append(
                    f"step {i} ({' '.join(res['cmd'])}): "
                    f"{res['error'] or 'exit status ' + str(res['status'])}"
                )
                nxt = step.get("on_fail", "abort")
                if nxt == "abort":
                    break
            if not isinstance(nxt, int):
                errors.append(f"step {i}: bad next step {nxt!r}")
                break
            i = nxt
        else:
            errors.append(
                f"stopped after {MAX_STEPS} steps"
                if len(steps) >= MAX_STEPS
                else f"no step {i} in a script of {len(script)}"
            )
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return {"output": output, "errors": errors, "steps": steps}


def post_result(url: str, result: dict[str, Any], timeout: float = 10.0) -> None:
    body = json.dumps(result).encode()
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if resp.status >= 300:
                raise PostError(f"POST {url}: HTTP {resp.status}")
    except OSError as e:  # URLError, HTTPError, timeouts
        raise PostError(f"POST {url}: {e}") from e


def grade(job: Job) -> dict[str, Any]:
    """The worker's handler: grade, POST, and return the result (kept by the ACK)."""
    config = job.config
    result = {
        "key": config["key"],
        "attempt": job.attempt,
        **run_script(config.get("script", []), job),
    }
    if job.abandoned is not None:
        raise RuntimeError(f"job abandoned ({job.abandoned}); not reporting")
    if config.get("response_url"):
        post_result(config["response_url"], result)
    log.info("graded %s: %s", config["key"], "ok" if not result["errors"] else result["errors"][0])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--redis", default="redis://localhost:6379/0")
    ap.add_argument(
        "--queue",
        action="append",
        help="a queue to serve (repeat for several, served in that order; default: grading)",
    )
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--lease-ms", type=int, default=60_000)
    ap.add_argument("--grace-ms", type=int, default=30_000)
    ap.add_argument(
        "--name",
        help="this worker's name: it takes jobs as host:pid:NAME (ORCA.STATUS, the dashboard)",
    )
    args = ap.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    client = redis.Redis.from_url(args.redis)
    queues = [Queue(client, name) for name in args.queue or ["grading"]]
    Worker(
        queues,
        grade,
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        grace_ms=args.grace_ms,
        name=args.name,
    ).run()


if __name__ == "__main__":
    main()

"""One side of the worker bench in a process of its own (run by run.py, or by hand):

    sides.py fill    SIDE --port P --queue Q --n N [--tag T]
    sides.py produce SIDE --port P --queue Q --n N --rate R     (open loop, "ts" in each job)
    sides.py worker  SIDE --port P --queue Q --expect N [--concurrency C] [--parser python]

SIDE: orca-aio, orca-sync (clients/python's Workers), dramatiq, taskiq, celery, rq. A worker
prints READY once started, then one JSON line when it has finished ``--expect`` jobs (its
rate, CPU per job, last finish time and, for jobs that carry "ts", the latency from enqueue
to handler start), and exits.
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

import orca_side
import peers

Action = Callable[[Any], None]

SIDES: dict[str, dict[str, Action]] = {
    "orca-aio": {
        "fill": orca_side.fill,
        "produce": orca_side.produce,
        "worker": orca_side.worker_aio,
    },
    "orca-sync": {
        "fill": orca_side.fill,
        "produce": orca_side.produce,
        "worker": orca_side.worker_sync,
    },
    "dramatiq": {
        "fill": peers.dramatiq_fill,
        "produce": peers.dramatiq_produce,
        "worker": peers.dramatiq_worker,
    },
    "taskiq": {
        "fill": peers.taskiq_fill,
        "produce": peers.taskiq_produce,
        "worker": peers.taskiq_worker,
    },
    "celery": {
        "fill": peers.celery_fill,
        "produce": peers.celery_produce,
        "worker": peers.celery_worker,
    },
    "rq": {"fill": peers.rq_fill, "worker": peers.rq_worker},
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("action", choices=["fill", "produce", "worker"])
    p.add_argument("side", choices=sorted(SIDES))
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--n", type=int, default=0)
    p.add_argument("--tag", type=int, default=1)
    p.add_argument("--rate", type=float, default=1000)
    p.add_argument("--expect", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--parser", choices=["default", "python"], default="default")
    args = p.parse_args()
    action = SIDES[args.side].get(args.action)
    if action is None:
        p.error(f"{args.side} has no {args.action}")
    action(args)


if __name__ == "__main__":
    main()

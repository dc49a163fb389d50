"""A worker's hand-off: a handler that returns :class:`Forward` finishes its job and enqueues
the next stage's job in one atomic step (``ORCA.ACK ... FORWARD``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .keys import Config


@dataclass(frozen=True)
class Forward:
    """Return it from a :class:`~orca_queue.Worker`'s handler to hand the job on: the worker
    acks the delivery with ``result`` (encoded as any handler value) and enqueues ``config``
    into ``queue`` (a name or a ``Queue``; in a Cluster, of the same hash tag) in one step, or
    neither. If the server refuses the hand-off (a bad config, the next queue full), nothing
    changed: the delivery stays leased until its lease runs out and comes back, as after any
    refused ACK (logged)."""

    queue: Any
    config: Config
    result: Any = None

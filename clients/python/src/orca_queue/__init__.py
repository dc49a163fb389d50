"""Python client and worker runtime for the Orca Redis queue module.

    import redis
    from orca_queue import Queue, Worker

    q = Queue(redis.Redis(), "grading")
    q.enqueue({"key": "sub-41", "response_url": "http://web/cb", "priority": 60000})
    Worker(q, lambda job: {"score": 97}, concurrency=4).run()

The asyncio API is :mod:`orca_queue.aio` (same names).
"""

from .connection import blocking_client
from .errors import (
    BadConfigError,
    InvalidArgumentError,
    InvariantError,
    JobCancelledError,
    JobFailed,
    JobNotQueuedError,
    JobStateError,
    LeaseLostError,
    NoSuchJobError,
    NotReplicatedError,
    OrcaError,
    QueueFullError,
    ResultTooLargeError,
    WrongTypeError,
)
from .handoff import Forward
from .keys import config_orca_key, orca_key
from .protocol import MackReply
from .queue import Queue, mpop, mpop_many
from .types import (
    AutoDelay,
    Job,
    LeaseInfo,
    NackOutcome,
    QueueSettings,
    QueueStats,
    TickReport,
    WaitStats,
)
from .worker import Worker

__all__ = [
    "AutoDelay",
    "BadConfigError",
    "Forward",
    "InvalidArgumentError",
    "InvariantError",
    "Job",
    "JobCancelledError",
    "JobFailed",
    "JobNotQueuedError",
    "JobStateError",
    "LeaseInfo",
    "LeaseLostError",
    "MackReply",
    "NackOutcome",
    "NoSuchJobError",
    "NotReplicatedError",
    "OrcaError",
    "Queue",
    "QueueFullError",
    "QueueSettings",
    "QueueStats",
    "ResultTooLargeError",
    "TickReport",
    "WaitStats",
    "Worker",
    "WrongTypeError",
    "blocking_client",
    "config_orca_key",
    "mpop",
    "mpop_many",
    "orca_key",
]

"""The worker's fetch strategy: the commands it issues (no server needed)."""

from __future__ import annotations

import pytest

from orca_queue import Job
from orca_queue.strategy import MAX_POP_COUNT, FetchStrategy


def test_pops_ask_for_at_most_max_pop_count_and_rotate() -> None:
    s = FetchStrategy(["a", "b"], lease_ms=5000, block_ms=5000, poll_ms=200)
    assert s.quick("a", 5000).args == ("ORCA.POP", "a", "LEASE", 5000, "COUNT", MAX_POP_COUNT)
    first, second = s.blocking(3).args, s.blocking(3).args
    assert first == ("ORCA.POP", "a", "LEASE", 5000, "BLOCK", 200, "COUNT", 3)
    assert second[1] == "b"  # several queues: the blocking pop rotates, with BLOCK = poll_ms
    assert FetchStrategy(["a"], lease_ms=1, block_ms=5000).block_ms == 5000


def test_hand_back_is_reenqueue_at_arrival_then_nack() -> None:
    s = FetchStrategy(["q"], lease_ms=5000, block_ms=1000)
    job = Job(key="K", payload=b'{"key":"k"}', created_at=42, lease="7", queue="q")
    assert [c.args for c in s.hand_back(job)] == [
        ("ORCA.REENQUEUE", "q", b'{"key":"k"}', 42),
        ("ORCA.NACK", "q", "K", "7", "DELAY", 0),
    ]
    with pytest.raises(ValueError):
        FetchStrategy([], lease_ms=5000, block_ms=1000)
    with pytest.raises(ValueError):
        FetchStrategy(["q"], lease_ms=0, block_ms=1000)

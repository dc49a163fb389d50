"""Gates, the new settings, listing by state, and the refusals that name a job's state,
against a real server under RESP2 and RESP3 (the ``r`` fixture)."""

from __future__ import annotations

import json

import pytest
import redis
from conftest import Server, cfg

from orca_queue import (
    AutoDelay,
    BadConfigError,
    InvalidArgumentError,
    JobNotQueuedError,
    JobStateError,
    NoSuchJobError,
    Queue,
)


def test_gate_close_hold_open(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    assert q.close_gate("img-hw3") is True
    assert q.close_gate("img-hw3") is False  # already closed
    user = {"type": "user", "id": "7"}
    held = q.enqueue(cfg("h1", collation=user, gate="img-hw3"))
    assert (held.state, held.gate, held.created) == ("held", "img-hw3", True)
    free = q.enqueue(cfg("f1", gate="img-other"))  # a gate that is not closed: queued
    assert free.state is None and q.len() == 1
    st = q.status(held.key)
    assert st is not None and (st.state, st.gate, st.position) == ("held", "img-hw3", None)
    assert st.config["gate"] == "img-hw3"
    # Updated in place while held (a PUT keeps its arrival).
    again = q.enqueue(cfg("h1", collation=user, gate="img-hw3", script=[2]))
    assert again.created is False and again.state == "held"
    stats = q.stats()
    assert (stats.held, stats.gates, stats.queued) == (1, {"img-hw3": 1}, 1)
    listed = list(q.list(state="held", gate="img-hw3"))
    assert [(j.key, j.state, j.gate) for j in listed] == [(held.key, "held", "img-hw3")]
    assert listed[0].config["script"] == [2]
    assert list(q.list(state="held", gate="nope")) == []
    with pytest.raises(JobNotQueuedError) as ei:
        q.release(held.key)
    assert (ei.value.state, ei.value.gate) == ("held", "img-hw3")
    assert isinstance(ei.value, JobStateError)
    assert q.open_gate("img-hw3") == 1
    assert q.open_gate("img-hw3") == 0  # forgotten once open
    st = q.status(held.key)
    assert st is not None and st.state == "queued" and st.created_at == held.created_at
    assert q.stats().gates == {}
    q.check()


def test_gate_drop_returns_the_configs(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.close_gate("img-hw4")
    configs = [cfg(f"d{i}", gate="img-hw4", n=i) for i in range(3)]
    for c in configs:
        q.enqueue(c)
    q.delete(q.enqueue(cfg("d-deleted", gate="img-hw4")).key)  # a held job can be deleted
    dropped = q.drop_gate("img-hw4")
    assert dropped == configs  # parsed, in arrival order: each response_url can be told
    assert q.drop_gate("img-hw4") == []
    assert q.stats().held == 0 and q.len() == 0


def test_gate_errors(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    with pytest.raises(InvalidArgumentError, match="gate name must not be empty"):
        q.close_gate("")
    with pytest.raises(BadConfigError, match="gate"):
        q.enqueue(cfg("a", gate=""))
    with pytest.raises(BadConfigError, match="gate"):
        q.enqueue(cfg("a", gate=5))
    with pytest.raises(InvalidArgumentError, match="GATE applies to STATE HELD only"):
        q.list_page(gate="x")
    with pytest.raises(ValueError, match="state must be one of"):
        q.list_page(state="running")


def test_settings_read_and_write(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    s = q.settings()
    assert (s.order, s.lifetime_ms, s.max_running, s.jobs, s.held) == ("lifo", 0, 0, 0, 0)
    assert s.autodelay == AutoDelay(0, 0, 0) and not s.autodelay.enabled
    s = q.settings(
        "fifo",
        lifetime_ms=86_400_000,
        autodelay=(900_000, 60_000, 600_000),
        max_running=2,
        dead_max=10,
        dead_ttl_ms=3_600_000,
        result_max=50,
    )
    assert s.order == "fifo" and s.lifetime_ms == 86_400_000
    assert s.autodelay == AutoDelay(900_000, 60_000, 600_000) and s.autodelay.enabled
    assert (s.max_running, s.dead_max, s.dead_ttl_ms, s.result_max) == (2, 10, 3_600_000, 50)
    assert q.settings() == s  # persisted
    st = q.stats()
    assert st.settings == s  # read-only view of the same settings
    # Others stay when one changes; AutoDelay objects work as well as tuples.
    s2 = q.settings(autodelay=AutoDelay(0, 0))
    assert not s2.autodelay.enabled and s2.max_running == 2 and s2.order == "fifo"
    with pytest.raises(InvalidArgumentError, match="MAXRUNNING"):
        q.settings(max_running=-1)
    with pytest.raises(InvalidArgumentError, match="AUTODELAY"):
        q.settings(autodelay=(0, 5))


def test_autodelay_is_reported_by_the_write(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.settings(autodelay=(60_000, 1000))
    user = {"type": "user", "id": "9"}
    first = q.enqueue(cfg("a1", collation=user))
    second = q.enqueue(cfg("a2", collation=user))
    assert (first.delay, second.delay) == (0, 1000)
    assert q.enqueue(cfg("a2", collation=user)).delay == 0  # an update is no submission


def test_running_cap_shows_in_status_and_stats(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.settings(max_running=1)
    user = {"type": "user", "id": "1"}
    keys = {q.enqueue(cfg("c1", collation=user)).key, q.enqueue(cfg("c2", collation=user)).key}
    other = q.enqueue(cfg("o1", collation={"type": "user", "id": "2"}, priority=50))
    first = q.pop(lease_ms=60_000)
    assert first is not None and first.collation == "user.1"
    (rest,) = keys - {first.key}
    st = q.status(rest)
    assert st is not None and st.state == "queued" and st.capped is True
    assert q.stats().running == {"user.1": 1}
    second = q.pop(lease_ms=60_000)  # user.1 is at its cap: the other collation's job
    assert second is not None and second.key == other.key
    q.ack(first)
    assert q.stats().running == {"user.2": 1}


def test_move_names_the_state_it_refuses(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    running = q.enqueue(cfg("run"))
    job = q.pop(lease_ms=60_000)
    assert job is not None and job.key == running.key
    with pytest.raises(JobNotQueuedError) as ei:
        q.delay(job.key)
    assert ei.value.state == "leased" and "running" in str(ei.value)
    q.nack(job, delay_ms=60_000)
    with pytest.raises(JobNotQueuedError) as ei:
        q.release(job.key)
    assert ei.value.state == "delayed" and ei.value.retry_at is not None
    with pytest.raises(NoSuchJobError):
        q.release("A" * 43 + "=")


def test_dead_job_refusal(server: Server, r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("dies"))
    job = q.pop(lease_ms=60_000)
    assert job is not None
    admin = server.client()
    admin.config_set("orca.max-attempts", 1)
    try:
        assert q.nack(job).outcome == "dead"
    finally:
        admin.config_set("orca.max-attempts", 5)
    with pytest.raises(JobNotQueuedError) as ei:
        q.release(job.key)
    assert ei.value.state == "dead"
    dead = list(q.list(state="dead"))
    assert [(d.key, d.cause) for d in dead] == [(job.key, "failed")]
    assert json.loads(dead[0].payload or b"")["key"] == "dies"

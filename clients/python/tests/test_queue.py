"""Every Queue method against a real server, under RESP2 and RESP3 (the ``r`` fixture)."""

from __future__ import annotations

import json

import pytest
import redis
from conftest import Server, cfg

from orca_queue import (
    BadConfigError,
    InvalidArgumentError,
    Job,
    JobCancelledError,
    JobStateError,
    LeaseLostError,
    NoSuchJobError,
    OrcaError,
    Queue,
    QueueFullError,
    WrongTypeError,
    config_orca_key,
    orca_key,
)


def test_orca_key_matches_the_server(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    for key, url in [("sub-41", "http://web/cb"), ("é ünïcode ✓", ""), ('{"id":1}', "x" * 300)]:
        job = q.enqueue({"key": key, "response_url": url})
        assert job.key == orca_key(key, url)
        assert len(job.key) == 44 and "." not in job.key
        assert config_orca_key({"key": key, "response_url": url}) == job.key
    assert orca_key("a", "u") == "YyzS/qcdzeAFr04H8UuLwfaLY9nBs3PcYEj7h+kK8is="


def test_enqueue_write_reply_and_update(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    c = cfg("a", collation={"type": "user", "id": "7"}, priority=60000, script=[1, 2])
    job = q.enqueue(c)
    assert job.created is True and job.payload is None
    assert job.collation == "user.7" and not job.immediate and job.attempts == 0
    assert job.release_at == job.created_at + 60000
    again = q.enqueue(json.dumps({**c, "script": [3]}))  # raw JSON text works too
    assert again.created is False and again.key == job.key
    st = q.status(job.key)
    assert st is not None and st.state == "queued" and st.position == 1
    assert st.config["script"] == [3] and isinstance(st.payload, bytes)
    assert q.len() == 1


def test_immediate_reenqueue_move_delete(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    a = q.enqueue(cfg("a", collation={"type": "user", "id": "1"}, priority=1000))
    b = q.enqueue(cfg("b", collation={"type": "user", "id": "2"}, priority=2000))
    c = q.immediate(cfg("c"))
    assert c.immediate and c.created
    assert [j.key for j in q.list()] == [c.key, a.key, b.key]
    q.release(b.key)
    assert [j.key for j in q.list()] == [b.key, c.key, a.key]
    e = q.enqueue(cfg("e", priority=10_000_000))
    q.delay(a.key, buffer_ms=5)
    assert [j.key for j in q.list()] == [b.key, c.key, e.key, a.key]
    with pytest.raises(JobStateError):
        q.move(b.key, "DELAY")  # released: immediate now
    with pytest.raises(ValueError):
        q.move(a.key, "SIDEWAYS")
    re = q.reenqueue(cfg("d", v=1), created_at=5)
    assert re.created_at == 5 and re.immediate
    assert next(iter(q.list())).key == re.key
    assert q.delete(a.key) is True and q.delete(a.key) is False
    assert q.delete(e.key)
    with pytest.raises(NoSuchJobError):
        q.release(a.key)
    q.check()


def test_list_iterates_every_page_and_filters(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    keys = []
    for i in range(23):
        course = "cs1" if i % 3 == 0 else "cs2"
        keys.append(q.enqueue(cfg(f"k{i}", priority=i, metadata_table={"course": course})).key)
    listed = list(q.list(page_size=5))
    assert [j.key for j in listed] == keys
    assert [j.position for j in listed] == list(range(1, 24))
    assert all(j.state == "queued" for j in listed)
    cs1 = list(q.list({"course": "cs1"}, page_size=2))
    assert [j.key for j in cs1] == keys[::3]
    assert [j.key for j in q.list_page(offset=20, limit=10)] == keys[20:]
    assert list(Queue(r, qname + "-missing").list()) == []


def test_pop_ack_nack_extend_result(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("a"))
    q.enqueue(cfg("b"))
    job = q.pop(lease_ms=60000)
    assert job is not None and job.lease and job.attempt == 1 and job.queue == qname
    assert job.deadline is not None and job.deadline > job.created_at
    assert job.config["key"] == "a"
    assert q.extend(job, ms=120000) >= job.deadline
    q.ack(job, result={"score": 97})
    assert json.loads(q.result(job.key) or b"") == {"score": 97}
    with pytest.raises(LeaseLostError) as ei:
        q.ack(job)
    assert "lease not held" in str(ei.value) and not isinstance(ei.value, JobCancelledError)
    b = q.pop(lease_ms=60000)
    assert b is not None
    out = q.nack(b, delay_ms=0)
    assert out.outcome == "retry" and out.attempts == 1 and out.retry_at is not None
    b2 = q.pop(lease_ms=60000)
    assert b2 is not None and b2.key == b.key and b2.attempt == 2
    q.ack(b2.key, b2.lease, result=b"raw bytes")
    assert q.result(b2.key) == b"raw bytes"
    assert q.pop() is None
    assert q.pop_many(5) == []


def test_pop_many_and_at_most_once(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    for i in range(5):
        q.enqueue(cfg(f"k{i}"))
    jobs = q.pop_many(3, lease_ms=60000)
    assert len(jobs) == 3 and all(j.lease for j in jobs)
    gone = q.pop(lease_ms=0)
    assert gone is not None and gone.lease is None
    st = q.stats()
    assert (st.queued, st.leased, st.order) == (1, 3, "lifo")
    assert st.wait_all.count == 1 and st.wait_released.count >= 0


def test_cancel_while_running(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("a"))
    job = q.pop(lease_ms=60000)
    assert job is not None
    st = q.status(job.key)
    assert st is not None and st.state == "leased" and st.leases[0].lease == job.lease
    assert q.delete(job.key)
    with pytest.raises(JobCancelledError):
        q.extend(job, ms=1000)
    with pytest.raises(LeaseLostError):  # a cancelled lease is a lost lease too
        q.ack(job)


def test_dead_letters(server: Server, r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    admin = server.client()
    admin.config_set("orca.max-attempts", 1)
    try:
        q.enqueue(cfg("a"))
        job = q.pop(lease_ms=60000)
        assert job is not None
        assert q.nack(job).outcome == "dead"
    finally:
        admin.config_set("orca.max-attempts", 5)
    dead = q.dead()
    assert [d.key for d in dead] == [job.key] and dead[0].state == "dead"
    assert dead[0].cause == "failed" and dead[0].died_at
    assert [d.key for d in q.iter_dead(page_size=1)] == [job.key]
    back = q.requeue_dead(job.key)
    assert back.immediate
    with pytest.raises(NoSuchJobError):
        q.requeue_dead(job.key)
    assert q.purge_dead() == 0


def test_settings_tick_check(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    assert q.settings().order == "lifo"
    s = q.settings("fifo")
    assert (s.order, s.jobs, s.collations) == ("fifo", 0, 0)
    assert q.stats().order == "fifo"
    t = q.tick()
    assert (t.died, t.expired, t.retried) == (0, 0, 0)
    q.check()
    with pytest.raises(InvalidArgumentError):
        q.settings("random")


def test_errors_are_mapped(r: redis.Redis, server: Server, qname: str) -> None:
    q = Queue(r, qname)
    with pytest.raises(BadConfigError, match=r"no string field 'key'|invalid config JSON"):
        q.enqueue({"nokey": 1})
    with pytest.raises(BadConfigError, match="priority"):
        q.enqueue(cfg("a", priority=-1))
    with pytest.raises(BadConfigError, match="collation"):
        q.enqueue(cfg("a", collation={"type": "group", "id": "x"}))
    with pytest.raises(BadConfigError):
        q.enqueue("[1,2]")
    with pytest.raises(InvalidArgumentError, match="COUNT"):
        q.pop_many(0)
    r.set(qname + "-str", "x")
    with pytest.raises(WrongTypeError):
        Queue(r, qname + "-str").len()
    admin = server.client()
    admin.config_set("orca.max-queue-length", 1)
    try:
        q.enqueue(cfg("one"))
        with pytest.raises(QueueFullError):
            q.enqueue(cfg("two"))
    finally:
        admin.config_set("orca.max-queue-length", 10000000)
    # Every mapped error is still a redis-py ResponseError.
    with pytest.raises(redis.ResponseError):
        q.enqueue("{")
    assert issubclass(QueueFullError, OrcaError)


def test_enqueue_many_pipelines_and_reports_each(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    out = q.enqueue_many([cfg("a"), "not json", cfg("b")])
    assert isinstance(out[0], Job) and isinstance(out[2], Job)
    assert isinstance(out[1], BadConfigError)
    assert q.len() == 2


def test_decode_responses_client(server: Server, qname: str) -> None:
    q = Queue(server.client(decode_responses=True), qname)
    q.enqueue(cfg("a", note="ü"))
    job = q.pop(lease_ms=10000)
    assert job is not None and isinstance(job.payload, bytes)
    assert job.config["note"] == "ü"
    q.ack(job, result="done")
    assert q.result(job.key) == b'"done"'


@pytest.mark.parametrize("protocol", [2, 3])
def test_result_is_bytes_even_with_decode_responses(
    server: Server, qname: str, protocol: int
) -> None:
    """A result that is not UTF-8 reads back as the same bytes on a decoding client."""
    q = Queue(server.client(decode_responses=True, protocol=protocol), qname)
    q.enqueue(cfg("bin"))
    job = q.pop(lease_ms=10000)
    assert job is not None
    q.ack(job, result=b"\xff\x00\xfe")
    assert q.result(job.key) == b"\xff\x00\xfe"
    assert q.result("no-such-key") is None


def test_blocking_pop_needs_a_timeout_above_block(server: Server, qname: str) -> None:
    q = Queue(server.client(socket_timeout=1), qname)
    with pytest.raises(ValueError, match="socket_timeout"):
        q.pop(block_ms=2000)
    with pytest.raises(ValueError, match="socket_timeout"):
        q.pop(block_ms=0)
    assert Queue(server.client(socket_timeout=5), qname).pop(block_ms=50) is None

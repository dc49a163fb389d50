"""ORCA.ACK/NACK ... NEXT and ORCA.MPOP through the Queue API, under RESP2 and RESP3."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from conftest import Server, cfg

from orca_queue import (
    JobCancelledError,
    LeaseLostError,
    MackReply,
    OrcaError,
    Queue,
    ResultTooLargeError,
    blocking_client,
    mpop,
    mpop_many,
)


def test_ack_next_acks_and_leases_the_next(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    keys = [q.enqueue(cfg(f"k{i}", priority=i)).key for i in range(3)]
    job = q.pop(lease_ms=60_000)
    assert job is not None and job.key == keys[0]
    nxt = q.ack_next(job, result={"score": 1}, lease_ms=30_000)
    assert nxt is not None and nxt.key == keys[1] and nxt.queue == qname
    assert nxt.lease and nxt.attempt == 1 and nxt.config["key"] == "k1"
    assert nxt.deadline is not None and nxt.deadline - nxt.created_at >= 30_000
    assert q.result(job.key) == b'{"score":1}'
    st = q.status(nxt.key)
    assert st is not None and st.state == "leased" and st.leases[0].lease == nxt.lease
    last = q.ack_next(nxt)
    assert last is not None and last.key == keys[2]
    assert q.ack_next(last) is None  # nothing left: nil, never blocks
    assert q.stats().leased == 0


def test_ack_next_on_a_stale_lease_hands_out_nothing(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("a"))
    q.enqueue(cfg("b", priority=10))
    job = q.pop(lease_ms=60_000)
    assert job is not None
    q.ack(job)
    with pytest.raises(LeaseLostError):
        q.ack_next(job)
    assert q.len() == 1 and q.stats().leased == 0  # "b" is still queued


def test_nack_next(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("fails"))
    second = q.enqueue(cfg("next", priority=10))
    job = q.pop(lease_ms=60_000)
    assert job is not None
    nxt = q.nack_next(job, delay_ms=60_000, lease_ms=10_000)
    assert nxt is not None and nxt.key == second.key and nxt.queue == qname
    st = q.status(job.key)
    assert st is not None and st.state == "delayed"
    assert q.nack_next(nxt, delay_ms=60_000) is None


def test_ack_many_one_outcome_each_and_their_successors(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    keys = [q.enqueue(cfg(f"m{i}", priority=i)).key for i in range(8)]
    a, b, c, d = q.pop_many(4, lease_ms=60_000)
    q.ack(b)  # lost before the batch
    q.delete(c.key)  # cancelled while it ran
    got = q.ack_many([a, b, c, d], [{"s": 1}, "x", None, b"\x00\xff"], next=True, lease_ms=30_000)
    assert got.outcomes[0] is None and got.outcomes[3] is None
    assert isinstance(got.outcomes[1], LeaseLostError)
    assert not isinstance(got.outcomes[1], JobCancelledError)
    assert isinstance(got.outcomes[2], JobCancelledError)
    # One job per delivery given, whatever the outcomes.
    assert [j.key for j in got.jobs] == keys[4:]
    assert all(j.queue == qname and j.lease for j in got.jobs)
    assert all(j.deadline is not None and j.deadline - j.created_at >= 30_000 for j in got.jobs)
    assert q.result(a.key) == b'{"s":1}'
    assert q.result(d.key) == b"\x00\xff"
    # (key, lease) pairs work too; ttl 0 keeps no result.
    pairs = [(j.key, str(j.lease)) for j in got.jobs]
    again = q.ack_many(pairs, ["r"] * 4, ttl_ms=0)
    assert again == MackReply([None] * 4, [])
    assert q.result(pairs[0][0]) is None
    none = q.ack_many(got.jobs, next=True, count=3)
    assert none.jobs == [] and all(isinstance(o, LeaseLostError) for o in none.outcomes)
    with pytest.raises(ValueError):
        q.ack_many([])
    with pytest.raises(ValueError):
        q.ack_many(got.jobs, ["only one"])


def test_ack_many_mixed_results_all_or_nothing_in_order(r: redis.Redis, qname: str) -> None:
    q = Queue(r, qname)
    for i in range(6):
        q.enqueue(cfg(f"o{i}", priority=i))
    a, b, c = q.pop_many(3, lease_ms=60_000)
    # A result over the limit: refused before anything is acked (results go first).
    r.config_set("orca.max-payload-bytes", 10)
    try:
        with pytest.raises(ResultTooLargeError):
            q.ack_many([a, b, c], [None, "x" * 50, "ok"], next=True)
    finally:
        r.config_set("orca.max-payload-bytes", 4194304)
    assert q.stats().leased == 3
    # The same delivery twice: the first (with its result) acks, the repeat is refused.
    got = q.ack_many([a, a, b, b, c], [{"x": 1}, None, None, "late", None], next=True, count=1)
    assert [o is None for o in got.outcomes] == [True, False, True, False, True]
    assert all(isinstance(o, LeaseLostError) for o in got.outcomes if o is not None)
    assert len(got.jobs) == 1
    assert q.result(a.key) == b'{"x":1}'
    assert q.result(b.key) is None


def test_ack_many_next_beyond_max_pop_count_and_a_refused_second_command(
    r: redis.Redis, qname: str
) -> None:
    q = Queue(r, qname)
    for i in range(14):
        q.enqueue(cfg(f"p{i}", priority=i))
    popped = q.pop_many(12, lease_ms=60_000)
    r.config_set("orca.max-pop-count", 10)
    try:
        # Three with a result, nine without: two commands, NEXT with the second.
        got = q.ack_many(popped, [0, 1, 2] + [None] * 9, next=True, lease_ms=60_000)
        assert got.outcomes == [None] * 12
        assert len(got.jobs) == 2  # what is left, at most 10
        # The second command refused (a lease the clock cannot hold): the first's are acked.
        a, b = got.jobs
        bad = q.ack_many([a, b], ["r", None], next=True, lease_ms=2**53 - 1)
        assert bad.outcomes[0] is None
        assert isinstance(bad.outcomes[1], OrcaError)
        assert "time out of range" in str(bad.outcomes[1])
        assert bad.jobs == []
        st = q.status(b.key)
        assert st is not None and st.state == "leased"
    finally:
        r.config_set("orca.max-pop-count", 1000)


def test_mpop_takes_from_the_first_queue_with_jobs(r: redis.Redis, qname: str) -> None:
    qa, qb, qc = (Queue(r, f"{{{qname}}}:{x}") for x in "abc")
    assert mpop([qa, qb, qc], lease_ms=1000) is None
    assert mpop_many([qa, qb], 3) == []
    qc.enqueue(cfg("c1"))
    qb.enqueue(cfg("b1"))
    qb.enqueue(cfg("b2", priority=5))
    job = mpop([qa, qb, qc], lease_ms=60_000)
    assert job is not None and job.queue == qb.name and job.config["key"] == "b1"
    many = mpop_many([qa, qb, qc], 5, lease_ms=60_000)
    assert [(j.queue, j.config["key"]) for j in many] == [(qb.name, "b2")]  # one queue per call
    many = mpop_many([qa, qb, qc], 5, lease_ms=60_000)
    assert [(j.queue, j.config["key"]) for j in many] == [(qc.name, "c1")]
    qb.ack(job)  # the job names its queue, so acking goes to the right one
    with pytest.raises(ValueError, match="same Redis client"):
        mpop([qa, Queue(redis.Redis(), "x")])
    with pytest.raises(ValueError):
        mpop([])


def test_blocking_mpop_wakes_on_any_queue(server: Server, qname: str) -> None:
    base = server.client()
    with pytest.raises(ValueError, match="socket_timeout"):
        mpop([Queue(server.client(socket_timeout=1), qname)], block_ms=2000)
    blocker = blocking_client(base, 10_000)
    queues = [Queue(blocker, f"{qname}-{i}") for i in range(3)]
    got: list[object] = []

    def waiter() -> None:
        got.append(mpop(queues, lease_ms=60_000, block_ms=10_000))

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    Queue(base, f"{qname}-2").enqueue(cfg("late"))  # the last queue wakes it
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 2
    (job,) = got
    assert job is not None and getattr(job, "queue", None) == f"{qname}-2"

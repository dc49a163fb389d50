"""The callback notifier (sync and asyncio) against a real local HTTP server that fails,
stalls, goes away and recovers: every callback is delivered or becomes a dead letter, none is
dropped; Retry-After is honoured; a stop lets the POSTs in flight finish."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis
from callback_server import CallbackServer, Reply
from conftest import Server
from workers import Running, wait_for

from orca_queue import Job, NackOutcome, Queue
from orca_queue import aio as orca_aio
from orca_queue.aio.notifier import Notifier as AsyncNotifier
from orca_queue.notifier import CallbackFailed, Notifier, callback_request, retry_after_ms


@pytest.fixture(scope="module")
def fast_retries() -> Iterator[Server]:
    """A server whose retries come quickly and die after 4 attempts."""
    s = Server("retry-base", "100", "retry-cap", "400", "max-attempts", "4")
    yield s
    s.stop()


@pytest.fixture
def rr(fast_retries: Server) -> Iterator[redis.Redis]:
    c = fast_retries.client()
    yield c
    c.close()


def start(runs: list[Running], q: Queue, **kw: object) -> Running:
    kw.setdefault("handle_signals", False)
    kw.setdefault("timeout_ms", 2_000)
    kw.setdefault("lease_ms", 10_000)
    kw.setdefault("block_ms", 200)
    run = Running(Notifier(q, **kw))  # type: ignore[arg-type]
    runs.append(run)
    return run


def callback(http: CallbackServer, path: str, **body: object) -> dict[str, object]:
    return {"key": path, "response_url": http.url(path), "body": body}


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    assert retry_after_ms("3") == 3000
    assert retry_after_ms(" 0 ") == 0
    assert retry_after_ms(None) is None
    assert retry_after_ms("soon") is None
    assert retry_after_ms("-1") is None
    now = 1_700_000_000.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 5))
    assert retry_after_ms(date, now) == 5000
    past = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now - 50))
    assert retry_after_ms(past, now) == 0
    assert retry_after_ms("999999999") == 86_400_000


def test_delivers_each_callback_with_its_body_and_acks_with_the_status(
    rr: redis.Redis, qname: str, started: list[Running]
) -> None:
    http = CallbackServer(lambda path, n: Reply(201 if path == "/b" else 200))
    q = Queue(rr, qname)
    q.enqueue(callback(http, "/a", verdict="accepted", score=97))
    whole = {"key": "/b", "response_url": http.url("/b"), "score": 40}
    q.enqueue(whole)
    done: list[str] = []
    start(
        started,
        q,
        headers={"x-secret": "s3"},
        on_completed=lambda j, r: done.append(j.config["key"]),
    )
    wait_for(lambda: len(done) == 2)
    (a,) = http.posts("/a")
    assert a.body == {"verdict": "accepted", "score": 97}
    assert a.headers["content-type"] == "application/json" and a.headers["x-secret"] == "s3"
    (b,) = http.posts("/b")
    assert b.body == whole  # no "body": the whole config
    st = q.stats()
    assert (st.queued, st.leased, st.delayed, st.dead) == (0, 0, 0, 0)
    http.stop()


def test_503_with_retry_after_is_retried_when_asked_then_delivered(
    rr: redis.Redis, qname: str, started: list[Running]
) -> None:
    http = CallbackServer(
        lambda path, n: Reply(503, {"Retry-After": "1"}) if n == 0 else Reply(200)
    )
    q = Queue(rr, qname)
    q.enqueue(callback(http, "/r", v=1))
    failed: list[tuple[BaseException, NackOutcome | None]] = []
    done: list[Job] = []
    start(
        started,
        q,
        on_failed=lambda j, e, o: failed.append((e, o)),
        on_completed=lambda j, r: done.append(j),
    )
    wait_for(lambda: len(done) == 1)
    first, second = http.posts("/r")
    # The server's backoff is 100 ms; the receiver asked for a second.
    assert second.at - first.at >= 0.95
    (exc, outcome) = failed[0]
    assert isinstance(exc, CallbackFailed) and exc.status == 503 and exc.delay_ms == 1000
    assert outcome is not None and outcome.outcome == "retry"
    http.stop()


def test_429_without_retry_after_and_a_stall_use_the_queues_backoff(
    rr: redis.Redis, qname: str, started: list[Running]
) -> None:
    replies = {0: Reply(429), 1: Reply(200, stall_s=1.5)}
    http = CallbackServer(lambda path, n: replies.get(n, Reply(200)))
    q = Queue(rr, qname)
    q.enqueue(callback(http, "/s"))
    errors: list[str] = []
    done: list[Job] = []
    start(
        started,
        q,
        timeout_ms=500,
        on_failed=lambda j, e, o: errors.append(str(e)),
        on_completed=lambda j, r: done.append(j),
    )
    wait_for(lambda: len(done) == 1)
    assert errors == ["HTTP 429", "timeout after 500 ms"]
    assert len(http.posts("/s")) == 3
    http.stop()


def test_a_receiver_that_goes_away_and_recovers_gets_every_callback_none_dropped(
    rr: redis.Redis, qname: str, started: list[Running]
) -> None:
    http = CallbackServer()
    http.stop()  # down from the start: connections refused
    q = Queue(rr, qname)
    paths = [f"/c{i}" for i in range(20)]
    for p in paths:
        q.enqueue(callback(http, p, n=p))
    done: list[str] = []
    errors: list[str] = []
    start(
        started,
        q,
        concurrency=4,
        on_completed=lambda j, r: done.append(j.config["key"]),
        on_failed=lambda j, e, o: errors.append(str(e)),
    )
    wait_for(lambda: len(errors) >= 20)
    assert all(e.startswith("connection error") for e in errors)
    http.start()  # back on the same port, before the 4th attempt of any
    wait_for(lambda: len(done) == 20)
    assert sorted(done) == sorted(paths)
    for p in paths:
        assert [r.body for r in http.posts(p)] == [{"n": p}]
    st = q.stats()
    assert (st.queued, st.leased, st.delayed, st.dead) == (0, 0, 0, 0)
    http.stop()


def test_a_receiver_that_keeps_failing_leaves_a_dead_letter_with_its_last_status(
    rr: redis.Redis, qname: str, started: list[Running]
) -> None:
    http = CallbackServer(lambda path, n: Reply(500 + n))
    q = Queue(rr, qname)
    key = q.enqueue(callback(http, "/dead")).key
    outcomes: list[str] = []
    start(
        started,
        q,
        on_failed=lambda j, e, o: outcomes.append(f"{e} {o.outcome if o else '-'}"),
    )
    wait_for(lambda: len(outcomes) == 4)
    assert outcomes == ["HTTP 500 retry", "HTTP 501 retry", "HTTP 502 retry", "HTTP 503 dead"]
    (dead,) = q.dead()
    assert dead.key == key and dead.attempts == 4
    # The last status goes with the dead letter where the server keeps NACK's error text.
    error = getattr(dead, "error", None)
    assert error is None or "HTTP 503" in error
    assert len(http.posts("/dead")) == 4
    http.stop()


def test_a_stop_lets_the_posts_in_flight_finish(
    rr: redis.Redis, qname: str, started: list[Running]
) -> None:
    http = CallbackServer(lambda path, n: Reply(200, stall_s=0.8))
    q = Queue(rr, qname)
    for i in range(3):
        q.enqueue(callback(http, f"/g{i}"))
    done: list[str] = []
    run = start(started, q, concurrency=3, on_completed=lambda j, r: done.append(j.config["key"]))
    wait_for(lambda: len(http.received) == 3)
    took = run.stop()
    assert sorted(done) == ["/g0", "/g1", "/g2"]
    assert took < 5
    st = q.stats()
    assert (st.queued, st.leased) == (0, 0)
    http.stop()


def test_a_config_without_a_response_url_is_never_dropped() -> None:
    for payload in (b'{"key":"x"}', b'{"key":"x","response_url":"ftp://h/x"}', b"[1]"):
        with pytest.raises(CallbackFailed):
            callback_request(Job(key="k", payload=payload))
    assert callback_request(Job(key="k", payload=b'{"key":"x","response_url":"http://h/x"}')) == (
        "http://h/x",
        {"key": "x", "response_url": "http://h/x"},
    )


def test_options_are_checked(rr: redis.Redis, qname: str) -> None:
    q = Queue(rr, qname)
    with pytest.raises(ValueError, match="timeout_ms"):
        Notifier(q, timeout_ms=0)
    with pytest.raises(ValueError, match="lease_ms"):
        Notifier(q, timeout_ms=5000, lease_ms=5000)


def test_the_asyncio_notifier_delivers_retries_and_stops(fast_retries: Server, qname: str) -> None:
    http = CallbackServer(lambda path, n: Reply(503, {"Retry-After": "0"}) if n < 2 else Reply(200))

    async def main() -> tuple[list[str], list[str]]:
        client = redis.asyncio.Redis(port=fast_retries.port)
        q = orca_aio.Queue(client, qname)
        for i in range(5):
            await q.enqueue(callback(http, f"/x{i}", i=i))
        done: list[str] = []
        errors: list[str] = []
        n = AsyncNotifier(
            q,
            timeout_ms=2000,
            lease_ms=10_000,
            block_ms=200,
            handle_signals=False,
            on_completed=lambda j, r: done.append(j.config["key"]),
            on_failed=lambda j, e, o: errors.append(str(e)),
        )
        task = asyncio.create_task(n.run())
        for _ in range(300):
            if len(done) == 5:
                break
            await asyncio.sleep(0.05)
        n.stop()
        await task
        await client.aclose()
        return done, errors

    done, errors = asyncio.run(main())
    assert sorted(done) == [f"/x{i}" for i in range(5)]
    assert errors == ["HTTP 503"] * 10
    for i in range(5):
        assert [r.body for r in http.posts(f"/x{i}")] == [{"i": i}] * 3
    http.stop()

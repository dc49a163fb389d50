"""The thread worker against a real server: ack with results, nack, heartbeats, lost leases,
graceful stop with hand-back, prompt wake-up, and the blocking connection's safety."""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis
from conftest import Server, cfg
from workers import Running, calls, start, wait_for

from orca_queue import (
    Job,
    JobFailed,
    NackOutcome,
    Queue,
    ResultTooLargeError,
    Worker,
    blocking_client,
)


def test_acks_with_results_and_hooks(r: redis.Redis, qname: str, started: list[Running]) -> None:
    q = Queue(r, qname)
    keys = [q.enqueue(cfg(f"k{i}", n=i)).key for i in range(60)]
    done: list[str] = []
    run = start(
        started,
        q,
        lambda job: {"double": job.config["n"] * 2},
        concurrency=4,
        on_completed=lambda job, res: done.append(job.key),
    )
    wait_for(lambda: len(done) == 60)
    assert sorted(done) == sorted(keys)
    for i, k in enumerate(keys):
        assert json.loads(q.result(k) or b"") == {"double": 2 * i}
    st = q.stats()
    assert (st.queued, st.leased) == (0, 0)
    run.stop()
    assert run.worker.counts["completed"] == 60


def test_failures_nack_then_retry(
    server: Server, r: redis.Redis, qname: str, started: list[Running]
) -> None:
    q = Queue(r, qname)
    key = q.enqueue(cfg("flaky")).key
    failures: list[tuple[str, NackOutcome | None]] = []
    seen: list[int] = []

    def handler(job: Job) -> bytes:
        seen.append(job.attempt or 0)
        if job.attempt == 1:
            raise RuntimeError("compiler crashed")
        return b"ok"

    start(
        started,
        q,
        handler,
        nack_delay_ms=0,
        on_failed=lambda job, exc, out: failures.append((str(exc), out)),
    )
    wait_for(lambda: q.result(key) == b"ok")
    assert seen == [1, 2]
    assert failures[0][0] == "compiler crashed"
    assert failures[0][1] is not None and failures[0][1].outcome == "retry"


def test_expected_failures_log_one_line(
    r: redis.Redis, qname: str, started: list[Running], caplog: pytest.LogCaptureFixture
) -> None:
    q = Queue(r, qname)
    q.enqueue(cfg("expected"))
    q.enqueue(cfg("unexpected"))
    failures: list[str] = []

    def handler(job: Job) -> None:
        if job.config["key"] == "expected":
            raise JobFailed("web app said 503")
        raise RuntimeError("bug in the handler")

    start(
        started,
        q,
        handler,
        nack_delay_ms=60_000,
        on_failed=lambda job, exc, out: failures.append(str(exc)),
    )
    wait_for(lambda: len(failures) == 2)
    lines = {
        m.split("): ", 1)[1].split("\n", 1)[0]: m
        for m in (r.getMessage() for r in caplog.records)
        if "failed (queue" in m
    }
    assert "\n" not in lines["JobFailed: web app said 503"]
    assert "Traceback" in lines["RuntimeError: bug in the handler"]


def test_none_keeps_no_result(r: redis.Redis, qname: str, started: list[Running]) -> None:
    q = Queue(r, qname)
    key = q.enqueue(cfg("none")).key
    run = start(started, q, lambda job: None)
    wait_for(lambda: run.worker.counts["completed"] == 1)
    assert q.result(key) is None
    st = q.stats()
    assert st.results == 0


def test_heartbeats_keep_a_long_job(r: redis.Redis, qname: str, started: list[Running]) -> None:
    q = Queue(r, qname)
    key = q.enqueue(cfg("long")).key
    calls: list[str] = []

    def handler(job: Job) -> str:
        calls.append(job.lease or "")
        time.sleep(3.0)  # three leases long
        return "finished"

    start(started, q, handler, lease_ms=1000, concurrency=2)
    wait_for(lambda: q.result(key) is not None, timeout=20)
    assert len(calls) == 1  # never handed out a second time
    assert q.result(key) == b'"finished"'


def test_lost_lease_drops_the_result(r: redis.Redis, qname: str, started: list[Running]) -> None:
    q = Queue(r, qname)
    key = q.enqueue(cfg("doomed")).key
    began = threading.Event()
    release = threading.Event()
    lost: list[str] = []

    def handler(job: Job) -> str:
        began.set()
        release.wait(20)
        return "late"

    run = start(started, q, handler, lease_ms=1500, on_lost=lambda job, why: lost.append(why))
    assert began.wait(10)
    q.delete(key)  # cancels the running lease
    wait_for(lambda: lost == ["job was cancelled"])  # seen by a heartbeat
    release.set()
    wait_for(lambda: run.worker.counts["lost"] == 1)
    time.sleep(0.2)
    assert q.result(key) is None and run.worker.counts["completed"] == 0


def test_stop_hands_back_unfinished_jobs(
    r: redis.Redis, qname: str, started: list[Running]
) -> None:
    q = Queue(r, qname)
    fast = q.enqueue(cfg("fast", collation={"type": "user", "id": "1"}, priority=0)).key
    slow = q.enqueue(cfg("slow", collation={"type": "user", "id": "2"}, priority=10)).key
    created = {k: (q.status(k) or Job(k)).created_at for k in (fast, slow)}
    release = threading.Event()
    handled: list[str] = []

    def handler(job: Job) -> str:
        handled.append(job.key)
        if job.key == slow:
            release.wait(30)
        return "ok"

    run = start(started, q, handler, concurrency=2, grace_ms=300)
    wait_for(lambda: len(handled) == 2)
    elapsed = run.stop()
    assert 0.25 < elapsed < 5
    release.set()
    assert q.result(fast) == b'"ok"'
    st = q.status(slow)
    assert st is not None and st.state == "queued" and st.immediate
    assert st.created_at == created[slow] and st.leases == []  # old lease superseded, dropped
    assert run.worker.counts["handed_back"] == 1
    time.sleep(0.2)
    assert q.result(slow) is None  # the late result is dropped


def test_stop_wakes_a_blocking_pop_at_once(
    r: redis.Redis, qname: str, started: list[Running]
) -> None:
    q = Queue(r, qname)
    run = start(started, q, lambda job: None, block_ms=30000)
    time.sleep(0.5)  # now blocked in ORCA.POP ... BLOCK 30000
    assert run.stop() < 2


def test_stop_is_not_held_up_by_a_slow_unblock(
    r: redis.Redis, qname: str, started: list[Running]
) -> None:
    """Against a server going away, CLIENT UNBLOCK retries for seconds while the blocking pop
    has already failed: stop() goes on as soon as the pop is back."""
    q = Queue(r, qname)
    run = start(started, q, lambda job: None, block_ms=30000)
    w = run.worker

    def blocked() -> bool:
        ids = {int(c["id"]) for c in r.client_list() if c.get("cmd") == "orca.pop"}
        return w._blocker_id in ids

    wait_for(blocked)
    blocker = w._blocker_id
    w._unblock = lambda: time.sleep(5)  # type: ignore[method-assign]
    killer = threading.Timer(0.2, lambda: r.client_kill_filter(_id=str(blocker)))
    killer.start()
    took = run.stop()
    killer.join()
    assert took < 2


def test_blocked_worker_wakes_on_enqueue(
    r: redis.Redis, qname: str, started: list[Running]
) -> None:
    q = Queue(r, qname)
    got: list[float] = []
    start(started, q, lambda job: got.append(time.monotonic()), block_ms=30000)
    time.sleep(0.3)
    t0 = time.monotonic()
    q.enqueue(cfg("wake"))
    wait_for(lambda: bool(got))
    assert got[0] - t0 < 1.0


def test_several_queues(r: redis.Redis, qname: str, started: list[Running]) -> None:
    qa, qb = Queue(r, qname + "-a"), Queue(r, qname + "-b")
    done: list[str | None] = []
    start(started, [qa, qb], lambda job: job.queue, on_completed=lambda job, res: done.append(res))
    qb.enqueue(cfg("b1"))
    wait_for(lambda: done == [qb.name])
    qa.enqueue(cfg("a1"))
    wait_for(lambda: len(done) == 2)
    assert done[1] == qa.name
    with pytest.raises(ValueError):
        Worker([qa, Queue(redis.Redis(), "other")], lambda job: None)


def test_blocking_connection_never_reissues_a_pop(server: Server, qname: str) -> None:
    """A blocking pop killed mid-wait must fail, not be re-sent on a new connection (which
    would lease the next job to a reader that has gone)."""
    base = server.client()  # redis-py's default retry policy
    blocker = blocking_client(base, 5000)
    q = Queue(blocker, qname)
    blocker_id = blocker.client_id()
    errors: list[BaseException] = []

    def pop() -> None:
        try:
            q.pop(lease_ms=60000, block_ms=5000)
        except redis.ConnectionError as e:
            errors.append(e)

    t = threading.Thread(target=pop)
    t.start()
    time.sleep(0.3)
    base.client_kill_filter(_id=str(blocker_id))
    t.join(10)
    assert errors, "the killed pop should have raised"
    Queue(base, qname).enqueue(cfg("after"))
    time.sleep(0.3)
    st = Queue(base, qname).status(Queue(base, qname).enqueue(cfg("after")).key)
    assert st is not None and st.state == "queued"  # nobody took it
    assert blocker.connection_pool.connection_kwargs["socket_timeout"] > 5


def test_unserializable_result_is_a_failure(
    r: redis.Redis, qname: str, started: list[Running]
) -> None:
    q = Queue(r, qname)
    key = q.enqueue(cfg("odd")).key
    failed: list[str] = []
    start(
        started,
        q,
        lambda job: {"when": object()},
        nack_delay_ms=60000,
        on_failed=lambda job, exc, out: failed.append(str(exc)),
    )
    wait_for(lambda: bool(failed))
    assert "not JSON-serializable" in failed[0]
    st = q.status(key)
    assert st is not None and st.state == "delayed"  # nacked, waiting for its retry


def test_blocks_instead_of_polling_an_empty_queue(started: list[Running]) -> None:
    own = Server()  # a server of its own: count one idle worker's pops
    try:
        r = own.client()
        start(started, Queue(r, "idle"), lambda job: None, concurrency=8, block_ms=5000)
        time.sleep(1.0)
        pops = calls(r, "orca.pop")
        assert 1 <= pops <= 4, f"ORCA.POP called {pops} times in 1 s"
        started[-1].stop()
    finally:
        own.stop()


@pytest.mark.parametrize("shape", ["ack-next", "plain-ack", "second-queue"])
def test_result_over_the_payload_limit_is_a_failure(shape: str, started: list[Running]) -> None:
    """The server refuses an ACK whose RESULT is over orca.max-payload-bytes: the worker
    NACKs the delivery (a failure, on_failed with the server's error) and goes on taking
    jobs, whether the ACK was ``ACK ... NEXT``, a plain ACK or one pipelined with a pop."""
    own = Server()  # a server of its own: its payload limit is lowered
    try:
        r = own.client()
        r.config_set("orca.max-payload-bytes", 1000)
        q, other = Queue(r, "big"), Queue(r, "first")
        big = q.enqueue(cfg("big")).key
        small = q.enqueue(cfg("small", priority=10)).key
        failed: list[tuple[str, BaseException, NackOutcome | None]] = []
        run = start(
            started,
            [other, q] if shape == "second-queue" else q,
            lambda job: "x" * 5000 if job.config["key"] == "big" else "ok",
            lease_ms=60_000,
            nack_delay_ms=60_000,
            ack_next=shape != "plain-ack",
            on_failed=lambda job, exc, out: failed.append((job.key, exc, out)),
        )
        wait_for(lambda: bool(failed) and q.result(small) is not None, timeout=5)
        key, exc, out = failed[0]
        assert key == big and isinstance(exc, ResultTooLargeError)
        assert "orca.max-payload-bytes" in str(exc)
        assert out is not None and out.outcome == "retry"
        st = q.status(big)
        assert st is not None and st.state == "delayed"  # nacked, waiting for its retry
        assert q.result(small) == b'"ok"'
        run.stop()
        assert run.worker.counts == {"completed": 1, "failed": 1, "lost": 0, "handed_back": 0}
    finally:
        own.stop()


def test_a_base_exception_from_a_handler_is_a_failure(
    r: redis.Redis, qname: str, started: list[Running]
) -> None:
    """A handler raising a BaseException that is not an Exception (here GeneratorExit) fails
    the delivery like any exception; the slot stays usable."""
    q = Queue(r, qname)
    odd = q.enqueue(cfg("odd")).key
    fine = q.enqueue(cfg("fine", priority=10)).key
    failed: list[BaseException] = []

    def handler(job: Job) -> str:
        if job.key == odd:
            raise GeneratorExit("odd")
        return "ok"

    run = start(
        started,
        q,
        handler,
        nack_delay_ms=60_000,
        on_failed=lambda job, exc, out: failed.append(exc),
    )
    wait_for(lambda: q.result(fine) is not None, timeout=5)
    assert len(failed) == 1 and isinstance(failed[0], GeneratorExit)
    st = q.status(odd)
    assert st is not None and st.state == "delayed"
    run.stop()
    assert run.worker.counts["failed"] == 1 and run.worker.counts["completed"] == 1


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_system_exit_in_a_handler_stops_the_worker_gracefully(
    r: redis.Redis, qname: str, exc_type: type[BaseException], caplog: pytest.LogCaptureFixture
) -> None:
    """SystemExit / KeyboardInterrupt from a handler: the delivery is NACKed as failed, the
    worker stops as on SIGTERM (the other running job finishes within the grace), and run()
    re-raises the exception."""
    q = Queue(r, qname)
    slow = q.enqueue(cfg("slow", priority=0)).key
    leaving = q.enqueue(cfg("leaving", priority=5)).key
    later = q.enqueue(cfg("later", priority=10)).key
    slow_began, release = threading.Event(), threading.Event()
    failed: list[tuple[str, BaseException]] = []

    def handler(job: Job) -> str:
        if job.key == slow:
            slow_began.set()
            assert release.wait(20)
            return "slow done"
        assert slow_began.wait(20)
        raise exc_type("bye")

    worker = Worker(
        q,
        handler,
        concurrency=2,
        grace_ms=10_000,
        nack_delay_ms=60_000,
        handle_signals=False,
        on_failed=lambda job, exc, out: failed.append((job.key, exc)),
    )
    raised: list[BaseException] = []

    def target() -> None:
        try:
            worker.run()
        except BaseException as e:
            raised.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    try:
        wait_for(lambda: bool(failed), timeout=5)
        assert failed[0][0] == leaving and isinstance(failed[0][1], exc_type)
        time.sleep(0.3)
        assert t.is_alive()  # waiting for the slow job, within the grace
        release.set()
        t.join(10)
        assert not t.is_alive()
    finally:
        release.set()
        worker.stop(now=True)
        t.join(10)
    assert len(raised) == 1 and isinstance(raised[0], exc_type)
    assert q.result(slow) == b'"slow done"'
    st = q.status(leaving)
    assert st is not None and st.state == "delayed"  # nacked
    st = q.status(later)
    assert st is not None and st.state == "queued" and st.leases == []  # never taken
    assert worker.counts == {"completed": 1, "failed": 1, "lost": 0, "handed_back": 0}
    logged = [m.getMessage() for m in caplog.records]
    assert any("failed (" in m and "Traceback" in m for m in logged)

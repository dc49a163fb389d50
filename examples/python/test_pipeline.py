"""The pipeline example end to end: a real redis-server with the module, a local HTTP server as
the web app, and the three stages' workers; then the same with a test worker killed mid-stage
(its job comes back when its lease expires, and every verdict arrives exactly once)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))
sys.path.insert(0, str(Path(__file__).parent))

from callback_server import CallbackServer, Reply  # noqa: E402
from conftest import Server  # noqa: E402
from pipeline import stages, workers  # noqa: E402
from workers import wait_for as wait  # noqa: E402

SOURCE = "def add(a, b):\n    return a + b\n"
TESTS = [{"call": "add(1, 2)", "expect": 3}, {"call": "add(-1, 1)", "expect": 0}]


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


def submission(http: CallbackServer, i: int, source: str = SOURCE) -> dict[str, object]:
    return {
        "key": f"sub-{i}",
        "response_url": http.url(f"/cb/{i}"),
        "source": source,
        "tests": TESTS,
    }


def test_submissions_flow_through_the_stages_to_their_callbacks(server: Server) -> None:
    # The web app is down for the first callback of sub-1: it is retried.
    http = CallbackServer(lambda path, n: Reply(503) if path == "/cb/1" and n == 0 else Reply(200))
    r = server.client()
    compile_q, test_q, callbacks = stages(r, "cs2500")
    compile_q.enqueue(submission(http, 1))
    compile_q.enqueue(submission(http, 2, "def add(a, b):\n    return a + b if a > 0 else 1\n"))
    compile_q.enqueue(submission(http, 3, "def add(a, b)\n    return a + b\n"))
    ws = workers(r, "cs2500", handle_signals=False, block_ms=200, lease_ms=10_000)
    threads = [threading.Thread(target=w.run, daemon=True) for w in ws]
    for t in threads:
        t.start()
    try:
        wait(lambda: all(http.posts(f"/cb/{i}") for i in (2, 3)) and len(http.posts("/cb/1")) == 2)
    finally:
        for w in ws:
            w.stop()
        for t in threads:
            t.join(20)
    verdicts = {i: http.posts(f"/cb/{i}")[-1].body for i in (1, 2, 3)}
    assert verdicts[1] == {"key": "sub-1", "verdict": "accepted", "passed": 2, "total": 2}
    assert verdicts[2] == {"key": "sub-2", "verdict": "wrong-answer", "passed": 1, "total": 2}
    assert verdicts[3]["verdict"] == "compile-error" and "line 1" in str(verdicts[3]["error"])
    for q in (compile_q, test_q, callbacks):
        st = q.stats()
        assert (st.queued, st.leased, st.delayed, st.dead) == (0, 0, 0, 0), q.name
        q.check()
    http.stop()


def test_a_test_worker_that_dies_mid_stage_loses_nothing(server: Server) -> None:
    http = CallbackServer()
    r = server.client()
    compile_q, test_q, _ = stages(r, "cs3500")
    for i in range(10):
        compile_q.enqueue(submission(http, i))
    ws = workers(r, "cs3500", handle_signals=False, block_ms=200, lease_ms=10_000)
    compile_w, test_w, notifier = ws
    t_compile = threading.Thread(target=compile_w.run, daemon=True)
    t_compile.start()
    wait(lambda: test_q.len() == 10)
    compile_w.stop()
    t_compile.join(20)
    held = test_q.pop_many(3, lease_ms=500)  # a worker that dies with these
    assert len(held) == 3
    threads = [threading.Thread(target=w.run, daemon=True) for w in (test_w, notifier)]
    for t in threads:
        t.start()
    try:
        wait(lambda: all(http.posts(f"/cb/{i}") for i in range(10)), timeout=30)
        time.sleep(0.5)
    finally:
        test_w.stop()
        notifier.stop()
        for t in threads:
            t.join(20)
    for i in range(10):
        assert len(http.posts(f"/cb/{i}")) == 1, i
    http.stop()

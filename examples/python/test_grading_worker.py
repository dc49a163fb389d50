"""The grading worker example end to end: a real redis-server with the module, a local HTTP
server as the web app's response_url, and the worker running real subprocesses."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))
sys.path.insert(0, str(Path(__file__).parent))

from conftest import Server  # noqa: E402
from grading_worker import grade  # noqa: E402

from orca_queue import Queue, Worker, config_orca_key  # noqa: E402


class WebApp:
    """Collects the POSTed results; answers 500 to the first POST of keys in ``fail_once``."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.fail_once: set[str] = set()
        app = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if body["key"] in app.fail_once:
                    app.fail_once.discard(body["key"])
                    self.send_response(500)
                else:
                    app.posts.append(body)
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/results"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def env() -> Iterator[tuple[Server, WebApp]]:
    server, web = Server(), WebApp()
    yield server, web
    web.close()
    server.stop()


PY = sys.executable


def test_grades_jobs_and_posts_results(
    env: tuple[Server, WebApp], caplog: pytest.LogCaptureFixture
) -> None:
    server, web = env
    q = Queue(server.client(), "grading")
    jobs = {
        "pass": [
            {"cmd": [PY, "-c", "open('out.txt','w').write('97')"], "on_complete": 1},
            {"cmd": [PY, "-c", "print(open('$BUILD/out.txt').read())"], "on_complete": "output"},
        ],
        "compile-error": [
            {"cmd": [PY, "-c", "import sys; sys.exit(3)"], "on_fail": "abort"},
            {"cmd": [PY, "-c", "print('never')"]},
        ],
        "timeout": [{"cmd": [PY, "-c", "import time; time.sleep(30)"], "timeout": 0.5}],
        "flaky-web": [{"cmd": [PY, "-c", "print('ok')"]}],
    }
    web.fail_once.add("flaky-web")
    for key, script in jobs.items():
        q.enqueue({"key": key, "response_url": web.url, "script": script})
    failed: list[str] = []
    worker = Worker(
        q,
        grade,
        concurrency=2,
        lease_ms=5000,
        nack_delay_ms=0,
        handle_signals=False,
        on_failed=lambda job, exc, out: failed.append(str(exc)),
    )
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while len({p["key"] for p in web.posts}) < len(jobs):
        assert time.monotonic() < deadline, f"posted so far: {web.posts}"
        time.sleep(0.05)
    worker.stop()
    t.join(10)

    by_key = {p["key"]: p for p in web.posts}
    assert len(web.posts) == len(jobs)  # each result POSTed once (the 500 was retried)
    assert by_key["pass"]["output"].strip() == "97" and by_key["pass"]["errors"] == []
    assert by_key["compile-error"]["output"] is None
    assert "exit status 3" in by_key["compile-error"]["errors"][0]
    assert len(by_key["compile-error"]["steps"]) == 1
    assert "timed out" in by_key["timeout"]["errors"][0]
    assert by_key["flaky-web"]["attempt"] == 2 and by_key["flaky-web"]["output"].strip() == "ok"
    assert len(failed) == 1 and "HTTP Error 500" in failed[0]
    # The failed POST is expected: one log line, no traceback.
    logged = [r.getMessage() for r in caplog.records if "failed (queue" in r.getMessage()]
    assert len(logged) == 1 and "; retry): PostError: POST " in logged[0], logged
    assert "\n" not in logged[0] and "Traceback" not in logged[0]
    # The ACK kept each result in the queue as well.
    for key in jobs:
        kept = q.result(config_orca_key({"key": key, "response_url": web.url}))
        assert kept is not None and json.loads(kept)["key"] == key
    st = q.stats()
    assert (st.queued, st.leased, st.delayed, st.dead) == (0, 0, 0, 0)


def test_serves_several_queues_in_order(env: tuple[Server, WebApp]) -> None:
    server, web = env
    r = server.client()
    urgent, normal = Queue(r, "{grading}:urgent"), Queue(r, "{grading}:normal")
    script = [{"cmd": [PY, "-c", "print('ok')"]}]
    for i in range(2):
        normal.enqueue({"key": f"n{i}", "response_url": web.url, "script": script})
        urgent.enqueue({"key": f"u{i}", "response_url": web.url, "script": script})
    worker = Worker([urgent, normal], grade, concurrency=1, handle_signals=False)
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while len(web.posts) < 4:
        assert time.monotonic() < deadline, f"posted so far: {web.posts}"
        time.sleep(0.05)
    worker.stop()
    t.join(10)
    assert [p["key"] for p in web.posts] == ["u0", "u1", "n0", "n1"]

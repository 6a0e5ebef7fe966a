"""``arroyo cluster``'s readiness watch against a scripted api: it says why the cluster is not
ready while it waits, and its ready line comes once the status says ready, never before."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from arroyo.testing.ports import free_port
from arroyo_cli.cluster import watch_readiness
from tests.waiting import wait_until

STARTING = {
    "ready": False,
    "services": {
        "controller": {"state": "ready", "detail": None},
        "compiler": {"state": "starting", "detail": "not answering"},
        "nodes": {"state": "ready", "detail": None, "count": 1},
    },
}
READY = {"ready": True, "services": {}}


@contextmanager
def scripted_api(answers: list[dict[str, Any]]) -> Iterator[tuple[str, list[bool]]]:
    """An HTTP server answering each GET with the next of ``answers`` (the last one for good),
    and the ``ready`` of each answer it gave."""
    given: list[bool] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers.pop(0) if len(answers) > 1 else answers[0]
            given.append(bool(body["ready"]))
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v1/status", given
    finally:
        server.shutdown()
        server.server_close()


def test_the_ready_line_comes_after_a_ready_status_and_reasons_before(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with scripted_api([STARTING] * 4 + [READY]) as (url, given):
        watch_readiness(url, threading.Event(), ready_line="at URL", poll_s=0.01, report_s=0)
    lines = capsys.readouterr().err.splitlines()
    assert given == [False] * 4 + [True]
    # Every look that was not ready said why; the ready line is the last, and the only one.
    *waiting, last = lines
    assert len(waiting) == 4
    assert all("not ready" in line for line in waiting), lines
    assert all("compiler starting (not answering)" in line for line in waiting), lines
    assert last.startswith("arroyo cluster: ready after "), lines
    assert last.endswith(": at URL"), lines


def test_an_api_that_does_not_answer_is_a_reason_and_stop_ends_the_watch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stop = threading.Event()
    watch = threading.Thread(
        target=watch_readiness,
        args=(f"http://127.0.0.1:{free_port()}/api/v1/status", stop),
        kwargs={"ready_line": "at URL", "poll_s": 0.01, "report_s": 0},
    )
    printed: list[str] = []

    def reason_printed() -> bool:
        printed.append(capsys.readouterr().err)
        return "the api is not answering" in "".join(printed)

    watch.start()
    try:
        wait_until("a reason", reason_printed, timeout=10, interval=0.01)
    finally:
        stop.set()
        watch.join(10)
    assert not watch.is_alive()
    assert "arroyo cluster: ready" not in "".join(printed) + capsys.readouterr().err

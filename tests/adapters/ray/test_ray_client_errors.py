"""The Ray client's calls fail with its own errors, never with a `requests` error.

An auth proxy in front of the dashboard answers 401/403, a dashboard without the job 404,
a broken one 500; a dashboard that is not there refuses the connection. Each arrives as
one `RayApiError` class naming the URL, so callers need not compare HTTP statuses.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bot.adapters.ray.client import (
    DashboardUnreachableError,
    RayApiError,
    RayDashboard,
    RayForbiddenError,
    RayNotFoundError,
)


class _Answers(BaseHTTPRequestHandler):
    """Answers every request under `/api/jobs/<status>` with that status and a traceback."""

    def do_POST(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        status = int(self.path.split("/")[3])
        body = b"Traceback (most recent call last):\nPermissionError: told so\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, RayForbiddenError),
        (403, RayForbiddenError),
        (404, RayNotFoundError),
        (500, RayApiError),
    ],
)
def test_each_status_arrives_as_its_own_error(
    proxy: str, status: int, expected: type[RayApiError]
) -> None:
    dashboard = RayDashboard(proxy, timeout=5)
    try:
        with pytest.raises(expected) as raised:
            dashboard.stop_job(str(status))
    finally:
        dashboard.close()
    assert type(raised.value) is expected
    assert str(raised.value) == (
        f"{proxy}/api/jobs/{status}/stop: HTTP {status}: PermissionError: told so"
    )


def test_a_missing_job_is_none(proxy: str) -> None:
    dashboard = RayDashboard(proxy, timeout=5)
    try:
        assert dashboard.get_job("404") is None
    finally:
        dashboard.close()


def test_a_dashboard_that_is_not_there_is_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dashboard = RayDashboard(f"http://127.0.0.1:{port}", timeout=2)
    try:
        with pytest.raises(DashboardUnreachableError, match="cannot connect to the Ray dashboard"):
            dashboard.version()
    finally:
        dashboard.close()

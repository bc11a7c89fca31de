"""The daemon's HTTP endpoint: /healthz (alive), /readyz (store and every enabled source
healthy) and /metrics (Prometheus), on one configurable port. Other routes (Slack's
HTTP mode) can be mounted by path."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bot.daemon.metrics import Metrics

Checks = Callable[[], dict[str, bool]]
# A mounted route takes (request target: path and query, headers, body) and returns
# (status, headers, body).
Route = Callable[[str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]

MAX_BODY = 1 << 20


class HealthServer:
    def __init__(
        self,
        host: str,
        port: int,
        metrics: Metrics,
        liveness: Checks,
        readiness: Checks,
    ) -> None:
        self.metrics = metrics
        self.liveness = liveness
        self.readiness = readiness
        self.routes: dict[str, Route] = {}
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def mount(self, path: str, route: Route) -> None:
        self.routes[path] = route

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="pitcrew-http", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    self._checks(server.liveness())
                elif path == "/readyz":
                    self._checks(server.readiness())
                elif path == "/metrics":
                    self._send(200, "text/plain; version=0.0.4", server.metrics.exposition())
                else:
                    self._send(404, "text/plain", b"not found\n")

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0]
                route = server.routes.get(path)
                if route is None:
                    self._send(404, "text/plain", b"not found\n")
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self._send(413, "text/plain", b"request too large\n")
                    return
                body = self.rfile.read(length)
                status, headers, payload = route(self.path, dict(self.headers.items()), body)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _checks(self, checks: dict[str, bool]) -> None:
                ok = all(checks.values())
                body = json.dumps({"ok": ok, "checks": checks}, sort_keys=True).encode() + b"\n"
                status = HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
                self._send(int(status), "application/json", body)

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

"""Ray-shaped dashboards on one loopback port, one per path prefix, for the discovery tests.

Not a mock of Ray's behaviour (tests/e2e/ray runs a real Ray head for that): a stand-in that
answers the few Jobs and State API reads the Ray source makes with JSON in Ray's shapes,
so a test can see which dashboard URL a discovered RayCluster was polled at. Each
RayCluster's URL is `http://127.0.0.1:<port>/<prefix>`, the prefix being what the test's
`url_template` puts after the port (e.g. `/{namespace}/{service}/{port}`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

VERSION = {"version": "4", "ray_version": "2.49.1", "ray_commit": "0" * 40}
EMPTY_STATE = {"result": True, "msg": "", "data": {"result": {"result": [], "total": 0}}}


def failed_job(
    submission_id: str, error: str = "ValueError: the reward model is missing"
) -> dict[str, Any]:
    """A submitted job that FAILED just now, as `GET /api/jobs/` lists it."""
    now = int(time.time() * 1000)
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/home/ray/train.py", line 12, in <module>\n'
        "    main()\n"
        f"{error}\n"
    )
    return {
        "type": "SUBMISSION",
        "job_id": None,
        "submission_id": submission_id,
        "status": "FAILED",
        "entrypoint": "python train.py",
        "message": "Job entrypoint command failed with exit code 1, last available logs "
        f"(truncated to 20,000 chars):\n{traceback}",
        "error_type": None,
        "start_time": now - 60_000,
        "end_time": now,
        "metadata": {},
        "runtime_env": {},
        "driver_exit_code": 1,
    }


class Dashboards:
    """The stand-in: `add(prefix, jobs)`, `url(prefix)`, and what was asked (`hits`)."""

    def __init__(self) -> None:
        self.jobs: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()
        dashboards = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = dashboards.answer(urlsplit(self.path).path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    def url(self, prefix: str) -> str:
        return f"http://127.0.0.1:{self.port}/{prefix.strip('/')}"

    def add(self, prefix: str, *jobs: dict[str, Any]) -> None:
        with self._lock:
            self.jobs.setdefault("/" + prefix.strip("/"), []).extend(jobs)

    def hits(self, prefix: str, path: str = "/api/jobs/") -> int:
        """How often `path` of the dashboard at `prefix` was asked for."""
        wanted = "/" + prefix.strip("/") + path
        with self._lock:
            return sum(1 for r in self.requests if r == wanted)

    def answer(self, path: str) -> tuple[int, Any]:
        with self._lock:
            self.requests.append(path)
            prefix = max((p for p in self.jobs if path.startswith(p + "/")), key=len, default="")
            if not prefix:
                return 404, {"error": f"no dashboard at {path}"}
            jobs = list(self.jobs[prefix])
        rest = path[len(prefix) :]
        if rest == "/api/version":
            return 200, VERSION
        if rest == "/api/jobs/":
            return 200, jobs
        if rest == "/api/v0/actors":
            return 200, EMPTY_STATE
        if rest.startswith("/api/jobs/"):
            key, _, tail = rest.removeprefix("/api/jobs/").partition("/")
            job = next((j for j in jobs if key in (j["submission_id"], j["job_id"])), None)
            if job is None:
                return 404, {"error": f"no job {key}"}
            if tail == "logs":
                return 200, {"logs": job["message"].partition("\n")[2]}
            return 200, job
        return 404, {"error": f"not served here: {rest}"}


def serve() -> Iterator[Dashboards]:
    dashboards = Dashboards()
    try:
        yield dashboards
    finally:
        dashboards.close()

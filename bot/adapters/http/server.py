"""The daemon's HTTP endpoint: /healthz (alive), /readyz (store and every enabled source
healthy) and /metrics (Prometheus), on one configurable port. Other routes (Slack's
HTTP mode, /ingest) are mounted by path.

Why this exists: this port faces the cluster (Slack's events arrive through the
Service), so it runs on uvicorn with Starlette, not a development server, and
holds its limits whatever a client sends: a deadline for the request head
(`bot.adapters.http.edge`) and for the body, a body cap counted on the bytes
read (no `Content-Length` trick gets past it, chunked bodies included), a
listen backlog that takes a burst of clicks, a cap on connections (beyond it
the connection that has waited longest for its request head is closed), a cap
on requests in flight, overall and per mounted path (503 beyond), and the
mounted routes run on a bounded pool of threads. The probes and /metrics are
outside every cap and have threads of their own: slow clients holding every
other slot cannot make the kubelet restart the pod (docs/operations.md).
Every refusal is a JSON `{"error": ...}` with a 4xx status, logged once
without the body; a private route's are counted in
`pitcrew_ingest_rejected_total{path, reason}`. A route mounted `private` (/ingest)
answers only loopback clients or a request bearing the configured token; one mounted
with its own `Credentials` (/alertmanager) answers only requests bearing them, as
Alertmanager's `http_config` sends them (a bearer token, or basic auth).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import ipaddress
import json
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.to_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute

from bot.adapters.http.edge import protocol_with
from bot.daemon.metrics import Metrics

Checks = Callable[[], dict[str, bool]]
Notes = Callable[[], dict[str, str]]


def _no_notes() -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class Probes:
    """What the probes ask the daemon: `/healthz` its `liveness` checks, `/readyz` its
    `readiness` checks and, beside them, its `notes` (which store, and how it answered)."""

    liveness: Checks = dict
    readiness: Checks = dict
    notes: Notes = _no_notes


# A mounted route takes (request target: path and query, headers with lower-case
# names, body) and returns (status, headers, body).
Route = Callable[[str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]

MAX_BODY = 1 << 20
LOOPBACK = ("127.0.0.0/8", "::1/128")
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

log = logging.getLogger("pitcrew.http")


@dataclass(frozen=True)
class Limits:
    """What one client can make the server hold."""

    max_body: int = MAX_BODY  # bytes read from one request body
    head_timeout: float = 10.0  # seconds to send a whole request head
    body_timeout: float = 10.0  # seconds to send the whole body
    backlog: int = 1024  # connections the kernel queues before accept
    max_connections: int = 1000  # open connections (503 beyond)
    max_in_flight: int = 128  # requests to mounted paths being read or answered (503 beyond)
    max_in_flight_per_path: int = 64  # of those, on one path (/ingest cannot starve clicks)
    workers: int = 16  # threads that run mounted routes
    probe_workers: int = 4  # threads that run /healthz and /readyz checks
    keep_alive: float = 5.0  # seconds an idle connection stays open


@dataclass(frozen=True)
class Credentials:
    """What a route takes from every client: `Authorization: Bearer TOKEN`, or (with a
    `username`) `Authorization: Basic` of that user and TOKEN as the password."""

    token: str
    username: str = ""

    def accepts(self, header: str) -> bool:
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer":
            return _same(given.strip(), self.token)
        if scheme.lower() == "basic" and self.username:
            try:
                pair = base64.b64decode(given.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return False
            user, _, password = pair.partition(":")
            return _same(user, self.username) & _same(password, self.token)
        return False


@dataclass(frozen=True)
class Mounted:
    route: Route
    private: bool
    credentials: Credentials | None = None


# Why a private route refused a request, by its status (pitcrew_ingest_rejected_total).
REJECTED = {
    400: "malformed",
    401: "bad_credentials",
    403: "unauthenticated",
    405: "method",
    408: "body_timeout",
    409: "replayed",
    413: "too_large",
    503: "unavailable",
}


class RefusedError(Exception):
    """A request answered with a 4xx or 503 before any route saw it."""

    def __init__(self, status: int, error: str, *, close: bool = False) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.close = close


class HealthServer:
    def __init__(
        self,
        host: str,
        port: int,
        metrics: Metrics,
        probes: Probes,
        *,
        limits: Limits | None = None,
        ingest_token: str = "",
        open_to: tuple[str, ...] = LOOPBACK,
    ) -> None:
        """Binds the port now (raising OSError if it cannot); serves from `start`.
        Private routes answer clients in the `open_to` networks, or `ingest_token`."""
        self.metrics = metrics
        self.probes = probes
        self.limits = limits or Limits()
        self.routes: dict[str, Mounted] = {}
        self._token = ingest_token
        self._open_to = tuple(ipaddress.ip_network(n) for n in open_to)
        self._socket = _listen(host, port, self.limits.backlog)
        self._in_flight = 0
        self._in_flight_on: dict[str, int] = {}
        self._limiter: anyio.CapacityLimiter | None = None
        self._probe_limiter: anyio.CapacityLimiter | None = None
        self._server = uvicorn.Server(self._config())
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    def mount(
        self,
        path: str,
        route: Route,
        *,
        private: bool = False,
        credentials: Credentials | None = None,
    ) -> None:
        """Serve POST `path` with `route`; `private`: loopback or the token only, or
        with `credentials`, those from every client (loopback included)."""
        self.routes[path] = Mounted(route, private or credentials is not None, credentials)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="pitcrew-http", daemon=True)
        self._thread.start()
        for _ in range(100):
            if self._server.started or not self._thread.is_alive():
                return
            threading.Event().wait(0.05)

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._socket.close()

    # -- serving ---------------------------------------------------------------------------

    def _config(self) -> uvicorn.Config:
        limits = self.limits
        app = Starlette(
            routes=[StarletteRoute("/{path:path}", self._endpoint, methods=METHODS)],
        )
        return uvicorn.Config(
            app,
            http=protocol_with(limits.head_timeout, limits.max_connections),
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            backlog=limits.backlog,
            timeout_keep_alive=int(max(limits.keep_alive, 1)),
            timeout_graceful_shutdown=3,
            h11_max_incomplete_event_size=64 * 1024,
        )

    def _serve(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._socket]))

    async def _endpoint(self, request: Request) -> Response:
        if self._limiter is None or self._probe_limiter is None:
            self._limiter = anyio.CapacityLimiter(self.limits.workers)
            self._probe_limiter = anyio.CapacityLimiter(self.limits.probe_workers)
        path = request.url.path
        try:
            if request.method in ("GET", "HEAD"):
                return await self._get(path)  # probes and metrics: outside every cap
            self._admit(path)
            self._in_flight += 1
            self._in_flight_on[path] = self._in_flight_on.get(path, 0) + 1
            try:
                return await self._answer(request)
            finally:
                self._in_flight -= 1
                self._in_flight_on[path] -= 1
        except RefusedError as refused:
            _log_refusal(request, refused.status, refused.error)
            self._count_refusal(path, refused.status)
            return _json(refused.status, {"error": refused.error}, close=refused.close)
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return _json(500, {"error": "internal error"})

    def _admit(self, path: str) -> None:
        """Room for one more request to a mounted path, or a 503 saying which cap."""
        if self._in_flight >= self.limits.max_in_flight:
            raise RefusedError(503, "too many requests in flight; retry later")
        if self._in_flight_on.get(path, 0) >= self.limits.max_in_flight_per_path:
            raise RefusedError(503, f"too many requests to {path} in flight; retry later")

    async def _answer(self, request: Request) -> Response:
        path, method = request.url.path, request.method
        mounted = self.routes.get(path)
        if mounted is None:
            raise RefusedError(404, f"no such endpoint: {path}")
        if method != "POST":
            raise RefusedError(405, f"{path} takes POST")
        if mounted.private:
            self._check_access(request, mounted.credentials)
        body = await self._body(request)
        target = path + (f"?{request.url.query}" if request.url.query else "")
        headers = {k.lower(): v for k, v in request.headers.items()}
        status, out, payload = await anyio.to_thread.run_sync(
            mounted.route, target, headers, body, limiter=self._limiter
        )
        if status >= 400:
            _log_refusal(request, status, _error_of(payload))
            self._count_refusal(path, status)
        return Response(payload, status_code=status, headers=out)

    def _count_refusal(self, path: str, status: int) -> None:
        mounted = self.routes.get(path)
        if mounted is not None and mounted.private:
            reason = REJECTED.get(status, str(status))
            self.metrics.ingest_rejected.labels(path=path, reason=reason).inc()

    async def _get(self, path: str) -> Response:
        if path == "/metrics":
            return Response(self.metrics.exposition(), media_type="text/plain; version=0.0.4")
        checks = {"/healthz": self.probes.liveness, "/readyz": self.probes.readiness}.get(path)
        if checks is None and path in self.routes:
            raise RefusedError(405, f"{path} takes POST")
        if checks is None:
            raise RefusedError(404, f"no such endpoint: {path}")
        results = await anyio.to_thread.run_sync(checks, limiter=self._probe_limiter)
        ok = all(results.values())
        answer: dict[str, object] = {"ok": ok, "checks": results}
        notes = self.probes.notes() if path == "/readyz" else {}
        if notes:
            answer["notes"] = notes
        return _json(200 if ok else 503, answer)

    def _open_to_client(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        address = getattr(address, "ipv4_mapped", None) or address
        return any(address in network for network in self._open_to)

    def _check_access(self, request: Request, credentials: Credentials | None) -> None:
        given = request.headers.get("authorization", "")
        path = request.url.path
        if credentials is not None:
            if not given:
                raise RefusedError(403, f"{path} needs the credentials this daemon was given")
            if not credentials.accepts(given):
                raise RefusedError(
                    401, f"{path}: the credentials are not the ones this daemon was given"
                )
            return
        if given:
            if self._token and hmac.compare_digest(
                given.encode(), f"Bearer {self._token}".encode()
            ):
                return
            raise RefusedError(401, "the bearer token is not the one this daemon was given")
        if not self._open_to_client(request.client.host if request.client else ""):
            raise RefusedError(403, f"{request.url.path} is for loopback clients or a bearer token")

    async def _body(self, request: Request) -> bytes:
        cap = self.limits.max_body
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise RefusedError(413, f"the body is over {cap} bytes", close=True)
        chunks: list[bytes] = []
        size = 0
        try:
            with anyio.fail_after(self.limits.body_timeout):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > cap:
                        raise RefusedError(413, f"the body is over {cap} bytes", close=True)
                    chunks.append(chunk)
        except TimeoutError:
            raise RefusedError(408, "the body did not arrive in time", close=True) from None
        return b"".join(chunks)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _listen(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _json(status: int, payload: dict[str, object], *, close: bool = False) -> Response:
    body = json.dumps(payload, sort_keys=True).encode() + b"\n"
    headers = {"Connection": "close"} if close else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _error_of(payload: bytes) -> str:
    try:
        found = json.loads(payload)
    except ValueError:
        return ""
    return str(found.get("error", "")) if isinstance(found, dict) else ""


def _log_refusal(request: Request, status: int, error: str) -> None:
    client = request.client.host if request.client else "?"
    level = logging.WARNING if status >= 500 else logging.INFO
    log.log(level, "%s %s from %s: %d %s", request.method, request.url.path, client, status, error)

"""The daemon's HTTP edge holds its limits whatever a client sends.

Real uvicorn on a loopback port, real sockets: a body cap no `Content-Length`
trick passes (`-1`, `abc`, a huge declared length, a chunked body with none),
deadlines for a request's head and body, held half-requests that pin no
thread and are closed, and `/ingest` answering loopback clients or a bearer
token only. Every refusal is a JSON error with its own status."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from bot.adapters.http.ingest import route as ingest_route
from bot.adapters.http.server import HealthServer, Limits, Probes
from bot.daemon.metrics import Metrics
from tests.support.http_edge import Accepted, raw, status_and_error

LIMITS = Limits(head_timeout=0.5, body_timeout=0.5, keep_alive=1.0)
LOG = b"Traceback (most recent call last):\nModuleNotFoundError: No module named 'vllm'\n"


def serve(**options: object) -> HealthServer:
    server = HealthServer(
        "127.0.0.1",
        0,
        Metrics(),
        Probes(lambda: {"pipeline": True}, lambda: {"store": True}),
        limits=LIMITS,
        **options,  # type: ignore[arg-type]
    )
    server.mount("/ingest", ingest_route(Accepted()), private=True)
    server.start()
    return server


@pytest.fixture
def server() -> Iterator[HealthServer]:
    running = serve()
    yield running
    running.stop()


def post_head(length: str | None, *, chunked: bool = False) -> bytes:
    lines = [b"POST /ingest?origin=x HTTP/1.1", b"Host: 127.0.0.1"]
    if length is not None:
        lines.append(b"Content-Length: " + length.encode())
    if chunked:
        lines.append(b"Transfer-Encoding: chunked")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def chunks(total: int, size: int = 64 * 1024) -> bytes:
    piece = b"%x\r\n" % size + b"a" * size + b"\r\n"
    return piece * (total // size) + b"0\r\n\r\n"


MALFORMED = "malformed HTTP request"
TOO_BIG = f"the body is over {1 << 20} bytes"


@pytest.mark.parametrize(
    ("request_bytes", "status", "error"),
    [
        (post_head("-1") + b"x" * 1000, 400, MALFORMED),
        (post_head("abc") + b"x" * 1000, 400, MALFORMED),
        (post_head(str(200 << 20)), 413, TOO_BIG),
        (post_head(None, chunked=True) + chunks(2 << 20), 413, TOO_BIG),
        (post_head("10", chunked=True) + chunks(2 << 20), 413, TOO_BIG),
        (b"GARBAGE\r\n\r\n", 400, MALFORMED),
        (
            b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
            404,
            "no such endpoint: /nowhere",
        ),
        (b"GET /ingest HTTP/1.1\r\nHost: x\r\n\r\n", 405, "/ingest takes POST"),
        (
            b"PUT /ingest HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
            405,
            "/ingest takes POST",
        ),
        (post_head("100") + b"only part of it", 408, "the body did not arrive in time"),
    ],
    ids=[
        "length-minus-one",
        "length-abc",
        "declared-200MB",
        "chunked-2MiB",
        "length-and-chunked",
        "garbage",
        "unknown-path",
        "get-ingest",
        "put-ingest",
        "slow-body",
    ],
)
def test_each_malformed_request_gets_its_own_json_4xx(
    server: HealthServer, request_bytes: bytes, status: int, error: str
) -> None:
    assert status_and_error(raw(server.port, request_bytes)) == (status, error)


def test_a_body_just_under_the_cap_is_taken(server: HealthServer) -> None:
    body = LOG + b"x" * ((1 << 20) - len(LOG) - 1) + b"\n"
    reply = raw(server.port, post_head(str(len(body))) + body)
    assert reply.startswith(b"HTTP/1.1 202 ")


def test_held_half_requests_pin_no_thread_and_are_closed(server: HealthServer) -> None:
    threads_before = threading.active_count()
    held = []
    try:
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(b"POST /ingest HTTP/1.1\r\nHost: x\r\nContent-Le")
            held.append(sock)
        started = time.monotonic()
        reply = raw(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 200 "), reply[:80]
        assert time.monotonic() - started < 2.0
        assert threading.active_count() <= threads_before + LIMITS.workers
        for sock in held:  # the head deadline (0.5 s) closes every one of them
            assert sock.recv(1024) == b""
    finally:
        for sock in held:
            sock.close()


def test_a_burst_of_connections_is_queued_not_reset(server: HealthServer) -> None:
    """The listen backlog takes 100 connections opened at once: each is answered."""
    barrier = threading.Barrier(100)
    statuses: list[int] = []

    def one() -> None:
        barrier.wait(timeout=10)
        reply = raw(server.port, b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        statuses.append(int(reply.split(b" ", 2)[1]) if reply else 0)

    workers = [threading.Thread(target=one) for _ in range(100)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert statuses == [200] * 100


def test_requests_beyond_the_in_flight_cap_get_503() -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow(
        target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        entered.release()
        release.wait(10)
        return 200, {}, b"done"

    server = HealthServer("127.0.0.1", 0, Metrics(), Probes(), limits=Limits(max_in_flight=3))
    server.mount("/slow", slow)
    server.start()
    request = b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    replies: list[bytes] = []
    held = [
        threading.Thread(target=lambda: replies.append(raw(server.port, request))) for _ in range(3)
    ]
    try:
        for thread in held:
            thread.start()
        for _ in held:
            assert entered.acquire(timeout=5)
        assert status_and_error(raw(server.port, request)) == (
            503,
            "too many requests in flight; retry later",
        )
    finally:
        release.set()
        for thread in held:
            thread.join(timeout=10)
        server.stop()
    assert [r.split(b" ", 2)[1] for r in replies] == [b"200"] * 3


def ingest(port: int, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/ingest?origin=driver.log", data=LOG, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, ""
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]


def test_ingest_beyond_loopback_needs_the_bearer_token() -> None:
    """With no network open to it (as for a client reaching the pod through its
    Service), /ingest takes only the configured bearer token."""
    guarded = serve(ingest_token="s3cret", open_to=())
    try:
        assert ingest(guarded.port, {}) == (
            403,
            "/ingest is for loopback clients or a bearer token",
        )
        assert ingest(guarded.port, {"Authorization": "Bearer wrong"}) == (
            401,
            "the bearer token is not the one this daemon was given",
        )
        assert ingest(guarded.port, {"Authorization": "Bearer s3cret"}) == (202, "")
    finally:
        guarded.stop()


def test_ingest_from_loopback_needs_no_token(server: HealthServer) -> None:
    assert ingest(server.port, {}) == (202, "")

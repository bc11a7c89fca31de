"""/healthz, /readyz and /metrics answer while slow clients hold every other slot:
partial /ingest bodies up to the in-flight caps, or more half-sent request heads than
the connection cap. Real uvicorn on a loopback port, real sockets."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest

from bot.adapters.http.ingest import route as ingest_route
from bot.adapters.http.server import HealthServer, Limits, Probes
from bot.daemon.metrics import Metrics
from tests.support.http_edge import Accepted, raw, status_and_error

LIMITS = Limits(
    head_timeout=20,
    body_timeout=20,
    max_in_flight=8,
    max_in_flight_per_path=4,
    max_connections=40,
    workers=2,
)
PROBES = ("/healthz", "/readyz", "/metrics")


@pytest.fixture
def server() -> Iterator[HealthServer]:
    running = HealthServer(
        "127.0.0.1",
        0,
        Metrics(),
        Probes(lambda: {"pipeline": True}, lambda: {"store": True}),
        limits=LIMITS,
    )
    running.mount("/ingest", ingest_route(Accepted()), private=True)
    running.mount("/slack/events", ingest_route(Accepted()))
    running.start()
    yield running
    running.stop()


@contextlib.contextmanager
def held(port: int, sent: bytes, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections that sent `sent` and then nothing more."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(sent)
            sockets.append(sock)
        time.sleep(0.3)  # the server has read what they sent
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def partial_body(path: str) -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nfirst bytes".encode()


def get(port: int, path: str) -> tuple[int, float]:
    started = time.monotonic()
    reply = raw(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    return int(reply.split(b" ", 2)[1]), time.monotonic() - started


def test_probes_answer_while_partial_bodies_hold_every_in_flight_slot(
    server: HealthServer,
) -> None:
    with (
        held(server.port, partial_body("/ingest"), LIMITS.max_in_flight_per_path),
        held(server.port, partial_body("/slack/events"), LIMITS.max_in_flight_per_path),
    ):
        for path in PROBES:
            status, took = get(server.port, path)
            assert (path, status) == (path, 200)
            assert took < 1.0
        assert status_and_error(raw(server.port, partial_body("/slack/events"), wait=2)) == (
            503,
            "too many requests in flight; retry later",
        )


def test_one_path_cannot_take_the_slots_of_another(server: HealthServer) -> None:
    with held(server.port, partial_body("/ingest"), LIMITS.max_in_flight_per_path):
        assert status_and_error(raw(server.port, partial_body("/ingest"), wait=2)) == (
            503,
            "too many requests to /ingest in flight; retry later",
        )
        click = b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        assert raw(server.port, click).split(b" ", 2)[1] == b"202"


def test_probes_answer_while_more_heads_are_held_than_the_connection_cap(
    server: HealthServer,
) -> None:
    half_head = b"POST /slack/events HTTP/1.1\r\nHost: x\r\n"
    with held(server.port, half_head, LIMITS.max_connections + 20) as sockets:
        for path in PROBES:
            status, took = get(server.port, path)
            assert (path, status) == (path, 200)
            assert took < 1.0
        closed = [sock for sock in sockets if _closed(sock)]
    assert len(closed) >= 20  # the longest waiting heads made room, not the new ones
    assert sockets[0] in closed


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(0.05)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True

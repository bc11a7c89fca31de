"""The connection side of the daemon's HTTP edge: uvicorn's HTTP/1.1 protocol (h11)
with a deadline for each request's head, a cap on open connections, and a JSON
answer for requests h11 refuses.

Why this exists: a server that waits forever for the rest of a request's head can
be held open by anyone who connects and sends half of one; and a request h11
cannot parse (a `Content-Length` of `-1` or `abc`, a broken request line) must
still get an answer a client can read. Beyond `max_connections` open
connections, the one that has waited longest for its request head is closed,
not the new one: a crowd of half-sent heads cannot keep a probe or a click
out. Everything else (keep-alive, pipelining,
flow control, chunked bodies) is uvicorn's.
"""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MALFORMED = json.dumps({"error": "malformed HTTP request"}).encode() + b"\n"


class EdgeProtocol(H11Protocol):
    """h11 with a head deadline: a connection that has not sent a whole request head
    `head_timeout` seconds after it opened (or after its last answer) is closed."""

    head_timeout = 10.0
    max_connections = 1000
    # Connections of this server waiting for a request head, oldest first (dicts keep
    # insertion order; one event loop, so no lock).
    waiting: ClassVar[dict[EdgeProtocol, None]] = {}
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()
        if len(self.connections) > self.max_connections:
            self._close_longest_waiting()

    def _close_longest_waiting(self) -> None:
        oldest = next(iter(self.waiting), None)
        if oldest is not None and oldest is not self:
            oldest._head_too_slow()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm_head_deadline()  # the head is in: the body has its own deadline

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=MALFORMED),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._head_deadline = self.loop.call_later(self.head_timeout, self._head_too_slow)
        self.waiting[self] = None

    def _disarm_head_deadline(self) -> None:
        self.waiting.pop(self, None)
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._disarm_head_deadline()
        if not self.transport.is_closing():
            self.transport.close()


def protocol_with(head_timeout: float, max_connections: int) -> type[EdgeProtocol]:
    """The protocol class uvicorn instantiates per connection, with these limits (and
    its own record of the connections waiting for a head: one per server)."""
    limits = {"head_timeout": head_timeout, "max_connections": max_connections, "waiting": {}}
    return type("EdgeProtocol", (EdgeProtocol,), limits)

"""The connection side of the daemon's HTTP edge: uvicorn's HTTP/1.1 protocol (h11)
with a deadline for each request's head and a JSON answer for requests h11 refuses.

Why this exists: a server that waits forever for the rest of a request's head can
be held open by anyone who connects and sends half of one; and a request h11
cannot parse (a `Content-Length` of `-1` or `abc`, a broken request line) must
still get an answer a client can read. Everything else (keep-alive, pipelining,
flow control, chunked bodies) is uvicorn's.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MALFORMED = json.dumps({"error": "malformed HTTP request"}).encode() + b"\n"


class EdgeProtocol(H11Protocol):
    """h11 with a head deadline: a connection that has not sent a whole request head
    `head_timeout` seconds after it opened (or after its last answer) is closed."""

    head_timeout = 10.0
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

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

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def protocol_with(head_timeout: float) -> type[EdgeProtocol]:
    """The protocol class uvicorn instantiates per connection, with this deadline."""
    return type("EdgeProtocol", (EdgeProtocol,), {"head_timeout": head_timeout})

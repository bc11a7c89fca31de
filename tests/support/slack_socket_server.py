"""A local Socket Mode server: a WebSocket endpoint on loopback that plays Slack's
side of Socket Mode for the real `slack_sdk` builtin client.

It greets each connection with `hello`, sends envelopes a test hands it
(slash commands, interactive payloads) to the connection it names (Slack picks one of
an app's connections at random: a test picks which) and records the client's acks
(`{"envelope_id": ..., "payload": ...}`). `drop()` closes the connections,
`stop()` also stops listening, so a reconnect fails as it would when Slack is
unreachable. aiohttp (already a pinned dependency) runs on its own event loop
in a thread; pings from the client are answered by aiohttp's autoping.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from typing import Any

from aiohttp import WSMsgType, web


class SocketModeServer:
    def __init__(self) -> None:
        self.acks: dict[str, dict[str, Any]] = {}
        self.connections_seen = 0
        self._ids = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []  # in the order they connected
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="socket-mode-server")
        self._runner: web.AppRunner | None = None
        self._lock = threading.Condition()
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/link"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> SocketModeServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=5)
        return self

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_get("/link", self._link)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    def drop(self) -> None:
        """Close every open connection (the listening socket stays)."""
        asyncio.run_coroutine_threadsafe(self._close_all(), self._loop).result(timeout=5)

    def stop(self) -> None:
        """Close the connections and stop listening; the loop thread ends."""
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _close_all(self) -> None:
        for ws in list(self._sockets):
            await ws.close()

    async def _stop(self) -> None:
        await self._close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- the protocol --------------------------------------------------------------------

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        with self._lock:
            self.connections_seen += 1
            self._lock.notify_all()
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "debug_info": {"host": "local", "approximate_connection_time": 3600},
            "connection_info": {"app_id": "A0PITCREW"},
        }
        await ws.send_str(json.dumps(hello))
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    data = json.loads(message.data)
                    envelope = data.get("envelope_id")
                    if envelope:
                        with self._lock:
                            self.acks[envelope] = data
                            self._lock.notify_all()
                elif message.type in (WSMsgType.ERROR, WSMsgType.CLOSE):
                    break
        finally:
            self._sockets.remove(ws)
        return ws

    def connected(self) -> int:
        return len(self._sockets)

    def send(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool = False,
        to: int = 0,
    ) -> str:
        """Send one envelope to the `to`th open connection (in the order they connected);
        returns its envelope id."""
        envelope_id = f"env-{next(self._ids)}"
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
        }

        async def push() -> None:
            sockets = list(self._sockets)
            if len(sockets) <= to:
                raise RuntimeError(
                    f"{len(sockets)} Socket Mode clients are connected, not {to + 1}"
                )
            await sockets[to].send_str(json.dumps(envelope))

        asyncio.run_coroutine_threadsafe(push(), self._loop).result(timeout=5)
        return envelope_id

    def wait_ack(self, envelope_id: str, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while envelope_id not in self.acks:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no ack for {envelope_id} within {timeout} s")
                self._lock.wait(left)
            return self.acks[envelope_id]

    def wait_connections(self, n: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.connections_seen < n or not self._sockets:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fewer than {n} connections within {timeout} s")
                self._lock.wait(min(left, 0.05))

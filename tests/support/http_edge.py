"""The HTTP edge seen from outside: what it handed on to the intake behind it, a request
sent byte for byte on a socket, and the status and error of a JSON answer."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass, field

from bot.daemon.feed import Observation


@dataclass
class Accepted:
    """What the edge handed on (the intake behind it is tested in test_intake.py)."""

    items: list[Observation] = field(default_factory=list)

    def accept(self, observation: Observation) -> str | None:
        self.items.append(observation)
        return None


def raw(port: int, request: bytes, *, wait: float = 5.0) -> bytes:
    """Send `request` as is; everything the server answers until it closes or `wait`."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(request)
        received = b""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            received += chunk
            if b"\r\n\r\n" in received and _complete(received):
                break
        return received


def _complete(reply: bytes) -> bool:
    head, _, body = reply.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status_and_error(reply: bytes) -> tuple[int, str]:
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)["error"]

"""HTTP mode's gate in front of Bolt: what a request to `/slack/events` must be before
Bolt parses it.

Why this exists: Bolt parses the body before it checks anything, so a truncated
or non-object JSON payload raised inside it (no answer at all), a non-numeric
`X-Slack-Request-Timestamp` gave a 500, and a request with a bad signature
was logged with its whole body. Here each request is checked in order (UTF-8,
signed, a numeric timestamp not over five minutes old, the signature right, the
timestamp not over five minutes ahead, not seen before, a JSON object where Slack
puts one) and refused with its own 4xx and a one-line JSON error; only a signed,
well-formed request reaches Bolt.

The window is Slack's: five minutes either way of this host's clock, as Slack's own
verifier and Bolt's take it. A correctly signed request is remembered from the moment
its signature is checked until its timestamp is five minutes old, whether it is taken
or refused: one refused for being ahead of the window is refused again, as a replay,
when the same bytes come back inside it.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import parse_qs

from slack_sdk.signature import SignatureVerifier

log = logging.getLogger("pitcrew.slack")

SIGNATURE_WINDOW = 5 * 60  # seconds either way; Slack's and Bolt's window for a timestamp


class Replays(Protocol):
    def first_time(self, signature: str, now: float, until: float) -> bool:
        """Record `signature`, valid until `until`; False when seen and still valid."""
        ...


class ReplayGuard:
    """Signed requests already seen, in memory: a second copy of a signed request while
    its signature is valid is a replay and is refused."""

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        self._seen: dict[str, float] = {}  # signature -> valid until
        self._lock = threading.Lock()

    def first_time(self, signature: str, now: float, until: float) -> bool:
        with self._lock:
            if len(self._seen) >= self._limit:
                self._seen = {s: t for s, t in self._seen.items() if t >= now}
            known = self._seen.get(signature)
            if known is not None and known >= now:
                return False
            if len(self._seen) >= self._limit:
                return False  # full of valid signatures: refuse rather than forget one
            self._seen[signature] = max(until, now)
            return True


@dataclass(frozen=True)
class Refusal:
    status: int
    error: str

    def reply(self) -> tuple[int, dict[str, str], bytes]:
        body = json.dumps({"error": self.error}).encode() + b"\n"
        return self.status, {"Content-Type": "application/json"}, body


@dataclass(frozen=True)
class Admitted:
    text: str  # the body, decoded
    headers: dict[str, str]  # lower-case names


class Gate:
    def __init__(
        self,
        verifier: SignatureVerifier,
        replays: Replays,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.verifier = verifier
        self.replays = replays
        self.now = now

    def admit(self, headers: dict[str, str], body: bytes) -> Admitted | Refusal:
        lowered = {k.lower(): v for k, v in headers.items()}
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return Refusal(400, "the body is not UTF-8")
        refusal = self._signed(lowered, text) or _well_formed(lowered, text)
        return refusal or Admitted(text, lowered)

    def _signed(self, headers: dict[str, str], text: str) -> Refusal | None:
        signature = headers.get("x-slack-signature", "")
        timestamp = headers.get("x-slack-request-timestamp", "")
        if not signature or not timestamp:
            return Refusal(401, "unsigned request")
        if not timestamp.isascii() or not timestamp.isdigit():
            return Refusal(400, "X-Slack-Request-Timestamp is not a number")
        now, stamped = self.now(), int(timestamp)
        if now - stamped > SIGNATURE_WINDOW:
            return Refusal(401, "stale request: the timestamp is over five minutes old")
        expected = self.verifier.generate_signature(timestamp=timestamp, body=text)
        if expected is None or not _same(expected, signature):
            return Refusal(401, "invalid request signature")
        try:  # remembered taken or refused, until it is too old to be taken anyway
            first = self.replays.first_time(signature, now, stamped + SIGNATURE_WINDOW)
        except Exception as error:  # the store cannot write: nothing may be done unrecorded
            log.error("cannot remember a signed Slack request: %s", error)
            return Refusal(503, "pitcrew cannot record this request now; retry")
        if stamped - now > SIGNATURE_WINDOW:
            return Refusal(401, "the timestamp is over five minutes ahead")
        if not first:
            return Refusal(401, "replayed request")
        return None


def _same(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())


def _well_formed(headers: dict[str, str], text: str) -> Refusal | None:
    content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type == "application/json":
        return _object(text, "the body")
    payload = parse_qs(text, keep_blank_values=True).get("payload")
    if payload:
        return _object(payload[-1], "the payload field")
    return None


def _object(text: str, what: str) -> Refusal | None:
    try:
        value = json.loads(text)
    except ValueError:
        return Refusal(400, f"{what} is not valid JSON")
    if not isinstance(value, dict):
        return Refusal(400, f"{what} is not a JSON object")
    return None

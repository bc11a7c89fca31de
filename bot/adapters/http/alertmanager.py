"""`POST /alertmanager`: Alertmanager's webhook receiver.

Why this exists: the alerts a team already has (kube-prometheus' rules, the DCGM
exporter's GPU health, KubeRay's metrics) must join pitcrew's card for the same
failure instead of reaching Slack beside it. Alertmanager posts its notification
(webhook version 4, `bot.core.inputs.alerts.read_webhook`); each alert becomes one
`alert` signal on the pipeline's queue, kept in the store first like `/ingest`'s
evidence (`bot.daemon.intake`): 202 once kept and queued, 503 while the queue or the
store cannot take it (Alertmanager retries a 5xx).

A copy of an alert already taken (the same fingerprint, start and state:
Alertmanager repeats a group's alerts at every `repeat_interval` and when the group
changes, and an HA pair may both send) is not queued again: it is remembered in the
store (`ReplayRecords`) before it is queued, and forgotten if the queue refuses it.
A notification with nothing new is refused with 409 naming the alerts; one with
some new alerts takes those and says how many it left out. The server
(`bot.adapters.http.server`) checks the credentials (`Credentials`), the body's size
and time, and counts every refusal in `pitcrew_ingest_rejected_total`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bot.adapters.http.ingest import Accepts
from bot.adapters.http.server import Route
from bot.core.errors import InputError, StoreError
from bot.core.inputs.alerts import Alert, Webhook, alert_signal, read_webhook
from bot.daemon.feed import Observation

log = logging.getLogger("pitcrew.http")

PATH = "/alertmanager"
WEEK = 7 * 24 * 3600.0
_SHOWN = 3  # alerts named in a refusal


class Seen(Protocol):
    """What the receiver remembers of the alerts it took (the store's replay records)."""

    def first_time(self, signature: str, now: float, until: float) -> bool: ...

    def forget(self, signature: str) -> None: ...


@dataclass(frozen=True)
class Receiver:
    """`url`: Alertmanager's address as people open it (the card's links), instead of
    the `externalURL` each notification names; `remember`: seconds an alert taken is
    known as taken."""

    url: str = ""
    remember: float = WEEK


def route(
    intake: Accepts,
    seen: Seen,
    clock: Callable[[], float],
    receiver: Receiver | None = None,
) -> Route:
    """The HTTP route: 202 once the new alerts are kept and queued, 400 for a body that
    is not Alertmanager's notification, 409 when every alert in it was taken before,
    503 when the queue or the store cannot take it (nothing of it was kept)."""
    settings = receiver or Receiver()
    one_at_a_time = threading.Lock()  # two copies of an alert racing are one take

    def handle(
        target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        try:
            webhook = read_webhook(body)
        except InputError as error:
            return _reply(400, {"error": str(error)})
        with one_at_a_time:
            return _take(webhook, intake, seen, clock(), settings)

    return handle


def _take(
    webhook: Webhook, intake: Accepts, seen: Seen, now: float, receiver: Receiver
) -> tuple[int, dict[str, str], bytes]:
    external = receiver.url or webhook.external_url
    taken, repeats = 0, []
    for alert in webhook.alerts:
        signature = f"alertmanager:{alert.identity}"
        try:
            if not seen.first_time(signature, now, now + receiver.remember):
                repeats.append(alert)
                continue
        except StoreError as error:
            return _reply(
                503, {"error": f"the store cannot be written ({error.problem}); retry later"}
            )
        refusal = intake.accept(Observation((alert_signal(alert, external),)))
        if refusal is not None:
            _forget(seen, signature)  # the ones queued before stay taken
            return _reply(503, {"error": refusal, "accepted": taken})
        taken += 1
    if not taken:
        return _reply(409, {"error": _replayed(repeats)})
    notes = []
    if repeats:
        notes.append(f"{len(repeats)} alerts were taken before and were left out")
    if webhook.truncated:
        notes.append(f"Alertmanager left out {webhook.truncated} alerts (max_alerts)")
    return _reply(202, {"accepted": taken, **({"notes": notes} if notes else {})})


def _forget(seen: Seen, signature: str) -> None:
    try:
        seen.forget(signature)
    except StoreError as error:  # its next copy will be refused as a repeat: say which
        log.error("alert %s was not queued and is still remembered as taken: %s", signature, error)


def _replayed(alerts: list[Alert]) -> str:
    named = ", ".join(
        f"{a.name} {a.status} since {a.starts_at.isoformat() if a.starts_at else '?'}"
        f" (fingerprint {a.fingerprint or '-'})"
        for a in alerts[:_SHOWN]
    )
    more = f" and {len(alerts) - _SHOWN} more" if len(alerts) > _SHOWN else ""
    return (
        f"replayed: every alert of this notification was taken before "
        f"(same fingerprint, startsAt and status): {named}{more}"
    )


def _reply(status: int, payload: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps(payload, sort_keys=True).encode() + b"\n"
    return status, {"Content-Type": "application/json"}, body

"""Alertmanager's alerts as signals: the webhook's body (version 4), or alerts pasted as
JSON (that body, or the alerts `amtool alert query -o json` and Alertmanager's v2 API
list).

Why this exists: the teams pitcrew is for already alert on their clusters
(kube-prometheus' rules, NVIDIA's DCGM exporter, KubeRay's metrics), and those
alerts must join the incident of the workload they are about rather than reach
Slack as bare text beside pitcrew's card. Each alert becomes one `alert` signal:
its reason the alert's name, its fields the labels mapped onto the objects pitcrew
knows (`bot.core.inputs.alert_labels`), every label as `labels.NAME` and every
annotation as `annotations.NAME`, its state and links (`alert_status`,
`fingerprint`, `starts_at`, `ends_at`, `generator_url`, `external_url`, `expr`, the
rule's expression read from the generator URL). A body that is not the webhook's
is refused naming what is wrong (`read_webhook`). The body's format is
Alertmanager's `notify/webhook.Message` and `template.Data` (v0.25.0). Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.core.errors import InputError
from bot.core.inputs import InputPart
from bot.core.inputs.alert_labels import object_fields, refs
from bot.core.inputs.values import as_list, as_map, as_text, parse_time
from bot.core.model import EMPTY, Signal, SourceKind, frozen_map

WEBHOOK_VERSION = "4"
ORIGIN = "alertmanager"
FIRING, RESOLVED = "firing", "resolved"
LABELS, ANNOTATIONS = "labels.", "annotations."  # the signal fields of each label, annotation
_STATES = (FIRING, RESOLVED)
_ZERO_YEAR = 1  # Go's zero time, 0001-01-01T00:00:00Z: "no end yet"
MAX_LABELS = 64  # of one alert, as signal fields (labels and annotations each)
MAX_VALUE = 2000  # characters of one label or annotation value kept


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert of a notification, as Alertmanager's `template.Alert` has it."""

    status: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    generator_url: str = ""
    fingerprint: str = ""

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def identity(self) -> str:
        """What makes a copy of this alert a duplicate: its fingerprint (its labels'
        hash), when it started firing, and whether it fires or resolved."""
        since = self.starts_at.isoformat() if self.starts_at else ""
        return f"{self.fingerprint or _fingerprint(self.labels)}/{since}/{self.status}"


@dataclass(frozen=True, slots=True)
class Webhook:
    """Alertmanager's webhook body (`notify/webhook.Message`, version 4)."""

    alerts: tuple[Alert, ...]
    receiver: str = ""
    status: str = ""
    group_key: str = ""
    external_url: str = ""
    truncated: int = 0


def read_webhook(body: bytes) -> Webhook:
    """The notification in `body`; raises InputError naming what is not Alertmanager's
    webhook body (version 4)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise InputError(f"the body is not JSON: {error}") from None
    if not isinstance(data, Mapping):
        raise InputError(f"the body is a JSON {_kind(data)}, not Alertmanager's notification")
    version = data.get("version")
    if version is None:
        raise InputError("the body has no version: Alertmanager's webhook sends version 4")
    if as_text(version) != WEBHOOK_VERSION:
        raise InputError(
            f"version {version!r}: this receiver reads Alertmanager's webhook version 4"
        )
    alerts = data.get("alerts")
    if not isinstance(alerts, list) or not alerts:
        raise InputError("alerts: expected a list of at least one alert")
    return Webhook(
        alerts=tuple(_alert(item, f"alerts[{i}]", strict=True) for i, item in enumerate(alerts)),
        receiver=as_text(data.get("receiver")),
        status=as_text(data.get("status")),
        group_key=as_text(data.get("groupKey")),
        external_url=as_text(data.get("externalURL")),
        truncated=_count(data.get("truncatedAlerts")),
    )


def _alert(item: Any, where: str, *, strict: bool) -> Alert:
    """One alert; `strict` (the webhook): every problem raises InputError naming it."""
    if not isinstance(item, Mapping):
        raise InputError(f"{where}: expected an alert object, not a JSON {_kind(item)}")
    labels = _strings(item.get("labels"), f"{where}.labels")
    if not labels.get("alertname"):
        raise InputError(f"{where}.labels: no alertname")
    status = _status(item.get("status"))
    if strict and status not in _STATES:
        raise InputError(f"{where}.status: expected firing or resolved, not {item.get('status')!r}")
    return Alert(
        status=status if status in _STATES else FIRING,
        labels=frozen_map(labels),
        annotations=frozen_map(_strings(item.get("annotations"), f"{where}.annotations")),
        starts_at=_time(item.get("startsAt"), f"{where}.startsAt", strict=strict),
        ends_at=_time(item.get("endsAt"), f"{where}.endsAt", strict=strict),
        generator_url=as_text(item.get("generatorURL")),
        fingerprint=as_text(item.get("fingerprint")),
    )


def _status(value: Any) -> str:
    """The webhook's `firing`/`resolved`, or the v2 API's `{state: active|suppressed|…}`
    (an alert the API lists is firing)."""
    if isinstance(value, Mapping):
        return FIRING if as_text(value.get("state")) else ""
    return as_text(value)


def _strings(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(
            f"{where}: expected an object of names and texts, not a JSON {_kind(value)}"
        )
    return {str(k)[:200]: as_text(v)[:MAX_VALUE] for k, v in list(value.items())[:MAX_LABELS]}


def _time(value: Any, where: str, *, strict: bool) -> datetime | None:
    if value is None or value == "":
        return None
    parsed = parse_time(value)
    if parsed is None and strict:
        raise InputError(f"{where}: expected an RFC 3339 time, not {as_text(value)[:60]!r}")
    return None if parsed is None or parsed.year == _ZERO_YEAR else parsed


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "object"
    return "array" if isinstance(value, list) else "string" if isinstance(value, str) else "value"


def _fingerprint(labels: Mapping[str, str]) -> str:
    """A stand-in for Alertmanager's fingerprint when an alert has none (a paste)."""
    text = "\x1f".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


# -- signals -----------------------------------------------------------------------------


def alert_signal(alert: Alert, external_url: str = "", origin: str = ORIGIN) -> Signal:
    """The `alert` signal of one alert (docs/signals.md); `external_url` is the
    Alertmanager that sent it."""
    expr = rule_expression(alert.generator_url)
    fields = object_fields(alert.labels, expr)
    fields.update(_state(alert, external_url, expr))
    fields.update({f"{LABELS}{k}": v for k, v in alert.labels.items() if v})
    fields.update({f"{ANNOTATIONS}{k}": v for k, v in alert.annotations.items() if v})
    obj, workload = refs(fields)
    return Signal(
        source=SourceKind.ALERT,
        text=alert_text(alert, fields.get("xid", ""), fields.get("xid_message", "")),
        reason=alert.name,
        fields=frozen_map(fields),
        obj=obj,
        workload=workload,
        time=alert.starts_at,
        origin=origin,
    )


def _state(alert: Alert, external_url: str, expr: str) -> dict[str, str]:
    state = {
        "alertname": alert.name,
        "alert_status": alert.status,
        "fingerprint": alert.fingerprint or _fingerprint(alert.labels),
        "starts_at": alert.starts_at.isoformat() if alert.starts_at else "",
        "ends_at": alert.ends_at.isoformat() if alert.ends_at else "",
        "generator_url": alert.generator_url,
        "external_url": external_url,
        "expr": expr,
        "severity": alert.labels.get("severity", ""),
    }
    return {key: value for key, value in state.items() if value}


def alert_text(alert: Alert, xid: str = "", xid_message: str = "") -> str:
    """One line: `NAME firing: summary description (Xid N: message)`, what playbooks'
    regexes and `unless` search."""
    notes = alert.annotations
    said = " ".join(dict.fromkeys(v for v in (notes.get("summary"), notes.get("description")) if v))
    said = " ".join(said.split()) or notes.get("message", "")
    if xid:
        said += f" (Xid {xid}" + (f": {xid_message})" if xid_message else ")")
    return f"{alert.name} {alert.status}" + (f": {said.strip()}" if said else "")


def rule_expression(generator_url: str) -> str:
    """The rule's expression a Prometheus generator URL carries (`/graph?g0.expr=…`)."""
    _, _, query = generator_url.partition("?")
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if name == "g0.expr":
            return _unquote(value)
    return ""


def _unquote(text: str) -> str:
    """Percent- and plus-decoding of a query value (urllib.parse is I/O's, not the core's)."""
    out = bytearray()
    raw = text.replace("+", " ").encode()
    i = 0
    while i < len(raw):
        if raw[i] == 0x25 and _hex(raw[i + 1 : i + 3]):
            out.append(int(raw[i + 1 : i + 3], 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", errors="replace")


def _hex(pair: bytes) -> bool:
    return len(pair) == 2 and all(c in b"0123456789abcdefABCDEF" for c in pair)


# -- pasted ------------------------------------------------------------------------------


def alert_parts(data: Any, origin: str) -> tuple[InputPart, ...] | None:
    """Signals of pasted alerts: a webhook body, or a list of alerts (`amtool alert query
    -o json`, the v2 API); None for anything else. An alert that does not read is left
    out (a paste is read as far as it goes)."""
    if isinstance(data, Mapping) and isinstance(data.get("alerts"), list) and "version" in data:
        items: Sequence[Any] = as_list(data.get("alerts"))
        external = as_text(data.get("externalURL"))
    elif isinstance(data, list) and data and all(_looks_like_alert(x) for x in data):
        items, external = data, ""
    elif _looks_like_alert(data):
        items, external = [data], ""
    else:
        return None
    signals: list[InputPart] = []
    for i, item in enumerate(items):
        try:
            alert = _alert(item, f"{origin}: alert {i + 1}", strict=False)
        except InputError:
            continue
        signals.append(alert_signal(alert, external, origin))
    return tuple(signals)


def _looks_like_alert(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and bool(as_text(as_map(value.get("labels")).get("alertname")))
        and ("startsAt" in value or "generatorURL" in value or "fingerprint" in value)
    )

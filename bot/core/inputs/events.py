"""A Kubernetes Event -> one `k8s_event` signal (docs/signals.md).

Both API shapes are read: core/v1 (`involvedObject`, `message`, `count`) and
events.k8s.io/v1 (`regarding`, `note`, `deprecatedCount`/`series.count`).
Events parsed from `kubectl get events` tables and from the Events section of
`kubectl describe` are built as core/v1 Events and come through here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.inputs.object_refs import WORKLOAD_KINDS, canonical_kind
from bot.core.inputs.values import as_map, compact, dig, parse_time, text_at
from bot.core.model import ObjectRef, Signal, SourceKind

_TIME_KEYS = (
    ("lastTimestamp",),
    ("series", "lastObservedTime"),
    ("eventTime",),
    ("deprecatedLastTimestamp",),
    ("firstTimestamp",),
    ("metadata", "creationTimestamp"),
)


def event_signal(event: Mapping[str, Any], origin: str = "") -> Signal:
    """The `k8s_event` signal of one Event object."""
    new_api = _is_events_v1(event)
    involved = as_map(event.get("regarding") if new_api else event.get("involvedObject"))
    kind = canonical_kind(text_at(involved, "kind")) if text_at(involved, "kind") else ""
    name = text_at(involved, "name")
    namespace = text_at(involved, "namespace") or text_at(event, "metadata", "namespace")
    message = text_at(event, "note") if new_api else text_at(event, "message")
    obj = ObjectRef(kind, name, namespace) if name else None
    fields = {
        "type": text_at(event, "type"),
        "object_kind": kind,
        "object_name": name,
        "namespace": namespace,
        "count": _count(event),
    }
    return Signal(
        source=SourceKind.K8S_EVENT,
        text=message,
        reason=text_at(event, "reason"),
        fields=compact(fields),
        obj=obj,
        workload=obj if obj is not None and kind in WORKLOAD_KINDS else None,
        time=_time(event),
        origin=origin,
    )


def _is_events_v1(event: Mapping[str, Any]) -> bool:
    api_version = text_at(event, "apiVersion")
    if api_version.startswith("events.k8s.io/"):
        return True
    return not api_version and ("regarding" in event or "note" in event)


def _count(event: Mapping[str, Any]) -> str:
    for keys in (("count",), ("series", "count"), ("deprecatedCount",)):
        value = text_at(event, *keys)
        if value:
            return value
    return ""


def _time(event: Mapping[str, Any]) -> Any:
    for keys in _TIME_KEYS:
        parsed = parse_time(dig(event, *keys))
        if parsed is not None:
            return parsed
    return None

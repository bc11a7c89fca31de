"""A gang scheduler's objects -> `pod_status` signals: why a gang is not placed or was evicted.

Ray pods scheduled by Volcano or Kueue wait on a PodGroup
(`scheduling.volcano.sh`) or a Workload (`kueue.x-k8s.io`, and since 1.35
`scheduling.k8s.io`) whose conditions say why, in the scheduler's own words:
Volcano's `Unschedulable` condition ("4/4 tasks in gang unschedulable: …
Insufficient nvidia.com/gpu."), Kueue's `QuotaReserved=False` ("couldn't
assign flavors to pod set …") and `Evicted=True` ("Preempted to accommodate a
workload …"). One signal per such condition, and one for a `status.message`
the object carries itself, each with the condition's type and reason as fields;
a condition that says all is well (`Scheduled`, `QuotaReserved=True`,
`Admitted=True`, `PodsReady=True`) gives none.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from bot.core.inputs.object_refs import object_ref, workload_of
from bot.core.inputs.values import as_list, as_map, compact, parse_time, text_at
from bot.core.model import ObjectRef, Signal, SourceKind

# Condition types whose status True is bad news, and those whose status False is.
_BAD_WHEN_TRUE = frozenset({"Unschedulable", "Evicted", "Preempted", "Deactivated"})
_BAD_WHEN_FALSE = frozenset({"QuotaReserved", "Admitted", "PodsReady", "Scheduled"})


def gang_signals(obj: Mapping[str, Any], origin: str = "") -> list[Signal]:
    """The `pod_status` signals of one PodGroup or Workload."""
    kind = text_at(obj, "kind")
    metadata = as_map(obj.get("metadata"))
    ref = object_ref(kind, metadata)
    workload = workload_of(kind, metadata)
    status = as_map(obj.get("status"))
    signals = list(_condition_signals(ref, workload, status, origin))
    message = text_at(status, "message")
    if message:
        fields = {"object_kind": kind, "object_name": ref.name, "phase": text_at(status, "phase")}
        signals.append(
            Signal(
                source=SourceKind.POD_STATUS,
                text=message,
                reason=text_at(status, "reason"),
                fields=compact(fields),
                obj=ref,
                workload=workload,
                origin=origin,
            )
        )
    return signals


def _condition_signals(
    ref: ObjectRef, workload: ObjectRef | None, status: Mapping[str, Any], origin: str
) -> Iterator[Signal]:
    for item in as_list(status.get("conditions")):
        condition = as_map(item)
        kind, state = text_at(condition, "type"), text_at(condition, "status").lower()
        bad = (kind in _BAD_WHEN_TRUE and state == "true") or (
            kind in _BAD_WHEN_FALSE and state == "false"
        )
        message = text_at(condition, "message")
        if not bad or not message:
            continue
        reason = text_at(condition, "reason")
        fields = {
            "object_kind": ref.kind,
            "object_name": ref.name,
            "condition": kind,
            "status": text_at(condition, "status"),
            "condition_reason": reason,
        }
        yield Signal(
            source=SourceKind.POD_STATUS,
            text=message,
            reason=reason,
            fields=compact(fields),
            obj=ref,
            workload=workload,
            time=parse_time(condition.get("lastTransitionTime")),
            origin=origin,
        )

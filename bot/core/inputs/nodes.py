"""A Node -> `node_status` signals: one for a Ready condition that is not True, one per
taint, one per GPU resource with fewer devices allocatable than the node has (the device
plugin reported some unhealthy, and the kubelet took them out of Allocatable)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from bot.core.inputs.values import as_list, as_map, compact, parse_time, text_at
from bot.core.model import ObjectRef, Signal, SourceKind


def node_signals(node: Mapping[str, Any], origin: str = "") -> list[Signal]:
    """The `node_status` signals of one Node object."""
    name = text_at(node, "metadata", "name")
    ref = ObjectRef("Node", name)
    signals = list(_not_ready(ref, as_map(node.get("status")), origin))
    signals.extend(_taints(ref, as_map(node.get("spec")), origin))
    signals.extend(_gpus_not_allocatable(ref, as_map(node.get("status")), origin))
    return signals


def _gpus_not_allocatable(
    ref: ObjectRef, status: Mapping[str, Any], origin: str
) -> Iterator[Signal]:
    capacity = as_map(status.get("capacity"))
    allocatable = as_map(status.get("allocatable"))
    for resource in sorted(capacity):
        if not str(resource).endswith("/gpu") or resource not in allocatable:
            continue
        have, usable = text_at(capacity, resource), text_at(allocatable, resource)
        if not (have.isdigit() and usable.isdigit()) or int(usable) >= int(have):
            continue
        fields = {
            "node": ref.name,
            "gpu_resource": str(resource),
            "gpu_capacity": have,
            "gpu_allocatable": usable,
        }
        yield Signal(
            source=SourceKind.NODE_STATUS,
            text=f"node {ref.name or '(unnamed)'}: {resource} {usable} of {have} allocatable",
            reason="GPUsNotAllocatable",
            fields=compact(fields),
            obj=ref,
            origin=origin,
        )


def _not_ready(ref: ObjectRef, status: Mapping[str, Any], origin: str) -> Iterator[Signal]:
    for item in as_list(status.get("conditions")):
        condition = as_map(item)
        state = text_at(condition, "status")
        if text_at(condition, "type") != "Ready" or state.lower() == "true":
            continue
        message = text_at(condition, "message")
        fields = {
            "node": ref.name,
            "condition": "Ready",
            "status": state,
            "condition_reason": text_at(condition, "reason"),
        }
        yield Signal(
            source=SourceKind.NODE_STATUS,
            text=message or f"node {ref.name} is not Ready (status {state or 'unknown'})",
            reason="NotReady",
            fields=compact(fields),
            obj=ref,
            time=parse_time(
                condition.get("lastTransitionTime") or condition.get("lastHeartbeatTime")
            ),
            origin=origin,
        )


def _taints(ref: ObjectRef, spec: Mapping[str, Any], origin: str) -> Iterator[Signal]:
    for item in as_list(spec.get("taints")):
        taint = as_map(item)
        key, value, effect = (text_at(taint, k) for k in ("key", "value", "effect"))
        if not key:
            continue
        shown = f"{key}={value}" if value else key
        fields = {"node": ref.name, "taint_key": key, "taint_value": value, "taint_effect": effect}
        yield Signal(
            source=SourceKind.NODE_STATUS,
            text=f"taint {shown}:{effect}" if effect else f"taint {shown}",
            reason="Taint",
            fields=compact(fields),
            obj=ref,
            time=parse_time(taint.get("timeAdded")),
            origin=origin,
        )

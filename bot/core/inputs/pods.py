"""A Pod object -> `pod_status` signals, as docs/signals.md specifies.

One signal per container state that says something went wrong or ended
(`state.terminated`, `state.waiting`, `lastState.terminated`; init containers
too), one for a pod-level `status.reason` (Evicted, NodeShutdown …) and one
per `PodScheduled=False` condition. Pods parsed from JSON, YAML and `kubectl
describe` all pass through here, so every input shape gives the same signals.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bot.core.inputs.object_refs import object_ref, workload_of
from bot.core.inputs.values import as_list, as_map, as_text, compact, parse_time, text_at
from bot.core.model import ObjectRef, Signal, SourceKind

_RAY_LABELS = {
    "ray_cluster": "ray.io/cluster",
    "ray_group": "ray.io/group",
    "ray_node_type": "ray.io/node-type",
}


def pod_signals(pod: Mapping[str, Any], origin: str = "") -> list[Signal]:
    """Every `pod_status` signal of one Pod object."""
    metadata = as_map(pod.get("metadata"))
    spec = as_map(pod.get("spec"))
    status = as_map(pod.get("status"))
    pod_ref = object_ref("Pod", metadata)
    base = _PodContext(
        ref=pod_ref,
        workload=workload_of("Pod", metadata),
        origin=origin,
        fields=_pod_fields(pod_ref, metadata, spec, status),
    )
    signals = list(_container_signals(base, spec, status))
    signals.extend(_pod_reason_signals(base, status))
    signals.extend(_unscheduled_signals(base, status))
    return signals


@dataclass(frozen=True)
class _PodContext:
    """What every signal of one pod shares."""

    ref: ObjectRef
    workload: ObjectRef | None
    origin: str
    fields: Mapping[str, str]

    def signal(self, reason: str, text: str, fields: Mapping[str, str], time: Any) -> Signal:
        return Signal(
            source=SourceKind.POD_STATUS,
            text=text,
            reason=reason,
            fields=compact({**self.fields, **fields}),
            obj=self.ref,
            workload=self.workload,
            time=parse_time(time),
            origin=self.origin,
        )


def _pod_fields(
    ref: ObjectRef, metadata: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any]
) -> dict[str, str]:
    labels = as_map(metadata.get("labels"))
    fields = {
        "pod": ref.name,
        "namespace": ref.namespace,
        "phase": text_at(status, "phase"),
        "node": text_at(spec, "nodeName"),
    }
    fields.update({name: text_at(labels, label) for name, label in _RAY_LABELS.items()})
    return fields


# -- containers ---------------------------------------------------------------


def _container_signals(
    base: _PodContext, spec: Mapping[str, Any], status: Mapping[str, Any]
) -> Iterator[Signal]:
    groups = (
        ("initContainerStatuses", "initContainers", True),
        ("containerStatuses", "containers", False),
    )
    for status_key, spec_key, init in groups:
        resources = _resources_by_container(spec.get(spec_key))
        for container_status in as_list(status.get(status_key)):
            container = as_map(container_status)
            if container:
                name = text_at(container, "name")
                yield from _states(base, container, resources.get(name, {}), init)


def _resources_by_container(containers: Any) -> dict[str, dict[str, str]]:
    """Container name -> its memory_limit, memory_request and gpu_limit fields."""
    found: dict[str, dict[str, str]] = {}
    for item in as_list(containers):
        container = as_map(item)
        resources = as_map(container.get("resources"))
        limits = as_map(resources.get("limits"))
        requests = as_map(resources.get("requests"))
        found[text_at(container, "name")] = {
            "memory_limit": text_at(limits, "memory"),
            "memory_request": text_at(requests, "memory"),
            "gpu_limit": _gpu(limits),
        }
    return found


def _gpu(limits: Mapping[str, Any]) -> str:
    """The GPU limit: `nvidia.com/gpu`, else any other vendor's `*/gpu` resource."""
    if "nvidia.com/gpu" in limits:
        return as_text(limits["nvidia.com/gpu"])
    for key, value in limits.items():
        if str(key).endswith("/gpu"):
            return as_text(value)
    return ""


def _states(
    base: _PodContext, container: Mapping[str, Any], resources: Mapping[str, str], init: bool
) -> Iterator[Signal]:
    name = text_at(container, "name")
    fields = {
        "container": name,
        "restart_count": text_at(container, "restartCount"),
        "init": "true" if init else "false",
        **resources,
    }
    label = f"{'init container' if init else 'container'} {name}"
    state = as_map(container.get("state"))
    terminated = as_map(state.get("terminated"))
    if terminated:
        yield _terminated(base, fields, terminated, "terminated", f"{label} terminated")
    waiting = as_map(state.get("waiting"))
    if waiting:
        yield _waiting(base, fields, waiting, f"{label} waiting")
    last = as_map(as_map(container.get("lastState")).get("terminated"))
    if last:
        yield _terminated(base, fields, last, "last_terminated", f"{label} last terminated")


def _terminated(
    base: _PodContext,
    fields: Mapping[str, str],
    terminated: Mapping[str, Any],
    state: str,
    what: str,
) -> Signal:
    reason = text_at(terminated, "reason")
    exit_code = text_at(terminated, "exitCode")
    signal_number = text_at(terminated, "signal")
    message = text_at(terminated, "message")
    details = [f"exit code {exit_code}"] if exit_code else []
    if signal_number:
        details.append(f"signal {signal_number}")
    summary = f"{what}: {reason or 'no reason given'}"
    if details:
        summary += f" ({', '.join(details)})"
    extra = {"state": state, "exit_code": exit_code, "message": message}
    when = terminated.get("finishedAt") or terminated.get("startedAt")
    return base.signal(reason, _join(summary, message), {**fields, **extra}, when)


def _waiting(
    base: _PodContext, fields: Mapping[str, str], waiting: Mapping[str, Any], what: str
) -> Signal:
    reason = text_at(waiting, "reason")
    message = text_at(waiting, "message")
    summary = f"{what}: {reason or 'no reason given'}"
    extra = {"state": "waiting", "message": message}
    return base.signal(reason, _join(summary, message), {**fields, **extra}, None)


# -- the pod as a whole ---------------------------------------------------------


def _pod_reason_signals(base: _PodContext, status: Mapping[str, Any]) -> Iterator[Signal]:
    reason = text_at(status, "reason")
    if not reason:
        return
    message = text_at(status, "message")
    summary = f"pod {base.ref.name}: {reason}"
    yield base.signal(reason, _join(summary, message), {"state": "pod", "message": message}, None)


def _unscheduled_signals(base: _PodContext, status: Mapping[str, Any]) -> Iterator[Signal]:
    for item in as_list(status.get("conditions")):
        condition = as_map(item)
        if text_at(condition, "type") != "PodScheduled":
            continue
        if text_at(condition, "status").lower() != "false":
            continue
        reason = text_at(condition, "reason")
        message = text_at(condition, "message")
        summary = f"pod {base.ref.name} not scheduled: {reason or 'no reason given'}"
        extra = {"state": "condition", "condition": "PodScheduled", "message": message}
        yield base.signal(
            reason, _join(summary, message), extra, condition.get("lastTransitionTime")
        )


def _join(summary: str, message: str) -> str:
    return f"{summary}\n{message}" if message else summary

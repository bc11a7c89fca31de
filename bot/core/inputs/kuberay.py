"""KubeRay objects -> signals: a RayJob's status -> `ray_job`, a RayCluster's -> `ray_cluster`.

A RayJob's reason is `.status.reason` (`DeadlineExceeded`, `AppFailed` …) or,
when KubeRay set none, its `jobDeploymentStatus`. A RayCluster's is
`.status.state`, else `.status.reason`, else the reason of a failing
condition; the failing condition itself (KubeRay's own rule: `ReplicaFailure`
True, or `HeadPodReady` False for a reason other than the pods still being
provisioned) is kept in the fields `condition` and `condition_reason`, since
KubeRay ≥1.2 leaves `state` at `ready` once the cluster was ready. Field
names follow docs/signals.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from bot.core.inputs import InputPart
from bot.core.inputs.object_refs import RAY_CLUSTER_LABEL, object_ref
from bot.core.inputs.rayjob import message_parts
from bot.core.inputs.values import as_list, as_map, compact, parse_time, text_at
from bot.core.model import Signal, SourceKind


def rayjob_parts(rayjob: Mapping[str, Any], origin: str = "") -> tuple[InputPart, ...]:
    """The `ray_job` signal of a RayJob, plus its status message as driver log if multi-line."""
    metadata = as_map(rayjob.get("metadata"))
    status = as_map(rayjob.get("status"))
    ref = object_ref("RayJob", metadata)
    deployment = text_at(status, "jobDeploymentStatus")
    job_status = text_at(status, "jobStatus")
    reason = text_at(status, "reason") or deployment
    summary, logs = message_parts(status.get("message"), ref, origin)
    cluster = text_at(status, "rayClusterName") or text_at(
        rayjob, "spec", "clusterSelector", RAY_CLUSTER_LABEL
    )
    fields = {
        "rayjob": ref.name,
        "namespace": ref.namespace,
        "job_deployment_status": deployment,
        "job_status": job_status,
        "ray_cluster": cluster,
        "job_id": text_at(status, "jobId"),
    }
    fallback = f"RayJob {ref.name}: {deployment or 'no deployment status'}"
    if job_status:
        fallback += f", job {job_status}"
    signal = Signal(
        source=SourceKind.RAY_JOB,
        text=summary or fallback,
        reason=reason,
        fields=compact(fields),
        obj=ref,
        workload=ref,
        time=parse_time(status.get("endTime") or status.get("startTime")),
        origin=origin,
    )
    return (signal, logs) if logs is not None else (signal,)


def raycluster_parts(cluster: Mapping[str, Any], origin: str = "") -> tuple[InputPart, ...]:
    """The `ray_cluster` signal of a RayCluster."""
    metadata = as_map(cluster.get("metadata"))
    status = as_map(cluster.get("status"))
    ref = object_ref("RayCluster", metadata)
    state = text_at(status, "state")
    status_reason = text_at(status, "reason")
    failing = _failing_conditions(status)
    reason = state or status_reason or next((c.reason for c in failing if c.reason), "")
    details = [status_reason, *(c.message for c in failing if c.message)]
    text = "\n".join(d for d in details if d)
    fields = {
        "ray_cluster": ref.name,
        "namespace": ref.namespace,
        "state": state,
        **_condition_fields(failing),
        **_replica_fields(status),
    }
    signal = Signal(
        source=SourceKind.RAY_CLUSTER,
        text=text or f"RayCluster {ref.name}: {state or 'no state'}",
        reason=reason,
        fields=compact(fields),
        obj=ref if ref.name else None,
        workload=ref if ref.name else None,
        time=parse_time(status.get("lastUpdateTime")),
        origin=origin,
    )
    return (signal,)


class _Condition(NamedTuple):
    kind: str
    reason: str
    message: str


# HeadPodReady is False while the pods are first created; KubeRay does not count that
# (nor a head pod its cache has not seen yet) as a failure.
_PROVISIONING = frozenset({"RayClusterPodsProvisioning", "HeadPodNotFound"})
_REPLICA_FIELDS = {
    "available_workers": "availableWorkerReplicas",
    "ready_workers": "readyWorkerReplicas",
    "desired_workers": "desiredWorkerReplicas",
}


def _failing_conditions(status: Mapping[str, Any]) -> list[_Condition]:
    """The conditions that report a problem, ReplicaFailure first: ReplicaFailure=True,
    HeadPodReady=False (unless the pods are still being provisioned)."""
    failing: list[_Condition] = []
    for item in as_list(status.get("conditions")):
        condition = as_map(item)
        kind = text_at(condition, "type")
        value = text_at(condition, "status").lower()
        reason = text_at(condition, "reason")
        if (kind == "ReplicaFailure" and value == "true") or (
            kind == "HeadPodReady" and value == "false" and reason not in _PROVISIONING
        ):
            failing.append(_Condition(kind, reason, text_at(condition, "message")))
    failing.sort(key=lambda c: c.kind != "ReplicaFailure")
    return failing


def _condition_fields(failing: list[_Condition]) -> dict[str, str]:
    if not failing:
        return {}
    first = failing[0]
    return {"condition": first.kind, "condition_reason": first.reason}


def _replica_fields(status: Mapping[str, Any]) -> dict[str, str]:
    return {field: text_at(status, key) for field, key in _REPLICA_FIELDS.items()}

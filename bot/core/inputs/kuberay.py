"""KubeRay objects -> signals: a RayJob's status -> `ray_job`, a RayCluster's -> `ray_cluster`.

A RayJob's reason is `.status.reason` (`DeadlineExceeded`, `AppFailed` …) or,
when KubeRay set none, its `jobDeploymentStatus`. A RayCluster's is
`.status.state`, else `.status.reason`, else the reason of a failing
condition. Field names follow docs/signals.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.inputs import InputPart
from bot.core.inputs.owners import RAY_CLUSTER_LABEL, object_ref
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
    reason = state or status_reason or next((r for r, _ in failing if r), "")
    details = [status_reason, *(message for _, message in failing if message)]
    text = "\n".join(d for d in details if d)
    fields = {"ray_cluster": ref.name, "namespace": ref.namespace, "state": state}
    signal = Signal(
        source=SourceKind.RAY_CLUSTER,
        text=text or f"RayCluster {ref.name}: {state or 'no state'}",
        reason=reason,
        fields=compact(fields),
        obj=ref,
        workload=ref,
        time=parse_time(status.get("lastUpdateTime")),
        origin=origin,
    )
    return (signal,)


def _failing_conditions(status: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(reason, message) of conditions that report a problem: ReplicaFailure=True,
    HeadPodReady=False."""
    failing: list[tuple[str, str]] = []
    for item in as_list(status.get("conditions")):
        condition = as_map(item)
        kind = text_at(condition, "type")
        value = text_at(condition, "status").lower()
        if (kind == "ReplicaFailure" and value == "true") or (
            kind == "HeadPodReady" and value == "false"
        ):
            failing.append((text_at(condition, "reason"), text_at(condition, "message")))
    return failing

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
        **_retry_fields(rayjob),
        **_deletion_fields(as_map(rayjob.get("spec"))),
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


def _retry_fields(rayjob: Mapping[str, Any]) -> dict[str, str]:
    """KubeRay 1.5–1.7 fields pitcrew decides with (`ray-operator/apis/ray/v1/rayjob_types.go`,
    v1.7.0): the attempts counted under `spec.backoffLimit` (`bot.core.incidents.kuberay_retries`),
    the pre-running deadline, when the attempt started, when the dashboard stopped
    answering KubeRay's job status checks, and the Ray job's own times (`rayJobInfo`)."""
    status = as_map(rayjob.get("status"))
    return {
        "backoff_limit": text_at(rayjob, "spec", "backoffLimit"),
        "failed_attempts": text_at(status, "failed"),
        "succeeded_attempts": text_at(status, "succeeded"),
        "pre_running_deadline_seconds": text_at(rayjob, "spec", "preRunningDeadlineSeconds"),
        "active_deadline_seconds": text_at(rayjob, "spec", "activeDeadlineSeconds"),
        "start_time": text_at(status, "startTime"),
        "status_check_failing_since": text_at(status, "jobStatusCheckFailureStartTime"),
        "ray_job_start_time": text_at(status, "rayJobInfo", "startTime"),
        "ray_job_end_time": text_at(status, "rayJobInfo", "endTime"),
        "submission_mode": text_at(rayjob, "spec", "submissionMode"),
    }


_DESTROYING = ("DeleteSelf", "DeleteCluster", "DeleteWorkers")
"""Deletion policies that take a failed attempt's evidence with them, worst first."""


def _deletion_fields(spec: Mapping[str, Any]) -> dict[str, str]:
    """What KubeRay deletes after the RayJob fails, and after how many seconds
    (`deletion_policy`, `deletion_ttl_seconds`): a `deletionStrategy.deletionRules` rule on
    `jobStatus: FAILED` or `jobDeploymentStatus: Failed` (v1.5.0+, per-rule
    `condition.ttlSeconds`), the legacy `deletionStrategy.onFailure.policy`, or
    `shutdownAfterJobFinishes` (the RayCluster, after `ttlSecondsAfterFinished`). Rules as
    in `rayjob_types.go` (`DeletionStrategy`) and `rayjob_controller.go` (v1.7.0)."""
    strategy = as_map(spec.get("deletionStrategy"))
    ttl = text_at(spec, "ttlSecondsAfterFinished") or "0"
    found: list[tuple[int, int, str]] = []
    for item in as_list(strategy.get("deletionRules")):
        rule = as_map(item)
        condition = as_map(rule.get("condition"))
        policy = text_at(rule, "policy")
        on_failure = text_at(condition, "jobStatus") == "FAILED" or (
            text_at(condition, "jobDeploymentStatus") == "Failed"
        )
        if on_failure and policy in _DESTROYING:
            found.append(
                (_int(text_at(condition, "ttlSeconds")), _DESTROYING.index(policy), policy)
            )
    legacy = text_at(strategy, "onFailure", "policy")
    if not found and legacy in _DESTROYING:
        found.append((_int(ttl), _DESTROYING.index(legacy), legacy))
    if not found and text_at(spec, "shutdownAfterJobFinishes").lower() == "true":
        found.append((_int(ttl), _DESTROYING.index("DeleteCluster"), "DeleteCluster"))
    if not found:
        return {}
    after, _, policy = min(found)
    return {"deletion_policy": policy, "deletion_ttl_seconds": str(after)}


def _int(text: str) -> int:
    """A non-negative count of seconds; 0 when absent or unreadable (KubeRay's default)."""
    try:
        return max(int(text), 0)
    except ValueError:
        return 0


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

"""A Kubernetes Job -> `ray_job` signals from its failed conditions.

A RayJob in K8sJobMode submits through a Job (the submitter); when that Job
gives up, its condition says why (`BackoffLimitExceeded`: every retry
failed; `DeadlineExceeded`: `activeDeadlineSeconds` passed). The submitter's
status is a `ray_job` source (docs/design.md, "The data model"), so a Job pasted as YAML or JSON
gives one signal per true `Failed` condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.inputs.object_refs import object_ref, workload_of
from bot.core.inputs.values import as_list, as_map, compact, parse_time, text_at
from bot.core.model import Signal, SourceKind


def job_signals(job: Mapping[str, Any], origin: str = "") -> list[Signal]:
    """One `ray_job` signal per `Failed` condition that holds."""
    metadata = as_map(job.get("metadata"))
    status = as_map(job.get("status"))
    ref = object_ref("Job", metadata)
    signals: list[Signal] = []
    for item in as_list(status.get("conditions")):
        condition = as_map(item)
        if text_at(condition, "type") != "Failed" or text_at(condition, "status") != "True":
            continue
        reason = text_at(condition, "reason")
        message = text_at(condition, "message")
        summary = f"Job {ref.name or '(unnamed)'} failed: {reason or 'no reason given'}"
        fields = {
            "job": ref.name,
            "namespace": ref.namespace,
            "condition": "Failed",
            "failed": text_at(status, "failed"),
            "message": message,
        }
        signals.append(
            Signal(
                source=SourceKind.RAY_JOB,
                text=f"{summary}\n{message}" if message else summary,
                reason=reason,
                fields=compact(fields),
                obj=ref if ref.name else None,
                workload=workload_of("Job", metadata) if ref.name else None,
                time=parse_time(condition.get("lastTransitionTime")),
                origin=origin,
            )
        )
    return signals

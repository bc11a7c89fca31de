"""The KubeRay 1.5–1.7 fields pitcrew reads from a RayJob (bot.core.inputs.kuberay), on
RayJobs the real CRD schema accepts: retries counted, deadlines, what KubeRay deletes
after a failure and when."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.app.demo import seed
from bot.core.inputs.kuberay import rayjob_parts
from bot.core.model import Signal
from tests.support.kuberay_crds import validate_kuberay

FIELDS = (
    "backoff_limit",
    "failed_attempts",
    "pre_running_deadline_seconds",
    "status_check_failing_since",
    "ray_job_end_time",
    "deletion_policy",
    "deletion_ttl_seconds",
)


def rayjob(spec: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(seed.seed_rayjob())
    obj["spec"].pop("shutdownAfterJobFinishes", None)
    obj["spec"].update(spec)
    obj["status"] = status
    validate_kuberay(obj)
    return obj


RULES = {
    "deletionStrategy": {
        "deletionRules": [
            {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED", "ttlSeconds": 0}},
            {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 60}},
            {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
        ]
    }
}


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        (
            {"backoffLimit": 3, "preRunningDeadlineSeconds": 600},
            {
                "jobDeploymentStatus": "Retrying",
                "reason": "AppFailed",
                "failed": 2,
                "rayJobInfo": {"endTime": "2025-11-03T10:14:02Z"},
            },
            {
                "backoff_limit": "3",
                "failed_attempts": "2",
                "pre_running_deadline_seconds": "600",
                "ray_job_end_time": "2025-11-03T10:14:02Z",
            },
        ),
        (
            {},
            {
                "jobDeploymentStatus": "Running",
                "jobStatusCheckFailureStartTime": "2025-11-03T10:10:00Z",
            },
            {"backoff_limit": "0", "status_check_failing_since": "2025-11-03T10:10:00Z"},
        ),
        # the first rule on failure that takes evidence with it: workers at once
        (
            RULES,
            {},
            {"backoff_limit": "0", "deletion_policy": "DeleteWorkers", "deletion_ttl_seconds": "0"},
        ),
        (
            {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 30},
            {},
            {
                "backoff_limit": "0",
                "deletion_policy": "DeleteCluster",
                "deletion_ttl_seconds": "30",
            },
        ),
        (
            {
                "deletionStrategy": {
                    "onSuccess": {"policy": "DeleteNone"},
                    "onFailure": {"policy": "DeleteSelf"},
                }
            },
            {},
            {"backoff_limit": "0", "deletion_policy": "DeleteSelf", "deletion_ttl_seconds": "0"},
        ),
    ],
)
def test_rayjob_fields(
    spec: dict[str, Any], status: dict[str, Any], expected: dict[str, str]
) -> None:
    [signal] = [p for p in rayjob_parts(rayjob(spec, status)) if isinstance(p, Signal)]
    assert {k: v for k, v in signal.fields.items() if k in FIELDS} == expected

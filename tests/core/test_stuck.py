"""When a RayJob that has not failed is stuck (bot.core.diagnosis.stuck): past which threshold,
and what the signal says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.diagnosis.stuck import Head, Thresholds, verdict

NOW = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
T = Thresholds()


def ago(seconds: int) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def at(seconds: int) -> datetime:
    return NOW - timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("fields", "head", "said"),
    [
        ({"job_deployment_status": "Initializing", "start_time": ago(599)}, None, None),
        (
            {"rayjob": "j", "job_deployment_status": "Initializing", "start_time": ago(725)},
            Head(present=True, phase="Pending"),
            (
                "RayJobStuckInitializing",
                "RayJob j has been Initializing for 12 min 5 s; its head pod is Pending",
            ),
        ),
        # half the preRunningDeadlineSeconds comes first: before KubeRay fails it
        (
            {
                "rayjob": "j",
                "job_deployment_status": "Initializing",
                "start_time": ago(301),
                "pre_running_deadline_seconds": "600",
            },
            Head(present=False, missing_since=at(301)),
            (
                "RayJobStuckInitializing",
                "RayJob j has been Initializing for 5 min 1 s; its head pod does not exist",
            ),
        ),
        ({"job_deployment_status": "Running"}, Head(present=False, missing_since=at(59)), None),
        (
            {"rayjob": "j", "job_deployment_status": "Running"},
            Head(present=False, missing_since=at(60)),
            (
                "RayJobHeadPodMissing",
                "RayJob j is Running but its head pod has been gone for 1 min 0 s",
            ),
        ),
        (
            {"rayjob": "j", "job_deployment_status": "Running"},
            Head(present=True, ready=False, phase="Running", since=at(90)),
            (
                "RayJobHeadNotReady",
                "RayJob j is Running but its head pod has not been Ready for 1 min 30 s",
            ),
        ),
        ({"job_deployment_status": "Running"}, Head(present=True, ready=True, since=at(900)), None),
        (
            {
                "rayjob": "j",
                "job_deployment_status": "Running",
                "status_check_failing_since": ago(75),
            },
            Head(present=True, ready=True),
            (
                "RayJobDashboardNotAnswering",
                "RayJob j is Running but its dashboard has not "
                "answered KubeRay's job status checks for 1 min 15 s; KubeRay fails it after 300 s "
                "by default",
            ),
        ),
        # failed, complete or waiting RayJobs are not stuck
        ({"job_deployment_status": "Failed", "start_time": ago(9999)}, None, None),
        ({"job_deployment_status": "Waiting", "start_time": ago(9999)}, None, None),
    ],
)
def test_stuck_verdicts(
    fields: dict[str, str], head: Head | None, said: tuple[str, str] | None
) -> None:
    found = verdict(fields, head, NOW, T)
    assert (None if found is None else (found.reason, found.text)) == said

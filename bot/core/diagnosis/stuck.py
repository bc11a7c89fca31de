"""When a RayJob that has not failed is stuck, and what to call it.

Why this exists: KubeRay reports no failure for a RayJob whose RayCluster never comes up
(it stays `Initializing` until `preRunningDeadlineSeconds`, when set, fails it without
saying why: kuberay#1990, #2182), nor, for `RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS`
(300 s by default, `ray-operator/controllers/ray/utils/constant.go` v1.7.0), for a
`Running` RayJob whose head is gone or whose dashboard stopped answering (kuberay#2161,
#3903). This module decides, from what the RayJob and its head pod show at `now`,
whether such a RayJob has been stuck longer than its threshold; the Kubernetes side
(`bot.adapters.kuberay.stuck`) looks, and hands the verdict on as a `ray_job` signal
together with the head pod's and the RayCluster's own state, so the card's root cause
is why (an unschedulable head, a refused quota, an image that cannot be pulled), with
"stuck" only the symptom.

Pure: values in, values out; the clock is `now`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.core.inputs.values import parse_time

# The `ray_job` signal reasons a stuck RayJob is reported with (docs/signals.md).
STUCK_INITIALIZING = "RayJobStuckInitializing"
HEAD_POD_MISSING = "RayJobHeadPodMissing"
HEAD_NOT_READY = "RayJobHeadNotReady"
DASHBOARD_SILENT = "RayJobDashboardNotAnswering"

KUBERAY_STATUS_CHECK_TIMEOUT = timedelta(seconds=300)
"""`DEFAULT_RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS` (utils/constant.go, KubeRay v1.7.0): after
this long without a job status from the dashboard KubeRay fails the RayJob
(`JobStatusCheckTimeoutExceeded`). pitcrew's own thresholds default well below it."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    """How long a RayJob may look stuck before it gets a card."""

    initializing: timedelta = timedelta(minutes=10)
    head: timedelta = timedelta(seconds=60)
    dashboard: timedelta = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class Head:
    """The RayJob's head pod as last seen: absent, or its readiness and since when."""

    present: bool
    ready: bool = False
    phase: str = ""
    since: datetime | None = None  # the Ready condition's lastTransitionTime
    missing_since: datetime | None = None  # when pitcrew first found it absent


@dataclass(frozen=True, slots=True)
class Stuck:
    reason: str
    since: datetime
    text: str


def _ago(now: datetime, since: datetime) -> str:
    seconds = max(int((now - since).total_seconds()), 0)
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def initializing_threshold(fields: Mapping[str, str], thresholds: Thresholds) -> timedelta:
    """`thresholds.initializing`, or half the RayJob's `preRunningDeadlineSeconds` when that
    is sooner: the card comes before KubeRay fails the job without a cause."""
    deadline = fields.get("pre_running_deadline_seconds", "")
    if deadline.isdigit() and int(deadline) > 0:
        return min(thresholds.initializing, timedelta(seconds=int(deadline) / 2))
    return thresholds.initializing


def verdict(
    fields: Mapping[str, str], head: Head | None, now: datetime, thresholds: Thresholds
) -> Stuck | None:
    """The stuck state a RayJob (its `ray_job` signal fields) is in at `now`, if any."""
    deployment = fields.get("job_deployment_status", "")
    name = fields.get("rayjob", "the RayJob")
    if deployment == "Initializing":
        started = parse_time(fields.get("start_time"))
        limit = initializing_threshold(fields, thresholds)
        if started is None or now - started < limit:
            return None
        where = _head_text(head)
        text = f"RayJob {name} has been Initializing for {_ago(now, started)}{where}"
        return Stuck(STUCK_INITIALIZING, started, text)
    if deployment != "Running":
        return None
    silent = parse_time(fields.get("status_check_failing_since"))
    if silent is not None and now - silent >= thresholds.dashboard:
        text = (
            f"RayJob {name} is Running but its dashboard has not answered KubeRay's job status "
            f"checks for {_ago(now, silent)}; KubeRay fails it after "
            f"{int(KUBERAY_STATUS_CHECK_TIMEOUT.total_seconds())} s by default"
        )
        return Stuck(DASHBOARD_SILENT, silent, text)
    if head is None:
        return None
    if not head.present:
        gone = head.missing_since
        if gone is None or now - gone < thresholds.head:
            return None
        text = f"RayJob {name} is Running but its head pod has been gone for {_ago(now, gone)}"
        return Stuck(HEAD_POD_MISSING, gone, text)
    if not head.ready and head.since is not None and now - head.since >= thresholds.head:
        text = (
            f"RayJob {name} is Running but its head pod has not been Ready for "
            f"{_ago(now, head.since)}"
        )
        return Stuck(HEAD_NOT_READY, head.since, text)
    return None


def _head_text(head: Head | None) -> str:
    if head is None:
        return ""
    if not head.present:
        return "; its head pod does not exist"
    if head.ready:
        return "; its head pod is Ready"
    return f"; its head pod is {head.phase or 'not Ready'}"

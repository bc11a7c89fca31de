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

How long a state has lasted is never the difference between pitcrew's clock and a
timestamp someone else's clock wrote (with the API server's clock an hour off, a
13-second-old RayJob was "Initializing for 60 min"; the other way, no card came). Each
state's start is given on pitcrew's clock (`Since`, `Head.since`): when pitcrew first
saw it, made earlier (`began`) only for a state already so at pitcrew's first look, by
the age the API server's own clock gives it (its `Date` less the state's timestamp).

Pure: values in, values out; the clock is `now`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

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
    """The RayJob's head pod as last seen: absent, or its readiness; `since`: when it
    became absent or not Ready, on pitcrew's clock (`began`)."""

    present: bool
    ready: bool = False
    phase: str = ""
    since: datetime | None = None


@dataclass(frozen=True, slots=True)
class Since:
    """When the RayJob's own states began, on pitcrew's clock (`began`): Initializing, and
    its dashboard failing KubeRay's status checks."""

    initializing: datetime | None = None
    dashboard_silent: datetime | None = None


def began(
    first_seen: datetime, stamped: datetime | None = None, server_now: datetime | None = None
) -> datetime:
    """When a state began, on pitcrew's clock: when pitcrew first saw it (`first_seen`),
    or, for a state pitcrew found at its first look, earlier by the age the API server
    gave it then (`server_now`, the server's `Date`, less `stamped`, the state's own
    timestamp: one clock). Never pitcrew's clock less another's."""
    if stamped is None or server_now is None:
        return first_seen
    return first_seen - max(server_now - stamped, timedelta(0))


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
    fields: Mapping[str, str],
    head: Head | None,
    now: datetime,
    thresholds: Thresholds,
    since: Since = Since(),
) -> Stuck | None:
    """The stuck state a RayJob (its `ray_job` signal fields) is in at `now`, if any; how
    long each state has lasted is counted from `since` and `head.since` (pitcrew's clock)."""
    deployment = fields.get("job_deployment_status", "")
    name = fields.get("rayjob", "the RayJob")
    if deployment == "Initializing":
        started = since.initializing
        limit = initializing_threshold(fields, thresholds)
        if started is None or now - started < limit:
            return None
        where = _head_text(head)
        text = f"RayJob {name} has been Initializing for {_ago(now, started)}{where}"
        return Stuck(STUCK_INITIALIZING, started, text)
    if deployment != "Running":
        return None
    silent = since.dashboard_silent
    if silent is not None and now - silent >= thresholds.dashboard:
        text = (
            f"RayJob {name} is Running but its dashboard has not answered KubeRay's job status "
            f"checks for {_ago(now, silent)}; KubeRay fails it after "
            f"{int(KUBERAY_STATUS_CHECK_TIMEOUT.total_seconds())} s by default"
        )
        return Stuck(DASHBOARD_SILENT, silent, text)
    if head is None or head.ready or head.since is None or now - head.since < thresholds.head:
        return None
    if not head.present:
        text = (
            f"RayJob {name} is Running but its head pod has been gone for {_ago(now, head.since)}"
        )
        return Stuck(HEAD_POD_MISSING, head.since, text)
    text = (
        f"RayJob {name} is Running but its head pod has not been Ready for {_ago(now, head.since)}"
    )
    return Stuck(HEAD_NOT_READY, head.since, text)


def _head_text(head: Head | None) -> str:
    if head is None:
        return ""
    if not head.present:
        return "; its head pod does not exist"
    if head.ready:
        return "; its head pod is Ready"
    return f"; its head pod is {head.phase or 'not Ready'}"

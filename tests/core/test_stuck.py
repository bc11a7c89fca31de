"""When a RayJob that has not failed is stuck (bot.core.diagnosis.stuck): past which threshold,
what the signal says, and how long a state has lasted: on pitcrew's clock, from when it was
first seen, never from pitcrew's clock less another's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.diagnosis.stuck import Head, Since, Thresholds, began, verdict

NOW = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
T = Thresholds()
HOUR = timedelta(hours=1)


def at(seconds: int) -> datetime:
    return NOW - timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("fields", "head", "since", "said"),
    [
        ({"job_deployment_status": "Initializing"}, None, Since(initializing=at(599)), None),
        ({"job_deployment_status": "Initializing"}, None, Since(), None),
        (
            {"rayjob": "j", "job_deployment_status": "Initializing"},
            Head(present=True, phase="Pending"),
            Since(initializing=at(725)),
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
                "pre_running_deadline_seconds": "600",
            },
            Head(present=False, since=at(301)),
            Since(initializing=at(301)),
            (
                "RayJobStuckInitializing",
                "RayJob j has been Initializing for 5 min 1 s; its head pod does not exist",
            ),
        ),
        ({"job_deployment_status": "Running"}, Head(present=False, since=at(59)), Since(), None),
        (
            {"rayjob": "j", "job_deployment_status": "Running"},
            Head(present=False, since=at(60)),
            Since(),
            (
                "RayJobHeadPodMissing",
                "RayJob j is Running but its head pod has been gone for 1 min 0 s",
            ),
        ),
        (
            {"rayjob": "j", "job_deployment_status": "Running"},
            Head(present=True, ready=False, phase="Running", since=at(90)),
            Since(),
            (
                "RayJobHeadNotReady",
                "RayJob j is Running but its head pod has not been Ready for 1 min 30 s",
            ),
        ),
        (
            {"job_deployment_status": "Running"},
            Head(present=True, ready=True, since=at(900)),
            Since(),
            None,
        ),
        (
            {"rayjob": "j", "job_deployment_status": "Running"},
            Head(present=True, ready=True),
            Since(dashboard_silent=at(75)),
            (
                "RayJobDashboardNotAnswering",
                "RayJob j is Running but its dashboard has not "
                "answered KubeRay's job status checks for 1 min 15 s; KubeRay fails it after 300 s "
                "by default",
            ),
        ),
        # failed, complete or waiting RayJobs are not stuck
        ({"job_deployment_status": "Failed"}, None, Since(initializing=at(9999)), None),
        ({"job_deployment_status": "Waiting"}, None, Since(initializing=at(9999)), None),
    ],
)
def test_stuck_verdicts(
    fields: dict[str, str], head: Head | None, since: Since, said: tuple[str, str] | None
) -> None:
    found = verdict(fields, head, NOW, T, since)
    assert (None if found is None else (found.reason, found.text)) == said


@pytest.mark.parametrize(
    ("stamped", "server_now", "start"),
    [
        # seen after pitcrew's first look: when it was first seen, whatever the server says
        (NOW - 13 * timedelta(seconds=1) - HOUR, None, NOW),
        (NOW + HOUR, None, NOW),
        # at the first look: the age the server's own clock gives it, an hour off or not
        (NOW - timedelta(minutes=12), NOW, NOW - timedelta(minutes=12)),
        (NOW - timedelta(minutes=12) - HOUR, NOW - HOUR, NOW - timedelta(minutes=12)),
        (NOW - timedelta(minutes=12) + HOUR, NOW + HOUR, NOW - timedelta(minutes=12)),
        (NOW + timedelta(seconds=5), NOW, NOW),  # stamped after the server's now: not later
        (None, NOW, NOW),
    ],
    ids=[
        "server an hour behind",
        "server an hour ahead",
        "at the first look",
        "at the first look, the server an hour behind",
        "at the first look, the server an hour ahead",
        "stamped ahead of the server",
        "no timestamp",
    ],
)
def test_a_state_began_on_pitcrews_clock(
    stamped: datetime | None, server_now: datetime | None, start: datetime
) -> None:
    assert began(NOW, stamped, server_now) == start


def test_a_13_second_old_rayjob_under_a_server_an_hour_off_is_neither_old_nor_never_stuck() -> None:
    """Its startTime written an hour behind (or ahead of) pitcrew's clock, first seen 13 s
    after it started: 13 s old, and stuck once the threshold has passed on pitcrew's clock."""
    for skew in (-HOUR, HOUR):
        first_seen = NOW - timedelta(seconds=13)
        since = Since(initializing=began(first_seen, first_seen + skew - timedelta(seconds=13)))
        fields = {"rayjob": "j", "job_deployment_status": "Initializing"}
        assert verdict(fields, None, NOW, T, since) is None
        later = verdict(fields, None, NOW + timedelta(minutes=10), T, since)
        assert later is not None
        assert later.text == "RayJob j has been Initializing for 10 min 13 s"

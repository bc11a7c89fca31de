"""Evidence that names only its Ray submission id is its RayJob's: one incident, one card.

A daemon with the Kubernetes source on kmock's emulator, evidence posted to its
`POST /ingest` as `pitcrew ingest` or curl would. The seed's driver log names no
cluster, namespace or RayJob: only its last lines name the submission
(`Job 'raysubmit_Qk8vXw2mT3nLp9Rb' failed`, as `ray job submit` prints), or the
sender names it (`workload=RayJobSubmission/raysubmit_…`). The seed's RayJob has
that id as its `status.jobId`. Whether the Kubernetes watch saw the RayJob before
or after the post, the evidence is in one incident keyed by the RayJob, under one
card; an incident opened on the submission id before the RayJob's status was seen
becomes the RayJob's (same card, updated, and said in its thread), and one opened
beside a RayJob incident of its own is merged into it and resolved, saying where.
The daemon runs in this process and is stopped."""

from __future__ import annotations

import copy
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kubernetes.api import RAY_JOBS
from bot.app import wiring
from bot.app.demo import seed as seed_case
from bot.app.settings.loading import load
from bot.app.settings.sections import Settings
from bot.core.model import IncidentState
from tests.e2e.kubernetes.conftest import Emulator, wait_for, write_daemon_config
from tests.support.daemon import SEED, RecordingChat

pytestmark = [pytest.mark.kube]

NS = seed_case.NS
SUBMISSION = "raysubmit_Qk8vXw2mT3nLp9Rb"  # the seed RayJob's status.jobId
HOME = f"kmock/{NS}/RayJob/verl-ppo-qwen"
TITLE = f"RayJob {NS}/verl-ppo-qwen"
ADOPTED = (
    f"Ray job {SUBMISSION} is RayJob {NS}/verl-ppo-qwen's (its status.jobId): "
    "this incident is now that RayJob's."
)
BY_QUERY = f"workload=RayJobSubmission/{SUBMISSION}"
BY_LINES = ""  # the log's own `Job '…' failed` line names it


def write_config(tmp_path: Path, kuberay: Emulator) -> Path:
    return write_daemon_config(tmp_path, kuberay)


@pytest.fixture
def chat() -> RecordingChat:
    return RecordingChat()


@pytest.fixture
def daemon_settings(tmp_path: Path, kuberay: Emulator) -> Settings:
    """The `daemon` of tests/conftest.py with the Kubernetes source on the emulator."""
    return load(write_config(tmp_path, kuberay), {})


@pytest.fixture
def daemon_chat(chat: RecordingChat) -> RecordingChat:
    return chat


def rayjob(**status: str) -> dict[str, Any]:
    """The seed's RayJob with the status KubeRay reports at some point of its life."""
    obj = copy.deepcopy(seed_case.seed_objects()["rayjob"])
    obj["status"] = {"rayClusterName": obj["status"]["rayClusterName"], **status}
    return obj


RUNNING = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "jobId": SUBMISSION}
FAILED = {
    "jobDeploymentStatus": "Failed",
    "jobStatus": "FAILED",
    "jobId": SUBMISSION,
    "reason": "AppFailed",
    "message": "Job entrypoint command failed with exit code 1",
}


def post_driver_log(daemon: wiring.Daemon, query: str, name: str = "driver.log") -> None:
    url = f"http://127.0.0.1:{daemon.http.port}/ingest?origin={name}&{query}"
    body = (SEED / name).read_bytes()
    request = urllib.request.Request(url, data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 202


def rayjob_signals_taken_in(daemon: wiring.Daemon) -> int:
    """How many RayJob status signals the pipeline has taken in (`/metrics`); the RayJob's
    owner is learned before its signal is counted."""
    url = f"http://127.0.0.1:{daemon.http.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = re.search(
        r'^pitcrew_signals_total\{cluster="kmock",source="ray_job"\} (\S+)$', text, re.M
    )
    return int(float(found[1])) if found else 0


def open_keys(daemon: wiring.Daemon) -> list[str]:
    return [view.incident.key for view in daemon.service.incidents()]


def posts(chat: RecordingChat) -> list[Any]:
    return [call for call in chat.calls if call.kind == "post"]


def replies(chat: RecordingChat) -> list[str]:
    return [call.text for call in chat.calls if call.kind == "reply"]


def last_title(chat: RecordingChat) -> str:
    cards = [c.report for c in chat.calls if c.kind in ("post", "update") and c.report]
    return cards[-1].title if cards else ""


@pytest.mark.slow
@pytest.mark.parametrize("query", [BY_QUERY, BY_LINES], ids=["named-by-sender", "named-by-log"])
def test_a_driver_log_naming_a_seen_rayjobs_submission_is_the_rayjobs_incident(
    kuberay: Emulator, daemon: wiring.Daemon, chat: RecordingChat, query: str
) -> None:
    kuberay.create(rayjob(**RUNNING))
    wait_for(lambda: rayjob_signals_taken_in(daemon), 60, "the RayJob's status taken in")

    post_driver_log(daemon, query)

    (card,) = wait_for(lambda: posts(chat), 60, "the card")
    before = last_findings(daemon)
    assert open_keys(daemon) == [HOME]
    (view,) = daemon.service.incidents()
    assert (view.incident.cluster, view.incident.ray_job_id) == ("kmock", SUBMISSION)
    assert card.report.title.endswith(TITLE)
    assert len(posts(chat)) == 1

    # the worker pod's describe names its RayCluster (labels) but no cluster or RayJob
    post_driver_log(daemon, "", "worker-pod.describe.txt")
    wait_for(lambda: len(last_findings(daemon)) > len(before), 60, "the describe's findings")
    assert open_keys(daemon) == [HOME]
    assert len(posts(chat)) == 1


def last_findings(daemon: wiring.Daemon) -> list[str]:
    (view,) = daemon.service.incidents()
    return [r.finding.playbook for r in view.incident.diagnosis.findings]


@pytest.mark.slow
@pytest.mark.parametrize("query", [BY_QUERY, BY_LINES], ids=["named-by-sender", "named-by-log"])
def test_an_incident_on_the_submission_becomes_the_rayjobs_when_the_watch_sees_it(
    kuberay: Emulator, daemon: wiring.Daemon, chat: RecordingChat, query: str
) -> None:
    post_driver_log(daemon, query)
    (card,) = wait_for(lambda: posts(chat), 60, "the card of the submission")
    assert open_keys(daemon) == [f"//RayJobSubmission/{SUBMISSION}"]
    assert card.report.title.endswith(f"RayJobSubmission {SUBMISSION}")
    (before,) = daemon.service.incidents()

    kuberay.create(rayjob(**FAILED))

    wait_for(lambda: open_keys(daemon) == [HOME], 60, "the incident to be the RayJob's")
    wait_for(lambda: ADOPTED in replies(chat), 30, "the card's thread told")
    wait_for(lambda: last_title(chat).endswith(TITLE), 30, "the card to name the RayJob")
    (view,) = daemon.service.incidents()
    assert view.incident.id == before.incident.id
    assert view.incident.cluster == "kmock"
    findings = [r.finding for r in view.incident.diagnosis.findings]
    assert any(f.obj is not None and f.obj.kind == "RayJob" for f in findings)  # the watch's
    assert len(posts(chat)) == 1


def test_an_incident_on_the_submission_merges_into_the_rayjobs_own(
    kuberay: Emulator, daemon: wiring.Daemon, chat: RecordingChat
) -> None:
    failed_without_id = {k: v for k, v in FAILED.items() if k != "jobId"}
    kuberay.create(rayjob(**failed_without_id))  # KubeRay has not recorded the id (yet)
    wait_for(lambda: open_keys(daemon) == [HOME], 60, "the RayJob's own incident")
    (home,) = daemon.service.incidents()
    post_driver_log(daemon, BY_QUERY)
    wait_for(lambda: len(open_keys(daemon)) == 2, 60, "the submission's incident beside it")
    wait_for(lambda: len(posts(chat)) == 2, 60, "both cards")
    stray = next(v.incident for v in daemon.service.incidents() if v.incident.key != HOME)

    kuberay.api.patch(RAY_JOBS, NS, "verl-ppo-qwen", {"status": {"jobId": SUBMISSION}})

    wait_for(lambda: open_keys(daemon) == [HOME], 60, "one incident left")
    where = f"Ray job {SUBMISSION} is RayJob {NS}/verl-ppo-qwen's"
    gone = daemon.store.incident(stray.id)
    assert gone is not None
    assert gone.state is IncidentState.RESOLVED
    assert gone.resolution == f"merged into incident {home.incident.id}: {where}"
    merged = f"This incident is merged into incident {home.incident.id}: {where}."
    merged_in = f"Merged in incident {stray.id}: Ray job {SUBMISSION} is this RayJob's."
    told = wait_for(  # each card's thread also holds its evidence
        lambda: {merged, merged_in} <= set(replies(chat)), 30, "both threads told"
    )
    assert told
    (view,) = daemon.service.incidents()
    assert view.incident.id == home.incident.id
    assert "named-actor-conflict" in view.incident.counts
    assert len(posts(chat)) == 2

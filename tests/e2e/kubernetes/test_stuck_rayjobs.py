"""Stuck RayJobs found, with their cause, on kmock's emulator (the real KubeRay CRDs)
watched by the daemon: a RayJob `Initializing` past its threshold because its head pod
cannot be scheduled gets a card whose root cause is the scheduling failure, with the
stuck RayJob its symptom; a `Running` RayJob whose head pod was deleted gets a card
saying so, long before KubeRay's 300 s status-check timeout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kubernetes.api import PODS
from bot.app import wiring
from bot.app.demo import seed
from bot.app.settings.loading import load
from bot.core.model import Incident, ObjectRef
from tests.e2e.kubernetes.conftest import Emulator, wait_for, write_daemon_config
from tests.support.daemon import RecordingChat, engine

pytestmark = [pytest.mark.kube, pytest.mark.slow]

NAME = "verl-ppo-qwen"
RAYJOB = ObjectRef("RayJob", NAME, seed.NS)


def write_config(tmp_path: Path, kuberay: Emulator, **stuck: str) -> Path:
    return write_daemon_config(tmp_path, kuberay, rayjob_stuck={"poll_interval": "500ms", **stuck})


def rayjob_with(status: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    rayjob = seed.seed_rayjob()
    rayjob["status"] = {"rayClusterName": rayjob["status"]["rayClusterName"], **status}
    return rayjob, seed.cluster_of(rayjob, state="")


def incident(daemon: wiring.Daemon) -> Incident | None:
    views = [v for v in daemon.service.incidents() if v.incident.workload == RAYJOB]
    return views[0].incident if views else None


def stuck_said(daemon: wiring.Daemon) -> Incident | None:
    found = incident(daemon)
    if found is None:
        return None
    stuck = [r for r in found.diagnosis.findings if r.finding.captures.get("stuck")]
    return found if stuck else None


def test_initializing_past_the_threshold_has_the_unschedulable_head_as_root_cause(
    tmp_path: Path, kuberay: Emulator
) -> None:
    started = (datetime.now(UTC) - timedelta(minutes=12)).strftime("%Y-%m-%dT%H:%M:%SZ")
    rayjob, cluster = rayjob_with(
        {"jobDeploymentStatus": "Initializing", "jobStatus": "", "startTime": started}
    )
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/4 nodes are available: 4 Insufficient memory. preemption: 0/4 nodes are "
        "available: 4 No preemption victims found for incoming pod.",
    }
    head = seed.ray_pod(
        cluster,
        f"{cluster['metadata']['name']}-head-8ffkm",
        "head",
        phase="Pending",
        conditions=[unschedulable],
    )
    for obj in (rayjob, cluster, head):
        kuberay.create(obj)
    chat = RecordingChat()
    daemon = wiring.build(load(write_config(tmp_path, kuberay), {}), chat=chat, engine=engine())
    daemon.start()
    try:
        found = wait_for(lambda: stuck_said(daemon), 60, "the stuck RayJob's card")
        primary = found.diagnosis.primary
        assert primary is not None
        assert primary.category == "failed_scheduling_insufficient"
        stuck = next(r for r in found.diagnosis.findings if r.finding.captures.get("stuck"))
        assert stuck.finding.captures["stuck"].startswith(
            f"RayJob {NAME} has been Initializing for 12 min"
        )
        assert stuck.finding.captures["stuck"].endswith("; its head pod is Pending")
        posts = wait_for(lambda: [c for c in chat.calls if c.kind == "post"], 30, "the card")
        assert len(posts) == 1
        assert posts[0].report is not None
        assert posts[0].report.primary.startswith("failed_scheduling_insufficient")
    finally:
        daemon.stop()


def test_running_with_its_head_pod_deleted_is_said_before_kuberays_timeout(
    tmp_path: Path, kuberay: Emulator
) -> None:
    rayjob, cluster = rayjob_with({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"})
    cluster["status"]["state"] = "ready"
    head_name = f"{cluster['metadata']['name']}-head-8ffkm"
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2025-11-03T09:40:00Z"}
    head = seed.ray_pod(
        cluster,
        head_name,
        "head",
        "cpu-node-1",
        container_statuses=[{"name": "ray-head", "restartCount": 0, "state": {"running": {}}}],
        conditions=[ready],
    )
    for obj in (rayjob, cluster, head):
        kuberay.create(obj)
    chat = RecordingChat()
    config = write_config(tmp_path, kuberay, head_not_ready="2s")
    daemon = wiring.build(load(config, {}), chat=chat, engine=engine())
    daemon.start()
    try:
        wait_for(lambda: daemon.sources[-1].counters["polls"] >= 2, 30, "two polls")
        assert incident(daemon) is None  # a Ready head: nothing to say
        deleted = datetime.now(UTC)
        kuberay.api.delete(PODS, seed.NS, head_name)
        found = wait_for(lambda: stuck_said(daemon), 60, "the stuck RayJob's card")
        said = datetime.now(UTC)
        assert (said - deleted).total_seconds() < 300  # KubeRay's own timeout
        stuck = next(r for r in found.diagnosis.findings if r.finding.captures.get("stuck"))
        assert stuck.finding.captures["stuck"].startswith(
            f"RayJob {NAME} is Running but its head pod has been gone for "
        )
        assert stuck.finding.reason == "RayJobHeadPodMissing"
        posts = wait_for(lambda: [c for c in chat.calls if c.kind == "post"], 30, "the card")
        assert len(posts) == 1
    finally:
        daemon.stop()


@pytest.mark.parametrize("skew", [-3600, 3600], ids=["server an hour behind", "an hour ahead"])
def test_a_new_rayjob_is_timed_on_pitcrews_clock_whatever_the_servers(
    tmp_path: Path, kuberay: Emulator, skew: int
) -> None:
    """A RayJob created while pitcrew watches, its startTime written 13 s ago by a clock an
    hour off: stuck once it has been Initializing 3 s as pitcrew saw it, said in seconds
    (it was "Initializing for 60 min" at once, or never said, before)."""
    chat = RecordingChat()
    config = write_config(tmp_path, kuberay, initializing="3s")
    daemon = wiring.build(load(config, {}), chat=chat, engine=engine())
    daemon.start()
    try:
        wait_for(lambda: daemon.sources[-1].counters["polls"] >= 2, 30, "two polls")
        started = datetime.now(UTC) + timedelta(seconds=skew - 13)
        rayjob, cluster = rayjob_with(
            {
                "jobDeploymentStatus": "Initializing",
                "jobStatus": "",
                "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
        created = datetime.now(UTC)
        for obj in (rayjob, cluster):
            kuberay.create(obj)
        found = wait_for(lambda: stuck_said(daemon), 60, "the stuck RayJob's card")
        waited = (datetime.now(UTC) - created).total_seconds()
        stuck = next(r for r in found.diagnosis.findings if r.finding.captures.get("stuck"))
        said = stuck.finding.captures["stuck"]
        assert said.startswith(f"RayJob {NAME} has been Initializing for "), said
        seconds = int(said.split(" for ", 1)[1].split(" s", 1)[0])
        assert 3 <= seconds <= waited + 1, said
        assert waited < 60
    finally:
        daemon.stop()

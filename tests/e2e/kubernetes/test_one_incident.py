"""One failure, one incident, one card: a RayJob on kmock's emulator whose RayCluster's
dashboard is the real local Ray head, with both the Kubernetes source and the Ray source
(RayCluster discovery) on, as in production. The Kubernetes watch sees the RayJob fail;
the Ray source of its cluster sees the Ray job (the RayJob's `status.jobId`) fail; both
key the incident by the RayJob on the cluster `sources.kubernetes` names (here the
kubeconfig context, `kmock`).

The Ray head is the session's: other tests fail jobs on it too (the Slack end-to-end
test's clash, the Ray scenarios), and a RayCluster's Ray jobs are its RayJob's. In a
cluster a RayJob's RayCluster runs that RayJob's jobs alone; here the daemon starts as
one that ran before on its store, with its Ray source's floor for the cluster set to
now, so what failed on the head before this test is not this RayJob's, whatever order
the tests run in."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kubernetes.api import RAY_JOBS
from bot.adapters.ray.bookmarks import Ledger, jobs_key
from bot.app import wiring
from bot.app.demo import seed as seed_case
from bot.app.settings.loading import load
from bot.core.model import ObjectRef
from tests.e2e.kubernetes.conftest import Emulator, wait_for, write_daemon_config
from tests.support.daemon import RecordingChat, engine
from tests.support.ray_jobs import Jobs

pytestmark = [pytest.mark.kube, pytest.mark.ray]

RAYJOB = ObjectRef("RayJob", "verl-ppo-qwen", seed_case.NS)
CLUSTER_NAME = "ml-train.verl-ppo-qwen-raycluster-x7k2p"  # the discovered poller's name


def write_config(tmp_path: Path, kuberay: Emulator, ray_url: str) -> Path:
    # every discovered RayCluster's dashboard is the local head
    discovery = {"enabled": True, "url_template": ray_url, "poll_interval": "1s"}
    return write_daemon_config(tmp_path, kuberay, discovery)


def install(kuberay: Emulator) -> dict[str, Any]:
    """The seed's RayJob, still running, and its RayCluster (whose dashboard is the head)."""
    objects: dict[str, Any] = seed_case.seed_objects()
    rayjob = objects["rayjob"]
    rayjob["status"] = {
        "rayClusterName": rayjob["status"]["rayClusterName"],
        "jobDeploymentStatus": "Running",
        "jobStatus": "RUNNING",
    }
    for obj in [*objects["nodes"], rayjob, objects["cluster"]]:
        kuberay.create(obj)
    return objects


def fail_rayjob(kuberay: Emulator, submission_id: str) -> None:
    """What KubeRay reports once the RayJob's Ray job failed."""
    status = {
        "jobDeploymentStatus": "Failed",
        "jobStatus": "FAILED",
        "jobId": submission_id,
        "reason": "AppFailed",
        "message": "Job entrypoint command failed with exit code 3",
    }
    kuberay.api.patch(RAY_JOBS, seed_case.NS, RAYJOB.name, {"status": status})


def seen_so_far(daemon: wiring.Daemon) -> str:
    """The open incidents and the discovery's pollers, for a wait that timed out."""
    incidents = [
        (v.incident.key, [str(f.finding.category) for f in v.incident.diagnosis.findings])
        for v in daemon.service.incidents()
    ]
    return f"incidents {incidents}, discovery {daemon.sources[1].status()['clusters']}"


@pytest.mark.slow
def test_a_rayjob_failing_in_both_sources_is_one_incident_and_one_card(
    tmp_path: Path, kuberay: Emulator, jobs: Jobs
) -> None:
    chat = RecordingChat()
    settings = load(write_config(tmp_path, kuberay, jobs.url), {})
    daemon = wiring.build(settings, chat=chat, engine=engine())
    now = int(time.time() * 1000)  # Ray's clock: milliseconds since the epoch
    daemon.store.set_bookmark(jobs_key(CLUSTER_NAME), Ledger(now, now).dump())
    daemon.start()
    try:
        install(kuberay)
        discovery = daemon.sources[1]
        wait_for(lambda: discovery.status()["clusters"], 90, "the RayCluster's dashboard polled")
        # KubeRay names the submission and records it in the RayJob's status before
        # it submits, so the Ray source can map the job to its RayJob from the start.
        submission = f"rayjob-verl-ppo-qwen-{uuid.uuid4().hex[:8]}"
        running = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "jobId": submission}
        kuberay.api.patch(RAY_JOBS, seed_case.NS, RAYJOB.name, {"status": running})
        assert jobs.submit("exit_3.py", submission_id=submission) == submission
        assert jobs.wait(submission, timeout=120)["status"] == "FAILED"
        fail_rayjob(kuberay, submission)

        def both_sources_seen() -> Any:
            # Every finding the incident was given, as stored: its diagnosis keeps one
            # finding per class, and both sources see the job exit with code 3.
            views = [v for v in daemon.service.incidents() if v.incident.workload == RAYJOB]
            findings = [f for v in views for f in daemon.store.findings(v.incident.id)]
            by_ray = any(f.fields.get("k8s_cluster") == "kmock" for f in findings)
            by_kube = any(f.obj is not None and f.obj.kind == "RayJob" for f in findings)
            return views if by_ray and by_kube else None

        try:
            (view,) = wait_for(both_sources_seen, 120, "findings from both sources")
        except AssertionError as timeout:
            raise AssertionError(f"{timeout}; so far: {seen_so_far(daemon)}") from timeout
        incident = view.incident
        assert incident.key == "kmock/ml-train/RayJob/verl-ppo-qwen"
        assert incident.cluster == "kmock"
        assert incident.ray_job_id == submission
        assert len(daemon.service.incidents()) == 1
        posts = wait_for(lambda: [c for c in chat.calls if c.kind == "post"], 60, "the card")
        assert len(posts) == 1
    finally:
        daemon.stop()

"""Evidence that outlives the cluster, on a real local Ray and kmock's emulator: a RayJob's
Ray job fails because its actor's process died; KubeRay marks the RayJob Failed and, a
second later, deletes its RayCluster (as `shutdownAfterJobFinishes` does). The bundle
captured at the failure still holds the driver log and the actor's death cause, and the
file is in the card's thread."""

from __future__ import annotations

import io
import json
import tarfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kubernetes.api import RAY_CLUSTERS, RAY_JOBS
from bot.app import wiring
from bot.app.demo import seed
from bot.app.settings.loading import load
from bot.core.model import ObjectRef
from tests.e2e.kubernetes.conftest import Emulator, wait_for, write_daemon_config
from tests.support.daemon import RecordingChat, engine
from tests.support.ray_jobs import Jobs

pytestmark = [pytest.mark.kube, pytest.mark.ray, pytest.mark.slow]

RAYJOB = ObjectRef("RayJob", "verl-ppo-qwen", seed.NS)


def write_config(tmp_path: Path, kuberay: Emulator, ray_url: str) -> Path:
    # every RayCluster's dashboard is the local head; no poller of its own here
    return write_daemon_config(tmp_path, kuberay, {"enabled": False, "url_template": ray_url})


def files_of(body: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        found: dict[str, bytes] = {}
        for member in tar.getmembers():
            data = tar.extractfile(member)
            if data is not None:
                found[member.name] = data.read()
        return found


def test_the_bundle_keeps_the_driver_log_and_the_actors_death_after_the_cluster_is_gone(
    tmp_path: Path, kuberay: Emulator, jobs: Jobs
) -> None:
    objects: dict[str, Any] = seed.seed_objects()
    rayjob, cluster = objects["rayjob"], objects["cluster"]
    submission = f"rayjob-verl-ppo-qwen-{uuid.uuid4().hex[:8]}"
    rayjob["status"] = {
        "rayClusterName": rayjob["status"]["rayClusterName"],
        "jobDeploymentStatus": "Running",
        "jobStatus": "RUNNING",
        "jobId": submission,
    }
    for obj in [*objects["nodes"], rayjob, cluster, *objects["pods"]]:
        kuberay.create(obj)
    chat = RecordingChat()
    daemon = wiring.build(
        load(write_config(tmp_path, kuberay, jobs.url), {}), chat=chat, engine=engine()
    )
    daemon.start()
    try:
        assert jobs.submit("actor_dies.py", submission_id=submission) == submission
        assert jobs.wait(submission, timeout=120)["status"] == "FAILED"
        failed = {
            "jobDeploymentStatus": "Failed",
            "jobStatus": "FAILED",
            "jobId": submission,
            "reason": "AppFailed",
            "message": "Job entrypoint command failed with exit code 1",
        }
        kuberay.api.patch(RAY_JOBS, seed.NS, RAYJOB.name, {"status": failed})
        time.sleep(1)  # then KubeRay deletes the RayCluster
        kuberay.api.delete(RAY_CLUSTERS, seed.NS, cluster["metadata"]["name"])

        def kept() -> Any:
            views = [v for v in daemon.service.incidents() if v.incident.workload == RAYJOB]
            found = views and daemon.store.bundles(views[0].incident.id)
            return [b for b in found or () if b.name == "failed.tar.gz"]

        # the OOMKilled worker opened the incident (bundle `first`); the RayJob's failure
        # is captured again, before the cluster goes
        [bundle] = wait_for(kept, 90, "the evidence bundle of the failure")
        files = files_of(bundle.body)
        assert b"training step 1" in files["driver.log"], files["README.txt"]
        # the pitcrew's cluster: its kubeconfig context, with no cluster.name configured
        assert files["README.txt"].startswith(
            b"pitcrew evidence bundle of RayJob ml-train/verl-ppo-qwen on cluster kmock"
        )
        [actor] = json.loads(files["actors.json"])
        assert actor["class_name"] == "Trainer"
        assert actor["state"] == "DEAD"
        assert actor["death_cause"]["message"]  # Ray's own words for why it died
        assert "raycluster.yaml" in files
        assert "rayjob.yaml" in files
        assert any(name.startswith("pods/") for name in files)
        assert len(bundle.body) < 1024 * 1024
        attached = wait_for(
            lambda: [c for c in chat.calls if c.kind == "attach"], 60, "the bundle in the thread"
        )
        assert attached[0].text.startswith(f"Evidence bundle of RayJob {seed.NS}/{RAYJOB.name}")
        print(f"bundle: {len(bundle.body)} bytes, {len(files)} files")
    finally:
        daemon.stop()

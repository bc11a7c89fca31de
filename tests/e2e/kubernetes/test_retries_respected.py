"""KubeRay's own retries respected, end to end: a RayJob with `backoffLimit: 3` on kmock's
emulator (the real KubeRay CRDs) whose every attempt is OOMKilled at the same 16Gi limit,
watched by the daemon. KubeRay's statuses are the ones its controller writes
(rayjob_controller.go v1.7.0): `Retrying` with the failure's reason and `status.failed`
for each retried attempt, a new RayCluster per attempt, `Failed` for the last.

One card for all four attempts; while KubeRay will retry, no rerun is offered and the
card says which attempt comes next; from the second identical failure it says retrying
will not help, with the fix (the memory bump) offered; once the retries are spent, the
rerun after the fix is offered too."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.kubernetes.api import PODS, RAY_CLUSTERS, RAY_JOBS
from bot.app import wiring
from bot.app.demo import seed
from bot.app.settings.loading import load
from bot.core.model import Incident, ObjectRef
from tests.e2e.kubernetes.conftest import Emulator, kubeconfig, wait_for
from tests.support.daemon import RecordingChat, engine

pytestmark = [pytest.mark.kube, pytest.mark.slow]

NAME = "verl-ppo-qwen"
RAYJOB = ObjectRef("RayJob", NAME, seed.NS)


def write_config(tmp_path: Path, kuberay: Emulator) -> Path:
    config = {
        "store": {"path": str(tmp_path / "state.db")},
        "http": {"host": "127.0.0.1", "port": 0},
        "notify": {"group_wait": "1s", "group_interval": "1s"},
        "actions": {"enabled": False},
        "sources": {
            "kubernetes": {
                "enabled": True,
                "kubeconfig": str(kubeconfig(tmp_path, kuberay)),
                "context": "kmock",
                "namespaces": [seed.NS],
            },
            "ray_discovery": {"enabled": False},
        },
        "scheduler": {"tick": "200ms"},
    }
    path = tmp_path / "pitcrew.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_attempt(kuberay: Emulator, rayjob: dict[str, Any], n: int, failed: int) -> str:
    """KubeRay's attempt `n`: a new RayCluster (initRayJobStatusIfNeed names one per
    attempt) whose GPU worker is OOMKilled at the group's 16Gi limit."""
    cluster_name = f"{NAME}-raycluster-try{n}"
    status = {
        "jobDeploymentStatus": "Running",
        "jobStatus": "RUNNING",
        "rayClusterName": cluster_name,
        "jobId": f"{NAME}-try{n}",
        "failed": failed,
        "succeeded": 0,
        "startTime": f"2025-11-03T10:0{n}:00Z",
    }
    kuberay.api.patch(RAY_JOBS, seed.NS, NAME, {"status": status})
    attempt = copy.deepcopy(rayjob)
    attempt["status"] = status
    cluster = seed.cluster_of(attempt)
    kuberay.create(cluster)
    kuberay.create(
        seed.ray_pod(
            cluster,
            f"{cluster_name}-gpu-group-worker-x{n}",
            "gpu-group",
            "gpu-a10-node-3",
            container_statuses=seed.oomkilled("ray-worker", f"2025-11-03T10:0{n}:58Z"),
        )
    )
    return cluster_name


def fail_attempt(kuberay: Emulator, cluster_name: str, failed: int, last: bool) -> None:
    """What `checkBackoffLimitAndUpdateStatusIfNeeded` persists, then the `Retrying` case
    deleting the attempt's RayCluster."""
    status = {
        "jobDeploymentStatus": "Failed" if last else "Retrying",
        "jobStatus": "FAILED",
        "reason": "AppFailed",
        "message": "Job entrypoint command failed with exit code 1",
        "failed": failed,
    }
    kuberay.api.patch(RAY_JOBS, seed.NS, NAME, {"status": status})
    if not last:
        kuberay.api.delete(PODS, seed.NS, f"{cluster_name}-gpu-group-worker-x{failed}")
        kuberay.api.delete(RAY_CLUSTERS, seed.NS, cluster_name)


def incident_with(daemon: wiring.Daemon, failed: int) -> Incident | None:
    views = [v for v in daemon.service.incidents() if v.incident.workload == RAYJOB]
    for view in views:
        # the pod's OOMKilled status and the RayJob's may arrive in either order
        if any(a.number == failed and a.cause == "pod_oom_killed" for a in view.incident.attempts):
            return view.incident
    return None


def offers(incident: Incident) -> dict[str, str]:
    return {
        o.action: "offered" if o.offered else o.reason
        for o in incident.diagnosis.actions
        if o.action in ("k8s.bump_memory", "kuberay.recreate_rayjob")
    }


RACE = "KubeRay will retry (attempt {} of 4): a rerun now would race it"
SAID = [
    "KubeRay will retry (attempt 2 of 4). Attempt 1: pod_oom_killed at memory limit 16Gi "
    "(AppFailed).",
    "Retrying will not help: attempts 1–2 of 4 failed the same way (pod_oom_killed at memory "
    "limit 16Gi). KubeRay will retry (attempt 3 of 4) with the same spec unless the fix is "
    "applied first.",
    "Retrying will not help: attempts 1–3 of 4 failed the same way (pod_oom_killed at memory "
    "limit 16Gi). KubeRay will retry (attempt 4 of 4) with the same spec unless the fix is "
    "applied first.",
    "KubeRay's retries are spent and retrying will not help: all 4 attempts failed the same "
    "way (pod_oom_killed at memory limit 16Gi).",
]


def test_four_attempts_with_the_same_oom_are_one_card_and_no_rerun_races_kuberay(
    tmp_path: Path, kuberay: Emulator
) -> None:
    objects = seed.seed_objects()
    rayjob = objects["rayjob"]
    rayjob["spec"]["backoffLimit"] = 3
    rayjob["status"] = {"jobDeploymentStatus": "Initializing", "failed": 0, "succeeded": 0}
    for obj in [*objects["nodes"], rayjob]:
        kuberay.create(obj)
    chat = RecordingChat()
    daemon = wiring.build(load(write_config(tmp_path, kuberay), {}), chat=chat, engine=engine())
    daemon.start()
    try:
        for n in range(1, 5):
            cluster_name = start_attempt(kuberay, rayjob, n, failed=n - 1)
            fail_attempt(kuberay, cluster_name, failed=n, last=n == 4)
            incident = wait_for(lambda n=n: incident_with(daemon, n), 60, f"attempt {n} counted")
            assert incident.diagnosis.text.splitlines()[0] == SAID[n - 1]
            assert [a.number for a in incident.attempts] == list(range(1, n + 1))
            if n < 4:
                assert offers(incident) == {
                    "k8s.bump_memory": "offered",
                    "kuberay.recreate_rayjob": RACE.format(n + 1),
                }
            else:
                assert offers(incident) == {
                    "k8s.bump_memory": "offered",
                    "kuberay.recreate_rayjob": "offered",
                }
        assert len(daemon.service.incidents()) == 1
        wait_for(
            lambda: any(SAID[3] in c.report.diagnosis for c in chat.calls if c.report),
            30,
            "the card saying the retries are spent",
        )
        assert [c.kind for c in chat.calls].count("post") == 1
    finally:
        daemon.stop()

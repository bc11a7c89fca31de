"""KubeRay's own retries respected, end to end: a RayJob with `backoffLimit: 3` on kmock's
emulator (the real KubeRay CRDs) whose every attempt is OOMKilled at the same 16Gi limit,
watched by the daemon. KubeRay's statuses are the ones its controller writes
(rayjob_controller.go v1.7.0): `Retrying` with the failure's reason and `status.failed`
for each retried attempt, a new RayCluster per attempt, `Failed` for the last.

One card for all four attempts; while KubeRay will retry, no rerun is offered and the
card says which attempt comes next; from the second identical failure it says retrying
will not help, with the fix (the memory bump) offered; once the retries are spent, the
rerun after the fix is offered too. Approved then, that plan changes the RayJob's template
(every attempt's RayCluster the finding named is gone) and reruns it with the new limit."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.kuberay import rerun
from bot.adapters.kubernetes import executors as kubernetes
from bot.adapters.kubernetes.api import PODS, RAY_CLUSTERS, RAY_JOBS
from bot.adapters.store.store import Store
from bot.app import wiring
from bot.app.demo import seed
from bot.app.settings.loading import load
from bot.core.actions import approvals
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.model import Incident, ObjectRef, ProposalState
from bot.daemon.executor import Registry
from bot.daemon.ports import Outcome
from bot.daemon.runner import Runner
from bot.daemon.service import Service
from tests.e2e.kubernetes.conftest import Emulator, wait_for, write_daemon_config
from tests.support.daemon import RecordingChat, engine

pytestmark = [pytest.mark.kube, pytest.mark.slow]

NAME = "verl-ppo-qwen"
RAYJOB = ObjectRef("RayJob", NAME, seed.NS)


def write_config(tmp_path: Path, kuberay: Emulator) -> Path:
    """The daemon's config with the executors and an approver the offers need: only what
    this pitcrew could finish is offered (`bot.core.actions.reach`)."""
    path = write_daemon_config(tmp_path, kuberay)
    settings = yaml.safe_load(path.read_text())
    settings["actions"] = {"executors": {"k8s.*": "kubernetes", "kuberay.*": "kuberay"}}
    settings["approvals"] = {"approvers": [{"users": [APPROVER]}]}
    path.write_text(yaml.safe_dump(settings))
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


APPROVER = "U042"


@contextmanager
def kuberay_reruns(kuberay: Emulator) -> Iterator[None]:
    """KubeRay's part in a rerun: the RayJob pitcrew recreated is set Running."""
    stop = threading.Event()

    def play() -> None:
        while not stop.wait(0.05):
            for job in kuberay.api.list_all(RAY_JOBS, seed.NS):
                annotations = job["metadata"].get("annotations") or {}
                state = (job.get("status") or {}).get("jobDeploymentStatus")
                if rerun.RECREATED_FROM in annotations and state != "Running":
                    kuberay.mutate(
                        "rayjobs",
                        seed.NS,
                        job["metadata"]["name"],
                        {"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}},
                    )

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def gpu_limit(cluster_spec: dict[str, Any]) -> str:
    group = next(g for g in cluster_spec["workerGroupSpecs"] if g["groupName"] == "gpu-group")
    return str(group["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"])


def test_the_fix_offered_once_the_retries_are_spent_changes_the_rayjob_and_reruns_it(
    tmp_path: Path, kuberay: Emulator
) -> None:
    """The card's plan after four attempts: the findings named the attempts' RayClusters,
    of which KubeRay deleted three; the bump is aimed at the RayJob's `rayClusterSpec`
    (and its last RayCluster with it), so approving it applies, then the rerun."""
    objects = seed.seed_objects()
    rayjob = objects["rayjob"]
    rayjob["spec"]["backoffLimit"] = 3
    rayjob["status"] = {"jobDeploymentStatus": "Initializing", "failed": 0, "succeeded": 0}
    for obj in [*objects["nodes"], rayjob]:
        kuberay.create(obj)
    daemon = wiring.build(load(write_config(tmp_path, kuberay), {}), engine=engine())
    daemon.start()
    try:
        last = ""
        for n in range(1, 5):
            last = start_attempt(kuberay, rayjob, n, failed=n - 1)
            fail_attempt(kuberay, last, failed=n, last=n == 4)
            wait_for(lambda n=n: incident_with(daemon, n), 60, f"attempt {n} counted")
        incident = wait_for(lambda: incident_with(daemon, 4), 60, "the last attempt")
    finally:
        daemon.stop()
    now = datetime.now(UTC)
    (plan,) = [p for p in approvals.reconcile(incident, (), now) if p.action == "k8s.bump_memory"]
    assert [s.action for s in plan.then] == ["kuberay.recreate_rayjob"]
    assert (plan.params["kind"], plan.params["name"]) == ("RayJob", NAME)
    store = Store(tmp_path / "plan.db")
    store.upsert_incident(incident)
    store.create_proposal(plan)
    recreate = rerun.RecreateRayJobExecutor(kuberay.api)
    recreate.verify_timeout, recreate.poll = 10, 0.05
    registry = Registry({**kubernetes.executors(kuberay.api), recreate.action: recreate})
    runner = Runner(store, registry, clock=lambda: datetime.now(UTC), tell=lambda i, t: None)
    policy = ApprovalPolicy(approvers=(ApproverRule(users=(APPROVER,)),))
    service = Service(store, policy, registry, execute=runner.run)
    old = kuberay.api.get(RAY_JOBS, seed.NS, NAME)
    assert old is not None

    with kuberay_reruns(kuberay):
        answer = service.approve(plan.id, ChatUser(APPROVER), datetime.now(UTC))

    assert answer.outcome is Outcome.APPROVED
    done = store.get_proposal(plan.id)
    assert done is not None
    assert done.state is ProposalState.SUCCEEDED, done.history[-1].reason
    first, second = done.history[-1].reason.split("\nstep 2 of 2 ")
    limit = "containers[ray-worker].resources.limits.memory: 16Gi → 24Gi"
    assert first.splitlines()[:2] == [
        "step 1 of 2 (k8s.bump_memory) applied and verified: RayJob "
        f"{seed.NS}/{NAME}: rayClusterSpec.workerGroupSpecs[gpu-group].{limit}; "
        "rayClusterSpec.workerGroupSpecs[gpu-group].containers[ray-worker].resources."
        "requests.memory: 16Gi → 24Gi",
        f"RayCluster {seed.NS}/{last}: workerGroupSpecs[gpu-group].{limit}; "
        "workerGroupSpecs[gpu-group].containers[ray-worker].resources.requests.memory: "
        "16Gi → 24Gi",
    ]
    assert second.startswith(
        f"(kuberay.recreate_rayjob) applied and verified: RayJob {seed.NS}/{NAME} created"
    )
    cluster = kuberay.api.get(RAY_CLUSTERS, seed.NS, last)
    assert cluster is not None
    assert gpu_limit(cluster["spec"]) == "24Gi"  # the last attempt's cluster, still there
    new = kuberay.api.get(RAY_JOBS, seed.NS, NAME)
    assert new is not None
    assert new["metadata"]["annotations"][rerun.RECREATED_FROM] == old["metadata"]["uid"]
    assert gpu_limit(new["spec"]["rayClusterSpec"]) == "24Gi"
    assert new["status"]["jobDeploymentStatus"] == "Running"

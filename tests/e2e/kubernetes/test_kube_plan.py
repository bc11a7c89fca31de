"""The seed's fix as one plan against kmock's emulator: one approval runs the memory
bump, verifies it, then recreates the RayJob with the new limit, in that order; a first
step that fails stops the plan, runs nothing after it, and the card's thread is told
where (here the test plays KubeRay's controller and sets a recreated RayJob Running)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kuberay import rerun
from bot.adapters.kuberay.rerun import RECREATED_FROM
from bot.adapters.kubernetes import executors as kubernetes
from bot.adapters.kubernetes.api import RAY_CLUSTERS, RAY_JOBS
from bot.adapters.store.store import Store
from bot.core.actions import approvals
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.diagnosis.engine import Engine
from bot.core.inputs import InputPart
from bot.core.model import ActionResult, Incident, Proposal, ProposalState
from bot.daemon.executor import Registry
from bot.daemon.ports import Outcome
from bot.daemon.runner import Runner
from bot.daemon.service import Service
from tests.e2e.kubernetes.conftest import Emulator, of_workload
from tests.e2e.kubernetes.test_kube_seed import CLUSTER, RAYJOB, seeded
from tests.support import kube_objects as o

pytestmark = pytest.mark.kube

__all__ = ["seeded"]  # the seed's objects, watched (a fixture)

APPROVER = "U042"
POLICY = ApprovalPolicy(approvers=(ApproverRule(users=(APPROVER,)),))
LIMIT = "/spec/workerGroupSpecs/0/template/spec/containers/0/resources/limits/memory"


@pytest.fixture
def controller(seeded: tuple[Emulator, Any, Any]) -> Iterator[None]:
    """KubeRay's part: a RayJob pitcrew recreated is set Running."""
    emulator = seeded[0]
    stop = threading.Event()

    def play() -> None:
        while not stop.wait(0.05):
            for job in emulator.api.list_all(RAY_JOBS, o.NS):
                annotations = job["metadata"].get("annotations") or {}
                state = (job.get("status") or {}).get("jobDeploymentStatus")
                if "pitcrew.io/recreated-from" in annotations and state != "Running":
                    emulator.mutate(
                        "rayjobs",
                        o.NS,
                        job["metadata"]["name"],
                        {"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}},
                    )

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(5)


def seed_plan(
    engine: Engine, emulator: Emulator, items: list[InputPart], tmp_path: Path
) -> tuple[Store, Proposal, Registry]:
    """The seed diagnosed from what the source watched, its one plan stored as offered,
    and the daemon's executors of the two kinds it needs."""
    now = datetime.now(UTC)
    incident = Incident(
        id="inc-plan",
        key=f"/{o.NS}/RayJob/verl-ppo-qwen",
        opened_at=now,
        updated_at=now,
        diagnosis=engine.diagnose(of_workload(items, RAYJOB)),
        workload=RAYJOB,
        namespace=o.NS,
    )
    (plan,) = approvals.reconcile(incident, (), now)
    store = Store(tmp_path / "pitcrew.db")
    store.upsert_incident(incident)
    store.create_proposal(plan)
    recreate = rerun.RecreateRayJobExecutor(emulator.api)
    recreate.verify_timeout, recreate.poll = 10, 0.05
    registry = Registry({**kubernetes.executors(emulator.api), recreate.action: recreate})
    return store, plan, registry


def worker_limit(obj: dict[str, Any] | None, spec: str = "") -> str:
    assert obj is not None
    cluster = obj["spec"]["rayClusterSpec"] if spec else obj["spec"]
    container = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    return str(container["resources"]["limits"]["memory"])


def test_one_approval_runs_the_seed_plan_bump_verified_then_the_rerun_with_the_new_limit(
    seeded: tuple[Emulator, Any, list[InputPart]],
    engine: Engine,
    controller: None,
    tmp_path: Path,
) -> None:
    emulator, _, items = seeded
    store, plan, registry = seed_plan(engine, emulator, items, tmp_path)
    assert [plan.action, *(s.action for s in plan.then)] == [
        "k8s.bump_memory",
        "kuberay.recreate_rayjob",
    ]
    old = emulator.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    assert old is not None
    told: list[str] = []
    runner = Runner(
        store, registry, clock=lambda: datetime.now(UTC), tell=lambda i, t: told.append(t)
    )
    service = Service(store, POLICY, registry, execute=runner.run)

    answer = service.approve(plan.id, ChatUser(APPROVER), datetime.now(UTC))

    assert answer.outcome is Outcome.APPROVED
    done = store.get_proposal(plan.id)
    assert done is not None
    assert done.state is ProposalState.SUCCEEDED
    assert [t.to_state for t in done.history][-3:] == [
        ProposalState.APPROVED,
        ProposalState.RUNNING,
        ProposalState.SUCCEEDED,
    ]
    first, second = done.history[-1].reason.split("\nstep 2 of 2 ")
    assert first.startswith(
        f"step 1 of 2 (k8s.bump_memory) applied and verified: RayCluster {o.NS}/{CLUSTER}:"
    )
    assert "16Gi → 24Gi" in first
    assert first.endswith("; in place")
    assert second.startswith(
        "(kuberay.recreate_rayjob) applied and verified: RayJob ml-train/verl-ppo-qwen created"
    )
    assert "ray-worker memory 24Gi × 2" in second  # the rerun was planned after the bump
    assert worker_limit(emulator.api.get(RAY_CLUSTERS, o.NS, CLUSTER)) == "24Gi"
    new = emulator.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    assert new is not None
    assert new["metadata"]["annotations"][RECREATED_FROM] == old["metadata"].get("uid", "")
    assert worker_limit(new, spec="rayClusterSpec") == "24Gi"
    assert new["status"]["jobDeploymentStatus"] == "Running"
    assert told == []


def test_a_first_step_that_fails_stops_the_plan_and_the_thread_is_told_where(
    seeded: tuple[Emulator, Any, list[InputPart]], engine: Engine, tmp_path: Path
) -> None:
    emulator, _, items = seeded
    store, plan, registry = seed_plan(engine, emulator, items, tmp_path)
    old = emulator.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    assert old is not None
    told: list[tuple[str, str]] = []
    runner = Runner(
        store, registry, clock=lambda: datetime.now(UTC), tell=lambda i, t: told.append((i, t))
    )
    service = Service(store, POLICY, registry, execute=lambda pid: None)  # run it below
    assert service.approve(plan.id, ChatUser(APPROVER), datetime.now(UTC)).outcome is (
        Outcome.APPROVED
    )
    # someone raises the limit by hand to 20Gi between the approval and the run
    emulator.api.patch(
        RAY_CLUSTERS, o.NS, CLUSTER, [{"op": "replace", "path": LIMIT, "value": "20Gi"}]
    )

    failed = runner.run(plan.id)

    assert failed is not None
    assert failed.state is ProposalState.FAILED
    assert failed.history[-1].outcome == ActionResult.REFUSED
    where = (
        "the plan stopped at step 1 of 2 (k8s.bump_memory), refused: the target changed "
        "since the preview: now 'RayCluster ml-train/"
    )
    assert failed.history[-1].reason.startswith(where)
    assert failed.history[-1].reason.endswith(
        "; nothing was changed; not run: kuberay.recreate_rayjob"
    )
    assert told == [("inc-plan", f"{plan.id}: {failed.history[-1].reason}")]
    again = emulator.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    assert again is not None
    assert RECREATED_FROM not in (again["metadata"].get("annotations") or {})  # never rerun
    assert again["status"] == old["status"]
    assert worker_limit(emulator.api.get(RAY_CLUSTERS, o.NS, CLUSTER)) == "20Gi"

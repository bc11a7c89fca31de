"""kuberay.recreate_rayjob against kmock's emulator: a failed RayJob is rerun as a RayJob
(the same spec under the same name after the old one is deleted, or `-retry-N` beside
it), its preview shows what will be created, and it is verified when the new RayJob
reaches Running (here the test plays KubeRay's controller and sets that status)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.adapters.kuberay.rerun import RecreateRayJobExecutor, executors
from bot.adapters.kubernetes.api import EVENTS, RAY_JOBS
from bot.adapters.kubernetes.base import EVENT_REASON
from bot.adapters.kubernetes.bump import BumpMemoryExecutor
from bot.core.actions.entrypoint import with_override
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.core.model import Proposal, ProposalState
from bot.daemon.executor import checked
from tests.e2e.kubernetes.conftest import Emulator, install_seed, validate_kuberay, wait_for
from tests.support import kube_objects as o
from tests.support.executors import look, run, verified

pytestmark = pytest.mark.kube

RAYJOB = {"namespace": o.NS, "name": "verl-ppo-qwen"}
BUMP = {"namespace": o.NS, "kind": "RayJob", "name": "verl-ppo-qwen", "group": "gpu-group"}


@pytest.fixture
def seeded(kuberay: Emulator) -> Emulator:
    install_seed(kuberay)
    return kuberay


@pytest.fixture
def controller(seeded: Emulator) -> Iterator[threading.Event]:
    """KubeRay's part: a RayJob pitcrew recreated is set Running."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.05):
            for job in seeded.api.list_all(RAY_JOBS, o.NS):
                annotations = job["metadata"].get("annotations") or {}
                state = (job.get("status") or {}).get("jobDeploymentStatus")
                if "pitcrew.io/recreated-from" in annotations and state != "Running":
                    seeded.mutate(
                        "rayjobs",
                        o.NS,
                        job["metadata"]["name"],
                        {"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}},
                    )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield stop
    stop.set()
    thread.join(5)


def rerun_executor(emulator: Emulator) -> RecreateRayJobExecutor:
    executor = RecreateRayJobExecutor(emulator.api)
    executor.verify_timeout = 10
    executor.poll = 0.05
    return executor


def worker_memory(rayjob: dict[str, Any] | None) -> str:
    assert rayjob is not None
    group = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    return str(group["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"])


def test_the_preview_shows_what_will_be_created_with_the_bump_in_it(seeded: Emulator) -> None:
    executor = rerun_executor(seeded)
    facts, before = look(executor, RAYJOB)
    assert facts == {"kuberay.rayjob_finished": True}
    assert before.splitlines()[0] == (
        "delete RayJob ml-train/verl-ppo-qwen (Failed), then create RayJob "
        "ml-train/verl-ppo-qwen with the same spec"
    )
    assert "  entrypoint: python3 -m verl.trainer.main_ppo" in before
    assert "rayClusterSpec.workerGroupSpecs[gpu-group]: ray-worker memory 16Gi × 2" in before
    run(BumpMemoryExecutor(seeded.api), BUMP, "prop-bump", "U042")
    _, after = look(executor, RAYJOB)
    assert "rayClusterSpec.workerGroupSpecs[gpu-group]: ray-worker memory 24Gi × 2" in after


def test_the_rayjob_is_recreated_under_its_name_and_verified_running(
    seeded: Emulator, controller: threading.Event
) -> None:
    old = seeded.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    assert old is not None
    run(BumpMemoryExecutor(seeded.api), BUMP, "prop-bump", "U042")
    executor = rerun_executor(seeded)
    done = run(executor, RAYJOB, "prop-rerun", "U042")
    assert done.startswith("RayJob ml-train/verl-ppo-qwen created: delete RayJob")

    new = seeded.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen")
    assert new is not None
    validate_kuberay(new)
    assert new["metadata"].get("uid") != old["metadata"]["uid"]  # another incarnation
    assert new["metadata"]["annotations"]["pitcrew.io/recreated-from"] == old["metadata"]["uid"]
    assert new["spec"]["entrypoint"] == old["spec"]["entrypoint"]
    assert worker_memory(new) == "24Gi"  # the bump travels with the rerun
    assert verified(executor, RAYJOB)
    wanted = ("RayJob", "verl-ppo-qwen", new["metadata"].get("uid", ""))
    events = [e for e in seeded.api.list_all(EVENTS, o.NS) if e.get("reason") == EVENT_REASON]
    assert wanted in {
        (
            e["involvedObject"]["kind"],
            e["involvedObject"]["name"],
            e["involvedObject"].get("uid", ""),
        )
        for e in events
    }
    assert run(executor, RAYJOB, "prop-rerun", "U042") == ("already applied by proposal prop-rerun")


def test_a_retry_name_keeps_the_failed_rayjob(
    seeded: Emulator, controller: threading.Event
) -> None:
    params = {**RAYJOB, "naming": "retry"}
    executor = rerun_executor(seeded)
    assert look(executor, params)[1].splitlines()[0] == (
        "create RayJob ml-train/verl-ppo-qwen-retry-1 with the spec of verl-ppo-qwen (Failed)"
    )
    run(executor, params, "prop-retry", "U042")
    assert seeded.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen") is not None
    retry = wait_for(lambda: seeded.api.get(RAY_JOBS, o.NS, "verl-ppo-qwen-retry-1"))
    validate_kuberay(retry)
    assert verified(executor, params)


def test_a_rayjob_that_still_runs_is_not_recreated(seeded: Emulator) -> None:
    seeded.mutate("rayjobs", o.NS, "verl-ppo-qwen", {"status": {"jobDeploymentStatus": "Running"}})
    executor = rerun_executor(seeded)
    why = (
        "RayJob ml-train/verl-ppo-qwen is Running, not Failed or Complete: it is not rerun "
        "while it may still run"
    )
    assert look(executor, RAYJOB) == ({"kuberay.rayjob_finished": False}, f"withheld: {why}")
    with pytest.raises(ActionRefusedError, match="not rerun while it may still run"):
        run(executor, RAYJOB, "prop-x", "U042")


def test_the_playbooks_named_override_is_set_in_the_entrypoint(seeded: Emulator) -> None:
    override = "trainer.ray_wait_register_center_timeout=600"
    _, preview = look(rerun_executor(seeded), {**RAYJOB, "override": override})
    assert f"trainer.nnodes=2 {override}" in preview
    assert with_override("python t.py a.b=1 c=2", "a.b=3") == "python t.py a.b=3 c=2"


def test_the_registry_executor_reruns_a_proposal(seeded: Emulator) -> None:
    executor = executors(seeded.api)["kuberay.recreate_rayjob"]
    now = datetime.now(UTC)
    proposal = Proposal(
        id="p-1",
        incident_id="i-1",
        action="kuberay.recreate_rayjob",
        params=RAYJOB,
        preview="",
        state=ProposalState.OFFERED,
        created_at=now,
        expires_at=now,
        preconditions=("kuberay.rayjob_finished",),
    )
    live = checked(executor, Step.of_proposal(proposal)).live
    assert live.facts == {"kuberay.rayjob_finished": True}
    assert live.preview == (
        "delete RayJob ml-train/verl-ppo-qwen, then create it again with the same spec"
    )

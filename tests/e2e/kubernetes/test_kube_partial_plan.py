"""The seed case on kmock's emulator as operators really start: `pitcrew run` watching the
namespace through the official `kubernetes` client, with only the `kubernetes` executor
kind configured (the `kuberay` kind not yet), or both kinds and an approver who may
approve `k8s.*` only. The bump is offered alone, its card says what the recreate of the
RayJob needs, one approval applies it once; then the old pod is OOM-killed three more
times at its old 16Gi limit (KubeRay does not roll pods on a template change): one
incident all along, and no second bump of the limit already raised. With no approvers
yet, the card says what to configure and offers nothing. With both kinds configured,
the live check runs before anything is stored: exactly one proposal row for the
decision, the failed RayJob recreated; a running RayJob's dying worker is replaced."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.kubernetes.api import PODS, RAY_CLUSTERS
from bot.app import wiring
from bot.app.demo import seed as seed_case
from bot.app.settings.loading import load
from bot.core.model import ObjectRef, ProposalState
from bot.daemon.service import Outcome, console_user
from tests.e2e.kubernetes.conftest import Emulator, install_seed, wait_for, write_daemon_config
from tests.support.daemon import RecordingChat, engine

pytestmark = [pytest.mark.kube, pytest.mark.slow]

RAYJOB = ObjectRef("RayJob", "verl-ppo-qwen", seed_case.NS)
CLUSTER = "verl-ppo-qwen-raycluster-x7k2p"
OOM_POD = f"{CLUSTER}-gpu-group-worker-9zq4f"
BOTH = {"k8s.*": "kubernetes", "kuberay.*": "kuberay"}
TESTER: list[dict[str, Any]] = [{"users": ["console:tester"]}]
NEEDS_KUBERAY = (
    "kuberay.recreate_rayjob would complete it but is not offered: no executor is configured "
    "for kuberay.recreate_rayjob: needs the `kuberay` executor kind in actions.executors "
    '("kuberay.recreate_rayjob": kuberay).'
)
NEEDS_APPROVER = (
    "kuberay.recreate_rayjob would complete it but is not offered: no approver may approve "
    "kuberay.recreate_rayjob in ml-train: needs an approver for kuberay.recreate_rayjob in "
    "ml-train in approvals.approvers."
)


def config(
    tmp_path: Path,
    kuberay: Emulator,
    executors: dict[str, str],
    approvers: list[dict[str, Any]] | None = None,
) -> Path:
    """The emulator's namespace watched, actions on with `executors`, `approvers` (one
    who may approve anything unless said)."""
    path = write_daemon_config(tmp_path, kuberay)
    settings: dict[str, Any] = yaml.safe_load(path.read_text())
    settings["actions"] = {"enabled": True, "executors": executors}
    settings["approvals"] = {"approvers": TESTER if approvers is None else approvers}
    settings["chat"] = {"kind": "console", "console": {"width": 160}}
    path.write_text(yaml.safe_dump(settings))
    return path


def worker_limit(kuberay: Emulator) -> str:
    cluster = kuberay.api.get(RAY_CLUSTERS, seed_case.NS, CLUSTER)
    assert cluster is not None
    group = cluster["spec"]["workerGroupSpecs"][0]
    return str(group["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"])


def oom_again(kuberay: Emulator, n: int) -> None:
    """The kubelet restarted the old pod in place with its old limit; it is killed again."""
    pod = kuberay.api.get(PODS, seed_case.NS, OOM_POD)
    assert pod is not None
    status = copy.deepcopy(pod["status"])
    (container,) = status["containerStatuses"]
    container["restartCount"] = container.get("restartCount", 1) + 1
    container["lastState"]["terminated"]["finishedAt"] = f"2025-11-03T10:2{n}:58Z"
    kuberay.api.patch(PODS, seed_case.NS, OOM_POD, {"status": status})


@pytest.mark.parametrize(
    ("executors", "approvers", "remains"),
    [
        ({"k8s.*": "kubernetes"}, TESTER, NEEDS_KUBERAY),  # the `kuberay` kind not yet
        (BOTH, [{"users": ["console:tester"], "actions": ["k8s.*"]}], NEEDS_APPROVER),
    ],
    ids=["kubernetes-kind-only", "approver-of-k8s-only"],
)
def test_the_bump_alone_is_offered_applied_once_and_one_incident_stays(
    tmp_path: Path,
    kuberay: Emulator,
    executors: dict[str, str],
    approvers: list[dict[str, Any]],
    remains: str,
) -> None:
    install_seed(kuberay)
    chat = RecordingChat()
    settings = load(config(tmp_path, kuberay, executors, approvers), {})
    daemon = wiring.build(settings, chat=chat, engine=engine())
    daemon.start()
    try:
        view = wait_for(
            lambda: next((v for v in daemon.service.incidents() if v.proposals), None),
            60,
            "the seed's incident with its offer",
        )
        (bump,) = view.proposals
        assert (bump.action, bump.then, bump.params["current"]) == (
            "k8s.bump_memory",
            (),
            "16Gi",
        )
        card = wait_for(
            lambda: [c.report for c in chat.calls if c.report and c.report.actions], 30, "card"
        )[-1]
        (offered,) = card.actions  # the bump alone: one Approve button
        assert offered.proposal_id == bump.id
        assert offered.remains.endswith(remains)

        answer = daemon.service.approve(bump.id, console_user("tester"), datetime.now(UTC))
        assert answer.outcome is Outcome.APPROVED, answer.text
        done = wait_for(
            lambda: next(
                (
                    p
                    for p in daemon.service.incidents()[0].proposals
                    if p.state.value in ("succeeded", "failed")
                ),
                None,
            ),
            60,
            "the bump applied",
        )
        assert done.state is ProposalState.SUCCEEDED, done.history[-1].reason
        assert worker_limit(kuberay) == "24Gi"
        incident_id = view.incident.id

        for n in range(3):  # the old pod, still at 16Gi, is OOM-killed three more times
            oom_again(kuberay, n)
        wait_for(
            lambda: daemon.service.incidents()[0].incident.counts.get("pod-oom-killed", 0) >= 4,
            60,
            "three more OOM kills counted",
        )
        (still,) = daemon.service.incidents()
        assert still.incident.id == incident_id
        assert [p.id for p in still.proposals] == [bump.id]  # no second bump
        assert worker_limit(kuberay) == "24Gi"
        assert still.incident.unfinished.startswith("k8s.bump_memory applied and verified; ")
    finally:
        daemon.stop()


def test_with_no_approvers_yet_the_card_says_what_to_configure_and_offers_nothing(
    tmp_path: Path, kuberay: Emulator
) -> None:
    install_seed(kuberay)
    chat = RecordingChat()
    daemon = wiring.build(
        load(config(tmp_path, kuberay, BOTH, approvers=[]), {}), chat=chat, engine=engine()
    )
    daemon.start()
    try:
        card = wait_for(
            lambda: [c.report for c in chat.calls if c.report and c.report.configure],
            60,
            "the seed's card saying what to configure",
        )[-1]
        assert card.title == "Pod OOMKilled at its memory limit: RayJob ml-train/verl-ppo-qwen"
        assert card.actions == ()  # no Approve button nobody may press
        assert card.configure == (
            "an approver for k8s.bump_memory in ml-train in approvals.approvers",
            "an approver for kuberay.recreate_rayjob in ml-train in approvals.approvers",
            "an approver for k8s.replace_worker_pods in ml-train in approvals.approvers",
        )
        (view,) = daemon.service.incidents()
        assert daemon.store.proposals_for_incident(view.incident.id) == ()
        assert worker_limit(kuberay) == "16Gi"
    finally:
        daemon.stop()


def test_with_both_kinds_the_checked_plan_is_the_one_proposal_row(
    tmp_path: Path, kuberay: Emulator
) -> None:
    install_seed(kuberay)
    executors = {"k8s.*": "kubernetes", "kuberay.*": "kuberay"}
    daemon = wiring.build(load(config(tmp_path, kuberay, executors), {}), engine=engine())
    daemon.start()
    try:
        view = wait_for(
            lambda: next((v for v in daemon.service.incidents() if v.proposals), None),
            60,
            "the seed's incident with its offer",
        )
        wait_for(lambda: daemon.pipeline.tracked(view.incident.id) is not None, 10, "tracked")
        (plan,) = daemon.service.incidents()[0].proposals
        assert [plan.action, *(s.action for s in plan.then)] == [
            "k8s.bump_memory",
            "kuberay.recreate_rayjob",  # the seed's RayJob failed: recreated, pods not replaced
        ]
        assert plan.state is ProposalState.OFFERED
        assert len(daemon.store.proposals_for_incident(view.incident.id)) == 1
    finally:
        daemon.stop()


def install_running(kuberay: Emulator) -> dict[str, Any]:
    """The seed with its RayJob still running: one worker OOM-killed and restarted in
    place at 16Gi, the other healthy."""
    objects: dict[str, Any] = seed_case.seed_objects()
    rayjob = objects["rayjob"]
    rayjob["status"] = {
        "rayClusterName": CLUSTER,
        "jobDeploymentStatus": "Running",
        "jobStatus": "RUNNING",
    }
    for obj in [*objects["nodes"], objects["quota"], rayjob, objects["cluster"]]:
        kuberay.create(obj)
    for pod in objects["pods"][:3]:  # the head and both workers (no submitter failed)
        kuberay.create(pod)
    return objects


def test_a_running_rayjobs_plan_replaces_its_dying_worker_with_the_new_limit(
    tmp_path: Path, kuberay: Emulator
) -> None:
    install_running(kuberay)
    executors = {"k8s.*": "kubernetes", "kuberay.*": "kuberay"}
    chat = RecordingChat()
    daemon = wiring.build(
        load(config(tmp_path, kuberay, executors), {}), chat=chat, engine=engine()
    )
    daemon.start()
    try:
        view = wait_for(
            lambda: next((v for v in daemon.service.incidents() if v.proposals), None),
            60,
            "the running RayJob's incident with its offer",
        )
        (plan,) = view.proposals
        assert [plan.action, *(s.action for s in plan.then)] == [
            "k8s.bump_memory",
            "k8s.replace_worker_pods",  # the RayJob runs: its pods renewed, not a rerun
        ]
        answer = daemon.service.approve(plan.id, console_user("tester"), datetime.now(UTC))
        assert answer.outcome is Outcome.APPROVED, answer.text
        done = wait_for(
            lambda: next(
                (
                    p
                    for p in daemon.service.incidents()[0].proposals
                    if p.id == plan.id
                    and p.state in (ProposalState.SUCCEEDED, ProposalState.FAILED)
                ),
                None,
            ),
            60,
            "the plan run",
        )
        assert done.state is ProposalState.SUCCEEDED, done.history[-1].reason
        assert worker_limit(kuberay) == "24Gi"
        assert kuberay.api.get(PODS, seed_case.NS, OOM_POD) is None  # KubeRay makes it anew
        healthy = f"{CLUSTER}-gpu-group-worker-2mdkq"
        assert kuberay.api.get(PODS, seed_case.NS, healthy) is not None  # it keeps running
        card = wait_for(
            lambda: [
                c.report
                for c in chat.calls
                if c.report and c.report.latest and c.report.latest.state is ProposalState.SUCCEEDED
            ],
            30,
            "the card after the plan",
        )[-1]
        assert card.latest is not None
        assert [(s.action, s.state) for s in card.latest.steps] == [
            ("k8s.bump_memory", "applied and verified"),
            ("k8s.replace_worker_pods", "applied and verified"),
        ]
        assert card.latest.steps[1].detail == (
            f"RayCluster {seed_case.NS}/{CLUSTER} workerGroupSpecs[gpu-group]: deleted 1 worker "
            f"pod(s) on an older template: {OOM_POD}"
        )
    finally:
        daemon.stop()

"""The card after every change leads with what happened last: after Approve of the seed's
plan, the plan and each step's outcome (a stop part way says where, why and what is left
undone); an offer that expired is one line of the history, never an action; one list of
numbers on the card (a plan's steps)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.files.playbooks import builtin_engine
from bot.adapters.slack.blocks import APPROVE_ACTION, card
from bot.core.actions import approvals
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.incidents.reports import build_report
from bot.core.inputs.reader import read_stream
from bot.core.model import ActionResult, Incident, ObjectRef, Proposal, StepOutcome

SEED = Path(__file__).resolve().parents[3] / "examples" / "seed"
T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
POLICY = ApprovalPolicy(approvers=(ApproverRule(users=("U042",)),))
BUMPED = (
    "RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p: workerGroupSpecs[gpu-group]"
    ".containers[ray-worker].resources.limits.memory: 16Gi → 24Gi\nserver-side dry-run passed"
)
RECREATED = (
    "RayJob ml-train/verl-ppo-qwen created: delete RayJob ml-train/verl-ppo-qwen (Failed), "
    "then create RayJob ml-train/verl-ppo-qwen with the same spec"
)
NO_EXECUTOR = (
    "no executor is configured for kuberay.recreate_rayjob (actions.executors in the config)"
)
WHAT_BROKE = (
    "*What broke:* Pod `ml-train/verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f` "
    "(container `ray-worker`) was OOMKilled at its 16Gi memory limit (exit code 137)."
)


@pytest.fixture(scope="module")
def seed() -> Incident:
    parts = []
    for path in sorted(SEED.iterdir()):
        parts.extend(read_stream(BytesIO(path.read_bytes()), f"examples/seed/{path.name}"))
    return Incident(
        id="inc-seed000001",
        key="gpu-prod/ml-train/RayJob/verl-ppo-qwen",
        opened_at=T0,
        updated_at=T0,
        diagnosis=builtin_engine([]).diagnose(parts),
        workload=ObjectRef("RayJob", "verl-ppo-qwen", "ml-train"),
        cluster="gpu-prod",
        namespace="ml-train",
    )


def ran(seed: Incident, result: ActionResult, *steps: StepOutcome) -> Proposal:
    """The seed's plan, approved by U042 at 10:02 and run to its end at 10:03."""
    (plan,) = approvals.reconcile(seed, (), T0)
    live = LiveCheck(facts=dict.fromkeys(plan.preconditions, True))
    approved = approvals.approve(plan, ChatUser("U042"), POLICY, T0 + timedelta(minutes=2), live)
    assert isinstance(approved, approvals.Approved)
    running = approvals.start(approved.proposal, T0 + timedelta(minutes=2))
    detail = "\n".join(s.detail for s in steps)
    return approvals.finish(running, T0 + timedelta(minutes=3), result, detail, steps)


def blocks(seed: Incident, proposals: list[Proposal]) -> dict[str, dict[str, Any]]:
    """The card's blocks by kind (their ids without the revision)."""
    message = card(build_report(seed, proposals))
    return {str(b["block_id"]).rsplit(".", 1)[0]: b for b in message.blocks}


def text(block: dict[str, Any]) -> str:
    if "elements" in block:
        return "\n".join(str(e.get("text", "")) for e in block["elements"])
    return str(block["text"]["text"])


def buttons(found: dict[str, dict[str, Any]]) -> list[str]:
    return [
        str(e["action_id"])
        for b in found.values()
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == APPROVE_ACTION
    ]


def test_after_approve_the_seed_card_leads_with_the_plan_and_both_steps_outcomes(
    seed: Incident,
) -> None:
    done = ran(
        seed,
        ActionResult.SUCCEEDED,
        StepOutcome("k8s.bump_memory", ActionResult.SUCCEEDED, BUMPED),
        StepOutcome("kuberay.recreate_rayjob", ActionResult.SUCCEEDED, RECREATED),
    )
    found = blocks(seed, [done])

    assert text(found["status"]) == (
        "*Status:* applied and verified: plan k8s.bump_memory → kuberay.recreate_rayjob · "
        "RayJob verl-ppo-qwen · Cluster gpu-prod · Namespace ml-train"
    )
    first, second, third, *rest = text(found["cause"]).split("\n")
    assert first == (
        "*Last:* plan k8s.bump_memory → kuberay.recreate_rayjob · approved by @U042; "
        "both steps applied and verified"
    )
    assert second == (
        "1. *k8s.bump_memory* · applied and verified: RayCluster ml-train/verl-ppo-qwen-"
        "raycluster-x7k2p: workerGroupSpecs[gpu-group].containers[ray-worker].resources."
        "limits.memory: 16Gi → 24Gi"
    )
    assert third == f"2. *kuberay.recreate_rayjob* · applied and verified: {RECREATED}"
    assert rest[0] == WHAT_BROKE
    assert buttons(found) == []  # decided: no Approve left
    assert [b for b in found if b.startswith("action.")] == []
    *moves, ended = text(found["history"]).split("\n")
    assert moves == [
        "2026-11-03 10:00:00 plan k8s.bump_memory → kuberay.recreate_rayjob offered",
        "2026-11-03 10:02:00 plan k8s.bump_memory → kuberay.recreate_rayjob approved by @U042",
        "2026-11-03 10:02:00 plan k8s.bump_memory → kuberay.recreate_rayjob running",
    ]
    assert ended.startswith(  # one line, cut to the history's width
        "2026-11-03 10:03:00 plan k8s.bump_memory → kuberay.recreate_rayjob applied and "
        "verified: RayCluster ml-train/"
    )


def test_a_plan_stopped_at_step_two_says_where_why_and_what_is_left_undone(
    seed: Incident,
) -> None:
    stopped = ran(
        seed,
        ActionResult.REFUSED,
        StepOutcome("k8s.bump_memory", ActionResult.SUCCEEDED, BUMPED),
        StepOutcome("kuberay.recreate_rayjob", ActionResult.REFUSED, NO_EXECUTOR),
    )
    found = blocks(seed, [stopped])

    assert text(found["status"]).startswith(
        "*Status:* step 1 of 2 applied and verified; step 2 (kuberay.recreate_rayjob) "
        f"refused: {NO_EXECUTOR} · RayJob verl-ppo-qwen"
    )
    assert text(found["cause"]).split("\n")[:5] == [
        "*Last:* plan k8s.bump_memory → kuberay.recreate_rayjob · approved by @U042; "
        "stopped at step 2 of 2 (refused)",
        "1. *k8s.bump_memory* · applied and verified: RayCluster ml-train/verl-ppo-qwen-"
        "raycluster-x7k2p: workerGroupSpecs[gpu-group].containers[ray-worker].resources."
        "limits.memory: 16Gi → 24Gi",
        f"2. *kuberay.recreate_rayjob* · refused: {NO_EXECUTOR}",
        "_Next:_ step 1 (k8s.bump_memory) applied and verified; step 2 "
        f"(kuberay.recreate_rayjob) refused: {NO_EXECUTOR}",
        WHAT_BROKE,
    ]


def test_an_expired_offer_is_one_line_of_the_history_and_no_action(seed: Incident) -> None:
    (plan,) = approvals.reconcile(seed, (), T0)
    (expired,) = approvals.expire_due([plan], T0 + timedelta(hours=1))
    found = blocks(seed, [expired])

    assert [b for b in found if b.startswith("action.")] == []
    assert buttons(found) == []
    assert "expired" not in text(found["cause"])
    history = text(found["history"]).split("\n")
    assert [line for line in history if "expired" in line] == [
        "2026-11-03 11:00:00 plan k8s.bump_memory → kuberay.recreate_rayjob expired: not "
        "approved by 2026-11-03 11:00:00 UTC"
    ]


def test_offers_are_not_numbered_only_a_plans_steps_are(seed: Incident) -> None:
    found = blocks(seed, list(approvals.reconcile(seed, (), T0)))
    decision = text(found["cause"])
    assert "\n1. *k8s.bump_memory*:" in decision
    assert "\n2. *kuberay.recreate_rayjob*:" in decision
    assert buttons(found) == [APPROVE_ACTION]
    assert json.dumps(found["buttons.0"]).count('"style": "primary"') == 1


def test_a_card_nothing_here_can_act_on_says_what_to_configure_and_has_no_approve(
    seed: Incident,
) -> None:
    lacking = [
        dataclasses.replace(
            o,
            offered=False,
            reason="no approver may approve it",
            lacks=f"an approver for {o.action} in ml-train in approvals.approvers",
        )
        if o.offered
        else o
        for o in seed.diagnosis.actions
    ]
    unable = dataclasses.replace(
        seed, diagnosis=dataclasses.replace(seed.diagnosis, actions=tuple(lacking))
    )
    found = blocks(unable, [])
    assert buttons(found) == []
    decision = text(found["cause"]).split("\n")
    assert decision[1] == (
        "*To act:* nothing on this card can be approved here; configure an approver for "
        "k8s.bump_memory in ml-train in approvals.approvers; an approver for "
        "kuberay.recreate_rayjob in ml-train in approvals.approvers; an approver for "
        "k8s.replace_worker_pods in ml-train in approvals.approvers"
    )

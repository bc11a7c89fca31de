"""Which action is the seed card's green button: the root cause's own fix, decided by
the core and stored with each proposal, never by a random proposal id.

The seed incident (examples/seed/: a RayJob's worker OOMKilled at 16Gi) offers the
memory bump and a rerun of the RayJob. Offered in the same second, the rerun used to
be the primary button whenever its id sorted first; it must never be: rerun at 16Gi,
the job fails again. Now the two are one plan, the bump first."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import pytest

from bot.adapters.slack.blocks import APPROVE_ACTION
from bot.adapters.store.store import Store
from bot.core.actions.approvals import reconcile
from bot.core.actions.order import grouped, ordered
from bot.core.incidents.reports import build_report
from bot.core.model import ActionOffer, Incident
from tests.e2e.slack.conftest import T0
from tests.support.slack_emulator import SlackEmulator

pytestmark = pytest.mark.slack

RUNS = 20


def primary_button(message_blocks: list[dict[str, Any]]) -> dict[str, Any]:
    (button,) = [
        element
        for block in message_blocks
        if block["type"] == "actions"
        for element in block["elements"]
        if element.get("style") == "primary"
    ]
    return button


def test_the_seed_cards_primary_button_is_the_plan_that_bumps_first_in_every_run(
    seed_incident: Incident, make_chat: Any, emulator: SlackEmulator
) -> None:
    chat = make_chat()
    primaries = []
    for run in range(RUNS):
        # a new incident id each run: new proposal ids, in either sort order
        incident = dataclasses.replace(seed_incident, id=f"inc-{uuid.uuid4().hex[:10]}")
        with Store() as store:
            store.upsert_incident(incident)
            for proposal in reconcile(incident, (), T0):  # all offered in the same second
                store.create_proposal(proposal)
            stored = store.proposals_for_incident(incident.id)
        # one plan: the bump first, then the rerun (never the rerun alone, never first)
        (plan,) = stored
        assert plan.action == "k8s.bump_memory"
        assert [step.action for step in plan.then] == ["kuberay.recreate_rayjob"]
        assert plan.rank == 0
        chat.post("pitcrew", build_report(incident, stored[::-1]))  # any order in
        button = primary_button(emulator.parents()[run].blocks)
        assert button["action_id"] == APPROVE_ACTION
        assert button["value"] == stored[0].id
        primaries.append(button["text"]["text"])
    assert primaries == ["Approve plan: k8s.bump_memory → kuberay.recreate_rayjob"] * RUNS


def offer(action: str, offered: bool = True) -> ActionOffer:
    return ActionOffer(action, {}, offered, "why", "playbook")


@pytest.mark.parametrize(
    ("diagnosis_order", "card_order"),
    [
        # the root cause's own action first, as the diagnosis lists it
        (
            ["k8s.bump_memory", "kuberay.recreate_rayjob"],
            ["k8s.bump_memory", "kuberay.recreate_rayjob"],
        ),
        # a rerun never before another offered action (it changes what the rerun meets)
        (
            ["kuberay.recreate_rayjob", "k8s.bump_memory"],
            ["k8s.bump_memory", "kuberay.recreate_rayjob"],
        ),
        (
            ["ray.resubmit_job", "k8s.add_shm", "ray.kill_actor"],
            ["k8s.add_shm", "ray.kill_actor", "ray.resubmit_job"],
        ),
        # reruns alone keep the diagnosis's order: nothing is offered to change first
        (
            ["kuberay.recreate_rayjob", "ray.resubmit_job"],
            ["kuberay.recreate_rayjob", "ray.resubmit_job"],
        ),
    ],
)
def test_the_core_orders_offers(diagnosis_order: list[str], card_order: list[str]) -> None:
    assert [o.action for o in ordered([offer(a) for a in diagnosis_order])] == card_order


def test_withheld_offers_come_last_and_do_not_push_a_rerun_down() -> None:
    offers = [offer("k8s.bump_memory", offered=False), offer("kuberay.recreate_rayjob")]
    assert [o.action for o in ordered(offers)] == ["kuberay.recreate_rayjob", "k8s.bump_memory"]


def offer_of(action: str, playbook: str = "pod_oom_killed", offered: bool = True) -> ActionOffer:
    return ActionOffer(action, {}, offered, "why", playbook)


@pytest.mark.parametrize(
    ("offers", "plans"),
    [
        # a change that needs new pods and the rerun of the same playbook: one plan
        (
            [offer_of("kuberay.recreate_rayjob"), offer_of("k8s.bump_memory")],
            [["k8s.bump_memory", "kuberay.recreate_rayjob"]],
        ),
        # a rerun of another playbook's finding stays apart
        (
            [offer_of("k8s.add_shm"), offer_of("ray.resubmit_job", "actor_died")],
            [["k8s.add_shm"], ["ray.resubmit_job"]],
        ),
        # a withheld bump does not take the rerun into a plan
        (
            [offer_of("k8s.bump_memory", offered=False), offer_of("kuberay.recreate_rayjob")],
            [["kuberay.recreate_rayjob"], ["k8s.bump_memory"]],
        ),
        # a change that acts at once (cordon) is not planned with a rerun
        (
            [offer_of("k8s.cordon_node"), offer_of("ray.resubmit_job")],
            [["k8s.cordon_node"], ["ray.resubmit_job"]],
        ),
    ],
)
def test_a_fix_of_several_steps_is_one_plan(
    offers: list[ActionOffer], plans: list[list[str]]
) -> None:
    assert [[o.action for o in group] for group in grouped(offers)] == plans


def test_the_plan_card_shows_its_steps_in_order_with_one_approve(
    seed_incident: Incident, make_chat: Any, emulator: SlackEmulator
) -> None:
    make_chat().post("pitcrew", build_report(seed_incident, reconcile(seed_incident, (), T0)))
    shown = json.dumps(emulator.parents()[0].blocks, ensure_ascii=False)
    assert "*Do:* approve the plan, one step after the other:" in shown
    first = shown.index("1. *k8s.bump_memory*: RayCluster ml-train/")
    second = shown.index("2. *kuberay.recreate_rayjob*: delete RayJob ml-train/verl-ppo-qwen")
    assert first < second
    approves = [
        e
        for b in emulator.parents()[0].blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == APPROVE_ACTION
    ]
    assert [a["text"]["text"] for a in approves] == [
        "Approve plan: k8s.bump_memory → kuberay.recreate_rayjob"
    ]

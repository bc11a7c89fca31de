"""Which action is the seed card's green button: the root cause's own fix, decided by
the core and stored with each proposal, never by a random proposal id.

The seed incident (examples/seed/: a RayJob's worker OOMKilled at 16Gi) offers the
memory bump and a rerun of the RayJob. Offered in the same second, the rerun used to
be the primary button whenever its id sorted first; it must never be: rerun at 16Gi,
the job fails again."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from bot.adapters.slack.blocks import APPROVE_ACTION
from bot.adapters.sqlite.store import Store
from bot.core.actions.order import ordered
from bot.core.approvals import reconcile
from bot.core.model import ActionOffer, Incident
from bot.core.reports import build_report
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


def test_the_seed_cards_primary_button_is_the_memory_bump_in_every_run(
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
        assert [p.action for p in stored] == ["k8s.bump_memory", "kuberay.recreate_rayjob"]
        assert [p.rank for p in stored] == [0, 1]
        chat.post("pitcrew", build_report(incident, stored[::-1]))  # any order in
        button = primary_button(emulator.parents()[run].blocks)
        assert button["action_id"] == APPROVE_ACTION
        assert button["value"] == stored[0].id
        primaries.append(button["text"]["text"])
    assert primaries == ["Approve k8s.bump_memory"] * RUNS


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

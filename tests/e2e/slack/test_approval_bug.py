"""An approval whose live re-check meets a bug of pitcrew's own, through a signed click on
the real Bolt app: the approver is told "Nothing changed" and that it was a pitcrew bug,
the card's thread says the same, the bug is counted by stage and the proposal stays
offered (the service's one error policy at the action seam, `outcome_of`)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from bot.adapters.http.server import HealthServer
from bot.adapters.slack import blocks
from bot.adapters.slack.chat import SlackChat
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.step import Step
from bot.core.model import ProposalState, Report
from bot.daemon.executor import Registry
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Verification
from bot.daemon.service import Service
from tests.e2e.slack.conftest import (
    APPROVER,
    POLICY,
    SeededService,
    click_payload,
    payload_form,
    post,
    sign,
)
from tests.support.slack_emulator import SlackEmulator

pytestmark = pytest.mark.slack


class Buggy:
    """An executor with a defect of pitcrew's own: its plan reads a key that is not there."""

    def plan(self, step: Step) -> Any:
        raise KeyError("limit")

    def check(self, step: Step, plan: Any) -> LiveCheck:
        return LiveCheck()

    def execute(self, step: Step, plan: Any) -> str:
        return ""

    def verify(self, step: Step) -> Verification:
        return Verification(True)


BUG = f"pitcrew bug: KeyError: 'limit' at {__file__}:{inspect.getsourcelines(Buggy.plan)[1] + 1}"
WHY = f"cannot check the target's live state: {BUG}"


def test_an_approval_whose_recheck_meets_a_bug_is_refused_saying_so(
    make_chat: Any,
    emulator: SlackEmulator,
    seeded: SeededService,
    http_server: HealthServer,
    metrics: Metrics,
    seed_report: Report,
) -> None:
    told: list[str] = []
    registry = Registry({"k8s.bump_memory": Buggy()})
    service = Service(
        seeded.store, POLICY, registry, metrics=metrics, tell=lambda i, t: told.append(t)
    )
    chat: SlackChat = make_chat(socket_mode=False)
    chat.bind(service, http=http_server)
    chat.start()
    ts = chat.post("pitcrew", seed_report).split(":")[1]
    offered = seeded.proposal.id

    body = payload_form(click_payload(emulator, blocks.APPROVE_ACTION, offered, ts=ts))
    reply = post(f"http://127.0.0.1:{http_server.port}/slack/events", body, sign(body))
    assert reply.status == 200

    (ephemeral,) = emulator.wait_calls("chat.postEphemeral", 1)
    assert ephemeral.params["user"] == APPROVER
    assert ephemeral.params["text"] == f"Nothing changed: {WHY}."
    plan = "plan k8s.bump_memory → kuberay.recreate_rayjob"
    assert told == [f"{APPROVER}'s approval of {plan} ({offered}) was refused: {WHY}"]
    bugs = metrics.registry.get_sample_value("pitcrew_internal_errors_total", {"stage": "approval"})
    assert bugs == 1.0
    still = seeded.store.get_proposal(offered)
    assert still is not None
    assert still.state is ProposalState.OFFERED
    assert seeded.executed == []

"""Silencers' scopes at the Slack edge: signed `/pitcrew silence`, `/pitcrew unsilence`
and Silence-button requests over real HTTP to the real Bolt app, service and store, by
silencers scoped to workloads and to actions. Allowed: a silence made (or ended);
refused: an ephemeral `Nothing changed: <why>`, a counted refusal, the store unchanged.

The card is the seed's: pod-oom-killed on ml-train/rayjob/verl-ppo-qwen, offering the
plan k8s.bump_memory then kuberay.recreate_rayjob."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest

from bot.adapters.http.server import HealthServer
from bot.adapters.slack import blocks
from bot.adapters.slack.chat import SlackChat
from bot.core.actions.policy import ApprovalPolicy, ApproverRule
from bot.core.model import Report
from bot.daemon.executor import Registry
from bot.daemon.metrics import Metrics
from bot.daemon.service import Service
from tests.e2e.slack.conftest import (
    APPROVER,
    POLICY,
    Reply,
    SeededService,
    click_payload,
    command_body,
    engine,
    form,
    payload_form,
    post,
    sign,
)
from tests.support.faults import Measured
from tests.support.slack_emulator import SlackEmulator

pytestmark = pytest.mark.slack

TRAIN, EVAL, MEM, RAY = "U0TRAIN", "U0EVAL", "U0MEM", "U0RAY"
SCOPED = ApprovalPolicy(
    approvers=POLICY.approvers,
    silencers=(
        ApproverRule(users=(APPROVER,)),
        ApproverRule(users=(TRAIN,), workloads=("ml-train/*",)),
        ApproverRule(users=(EVAL,), workloads=("ml-eval/*",)),
        ApproverRule(
            users=(MEM,), actions=("k8s.bump_memory", "k8s.replace_worker_pods", "kuberay.*")
        ),
        ApproverRule(users=(RAY,), actions=("ray.*",)),
    ),
    teams=POLICY.teams,
)
WORKLOAD = "ml-train/rayjob/verl-ppo-qwen"
BUTTON = f"workload:{WORKLOAD}"


@dataclass
class Edge:
    url: str
    chat: SlackChat
    emulator: SlackEmulator
    seeded: SeededService
    metrics: Metrics
    ts: str

    def command(self, text: str, user: str) -> str:
        """A signed `/pitcrew <text>` by `user`; the answer it got at its response_url."""
        name = f"r{len(self.emulator.responses)}-{user}"
        self._send(form(command_body(self.emulator, text, user=user, response=name)))
        path = f"/response/{name}"
        found = self.emulator.wait_for(
            lambda: [body for at, body in self.emulator.responses if at == path],
            what=f"a response at {path}",
        )
        return "\n".join(b["text"]["text"] for b in found[-1]["blocks"] if b["type"] == "section")

    def silence_click(self, user: str) -> str:
        """A signed click of the card's Silence button by `user`; what they were told."""
        told = len(self.emulator.calls_to("chat.postEphemeral"))
        payload = click_payload(self.emulator, blocks.SILENCE_ACTION, BUTTON, ts=self.ts, user=user)
        self._send(payload_form(payload))
        said: str = self.emulator.wait_calls("chat.postEphemeral", told + 1)[-1].params["text"]
        return said

    def silences(self) -> set[tuple[str, str]]:
        """The active silences, as (author, matchers) pairs."""
        active = self.seeded.store.active_silences(self.chat.app.clock())
        return {(s.author, repr(sorted(s.matchers.items()))) for s in active}

    def refused(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "pitcrew_refused_approvals_total", {"reason": reason}
        )
        return value or 0.0

    def _send(self, body: str) -> Reply:
        started = time.monotonic()
        reply = post(self.url, body, sign(body))
        assert time.monotonic() - started < 3.0, "not acked within Slack's 3 seconds"
        assert reply.status == 200
        return reply


@pytest.fixture
def edge(
    make_chat: Any,
    emulator: SlackEmulator,
    seeded: SeededService,
    http_server: HealthServer,
    metrics: Metrics,
    seed_report: Report,
) -> Edge:
    registry = Registry({})
    offers = engine().library.actions_by_playbook
    service = Service(seeded.store, SCOPED, registry, metrics=metrics, offers=offers)
    chat: SlackChat = make_chat(socket_mode=False, policy=SCOPED)
    chat.bind(service, http=http_server)
    chat.start()
    ref = chat.post("pitcrew", seed_report)
    url = f"http://127.0.0.1:{http_server.port}/slack/events"
    return Edge(url, chat, emulator, seeded, metrics, ref.split(":")[1])


# -- silence --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "text"),
    [
        (TRAIN, "silence inc-seed000001 2h flaky node"),  # the card's workload
        (MEM, "silence inc-seed000001 2h flaky node"),  # the card's actions
        (MEM, "silence pod-oom-killed 2h known"),  # the playbook's actions
        (RAY, "silence gcs-unreachable 2h known"),  # it offers ray.resubmit_job
    ],
)
def test_a_scoped_silencer_silences_within_their_scope(edge: Edge, user: str, text: str) -> None:
    said = edge.command(text, user)
    ((author, _),) = edge.silences()
    assert author == user
    assert "/pitcrew unsilence s-" in said


@pytest.mark.parametrize(
    ("user", "text", "said"),
    [
        (
            EVAL,
            "silence inc-seed000001 2h flaky node",
            f"Nothing changed: {EVAL} may silence only in workloads ml-eval/*; this silence "
            f"mutes workload {WORKLOAD}.",
        ),
        (
            TRAIN,
            "silence pod-oom-killed 2h known",
            f"Nothing changed: {TRAIN} may silence only in workloads ml-train/*; this "
            "silence is not limited to a workload.",
        ),
        (
            RAY,
            "silence inc-seed000001 2h flaky node",
            f"Nothing changed: {RAY} may silence only for actions ray.*; this silence mutes "
            "actions k8s.bump_memory, kuberay.recreate_rayjob.",
        ),
        (
            RAY,
            "silence crash-loop-backoff 2h known",
            f"Nothing changed: {RAY} may silence only for actions ray.*; this silence mutes "
            "cards that offer no action.",
        ),
    ],
)
def test_a_silence_command_outside_the_silencers_scope_is_refused(
    edge: Edge, measured: Measured, user: str, text: str, said: str
) -> None:
    assert edge.command(text, user) == said
    measured.bad_clicks_accepted(len(edge.silences()))
    assert edge.silences() == set()
    assert edge.refused("silence") == 1


def test_the_silence_button_honours_the_silencers_workloads_and_actions(
    edge: Edge, measured: Measured
) -> None:
    assert edge.silence_click(EVAL) == (
        f"Nothing changed: {EVAL} may silence only in workloads ml-eval/*; this silence "
        f"mutes workload {WORKLOAD}."
    )
    assert edge.silence_click(MEM) == (  # the button mutes the workload, whatever it offers
        f"Nothing changed: {MEM} may silence only for actions k8s.bump_memory, "
        "k8s.replace_worker_pods, kuberay.*; this silence is not limited to actions."
    )
    measured.bad_clicks_accepted(len(edge.silences()))
    assert edge.silences() == set()
    assert edge.refused("silence") == 2

    told = edge.silence_click(TRAIN)
    assert edge.silences() == {(TRAIN, repr([("workload", WORKLOAD)]))}
    assert "/pitcrew unsilence s-" in told


# -- unsilence ------------------------------------------------------------------------


def _silenced_by_the_approver(edge: Edge) -> str:
    said = edge.command("silence inc-seed000001 2h flaky node", APPROVER)
    (active,) = edge.seeded.store.active_silences(edge.chat.app.clock())
    assert f"/pitcrew unsilence {active.id}" in said
    return active.id


@pytest.mark.parametrize("user", [TRAIN, MEM])
def test_a_silencer_in_its_scope_ends_a_silence(edge: Edge, user: str) -> None:
    silence_id = _silenced_by_the_approver(edge)
    assert edge.command(f"unsilence {silence_id}", user) == f"Silence `{silence_id}` ended."
    assert edge.silences() == set()


@pytest.mark.parametrize("user", [EVAL, RAY])
def test_a_silencer_out_of_its_scope_cannot_end_a_silence(
    edge: Edge, measured: Measured, user: str
) -> None:
    silence_id = _silenced_by_the_approver(edge)
    said = edge.command(f"unsilence {silence_id}", user)
    measured.bad_clicks_accepted(1 - len(edge.silences()))
    assert said == (
        f"Nothing changed: {user} may not end silence {silence_id}: only its creator "
        f"{APPROVER} may, or a silencer or an approver whose scope covers namespace "
        f"ml-train; workload {WORKLOAD}; actions k8s.bump_memory, kuberay.recreate_rayjob."
    )
    assert len(edge.silences()) == 1
    assert edge.refused("unsilence") == 1

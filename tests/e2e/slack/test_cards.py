"""Incident cards as Slack receives them: the seed incident's card is valid Block Kit
and says what failed, where, why and what can be done; the card's lifecycle
replaces the parent message and removes the buttons once decided; details go
to the thread; hostile text from logs is escaped and kept within every limit,
checked on the payloads the emulator received."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import timedelta
from typing import Any

import pytest

from bot.adapters.slack import blocks
from bot.adapters.slack.blocks import card, md
from bot.adapters.slack.limits import TEXT_BUDGET, cut, fit, text_size
from bot.core.actions import approvals, policy
from bot.core.incidents.reports import build_report
from bot.core.model import (
    ActionResult,
    Incident,
    IncidentState,
    Proposal,
    ProposalState,
    Report,
    ReportAction,
    Severity,
)
from tests.e2e.slack.conftest import CHANNEL, SEED, T0, diagnose_seed
from tests.support.slack_emulator import SlackEmulator, block_kit_errors

pytestmark = pytest.mark.slack

HOSTILE = (
    "<!channel> <!here> <!everyone> <@U123> <#C999> <!subteam^S1> <http://evil|click> "
    "```closing fence``` `tick` & \x07bell\x00nul\x1b[31m \u202eexe.txt\u200f\u2066 end"
)
LOG_HOSTILE = HOSTILE.replace("\x00", "")  # a NUL makes the input binary: refused earlier
PINGS = ("<!channel>", "<!here>", "<!everyone>", "<@U123>", "<#C999>", "<!subteam", "<http")


def texts(value: Any) -> list[str]:
    """Every string in a payload."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return []


def assert_safe(payload: Any) -> None:
    for text in texts(payload):
        for ping in PINGS:
            assert ping not in text, f"{ping!r} reached Slack in {text[:200]!r}"
        assert not re.search(
            r"[\x00-\x08\x0b-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]", text
        )
        assert text.count("```") % 2 == 0, f"unbalanced code fence in {text[:200]!r}"


def buttons(message_blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in message_blocks if b["type"] == "actions" for e in b["elements"]]


# -- the seed incident's card -------------------------------------------------------------


@pytest.mark.slow
def test_the_seed_incident_card_is_valid_and_complete(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report
) -> None:
    chat = make_chat()
    ref = chat.post("pitcrew", seed_report)

    (posted,) = emulator.parents()
    assert ref == f"{CHANNEL}:{posted.ts}"
    assert block_kit_errors(posted.blocks) == []
    (call,) = emulator.calls_to("chat.postMessage")
    assert call.params["unfurl_links"] is False
    assert call.params["unfurl_media"] is False
    assert "link_names" not in call.params
    shown = json.dumps(posted.blocks, ensure_ascii=False)
    header = posted.blocks[0]["text"]["text"]
    assert header.startswith(":rotating_light: Pod OOMKilled at its memory limit")
    assert "RayJob ml-train/verl-ppo-qwen" in header
    assert posted.text.startswith("[CRITICAL] Pod OOMKilled")
    status = posted.blocks[1]["elements"][0]["text"]
    assert status == (
        "*Status:* open · RayJob verl-ppo-qwen · Cluster gpu-prod · Namespace ml-train"
        " · Ray job id raysubmit_Qk8vXw2mT3nLp9Rb"
    )
    # symptoms once, one line each, saying of what
    assert (
        "• named_actor_conflict: Named actor already taken (x2): symptom of pod_oom_killed\n"
        in (json.loads(shown)[5]["text"]["text"])
    )
    assert "worker_died_system_error: Ray worker process died" in shown
    assert "worker-pod.describe.txt: container ray-worker last terminated: OOMKilled" in shown
    assert "16Gi → 24Gi" in shown  # the action's preview
    assert "ray.kill_actor: the clash is a symptom" in shown  # withheld, and why

    approve, reject, silence = buttons(posted.blocks)  # one plan: bump, then rerun
    assert len(seed_report.actions) == 1
    assert approve["action_id"] == blocks.APPROVE_ACTION
    assert approve["value"] == seed_report.actions[0].proposal_id
    assert approve["style"] == "primary"
    assert "16Gi → 24Gi" in approve["confirm"]["text"]["text"]
    assert approve["confirm"]["title"]["text"] == "Approve the plan of 2 steps?"
    assert approve["confirm"]["text"]["text"].endswith(
        "Then kuberay.recreate_rayjob, in order; a step that fails stops the plan."
    )  # the rerun the bump's impact asks for
    assert reject["confirm"]["title"]["text"] == "Reject the plan?"
    assert reject["action_id"] == blocks.REJECT_ACTION
    assert "style" not in reject
    assert silence["value"] == "workload:ml-train/rayjob/verl-ppo-qwen"
    assert "4h" in silence["text"]["text"]
    assert "ml-train/rayjob/verl-ppo-qwen" in silence["confirm"]["text"]["text"]


def test_at_most_one_primary_button_however_many_actions(seed_report: Report) -> None:
    offered = seed_report.actions[0]
    many = tuple(
        dataclasses.replace(offered, proposal_id=f"p-{i:010d}", action=f"k8s.action_{i}")
        for i in range(14)
    )
    message = card(dataclasses.replace(seed_report, actions=many))
    styles = [b.get("style") for b in buttons(message.blocks)]
    assert styles.count("primary") == 1
    assert block_kit_errors(message.blocks) == []
    assert len(message.blocks) <= 50


def test_a_plans_confirmation_names_its_later_steps_however_long_the_first(
    seed_report: Report,
) -> None:
    plan = seed_report.actions[0]
    long = dataclasses.replace(plan, preview="limits.memory: 16Gi → 24Gi " + "x" * 900)
    approve, _, _ = buttons(card(dataclasses.replace(seed_report, actions=(long,))).blocks)
    text = approve["confirm"]["text"]["text"]
    assert len(text) <= 300
    assert text.startswith("limits.memory: 16Gi → 24Gi xxx")
    assert text.endswith(
        "Then kuberay.recreate_rayjob, in order; a step that fails stops the plan."
    )


# -- lifecycle ----------------------------------------------------------------------------


def _lifecycle(incident: Incident, proposal: Proposal) -> list[tuple[str, Report]]:
    """The card as the incident moves: approved by @x -> running -> applied -> resolved."""
    rules = policy.ApprovalPolicy(approvers=(policy.ApproverRule(users=("U0ALICE",)),))
    live = approvals.LiveCheck(
        dict.fromkeys(proposal.preconditions, True), preview=proposal.preview
    )
    decision = approvals.approve(
        proposal, policy.ChatUser("U0ALICE"), rules, T0 + timedelta(minutes=1), live
    )
    assert isinstance(decision, approvals.Approved)
    approved = decision.proposal
    running = approvals.start(approved, T0 + timedelta(minutes=2))
    done = approvals.finish(running, T0 + timedelta(minutes=5), ActionResult.SUCCEEDED)
    resolved = dataclasses.replace(
        incident, state=IncidentState.RESOLVED, resolution="the workload is healthy again"
    )
    return [
        ("approved by @U0ALICE", build_report(incident, (approved,))),
        (
            "running plan k8s.bump_memory → kuberay.recreate_rayjob",
            build_report(incident, (running,)),
        ),
        ("applied and verified", build_report(incident, (done,))),
        ("resolved", build_report(resolved, (done,))),
    ]


def test_lifecycle_updates_replace_the_parent_and_remove_the_buttons(
    make_chat: Any,
    emulator: SlackEmulator,
    seed_incident: Incident,
    seed_proposals: tuple[Proposal, ...],
    seed_report: Report,
) -> None:
    chat = make_chat()
    ref = chat.post("pitcrew", seed_report)
    (bump,) = (p for p in seed_proposals if p.action == "k8s.bump_memory")
    first_ids = {b["block_id"] for b in emulator.parents()[0].blocks}

    for step, (status, report) in enumerate(_lifecycle(seed_incident, bump), start=1):
        chat.update(ref, report)
        (parent,) = emulator.parents()  # still one message: the parent, replaced
        assert parent.updates == step
        assert block_kit_errors(parent.blocks) == []
        assert status in parent.blocks[1]["elements"][0]["text"]
        approvals_left = [
            b for b in buttons(parent.blocks) if b["action_id"] != blocks.SILENCE_ACTION
        ]
        assert approvals_left == []  # decided: no Approve / Reject any more
        assert {b["block_id"] for b in parent.blocks}.isdisjoint(first_ids)
    assert buttons(emulator.parents()[0].blocks) == []  # resolved: not even Silence
    (update,) = emulator.calls_to("chat.update")[-1:]
    assert update.params["channel"] == CHANNEL
    assert update.params["ts"] == ref.split(":")[1]


def test_details_and_progress_go_to_the_thread(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report
) -> None:
    chat = make_chat()
    ref = chat.post("pitcrew", seed_report)
    chat.reply(ref, "k8s.bump_memory running\nlog tail:\n" + HOSTILE)
    (parent,) = emulator.parents()
    (reply,) = emulator.replies(CHANNEL, parent.ts)
    assert "k8s.bump_memory running" in reply.text
    assert block_kit_errors(reply.blocks) == []
    assert_safe({"text": reply.text, "blocks": reply.blocks})


# -- hostile text -------------------------------------------------------------------------


def hostile_report() -> Report:
    long = "A" * 100_000
    action = ReportAction(
        proposal_id="p-0000000001",
        action="k8s.bump_memory " + HOSTILE,
        preview=HOSTILE + long,
        state=ProposalState.OFFERED,
        impact=HOSTILE * 20,
    )
    return Report(
        title=HOSTILE + long,
        severity=Severity.ERROR,
        status="open " + HOSTILE,
        where={"cluster": HOSTILE, "namespace": "ml-train", "workload": "RayJob " + long},
        primary=HOSTILE + long,
        secondary=tuple(HOSTILE + str(i) for i in range(40)),
        evidence=tuple(f"{HOSTILE} line {i} {long}" for i in range(30)),
        diagnosis=(HOSTILE + "\n") * 500,
        actions=(action,) * 12,
        withheld=tuple(HOSTILE for _ in range(30)),
        history=tuple(HOSTILE * 5 for _ in range(40)),
    )


def test_hostile_report_fields_are_escaped_and_within_limits(
    make_chat: Any, emulator: SlackEmulator
) -> None:
    chat = make_chat()
    ref = chat.post("pitcrew", hostile_report())
    chat.update(ref, hostile_report())
    chat.reply(ref, (HOSTILE + "A" * 100_000 + "\n") * 3)

    calls = emulator.calls_to("chat.postMessage") + emulator.calls_to("chat.update")
    assert len(calls) == 3
    assert len(emulator.messages) == 2
    for call in calls:
        sent = {"text": call.params["text"], "blocks": call.params["blocks"]}
        assert block_kit_errors(call.params["blocks"]) == []
        assert len(call.params["text"]) <= 3000
        assert text_size(call.params["blocks"]) <= TEXT_BUDGET
        assert_safe(sent)
        assert "&lt;!channel&gt;" in json.dumps(sent)  # shown, but as text
    assert len(emulator.parents()[0].blocks[0]["text"]["text"]) <= 150


def test_hostile_lines_in_the_seed_logs_stay_harmless(
    make_chat: Any, emulator: SlackEmulator
) -> None:
    """The real engine on the seed logs with hostile text in the very lines that match."""
    driver = (SEED / "driver.log").read_bytes()
    poisoned = driver.replace(
        b"is already taken.", b"is already taken. " + LOG_HOSTILE.encode() + b"B" * 100_000
    )
    poisoned += b"\n" + LOG_HOSTILE.encode() + b"C" * 100_000 + b"\n"
    assert poisoned != driver
    incident = diagnose_seed({"driver.log": poisoned})
    report = build_report(incident, approvals.reconcile(incident, (), T0))
    assert any("<!channel>" in line for line in report.evidence)  # it did reach the card

    make_chat().post("pitcrew", report)
    (call,) = emulator.calls_to("chat.postMessage")
    assert block_kit_errors(call.params["blocks"]) == []
    assert_safe({"text": call.params["text"], "blocks": call.params["blocks"]})
    assert "&lt;!channel&gt;" in json.dumps(call.params["blocks"])


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("<!channel> now", "&lt;!channel&gt; now"),
        ("<@U123>", "&lt;@U123&gt;"),
        ("<http://evil|click>", "&lt;http://evil|click&gt;"),
        ("```x```", "\u02cb\u02cb\u02cbx\u02cb\u02cb\u02cb"),
        ("a\u202eb\u200fc\x07d\ud800e", "abcde"),
    ],
)
def test_untrusted_text_is_escaped(raw: str, shown: str) -> None:
    assert md(raw) == shown


def test_cut_never_splits_an_entity_and_closes_a_fence() -> None:
    assert cut("x" * 15 + "&lt;" + "y" * 10, 22) == "x" * 15 + "…"
    fenced = "```\n" + "y" * 100 + "\n```"
    short = cut(fenced, 40)
    assert len(short) <= 40
    assert short.count("```") == 2


def test_fit_trims_whatever_it_is_given() -> None:
    huge = [
        {
            "type": "section",
            "block_id": f"evidence.{i}",
            "text": {"type": "mrkdwn", "text": "x" * 5000},
        }
        for i in range(80)
    ]
    header = {"type": "header", "text": {"type": "plain_text", "text": "h" * 400}}
    button = {
        "type": "button",
        "action_id": "a" * 400,
        "text": {"type": "plain_text", "text": "b" * 100},
        "value": "v" * 5000,
        "style": "primary",
        "confirm": {
            "title": {"type": "plain_text", "text": "t" * 200},
            "text": {"type": "plain_text", "text": "t" * 2000},
            "confirm": {"type": "plain_text", "text": "c" * 50},
            "deny": {"type": "plain_text", "text": "d" * 50},
        },
    }
    actions = {"type": "actions", "block_id": "buttons.1", "elements": [button, dict(button)]}
    fitted = fit([header, *huge, actions])
    assert block_kit_errors(fitted) == []
    assert fitted[0]["type"] == "header"
    assert fitted[-1]["type"] == "actions"
    assert text_size(fitted) <= TEXT_BUDGET

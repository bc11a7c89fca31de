"""`pitcrew render`: the card of any diagnosis without a Slack workspace, as the Block
Kit JSON chat.postMessage would receive, as console text, and as an HTML preview;
the JSON is checked against Block Kit's limits (50 blocks a message, header 150,
section text 3,000, fields 10 of 2,000, button text 75, value 2,000, action_id and
block_id 255, confirm title 100 and text 300 characters: Slack's Block Kit reference
and slack_sdk.models' validators) by
the Slack emulator's own reading of them, not the bot's constants."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from bot.adapters.store.store import Store
from bot.core.actions.approvals import Approved, LiveCheck, approve, finish, reconcile, start
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.model import ActionResult, StepOutcome
from tests.e2e.slack.conftest import T0, diagnose_seed
from tests.support.cli import SEED, pitcrew
from tests.support.hostile import ELEMENTS, HOSTILE, parsed
from tests.support.slack_emulator import block_kit_errors


def test_render_prints_the_seed_card_as_valid_block_kit() -> None:
    result = pitcrew("render", str(SEED))
    assert result.returncode == 0, result.stderr
    message = json.loads(result.stdout)
    assert set(message) == {"text", "blocks"}
    assert block_kit_errors(message["blocks"]) == []
    assert message["text"].startswith("[CRITICAL] Pod OOMKilled at its memory limit")
    decision = next(b for b in message["blocks"] if b["type"] == "section")["text"]["text"]
    assert decision.startswith(
        "*What broke:* Pod `ml-train/verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f`"
        " (container `ray-worker`) was OOMKilled at its 16Gi memory limit (exit code 137).\n"
        "*Do:* approve the plan, one step after the other:\n1. *k8s.bump_memory*: "
    )


def test_render_as_text_and_an_html_preview() -> None:
    env = {**os.environ, "BROWSER": "false"}  # a browser command that opens nothing
    result = pitcrew("render", str(SEED), "--format", "text", "--open", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    # in a pipe: whole lines, never wrapped at 80 columns, no panel
    assert lines[0] == (
        "== Pod OOMKilled at its memory limit: RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p"
        " [open]"
    )
    assert (
        "What broke: Pod `ml-train/verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f` "
        "(container `ray-worker`) was OOMKilled at its 16Gi memory limit (exit code 137)."
    ) in lines
    assert any(line.startswith("How sure: strong: worker-pod.describe.txt") for line in lines)
    assert not any(line.startswith(("│", "╭")) for line in lines)
    # --open tries to open the page, and says when nothing could
    (shown,) = re.findall(
        r"^preview: (\S+) \(no browser to open it here: open the file\)$",
        result.stderr.decode(),
        re.M,
    )
    page = Path(shown).read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "<b>What broke:</b> Pod <code>ml-train/verl-ppo-qwen-raycluster-x7k2p" in page
    assert (
        '<button class="primary">Approve plan: k8s.bump_memory → kuberay.recreate_rayjob</button>'
        in page
    )
    assert "<script" not in page  # self-contained and inert
    assert "http-equiv" not in page


def test_the_preview_of_a_log_with_hostile_markup_is_inert(tmp_path: Path) -> None:
    """Each family of hostile text on a line the card shows: the page, read by Python's
    HTML parser, has only the preview's own elements and attributes, and the one anchor is
    the playbook's runbook."""
    lines = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>']
    lines += [
        f"torch.OutOfMemoryError: CUDA out of memory. {text.replace(chr(0), '')}"
        for text in HOSTILE.values()
    ]
    log = tmp_path / "driver.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = pitcrew("render", str(log), "--open", env={**os.environ, "BROWSER": "false"})
    assert result.returncode == 0, result.stderr
    (shown,) = re.findall(r"^preview: (\S+) \(", result.stderr.decode(), re.M)
    text = Path(shown).read_text(encoding="utf-8")
    page = parsed(text)
    assert [tag for tag, _ in page.tags if tag not in ELEMENTS] == []
    assert [(t, a) for t, attrs in page.tags for a in attrs if a not in ELEMENTS[t]] == []
    assert [attrs["href"] for tag, attrs in page.tags if tag == "a"] == [
        "https://pytorch.org/docs/stable/notes/cuda.html#environment-variables"
    ]
    assert (
        "CUDA out of memory. &lt;https://evil.example/&quot;onmouseover=&quot;alert(1)&gt;" in text
    )
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in text


def test_render_an_incident_the_store_does_not_hold(tmp_path: Path) -> None:
    result = pitcrew("render", "inc-0000000000", "--store", str(tmp_path / "pitcrew.db"))
    assert (result.returncode, result.stderr.decode()) == (
        2,
        f"pitcrew: {tmp_path / 'pitcrew.db'}: no pitcrew state here; give --store or --config\n",
    )


def test_render_an_incident_of_the_store(tmp_path: Path) -> None:
    incident = diagnose_seed()
    with Store(tmp_path / "pitcrew.db") as store:
        store.upsert_incident(incident)
        for proposal in reconcile(incident, (), T0):
            store.create_proposal(proposal)
    result = pitcrew("render", incident.id, "--store", str(tmp_path / "pitcrew.db"))
    assert result.returncode == 0, result.stderr
    message = json.loads(result.stdout)
    assert block_kit_errors(message["blocks"]) == []
    assert message["text"] == (
        "[CRITICAL] Pod OOMKilled at its memory limit: RayJob ml-train/verl-ppo-qwen (open)"
    )


def test_render_of_a_store_after_approve_leads_with_the_plan_and_both_steps(
    tmp_path: Path,
) -> None:
    """`pitcrew render INCIDENT --store` shows the card as it stands: after the seed's
    plan ran, what happened last first, each step's outcome numbered."""
    incident = diagnose_seed()
    (plan,) = reconcile(incident, (), T0)
    live = LiveCheck(facts=dict.fromkeys(plan.preconditions, True))
    policy = ApprovalPolicy(approvers=(ApproverRule(users=("U042",)),))
    approved = approve(plan, ChatUser("U042"), policy, T0, live)
    assert isinstance(approved, Approved)
    steps = (
        StepOutcome("k8s.bump_memory", ActionResult.SUCCEEDED, "16Gi → 24Gi; in place"),
        StepOutcome("kuberay.recreate_rayjob", ActionResult.SUCCEEDED, "RayJob recreated"),
    )
    done = finish(start(approved.proposal, T0), T0, ActionResult.SUCCEEDED, "", steps)
    with Store(tmp_path / "pitcrew.db") as store:
        store.upsert_incident(incident)
        store.create_proposal(plan)
        store.record_decision(done, plan.version)
    result = pitcrew("render", incident.id, "--store", str(tmp_path / "pitcrew.db"))
    assert result.returncode == 0, result.stderr
    message = json.loads(result.stdout)
    assert block_kit_errors(message["blocks"]) == []
    cause = next(b for b in message["blocks"] if b["block_id"].startswith("cause."))
    assert cause["text"]["text"].split("\n")[:3] == [
        "*Last:* plan k8s.bump_memory → kuberay.recreate_rayjob · approved by @U042; "
        "both steps applied and verified",
        "1. *k8s.bump_memory* · applied and verified: 16Gi → 24Gi; in place",
        "2. *kuberay.recreate_rayjob* · applied and verified: RayJob recreated",
    ]

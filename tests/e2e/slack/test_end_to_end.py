"""The whole loop, for real: `pitcrew run` as a subprocess in Slack's HTTP mode against the
local Slack emulator and the session's real Ray head.

A first job leaves a detached named actor behind in an explicit namespace; a second
job fails because the name "is already taken". The daemon's Ray source finds the
failure, the pipeline diagnoses it (the executor's live check says the actor is
stale), and the card with an Approve button for `ray.kill_actor` is posted to the
emulator. A correctly signed `block_actions` click on that button, from a configured
approver, is POSTed to the daemon's `/slack/events`; the action runs as a Ray job,
the actor is DEAD per the State API, and the card is updated in place (buttons gone,
"applied and verified"). `/pitcrew diagnose <job id>` is then answered by the same
daemon. SIGTERM stops it with exit status 0.

Every wait polls with a generous deadline (a loaded 2-core machine runs Ray, the
daemon and the remediation job at once); the daemon is stopped by its pid only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack import blocks
from bot.adapters.store.store import Store
from bot.core.model import ActionResult
from tests.e2e.slack.conftest import (
    APPROVER,
    SECRET,
    STRANGER,
    click_payload,
    command_body,
    form,
    payload_form,
    post,
    sign,
)
from tests.support.daemon_process import Daemon
from tests.support.ledger import ledger_entry
from tests.support.ray_jobs import Jobs
from tests.support.slack_emulator import BOT_TOKEN, TEAM_ID, Posted, SlackEmulator

pytestmark = [pytest.mark.ray, pytest.mark.slack, pytest.mark.slow]

ACTOR, ACTOR_NAMESPACE = "slack_lock", "pc-slack"  # tests/support/ray_scripts.py: HOLDER_SLACK
NAMESPACE = "ml-slack"  # the Kubernetes namespace sources.ray gives the cluster


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def write_config(tmp_path: Path, emulator: SlackEmulator, ray_url: str) -> Path:
    path = tmp_path / "pitcrew.yaml"
    path.write_text(
        f"""\
store: {{path: {tmp_path / "state.db"}}}
http: {{host: 127.0.0.1, port: 0}}
chat:
  kind: slack
  slack: {{socket_mode: false, api_url: "{emulator.api_url}", channel_interval: 0}}
notify: {{group_wait: 1s, group_interval: 1s, default_channel: pitcrew}}
approvals:
  approvers: [{{users: ["{APPROVER}"], namespaces: ["ml-*"], actions: ["ray.*"]}}]
  teams: ["{TEAM_ID}"]
actions:
  executors: {{"ray.*": ray}}
sources:
  ray: [{{name: local, address: "{ray_url}", namespace: {NAMESPACE}, poll_interval: 1s}}]
scheduler: {{tick: 200ms, approved: 200ms, outbox: 1s, expiry: 1s}}
"""
    )
    return path


@pytest.fixture
def pitcrew_run(
    tmp_path: Path, emulator: SlackEmulator, jobs: Jobs, daemons: list[Daemon]
) -> Daemon:
    """A real `pitcrew run` in Slack's HTTP mode on the session's Ray head, killed by pid
    at teardown if it still runs (`daemons`)."""
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET}
    process = Daemon(tmp_path, "daemon", env=env, config=write_config(tmp_path, emulator, jobs.url))
    daemons.append(process)
    return process


def buttons(message: Posted) -> list[dict[str, Any]]:
    return [
        element
        for block in message.blocks
        if block.get("type") == "actions"
        for element in block.get("elements", [])
        if element.get("action_id") in (blocks.APPROVE_ACTION, blocks.REJECT_ACTION)
    ]


def card_of(emulator: SlackEmulator, submission_id: str) -> Posted | None:
    for message in emulator.parents():
        if submission_id in json.dumps(message.blocks):
            return message
    return None


def kill_button(message: Posted) -> dict[str, Any] | None:
    return next(
        (
            b
            for b in buttons(message)
            if b["action_id"] == blocks.APPROVE_ACTION
            and b["text"]["text"] == "Approve plan: ray.kill_actor → ray.resubmit_job"
        ),
        None,
    )


def status_of(message: Posted) -> str:
    return "\n".join(
        e.get("text", "")
        for b in message.blocks
        if b.get("type") == "context" and str(b.get("block_id", "")).startswith("status.")
        for e in b.get("elements", [])
    )


def actor_states(jobs: Jobs) -> list[str]:
    return [a.state for a in jobs.dashboard.actors(name=ACTOR, namespace=ACTOR_NAMESPACE)]


def test_a_failed_ray_job_is_carded_approved_in_slack_fixed_and_the_card_updated(
    jobs: Jobs, emulator: SlackEmulator, pitcrew_run: Daemon, tmp_path: Path
) -> None:
    holder = jobs.submit("holder_slack.py")
    assert jobs.wait(holder, timeout=180)["status"] == "SUCCEEDED"
    jobs.wait_actor(ACTOR, ACTOR_NAMESPACE, timeout=60)

    pitcrew_run.ready()
    emulator.wait_calls("auth.test", timeout=30)

    clash = jobs.submit("clash_slack.py")
    failed = jobs.wait(clash, timeout=180)
    assert failed["status"] == "FAILED"
    assert f"{ACTOR} (namespace={ACTOR_NAMESPACE}) is already taken" in failed["message"]

    # The card, with the kill offered (the live check found the actor stale).
    card = wait_until(
        lambda: card_of(emulator, clash), 120, f"the card of {clash}\n{pitcrew_run.log()[-3000:]}"
    )
    assert card.channel == "C0PITCREW"
    # the kill and the resubmission it clears the way for: one plan, one Approve
    button = wait_until(lambda: kill_button(card), 60, "an Approve of the kill's plan")
    proposal_id = button["value"]
    shown = json.dumps(card.blocks)
    assert "named_actor_conflict" in shown or "already taken" in shown
    assert NAMESPACE in shown
    assert len([b for b in buttons(card) if b.get("style") == "primary"]) <= 1
    assert actor_states(jobs) == ["ALIVE"]

    # Someone who is not an approver clicks first: refused, nothing runs.
    def click(user: str) -> int:
        body = payload_form(
            click_payload(emulator, blocks.APPROVE_ACTION, proposal_id, ts=card.ts, user=user)
        )
        started = time.monotonic()
        reply = post(pitcrew_run.events, body, sign(body))
        assert time.monotonic() - started < 3.0, "not acked within Slack's 3 seconds"
        return reply.status

    assert click(STRANGER) == 200
    (refusal,) = [c.params for c in emulator.wait_calls("chat.postEphemeral", 1, timeout=30)]
    assert refusal["user"] == STRANGER
    assert "is not an approver" in refusal["text"]
    assert actor_states(jobs) == ["ALIVE"]

    # The approver's click: approved, executed, verified.
    assert click(APPROVER) == 200
    told = emulator.wait_calls("chat.postEphemeral", 2, timeout=30)[1].params
    assert told["user"] == APPROVER
    assert f"approved by {APPROVER}" in told["text"]
    wait_until(lambda: actor_states(jobs) == ["DEAD"], 180, f"{ACTOR} to be DEAD")

    # The card updated in place: no buttons left for the decided action, applied.
    wait_until(
        lambda: "applied and verified: plan ray.kill_actor → ray.resubmit_job" in status_of(card),
        120,
        f"the card to say the kill was applied (status: {status_of(card)!r})",
    )
    assert kill_button(card) is None
    assert not any(b["value"] == proposal_id for b in buttons(card))
    updates = [c for c in emulator.calls_to("chat.update") if c.params.get("ts") == card.ts]
    assert updates, "the card was never updated with chat.update"
    assert card_of(emulator, clash) is card  # one card for the incident, updated
    assert len([m for m in emulator.parents() if clash in json.dumps(m.blocks)]) == 1

    # A second click on the decided proposal changes nothing.
    assert click(APPROVER) == 200
    again = emulator.wait_calls("chat.postEphemeral", 3, timeout=30)[2].params
    assert "Nothing changed" in again["text"]

    # The same daemon answers /pitcrew diagnose for the job (the actor is dead now).
    body = form(command_body(emulator, f"diagnose {clash}", response="e2e-diagnose"))
    reply = post(pitcrew_run.events, body, sign(body))
    assert reply.status == 200
    (answer,) = emulator.wait_for(
        lambda: [b for at, b in emulator.responses if at == "/response/e2e-diagnose"],
        timeout=120,
        what="the diagnose answer",
    )
    said = "\n".join(b["text"]["text"] for b in answer["blocks"] if b["type"] == "section")
    assert f"Ray job {clash} on cluster local: FAILED" in said
    assert "Root cause: named_actor_conflict" in said
    assert "Not offered: ray.kill_actor" in said

    assert pitcrew_run.stop() == 0
    log = pitcrew_run.log()
    assert "received SIGTERM, stopping" in log
    assert log.rstrip().endswith("pitcrew stopped")
    with Store(tmp_path / "state.db") as store:
        entry = ledger_entry(store, proposal_id)
        assert entry is not None
        assert entry.result is ActionResult.SUCCEEDED
        assert entry.approver == APPROVER
        assert [e.proposal_id for e in store.recent_actions(10)].count(proposal_id) == 1

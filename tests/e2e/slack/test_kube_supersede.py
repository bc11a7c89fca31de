"""Refused at approval time, end to end: a daemon with the Kubernetes source and executor
on kmock's emulator and Slack's HTTP mode on the Slack emulator.

The seed's OOM kill is carded with `k8s.bump_memory` offered alone (16Gi → 24Gi: the
recreate of the RayJob needs the `kuberay` executor kind, not configured here). Someone
raises the limit to 20Gi by hand before the approver clicks: the click is refused, the
refusal is said in the card's thread (not only to the clicker), the stale offer is
withdrawn (its buttons go) and a fresh one with the current preview (20Gi → 30Gi) is
offered on the same card; approving that one patches the RayCluster. Deleting the
RayJob then resolves the incident. The daemon runs in this process and is stopped."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kubernetes.api import RAY_CLUSTERS, RAY_JOBS
from bot.adapters.slack import blocks
from bot.app import wiring
from bot.app.settings.loading import load
from bot.app.settings.sections import Settings
from tests.e2e.kubernetes.conftest import Emulator, install_seed, kubeconfig
from tests.e2e.slack.conftest import (
    APPROVER,
    SECRET,
    click_payload,
    payload_form,
    post,
    sign,
)
from tests.support.slack_emulator import BOT_TOKEN, TEAM_ID, Posted, SlackEmulator

pytestmark = [pytest.mark.kube, pytest.mark.slack]

NS = "ml-train"
CLUSTER = "verl-ppo-qwen-raycluster-x7k2p"
# Only the `kubernetes` executor kind here: the recreate of the RayJob (kind `kuberay`) is
# not offered, so the bump is offered alone, saying what would complete it.
BUMP = "Approve k8s.bump_memory"
LIMIT = "/spec/workerGroupSpecs/0/template/spec/containers/0/resources/limits/memory"


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


def write_config(tmp_path: Path, slack: SlackEmulator, kube: Emulator) -> Path:
    path = tmp_path / "pitcrew.yaml"
    path.write_text(
        f"""\
store: {{path: {tmp_path / "state.db"}}}
http: {{host: 127.0.0.1, port: 0}}
chat:
  kind: slack
  slack: {{socket_mode: false, api_url: "{slack.api_url}", channel_interval: 0}}
notify: {{group_wait: 1s, group_interval: 1s, default_channel: pitcrew}}
approvals:
  approvers: [{{users: ["{APPROVER}"], namespaces: ["ml-*"], actions: ["k8s.*", "kuberay.*"]}}]
  teams: ["{TEAM_ID}"]
actions:
  executors: {{"k8s.*": kubernetes}}
sources:
  kubernetes:
    enabled: true
    kubeconfig: {kubeconfig(tmp_path, kube)}
    context: kmock
    namespaces: [{NS}]
  ray_discovery: {{enabled: false}}
scheduler: {{tick: 200ms, approved: 200ms, outbox: 1s, expiry: 1s}}
"""
    )
    return path


@pytest.fixture
def daemon_settings(
    tmp_path: Path, emulator: SlackEmulator, kube: Emulator, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """The `daemon` of tests/conftest.py with the Kubernetes source and executor on kmock's
    emulator and Slack's HTTP mode on the Slack emulator."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    return load(write_config(tmp_path, emulator, kube))


@pytest.fixture
def daemon_chat() -> None:
    return None  # the Slack chat the settings name


def approve_buttons(message: Posted) -> dict[str, str]:
    """Approve button text -> proposal id, as the card shows them now (each button's value
    also names the cluster: `p-…@kmock`, the kubeconfig context's)."""
    return {
        element["text"]["text"]: blocks.address_of(element["value"])[0]
        for block in message.blocks
        if block.get("type") == "actions"
        for element in block.get("elements", [])
        if element.get("action_id") == blocks.APPROVE_ACTION
    }


def the_card(emulator: SlackEmulator) -> Posted | None:
    return next((m for m in emulator.parents() if "verl-ppo-qwen" in json.dumps(m.blocks)), None)


def shown(card: Posted) -> str:
    return json.dumps(card.blocks, ensure_ascii=False)


def thread_texts(emulator: SlackEmulator, card: Posted) -> list[str]:
    return [m.text for m in emulator.replies(card.channel, card.ts)]


def memory_limit(kube: Emulator) -> str:
    cluster = kube.api.get(RAY_CLUSTERS, NS, CLUSTER) or {}
    container = cluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    return str(container["resources"]["limits"]["memory"])


@pytest.mark.slow
def test_a_stale_offer_is_refused_in_the_thread_and_offered_again_with_the_live_preview(
    emulator: SlackEmulator, kube: Emulator, daemon: wiring.Daemon
) -> None:
    install_seed(kube)
    card = wait_until(lambda: the_card(emulator), 60, "the seed's card")
    offered = wait_until(
        lambda: BUMP in approve_buttons(card) and approve_buttons(card),
        30,
        "an Approve button for the bump",
    )
    stale_id = offered[BUMP]
    assert "16Gi → 24Gi" in shown(card)

    # Someone raises the limit by hand before the approver clicks.
    kube.api.patch(
        RAY_CLUSTERS,
        NS,
        CLUSTER,
        [
            {"op": "test", "path": LIMIT, "value": "16Gi"},
            {"op": "replace", "path": LIMIT, "value": "20Gi"},
        ],
    )
    events = f"http://127.0.0.1:{daemon.http.port}/slack/events"

    def click(proposal_id: str) -> None:
        body = payload_form(click_payload(emulator, blocks.APPROVE_ACTION, proposal_id, ts=card.ts))
        assert post(events, body, sign(body)).status == 200

    click(stale_id)
    (told,) = [c.params for c in emulator.wait_calls("chat.postEphemeral", 1, timeout=30)]
    assert told["user"] == APPROVER
    assert "stale: the target changed since the preview" in told["text"]
    assert "offered again with the current preview" in told["text"]

    refusal = wait_until(
        lambda: [t for t in thread_texts(emulator, card) if "was refused" in t],
        30,
        "the refusal in the card's thread",
    )
    assert refusal[0].startswith(
        f"{APPROVER}'s approval of k8s.bump_memory ({stale_id}) was refused"
    )

    fresh_id = wait_until(
        lambda: (
            (approve_buttons(card).get(BUMP) or stale_id) != stale_id
            and approve_buttons(card)[BUMP]
        ),
        30,
        "the fresh offer's button on the card",
    )
    assert stale_id not in approve_buttons(card).values()  # the old buttons are gone
    assert "20Gi → 30Gi" in shown(card)
    assert memory_limit(kube) == "20Gi"  # nothing was changed by the refused click

    click(fresh_id)
    wait_until(lambda: memory_limit(kube) == "30Gi", 30, "the fresh bump to be applied")
    wait_until(  # the bump alone, applied; what it leaves undone is said on the card
        lambda: (
            "applied and verified: k8s.bump_memory" in shown(card)
            and "Pods already running keep their old limit" in shown(card)
        ),
        30,
        "the card to say the bump was applied",
    )

    # The RayJob is deleted: its incident resolves.
    kube.api.delete(RAY_JOBS, NS, "verl-ppo-qwen")
    wait_until(
        lambda: "the RayJob was deleted" in shown(card),
        30,
        "the card to say the incident resolved",
    )

"""Two clusters' pitcrews post to one channel: real `pitcrew run` processes, `eu-a` and
`eu-b`, each with its own store, against the Slack emulator.

Each card names its cluster on its header and in its buttons' values. In HTTP mode
(one Request URL per cluster) each click reaches its own pitcrew and runs there; a
click on eu-b's card routed to eu-a's pitcrew (as a shared app would) changes nothing
in either, is answered "this is cluster eu-b's; its pitcrew answers it", and eu-a's
`/readyz` and `pitcrew status` report it with the fix. On one Socket Mode app (one
app-level token, two connections) the same click makes eu-a's `/readyz` not ready.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack import blocks
from bot.adapters.store.store import Store
from bot.core.model import ProposalState
from tests.e2e.slack.conftest import (
    APPROVER,
    CHANNEL,
    SECRET,
    click_payload,
    payload_form,
    post,
    sign,
)
from tests.support.daemon import DESCRIBE, DRIVER_LOG, SEED, WORKLOAD
from tests.support.daemon_process import Daemon, wait_until
from tests.support.flood import send
from tests.support.slack_emulator import APP_TOKEN, BOT_TOKEN, TEAM_ID, Posted, SlackEmulator
from tests.support.slack_socket_server import SocketModeServer

pytestmark = [pytest.mark.slack, pytest.mark.slow]

SHARED = (
    "clicks for other clusters reached this pitcrew (cluster eu-a): 1 for cluster eu-b "
    "(the last at "
)
FIX = (
    "Two pitcrews share one Slack app, and each misses clicks meant for it. Fix: give each "
    "cluster its own Slack app in Socket Mode, or run HTTP mode with one Request URL per "
    "cluster (docs/operations.md, Several clusters)"
)


def start(
    tmp_path: Path, emulator: SlackEmulator, cluster: str, daemons: list[Daemon], socket: bool
) -> Daemon:
    home = tmp_path / cluster
    home.mkdir()
    (home / "pitcrew.yaml").write_text(
        f"""\
cluster: {{name: {cluster}}}
store: {{path: {home / "state.db"}}}
http: {{host: 127.0.0.1, port: 0}}
chat:
  kind: slack
  slack: {{socket_mode: {str(socket).lower()}, api_url: "{emulator.api_url}", channel_interval: 0}}
notify: {{group_wait: 0s, group_interval: 1s, default_channel: pitcrew}}
approvals:
  approvers: [{{users: ["{APPROVER}"], namespaces: ["ml-*"]}}]
  teams: ["{TEAM_ID}"]
actions:
  executors: {{k8s.bump_memory: echo}}
  echo: {{record: {home / "echo.log"}}}
scheduler: {{tick: 200ms, approved: 200ms, outbox: 1s, expiry: 1s}}
"""
    )
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET}
    if socket:
        env["SLACK_APP_TOKEN"] = APP_TOKEN
    daemon = Daemon(home, cluster, env=env)
    daemons.append(daemon)
    daemon.ready()
    for name, query in ((DRIVER_LOG, f"&workload={WORKLOAD}"), (DESCRIBE, "")):
        assert (
            send(f"{daemon.url}/ingest?origin={name}{query}", (SEED / name).read_bytes()) == "202"
        )
    return daemon


def card_of(emulator: SlackEmulator, cluster: str) -> Posted:
    def found() -> Posted | None:
        for card in emulator.parents():
            header = next(b["text"]["text"] for b in card.blocks if b["type"] == "header")
            if f"[{cluster}]" in header and approve_button(card):
                return card
        return None

    card = wait_until(found, 60, f"{cluster}'s card with its Approve button")
    assert isinstance(card, Posted)
    return card


def approve_button(card: Posted) -> dict[str, Any] | None:
    return next(
        (
            element
            for block in card.blocks
            if block["type"] == "actions"
            for element in block["elements"]
            if element["action_id"] == blocks.APPROVE_ACTION
        ),
        None,
    )


def click(emulator: SlackEmulator, card: Posted) -> dict[str, Any]:
    button = approve_button(card)
    assert button is not None
    return click_payload(emulator, blocks.APPROVE_ACTION, button["value"], ts=card.ts)


def answers(emulator: SlackEmulator) -> list[str]:
    return [str(c.params["text"]) for c in emulator.calls_to("chat.postEphemeral")]


def proposal_states(daemon: Daemon) -> list[ProposalState]:
    with Store(daemon.out.parent / "state.db") as store:
        return [p.state for i in store.open_incidents() for p in store.proposals_for_incident(i.id)]


def readyz(daemon: Daemon) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"{daemon.url}/readyz", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def status(daemon: Daemon) -> str:
    command = [sys.executable, "-m", "bot", "status", "--config", "pitcrew.yaml"]
    done = subprocess.run(
        command, cwd=daemon.out.parent, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_each_card_names_its_cluster_and_each_click_reaches_its_own_pitcrew(
    tmp_path: Path, emulator: SlackEmulator, daemons: list[Daemon]
) -> None:
    eu_a = start(tmp_path, emulator, "eu-a", daemons, socket=False)
    eu_b = start(tmp_path, emulator, "eu-b", daemons, socket=False)
    card_a, card_b = card_of(emulator, "eu-a"), card_of(emulator, "eu-b")
    assert {card_a.channel, card_b.channel} == {CHANNEL}
    button_b = approve_button(card_b)
    assert button_b is not None
    assert button_b["value"].endswith("@eu-b")

    wrong = payload_form(click(emulator, card_b))  # eu-b's card, routed to eu-a's pitcrew
    assert post(eu_a.events, wrong, sign(wrong)).status == 200
    wait_until(lambda: answers(emulator), 30, "the answer to the misrouted click")
    assert answers(emulator) == [
        "[eu-a] Nothing changed: this is cluster eu-b's; its pitcrew answers it."
    ]
    assert proposal_states(eu_a) == proposal_states(eu_b) == [ProposalState.OFFERED]

    for daemon, card in ((eu_a, card_a), (eu_b, card_b)):
        right = payload_form(click(emulator, card))
        assert post(daemon.events, right, sign(right)).status == 200
        wait_until(
            lambda d=daemon: proposal_states(d) == [ProposalState.SUCCEEDED],
            60,
            f"{daemon.out.stem}'s action to run",
        )
        record = (daemon.out.parent / "echo.log").read_text().splitlines()
        assert len(record) == 1
    assert answers(emulator)[1:] == [
        "[eu-a] :white_check_mark: k8s.bump_memory approved by U0ALICE; it runs now. "
        "Follow the card for progress.",
        "[eu-b] :white_check_mark: k8s.bump_memory approved by U0ALICE; it runs now. "
        "Follow the card for progress.",
    ]

    code, ready = readyz(eu_a)  # HTTP mode serves its own clicks: reported, still ready
    assert code == 200
    assert ready["ok"] is True
    assert ready["notes"]["slack_app"].startswith(SHARED)
    assert ready["notes"]["slack_app"].endswith(FIX)
    assert "slack_app" not in readyz(eu_b)[1]["notes"]
    said = status(eu_a)
    assert "cluster: eu-a\n" in said
    assert f"slack app shared: {SHARED}" in said


def test_two_pitcrews_on_one_socket_mode_app_are_reported_not_ready(
    tmp_path: Path, emulator: SlackEmulator, daemons: list[Daemon]
) -> None:
    server = SocketModeServer().start()
    emulator.socket_url = server.url
    try:
        eu_a = start(tmp_path, emulator, "eu-a", daemons, socket=True)
        server.wait_connections(1, timeout=30)
        eu_b = start(tmp_path, emulator, "eu-b", daemons, socket=True)
        server.wait_connections(2, timeout=30)
        wait_until(lambda: server.connected() == 2, 30, "both pitcrews connected")
        assert readyz(eu_a)[0] == 200
        card_b = card_of(emulator, "eu-b")

        envelope = server.send("interactive", click(emulator, card_b), to=0)  # eu-a's socket
        server.wait_ack(envelope, timeout=10)
        wait_until(lambda: answers(emulator), 30, "the answer to the stray click")
        assert answers(emulator) == [
            "[eu-a] Nothing changed: this is cluster eu-b's; its pitcrew answers it."
        ]
        code, ready = readyz(eu_a)
        assert code == 503
        assert ready["checks"]["slack_app"] is False
        assert ready["notes"]["slack_app"].endswith(FIX)
        assert readyz(eu_b)[0] == 200
        assert proposal_states(eu_b) == [ProposalState.OFFERED]
        assert f"slack app shared: {SHARED}" in status(eu_a)
    finally:
        for daemon in daemons:
            daemon.stop()
        server.stop()

"""One card per incident from real `pitcrew run` processes in Slack's HTTP mode, when
the answer to the card's post never reaches the daemon that sent it.

Killed in flight: the Slack emulator records the card's `chat.postMessage` and
holds its answer; the daemon is SIGKILLed by pid while it waits; a second daemon
on the same store delivers what the first left in the outbox. It finds the card
in the channel's history (by the incident id in its metadata) and posts nothing;
the incident's later update goes to that card.

Slack slower than the timeout (`chat.slack.timeout: 1`): Slack records the card
and answers after the daemon gave up. The daemon looks in the history before it
posts again; when that look fails too, the outbox tries later, and each try looks
before it posts. One card either way."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.adapters.slack.reconcile import MERGED
from bot.adapters.store.store import Store
from tests.e2e.slack.conftest import APPROVER, CHANNEL, SECRET
from tests.support.daemon import DESCRIBE, DRIVER_LOG, SEED, WORKLOAD
from tests.support.daemon_process import Daemon, wait_until
from tests.support.faults import Measured
from tests.support.flood import send
from tests.support.slack_emulator import BOT_TOKEN, TEAM_ID, Call, Posted, SlackEmulator

pytestmark = [pytest.mark.slack, pytest.mark.slow]

SLACK = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET}
TIMEOUT = 1  # chat.slack.timeout: seconds the daemon waits for a Web API answer


def write_config(tmp_path: Path, emulator: SlackEmulator, timeout: int = 10) -> None:
    (tmp_path / "pitcrew.yaml").write_text(
        f"""\
store: {{path: {tmp_path / "state.db"}}}
http: {{host: 127.0.0.1, port: 0}}
chat:
  kind: slack
  slack:
    socket_mode: false
    api_url: "{emulator.api_url}"
    channel_interval: 0
    timeout: {timeout}
notify: {{group_wait: 0s, group_interval: 1s, default_channel: pitcrew}}
approvals:
  approvers: [{{users: ["{APPROVER}"], namespaces: ["ml-*"]}}]
  teams: ["{TEAM_ID}"]
actions:
  executors: {{k8s.bump_memory: echo}}
  echo: {{record: {tmp_path / "echo.log"}}}
scheduler: {{tick: 200ms, approved: 200ms, outbox: 1s, expiry: 1s}}
"""
    )


def ingest(daemon: Daemon, name: str, *query: str) -> None:
    url = "&".join([f"{daemon.url}/ingest?origin={name}", *query])
    assert send(url, (SEED / name).read_bytes()) == "202"


def outbox_empty(tmp_path: Path) -> Callable[[], bool]:
    def empty() -> bool:
        with Store(tmp_path / "state.db") as store:
            return store.pending_notifications() == 0

    return empty


def cards_and_incidents(emulator: SlackEmulator) -> tuple[list[Posted], set[str]]:
    """The channel's top-level messages, and the incidents their metadata names."""
    cards = [m for m in emulator.parents() if m.channel == CHANNEL]
    named = {str((m.metadata or {}).get("event_payload", {}).get("incident_id")) for m in cards}
    return cards, named


def card_posts(emulator: SlackEmulator) -> list[Call]:
    return [c for c in emulator.calls_to("chat.postMessage") if "thread_ts" not in c.params]


def blocks_text(message: Posted) -> str:
    return json.dumps(message.blocks)


def test_a_daemon_killed_with_its_card_in_flight_and_its_successor_post_one_card(
    tmp_path: Path, emulator: SlackEmulator, daemons: list[Daemon], measured: Measured
) -> None:
    write_config(tmp_path, emulator)
    emulator.hold("chat.postMessage")  # Slack takes the card; its answer never leaves
    first = Daemon(tmp_path, "first", env=SLACK)
    daemons.append(first)
    first.ready()
    ingest(first, DRIVER_LOG, f"workload={WORKLOAD}")
    emulator.wait_for(lambda: emulator.held, 30, "the card's post to reach Slack")
    (card,) = emulator.parents()
    assert first.signal(signal.SIGKILL) == -signal.SIGKILL

    second = Daemon(tmp_path, "second", env=SLACK)
    daemons.append(second)
    second.ready()
    wait_until(outbox_empty(tmp_path), 30, "the second daemon to deliver the outbox")
    cards, incidents = cards_and_incidents(emulator)
    measured.duplicated(cards=len(cards), incidents=len(incidents))
    assert cards == [card]
    assert len(incidents) == 1
    assert "restored 1 open incident and 1 unfinished card" in second.log()
    assert "Slack already has the card of" in second.log()

    ingest(second, DESCRIBE)  # the worker pod: the card gains its Approve button
    emulator.wait_for(lambda: card.updates > 0, 30, "the card's update")
    wait_until(outbox_empty(tmp_path), 30, "the update to be delivered")
    assert "k8s.bump_memory" in blocks_text(card)
    updates = emulator.calls_to("chat.update")
    assert {(c.params["channel"], c.params["ts"]) for c in updates} == {(CHANNEL, card.ts)}
    replies = [m for m in emulator.messages.values() if m.thread_ts is not None]
    assert all(m.thread_ts == card.ts for m in replies)
    assert emulator.parents() == [card]
    assert len(card_posts(emulator)) == 1


@pytest.mark.parametrize(
    "failed_looks",
    [0, 2],
    ids=["the-look-finds-it", "the-look-fails-twice-then-finds-it"],
)
def test_slack_answering_after_the_timeout_gets_one_card_through_the_outbox_retries(
    tmp_path: Path,
    emulator: SlackEmulator,
    daemons: list[Daemon],
    measured: Measured,
    failed_looks: int,
) -> None:
    write_config(tmp_path, emulator, timeout=TIMEOUT)
    emulator.slow("chat.postMessage", TIMEOUT + 1.5)  # recorded now, answered too late
    # the look before the post finds nothing; the look after the timeout, and the
    # outbox's next, fail as well
    emulator.fail(
        "conversations.history", failed_looks, status=500, error="internal_error", after=1
    )
    daemon = Daemon(tmp_path, "slowed", env=SLACK)
    daemons.append(daemon)
    daemon.ready()
    ingest(daemon, DRIVER_LOG, f"workload={WORKLOAD}")
    emulator.wait_calls("chat.postMessage", 1, timeout=30)
    wait_until(outbox_empty(tmp_path), 30, "the outbox to deliver the card")
    if failed_looks:  # history down: posted anyway, the second card removed once it answers
        one = lambda: len(cards_and_incidents(emulator)[0]) == 1  # noqa: E731
        wait_until(one, 30, "the second card to be deleted")

    cards, incidents = cards_and_incidents(emulator)
    measured.duplicated(cards=len(cards), incidents=len(incidents))
    assert (len(cards), len(incidents)) == (1, 1)
    log = daemon.log()
    if not failed_looks:
        assert len(card_posts(emulator)) == 1
        assert len(emulator.calls_to("conversations.history")) == 2  # before, and after
        assert "Slack took the card of" in log
        return
    assert len(card_posts(emulator)) == 2  # a missed page costs more than a duplicate
    (kept,) = cards
    # the kept card's thread is told after the delete: wait for it, then read the log
    said = lambda: MERGED in [m.text for m in emulator.replies(CHANNEL, kept.ts)]  # noqa: E731
    wait_until(said, 30, "the kept card's thread to say the second card was deleted")
    log = daemon.log()
    assert "posting the card of" in log
    assert "deleted a second card of" in log

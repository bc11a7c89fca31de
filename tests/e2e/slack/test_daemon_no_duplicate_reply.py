"""One reply per outbox message in a card's thread from real `pitcrew run` processes in
Slack's HTTP mode, when the answer to a reply's post never reaches the daemon that sent it.

The card is out; the incident stays open and unchanged, so the daemon brings it up
in the card's thread (`notify.repeat_interval`, a few seconds here). The Slack
emulator records that reply's `chat.postMessage` and holds its answer; the daemon
is SIGKILLed by pid while it waits. A second daemon on the same store delivers
what the first left in the outbox: it finds the reply in the thread (by the
outbox message named in its metadata) and does not post it again; the reminders
it queues itself are posted once each."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.slack.conftest import CHANNEL
from tests.e2e.slack.test_daemon_no_duplicate import SLACK, ingest, outbox_empty, write_config
from tests.support.daemon import DRIVER_LOG, WORKLOAD
from tests.support.daemon_process import Daemon, wait_until
from tests.support.faults import Measured
from tests.support.slack_emulator import Posted, SlackEmulator

pytestmark = [pytest.mark.slack, pytest.mark.slow]

REPEAT = "repeat_interval: 3s"  # an open, unchanged card is brought up in its thread


def reminding(tmp_path: Path, emulator: SlackEmulator) -> None:
    write_config(tmp_path, emulator)
    config = tmp_path / "pitcrew.yaml"
    text = config.read_text()
    assert "group_interval: 1s," in text
    config.write_text(text.replace("group_interval: 1s,", f"group_interval: 1s, {REPEAT},"))


def message_id(reply: Posted) -> str:
    return str((reply.metadata or {}).get("event_payload", {}).get("message_id", ""))


def test_a_daemon_killed_with_a_reply_in_flight_and_its_successor_post_it_once(
    tmp_path: Path, emulator: SlackEmulator, daemons: list[Daemon], measured: Measured
) -> None:
    reminding(tmp_path, emulator)
    first = Daemon(tmp_path, "first", env=SLACK)
    daemons.append(first)
    first.ready()
    ingest(first, DRIVER_LOG, f"workload={WORKLOAD}")
    (card,) = emulator.wait_for(emulator.parents, 30, "the card")
    emulator.wait_for(lambda: emulator.replies(CHANNEL, card.ts), 30, "the evidence in its thread")
    emulator.hold("chat.postMessage")  # Slack takes the reminder; its answer never leaves
    emulator.wait_for(lambda: emulator.held, 30, "the reminder's post to reach Slack")
    (held,) = [r for r in emulator.replies(CHANNEL, card.ts) if r.text.startswith("Still open")]
    assert first.signal(signal.SIGKILL) == -signal.SIGKILL

    second = Daemon(tmp_path, "second", env=SLACK)
    daemons.append(second)
    second.ready()
    wait_until(outbox_empty(tmp_path), 30, "the second daemon to deliver the outbox")

    replies = emulator.replies(CHANNEL, card.ts)
    posts = Counter(message_id(r) for r in replies)
    measured.duplicated(cards=len(replies), incidents=len(posts))
    assert "" not in posts  # every reply names the outbox message it delivers
    assert posts[message_id(held)] == 1
    assert set(posts.values()) == {1}
    assert f"Slack already has message {message_id(held)} of incident" in second.log()
    assert emulator.parents() == [card]

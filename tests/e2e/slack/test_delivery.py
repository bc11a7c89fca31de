"""Posting within Slack's rate limits: a 429 becomes `ChatUnavailableError` with
Slack's Retry-After (and nothing more goes to that channel until then), a 5xx
is retried later, a refusal for good says so, a refused card is replaced by a
minimal one, messages to one channel are paced at about one a second, and a
429 storm through the real outbox delivers every card exactly once."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack.chat import SlackRejectedError
from bot.adapters.store.store import Store
from bot.core.model import Notification, NotificationKind, Report
from bot.daemon.outbox import Backoff, Outbox
from bot.daemon.ports import ChatUnavailableError
from tests.e2e.slack.conftest import CHANNEL, FakeTime
from tests.support.slack_emulator import BOT_TOKEN, SlackEmulator, block_kit_errors

pytestmark = pytest.mark.slack


def test_a_429_is_handed_back_with_retry_after_and_the_channel_waits(
    make_chat: Any, emulator: SlackEmulator, clock: FakeTime, seed_report: Report
) -> None:
    chat = make_chat()
    emulator.fail("chat.postMessage", retry_after=7)
    with pytest.raises(ChatUnavailableError) as raised:
        chat.post("pitcrew", seed_report)
    assert raised.value.retry_after == 7
    assert emulator.messages == {}

    clock.advance(3)
    with pytest.raises(ChatUnavailableError) as again:  # still waiting: Slack is not asked
        chat.post("pitcrew", seed_report)
    assert again.value.retry_after == pytest.approx(4)
    assert len(emulator.calls_to("chat.postMessage")) == 1

    clock.advance(4)
    ref = chat.post("pitcrew", seed_report)
    assert ref.startswith(f"{CHANNEL}:")
    assert len(emulator.parents()) == 1


def test_server_errors_and_outages_are_transient(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report
) -> None:
    chat = make_chat()
    emulator.fail("chat.postMessage", status=500, error="internal_error", retry_after=None)
    with pytest.raises(ChatUnavailableError) as raised:
        chat.post("pitcrew", seed_report)
    assert raised.value.retry_after is None
    emulator.fail("chat.update", status=200, error="service_unavailable", retry_after=None)
    ref = chat.post("pitcrew", seed_report)
    with pytest.raises(ChatUnavailableError):
        chat.update(ref, seed_report)
    emulator.stop()
    with pytest.raises(ChatUnavailableError):
        chat.reply(ref, "progress")


def test_refusals_for_good_are_not_retried_as_outages(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report
) -> None:
    chat = make_chat()
    with pytest.raises(SlackRejectedError, match="channel_not_found"):
        chat.post("no-such-channel", seed_report)
    with pytest.raises(SlackRejectedError, match="message_not_found"):
        chat.update(f"{CHANNEL}:1.000000", seed_report)
    bad = make_chat(bot_token="xoxb-revoked")
    with pytest.raises(SlackRejectedError, match="invalid_auth"):
        bad.post("pitcrew", seed_report)
    with pytest.raises(SlackRejectedError, match="invalid_auth"):
        bad.start()


def test_a_refused_card_is_sent_again_as_a_minimal_card(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report
) -> None:
    chat = make_chat()
    emulator.fail("chat.postMessage", status=200, error="invalid_blocks", retry_after=None)
    ref = chat.post("pitcrew", seed_report)
    (posted,) = emulator.parents()
    assert ref == f"{CHANNEL}:{posted.ts}"
    assert len(posted.blocks) == 2
    assert block_kit_errors(posted.blocks) == []
    assert "Pod OOMKilled" in posted.blocks[0]["text"]["text"]


def test_messages_to_one_channel_are_paced(
    make_chat: Any, emulator: SlackEmulator, clock: FakeTime, seed_report: Report
) -> None:
    emulator.channels["other"] = "C0OTHER"
    chat = make_chat()
    ref = chat.post("pitcrew", seed_report)
    chat.post("other", seed_report)  # another channel: no wait
    assert clock.slept == []
    chat.reply(ref, "one")
    chat.update(ref, seed_report)
    assert clock.slept == [pytest.approx(1.0), pytest.approx(1.0)]


def test_a_429_storm_through_the_outbox_delivers_every_card_once(
    tmp_path: Path,
    make_chat: Any,
    emulator: SlackEmulator,
    clock: FakeTime,
    seed_report: Report,
) -> None:
    store = Store(tmp_path / "outbox.db")
    chat = make_chat()
    outbox = Outbox(store, chat, clock=clock.now, backoff=Backoff(rng=random.Random(7)))
    cards = 6
    for i in range(cards):
        report = dataclasses.replace(seed_report, title=f"incident {i}", incident_id=f"inc-{i}")
        store.enqueue(Notification(f"inc-{i}", NotificationKind.POST, "pitcrew", report))
    store.enqueue(
        Notification(
            "inc-0",
            NotificationKind.UPDATE,
            "pitcrew",
            dataclasses.replace(
                seed_report, title="incident 0", status="approved by @U0ALICE", incident_id="inc-0"
            ),
        )
    )
    store.enqueue(Notification("inc-1", NotificationKind.REPLY, "pitcrew", None, text="hello"))
    emulator.fail("chat.postMessage", times=5, retry_after=2)
    emulator.fail("chat.update", times=2, retry_after=1)

    for _ in range(200):
        outbox.deliver_due()
        if store.pending_notifications() == 0:
            break
        clock.advance(0.5)
    store.close()

    parents = emulator.parents()
    assert sorted(p.blocks[0]["text"]["text"] for p in parents) == sorted(
        f":rotating_light: incident {i}" for i in range(cards)
    )  # every card, none twice
    assert len(emulator.calls_to("chat.postMessage")) == cards + 1 + 5
    (first,) = (p for p in parents if p.blocks[0]["text"]["text"].endswith("incident 0"))
    assert first.updates == 1
    assert "approved by @U0ALICE" in first.text
    (second,) = (p for p in parents if p.blocks[0]["text"]["text"].endswith("incident 1"))
    assert [r.text for r in emulator.replies(CHANNEL, second.ts)] == ["hello"]
    assert all(call.token == BOT_TOKEN for call in emulator.calls)

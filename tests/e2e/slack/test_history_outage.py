"""A card goes out even when Slack's history does not answer: the look for an earlier
card is best effort, the card is posted with its incident's metadata, and once history
answers a second card of the incident is deleted and the card kept says so in its
thread, also when the chat was started again on the store in between. Through the
Slack emulator, the real SlackChat, the real outbox and store."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack.reconcile import MERGED
from bot.adapters.store.store import Store
from bot.core.model import Notification, NotificationKind, Report
from bot.daemon.outbox import Backoff, Outbox
from bot.daemon.ports import ChatUnavailableError, UncheckedCard, utcnow
from tests.e2e.slack.conftest import CHANNEL
from tests.support.faults import Measured
from tests.support.slack_emulator import SlackEmulator

pytestmark = pytest.mark.slack

OUTAGE = 10_000  # calls of conversations.history that fail: longer than any test runs


def _history_down(emulator: SlackEmulator) -> None:
    emulator.fail(
        "conversations.history", OUTAGE, status=500, error="internal_error", retry_after=None
    )


def test_a_new_card_is_posted_within_seconds_while_history_fails(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report, tmp_path: Path
) -> None:
    _history_down(emulator)
    store = Store(tmp_path / "state.db")
    outbox = Outbox(store, make_chat(), clock=utcnow, backoff=Backoff(base=1, jitter=0))
    assert seed_report.incident_id
    queued = time.monotonic()
    store.enqueue(
        Notification(seed_report.incident_id, NotificationKind.POST, "pitcrew", seed_report)
    )
    outbox.start()
    try:
        emulator.wait_for(lambda: emulator.parents(), timeout=10, what="the card")
        delay = time.monotonic() - queued
    finally:
        outbox.stop()
        store.close()
    print(f"history outage: card posted {delay:.2f}s after it was queued")
    assert delay < 10
    (card,) = emulator.parents()
    assert card.metadata == {
        "event_type": "pitcrew_card",
        "event_payload": {"incident_id": seed_report.incident_id},
    }


def test_a_second_card_posted_while_history_failed_is_deleted_once_it_answers(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report, measured: Measured
) -> None:
    chat = make_chat(timeout=1)
    _history_down(emulator)
    emulator.slow("chat.postMessage", 2.5)  # Slack takes the card; its answer comes too late
    with pytest.raises(ChatUnavailableError):
        chat.post("pitcrew", seed_report)
    ref = chat.post("pitcrew", seed_report)  # history still down: posted anyway
    assert len(emulator.parents()) == 2

    assert chat.reconciler.reconcile() == 0  # history does not answer yet: checked later
    assert len(emulator.parents()) == 2
    emulator.recover("conversations.history")
    assert chat.reconciler.reconcile() == 1

    measured.duplicated(cards=len(emulator.parents()), incidents=1)
    (card,) = emulator.parents()
    assert ref == f"{CHANNEL}:{card.ts}"  # the card the outbox knows stays
    assert [m.text for m in emulator.replies(CHANNEL, card.ts)] == [MERGED]
    assert chat.reconciler.pending() == 0
    assert chat.reconciler.reconcile() == 0  # nothing left to check


def test_a_chat_started_again_on_the_store_checks_what_the_last_one_posted_unchecked(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report, tmp_path: Path
) -> None:
    store = Store(tmp_path / "state.db")
    before = make_chat(timeout=1)
    before.reconciler.keep_in(store)
    _history_down(emulator)
    emulator.slow("chat.postMessage", 2.5)  # Slack takes the card; its answer comes too late
    with pytest.raises(ChatUnavailableError):
        before.post("pitcrew", seed_report)
    ref = before.post("pitcrew", seed_report)  # history still down: posted anyway
    before.stop()  # stopped before history answers
    store.close()
    assert len(emulator.parents()) == 2

    store = Store(tmp_path / "state.db")
    after = make_chat()
    after.reconciler.keep_in(store)
    assert after.reconciler.pending() == 1
    emulator.recover("conversations.history")
    assert after.reconciler.reconcile() == 1

    (card,) = emulator.parents()
    assert ref == f"{CHANNEL}:{card.ts}"
    assert [m.text for m in emulator.replies(CHANNEL, card.ts)] == [MERGED]
    assert store.unchecked_cards().cards == ()  # checked: its row is gone
    store.close()


def test_a_row_the_store_cannot_read_is_logged_and_the_other_cards_are_still_checked(
    make_chat: Any,
    emulator: SlackEmulator,
    seed_report: Report,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Store(tmp_path / "state.db")
    bad = UncheckedCard(CHANNEL, "1772366400.000001", "inc-unreadable", None)
    store.remember_unchecked(bad, utcnow())
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute("UPDATE unchecked_cards SET since = 'soon'")
    chat = make_chat()
    chat.reconciler.keep_in(store)
    _history_down(emulator)
    ref = chat.post("pitcrew", seed_report)
    emulator.recover("conversations.history")

    assert chat.reconciler.reconcile() == 0
    assert [m.ts for m in emulator.parents()] == [ref.partition(":")[2]]
    problems = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert problems == [
        f"the card of 'inc-unreadable' in '{CHANNEL}' posted unchecked is unreadable in "
        f"{tmp_path / 'state.db'}: since: expected an ISO 8601 time, got 'soon'; "
        "left in the store, not checked"
    ]
    assert store.unchecked_cards().cards == ()
    assert len(store.unchecked_cards().unreadable) == 1
    store.close()


def test_nothing_is_deleted_when_the_card_kept_is_not_in_the_history(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report
) -> None:
    chat = make_chat()
    _history_down(emulator)
    ref = chat.post("pitcrew", seed_report)
    chat.post("pitcrew", seed_report)  # a second card, the one the chat now keeps ...
    kept = chat.reconciler
    emulator.messages.pop((CHANNEL, emulator.parents()[-1].ts))  # ... deleted by a person
    emulator.recover("conversations.history")

    assert kept.reconcile() == 0
    assert [f"{CHANNEL}:{m.ts}" for m in emulator.parents()] == [ref]  # the other card stays
    assert kept.pending() == 0

"""One card per incident, even when Slack's answer is lost.

Through the Slack emulator: Slack records a card but answers after the
client's timeout; a daemon killed while its post was in flight and a new one
posting the same card; history without the scopes to read it. Each card
carries its incident id in message metadata, and a post whose outcome is
unknown is looked up in the channel's history before it is sent again."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from bot.adapters.slack.history import EVENT_TYPE
from bot.core.model import Report
from tests.e2e.slack.conftest import CHANNEL
from tests.support.faults import Measured
from tests.support.slack_emulator import SlackEmulator

pytestmark = pytest.mark.slack


def test_each_card_carries_its_incident_in_metadata(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report
) -> None:
    ref = make_chat().post("pitcrew", seed_report)
    (card,) = emulator.parents()
    assert ref == f"{CHANNEL}:{card.ts}"
    assert card.metadata == {
        "event_type": EVENT_TYPE,
        "event_payload": {"incident_id": seed_report.incident_id},
    }
    assert seed_report.incident_id


def test_a_post_slack_took_but_answered_too_late_is_found_not_repeated(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report, measured: Measured
) -> None:
    chat = make_chat(timeout=1)
    emulator.slow("chat.postMessage", 2.5)
    ref = chat.post("pitcrew", seed_report)  # timed out, then found in the history
    (card,) = emulator.parents()
    assert ref == f"{CHANNEL}:{card.ts}"
    for _ in range(4):  # the outbox trying again: found every time, never posted
        assert chat.post("pitcrew", seed_report) == ref
    measured.duplicated(cards=len(emulator.parents()), incidents=1)
    assert len(emulator.parents()) == 1
    assert len(emulator.calls_to("chat.postMessage")) == 1


@pytest.mark.slow
def test_a_daemon_killed_with_a_post_in_flight_and_its_successor_post_one_card(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report, measured: Measured
) -> None:
    emulator.slow("chat.postMessage", 3.0)
    killed = make_chat(timeout=10)
    in_flight = threading.Thread(
        target=lambda: _quietly(killed.post, "pitcrew", seed_report), daemon=True
    )
    in_flight.start()
    emulator.wait_calls("chat.postMessage", 1)  # Slack has it; its answer is still coming

    successor = make_chat()  # a new process: knows nothing of the channel or the post
    ref = successor.post("pitcrew", seed_report)
    (card,) = emulator.parents()
    assert ref == f"{CHANNEL}:{card.ts}"
    # each daemon learned the channel's id from its name before looking at its history
    assert len(emulator.calls_to("conversations.list")) == 2
    in_flight.join(timeout=10)
    measured.duplicated(cards=len(emulator.parents()), incidents=1)
    assert len(emulator.parents()) == 1


def test_without_the_history_scopes_cards_still_go_out_and_it_is_said_once(
    make_chat: Any,
    emulator: SlackEmulator,
    seed_report: Report,
    caplog: pytest.LogCaptureFixture,
) -> None:
    emulator.fail("conversations.list", 3, status=200, error="missing_scope", retry_after=None)
    chat = make_chat()
    with caplog.at_level(logging.WARNING, logger="pitcrew.slack"):
        chat.post("pitcrew", seed_report)
    assert len(emulator.parents()) == 1
    (warning,) = [r.getMessage() for r in caplog.records if "missing_scope" in r.getMessage()]
    assert warning.startswith("Slack refused conversations.list (missing_scope): cards are posted")


def test_when_slack_cannot_say_whether_it_has_the_card_it_is_posted_all_the_same(
    make_chat: Any, emulator: SlackEmulator, seed_report: Report, measured: Measured
) -> None:
    emulator.fail("conversations.history", status=500, error="internal_error", retry_after=None)
    chat = make_chat()
    ref = chat.post(CHANNEL, seed_report)  # a missed page costs more than a duplicate
    (card,) = emulator.parents()
    assert ref == f"{CHANNEL}:{card.ts}"
    assert chat.reconciler.pending() == 1  # looked up again once history answers
    assert chat.reconciler.reconcile() == 0  # it answers: the only card, nothing to delete
    measured.duplicated(cards=len(emulator.parents()), incidents=1)
    assert len(emulator.parents()) == 1


def _quietly(post: Any, *args: Any) -> None:
    try:
        post(*args)
    except Exception as error:  # the killed daemon's fate does not matter here
        logging.getLogger("test").info("in-flight post ended: %s", error)

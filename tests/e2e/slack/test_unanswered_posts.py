"""Posts whose answer is lost or hollow, and a channel the bot is not in: the cards the
unanswered posts left are found and all but one deleted once history answers, however
long it was down and whichever try the outbox kept; an answer `{"ok": true}` without
the card's ts is no delivery; a `not_in_channel` card waits for the invitation, retried,
while the other cards go out, and `pitcrew status` says so. Through the Slack emulator,
the real SlackChat, the real outbox and store."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.adapters.slack.reconcile import MERGED
from bot.adapters.store.store import Store
from bot.app.cli_app import app as cli_app
from bot.core.model import Notification, NotificationKind, Report
from bot.daemon.outbox import HELD_CAP, Backoff, Outbox
from tests.e2e.slack.conftest import CHANNEL, FakeTime
from tests.support.faults import Measured
from tests.support.slack_emulator import SlackEmulator

pytestmark = pytest.mark.slack

OUTAGE = 10_000  # calls of conversations.history that fail: longer than any test runs


def history_down(emulator: SlackEmulator) -> None:
    emulator.fail(
        "conversations.history", OUTAGE, status=500, error="internal_error", retry_after=None
    )


def queued(store: Store, report: Report, channel: str = "pitcrew") -> Notification:
    assert report.incident_id
    return store.enqueue(Notification(report.incident_id, NotificationKind.POST, channel, report))


def deliver(outbox: Outbox, clock: FakeTime, times: int) -> None:
    """`times` rounds of the outbox, each after its back-off has passed."""
    for _ in range(times):
        clock.advance(30)
        outbox.deliver_due()


@pytest.mark.parametrize("answered_first", [True, False], ids=["post-answered", "found-first"])
def test_the_cards_of_unanswered_posts_go_once_history_answers(
    make_chat: Any,
    emulator: SlackEmulator,
    clock: FakeTime,
    seed_report: Report,
    tmp_path: Path,
    answered_first: bool,
    measured: Measured,
) -> None:
    """Five posts Slack took but answered too late, history down all along (five cards
    stayed before); then either a post is answered before history comes back, or history
    comes back first and the next try finds a card there and keeps it."""
    store = Store(tmp_path / "state.db")
    chat = make_chat(timeout=1)
    chat.reconciler.keep_in(store)
    outbox = Outbox(store, chat, clock=clock.now, backoff=Backoff(base=1, jitter=0))
    history_down(emulator)
    emulator.slow("chat.postMessage", 1.5, times=5)
    queued(store, seed_report)
    deliver(outbox, clock, 5)
    assert len(emulator.parents()) == 5
    assert store.chat_ref(seed_report.incident_id or "") is None  # no answer yet
    if answered_first:
        deliver(outbox, clock, 1)  # answered: a sixth card, the one kept
        emulator.recover("conversations.history")
    else:
        emulator.recover("conversations.history")
        deliver(outbox, clock, 1)  # the newest card found and kept: nothing posted
    ref = store.chat_ref(seed_report.incident_id or "")
    assert ref is not None

    deleted = chat.reconciler.reconcile()
    measured.duplicated(cards=len(emulator.parents()), incidents=1)
    (card,) = emulator.parents()
    assert (deleted, ref) == (5 if answered_first else 4, f"{CHANNEL}:{card.ts}")
    assert [m.text for m in emulator.replies(CHANNEL, card.ts)] == [MERGED]
    assert store.unchecked_cards().cards == ()
    store.close()


def test_unanswered_posts_are_checked_after_a_restart(
    make_chat: Any, emulator: SlackEmulator, clock: FakeTime, seed_report: Report, tmp_path: Path
) -> None:
    store = Store(tmp_path / "state.db")
    before = make_chat(timeout=1)
    before.reconciler.keep_in(store)
    history_down(emulator)
    emulator.slow("chat.postMessage", 1.5, times=3)
    queued(store, seed_report)
    deliver(Outbox(store, before, clock=clock.now, backoff=Backoff(base=1, jitter=0)), clock, 3)
    before.stop()
    (unanswered,) = store.unchecked_cards().cards
    assert (unanswered.ts, unanswered.incident_id) == ("", seed_report.incident_id)
    store.close()

    store = Store(tmp_path / "state.db")
    after = make_chat()
    after.reconciler.keep_in(store)
    emulator.recover("conversations.history")
    deliver(Outbox(store, after, clock=clock.now, backoff=Backoff(base=1, jitter=0)), clock, 1)
    assert after.reconciler.reconcile() == 2
    (card,) = emulator.parents()
    assert store.chat_ref(seed_report.incident_id or "") == f"{CHANNEL}:{card.ts}"
    store.close()


def test_an_answer_without_the_cards_ts_is_no_delivery(
    make_chat: Any, emulator: SlackEmulator, clock: FakeTime, seed_report: Report, tmp_path: Path
) -> None:
    """`{"ok": true}` alone (it was delivered to `None`, and the next reply went to a
    channel named "None"): with history down it is retried; once history answers the
    card Slack took is found and kept, nothing is posted twice, and the reply after it
    goes to that card's thread."""
    store = Store(tmp_path / "state.db")
    chat = make_chat()
    outbox = Outbox(store, chat, clock=clock.now, backoff=Backoff(base=1, jitter=0))
    history_down(emulator)
    emulator.hollow("chat.postMessage")
    incident = seed_report.incident_id or ""
    queued(store, seed_report)
    store.enqueue(Notification(incident, NotificationKind.REPLY, "pitcrew", None, "progress"))
    assert outbox.deliver_due() == 0
    message = store.next_due(clock.now() + timedelta(hours=1))
    assert message is not None
    assert message.last_error == (
        "chat unavailable: chat.postMessage answered ok without the card's channel and ts "
        "(channel=-, ts=-)"
    )
    assert store.chat_ref(incident) is None
    emulator.recover("conversations.history")
    deliver(outbox, clock, 1)
    (card,) = emulator.parents()
    assert store.chat_ref(incident) == f"{CHANNEL}:{card.ts}"
    assert [m.text for m in emulator.replies(CHANNEL, card.ts)] == ["progress"]
    store.close()


def test_a_card_for_a_channel_the_bot_is_not_in_waits_for_the_invitation(
    make_chat: Any,
    emulator: SlackEmulator,
    clock: FakeTime,
    seed_report: Report,
    tmp_path: Path,
    measured: Measured,
) -> None:
    """`not_in_channel` for ten minutes of tries: the card is kept (it was dropped at once),
    the other channel's card goes out meanwhile, `pitcrew status` names what waits; once
    the bot is invited the card is posted."""
    emulator.channels["ml-alerts"] = "C0MLALERTS"
    store = Store(tmp_path / "state.db")
    outbox = Outbox(store, make_chat(), clock=clock.now, backoff=Backoff(base=1, jitter=0))
    emulator.fail("chat.postMessage", 30, status=200, error="not_in_channel", retry_after=None)
    queued(store, seed_report, "ml-alerts")
    other = Report(**{**_fields(seed_report), "incident_id": "inc-other", "title": "Another"})
    deliver(outbox, clock, 20)
    emulator.recover("chat.postMessage")
    queued(store, other, "pitcrew")
    outbox.deliver_due()
    assert [m.channel for m in emulator.parents()] == [CHANNEL]  # the other card went out
    (held,) = store.held_notifications()
    assert held.attempts == 9  # more than the 8 a bug gets: it is never given up
    status = CliRunner().invoke(cli_app, ["status", "--store", str(tmp_path / "state.db")])
    assert (
        "notifications waiting for a person: 1\n"
        f"  post for {seed_report.incident_id} to ml-alerts  Slack refused chat.postMessage: "
        "not_in_channel: invite the bot to ml-alerts (/invite @pitcrew there); it is retried "
        "until then\n"
        "notifications given up: 0\n"
    ) in status.output
    clock.advance(HELD_CAP)  # invited: the next try, at most HELD_CAP later, posts it
    outbox.deliver_due()
    measured.lost(accepted=2, arrived=len(emulator.parents()))
    assert sorted(m.channel for m in emulator.parents()) == ["C0MLALERTS", CHANNEL]
    assert store.held_notifications() == ()
    store.close()


def _fields(report: Report) -> dict[str, Any]:
    return {name: getattr(report, name) for name in report.__dataclass_fields__}

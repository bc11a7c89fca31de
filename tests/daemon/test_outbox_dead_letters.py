"""The outbox's failure policy: an unexpected error is logged once with its traceback,
counted, retried with back-off up to a cap, then given up visibly (`pitcrew status`,
`pitcrew_dead_letters_total`) so the messages behind it go out; and a new card's
back-off during an outage stays at seconds, as does the wait another message's
back-off puts on it."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.adapters.store.store import Store
from bot.app.cli_app import app as cli_app
from bot.core.model import Notification, NotificationKind, Report
from bot.daemon.metrics import Metrics
from bot.daemon.outbox import POST_CAP, Backoff, Outbox
from bot.daemon.ports import ChatUnavailableError
from tests.support.daemon import T0, Clock, RecordingChat, config
from tests.support.records import incident
from tests.support.reports import card

POST, UPDATE = NotificationKind.POST, NotificationKind.UPDATE


class BrokenChat(RecordingChat):
    """A chat adapter with a bug: posting the card titled "a: card" raises KeyError."""

    def post(self, channel: str, report: Report) -> str:
        if report.title == "a: card":
            raise KeyError("ts")
        return super().post(channel, report)


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "state.db")
    for name in ("inc-a", "inc-b"):
        store.upsert_incident(incident(name))
    return store


def test_a_message_that_keeps_meeting_a_bug_is_given_up_after_its_cap_and_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "pitcrew.outbox")
    store, clock, metrics, chat = _store(tmp_path), Clock(), Metrics(), BrokenChat()
    outbox = Outbox(
        store, chat, clock=clock, metrics=metrics, backoff=Backoff(base=1, jitter=0), max_attempts=3
    )
    store.enqueue(Notification("inc-a", POST, "alerts", card("a: card"), "", T0))
    store.enqueue(Notification("inc-b", POST, "alerts", card("b: card"), "", T0))

    assert outbox.deliver_due() == 1  # b's card goes out; a's waits for its retry
    for _ in range(2):
        clock.advance(10)
        outbox.deliver_due()

    (letter,) = store.dead_letters()
    assert (letter.notification.incident_id, letter.attempts, letter.last_error) == (
        "inc-a",
        3,
        "given up after 3 attempts: KeyError: 'ts'",
    )
    assert store.pending_notifications() == 0
    assert [c.report.title for c in chat.calls if c.report] == ["b: card"]
    exposition = metrics.exposition().decode()
    assert 'pitcrew_dead_letters_total{kind="post"} 1.0' in exposition
    assert 'pitcrew_internal_errors_total{stage="outbox"} 3.0' in exposition
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert [r.getMessage() for r in tracebacks] == ["bug delivering post for incident inc-a"]
    assert caplog.records[-1].getMessage() == (
        "gave up on post for incident inc-a (pitcrew status lists it): "
        "given up after 3 attempts: KeyError: 'ts'"
    )
    store.close()

    shown = CliRunner().invoke(cli_app, ["status", "--config", str(config(tmp_path))])
    assert shown.exit_code == 0, shown.output
    assert shown.output.endswith(
        "notifications given up: 1\n"
        "  post for inc-a  after 3 attempts  given up after 3 attempts: KeyError: 'ts'\n"
    )


def test_status_counts_every_message_given_up_and_lists_the_newest(tmp_path: Path) -> None:
    """26 given up: the count says 26 (it stopped at 20), the list the newest 20."""
    store = _store(tmp_path)
    for n in range(26):
        sent = store.enqueue(Notification("inc-a", POST, "alerts", card(f"{n}: card"), "", T0))
        assert sent.id is not None
        store.mark_abandoned(sent.id, f"refused by the chat: number {n}", T0)
    store.close()
    shown = CliRunner().invoke(cli_app, ["status", "--config", str(config(tmp_path))])
    assert shown.exit_code == 0, shown.output
    listed = shown.output.split("notifications given up: ", 1)[1].splitlines()
    assert listed[0] == "26 (the newest 20)"
    assert [line.rsplit(" ", 1)[1] for line in listed[1:]] == [str(n) for n in range(25, 5, -1)]


@pytest.mark.parametrize(
    ("kind", "longest"),
    [(POST, POST_CAP), (UPDATE, 128.0)],
    ids=["new-card", "update"],
)
def test_a_new_cards_back_off_during_an_outage_stays_at_seconds(
    tmp_path: Path, kind: NotificationKind, longest: float
) -> None:
    store, clock = _store(tmp_path), Clock()
    chat = RecordingChat(down=True)
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(base=1, factor=2, jitter=0))
    if kind is not POST:  # an update waits behind its card: the card is out already
        store.enqueue(Notification("inc-a", POST, "alerts", card("a: card"), "", T0))
        chat.down = False
        outbox.deliver_due()
        chat.down = True
    store.enqueue(Notification("inc-a", kind, "alerts", card("a: next"), "", T0))
    waits = []
    for _ in range(8):
        outbox.deliver_due()
        message = store.next_due(clock() + timedelta(days=1))
        assert message is not None
        assert message.next_attempt_at is not None
        waits.append((message.next_attempt_at - clock()).total_seconds())
        clock.advance(waits[-1])
    assert max(waits) == longest
    store.close()


class UpdatesDown(RecordingChat):
    """Slack in a partial outage: `chat.update` fails, `chat.postMessage` works."""

    def update(self, ref: str, report: Report) -> None:
        raise ChatUnavailableError("chat.update: HTTP 500")


def test_an_update_backing_off_for_minutes_holds_no_new_card_back(tmp_path: Path) -> None:
    store, clock = _store(tmp_path), Clock()
    chat = UpdatesDown()
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(base=1, factor=2, jitter=0))
    store.enqueue(Notification("inc-a", POST, "alerts", card("a: card"), "", T0))
    store.enqueue(Notification("inc-a", UPDATE, "alerts", card("a: update"), "", T0))
    waits, due = [], clock()
    for _ in range(8):  # the update fails on at each try; its back-off grows
        clock.now = due
        outbox.deliver_due()
        update = store.next_due(clock() + timedelta(days=1))
        assert update is not None
        assert update.next_attempt_at is not None
        due = update.next_attempt_at
        waits.append((due - clock()).total_seconds())
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128]

    store.enqueue(Notification("inc-b", POST, "alerts", card("b: card"), "", clock()))
    clock.advance(POST_CAP)
    assert outbox.deliver_due() == 1  # b's card, seconds after it was queued
    assert [(c.kind, c.report.title) for c in chat.calls if c.report] == [
        ("post", "a: card"),
        ("post", "b: card"),
    ]
    store.close()

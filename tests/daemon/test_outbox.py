"""The outbox worker, read as a specification: a chat outage delays cards but never
loses, reorders or repeats them; retries back off exponentially with jitter, or as
long as the chat asked; a restart does not post again what was delivered."""

from __future__ import annotations

import random
import time
from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.slack.chat import SlackRejectedError
from bot.adapters.store.store import Store
from bot.core.errors import PermanentError, PitcrewError, TransientError
from bot.core.model import Notification, NotificationKind, Report
from bot.daemon.outbox import Backoff, Outbox
from bot.daemon.ports import ChatRejectedError, ChatUnavailableError
from tests.support.daemon import T0, Clock, RecordingChat
from tests.support.records import incident
from tests.support.reports import card

POST, UPDATE, REPLY = NotificationKind.POST, NotificationKind.UPDATE, NotificationKind.REPLY


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store(tmp_path / "pitcrew.db")
    for name in ("inc-a", "inc-b"):
        opened.upsert_incident(incident(name))
    return opened


def queue(store: Store, incident_id: str, kind: NotificationKind, title: str) -> None:
    report = None if kind is REPLY else card(title)
    store.enqueue(Notification(incident_id, kind, "alerts", report, title, T0))


def delivered(chat: RecordingChat) -> list[tuple[str, str]]:
    return [(c.kind, c.report.title if c.report else c.text) for c in chat.calls]


def test_messages_queued_during_an_outage_are_delivered_in_order_afterwards(
    store: Store,
) -> None:
    clock = Clock()
    chat = RecordingChat(down=True)
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(base=2, jitter=0))
    queue(store, "inc-a", POST, "a: card")
    queue(store, "inc-b", POST, "b: card")
    queue(store, "inc-a", UPDATE, "a: update")
    queue(store, "inc-a", REPLY, "a: reply")

    assert outbox.deliver_due() == 0
    clock.advance(1)
    assert outbox.deliver_due() == 0  # still backing off: nothing was even tried
    assert store.pending_notifications() == 4

    chat.down = False
    clock.advance(2)
    assert outbox.deliver_due() == 4
    assert delivered(chat) == [
        ("post", "a: card"),
        ("post", "b: card"),
        ("update", "a: update"),
        ("reply", "a: reply"),
    ]
    post_a = chat.calls[0].ref
    assert chat.calls[2].ref == post_a
    assert chat.calls[3].ref == post_a
    assert store.pending_notifications() == 0


def test_a_failed_delivery_stays_in_the_outbox_and_backs_off_exponentially(store: Store) -> None:
    clock = Clock()
    chat = RecordingChat(down=True)
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(base=1, factor=2, jitter=0))
    queue(store, "inc-a", POST, "a: card")
    waits = []
    for _ in range(4):
        outbox.deliver_due()
        message = store.next_due(clock.now + timedelta(days=1))
        assert message is not None
        assert message.next_attempt_at is not None
        waits.append((message.next_attempt_at - clock.now).total_seconds())
        clock.now = message.next_attempt_at
    assert waits == [1, 2, 4, 8]
    assert message.attempts == 4
    assert "chat is down" in message.last_error
    assert chat.calls == []


def test_the_chat_asked_delay_is_honoured(store: Store) -> None:
    clock = Clock()
    chat = RecordingChat(down=True, retry_after=30)
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(base=1, jitter=0))
    queue(store, "inc-a", POST, "a: card")
    outbox.deliver_due()
    chat.down = False
    clock.advance(29)
    assert outbox.deliver_due() == 0
    clock.advance(1)
    assert outbox.deliver_due() == 1


def test_jitter_spreads_retries_within_bounds() -> None:
    backoff = Backoff(base=1, factor=2, cap=60, jitter=0.2, rng=random.Random(7))
    delays = [backoff.delay(3) for _ in range(200)]
    assert all(6.4 <= d <= 9.6 for d in delays)
    assert len({round(d, 3) for d in delays}) > 100
    assert backoff.delay(40) <= 72


def test_an_error_other_than_an_outage_retries_that_message_without_holding_others(
    store: Store,
) -> None:
    class Picky(RecordingChat):
        def post(self, channel: str, report: Report) -> str:
            if report.title == "a: card":
                raise ValueError("invalid_blocks")
            return super().post(channel, report)

    clock = Clock()
    chat = Picky()
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(base=5, jitter=0))
    queue(store, "inc-a", POST, "a: card")
    queue(store, "inc-a", UPDATE, "a: update")
    queue(store, "inc-b", POST, "b: card")
    assert outbox.deliver_due() == 1
    assert delivered(chat) == [("post", "b: card")]
    assert store.pending_notifications() == 2  # the update waits behind its post


def test_a_message_the_chat_refuses_for_good_is_abandoned_not_retried(store: Store) -> None:
    class Gone(RecordingChat):
        def post(self, channel: str, report: Report) -> str:
            if report.title == "a: card":
                raise ChatRejectedError("channel_not_found")
            return super().post(channel, report)

    clock = Clock()
    chat = Gone()
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(base=5, jitter=0))
    queue(store, "inc-a", POST, "a: card")
    queue(store, "inc-b", POST, "b: card")
    assert outbox.deliver_due() == 1
    clock.advance(3600)
    assert outbox.deliver_due() == 0
    assert delivered(chat) == [("post", "b: card")]
    assert store.pending_notifications() == 0


@pytest.mark.parametrize(
    ("error", "retry_in", "last_error"),
    [
        (
            ChatUnavailableError("chat.postMessage: HTTP 503"),
            5,  # the back-off's first step
            "chat unavailable: chat.postMessage: HTTP 503",
        ),
        (
            TransientError("a proxy on the way is restarting", retry_after=30),
            30,  # as long as it asked
            "chat unavailable: a proxy on the way is restarting",
        ),
        (
            SlackRejectedError("chat.postMessage", "channel_not_found"),
            None,
            "refused by the chat: Slack refused chat.postMessage: channel_not_found",
        ),
        (
            PermanentError("the workspace uninstalled the app"),
            None,
            "refused by the chat: the workspace uninstalled the app",
        ),
    ],
    ids=["chat-unavailable", "transient", "slack-rejected", "permanent"],
)
def test_the_outbox_retries_a_transient_error_and_gives_up_a_permanent_one(
    store: Store, error: PitcrewError, retry_in: int | None, last_error: str
) -> None:
    """The split is the error's class, whichever chat raised it: every chat error is a
    PitcrewError, transient (retried later) or permanent (abandoned at once)."""

    class Failing(RecordingChat):
        def post(self, channel: str, report: Report) -> str:
            raise error

    clock = Clock()
    outbox = Outbox(store, Failing(), clock=clock, backoff=Backoff(base=5, jitter=0))
    queue(store, "inc-a", POST, "a: card")
    assert outbox.deliver_due() == 0
    if retry_in is None:
        assert store.pending_notifications() == 0
        (given_up,) = store.dead_letters()
        assert given_up.last_error == last_error
        return
    waiting = store.next_due(clock.now + timedelta(hours=1))
    assert waiting is not None
    assert waiting.last_error == last_error
    assert waiting.next_attempt_at == clock.now + timedelta(seconds=retry_in)


def test_a_restart_does_not_deliver_again_what_was_delivered(tmp_path: Path) -> None:
    path = tmp_path / "pitcrew.db"
    clock = Clock()
    with Store(path) as store:
        store.upsert_incident(incident("inc-a"))
        queue(store, "inc-a", POST, "a: card")
        first = RecordingChat()
        assert Outbox(store, first, clock=clock).deliver_due() == 1
        queue(store, "inc-a", UPDATE, "a: update")
    with Store(path) as store:
        second = RecordingChat()
        assert Outbox(store, second, clock=clock).deliver_due() == 1
    assert delivered(second) == [("update", "a: update")]
    assert second.calls[0].ref == first.calls[0].ref


def test_the_worker_thread_delivers_when_woken_and_stops(store: Store) -> None:
    chat = RecordingChat()
    outbox = Outbox(store, chat, clock=Clock(T0 + timedelta(seconds=1)), poll_seconds=5)
    outbox.start()
    try:
        queue(store, "inc-a", POST, "a: card")
        outbox.wake()
        deadline = time.monotonic() + 5
        while not chat.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert delivered(chat) == [("post", "a: card")]
    finally:
        outbox.stop()
    assert not outbox.alive()


def test_flush_gives_up_while_the_chat_is_unavailable(store: Store) -> None:
    chat = RecordingChat(down=True, retry_after=60)
    outbox = Outbox(store, chat, clock=Clock())
    queue(store, "inc-a", POST, "a: card")
    started = time.monotonic()
    assert outbox.flush(timeout=5) is False
    assert time.monotonic() - started < 1
    assert store.pending_notifications() == 1

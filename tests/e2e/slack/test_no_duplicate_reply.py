"""One reply per outbox message in a card's thread, even when Slack's answer is lost.

Through the Slack emulator, the real `SlackChat` and the real outbox on a real
store: a reply (or a memory chart) Slack records but answers after the client's
timeout; an outbox that starts with a reply its predecessor had in flight;
threads without the scopes to read them. Each reply names the outbox message it
delivers in its metadata (a chart, which carries no metadata, in its file's
name), and a reply whose earlier try may have reached Slack is looked for in
the thread (`conversations.replies`) before it is sent again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.slack.chat import SlackChat
from bot.adapters.slack.history import REPLY_EVENT_TYPE
from bot.adapters.store.store import Store
from bot.core.model import Notification, NotificationKind, Report
from bot.daemon.outbox import Backoff, Outbox
from tests.e2e.slack.conftest import CHANNEL, FakeTime
from tests.support.faults import Measured
from tests.support.slack_emulator import Posted, SlackEmulator

pytestmark = pytest.mark.slack

TIMEOUT = 1  # seconds the chat waits for a Web API answer
LATE = TIMEOUT + 1.5  # when Slack answers a call it has already carried out


class Thread:
    """A card posted through the outbox, and what the outbox queues in its thread."""

    def __init__(self, store: Store, chat: SlackChat, clock: FakeTime, report: Report) -> None:
        self.store, self.clock, self.report = store, clock, report
        self.outbox = self.start(chat)
        self.queue(NotificationKind.POST)
        self.deliver()
        self.ref = store.chat_ref(report.incident_id, "pitcrew")
        assert self.ref is not None

    def start(self, chat: SlackChat) -> Outbox:
        """An outbox, as a daemon starts one."""
        return Outbox(self.store, chat, clock=self.clock.now, backoff=Backoff(jitter=0.0))

    def queue(self, kind: NotificationKind, text: str = "", chart: str = "") -> int:
        report = self.report if kind is NotificationKind.POST else None
        queued = self.store.enqueue(
            Notification(
                self.report.incident_id,
                kind,
                "pitcrew",
                report,
                text,
                self.clock.now(),
                attachment=chart,
            )
        )
        assert queued.id is not None
        return queued.id

    def deliver(self, outbox: Outbox | None = None) -> None:
        """Deliver until the outbox is empty, the clock moving on past each retry's wait."""
        for _ in range(50):
            (outbox or self.outbox).deliver_due()
            if self.store.pending_notifications() == 0:
                return
            self.clock.advance(5)
        raise AssertionError("the outbox never emptied")

    @property
    def card_ts(self) -> str:
        assert self.ref is not None
        return self.ref.split(":")[1]


@pytest.fixture
def thread(
    tmp_path: Path, make_chat: Any, clock: FakeTime, seed_report: Report
) -> Iterator[Thread]:
    store = Store(tmp_path / "pitcrew.db")
    yield Thread(store, make_chat(timeout=TIMEOUT), clock, seed_report)
    store.close()


def replies(emulator: SlackEmulator, thread: Thread) -> list[Posted]:
    return emulator.replies(CHANNEL, thread.card_ts)


def reply_posts(emulator: SlackEmulator) -> int:
    return sum("thread_ts" in c.params for c in emulator.calls_to("chat.postMessage"))


def named(message: Posted) -> str:
    return str((message.metadata or {}).get("event_payload", {}).get("message_id"))


def test_each_reply_names_its_outbox_message_and_a_first_try_does_not_look(
    emulator: SlackEmulator, thread: Thread, seed_report: Report
) -> None:
    first = thread.queue(NotificationKind.REPLY, "k8s.bump_memory running")
    second = thread.queue(NotificationKind.REPLY, "k8s.bump_memory succeeded")
    thread.deliver()
    assert [(r.text, r.metadata) for r in replies(emulator, thread)] == [
        (
            text,
            {
                "event_type": REPLY_EVENT_TYPE,
                "event_payload": {"incident_id": seed_report.incident_id, "message_id": str(n)},
            },
        )
        for text, n in (("k8s.bump_memory running", first), ("k8s.bump_memory succeeded", second))
    ]
    assert emulator.calls_to("conversations.replies") == []


@pytest.mark.parametrize(
    "failed_looks",
    [0, 2],
    ids=["the-look-finds-it", "the-look-fails-twice-then-finds-it"],
)
def test_a_reply_slack_took_but_answered_too_late_is_found_not_repeated(
    emulator: SlackEmulator, thread: Thread, measured: Measured, failed_looks: int
) -> None:
    emulator.slow("chat.postMessage", LATE)
    emulator.fail(
        "conversations.replies", failed_looks, status=500, error="internal_error", retry_after=None
    )
    meant = thread.queue(NotificationKind.REPLY, "k8s.bump_memory running")
    thread.deliver()

    seen = replies(emulator, thread)
    measured.duplicated(cards=len(seen), incidents=1)
    assert [(r.text, named(r)) for r in seen] == [("k8s.bump_memory running", str(meant))]
    assert reply_posts(emulator) == 1
    # the look after the timeout, then one before each of the outbox's next tries
    assert len(emulator.calls_to("conversations.replies")) == failed_looks + 1


def test_a_chart_slack_shared_but_answered_too_late_is_not_uploaded_again(
    tmp_path: Path,
    emulator: SlackEmulator,
    thread: Thread,
    measured: Measured,
    seed_report: Report,
) -> None:
    chart = tmp_path / f"memory-{seed_report.incident_id}.png"
    chart.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 2048)
    emulator.slow("files.completeUploadExternal", LATE)
    meant = thread.queue(NotificationKind.REPLY, "Memory before the kill", chart=str(chart))
    thread.deliver()

    seen = replies(emulator, thread)
    measured.duplicated(cards=len(seen), incidents=1)
    (shared,) = seen
    assert shared.text == "Memory before the kill"
    assert [f["name"] for f in shared.files] == [f"memory-{seed_report.incident_id}-{meant}.png"]
    assert len(emulator.calls_to("files.completeUploadExternal")) == 1
    assert len(emulator.shared_files()) == 1


def test_an_outbox_started_with_its_predecessors_reply_in_flight_posts_it_once(
    make_chat: Any, emulator: SlackEmulator, thread: Thread, measured: Measured
) -> None:
    meant = thread.queue(NotificationKind.REPLY, "k8s.bump_memory running")
    emulator.hold("chat.postMessage")  # Slack takes the reply; its answer never leaves
    in_flight = threading.Thread(target=thread.outbox.deliver_due, daemon=True)
    in_flight.start()
    emulator.wait_for(lambda: emulator.held, 10, "the reply's post to reach Slack")

    thread.clock.advance(1)  # a new process, later: knows nothing of the post in flight
    successor = thread.start(make_chat(timeout=TIMEOUT))
    successor.deliver_due()
    assert thread.store.pending_notifications() == 0
    emulator.release()
    in_flight.join(timeout=10)

    seen = replies(emulator, thread)
    measured.duplicated(cards=len(seen), incidents=1)
    assert [named(r) for r in seen] == [str(meant)]
    assert reply_posts(emulator) == 1
    assert len(emulator.calls_to("conversations.replies")) == 1


def test_without_the_history_scopes_replies_still_go_out_and_it_is_said_once(
    make_chat: Any,
    emulator: SlackEmulator,
    thread: Thread,
    caplog: pytest.LogCaptureFixture,
) -> None:
    texts = ["k8s.bump_memory running", "k8s.bump_memory succeeded", "Still open"]
    for text in texts:
        thread.queue(NotificationKind.REPLY, text)
    thread.clock.advance(1)
    restarted = thread.start(make_chat(timeout=TIMEOUT))  # each reply may be in Slack already
    emulator.fail("conversations.replies", 3, status=200, error="missing_scope", retry_after=None)
    with caplog.at_level(logging.WARNING, logger="pitcrew.slack"):
        thread.deliver(restarted)

    assert [r.text for r in replies(emulator, thread)] == texts
    assert len(emulator.calls_to("conversations.replies")) == 3
    (warning,) = [r.getMessage() for r in caplog.records if "missing_scope" in r.getMessage()]
    assert warning == (
        "Slack refused conversations.replies (missing_scope): thread replies are posted "
        "without looking for one already there, so a lost answer may mean a second one "
        "(see docs/slack.md for the scopes)"
    )

"""One card per incident from real `pitcrew run` processes in Slack's HTTP mode, when
the daemon that posted a card while Slack's history did not answer is stopped, or
killed, before the history answers again.

Slack takes the first card but answers after the daemon gave up
(`chat.slack.timeout: 1`), and `conversations.history` answers 500 throughout: the
daemon cannot see the card it may have posted, so it posts the card again within
seconds (a missed page costs more than a duplicate) and keeps that card in the store
as unchecked. It is stopped (SIGTERM) or killed (SIGKILL) by pid; a second daemon
on the same store takes the card up at its start, tries while history still fails
and deletes nothing, and once history answers deletes the other card, says so in the
kept card's thread, and forgets the row. The card kept is the one the store's later
updates and replies go to."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.adapters.slack.reconcile import MERGED
from bot.adapters.store.store import Store
from tests.e2e.slack.conftest import CHANNEL
from tests.e2e.slack.test_daemon_no_duplicate import (
    SLACK,
    TIMEOUT,
    cards_and_incidents,
    ingest,
    outbox_empty,
    write_config,
)
from tests.support.daemon import DRIVER_LOG, WORKLOAD
from tests.support.daemon_process import Daemon, wait_until
from tests.support.faults import Measured
from tests.support.slack_emulator import SlackEmulator

pytestmark = [pytest.mark.slack, pytest.mark.slow]

OUTAGE = 10_000  # calls of conversations.history that fail: longer than any test runs
TAKEN_UP = "1 cards posted while Slack's history did not answer are checked once it does"


def unchecked(tmp_path: Path) -> Callable[[], int]:
    def count() -> int:
        with Store(tmp_path / "state.db") as store:
            return len(store.unchecked_cards().cards)

    return count


def card_count(emulator: SlackEmulator) -> Callable[[], int]:
    return lambda: len(cards_and_incidents(emulator)[0])


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_daemon_started_again_before_history_answers_ends_with_one_card(
    tmp_path: Path,
    emulator: SlackEmulator,
    daemons: list[Daemon],
    measured: Measured,
    stop: signal.Signals,
) -> None:
    write_config(tmp_path, emulator, timeout=TIMEOUT)
    emulator.fail(
        "conversations.history", OUTAGE, status=500, error="internal_error", retry_after=None
    )
    emulator.slow("chat.postMessage", TIMEOUT + 1.5)  # recorded now, answered too late
    first = Daemon(tmp_path, "first", env=SLACK)
    daemons.append(first)
    first.ready()
    ingested = time.monotonic()
    ingest(first, DRIVER_LOG, f"workload={WORKLOAD}")
    wait_until(lambda: card_count(emulator)() == 2, 30, "the card posted again")
    print(f"history failing: the card went out again {time.monotonic() - ingested:.1f}s in")
    assert time.monotonic() - ingested < 10
    wait_until(outbox_empty(tmp_path), 30, "the first daemon to deliver the outbox")
    assert unchecked(tmp_path)() == 1
    assert first.signal(stop) == (0 if stop is signal.SIGTERM else -signal.SIGKILL)
    assert card_count(emulator)() == 2  # history never answered the first daemon

    second = Daemon(tmp_path, "second", env=SLACK)
    daemons.append(second)
    second.ready()
    assert TAKEN_UP in second.log()
    wait_until(lambda: "history still does not answer" in second.log(), 30, "a failed check")
    assert card_count(emulator)() == 2  # nothing deleted without a look
    emulator.recover("conversations.history")
    wait_until(lambda: card_count(emulator)() == 1, 30, "the second card to be deleted")
    wait_until(lambda: unchecked(tmp_path)() == 0, 30, "the checked card's row to go")

    cards, incidents = cards_and_incidents(emulator)
    measured.duplicated(cards=len(cards), incidents=len(incidents))
    (kept,) = cards
    assert MERGED in [m.text for m in emulator.replies(CHANNEL, kept.ts)]
    (incident,) = incidents
    with Store(tmp_path / "state.db") as store:
        assert store.chat_ref(incident) == f"{CHANNEL}:{kept.ts}"  # what updates go to
    assert "deleted a second card of" in second.log()
    assert second.stop() == 0

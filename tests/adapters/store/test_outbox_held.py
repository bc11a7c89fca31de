"""A notification held for a person (the bot not in its channel) on either store: listed
for `pitcrew status` with why it waits, oldest first, across a restart, still due at its
next try, and no longer listed once a try fails for another reason or it is delivered;
the messages given up are all counted, however many the listing shows."""

from __future__ import annotations

from bot.adapters.store.store import Store
from tests.support.records import T0, minutes, note

HELD = "Slack refused chat.postMessage: not_in_channel: invite the bot to ml-alerts"


def held_ids(store: Store) -> list[tuple[int | None, str]]:
    return [(m.notification.id, m.held) for m in store.held_notifications()]


def test_a_held_message_is_listed_with_why_until_it_goes(store_location: str) -> None:
    with Store(store_location) as store:
        for incident in ("inc-1", "inc-2", "inc-3"):
            store.enqueue(note(incident, channel="ml-alerts"))
        assert store.mark_failed(2, HELD, minutes(5), held=HELD)
        assert store.mark_failed(1, HELD, minutes(5), held=HELD)
        assert store.mark_failed(3, "chat unavailable: internal_error", minutes(1))
    with Store(store_location) as store:  # a restart
        assert held_ids(store) == [(1, HELD), (2, HELD)]
        due = store.next_due(minutes(5))
        assert due is not None
        assert (due.notification.id, due.attempts, due.held) == (1, 1, HELD)
        assert store.mark_failed(1, "chat unavailable: internal_error", minutes(6))
        assert store.mark_delivered(2, "C0MLALERTS:1772366400.000100", minutes(6))
        assert held_ids(store) == []


def test_every_message_given_up_is_counted(store: Store) -> None:
    for n in range(26):
        store.enqueue(note(f"inc-{n}"))
        assert store.mark_abandoned(n + 1, "channel_not_found", T0)
    assert (len(store.dead_letters()), store.dead_letter_count()) == (20, 26)

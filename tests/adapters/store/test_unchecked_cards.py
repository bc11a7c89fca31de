"""The store keeps the cards posted while Slack's history did not answer until each is
checked: across a reopen, one row per channel and incident (the latest card, or a post
that went unanswered until the card kept takes its place), a row gone only with the card
it names, and a row it cannot read named with its problem while the others are still
handed out."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.adapters.store.store import Store
from bot.daemon.ports import KeptUnchecked, UncheckedCard
from tests.support.records import incident, minutes
from tests.support.stores import execute
from tests.support.unchecked_cards import A_LATER, A_UNANSWERED, B_ELSEWHERE, A, B, at


@pytest.mark.parametrize(
    ("remembered", "forgotten", "left"),
    [
        ([A], [], [A]),
        ([A, B], [], [A, B]),
        ([B, A], [], [B, A]),  # oldest post first
        ([A, B], [A], [B]),
        ([A, A_LATER], [], [A_LATER]),  # the latest card of the incident is the one kept
        ([A, A_LATER], [A], [A_LATER]),  # the earlier card checked: the later stays
        ([A, A_LATER], [A_LATER], []),
        ([B, B_ELSEWHERE], [B], [B_ELSEWHERE]),  # one row per channel and incident
        ([A], [B], [A]),  # forgetting what is not there changes nothing
        ([A_UNANSWERED], [], [A_UNANSWERED]),  # kept until the outbox has its card
        ([A_UNANSWERED, A], [], [A]),  # the card kept takes its place
        ([A_UNANSWERED], [A_UNANSWERED], []),
    ],
    ids=[
        "one",
        "two",
        "oldest-first",
        "one-checked",
        "replaced",
        "older-checked",
        "latest-checked",
        "per-channel",
        "not-there",
        "unanswered",
        "unanswered-then-kept",
        "unanswered-checked",
    ],
)
def test_cards_posted_unchecked_are_kept_until_checked(
    store_location: str,
    remembered: list[UncheckedCard],
    forgotten: list[UncheckedCard],
    left: list[UncheckedCard],
) -> None:
    with Store(store_location) as store:
        for n, card in enumerate(remembered):
            store.remember_unchecked(card, at(n))
        for card in forgotten:
            store.forget_unchecked(card)
    with Store(store_location) as reopened:  # a restart
        assert reopened.unchecked_cards() == KeptUnchecked(tuple(left))


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("since", "yesterday", "since: expected an ISO 8601 time, got 'yesterday'"),
        ("since", "2026-03-01T12:00:00", "since: time '2026-03-01T12:00:00' has no timezone"),
        ("incident_id", "", "no incident_id"),
        ("channel_id", "", "no channel_id"),
    ],
)
def test_a_row_the_store_cannot_read_is_named_and_the_others_still_come(
    store_location: str, column: str, value: str, problem: str
) -> None:
    with Store(store_location) as store:
        store.remember_unchecked(A, at(0))
        store.remember_unchecked(B, at(1))
    execute(
        store_location,
        f"UPDATE unchecked_cards SET {column} = ? WHERE ts = '{A.ts}'",
        (value,),
    )
    with Store(store_location) as store:
        kept = store.unchecked_cards()
        assert kept.cards == (B,)
        where = {"channel_id": "'inc-a' in ''", "incident_id": "'' in 'C0PITCREW'"}.get(
            column, "'inc-a' in 'C0PITCREW'"
        )
        assert kept.unreadable == (
            f"the card of {where} posted unchecked is unreadable in {store.path}: {problem}",
        )
        store.forget_unchecked(B)
        assert store.unchecked_cards().cards == ()
        assert len(store.unchecked_cards().unreadable) == 1  # left for a person to look at


def test_a_cards_row_goes_with_its_incident_at_cleanup(store_location: str) -> None:
    with Store(store_location) as store:
        store.upsert_incident(incident("inc-a", opened=0, resolved=10))  # resolved long ago
        store.upsert_incident(incident("inc-b", opened=0))  # open
        store.remember_unchecked(A, at(0))
        store.remember_unchecked(B, at(1))
        store.cleanup(minutes(110), retention=timedelta(minutes=60))
        assert store.incident("inc-a") is None
        assert store.unchecked_cards() == KeptUnchecked((B,))

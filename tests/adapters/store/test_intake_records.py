"""Kept evidence through its states, in the store (SQLite's file or PostgreSQL): a row a bug stopped
(`failed`) or a budget stopped (`quarantined`) is listed as set aside; `pitcrew requeue`
marks it `released`; a running daemon takes each released row once (`take_released`),
and a start takes failed and released rows with the queued ones (`queue_all`), so no
row is queued twice."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from bot.adapters.store.store import Store

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)


@pytest.fixture
def store(store_location: str) -> Iterator[Store]:
    """Rows 1 (queued), 2 (failed), 3 and 4 (quarantined)."""
    with Store(store_location) as opened:
        for _ in range(4):
            opened.spool("{}", b"body", T0)
        opened.set_aside(2, "failed", "classification", "ZeroDivisionError: division by zero", T0)
        opened.taking(3)
        opened.set_aside(3, "quarantined", "correlation", "correlation took over its budget", T0)
        opened.set_aside(4, "quarantined", "start", "begun at 2 starts in a row", T0)
        yield opened


def _states(store: Store) -> dict[int, str]:
    return {row.id: row.state for row in store.set_aside_rows()}


def test_set_aside_rows_are_listed_and_not_taken_in(store: Store) -> None:
    assert _states(store) == {2: "failed", 3: "quarantined", 4: "quarantined"}
    assert [row.id for row in store.spooled()] == [1]
    assert store.take_released() == ()


@pytest.mark.parametrize(
    ("row", "released", "taken", "still_set_aside"),
    [
        (3, 1, [3], {2: "failed", 4: "quarantined"}),
        (2, 1, [2], {3: "quarantined", 4: "quarantined"}),
        (1, 0, [], {2: "failed", 3: "quarantined", 4: "quarantined"}),  # not set aside
        (None, 3, [2, 3, 4], {}),
    ],
    ids=["one-quarantined", "one-failed", "a-queued-one", "all"],
)
def test_a_released_row_is_taken_once_by_the_running_daemon(
    store: Store, row: int | None, released: int, taken: list[int], still_set_aside: dict[int, str]
) -> None:
    assert store.requeue(row) == released
    assert _states(store) == still_set_aside
    first = store.take_released()
    assert [r.id for r in first] == taken
    assert all(r.takes == 0 for r in first)  # a fresh count of unfinished starts
    assert store.take_released() == ()
    assert [r.id for r in store.spooled()] == sorted({1, *taken})
    assert store.requeue(row) == 0  # taken: nothing left to release


def test_a_start_takes_failed_and_released_rows_with_the_queued_ones(store: Store) -> None:
    store.requeue(3)
    assert store.queue_all() == 2  # rows 2 (failed) and 3 (released)
    assert [row.id for row in store.spooled()] == [1, 2, 3]
    assert _states(store) == {4: "quarantined"}
    assert store.take_released() == ()  # what the start queued is not queued again

"""Fencing, on both stores: once a newer leader has fenced the store with its term, every
late write of the old one (a ledger claim, a proposal's compare-and-swap, an outbox
row, a bookmark) is refused with `StaleTermError` and changes nothing; a store never
fenced (the commands) writes as before."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from bot.adapters.store.store import Store
from bot.core.actions import approvals
from bot.core.errors import StaleTermError
from bot.core.model import ProposalState
from tests.support.records import T0, click, incident, ledger, note, proposal


@pytest.fixture
def leaders(store_location: str) -> Iterator[tuple[Store, Store]]:
    """The old leader (term 1) and the new one (term 2), each with its own store object
    on one database, after the new one fenced it."""
    with Store(store_location) as old, Store(store_location) as new:
        old.upsert_incident(incident("inc-1"))
        old.create_proposal(proposal("p-1"))
        old.fence(1)
        old.set_bookmark("k", "by term 1")
        new.fence(2)
        yield old, new


LATE_WRITES: list[tuple[str, Callable[[Store], object], str]] = [
    (
        "ledger claim",
        lambda s: s.start_action(ledger("p-1")),
        "record the start of proposal p-1's action",
    ),
    ("approval", lambda s: click(s, "p-1", "U-late", T0), "record the decision on proposal p-1"),
    (
        "outbox",
        lambda s: s.enqueue(note("inc-1", text="late")),
        "queue a notification for incident inc-1",
    ),
    ("bookmark", lambda s: s.set_bookmark("k", "by term 1, late"), "save bookmark k"),
]


@pytest.mark.parametrize(
    ("write", "what"), [(w, what) for _, w, what in LATE_WRITES], ids=[n for n, _, _ in LATE_WRITES]
)
def test_a_deposed_leaders_late_write_is_refused_and_changes_nothing(
    leaders: tuple[Store, Store], write: Callable[[Store], object], what: str
) -> None:
    old, new = leaders
    with pytest.raises(StaleTermError) as caught:
        write(old)
    assert caught.value.problem == (
        f"refused to {what}: this pitcrew's term 1 is older than the store's 2 (another replica leads now)"
    )
    assert new.recent_actions(10) == ()
    current = new.get_proposal("p-1")
    assert current is not None
    assert (current.state, current.version) == (ProposalState.OFFERED, 0)
    assert new.pending_notifications() == 0
    assert new.bookmark("k") == "by term 1"
    assert new.term() == 2


def test_the_new_leader_and_unfenced_writers_go_on(
    leaders: tuple[Store, Store], store_location: str
) -> None:
    _, new = leaders
    new.start_action(ledger("p-1"))
    assert [e.proposal_id for e in new.recent_actions(10)] == ["p-1"]
    with Store(store_location) as command:  # `pitcrew approve` in another shell
        assert isinstance(click(command, "p-1", "U1", T0), approvals.NeedsSecondApprover)
        command.set_bookmark("k", "unfenced")
    assert new.term() == 2


def test_an_older_term_is_refused_at_once_and_the_same_term_again_is_not(
    leaders: tuple[Store, Store], store_location: str
) -> None:
    with Store(store_location) as late, pytest.raises(StaleTermError) as caught:
        late.fence(1)
    assert caught.value.problem == (
        "refused to take term 1: this pitcrew's term 1 is older than the store's 2 "
        "(another replica leads now)"
    )
    _, new = leaders
    new.fence(2)
    assert new.term() == 2
    with pytest.raises(ValueError, match="a term is 0 or more, not -1"):
        new.fence(-1)


def test_a_new_store_has_term_0(store: Store) -> None:
    assert store.term() == 0


def test_leaders_fencing_in_turn_leave_only_the_newest_writing(store_location: str) -> None:
    """Eight store objects take terms 1..8 from eight threads at once, then all write:
    exactly the holder of the newest term recorded still writes."""
    stores = [Store(store_location) for _ in range(8)]
    try:
        stores[0].upsert_incident(incident("inc-1"))
        barrier = threading.Barrier(len(stores))
        refused: list[int] = []

        def take(term: int) -> None:
            barrier.wait()
            try:
                stores[term - 1].fence(term)
            except StaleTermError:
                refused.append(term)

        threads = [threading.Thread(target=take, args=(n,)) for n in range(1, 9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        writers = []
        for term, store in enumerate(stores, start=1):
            try:
                store.set_bookmark("k", str(term))
                writers.append(term)
            except StaleTermError:
                pass
        assert writers == [8]
        assert stores[0].term() == 8
        assert stores[0].bookmark("k") == "8"
    finally:
        for store in stores:
            store.close()


def test_each_refusal_is_told_before_it_is_raised(store_location: str) -> None:
    """The daemon exits there: whatever thread met the refusal, the deposed leader stops."""
    told: list[StaleTermError] = []
    with Store(store_location) as old, Store(store_location) as new:
        old.fence(3, refused=told.append)
        new.fence(4)
        with pytest.raises(StaleTermError) as caught:
            old.set_bookmark("k", "late")
        assert told == [caught.value]
        assert new.bookmark("k") is None

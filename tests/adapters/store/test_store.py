"""The store, SQLite or PostgreSQL alike, keeps pitcrew's state across restarts and moves a
proposal once, however many threads and processes click at the same time."""

from __future__ import annotations

import ast
import dataclasses
import multiprocessing
import threading
import time
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from bot.adapters import store as store_package
from bot.adapters.store.ledger import INTERRUPTED_DETAIL
from bot.adapters.store.outbox import OutboxMessage
from bot.adapters.store.proposals import Approval
from bot.adapters.store.schema import MIGRATIONS, SCHEMA_VERSION
from bot.adapters.store.store import Cleanup, Store
from bot.core.actions import approvals
from bot.core.actions.approvals import IllegalTransitionError, LiveCheck, StaleProposalError
from bot.core.actions.policy import ChatUser
from bot.core.diagnosis.unmatched import UnmatchedShape, failure_lines
from bot.core.errors import StoreError
from bot.core.model import (
    ActionResult,
    IncidentState,
    LedgerEntry,
    NotificationKind,
    ObjectRef,
    Proposal,
    ProposalState,
    Silence,
    Transition,
)
from tests.support.ledger import ledger_entry
from tests.support.records import (
    ONE,
    T0,
    TABLES,
    click,
    drain,
    finding,
    incident,
    ledger,
    minutes,
    move,
    note,
    proposal,
)
from tests.support.stores import schema_version, tables

OFFERED, APPROVED, RUNNING = ProposalState.OFFERED, ProposalState.APPROVED, ProposalState.RUNNING
REJECTED, EXPIRED, SUCCEEDED = (
    ProposalState.REJECTED,
    ProposalState.EXPIRED,
    ProposalState.SUCCEEDED,
)


@pytest.fixture
def with_incident(store: Store) -> Store:
    store.upsert_incident(incident("inc-1"))
    return store


def started(store: Store) -> tuple[LedgerEntry, ...]:
    """The ledger's entries still STARTED, oldest first."""
    entries = [e for e in store.recent_actions(100) if e.result is ActionResult.STARTED]
    return tuple(sorted(entries, key=lambda e: (e.started_at, e.proposal_id)))


# -- opening, migrating, refusing ----------------------------------------------------------


def test_a_new_store_gets_the_latest_schema(store_location: str) -> None:
    with Store(store_location) as store:
        assert schema_version(store_location) == SCHEMA_VERSION == 12
        store.ping()
    assert tables(store_location) == TABLES


FOREIGN_KEY = {
    "sqlite": "FOREIGN KEY constraint failed",
    "postgresql": 'insert or update on table "findings" violates foreign key constraint '
    '"findings_incident_id_fkey"',
}


def test_foreign_keys_are_enforced(store: Store) -> None:
    with pytest.raises(StoreError) as caught:
        store.append_findings("nope", [finding()], T0)
    dialect = "postgresql" if store.kind == "PostgreSQL" else "sqlite"
    assert (
        caught.value.problem == f"cannot append findings to incident nope: {FOREIGN_KEY[dialect]}"
    )


def test_migrations_are_numbered_in_order() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))


def test_migrating_is_idempotent_across_opens(store_location: str) -> None:
    for _ in range(3):
        with Store(store_location) as store:
            store.set_bookmark("k", "v")
    assert schema_version(store_location) == 12


# -- incidents and findings ----------------------------------------------------------------


def test_an_incident_is_saved_and_updated_in_place(store: Store) -> None:
    first = incident("inc-1")
    store.upsert_incident(first)
    assert store.incident("inc-1") == first
    later = dataclasses.replace(
        first,
        updated_at=minutes(3),
        counts=MappingProxyType({"pod-oom-killed": 340}),
        state=IncidentState.RESOLVED,
        resolved_at=minutes(3),
    )
    store.upsert_incident(later)
    assert store.incident("inc-1") == later
    assert store.incident("inc-2") is None
    assert store.recent_incidents(10) == (later,)


@pytest.fixture
def several(store: Store) -> Store:
    for value in (
        incident("a", namespace="ml", workload="verl", opened=0, updated=5),
        incident("b", namespace="ml", workload="openrlhf", opened=1, updated=2),
        incident("c", namespace="ml", workload="verl", opened=2, updated=9, resolved=9),
        incident("d", namespace="serving", workload="vllm", opened=3, updated=4),
        incident("e", key="ml/rayjob/verl", namespace="ml", workload="verl", opened=4, updated=7),
    ):
        store.upsert_incident(value)
    return store


@pytest.mark.parametrize(
    ("namespace", "workload", "expected"),
    [
        (None, None, ["a", "b", "d", "e"]),
        ("ml", None, ["a", "b", "e"]),
        ("serving", None, ["d"]),
        ("none", None, []),
        (None, ObjectRef("RayJob", "verl", "ml"), ["a", "e"]),
        ("ml", ObjectRef("RayJob", "openrlhf", "ml"), ["b"]),
    ],
)
def test_open_incidents_oldest_first(
    several: Store, namespace: str | None, workload: ObjectRef | None, expected: list[str]
) -> None:
    assert [i.id for i in several.open_incidents(namespace, workload)] == expected


@pytest.mark.parametrize(
    ("n", "expected"),
    [(1, ["c"]), (3, ["c", "e", "a"]), (10, ["c", "e", "a", "d", "b"]), (0, [])],
)
def test_recent_incidents_newest_first(several: Store, n: int, expected: list[str]) -> None:
    assert [i.id for i in several.recent_incidents(n)] == expected


def test_findings_history_is_appended_and_bounded(store_location: str) -> None:
    with Store(store_location, findings_per_incident=3) as store:
        store.upsert_incident(incident("inc-1"))
        store.upsert_incident(incident("inc-2"))
        store.append_findings("inc-1", [finding(count=n) for n in (1, 2)], T0)
        store.append_findings("inc-2", [finding("other")], T0)
        assert [f.count for f in store.findings("inc-1")] == [1, 2]
        store.append_findings("inc-1", [finding(count=n) for n in (3, 4, 5)], minutes(1))
        store.append_findings("inc-1", [], minutes(2))
        assert [f.count for f in store.findings("inc-1")] == [3, 4, 5]
        assert store.findings("inc-2") == (finding("other"),)
        assert store.findings("inc-3") == ()


# -- proposals -----------------------------------------------------------------------------


def test_a_proposal_is_created_with_its_history(with_incident: Store) -> None:
    offered = Transition(OFFERED, T0, "pitcrew", "pod-oom-killed offers it")
    created = with_incident.create_proposal(proposal("p-1", history=(offered,)))
    assert created == proposal("p-1", history=(offered,))
    assert with_incident.get_proposal("p-1") == created
    assert with_incident.get_proposal("p-2") is None


def test_proposals_for_an_incident_oldest_first(with_incident: Store) -> None:
    with_incident.upsert_incident(incident("inc-2"))
    for pid, iid, created in (("p-b", "inc-1", 2), ("p-a", "inc-1", 1), ("p-c", "inc-2", 0)):
        with_incident.create_proposal(proposal(pid, iid, created))
    assert [p.id for p in with_incident.proposals_for_incident("inc-1")] == ["p-a", "p-b"]
    assert [p.id for p in with_incident.proposals_for_incident("inc-2")] == ["p-c"]
    assert with_incident.proposals_for_incident("inc-3") == ()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (proposal("p-1"), "proposal p-1 already exists"),
        (
            proposal("p-2", "inc-9"),
            "proposal p-2 names incident inc-9, which is not stored; save the incident first",
        ),
        (
            dataclasses.replace(proposal("p-3"), state=APPROVED),
            "proposal p-3 is created offered, not approved",
        ),
    ],
)
def test_a_proposal_that_cannot_be_created(
    with_incident: Store, value: Proposal, problem: str
) -> None:
    with_incident.create_proposal(proposal("p-1"))
    with pytest.raises(StoreError) as caught:
        with_incident.create_proposal(value)
    assert caught.value.problem == problem


@pytest.mark.parametrize(
    ("path", "new"),
    [
        ([], APPROVED),
        ([], REJECTED),
        ([], EXPIRED),
        ([APPROVED], RUNNING),
        ([APPROVED], ProposalState.FAILED),
        ([APPROVED, RUNNING], SUCCEEDED),
    ],
)
def test_a_decision_is_recorded_with_its_step_and_the_next_version(
    with_incident: Store, path: list[ProposalState], new: ProposalState
) -> None:
    with_incident.create_proposal(proposal("p-1"))
    for step, to_state in enumerate(path, start=1):
        move(with_incident, "p-1", to_state, "U1", minutes(step))
    before = with_incident.get_proposal("p-1")
    assert before is not None
    decided = approvals.transition(before, new, "U2", minutes(30), "why")
    recorded = with_incident.record_decision(decided, before.version)
    assert recorded == with_incident.get_proposal("p-1") == decided
    assert (recorded.state, recorded.version) == (new, len(path) + 1)
    assert recorded.history[-1] == Transition(new, minutes(30), "U2", "why", before.state)


def wrote(proposal_value: Proposal, to_state: ProposalState, actor: str = "U2") -> Proposal:
    """What a caller that skipped the core would write: any move, legal or not."""
    step = Transition(to_state, minutes(30), actor, "", from_state=proposal_value.state)
    return dataclasses.replace(
        proposal_value,
        state=to_state,
        history=(*proposal_value.history, step),
        version=proposal_value.version + 1,
    )


@pytest.mark.parametrize(
    ("path", "new", "error"),
    [
        (
            [],
            OFFERED,  # what the service used to write for a first of two approvals
            "proposal p-1 cannot go from offered to offered "
            "(from offered it can go to: approved, expired, rejected)",
        ),
        (
            [],
            RUNNING,
            "proposal p-1 cannot go from offered to running "
            "(from offered it can go to: approved, expired, rejected)",
        ),
        (
            [APPROVED],
            OFFERED,
            "proposal p-1 cannot go from approved to offered "
            "(from approved it can go to: failed, running)",
        ),
        (
            [APPROVED, RUNNING, SUCCEEDED],
            RUNNING,
            "proposal p-1 cannot go from succeeded to running "
            "(from succeeded it can go to: nothing, succeeded is final)",
        ),
    ],
)
def test_a_move_outside_legal_is_refused_and_nothing_is_written(
    with_incident: Store, path: list[ProposalState], new: ProposalState, error: str
) -> None:
    with_incident.create_proposal(proposal("p-1"))
    for step, to_state in enumerate(path, start=1):
        move(with_incident, "p-1", to_state, "U1", minutes(step))
    before = with_incident.get_proposal("p-1")
    assert before is not None
    with pytest.raises(IllegalTransitionError) as refused:
        with_incident.record_decision(wrote(before, new), before.version)
    assert str(refused.value) == error
    assert with_incident.get_proposal("p-1") == before
    assert with_incident.last_proposal_change() == len(path)


def test_a_decision_made_from_a_stale_version_is_refused_and_nothing_is_written(
    with_incident: Store,
) -> None:
    with_incident.create_proposal(proposal("p-1"))
    read = with_incident.get_proposal("p-1")
    assert read is not None
    approved = approvals.transition(read, APPROVED, "U1", minutes(1))
    rejected = approvals.transition(read, REJECTED, "U2", minutes(1))
    with_incident.record_decision(approved, read.version)
    with pytest.raises(StaleProposalError) as refused:
        with_incident.record_decision(rejected, read.version)
    assert str(refused.value) == (
        "proposal p-1 is at version 1, not 0: it changed since it was read; "
        "decide again on the stored proposal"
    )
    assert with_incident.get_proposal("p-1") == approved


def test_a_decision_on_a_missing_proposal_is_refused(store: Store) -> None:
    with pytest.raises(StoreError) as refused:
        store.record_decision(proposal("p-9"), 0)
    assert refused.value.problem == "cannot record a decision: no proposal p-9"


def test_the_one_function_is_the_only_writer_of_a_proposal_state() -> None:
    """Every statement of the store that changes a proposal's state or history is in
    `record_decision`, but for the first history rows `create_proposal` writes."""
    functions = [
        node
        for path in sorted(Path(store_package.__file__).parent.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
    ]
    writers = {
        f.name
        for f in functions
        if any(sql in ast.unparse(f) for sql in ("UPDATE proposals", "INTO transitions"))
    }
    assert writers == {"record_decision", "_insert_transition"}
    assert {f.name for f in functions if _calls(f, "_insert_transition")} == {
        "create_proposal",
        "record_decision",
    }


def _calls(function: ast.FunctionDef, name: str) -> bool:
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
        for node in ast.walk(function)
    )


def test_expired_offers(with_incident: Store) -> None:
    for pid, created in (("p-1", 0), ("p-2", 10), ("p-3", 20)):
        with_incident.create_proposal(proposal(pid, created=created))
    move(with_incident, "p-1", APPROVED, "U1", minutes(1))
    assert [p.id for p in with_incident.expired_offers(minutes(70))] == ["p-2"]
    assert [p.id for p in with_incident.expired_offers(minutes(80))] == ["p-2", "p-3"]
    assert with_incident.expired_offers(minutes(69)) == ()


def test_partial_approvals_remember_who_approved_first(with_incident: Store) -> None:
    with_incident.create_proposal(proposal("p-1"))
    first = Approval("p-1", "U-alice", minutes(1))
    second = Approval("p-1", "U-bob", minutes(2))
    assert isinstance(
        click(with_incident, "p-1", "U-alice", minutes(1)), approvals.NeedsSecondApprover
    )
    assert click(with_incident, "p-1", "U-alice", minutes(3)) == approvals.Refused(
        "U-alice already approved; a second, different approver is needed",
        with_incident.get_proposal("p-1"),
    )
    halfway = with_incident.get_proposal("p-1")
    assert halfway is not None
    assert (halfway.state, halfway.approvals, halfway.version) == (OFFERED, ("U-alice",), 1)
    assert halfway.history == (
        Transition(
            OFFERED,
            minutes(1),
            "U-alice",
            "approval 1 of 2; needs a different approver",
            from_state=OFFERED,
        ),
    )
    assert isinstance(click(with_incident, "p-1", "U-bob", minutes(2)), approvals.Approved)
    current = with_incident.get_proposal("p-1")
    assert current is not None
    assert (current.state, current.approvals) == (APPROVED, ("U-alice", "U-bob"))
    assert isinstance(click(with_incident, "p-1", "U-carol", minutes(4)), approvals.Refused)
    assert with_incident.approvals("p-1") == (first, second)


# -- the action ledger ---------------------------------------------------------------------


def test_the_ledger_records_start_and_finish(store: Store) -> None:
    store.start_action(ledger("p-1", 0))
    store.start_action(dataclasses.replace(ledger("p-2", 1), detail="patching"))
    assert started(store) == (
        ledger("p-1", 0),
        dataclasses.replace(ledger("p-2", 1), detail="patching"),
    )
    done = store.finish_action("p-2", ActionResult.SUCCEEDED, minutes(2))
    assert done == LedgerEntry(
        "p-2", "k8s.bump_memory", "U1", minutes(1), ActionResult.SUCCEEDED, "patching", minutes(2)
    )
    assert store.finish_action("p-2", ActionResult.FAILED, minutes(3), "again") is None
    assert ledger_entry(store, "p-2") == done
    assert started(store) == (ledger("p-1", 0),)
    assert [e.proposal_id for e in store.recent_actions(5)] == ["p-2", "p-1"]
    assert ledger_entry(store, "p-9") is None


def test_an_action_starts_once(store: Store) -> None:
    store.start_action(ledger("p-1"))
    with pytest.raises(StoreError) as caught:
        store.start_action(ledger("p-1"))
    assert caught.value.problem == "the action of proposal p-1 was already started"
    with pytest.raises(ValueError, match="starts as started, not succeeded"):
        store.start_action(dataclasses.replace(ledger("p-2"), result=ActionResult.SUCCEEDED))
    with pytest.raises(ValueError, match="final result"):
        store.finish_action("p-1", ActionResult.STARTED, T0)


def test_an_action_running_at_a_restart_is_found_and_marked_interrupted(
    store_location: str,
) -> None:
    with Store(store_location) as store:
        store.start_action(ledger("p-1"))
    with Store(store_location) as store:
        assert started(store) == (ledger("p-1"),)
        interrupted = store.mark_interrupted("p-1", minutes(5))
        assert interrupted == dataclasses.replace(
            ledger("p-1"),
            result=ActionResult.INTERRUPTED,
            detail=INTERRUPTED_DETAIL,
            finished_at=minutes(5),
        )
        assert started(store) == ()
        assert store.mark_interrupted("p-1", minutes(6)) is None


# -- silences ------------------------------------------------------------------------------


def silence(sid: str, start: float, end: float, **matchers: str) -> Silence:
    return Silence(sid, MappingProxyType(matchers), minutes(start), minutes(end), "U1", "noisy")


@pytest.fixture
def silenced(store: Store) -> Store:
    store.add_silence(silence("s-1", 0, 30, playbook="pod-oom-killed"))
    store.add_silence(silence("s-2", 10, 20, namespace="ml"))
    store.add_silence(silence("s-3", 40, 50, incident="inc-1"))
    return store


@pytest.mark.parametrize(
    ("at", "expected"),
    [(-1, []), (0, ["s-1"]), (10, ["s-1", "s-2"]), (20, ["s-1"]), (30, []), (45, ["s-3"])],
)
def test_active_silences(silenced: Store, at: float, expected: list[str]) -> None:
    assert [s.id for s in silenced.active_silences(minutes(at))] == expected


def test_a_silence_is_kept_whole(silenced: Store) -> None:
    assert silenced.silence("s-2") == silence("s-2", 10, 20, namespace="ml")
    assert silenced.silence("s-9") is None
    with pytest.raises(StoreError) as caught:
        silenced.add_silence(silence("s-1", 0, 1))
    assert caught.value.problem == "silence s-1 already exists"


def test_expiring_and_deleting_silences(silenced: Store) -> None:
    assert silenced.expire_silence("s-1", minutes(5)) == silence(
        "s-1", 0, 5, playbook="pod-oom-killed"
    )
    assert [s.id for s in silenced.active_silences(minutes(10))] == ["s-2"]
    assert silenced.expire_silence("s-1", minutes(8)) == silence(
        "s-1", 0, 5, playbook="pod-oom-killed"
    )
    assert silenced.expire_silence("s-9", minutes(8)) is None
    assert [s.id for s in silenced.active_silences(minutes(45))] == ["s-3"]


# -- the outbox ----------------------------------------------------------------------------


def test_enqueue_assigns_increasing_ids(store: Store) -> None:
    first = store.enqueue(note("inc-1", text="a"))
    second = store.enqueue(note("inc-2", text="b"))
    assert (first.id, second.id) == (1, 2)
    assert first == dataclasses.replace(note("inc-1", text="a"), id=1)
    assert store.pending_notifications() == 2


def test_next_due_is_fifo_per_incident_and_channel(store: Store) -> None:
    store.enqueue(note("inc-1", text="post-1"))
    store.enqueue(note("inc-2", text="post-2"))
    store.enqueue(note("inc-1", NotificationKind.UPDATE, text="update-1"))
    store.enqueue(note("inc-1", NotificationKind.REPLY, "#other", text="other-1"))
    store.enqueue(note("inc-2", NotificationKind.REPLY, text="reply-2"))
    assert drain(store, T0) == [
        (1, "post-1"),
        (2, "post-2"),
        (3, "update-1"),
        (4, "other-1"),
        (5, "reply-2"),
    ]
    assert store.next_due(minutes(100)) is None
    assert store.pending_notifications() == 0


def test_a_failing_message_holds_back_only_its_own_queue(store: Store) -> None:
    store.enqueue(note("inc-1", text="post-1"))
    store.enqueue(note("inc-1", NotificationKind.UPDATE, text="update-1"))
    store.enqueue(note("inc-2", text="post-2"))
    head = store.next_due(T0)
    assert head == OutboxMessage(dataclasses.replace(note("inc-1", text="post-1"), id=1), 0, "", T0)
    assert store.mark_failed(1, "ratelimited", minutes(1))
    assert drain(store, minutes(0.5)) == [(3, "post-2")]
    retry = store.next_due(minutes(1))
    assert retry is not None
    assert (retry.notification.id, retry.attempts, retry.last_error) == (1, 1, "ratelimited")
    assert retry.next_attempt_at == minutes(1)
    assert store.mark_failed(1, "timeout", minutes(3))
    assert store.next_due(minutes(2)) is None
    again = store.next_due(minutes(3))
    assert again is not None
    assert (again.attempts, again.last_error) == (2, "timeout")
    assert drain(store, minutes(3)) == [(1, "post-1"), (2, "update-1")]


def test_a_message_is_not_due_before_it_was_created(store: Store) -> None:
    store.enqueue(note("inc-1", at=10, text="later"))
    store.enqueue(dataclasses.replace(note("inc-2", text="undated"), created_at=None))
    assert drain(store, minutes(5)) == [(2, "undated")]
    assert drain(store, minutes(10)) == [(1, "later")]


def test_delivered_and_abandoned_messages_are_never_returned(store: Store) -> None:
    store.enqueue(note("inc-1", text="post"))
    store.enqueue(note("inc-1", NotificationKind.UPDATE, text="bad"))
    store.enqueue(note("inc-1", NotificationKind.REPLY, text="reply"))
    assert store.mark_delivered(1, "C1/1.0", T0) is True
    assert store.mark_delivered(1, "C1/2.0", T0) is False
    assert store.mark_failed(1, "late", minutes(1)) is False
    assert store.mark_abandoned(2, "invalid_blocks", T0) is True
    assert store.mark_abandoned(2, "invalid_blocks", T0) is False
    assert drain(store, minutes(1)) == [(3, "reply")]
    assert store.mark_delivered(99, "x", T0) is False


def test_a_delivered_post_is_the_incidents_card(store: Store) -> None:
    store.enqueue(note("inc-1", text="post"))
    store.enqueue(note("inc-1", NotificationKind.UPDATE, text="update"))
    store.enqueue(note("inc-1", channel="#second", text="second"))
    assert store.chat_ref("inc-1") is None
    store.mark_delivered(1, "C1/100.1", minutes(1))
    store.mark_delivered(2, "C1/100.1-edited", minutes(2))
    store.mark_delivered(3, "C2/200.2", minutes(3))
    assert store.chat_ref("inc-1") == "C1/100.1"
    assert store.chat_ref("inc-1", "#alerts") == "C1/100.1"
    assert store.chat_ref("inc-1", "#second") == "C2/200.2"
    assert store.chat_ref("inc-1", "#third") is None
    assert store.chat_ref("inc-2") is None


# -- bookmarks -----------------------------------------------------------------------------


def test_bookmarks(store: Store) -> None:
    assert store.bookmark("k8s/pods/resourceVersion") is None
    store.set_bookmark("k8s/pods/resourceVersion", "1001")
    store.set_bookmark("ray/last-job", "raysubmit_abc")
    store.set_bookmark("k8s/pods/resourceVersion", "1002")
    assert store.bookmark("k8s/pods/resourceVersion") == "1002"
    assert store.bookmark("ray/last-job") == "raysubmit_abc"


# -- cleanup -------------------------------------------------------------------------------


def test_cleanup_deletes_what_ended_before_the_retention(store: Store) -> None:
    store.upsert_incident(incident("old", opened=0, resolved=10))
    store.upsert_incident(incident("recent", opened=0, resolved=100))
    store.upsert_incident(incident("open", opened=0))
    store.append_findings("old", [finding()], T0)
    store.create_proposal(proposal("p-old", "old"))
    click(store, "p-old", "U1", T0)
    store.create_proposal(proposal("p-open", "open"))
    store.start_action(ledger("p-old"))
    for iid, text in (("old", "old-post"), ("open", "open-post"), ("open", "pending")):
        store.enqueue(
            note(
                iid, NotificationKind.POST if "post" in text else NotificationKind.UPDATE, text=text
            )
        )
    store.mark_delivered(1, "C/1", minutes(10))
    store.mark_delivered(2, "C/2", minutes(100))
    store.add_silence(silence("s-old", 0, 10))
    store.add_silence(silence("s-new", 0, 100))

    result = store.cleanup(minutes(110), retention=timedelta(minutes=60))

    assert result == Cleanup(incidents=1, notifications=1, silences=1)
    assert store.incident("old") is None
    assert store.findings("old") == ()
    assert store.get_proposal("p-old") is None
    assert store.approvals("p-old") == ()
    assert store.chat_ref("old") is None
    assert [i.id for i in store.recent_incidents(10)] == ["recent", "open"]
    assert store.get_proposal("p-open") is not None
    assert ledger_entry(store, "p-old") == ledger("p-old")
    assert store.chat_ref("open") == "C/2"
    assert store.pending_notifications() == 1
    assert store.silence("s-old") is None
    assert store.silence("s-new") is not None
    assert store.cleanup(minutes(110), retention=timedelta(minutes=60)) == Cleanup(0, 0, 0)


# -- restart -------------------------------------------------------------------------------


def test_a_restart_keeps_the_queue_order_and_pending_approvals(store_location: str) -> None:
    with Store(store_location) as store:
        store.upsert_incident(incident("inc-1"))
        store.create_proposal(proposal("p-1"))
        click(store, "p-1", "U-alice", minutes(1))
        for text in ("post", "u1", "u2"):
            kind = NotificationKind.POST if text == "post" else NotificationKind.UPDATE
            store.enqueue(note("inc-1", kind, text=text))
        store.enqueue(note("inc-2", text="other"))
        first = store.next_due(T0)
        assert first is not None
        store.mark_delivered(first.notification.id or 0, "C1/1.0", T0)
        store.mark_failed(2, "chat unreachable", minutes(1))

    with Store(store_location) as store:
        assert store.chat_ref("inc-1") == "C1/1.0"
        assert drain(store, minutes(1)) == [(2, "u1"), (3, "u2"), (4, "other")]
        assert store.next_due(minutes(10)) is None
        assert isinstance(click(store, "p-1", "U-bob", minutes(2)), approvals.Approved)
        assert store.approvals("p-1") == (
            Approval("p-1", "U-alice", minutes(1)),
            Approval("p-1", "U-bob", minutes(2)),
        )

    with Store(store_location) as store:
        assert drain(store, minutes(20)) == []
        current = store.get_proposal("p-1")
        assert current is not None
        assert current.state is APPROVED
        assert click(store, "p-1", "U-carol", minutes(3)) == approvals.Refused(
            "already approved by U-bob", current
        )


# -- concurrency ---------------------------------------------------------------------------

THREADS = 16
PROCESSES = 4
THREADS_PER_PROCESS = 4


def approve_all(store: Store, actors: list[str], barrier: threading.Barrier) -> list[str]:
    """Each actor clicks Approve on its own thread at the same moment; returns the winners."""
    winners: list[str] = []
    lock = threading.Lock()

    def approve(actor: str) -> None:
        """One read, one decision of the core, one compare-and-swap: a lost race is final."""
        barrier.wait()
        current = store.get_proposal("p-1")
        assert current is not None
        user = ChatUser(actor, frozenset({"sre"}))
        decision = approvals.approve(current, user, ONE, T0, LiveCheck())
        if not isinstance(decision, approvals.Approved):
            return
        try:
            store.record_decision(decision.proposal, current.version)
        except StaleProposalError:
            return
        with lock:
            winners.append(actor)

    threads = [threading.Thread(target=approve, args=(actor,)) for actor in actors]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return winners


def approve_in_process(path: str, index: int, start: Any, results: Any) -> None:
    """Runs in a spawned process: its own Store on the shared file, several threads."""
    with Store(path, busy_timeout=30) as store:
        actors = [f"proc{index}-t{n}" for n in range(THREADS_PER_PROCESS)]
        barrier = threading.Barrier(len(actors))
        start.wait()
        results.put(approve_all(store, actors, barrier))


@pytest.mark.slow
def test_concurrent_double_approval_moves_the_proposal_once(store_location: str) -> None:
    with Store(store_location, busy_timeout=30) as store:
        store.upsert_incident(incident("inc-1"))
        store.create_proposal(proposal("p-1"))
        context = multiprocessing.get_context("spawn")
        start = context.Barrier(PROCESSES + 1)
        results = context.Queue()
        processes = [
            context.Process(target=approve_in_process, args=(store_location, n, start, results))
            for n in range(PROCESSES)
        ]
        for process in processes:
            process.start()
        start.wait(timeout=120)
        began = time.perf_counter()
        local = approve_all(
            store, [f"main-t{n}" for n in range(THREADS)], threading.Barrier(THREADS)
        )
        remote = [results.get(timeout=120) for _ in processes]
        elapsed = time.perf_counter() - began
        for process in processes:
            process.join(timeout=60)
            assert process.exitcode == 0

        winners = local + [actor for found in remote for actor in found]
        assert len(winners) == 1
        current = store.get_proposal("p-1")
        assert current is not None
        assert current.state is APPROVED
        approved = [t for t in current.history if t.to_state is APPROVED]
        assert approved == [
            Transition(APPROVED, T0, winners[0], f"approved by {winners[0]}", OFFERED)
        ]
        assert elapsed < 30
        print(f"\n{THREADS + PROCESSES * THREADS_PER_PROCESS} clicks in {elapsed * 1000:.0f} ms")


def test_concurrent_second_approvals_reach_the_quorum_once(with_incident: Store) -> None:
    with_incident.create_proposal(proposal("p-1"))
    moved: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def approve(actor: str) -> None:
        barrier.wait()
        if isinstance(click(with_incident, "p-1", actor, T0), approvals.Approved):
            with lock:
                moved.append(actor)

    threads = [threading.Thread(target=approve, args=(f"U{n}",)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    current = with_incident.get_proposal("p-1")
    assert current is not None
    assert len(moved) == 1
    first, second = current.history
    assert (first.to_state, second.to_state, second.actor) == (OFFERED, APPROVED, moved[0])
    assert current.approvals == (first.actor, moved[0])


def open_in_process(path: str, start: Any, results: Any) -> None:
    start.wait()
    with Store(path, busy_timeout=30):
        results.put(schema_version(path))


@pytest.mark.slow
def test_processes_opening_a_new_store_together_migrate_it_once(store_location: str) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(PROCESSES)
    results = context.Queue()
    processes = [
        context.Process(target=open_in_process, args=(store_location, start, results))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    versions = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert versions == [SCHEMA_VERSION] * PROCESSES
    assert tables(store_location) == TABLES


# -- unmatched failures ---------------------------------------------------------------------


def test_unmatched_failures_are_counted_by_shape_with_first_and_last_seen(store: Store) -> None:
    first = failure_lines(["ERROR worker 10.0.3.17 lost 3 shards", "all fine"], "a.log")
    again = failure_lines(["ERROR worker 10.0.4.2 lost 12 shards"], "b.log")
    other = failure_lines(["KeyError: 'reward_fn'"], "c.log")
    assert store.record_unmatched(first, T0) == 1
    assert store.record_unmatched(again, minutes(5)) == 1
    assert store.record_unmatched(other, minutes(6)) == 1
    assert store.record_unmatched([], minutes(7)) == 0
    assert store.unmatched() == (
        UnmatchedShape(
            shape="ERROR worker <ip> lost <n> shards",
            example="ERROR worker 10.0.4.2 lost 12 shards",
            origin="b.log",
            count=2,
            first_seen=T0,
            last_seen=minutes(5),
        ),
        UnmatchedShape(
            shape="KeyError: 'reward_fn'",
            example="KeyError: 'reward_fn'",
            origin="c.log",
            count=1,
            first_seen=minutes(6),
            last_seen=minutes(6),
        ),
    )
    assert len(store.unmatched(limit=1)) == 1


# Each racer its own store object (its own connection, as another process or replica has),
# all released at once on one row: exactly one write moves it.
def _claim(store: Store) -> bool:
    try:
        store.start_action(ledger("p-1"))
    except StoreError:
        return False
    return True


def _deliver(store: Store) -> bool:
    return store.mark_delivered(1, f"C1/{id(store)}", T0)


def _take(store: Store) -> bool:
    return bool(store.take_released())


RACES = {"ledger claim": _claim, "outbox delivery": _deliver, "released evidence": _take}


@pytest.mark.parametrize("race", RACES.values(), ids=RACES.keys())
def test_racing_writers_on_one_row_move_it_once(store_location: str, race: Any) -> None:
    with Store(store_location) as setup:
        setup.upsert_incident(incident("inc-1"))
        setup.create_proposal(proposal("p-1"))
        setup.enqueue(note("inc-1", text="card"))
        setup.set_aside(setup.spool("{}", b"body", T0), "failed", "classification", "bug", T0)
        setup.requeue()
    racers = [Store(store_location, busy_timeout=30) for _ in range(12)]
    barrier = threading.Barrier(len(racers))
    won: list[bool] = []

    def run(racer: Store) -> None:
        barrier.wait()
        won.append(race(racer))

    try:
        threads = [threading.Thread(target=run, args=(racer,)) for racer in racers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for racer in racers:
            racer.close()
    assert sorted(won) == [False] * 11 + [True]
    with Store(store_location) as after:
        assert [e.proposal_id for e in after.recent_actions(10)] == ["p-1"][: int(race is _claim)]
        assert (after.pending_notifications(), race is _deliver) in ((0, True), (1, False))

"""A new leader finishes the actions the deposed one was running (`Runner.take_over`): a
change already in place is verified, not made again; one never made is made once; an
action the ledger says ended only has its proposal settled."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.store.store import Store
from bot.core.actions import approvals
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.step import Step
from bot.core.model import ActionResult, ProposalState
from bot.daemon.executor import Registry
from bot.daemon.ports import Verification
from bot.daemon.runner import Runner
from tests.adapters.store.test_store import T0, incident, ledger, move, proposal
from tests.support.daemon import Clock
from tests.support.ledger import ledger_entry

S = ProposalState
NOW = T0 + timedelta(minutes=5)


class Marking:
    """A target that remembers which proposal changed it last, as a Kubernetes object's
    `pitcrew.io/last-proposal` does; each change it takes is counted."""

    def __init__(self) -> None:
        self.mark = ""
        self.changes = 0

    def plan(self, step: Step) -> None:
        return None

    def check(self, step: Step, plan: None) -> LiveCheck:
        done = f"already applied by proposal {step.proposal_id}" if self.mark else ""
        return LiveCheck(dict.fromkeys(step.preconditions, True), step.preview, done=done)

    def execute(self, step: Step, plan: None) -> str:
        self.changes += 1
        self.mark = step.proposal_id
        return "limit 16Gi → 24Gi"

    def verify(self, step: Step) -> Verification:
        return Verification(self.mark == step.proposal_id, "in place")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store(tmp_path / "pitcrew.db")
    opened.upsert_incident(incident("inc-1"))
    opened.create_proposal(proposal("p-1"))
    move(opened, "p-1", S.APPROVED, "U1", T0)
    move(opened, "p-1", S.RUNNING, approvals.SYSTEM_ACTOR, T0)  # the deposed leader's claim
    return opened


def taken_over(store: Store, target: Marking) -> tuple[list[str], Runner]:
    told: list[str] = []
    runner = Runner(
        store,
        Registry({"k8s.bump_memory": target}),
        clock=Clock(NOW),
        tell=lambda incident_id, text: told.append(text),
    )
    assert runner.take_over() == 1
    return told, runner


def test_an_action_the_old_leader_claimed_and_never_made_is_made_once(store: Store) -> None:
    store.start_action(ledger("p-1"))
    target = Marking()
    told, _ = taken_over(store, target)
    assert target.changes == 1
    done = store.get_proposal("p-1")
    assert done is not None
    assert done.state is S.SUCCEEDED
    entry = ledger_entry(store, "p-1")
    assert entry is not None
    assert entry.result is ActionResult.SUCCEEDED
    assert told == [
        "k8s.bump_memory (p-1) was running when pitcrew's leader changed; the new leader "
        "finishes it (a change already made is verified, not made again)."
    ]


def test_a_change_the_old_leader_made_is_verified_not_made_again(store: Store) -> None:
    store.start_action(ledger("p-1"))
    target = Marking()
    target.mark, target.changes = "p-1", 1  # patched, then the leader died
    taken_over(store, target)
    assert target.changes == 1
    done = store.get_proposal("p-1")
    assert done is not None
    assert done.state is S.SUCCEEDED
    entry = ledger_entry(store, "p-1")
    assert entry is not None
    assert (entry.result, entry.detail) == (
        ActionResult.SUCCEEDED,
        "already applied by proposal p-1; in place",
    )


def test_a_claim_the_old_leader_never_wrote_to_the_ledger_is_started_then_made(
    store: Store,
) -> None:
    target = Marking()
    taken_over(store, target)
    assert target.changes == 1
    entry = ledger_entry(store, "p-1")
    assert entry is not None
    assert entry.result is ActionResult.SUCCEEDED


def test_an_action_the_ledger_says_ended_only_has_its_proposal_settled(store: Store) -> None:
    store.start_action(ledger("p-1"))
    store.finish_action("p-1", ActionResult.SUCCEEDED, T0, "limit 16Gi → 24Gi; in place")
    target = Marking()
    taken_over(store, target)
    assert target.changes == 0
    done = store.get_proposal("p-1")
    assert done is not None
    assert done.state is S.SUCCEEDED
    assert done.history[-1].reason == "limit 16Gi → 24Gi; in place"

"""One seam for actions: every action of the catalogue has one spec and one executor
(built by the executor kind its spec names), its offer's live check, its approval's
re-check and the runner's check before it executes are one call (`checked`), what an
exception met there means is one policy (`outcome_of`: a bug is logged with its
traceback, counted by stage and said as "pitcrew bug"), and an action added in a test
needs one spec and one executor to run end to end."""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.kuberay import rerun
from bot.adapters.kubernetes import executors as kubernetes
from bot.adapters.ray.executor_base import RayClusters
from bot.adapters.ray.executors import build as ray_build
from bot.adapters.store.store import Store
from bot.app.factories import EXECUTOR_KINDS
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import ActionParams
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.actions.specs import ACTION_SPECS, FACTS, ActionSpec
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.core.model import ActionOffer, ActionResult, ProposalState
from bot.daemon import executor as seam
from bot.daemon import live_checks, runner, service
from bot.daemon.executor import Checked, Registry, Stage
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Executor, Outcome, Verification
from bot.daemon.runner import Runner
from bot.daemon.service import Service
from tests.support.daemon import Clock
from tests.support.ledger import ledger_entry
from tests.support.records import T0, incident, move, proposal

NOW = T0 + timedelta(minutes=5)


def built_kinds() -> dict[str, dict[str, Any]]:
    """Each executor kind's executors, as its adapter builds them (nothing is called)."""
    api: Any = object()  # no request is made while building
    return {
        "kubernetes": dict(kubernetes.executors(api)),
        "kuberay": dict(rerun.executors(api)),
        "ray": dict(ray_build(RayClusters([]), categorize=lambda parts: set())),
    }


@pytest.mark.parametrize("action", sorted(ACTION_SPECS))
def test_every_action_has_one_spec_and_one_executor(action: str) -> None:
    spec = ACTION_SPECS[action]
    assert spec.id == action
    assert spec.executor in EXECUTOR_KINDS
    kinds = built_kinds()
    owners = [kind for kind, built in kinds.items() if action in built]
    assert owners == [spec.executor]  # one executor, of the kind the spec names
    executor = kinds[spec.executor][action]
    assert executor.action == action
    for method in ("plan", "check", "execute", "verify"):
        assert callable(getattr(executor, method))
    assert all(fact in FACTS for fact in spec.preconditions)


def test_each_kind_builds_exactly_the_actions_its_specs_name() -> None:
    for kind, built in built_kinds().items():
        assert sorted(built) == sorted(a for a, s in ACTION_SPECS.items() if s.executor == kind)


# -- the offer's check and the approval's re-check are one call ----------------------------


@dataclass
class Recording:
    """An executor that finds every precondition holding and records each call."""

    calls: list[tuple[str, Step]] = field(default_factory=list)

    def plan(self, step: Step) -> str:
        self.calls.append(("plan", step))
        return f"plan of {step.action}"

    def check(self, step: Step, plan: str) -> LiveCheck:
        self.calls.append(("check", step))
        return LiveCheck(facts=dict.fromkeys(step.preconditions, True), preview=step.preview)

    def execute(self, step: Step, plan: str) -> str:
        self.calls.append(("execute", step))
        return f"carried out the {plan}"

    def verify(self, step: Step) -> Verification:
        self.calls.append(("verify", step))
        return Verification(True, "in place")


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Step]]:
    """Who called `checked`: the live checks of offers, the service's approval, the runner."""
    seen: list[tuple[str, Step]] = []

    def spied(where: str) -> Any:
        def call(executor: Executor, step: Step) -> Checked:
            seen.append((where, step))
            return seam.checked(executor, step)

        return call

    for module in (live_checks, service, runner):
        monkeypatch.setattr(module, "checked", spied(module.__name__.rsplit(".", 1)[-1]))
    return seen


@pytest.mark.parametrize("action", sorted(ACTION_SPECS))
def test_the_offer_check_and_the_approval_recheck_run_the_same_code(
    action: str, spy: list[tuple[str, Step]], tmp_path: Path
) -> None:
    executor = Recording()
    registry = Registry({action: executor})
    offer = ActionOffer(action, {"name": "x"}, True, "why", "playbook", preview=f"do {action}")
    live_checks.executor_checks(registry)[action](offer)

    store = Store(tmp_path / "pitcrew.db")
    store.upsert_incident(incident("inc-1"))
    offered = dataclasses.replace(
        proposal("p-1"),
        action=action,
        params=offer.params,
        preview=offer.preview,
        preconditions=ACTION_SPECS[action].preconditions,
    )
    store.create_proposal(offered)
    policy = ApprovalPolicy(approvers=(ApproverRule(users=("U1",)),))
    run = Runner(store, registry, clock=Clock(NOW))
    answer = Service(store, policy, registry, execute=run.run).approve("p-1", ChatUser("U1"), NOW)
    assert answer.outcome is Outcome.APPROVED

    assert [where for where, _ in spy] == ["live_checks", "service", "runner"]
    steps = [step for _, step in spy]
    assert [(s.action, dict(s.params), s.preview, s.preconditions) for s in steps] == [
        (action, {"name": "x"}, f"do {action}", ACTION_SPECS[action].preconditions)
    ] * 3
    assert [s.proposal_id for s in steps] == ["", "p-1", "p-1"]
    assert [s.approver for s in steps] == ["", "", "U1"]
    assert [name for name, _ in executor.calls] == [
        *("plan", "check"),  # the offer
        *("plan", "check"),  # the approval
        *("plan", "check", "execute", "verify"),  # the run: the plan it checked is executed
    ]
    done = store.get_proposal("p-1")
    assert done is not None
    assert done.state is ProposalState.SUCCEEDED
    assert done.history[-1].reason == f"carried out the plan of {action}; in place"


# -- an action added in a test: one spec, one executor -------------------------------------


@dataclass(frozen=True, kw_only=True)
class TouchMarker(ActionParams):
    name: str = field(metadata={"min_length": 1})


MARKER = ActionSpec(
    "test.touch_marker",
    "Write a marker",
    TouchMarker,
    "A marker is written.",
    lambda p: f"write marker {p.name}",
    preconditions=("test.marker_absent",),
    executor="test",
)


@dataclass
class MarkerExecutor:
    """The fake action's one executor: a marker in a dict stands for the world."""

    world: dict[str, str] = field(default_factory=dict)

    def plan(self, step: Step) -> TouchMarker:
        return TouchMarker.check(step.params)

    def check(self, step: Step, plan: TouchMarker) -> LiveCheck:
        absent = plan.name not in self.world
        return LiveCheck(
            facts={"test.marker_absent": absent},
            preview=MARKER.preview(plan),
            reason="" if absent else f"marker {plan.name} is there already",
        )

    def execute(self, step: Step, plan: TouchMarker) -> str:
        if plan.name in self.world:
            raise ActionRefusedError(f"marker {plan.name} is there already")
        self.world[plan.name] = step.approver
        return f"wrote marker {plan.name}"

    def verify(self, step: Step) -> Verification:
        return Verification(str(step.params["name"]) in self.world, "marker found")


def test_a_new_action_needs_one_spec_and_one_executor_to_run_end_to_end(
    tmp_path: Path,
) -> None:
    world = MarkerExecutor()
    registry = Registry({MARKER.id: world}, specs={**ACTION_SPECS, MARKER.id: MARKER})
    params = {"name": "ready"}
    offer = ActionOffer(
        MARKER.id, params, True, "why", "playbook", MARKER.preview(TouchMarker(name="ready"))
    )
    checks = live_checks.executor_checks(registry)
    step = Step.of_offer(offer, registry.preconditions(MARKER.id))
    assert seam.checked(world, step).live.facts == {"test.marker_absent": True}
    assert checks[MARKER.id](offer).facts == {"test.marker_absent": True}

    store = Store(tmp_path / "pitcrew.db")
    store.upsert_incident(incident("inc-1"))
    store.create_proposal(
        dataclasses.replace(
            proposal("p-marker"),
            action=MARKER.id,
            params=params,
            preview=offer.preview,
            preconditions=MARKER.preconditions,
        )
    )
    policy = ApprovalPolicy(approvers=(ApproverRule(users=("U1",)),))
    run = Runner(store, registry, clock=Clock(NOW))
    answer = Service(store, policy, registry, execute=run.run).approve(
        "p-marker", ChatUser("U1"), NOW
    )
    assert answer.text == "test.touch_marker approved by U1; it runs now"
    assert world.world == {"ready": "U1"}
    done = store.get_proposal("p-marker")
    assert done is not None
    assert done.state is ProposalState.SUCCEEDED
    assert done.history[-1].reason == "wrote marker ready; marker found"
    entry = ledger_entry(store, "p-marker")
    assert entry is not None
    assert entry.result is ActionResult.SUCCEEDED

    again = dataclasses.replace(
        proposal("p-again"),
        action=MARKER.id,
        params=params,
        preview=offer.preview,
        preconditions=MARKER.preconditions,
    )
    store.create_proposal(again)  # the marker is there now: approving it is refused
    refused = Service(store, policy, registry, execute=run.run).approve(
        "p-again", ChatUser("U1"), NOW
    )
    assert refused.outcome is Outcome.REFUSED
    assert "marker ready is there already" in refused.text


# -- one error policy: a bug met at the offer, the approval or the run ----------------------


class Buggy(Recording):
    """An executor with a defect of pitcrew's own: its plan reads a key that is not there."""

    def plan(self, step: Step) -> str:
        raise KeyError("limit")


BUG = f"pitcrew bug: KeyError: 'limit' at {__file__}:{inspect.getsourcelines(Buggy.plan)[1] + 1}"
UNCHECKED = f"cannot check the target's live state: {BUG}"


def offered(store: Store) -> ActionOffer:
    """The bump of `proposal("p-1")`, offered on its incident."""
    store.upsert_incident(incident("inc-1"))
    store.create_proposal(proposal("p-1"))
    shown = proposal("p-1")
    return ActionOffer(shown.action, shown.params, True, "why", "playbook", shown.preview)


def at_the_offer(store: Store, registry: Registry, metrics: Metrics) -> list[str]:
    offer = offered(store)
    checks = live_checks.executor_checks(registry)
    answer = live_checks.ask([offer], checks, metrics).answer
    assert answer.problems == {offer.action: f"the live check could not tell: {BUG}"}
    return list(answer.refused.values())  # offered, and withheld for it


def at_the_approval(store: Store, registry: Registry, metrics: Metrics) -> list[str]:
    offered(store)
    told: list[str] = []
    policy = ApprovalPolicy(approvers=(ApproverRule(users=("U1",)),))
    approving = Service(store, policy, registry, metrics=metrics, tell=lambda i, t: told.append(t))
    answer = approving.approve("p-1", ChatUser("U1"), NOW)
    assert (answer.outcome, answer.text) == (Outcome.REFUSED, UNCHECKED)
    assert told == [f"U1's approval of k8s.bump_memory (p-1) was refused: {UNCHECKED}"]
    still = store.get_proposal("p-1")
    assert still is not None
    assert still.state is ProposalState.OFFERED
    return [answer.text]


def at_the_run(store: Store, registry: Registry, metrics: Metrics) -> list[str]:
    offered(store)
    move(store, "p-1", ProposalState.APPROVED, "U1", NOW)
    ran = Runner(store, registry, clock=Clock(NOW), metrics=metrics).run("p-1")
    assert ran is not None
    assert ran.state is ProposalState.FAILED
    assert ran.history[-1].outcome == ActionResult.BUG
    return [ran.history[-1].reason]


@pytest.mark.parametrize(
    ("where", "stage", "said"),
    [
        (at_the_offer, Stage.LIVE_CHECK, f"the live check could not tell: {BUG}"),
        (at_the_approval, Stage.APPROVAL, UNCHECKED),
        (at_the_run, Stage.ACTION, BUG),
    ],
    ids=["offer", "approval", "run"],
)
def test_a_bug_at_the_seam_is_logged_counted_and_refuses_saying_pitcrew_bug(
    where: Callable[[Store, Registry, Metrics], list[str]],
    stage: Stage,
    said: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, "pitcrew.actions")
    metrics = Metrics()
    registry = Registry({"k8s.bump_memory": Buggy()})
    assert where(Store(tmp_path / "pitcrew.db"), registry, metrics) == [said]
    (logged,) = [r for r in caplog.records if r.name == "pitcrew.actions"]
    assert logged.getMessage().endswith(f": {BUG}")
    assert logged.exc_info is not None  # its traceback
    assert logged.exc_info[0] is KeyError
    exposition = metrics.exposition().decode()
    assert f'pitcrew_internal_errors_total{{stage="{stage}"}} 1.0' in exposition

"""Approving, rejecting and silencing through the service, and running approved actions,
read as a specification: the policy first, then live re-validation, then the store's
compare-and-swap, then exactly one execution, however many clicks race."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.echo.executor import EchoExecutor
from bot.adapters.store.store import Store
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser, Scope
from bot.core.actions.step import Step
from bot.core.errors import ActionFailedError, ActionRefusedError
from bot.core.incidents.reports import build_report
from bot.core.model import ActionResult, ProposalState
from bot.daemon.executor import Registry
from bot.daemon.metrics import Metrics
from bot.daemon.ports import Outcome, Verification
from bot.daemon.runner import Runner
from bot.daemon.service import Service, console_user
from tests.support.daemon import Clock
from tests.support.ledger import ledger_entry
from tests.support.records import T0, incident, move, proposal

S = ProposalState
NOW = T0 + timedelta(minutes=5)
POLICY = ApprovalPolicy(
    approvers=(
        ApproverRule(users=("U1", "U2", "console:alice"), actions=("k8s.*",)),
        ApproverRule(groups=("sre",), namespaces=("ml",)),
    ),
    two_approvers=(Scope(namespaces=("prod-*",)),),
)


class Stale(EchoExecutor):
    """Live state says the quota no longer allows the new limit."""

    def check(self, step: Step, plan: None) -> LiveCheck:
        return LiveCheck({"k8s.within_quota": False}, step.preview)


class Refusing(EchoExecutor):
    """The world changed after the check: the executor refuses, changing nothing."""

    def execute(self, step: Step, plan: None) -> str:
        raise ActionRefusedError("the RayJob is running again; nothing was changed")


class Broken(EchoExecutor):
    def execute(self, step: Step, plan: None) -> str:
        raise ActionFailedError("admission webhook denied the patch")


class Buggy(EchoExecutor):
    def execute(self, step: Step, plan: None) -> str:
        return {}["limit"]  # type: ignore[no-any-return]


class Unverified(EchoExecutor):
    def verify(self, step: Step) -> Verification:
        return Verification(False, "pods still at 16Gi")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store(tmp_path / "pitcrew.db")
    opened.upsert_incident(incident("inc-1"))
    opened.create_proposal(proposal("p-1", namespace="ml", preconditions=("k8s.within_quota",)))
    opened.create_proposal(proposal("p-prod", namespace="prod-eu"))
    return opened


def wired(
    store: Store, executor: EchoExecutor | None = None
) -> tuple[Service, Runner, EchoExecutor]:
    echo = executor or EchoExecutor()
    registry = Registry({"k8s.bump_memory": echo})
    runner = Runner(store, registry, clock=Clock(NOW))
    return Service(store, POLICY, registry, execute=runner.submit), runner, echo


def test_an_approver_approves_and_the_action_runs_once(store: Store) -> None:
    service, runner, echo = wired(store)
    answer = service.approve("p-1", ChatUser("U1"), NOW)
    runner.close(wait=True)
    assert answer.outcome is Outcome.APPROVED
    assert answer.text == "k8s.bump_memory approved by U1; it runs now"
    assert echo.executed == ["p-1"]
    done = store.get_proposal("p-1")
    assert done is not None
    assert done.state is S.SUCCEEDED
    assert [t.to_state for t in done.history] == [S.APPROVED, S.RUNNING, S.SUCCEEDED]
    entry = ledger_entry(store, "p-1")
    assert entry is not None
    assert (entry.result, entry.approver) == (ActionResult.SUCCEEDED, "U1")


@pytest.mark.parametrize(
    ("user", "outcome", "text"),
    [
        (
            ChatUser("U9"),
            Outcome.REFUSED,
            "U9 is not an approver for k8s.bump_memory in ml (approvals.approvers)",
        ),
        (ChatUser("U9", frozenset({"sre"})), Outcome.APPROVED, "approved by U9"),
    ],
)
def test_the_policy_decides_who_may_approve(
    store: Store, user: ChatUser, outcome: Outcome, text: str
) -> None:
    service, runner, _ = wired(store)
    answer = service.approve("p-1", user, NOW)
    runner.close(wait=True)
    assert answer.outcome is outcome
    assert text in answer.text


def test_a_command_line_user_is_checked_like_a_chat_user(store: Store) -> None:
    service, runner, _ = wired(store)
    assert service.approve("p-1", console_user("mallory"), NOW).outcome is Outcome.REFUSED
    assert service.approve("p-1", console_user("alice"), NOW).outcome is Outcome.APPROVED
    runner.close(wait=True)


def test_a_stale_proposal_is_refused_withdrawn_and_told_in_the_thread(store: Store) -> None:
    echo = Stale()
    registry = Registry({"k8s.bump_memory": echo})
    runner = Runner(store, registry, clock=Clock(NOW))
    told: list[tuple[str, str]] = []
    service = Service(
        store, POLICY, registry, execute=runner.submit, tell=lambda i, t: told.append((i, t))
    )
    answer = service.approve("p-1", ChatUser("U1"), NOW)
    why = "no longer true that the new limit fits node allocatable and the namespace quota"
    assert answer.outcome is Outcome.REFUSED
    assert answer.text == f"stale: {why}; withdrawn; nothing was changed"
    runner.close(wait=True)
    assert echo.executed == []
    withdrawn = store.get_proposal("p-1")
    assert withdrawn is not None
    assert withdrawn.state is S.EXPIRED
    assert withdrawn.history[-1].reason == f"superseded: {why}"
    assert told == [
        (
            withdrawn.incident_id,
            f"U1's approval of k8s.bump_memory (p-1) was refused: {why}. "
            "Withdrawn; nothing was changed.",
        )
    ]


def test_an_expired_proposal_is_refused_and_recorded_as_expired(store: Store) -> None:
    service, _, _ = wired(store)
    answer = service.approve("p-1", ChatUser("U1"), T0 + timedelta(hours=2))
    assert answer.outcome is Outcome.EXPIRED
    expired = store.get_proposal("p-1")
    assert expired is not None
    assert expired.state is S.EXPIRED


def test_a_decided_proposal_says_who_decided(store: Store) -> None:
    service, _, _ = wired(store)
    assert service.reject("p-1", ChatUser("U2"), NOW, "not during the demo").ok
    answer = service.approve("p-1", ChatUser("U1"), NOW)
    assert answer.outcome is Outcome.ALREADY_DECIDED
    assert answer.text == "rejected by U2"


def test_two_approvers_are_needed_where_configured(store: Store) -> None:
    service, runner, echo = wired(store)
    first = service.approve("p-prod", ChatUser("U1"), NOW)
    again = service.approve("p-prod", ChatUser("U1"), NOW)
    second = service.approve("p-prod", ChatUser("U2"), NOW)
    runner.close(wait=True)
    assert first.outcome is Outcome.NEEDS_SECOND_APPROVER
    assert again.outcome is Outcome.REFUSED
    assert "a second, different approver is needed" in again.text
    assert second.outcome is Outcome.APPROVED
    assert second.text == "k8s.bump_memory approved by U1 and U2; it runs now"
    assert echo.executed == ["p-prod"]


def test_an_action_without_an_executor_cannot_be_approved(store: Store) -> None:
    service = Service(store, POLICY, Registry())
    answer = service.approve("p-1", ChatUser("U1"), NOW)
    assert answer.outcome is Outcome.REFUSED
    assert answer.text == (
        "no executor is configured for k8s.bump_memory (actions.executors in the config)"
    )


def test_an_approved_proposal_without_an_executor_fails_with_the_reason(store: Store) -> None:
    move(store, "p-1", S.APPROVED, "U1", NOW)  # e.g. by another process
    runner = Runner(store, Registry(), clock=Clock(NOW))
    failed = runner.run("p-1")
    assert failed is not None
    assert failed.state is S.FAILED
    assert failed.history[-1].reason == (
        "no executor is configured for k8s.bump_memory (actions.executors in the config)"
    )
    assert ledger_entry(store, "p-1") is None


@pytest.mark.parametrize(
    ("executor", "result", "detail", "line"),
    [
        (
            Refusing(),
            ActionResult.REFUSED,
            "the RayJob is running again; nothing was changed",
            "k8s.bump_memory refused: the RayJob is running again; nothing was changed",
        ),
        (
            Broken(),
            ActionResult.FAILED,
            "admission webhook denied the patch",
            "k8s.bump_memory failed: admission webhook denied the patch",
        ),
        (
            Unverified(),
            ActionResult.FAILED,
            "echo: 16Gi -> 24Gi; not verified: pods still at 16Gi",
            "k8s.bump_memory failed: echo: 16Gi -> 24Gi; not verified: pods still at 16Gi",
        ),
        (
            Buggy(),
            ActionResult.BUG,
            "pitcrew bug: KeyError: 'limit' at ",
            "k8s.bump_memory stopped by a pitcrew bug: KeyError: 'limit' at ",
        ),
    ],
)
def test_refused_failed_and_bug_are_told_apart_in_history_ledger_card_and_metrics(
    store: Store, executor: EchoExecutor, result: ActionResult, detail: str, line: str
) -> None:
    move(store, "p-1", S.APPROVED, "U1", NOW)
    metrics = Metrics()
    registry = Registry({"k8s.bump_memory": executor})
    runner = Runner(store, registry, clock=Clock(NOW), metrics=metrics)
    failed = runner.run("p-1")
    assert failed is not None
    assert failed.state is S.FAILED
    assert failed.history[-1].outcome == result
    assert failed.history[-1].reason.startswith(detail)
    entry = ledger_entry(store, "p-1")
    assert entry is not None
    assert entry.result is result
    assert entry.detail.startswith(detail)
    card = build_report(incident("inc-1"), [failed])
    assert card.history[-1].split(" ", 2)[2].startswith(line)
    counted = metrics.actions.labels(action="k8s.bump_memory", result=str(result))
    assert counted._value.get() == 1


def test_many_threads_clicking_approve_execute_the_action_once(store: Store) -> None:
    service, runner, echo = wired(store)
    clicks = 24
    barrier = threading.Barrier(clicks)
    answers = []
    lock = threading.Lock()

    def click(i: int) -> None:
        barrier.wait()
        answer = service.approve("p-1", ChatUser(("U1", "U2")[i % 2]), NOW)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=click, args=(i,)) for i in range(clicks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    runner.close(wait=True)

    outcomes = [a.outcome for a in answers]
    assert len(answers) == clicks
    assert outcomes.count(Outcome.APPROVED) == 1
    assert set(outcomes) == {Outcome.APPROVED, Outcome.ALREADY_DECIDED}
    assert echo.executed == ["p-1"]
    assert [e.proposal_id for e in store.recent_actions(10)] == ["p-1"]
    done = store.get_proposal("p-1")
    assert done is not None
    assert [t.to_state for t in done.history].count(S.APPROVED) == 1


def test_two_runners_racing_for_one_approved_proposal_run_it_once(store: Store) -> None:
    move(store, "p-1", S.APPROVED, "U1", NOW)
    echo = EchoExecutor()
    runners = [
        Runner(store, Registry({"k8s.bump_memory": echo}), clock=Clock(NOW)) for _ in range(4)
    ]
    barrier = threading.Barrier(len(runners))

    def race(runner: Runner) -> None:
        barrier.wait()
        runner.run_approved()

    threads = [threading.Thread(target=race, args=(r,)) for r in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert echo.executed == ["p-1"]


def test_silences_are_validated_and_can_end_early(store: Store) -> None:
    service, _, _ = wired(store)
    with pytest.raises(ValueError, match="not pod"):
        service.silence({"pod": "x"}, timedelta(hours=1), "console:alice", NOW)
    made = service.silence(
        {"playbook": "pod-oom-killed"}, timedelta(hours=2), "console:alice", NOW, "known issue"
    )
    assert store.active_silences(NOW) == (made,)
    ended = service.unsilence(made.id, NOW + timedelta(minutes=1))
    assert ended is not None
    assert store.active_silences(NOW + timedelta(minutes=2)) == ()


def test_expiry_moves_offers_past_their_time(store: Store) -> None:
    service, _, _ = wired(store)
    assert service.expire(T0 + timedelta(minutes=30)) == 0
    assert service.expire(T0 + timedelta(hours=2)) == 2
    assert {p.state for p in store.proposals_in_state(S.EXPIRED)} == {S.EXPIRED}


def test_status_counts_what_is_pending(store: Store) -> None:
    service, _, _ = wired(store)
    status = service.status(NOW)
    assert status.open_incidents == 1
    assert status.proposals == {"offered": 2, "approved": 0, "running": 0}
    assert status.executors == ("k8s.bump_memory",)


def test_another_clusters_proposal_is_its_pitcrews_and_nothing_changes(tmp_path: Path) -> None:
    shared = Store(tmp_path / "shared.db", cluster="eu-a")  # a store two clusters share
    shared.upsert_incident(incident("inc-1"))
    shared.create_proposal(proposal("p-eu-b", namespace="ml", cluster="eu-b"))
    service = Service(shared, POLICY, Registry({"k8s.bump_memory": EchoExecutor()}))
    approved = service.approve("p-eu-b", ChatUser("U1"), NOW)
    rejected = service.reject("p-eu-b", ChatUser("U1"), NOW)
    assert [(a.outcome, a.text) for a in (approved, rejected)] == [
        (Outcome.OTHER_CLUSTER, "this is cluster eu-b's; its pitcrew answers it"),
    ] * 2
    left = shared.get_proposal("p-eu-b")
    assert left is not None
    assert left.state is S.OFFERED
    assert left.history == ()

"""The daemon decides fact-guarded actions with live facts from their executors.

Offline (`pitcrew diagnose FILE`) a guard such as "the actor is stale" is unknown and
withholds `ray.kill_actor` ("needs a live check ..."). The daemon asks the action's
executor (`check`) for the facts and assesses the incident again with them, so a stale
actor in an idle namespace is offered, and a live one is withheld with the guard's own
reason. Only actions waiting on a fact are checked; a failing check leaves the action
withheld as it was.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.app import factories
from bot.app import wiring as app
from bot.app.settings.loading import load
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.diagnosis.analysis import LIVE_CHECK
from bot.core.inputs.reader import read_stream
from bot.core.model import ObjectRef, ProposalState
from bot.daemon.executor import Registry
from bot.daemon.feed import Context, observe
from bot.daemon.ports import Verification
from tests.support.clash_job import JOB, KILL_FACTS, SUBMISSION, clash, clash_parts, config, offer
from tests.support.daemon import RecordingChat, StartDaemon, engine
from tests.support.live_facts import live_facts


@dataclass
class FakeExecutor:
    """Answers `check` with fixed facts per action and records what it was asked."""

    facts: Mapping[str, Mapping[str, bool]]
    fail: frozenset[str] = frozenset()
    asked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def plan(self, step: Step) -> None:
        self.asked.append((step.action, dict(step.params)))
        if step.action in self.fail:
            raise RuntimeError("the dashboard did not answer")

    def check(self, step: Step, plan: None) -> LiveCheck:
        return LiveCheck(facts=dict(self.facts.get(step.action, {})))

    def execute(self, step: Step, plan: None) -> str:
        return "done"

    def verify(self, step: Step) -> Verification:
        return Verification(True)


# -- the hook ---------------------------------------------------------------------------------


def test_offline_the_kill_and_the_resubmit_wait_for_a_live_check() -> None:
    diagnosis = clash()
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "named_actor_conflict"
    assert offer(diagnosis, "ray.kill_actor").reason.startswith(LIVE_CHECK)
    assert offer(diagnosis, "ray.resubmit_job").reason.startswith(LIVE_CHECK)


def test_live_facts_asks_each_waiting_action_once_with_its_params() -> None:
    fake = FakeExecutor(
        {
            "ray.kill_actor": dict.fromkeys(KILL_FACTS, True),
            "ray.resubmit_job": {"ray.resubmits_below_cap": True, "ray.job_terminal": True},
        }
    )
    registry = Registry({"ray.kill_actor": fake, "ray.resubmit_job": fake})
    facts = live_facts(clash(), registry)
    assert facts == {
        **dict.fromkeys(KILL_FACTS, True),
        "ray.resubmits_below_cap": True,
        "ray.job_terminal": True,
    }
    assert sorted(fake.asked, key=lambda a: a[0]) == [
        (
            "ray.kill_actor",
            {"name": "trainer_register_center", "namespace": "rl-train", "cluster": ""},
        ),
        ("ray.resubmit_job", {"submission_id": SUBMISSION}),
    ]
    again = engine().diagnose(clash_parts(), facts)
    assert offer(again, "ray.kill_actor").offered
    assert offer(again, "ray.resubmit_job").offered


def test_disagreeing_failing_and_missing_checks_are_cautious() -> None:
    diagnosis = clash()
    says_no = FakeExecutor({"ray.resubmit_job": {"ray.resubmits_below_cap": False}})
    broken = FakeExecutor({}, fail=frozenset({"ray.kill_actor"}))
    assert live_facts(diagnosis, Registry({"ray.kill_actor": broken})) == {}
    assert live_facts(diagnosis, Registry()) == {}
    facts = live_facts(diagnosis, Registry({"ray.kill_actor": broken, "ray.resubmit_job": says_no}))
    assert facts == {"ray.resubmits_below_cap": False}


def test_namespace_none_is_resolved_live_not_read_as_anonymous() -> None:
    """Ray prints the `.options()` namespace: `None` is the job's current namespace, which
    is explicit after `ray.init(namespace=...)`. The kill waits for the live check."""
    unnamed = JOB.replace("namespace=rl-train", "namespace=None")
    parts = list(read_stream(io.BytesIO(unnamed.encode()), "job.json"))
    diagnosis = engine().diagnose(parts)
    kill = offer(diagnosis, "ray.kill_actor")
    assert not kill.offered
    assert kill.reason.startswith(LIVE_CHECK)
    assert dict(kill.params)["namespace"] == "None"
    anonymous = FakeExecutor(
        {"ray.kill_actor": {**dict.fromkeys(KILL_FACTS, True), "ray.holder_explicit": False}}
    )
    facts = live_facts(diagnosis, Registry({"ray.kill_actor": anonymous}))
    assert [a for a, _ in anonymous.asked] == ["ray.kill_actor"]
    again = engine().diagnose(parts, facts)
    assert offer(again, "ray.kill_actor").reason == (
        "the holder of trainer_register_center is not one actor in an explicit namespace "
        "(resolved live; in an anonymous per-job namespace it is the job's own actor)"
    )


def test_offered_and_otherwise_withheld_actions_are_not_checked() -> None:
    fake = FakeExecutor({})
    parts = clash_parts()
    diagnosis = engine().diagnose(parts, dict.fromkeys(KILL_FACTS, True))
    kill = offer(diagnosis, "ray.kill_actor")
    assert kill.offered
    live_facts(diagnosis, Registry({"ray.kill_actor": fake}))
    assert [a for a, _ in fake.asked] == []


# -- in the daemon ------------------------------------------------------------------------------


@pytest.fixture
def daemon_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start_daemon: StartDaemon
) -> Callable[[FakeExecutor], app.Daemon]:
    """A daemon (tests/conftest.py's `start_daemon`) whose `ray.*` executor is `fake`,
    with the seed's clash already submitted."""

    def start(fake: FakeExecutor) -> app.Daemon:
        monkeypatch.setitem(
            factories.EXECUTOR_KINDS,
            "fakelive",
            lambda settings, marks: dict.fromkeys(ACTION_SPECS, fake),
        )
        daemon = start_daemon(
            load(config(tmp_path, "fakelive"), {}), chat=RecordingChat(), engine=engine()
        )
        parts = read_stream(io.BytesIO(JOB.encode()), "ray://local/jobs/raysubmit_clash1")
        workload = ObjectRef("RayJobSubmission", SUBMISSION)
        assert daemon.queue.submit(observe(parts, Context("local", "", workload)))
        return daemon

    return start


def wait_for(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {check}")


def test_the_daemon_offers_the_kill_of_a_stale_actor_found_live(
    daemon_with: Callable[[FakeExecutor], app.Daemon],
) -> None:
    fake = FakeExecutor(
        {
            "ray.kill_actor": dict.fromkeys(KILL_FACTS, True),
            "ray.resubmit_job": {"ray.resubmits_below_cap": True, "ray.job_terminal": True},
        }
    )
    daemon = daemon_with(fake)
    views = wait_for(lambda: [v for v in daemon.service.incidents() if v.proposals])
    # one plan, one proposal: the kill, then the resubmission (never offered alone while
    # the kill waited for its live check)
    (plan,) = views[0].proposals
    assert plan.state is ProposalState.OFFERED
    assert [plan.action, *(step.action for step in plan.then)] == [
        "ray.kill_actor",
        "ray.resubmit_job",
    ]
    kill = dict(plan.params)
    assert (kill["name"], kill["namespace"]) == ("trainer_register_center", "rl-train")
    assert views[0].incident.ray_job_id == SUBMISSION
    chat = daemon.outbox._chat
    assert isinstance(chat, RecordingChat)
    card = wait_for(lambda: [c for c in chat.calls if c.report is not None])[-1].report
    assert card.withheld == ()


def test_the_daemon_withholds_the_kill_of_a_live_actor_with_the_guards_reason(
    daemon_with: Callable[[FakeExecutor], app.Daemon],
) -> None:
    fake = FakeExecutor(
        {
            "ray.kill_actor": {
                "ray.holder_explicit": True,
                "ray.not_live_verl": False,
                "ray.actor_stale": False,
                "ray.namespace_idle": False,
            },
            "ray.resubmit_job": {"ray.resubmits_below_cap": True, "ray.job_terminal": True},
        }
    )
    daemon = daemon_with(fake)
    views = wait_for(lambda: [v for v in daemon.service.incidents() if v.proposals])
    assert [p.action for p in views[0].proposals] == ["ray.resubmit_job"]
    chat = daemon.outbox._chat
    assert isinstance(chat, RecordingChat)
    card = wait_for(lambda: [c for c in chat.calls if c.report is not None])[-1].report
    assert card.withheld == (
        "ray.kill_actor: never kill trainer_register_center while its verl job is live",
    )

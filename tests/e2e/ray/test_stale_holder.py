"""The stale-actor rule on real Ray (`named_actor_conflict`, docs/failure-classes.md): Ray prints the namespace passed
to `.options(...)`, so a driver that called `ray.init(namespace="grpo-h12")` and clashes
prints `(namespace=None)`. pitcrew resolves the holder with the State API instead of
reading "anonymous" from the message: a finished run's detached actor gets the kill
offered; its twin, whose holder's job still runs, does not."""

from __future__ import annotations

from collections.abc import Iterator
from io import BytesIO

import pytest

from bot.adapters.ray.client import RayClusterConfig
from bot.adapters.ray.executor_base import RayClusters
from bot.adapters.ray.executors import ray_executors
from bot.adapters.ray.kill import KillActorExecutor
from bot.adapters.ray.on_demand import diagnose_ray_job
from bot.core.diagnosis.analysis import diagnose as analyse
from bot.core.diagnosis.engine import Engine
from bot.core.inputs.reader import read_stream
from bot.core.model import Diagnosis
from tests.e2e.ray.conftest import Jobs
from tests.support.executors import look, run, verified
from tests.support.live_facts import ray_facts

pytestmark = pytest.mark.ray

NAME = "grpo_lock"


def clash_log(jobs: Jobs, submission_id: str) -> str:
    """The failing driver's log, as a pod log or a paste brings it (no StaleActor scan)."""
    return jobs.client.get_job_logs(submission_id)


def kill_of(diagnosis: Diagnosis) -> tuple[bool, str, dict[str, object], str]:
    kill = next(a for a in diagnosis.actions if a.action == "ray.kill_actor")
    return kill.offered, kill.reason, dict(kill.params), kill.playbook


def from_the_log(engine: Engine, jobs: Jobs, text: str) -> tuple[Diagnosis, dict[str, bool]]:
    """What the daemon does with a driver log: diagnose, ask the executors' live checks,
    diagnose again with the facts."""
    hits = engine.hits(read_stream(BytesIO(text.encode()), "driver.log"))
    first = analyse(hits, engine.library)
    facts = ray_facts(
        first, ray_executors([RayClusterConfig("test", jobs.url)], categorize=engine.categories)
    )
    return analyse(hits, engine.library, facts), facts


@pytest.fixture
def running_holder(jobs: Jobs) -> Iterator[str]:
    holder = jobs.submit("live_holder_ns.py")
    jobs.wait(holder, frozenset({"RUNNING"}))
    jobs.wait_actor(NAME, "grpo-h12-live")
    yield holder
    jobs.client.stop_job(holder)
    jobs.wait(holder)


@pytest.mark.slow
def test_a_finished_runs_detached_holder_in_the_init_namespace_gets_the_kill(
    jobs: Jobs, engine: Engine
) -> None:
    holder = jobs.submit("holder_ns.py")
    assert jobs.wait(holder)["status"] == "SUCCEEDED"
    jobs.wait_actor(NAME, "grpo-h12")
    clash = jobs.submit("clash_ns.py")
    assert jobs.wait(clash)["status"] == "FAILED"
    log = clash_log(jobs, clash)
    assert f"The name {NAME} (namespace=None) is already taken" in log

    offline = engine.diagnose_text(log)
    offered, reason, params, _ = kill_of(offline)
    assert not offered
    assert reason.startswith("needs a live check that the name's live holder")
    assert params["namespace"] == "None"

    diagnosis, facts = from_the_log(engine, jobs, log)
    assert facts["ray.holder_explicit"] is True
    assert facts["ray.actor_stale"] is True
    assert facts["ray.namespace_idle"] is True
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "named_actor_conflict"
    offered, reason, params, playbook = kill_of(diagnosis)
    assert (offered, playbook) == (True, "named-actor-conflict")

    clusters = RayClusters([RayClusterConfig("test", jobs.url)])
    killer = KillActorExecutor(clusters)
    _, preview = look(killer, params)
    assert f"actor {NAME!r} in namespace 'grpo-h12'" in preview
    assert "namespace='grpo-h12'), no_restart=True" in preview

    # The live `diagnose --ray-job` says the same, aimed at the resolved namespace.
    live = diagnose_ray_job(engine, jobs.url, clash, headers={})
    offered, _, live_params, _ = kill_of(live.diagnosis)
    assert offered
    assert live_params["namespace"] == "grpo-h12"

    done = run(killer, params, "proposal-h12-kill")
    assert f"actor {NAME!r} in namespace 'grpo-h12' is DEAD" in done
    assert verified(killer, params) is True
    assert [a.state for a in jobs.dashboard.actors(name=NAME, namespace="grpo-h12")] == ["DEAD"]


@pytest.mark.slow
def test_its_twin_with_a_live_holder_is_withheld_with_the_reason(
    jobs: Jobs, engine: Engine, running_holder: str
) -> None:
    clash = jobs.submit("clash_live_ns.py")
    assert jobs.wait(clash)["status"] == "FAILED"
    log = clash_log(jobs, clash)
    assert f"The name {NAME} (namespace=None) is already taken" in log

    diagnosis, facts = from_the_log(engine, jobs, log)
    assert facts["ray.holder_explicit"] is True
    assert facts["ray.namespace_idle"] is False
    offered, reason, params, _ = kill_of(diagnosis)
    assert not offered
    assert reason == "it is not true that no job is running in the actor's namespace"

    killer = KillActorExecutor(RayClusters([RayClusterConfig("test", jobs.url)]))
    _, preview = look(killer, params)
    assert "Would refuse: a job is running (or pending) in the actor's namespace" in preview
    assert running_holder in preview or "RUNNING jobs" in preview
    assert [a.state for a in jobs.dashboard.actors(name=NAME, namespace="grpo-h12-live")] == [
        "ALIVE"
    ]

"""The Ray scenarios of issue 4, each from real jobs on the session's real Ray head."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.adapters.ray.bookmarks import MemoryBookmarks
from bot.adapters.ray.client import RayClusterConfig
from bot.adapters.ray.executor_base import RayClusters
from bot.adapters.ray.executors import StopJobExecutor, ray_executors
from bot.adapters.ray.kill import KillActorExecutor
from bot.adapters.ray.on_demand import diagnose_ray_job
from bot.adapters.ray.resubmit import ResubmitJobExecutor, entrypoint_resources
from bot.adapters.ray.source import RayBatch, RaySource, RaySourceOptions
from bot.adapters.store.store import Store
from bot.app.cli_app import app
from bot.app.factories import ray_executor, ray_sources
from bot.app.settings.sections import Settings
from bot.app.settings.sources import RaySourceSettings, SourceSettings
from bot.core.actions.step import Step
from bot.core.diagnosis.analysis import diagnose as analyse
from bot.core.diagnosis.engine import Engine
from bot.core.errors import ActionRefusedError
from bot.core.inputs import InputPart, LogText
from bot.core.model import Diagnosis, Proposal, ProposalState, Signal, SourceKind
from bot.daemon.executor import checked
from bot.daemon.feed import Observation
from bot.daemon.ports import CallableBookmarks
from tests.e2e.ray.conftest import Jobs
from tests.support.executors import look, run, verified
from tests.support.live_facts import ray_facts
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.ray


def now() -> datetime:
    return datetime.now(UTC)


def source(url: str, bookmarks: Any = None, **options: Any) -> RaySource:
    options.setdefault("initial_lookback", timedelta(0))
    return RaySource(
        [RayClusterConfig("test", url, k8s_namespace="ml-team")],
        bookmarks if bookmarks is not None else MemoryBookmarks(),
        RaySourceOptions(**options),
    )


def batches_of(batches: Sequence[RayBatch], submission_id: str) -> list[RayBatch]:
    return [
        b
        for b in batches
        if isinstance(b.parts[0], Signal)
        and b.parts[0].fields.get("submission_id") == submission_id
    ]


def diagnose_with_facts(
    engine: Engine, parts: Sequence[InputPart], url: str
) -> tuple[Diagnosis, dict[str, bool]]:
    """What the daemon does with a polled batch: diagnose, check the offered actions'
    facts live, diagnose again with them."""
    hits = engine.hits(parts)
    first = analyse(hits, engine.library)
    facts = ray_facts(
        first, ray_executors([RayClusterConfig("test", url)], categorize=engine.categories)
    )
    return analyse(hits, engine.library, facts), facts


def offers(diagnosis: Diagnosis) -> dict[str, bool]:
    return {a.action: a.offered for a in diagnosis.actions}


def log_text(parts: Sequence[InputPart], source: SourceKind) -> bytes:
    return b"".join(
        b"".join(p.chunks) for p in parts if isinstance(p, LogText) and p.source is source
    )


# -- 1 -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_named_actor_conflict_kill_then_resubmit_succeeds(jobs: Jobs, engine: Engine) -> None:
    url = jobs.url
    holder = jobs.submit("holder_s1.py")
    assert jobs.wait(holder)["status"] == "SUCCEEDED"
    jobs.wait_actor("trainer_lock", "pc-s1")

    poller = source(url)
    poller.poll(now())  # baseline: only what fails from now on
    clash = jobs.submit(
        "clash_s1.py", entrypoint_num_cpus=0.25, metadata={"ray.io/rayjob": "rl/train-ppo"}
    )
    failed = jobs.wait(clash)
    assert failed["status"] == "FAILED"
    assert "is already taken" in failed["message"]

    found = batches_of(poller.poll_batches(now()), clash)
    assert len(found) == 1
    assert batches_of(poller.poll_batches(now()), clash) == []  # reported once
    batch = found[0]
    job_signal = batch.parts[0]
    assert isinstance(job_signal, Signal)
    assert job_signal.source is SourceKind.RAY_JOB
    assert job_signal.reason == "FAILED"
    assert job_signal.fields["error_type"] == "JOB_ENTRYPOINT_COMMAND_ERROR"
    assert job_signal.fields["entrypoint"] == "python clash_s1.py"
    assert job_signal.fields["rayjob"] == "train-ppo"
    assert job_signal.fields["namespace"] == "rl"
    assert job_signal.fields["cluster"] == "test"
    assert b"trainer_lock (namespace=pc-s1) is already taken" in log_text(
        batch.parts, SourceKind.DRIVER_LOG
    )
    stale = [p for p in batch.parts if isinstance(p, Signal) and p.reason == "StaleActor"]
    assert [s.fields["actor_name"] for s in stale] == ["trainer_lock"]
    assert stale[0].fields["owner_status"] == "SUCCEEDED"

    diagnosis, facts = diagnose_with_facts(engine, batch.parts, url)
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "named_actor_conflict"
    assert facts["ray.actor_stale"] is True
    assert facts["ray.namespace_idle"] is True
    assert offers(diagnosis)["ray.kill_actor"] is True
    kill = next(a for a in diagnosis.actions if a.action == "ray.kill_actor")
    assert dict(kill.params)["name"] == "trainer_lock"
    assert dict(kill.params)["namespace"] == "pc-s1"

    # The CLI says the same, live.
    result = CliRunner().invoke(
        app, ["diagnose", "--ray-address", url, "--ray-job", clash, "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["primary"] == "named_actor_conflict"
    assert {a["action"]: a["offered"] for a in shown["actions"]}["ray.kill_actor"] is True

    # Approved: the kill runs as a remediation job, the actor is DEAD, once per proposal.
    clusters = RayClusters([RayClusterConfig("test", url)])
    killer = KillActorExecutor(clusters)
    done = run(killer, kill.params, "proposal-s1-kill")
    assert "SUCCEEDED" in done
    assert "is DEAD" in done
    remediation = done.split("remediation job ")[1].split()[0]
    assert jobs.dashboard.get_job(remediation)["metadata"]["pitcrew.proposal"] == "proposal-s1-kill"
    assert verified(killer, kill.params) is True
    assert [a.state for a in jobs.dashboard.actors(name="trainer_lock", namespace="pc-s1")] == [
        "DEAD"
    ]
    again = run(killer, kill.params, "proposal-s1-kill")
    assert remediation in again
    tagged = [
        j
        for j in jobs.dashboard.list_jobs()
        if (j.get("metadata") or {}).get("pitcrew.proposal") == "proposal-s1-kill"
    ]
    assert len(tagged) == 1

    # Then the resubmission (same entrypoint, runtime_env, metadata, resources) succeeds.
    resubmit = ResubmitJobExecutor(
        clusters,
        categorize=lambda parts: set(engine.diagnose(parts).categories),
    )
    facts, preview = look(resubmit, {"submission_id": clash})
    assert facts == {
        "ray.job_terminal": True,
        "ray.job_running": False,
        "ray.resubmits_below_cap": True,
        "ray.not_rayjob_owned": True,
    }
    assert "entrypoint_num_cpus=0.25" in preview
    assert "Would refuse" not in preview
    done = run(resubmit, {"submission_id": clash}, "proposal-s1-resubmit")
    new = done.split(" as ")[1].split()[0]
    rerun = jobs.wait(new)
    assert rerun["status"] == "SUCCEEDED", rerun.get("message")
    assert rerun["entrypoint"] == failed["entrypoint"]
    assert rerun["runtime_env"] == failed["runtime_env"]
    assert rerun["metadata"]["ray.io/rayjob"] == "rl/train-ppo"
    assert rerun["metadata"]["pitcrew.resubmit_of"] == clash
    assert entrypoint_resources(jobs.dashboard, new) == {"entrypoint_num_cpus": 0.25}
    assert verified(resubmit, {"submission_id": clash}) is True
    assert "already resubmitted" in run(resubmit, {"submission_id": clash}, "proposal-s1-resubmit")
    assert (
        look(resubmit, {"submission_id": clash, "max_retries": 1})[0]["ray.resubmits_below_cap"]
        is False
    )


# -- 2, 3 --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "category", "evidence"),
    [
        ("missing_s2.py", "dependency_runtime_env", "No module named 'flash_attn_pitcrew_missing'"),
        ("app_s3.py", "application_error", "KeyError: 'reward_kwargs'"),
    ],
)
def test_dependency_and_application_errors_offer_nothing(
    jobs: Jobs, engine: Engine, script: str, category: str, evidence: str
) -> None:
    url = jobs.url
    poller = source(url)
    poller.poll(now())
    submission = jobs.submit(script)
    assert jobs.wait(submission)["status"] == "FAILED"

    found = batches_of(poller.poll_batches(now()), submission)
    assert len(found) == 1
    assert evidence.encode() in log_text(found[0].parts, SourceKind.DRIVER_LOG)
    diagnosis, _ = diagnose_with_facts(engine, found[0].parts, url)
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == category
    assert not any(a.offered for a in diagnosis.actions), diagnosis.actions

    # The executor refuses a resubmission too (defence in depth).
    resubmit = ResubmitJobExecutor(
        RayClusters([RayClusterConfig("test", url)]),
        categorize=lambda parts: set(engine.diagnose(parts).categories),
    )
    facts, preview = look(resubmit, {"submission_id": submission})
    assert facts["ray.job_terminal"] is True
    assert f"Would refuse: the failure is {category}" in preview
    with pytest.raises(ActionRefusedError, match=category):
        run(resubmit, {"submission_id": submission}, f"proposal-{script}")
    assert jobs.dashboard.get_job(f"pitcrew-resubmit-proposal-{script}") is None


# -- 4 -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_live_register_center_is_never_killed(jobs: Jobs, engine: Engine) -> None:
    url = jobs.url
    bookmarks = MemoryBookmarks()
    poller = source(url, bookmarks)
    poller.poll(now())
    running = jobs.submit("verl_s4.py")
    jobs.wait(running, frozenset({"RUNNING"}))
    jobs.wait_actor("abcdef_register_center", "verl-s4")
    clash = jobs.submit("clash_s4.py")
    assert (
        "abcdef_register_center (namespace=verl-s4) is already taken" in jobs.wait(clash)["message"]
    )

    found = batches_of(poller.poll_batches(now()), clash)
    assert len(found) == 1
    assert not [p for p in found[0].parts if isinstance(p, Signal) and p.reason == "StaleActor"]
    live = diagnose_ray_job(engine, url, clash, headers={})
    assert live.diagnosis.primary is not None
    assert live.diagnosis.primary.category == "named_actor_conflict"
    assert offers(live.diagnosis)["ray.kill_actor"] is False
    kill = next(a for a in live.diagnosis.actions if a.action == "ray.kill_actor")
    assert "never kill abcdef_register_center" in kill.reason

    clusters = RayClusters([RayClusterConfig("test", url)])
    killer = KillActorExecutor(clusters)
    params = {"name": "abcdef_register_center", "namespace": "verl-s4"}
    facts, preview = look(killer, params)
    assert facts == {
        "ray.holder_explicit": True,
        "ray.actor_stale": False,
        "ray.namespace_idle": False,
        "ray.not_live_verl": False,
    }
    assert "Would refuse" in preview
    with pytest.raises(ActionRefusedError, match="register center"):
        run(killer, params, "proposal-s4-kill")
    assert jobs.dashboard.get_job("pitcrew-kill-proposal-s4-kill") is None
    assert [
        a.state for a in jobs.dashboard.actors(name="abcdef_register_center", namespace="verl-s4")
    ] == ["ALIVE"]

    # Stopping the running job is an action of its own, and the source does not report
    # a STOPPED that pitcrew caused.
    stopper = StopJobExecutor(clusters, bookmarks=bookmarks)
    facts, preview = look(stopper, {"submission_id": running})
    assert facts == {"ray.job_running": True, "ray.job_terminal": False}
    assert "stopped Ray job" in run(stopper, {"submission_id": running}, "proposal-s4-stop")
    assert verified(stopper, {"submission_id": running}) is True
    assert "already STOPPED" in run(stopper, {"submission_id": running}, "proposal-s4-stop")
    assert batches_of(poller.poll_batches(now()), running) == []


# -- 5 -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_dashboard_outage_backoff_and_recovery(jobs: Jobs) -> None:
    host, port = jobs.url.removeprefix("http://").split(":")
    proxy = TcpProxy((host, int(port)))
    proxy.start()
    try:
        poller = RaySource(
            [RayClusterConfig("direct", jobs.url), RayClusterConfig("flaky", proxy.url, timeout=2)],
            MemoryBookmarks(),
            RaySourceOptions(
                initial_lookback=timedelta(0),
                backoff_base=timedelta(seconds=1),
                backoff_max=timedelta(seconds=4),
                down_after=timedelta(seconds=2),
            ),
        )
        t0 = now()
        assert poller.poll_batches(t0) == []
        assert poller.healthy()

        proxy.stop()
        poller.poll_batches(t0 + timedelta(seconds=1))
        flaky = poller.status()["flaky"]
        assert flaky["healthy"] is False
        assert poller.healthy() is False
        assert proxy.url in flaky["last_error"]
        assert "Connection refused" in flaky["last_error"]
        assert flaky["next_attempt"] == (t0 + timedelta(seconds=2)).isoformat()
        assert poller.status()["direct"]["healthy"] is True

        poller.poll_batches(t0 + timedelta(seconds=1.5))  # in backoff: not tried
        assert poller.status()["flaky"]["consecutive_failures"] == 1
        poller.poll_batches(t0 + timedelta(seconds=2))
        assert poller.status()["flaky"]["consecutive_failures"] == 2
        assert poller.status()["flaky"]["next_attempt"] == (t0 + timedelta(seconds=4)).isoformat()

        notices = [
            b for b in poller.poll_batches(t0 + timedelta(seconds=3.5)) if b.cluster == "flaky"
        ]
        assert [p.reason for b in notices for p in b.parts if isinstance(p, Signal)] == [
            "DashboardUnreachable"
        ]
        assert poller.poll_batches(t0 + timedelta(seconds=3.6)) == []  # notified once

        failing = jobs.submit("exit_3.py")
        assert jobs.wait(failing)["status"] == "FAILED"
        during = poller.poll_batches(now())
        assert [b.cluster for b in batches_of(during, failing)] == ["direct"]

        proxy.start()  # same port
        after = poller.poll_batches(now() + timedelta(seconds=30))
        reasons = [
            p.reason
            for b in after
            if b.cluster == "flaky"
            for p in b.parts[:1]
            if isinstance(p, Signal)
        ]
        assert "DashboardReachable" in reasons
        assert [b.cluster for b in batches_of(after, failing)] == ["flaky"]
        assert poller.healthy()
        assert poller.status()["flaky"]["consecutive_failures"] == 0
        assert batches_of(poller.poll_batches(now() + timedelta(seconds=31)), failing) == []
    finally:
        proxy.stop()


# -- 6 -----------------------------------------------------------------------------------


def test_failure_while_down_reported_once_after_restart(jobs: Jobs, tmp_path: Any) -> None:
    path = tmp_path / "pitcrew.db"

    def restarted() -> tuple[Store, RaySource]:
        store = Store(path)
        return store, source(jobs.url, CallableBookmarks(store.bookmark, store.set_bookmark))

    store, first = restarted()
    assert batches_of(first.poll_batches(now()), "none") == []
    first.close()
    store.close()  # pitcrew is down

    failing = jobs.submit("exit_3.py")
    assert jobs.wait(failing)["status"] == "FAILED"

    seen = 0
    for _ in range(3):  # three restarts, two polls each
        store, poller = restarted()
        seen += len(batches_of(poller.poll_batches(now()), failing))
        seen += len(batches_of(poller.poll_batches(now()), failing))
        poller.close()
        store.close()
    assert seen == 1


# -- the daemon's kinds ------------------------------------------------------------------


class ListSink:
    def __init__(self) -> None:
        self.items: list[Any] = []

    def submit(self, item: Any) -> bool:
        self.items.append(item)
        return True


@pytest.mark.slow
def test_daemon_source_and_executor_kinds(jobs: Jobs) -> None:
    settings = Settings(
        sources=SourceSettings(
            ray=(RaySourceSettings(name="prod", address=jobs.url, namespace="ml"),)
        ),
    )
    store = MemoryBookmarks()
    sink = ListSink()
    [ray_source] = ray_sources(settings, sink, store)
    assert ray_source.name == "ray-prod"
    assert ray_source.poll_interval == timedelta(seconds=10)
    ray_source.poll()  # first start: remembers where it starts
    sink.items.clear()
    running = jobs.submit("sleep.py")
    jobs.wait(running, frozenset({"RUNNING"}))

    executor = ray_executor(settings, store)
    t = now()
    proposal = Proposal(
        id="proposal-daemon-stop",
        incident_id="incident-1",
        action="ray.stop_job",
        params={"submission_id": running, "cluster": "prod"},
        preview=f"stop Ray job {running}",
        state=ProposalState.APPROVED,
        created_at=t,
        expires_at=t + timedelta(hours=1),
        preconditions=("ray.job_running",),
    )
    stop = executor["ray.stop_job"]
    step = Step.of_proposal(proposal)
    found = checked(stop, step)
    assert found.live.facts["ray.job_running"] is True
    assert "STOPPED" in stop.execute(step, found.plan)
    assert stop.verify(step).ok is True

    failing = jobs.submit("exit_3.py")
    assert jobs.wait(failing)["status"] == "FAILED"
    ray_source.poll()
    ray_source.poll()
    observed = [o for o in sink.items if isinstance(o, Observation)]
    firsts = [o.parts[0] for o in observed]
    assert [p.fields.get("submission_id") for p in firsts if isinstance(p, Signal)] == [failing]
    assert observed[0].context.cluster == "prod"
    assert observed[0].context.namespace == "ml"
    assert ray_source.healthy() is True
    assert ray_source.status()["polls"] == 3
    ray_source.stop()

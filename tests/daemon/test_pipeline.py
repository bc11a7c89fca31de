"""The pipeline end to end, in process: real playbooks, a real SQLite file, the console
chat writing to a StringIO, and a clock that moves only when the test says so.

Read as a specification: the seed's evidence is one card whose root cause is the
OOM kill; a card first posted with a symptom as root cause is updated, never
posted again; a storm is a handful of messages; a restart neither re-posts nor
re-runs, and says in the card's thread what it interrupted.
"""

from __future__ import annotations

import dataclasses
import io
from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.echo.executor import EchoExecutor
from bot.core.actions.approvals import INTERRUPTED
from bot.core.incidents.notify import NotifyConfig
from bot.core.inputs import LogText
from bot.core.inputs.reader import read_stream
from bot.core.model import (
    ActionResult,
    IncidentState,
    LedgerEntry,
    ObjectRef,
    ProposalState,
    Signal,
    Silence,
    frozen_map,
)
from bot.daemon.executor import Registry
from bot.daemon.feed import Context, Healthy, Observation, Refresh, observe
from bot.daemon.runner import Runner
from tests.support.daemon import (
    DESCRIBE,
    DRIVER_LOG,
    NS,
    RAYCLUSTER,
    T0,
    Clock,
    RecordingChat,
    Rig,
    rig,
    seed,
)
from tests.support.ledger import ledger_entry
from tests.support.records import move

S = ProposalState


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "pitcrew.db"


def primary(chat: RecordingChat) -> str:
    """The root cause the card shows now (its last post or update)."""
    report = [c.report for c in chat.calls if c.report is not None][-1]
    return report.primary


def the_proposal(r: Rig) -> str:
    (incident,) = r.store.open_incidents()
    (proposal,) = r.store.proposals_for_incident(incident.id)
    return proposal.id


def test_the_seed_driver_log_and_describe_are_one_card_with_the_oom_as_root_cause(
    db: Path, clock: Clock
) -> None:
    r = rig(db, clock)
    r.feed(seed(DRIVER_LOG, RAYCLUSTER))
    clock.advance(5)
    r.feed(seed(DESCRIBE))
    r.tick(until=35)  # group_wait is 30 s: both arrived before the card went out

    assert r.chat.kinds() == ["post", "reply"]  # the card, and its full evidence in the thread
    assert primary(r.chat).startswith("pod_oom_killed")
    report = r.chat.calls[0].report
    assert report is not None
    assert any(s.startswith("named_actor_conflict") for s in report.secondary)
    (action,) = report.actions
    assert action.action == "k8s.bump_memory"
    assert "16Gi → 24Gi" in action.preview
    printed = r.chat.out.getvalue()
    assert "Root cause: pod_oom_killed" in printed
    assert "workerGroupSpecs[gpu-group].containers[ray-worker]" in printed
    assert len(r.store.open_incidents()) == 1


def test_a_later_more_causal_finding_updates_the_card_instead_of_posting_again(
    db: Path, clock: Clock
) -> None:
    r = rig(db, clock)
    r.feed(seed(DRIVER_LOG, RAYCLUSTER))
    r.tick(until=31)
    assert r.chat.kinds() == ["post", "reply"]
    # docs/failure-classes.md, "Precedence": the clash follows the worker death of the same job.
    assert primary(r.chat).startswith("worker_died_system_error")

    clock.at(60)
    r.feed(seed(DESCRIBE))
    r.tick(until=125)

    assert r.chat.kinds() == ["post", "reply", "update"]
    post, _, update = r.chat.calls
    assert update.ref == post.ref
    assert primary(r.chat).startswith("pod_oom_killed")
    assert update.report is not None
    assert any("root cause is now pod_oom_killed" in h for h in update.report.history)
    r.tick(until=400)
    assert r.chat.kinds() == ["post", "reply", "update"]  # nothing new, nothing sent


def oom_pod(i: int) -> Signal:
    """An OOMKilled worker pod of the seed's RayCluster, as the pod source reports it."""
    (template,) = [
        p for p in seed(DESCRIBE).parts if isinstance(p, Signal) and p.reason == "OOMKilled"
    ]
    pod = f"verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-{i:05d}"
    assert template.obj is not None
    return dataclasses.replace(
        template,
        obj=dataclasses.replace(template.obj, name=pod),
        fields=frozen_map({**template.fields, "pod": pod}),
    )


WORKER_DIED = (
    "(raylet, ip=10.0.3.{i}) A worker died or was killed while executing a task by an "
    "unexpected system error. Worker exit type: SYSTEM_ERROR\n"
)


@pytest.mark.slow
def test_a_storm_of_oom_kills_on_one_raycluster_is_a_handful_of_messages(
    db: Path, clock: Clock
) -> None:
    r = rig(db, clock)
    for i in range(300):
        clock.at(i * 0.2)  # 300 pods in 60 s, a worker death with each
        r.pipeline.process(Observation((oom_pod(i),)))
        log = LogText((WORKER_DIED.format(i=i % 250).encode(),), workload=RAYCLUSTER)
        r.pipeline.process(Observation((log,)))
        if i % 5 == 0:
            r.tick()
    r.tick(until=60 + 1800 + 60, step=10)  # then quiet until it resolves

    assert 2 <= len(r.chat.calls) <= 4
    assert r.chat.kinds()[:2] == ["post", "reply"]  # the card, its evidence in the thread
    last = r.chat.calls[-1].report
    assert last is not None
    assert last.primary.startswith("pod_oom_killed")
    assert "300 pods" in last.primary
    assert last.status.startswith("resolved")
    (incident,) = r.store.recent_incidents(5)
    assert incident.state is IncidentState.RESOLVED


def test_a_workload_healthy_again_resolves_its_incident_and_the_card_says_so(
    db: Path, clock: Clock
) -> None:
    r = rig(db, clock)
    r.feed(seed(DESCRIBE))
    r.tick(until=31)
    clock.at(100)
    r.pipeline.process(Healthy(RAYCLUSTER))
    r.tick(until=105)

    assert r.chat.kinds() == ["post", "update"]
    report = r.chat.calls[-1].report
    assert report is not None
    assert report.title.startswith("Resolved:")
    assert report.status == "resolved: the workload is healthy again"
    assert r.store.open_incidents() == ()


@pytest.mark.parametrize(
    ("ends", "state", "why"),
    [
        (
            "healthy",
            ProposalState.EXPIRED,
            "superseded: no longer offered (the incident resolved: the workload is healthy again)",
        ),
        (
            "deleted",
            ProposalState.EXPIRED,
            "superseded: no longer offered (the incident resolved: RayCluster ml-train/"
            "verl-ppo-qwen-raycluster-x7k2p was deleted)",
        ),
        ("quiet", ProposalState.OFFERED, ""),  # nothing says the failure ended
    ],
)
def test_an_incident_resolved_because_its_workload_is_healthy_or_gone_withdraws_its_offers(
    db: Path, clock: Clock, ends: str, state: ProposalState, why: str
) -> None:
    r = rig(db, clock)
    r.feed(seed(DESCRIBE))
    r.tick(until=31)
    (incident,) = r.store.open_incidents()
    (offered,) = r.store.proposals_for_incident(incident.id)
    assert offered.state is ProposalState.OFFERED
    clock.at(100)
    if ends == "healthy":
        r.pipeline.process(Healthy(RAYCLUSTER))
    elif ends == "deleted":
        gone = f"RayCluster {NS}/{RAYCLUSTER.name} was deleted"
        r.pipeline.process(Healthy(RAYCLUSTER, reason=gone))
    else:
        r.tick(until=100 + 1800 + 60, step=30)
    r.tick(until=clock.now.timestamp() - T0.timestamp() + 5)

    assert r.store.open_incidents() == ()
    (proposal,) = r.store.proposals_for_incident(incident.id)
    assert proposal.state is state
    assert (proposal.history[-1].reason if state is ProposalState.EXPIRED else "") == why
    report = r.chat.calls[-1].report
    assert report is not None
    assert report.status.startswith("resolved: ")
    # the card shows the offer still open, or its withdrawal once, in its history
    assert [a.state for a in report.actions] == ([state] if state is S.OFFERED else [])
    withdrawn = [line for line in report.history if " expired" in line]
    assert len(withdrawn) == (0 if state is S.OFFERED else 1)


def test_a_silence_mutes_a_new_incident_until_it_ends(db: Path, clock: Clock) -> None:
    r = rig(db, clock)
    r.store.add_silence(
        Silence("s-1", {"namespace": NS}, T0, T0 + timedelta(hours=1), "console:alice", "upgrade")
    )
    r.feed(seed(DESCRIBE))
    r.tick(until=120)
    assert r.chat.calls == []

    r.store.expire_silence("s-1", clock.now)
    r.tick(until=125)
    assert r.chat.kinds() == ["post"]


def test_an_approval_made_by_another_process_updates_the_card_at_once(
    db: Path, clock: Clock
) -> None:
    r = rig(db, clock)
    r.feed(seed(DESCRIBE))
    r.tick(until=31)
    proposal_id = the_proposal(r)

    clock.at(40)  # well inside the 60 s update interval
    move(r.store, proposal_id, S.APPROVED, "console:bob", clock.now)
    r.tick()

    assert r.chat.kinds() == ["post", "update"]
    report = r.chat.calls[-1].report
    assert report is not None
    # the seed's RayCluster still runs: the bump, then its pods on the old limit replaced
    assert report.status == (
        "approved by @console:bob: plan k8s.bump_memory → k8s.replace_worker_pods"
    )


def test_after_a_restart_nothing_is_posted_again_and_new_evidence_updates_the_same_card(
    db: Path, clock: Clock
) -> None:
    first = rig(db, clock)
    first.feed(seed(DESCRIBE))
    first.tick(until=31)
    (card,) = first.chat.calls
    first.store.close()

    second = rig(db, clock, RecordingChat())
    second.tick(until=200)
    assert second.chat.calls == []

    clock.at(300)
    second.feed(Observation((oom_pod(7),)))
    second.tick(until=400)
    assert second.chat.kinds() == ["update"]
    assert second.chat.calls[0].ref == card.ref


def test_an_action_interrupted_by_a_crash_is_reported_in_the_thread_and_never_rerun(
    db: Path, clock: Clock
) -> None:
    first = rig(db, clock)
    first.feed(seed(DESCRIBE))
    first.tick(until=31)
    proposal_id = the_proposal(first)
    store = first.store
    move(store, proposal_id, S.APPROVED, "console:bob", clock.now)
    move(store, proposal_id, S.RUNNING, "pitcrew", clock.now)
    store.start_action(
        LedgerEntry(proposal_id, "k8s.bump_memory", "console:bob", clock.now, ActionResult.STARTED)
    )
    store.close()  # the daemon died here

    clock.at(60)
    second = rig(db, clock, RecordingChat())
    second.tick()

    proposal = second.store.get_proposal(proposal_id)
    assert proposal is not None
    assert proposal.state is S.FAILED
    assert proposal.history[-1].reason == INTERRUPTED
    entry = ledger_entry(second.store, proposal_id)
    assert entry is not None
    assert entry.result is ActionResult.INTERRUPTED
    replies = [c for c in second.chat.calls if c.kind == "reply"]
    assert len(replies) == 1
    assert "interrupted by a restart" in replies[0].text
    assert "not run again" in replies[0].text
    update = [c for c in second.chat.calls if c.kind == "update"][-1].report
    assert update is not None
    assert update.status.startswith(
        "failed: plan k8s.bump_memory → k8s.replace_worker_pods: interrupted"
    )

    echo = EchoExecutor()
    runner = Runner(second.store, Registry({"k8s.bump_memory": echo}), clock=clock)
    assert runner.run_approved() == 0
    assert runner.run(proposal_id) is None
    assert echo.executed == []


def test_a_refresh_for_a_click_skips_the_update_interval(db: Path, clock: Clock) -> None:
    r = rig(db, clock)
    r.feed(seed(DESCRIBE))
    r.tick(until=31)
    proposal_id = the_proposal(r)
    clock.at(35)
    move(r.store, proposal_id, S.REJECTED, "U123", clock.now, "not now")
    r.pipeline.process(Refresh(r.store.open_incidents()[0].id, urgent=True))
    r.outbox.deliver_due()
    assert r.chat.kinds() == ["post", "update"]
    report = r.chat.calls[-1].report
    assert report is not None
    assert any("rejected by @U123: not now" in h for h in report.history)


def test_the_context_attaches_evidence_that_names_no_workload(db: Path, clock: Clock) -> None:
    r = rig(db, clock, notify=NotifyConfig(group_wait=timedelta(0)))
    elsewhere = ObjectRef("RayJob", "other-job", "team-b")
    observation = seed(DRIVER_LOG)
    r.feed(dataclasses.replace(observation, context=Context(cluster="prod", workload=elsewhere)))
    (incident,) = r.store.open_incidents()
    assert incident.key == "prod/team-b/RayJob/other-job"
    assert incident.namespace == "team-b"


def test_evidence_no_playbook_matches_is_kept_by_shape(db: Path, clock: Clock) -> None:
    """The daemon keeps failure-looking lines that matched nothing (`pitcrew unmatched`)."""
    r = rig(db, clock)
    for worker in (3, 7):
        text = f"(TaskRunner pid=1{worker}) ERROR reward server 10.0.3.{worker} returned 503\n"
        parts = read_stream(io.BytesIO(text.encode()), f"worker-{worker}.log")
        r.feed(observe(parts, Context()))
    r.feed(seed(DRIVER_LOG))  # matched: not kept
    (kept,) = r.store.unmatched()
    assert (kept.shape, kept.count) == ("ERROR reward server <ip> returned <n>", 2)
    assert kept.origin == "worker-7.log"

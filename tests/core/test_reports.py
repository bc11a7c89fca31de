"""The card of an incident, read as a specification: what failed and where, the root
cause with its counters, symptoms, evidence, actions with previews and state, the
actions withheld and why, and a history; its status follows the incident
(open → approved by @x → running → applied and verified / failed → resolved).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

import pytest

from bot.adapters.files.playbooks import load_library
from bot.core.actions.approvals import LiveCheck, approve, finish, reconcile, recover, reject, start
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser, Scope
from bot.core.actions.specs import ACTION_SPECS
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import Correlator
from bot.core.incidents.grouping import CorrelationConfig
from bot.core.incidents.outcomes import status
from bot.core.incidents.reports import build_report, counter
from bot.core.model import (
    ActionResult,
    Evidence,
    Incident,
    IncidentNote,
    ObjectRef,
    Proposal,
    ProposalState,
    Report,
    ReportAction,
    Severity,
    SourceKind,
    frozen_map,
)
from tests.support.incidents import CLASH_PLAYBOOK, CLUSTER, NS, OOM_PLAYBOOK, T0, at, clash, oom
from tests.support.playbooks import write_library

PREVIEW = (
    f"RayCluster {NS}/{CLUSTER} workerGroupSpecs[gpu-group].containers[*]"
    ".resources.limits.memory: 16Gi → 24Gi (× 1.5: no memory metrics)"
)
ALICE, BOB = ChatUser("U_ALICE"), ChatUser("U_BOB")
ONE = ApprovalPolicy(approvers=(ApproverRule(users=("U_ALICE", "U_BOB")),))
TWO = ApprovalPolicy(approvers=ONE.approvers, two_approvers=(Scope(actions=("k8s.bump_memory",)),))
LIVE = LiveCheck(MappingProxyType({"k8s.within_quota": True}), preview=PREVIEW)


@pytest.fixture(scope="module")
def correlator(tmp_path_factory: pytest.TempPathFactory) -> Correlator:
    directory: Path = tmp_path_factory.mktemp("library")
    library = load_library([write_library(directory, OOM_PLAYBOOK, CLASH_PLAYBOOK)])
    return Correlator(assessor(library))


@pytest.fixture(scope="module")
def motivating(correlator: Correlator) -> tuple[Incident, Proposal]:
    """The seed's case: the register-center clash first, then 340 OOMKilled workers."""
    correlator.add(clash(), T0)
    for i in range(340):
        (change,) = correlator.add(oom(f"worker-{i}"), at(45 + i / 10))
    incident = change.incident
    (proposal,) = reconcile(incident, [], at(90))
    return incident, proposal


def test_the_motivating_case_reads_as_one_card(motivating: tuple[Incident, Proposal]) -> None:
    incident, proposal = motivating
    assert build_report(incident, [proposal]) == Report(
        title=f"Pod OOMKilled at its memory limit: RayCluster {NS}/{CLUSTER}",
        severity=Severity.CRITICAL,
        status="open",
        where=frozen_map(
            {
                "namespace": NS,
                "workload": f"RayCluster {CLUSTER}",
                "ray_job_id": "raysubmit_8nqL2dXbHu1Kc3Ve",
            }
        ),
        primary="pod_oom_killed: Pod OOMKilled at its memory limit (340 pods)",
        secondary=("named_actor_conflict: Named actor already taken: symptom of pod_oom_killed",),
        evidence=(
            *(
                f"worker-{i}: container ray-worker terminated: OOMKilled (exit code 137)"
                for i in range(2)
            ),
            "driver.log:41: ValueError: The name qwAKMv_register_center (namespace=None) "
            "is already taken.",
        ),
        diagnosis=(
            "Root cause: pod-oom-killed matched.\n"
            "Symptom of pod_oom_killed: named-actor-conflict matched."
        ),
        actions=(
            ReportAction(
                proposal_id=proposal.id,
                action="k8s.bump_memory",
                preview=PREVIEW,
                state=ProposalState.OFFERED,
                impact=ACTION_SPECS["k8s.bump_memory"].impact,
                remains=ACTION_SPECS["k8s.bump_memory"].alone,
            ),
        ),
        withheld=("ray.kill_actor: the clash is a symptom of the root cause",),
        # what a person needs: "also seen" and earlier flips of the root cause stay off
        history=(
            f"2026-11-03 10:00:00 opened: named_actor_conflict on {NS}/raycluster/{CLUSTER}",
            "2026-11-03 10:00:45 root cause is now pod_oom_killed (was named_actor_conflict)",
            "2026-11-03 10:01:30 k8s.bump_memory offered",
        ),
        cause="pod-oom-killed matched.",
        sureness="strong: worker-0: container ray-worker terminated: OOMKilled (exit code 137)",
        details=(
            *(
                f"worker-{i}: container ray-worker terminated: OOMKilled (exit code 137)"
                for i in range(5)
            ),
            "driver.log:41: ValueError: The name qwAKMv_register_center (namespace=None) "
            "is already taken.",
        ),
        incident_id=incident.id,
        opened_at=T0,
    )


# -- status as the incident moves --------------------------------------------------


def _approved(proposal: Proposal, policy: ApprovalPolicy = ONE) -> Proposal:
    decision = approve(proposal, ALICE, policy, at(120), LIVE)
    if policy is TWO:
        decision = approve(decision.proposal, BOB, policy, at(125), LIVE)
    return decision.proposal


@pytest.mark.parametrize(
    ("steps", "expected_status", "last_history"),
    [
        ([], "open", "k8s.bump_memory offered"),
        (
            [lambda p: approve(p, ALICE, TWO, at(120), LIVE).proposal],
            "open: k8s.bump_memory approved by @U_ALICE, needs a second approver",
            "k8s.bump_memory: @U_ALICE approved; approval 1 of 2; needs a different approver",
        ),
        (
            [_approved],
            "approved by @U_ALICE: k8s.bump_memory",
            "k8s.bump_memory approved by @U_ALICE",
        ),
        (
            [lambda p: _approved(p, TWO)],
            "approved by @U_ALICE and @U_BOB: k8s.bump_memory",
            "k8s.bump_memory approved by @U_ALICE and @U_BOB",
        ),
        (
            [_approved, lambda p: start(p, at(130))],
            "running k8s.bump_memory (approved by @U_ALICE)",
            "k8s.bump_memory running",
        ),
        (
            [
                _approved,
                lambda p: start(p, at(130)),
                lambda p: finish(p, at(190), ActionResult.SUCCEEDED, "8/8 pods Running at 24Gi"),
            ],
            "applied and verified: k8s.bump_memory",
            "k8s.bump_memory applied and verified: 8/8 pods Running at 24Gi",
        ),
        (
            [_approved, lambda p: start(p, at(130)), lambda p: recover([p], at(600))[0]],
            "failed: k8s.bump_memory: interrupted by a restart",
            "k8s.bump_memory failed: interrupted by a restart",
        ),
    ],
)
def test_the_status_follows_the_proposal(
    motivating: tuple[Incident, Proposal],
    steps: list[Callable[[Proposal], Proposal]],
    expected_status: str,
    last_history: str,
) -> None:
    incident, proposal = motivating
    for apply in steps:
        proposal = apply(proposal)
    report = build_report(incident, [proposal])
    assert report.status == expected_status
    assert report.history[-1].split(" ", 2)[2] == last_history
    # an offer is shown with its buttons; once decided, as what happened last
    latest = report.latest.state if report.latest else None
    assert (report.actions[0].state if report.actions else latest) is proposal.state


def test_a_resolved_incident_says_so(motivating: tuple[Incident, Proposal]) -> None:
    incident, proposal = motivating
    running = start(_approved(proposal), at(130))
    resolved = dataclasses.replace(
        incident, state=incident.state.RESOLVED, resolution="the workload is healthy again"
    )
    report = build_report(resolved, [running])
    assert report.status == "resolved: the workload is healthy again"
    assert report.title == f"Resolved: Pod OOMKilled at its memory limit: RayCluster {NS}/{CLUSTER}"


def test_a_rejected_proposal_leaves_the_incident_open(
    motivating: tuple[Incident, Proposal],
) -> None:
    incident, proposal = motivating
    rejected = reject(proposal, BOB, ONE, at(121), "will fix the code").proposal
    report = build_report(incident, [rejected])
    assert status(incident, [rejected]) == report.status == "open"
    assert (
        report.history[-1]
        == "2026-11-03 10:02:01 k8s.bump_memory rejected by @U_BOB: will fix the code"
    )


def test_proposals_of_other_incidents_are_not_shown(motivating: tuple[Incident, Proposal]) -> None:
    incident, proposal = motivating
    other = dataclasses.replace(proposal, incident_id="inc-other", id="p-other")
    assert [a.proposal_id for a in build_report(incident, [other, proposal]).actions] == [
        proposal.id
    ]


# -- counters and evidence ----------------------------------------------------------


@pytest.mark.parametrize(
    ("pods", "repeats", "max_objects", "text"),
    [
        (1, 1, 10, ""),
        (1, 5, 10, "x5"),
        (3, 1, 10, "3 pods"),
        (3, 3, 10, "3 pods, 9 times"),
        (40, 1, 10, "10+ pods, 40 times"),
    ],
)
def test_counters(pods: int, repeats: int, max_objects: int, text: str) -> None:
    correlator = Correlator(config=CorrelationConfig(max_objects=max_objects))
    for i in range(pods * repeats):
        (change,) = correlator.add(oom(f"worker-{i % pods}"), at(i))
    incident = change.incident
    assert counter(incident, incident.diagnosis.findings[0].finding) == text


def test_counters_name_each_kind_they_count() -> None:
    """The seed's clash is seen on the RayJob's status and in its submitter pod's log."""
    correlator = Correlator()
    on_rayjob = dataclasses.replace(clash(), obj=ObjectRef("RayJob", "verl-ppo-qwen", NS))
    in_pod_log = dataclasses.replace(clash(), obj=ObjectRef("Pod", "verl-ppo-qwen-x9z2k", NS))
    correlator.add(on_rayjob, at(0))
    (change,) = correlator.add(in_pod_log, at(1))
    finding = change.incident.diagnosis.findings[0].finding
    assert counter(change.incident, finding) == "RayJob and 1 pod"
    (change,) = correlator.add(
        dataclasses.replace(in_pod_log, obj=ObjectRef("Pod", "b", NS)), at(2)
    )
    assert counter(change.incident, finding) == "RayJob and 2 pods"


def test_counters_without_objects_count_occurrences() -> None:
    correlator = Correlator()
    unattached = dataclasses.replace(clash(), obj=None)
    for i in range(4):
        (change,) = correlator.add(unattached, at(i))
    assert build_report(change.incident).primary == (
        "named_actor_conflict: Named actor already taken (x4)"
    )


def test_evidence_is_capped_and_long_lines_are_cut() -> None:
    long_line = "E" * 400
    finding = dataclasses.replace(
        oom(),
        evidence=tuple(
            Evidence(
                long_line if i == 0 else f"line {i}", SourceKind.WORKER_LOG, "worker.log", i + 1
            )
            for i in range(5)
        ),
    )
    incident = Correlator().add(finding, T0)[0].incident
    evidence = build_report(incident, max_evidence=3).evidence
    assert evidence == (
        "worker.log:1: " + "E" * 285 + "…",
        "worker.log:2: line 1",
        "worker.log:3: line 2",
    )
    assert len(evidence[0]) == 300


def test_a_card_without_a_workload_names_the_namespace() -> None:
    finding = dataclasses.replace(
        oom(), obj=None, workload=None, fields=frozen_map({"namespace": "batch"})
    )
    incident = Correlator().add(finding, T0)[0].incident
    report = build_report(incident)
    assert (report.title, dict(report.where)) == (
        "Pod OOMKilled at its memory limit in batch",
        {"namespace": "batch"},
    )


def test_history_is_capped_to_the_latest_lines() -> None:
    incident = Correlator().add(oom(), T0)[0].incident
    notes = tuple(IncidentNote(at(i), f"note {i}") for i in range(20))
    report = build_report(dataclasses.replace(incident, notes=notes), max_history=3)
    assert report.history == (
        "2026-11-03 10:00:17 note 17",
        "2026-11-03 10:00:18 note 18",
        "2026-11-03 10:00:19 note 19",
    )

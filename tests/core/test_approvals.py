"""Proposals and approvals, read as a specification: every legal and illegal move of
the state machine, who may approve what and where, two distinct approvers, expiry,
re-validation against live facts, and what a restart does to a running action.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from datetime import UTC, datetime, timedelta
from types import MappingProxyType

import pytest
from pydantic import ValidationError

from bot.core.actions.approvals import (
    INTERRUPTED,
    LEGAL,
    Approved,
    IllegalTransitionError,
    LiveCheck,
    NeedsSecondApprover,
    Refused,
    Rejected,
    approve,
    expire_due,
    finish,
    proposal_id,
    propose,
    reconcile,
    recover,
    reject,
    revalidate,
    start,
    supersede,
    transition,
)
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser, Scope, may_approve
from bot.core.incidents.silencing import may_silence
from bot.core.model import (
    ActionOffer,
    ActionResult,
    Diagnosis,
    Incident,
    ObjectRef,
    Proposal,
    ProposalState,
    Transition,
    frozen_map,
)
from bot.daemon.service import console_user

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
S = ProposalState
NS = "ml-train"
PREVIEW = (
    "RayCluster ml-train/rc workerGroupSpecs[gpu-group].containers[*]"
    ".resources.limits.memory: 16Gi → 24Gi"
)
BUMP = ActionOffer(
    action="k8s.bump_memory",
    params=frozen_map(
        {
            "namespace": NS,
            "kind": "RayCluster",
            "name": "rc",
            "group": "gpu-group",
            "current": "16Gi",
        }
    ),
    offered=True,
    reason="Raise the memory limit and request of the owning template (pod_oom_killed)",
    playbook="pod-oom-killed",
    preview=PREVIEW,
)
KILL = ActionOffer(
    action="ray.kill_actor",
    params=frozen_map({"name": "lock", "namespace": "rl"}),
    offered=True,
    reason="Kill a stale named actor (named_actor_conflict)",
    playbook="named-actor-conflict",
    preview="ray.kill(ray.get_actor('lock', namespace='rl'))",
)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def incident(*offers: ActionOffer) -> Incident:
    return Incident(
        id="inc-1",
        key=f"/{NS}/RayCluster/rc",
        opened_at=T0,
        updated_at=T0,
        diagnosis=Diagnosis((), offers, ""),
        workload=ObjectRef("RayCluster", "rc", NS),
        namespace=NS,
    )


def offered(offer: ActionOffer = BUMP) -> Proposal:
    return propose(incident(offer), offer, T0)


def in_state(state: ProposalState) -> Proposal:
    path = {
        S.OFFERED: [],
        S.APPROVED: [S.APPROVED],
        S.RUNNING: [S.APPROVED, S.RUNNING],
        S.SUCCEEDED: [S.APPROVED, S.RUNNING, S.SUCCEEDED],
        S.FAILED: [S.APPROVED, S.RUNNING, S.FAILED],
        S.REJECTED: [S.REJECTED],
        S.EXPIRED: [S.EXPIRED],
    }[state]
    proposal = offered()
    for i, to_state in enumerate(path):
        proposal = transition(proposal, to_state, "U_ALICE", at(i + 1), f"step {i + 1}")
    return proposal


ALICE = ChatUser("U_ALICE")
BOB = ChatUser("U_BOB")
SRE = ChatUser("U_CAROL", groups=frozenset({"S_SRE"}))
GOOD = LiveCheck(MappingProxyType({"k8s.within_quota": True}), preview=PREVIEW)
POLICY = ApprovalPolicy(approvers=(ApproverRule(users=("U_ALICE", "U_BOB"), groups=("S_SRE",)),))
TWO = ApprovalPolicy(
    approvers=POLICY.approvers, two_approvers=(Scope(actions=("k8s.*",), namespaces=("ml-*",)),)
)
TWO_ON_RC = ApprovalPolicy(
    approvers=POLICY.approvers, two_approvers=(Scope(workloads=("ml-train/RayCluster/*",)),)
)
TWO_ON_OTHERS = ApprovalPolicy(
    approvers=POLICY.approvers, two_approvers=(Scope(workloads=("ml-train/rayjob/*",)),)
)


# -- proposals ---------------------------------------------------------------------


def test_an_offered_action_becomes_a_proposal() -> None:
    proposal = offered()
    assert proposal == Proposal(
        id=proposal_id("inc-1", "k8s.bump_memory", BUMP.params),
        incident_id="inc-1",
        action="k8s.bump_memory",
        params=BUMP.params,
        preview=PREVIEW,
        state=S.OFFERED,
        created_at=T0,
        expires_at=T0 + timedelta(hours=1),
        target=ObjectRef("RayCluster", "rc", NS),
        preconditions=("k8s.within_quota",),
        history=(Transition(S.OFFERED, T0, "pitcrew", BUMP.reason),),
        namespace=NS,
        workload="ml-train/raycluster/rc",
        playbook="pod-oom-killed",
        reason=BUMP.reason,
    )
    assert proposal.id == offered().id  # stable: the same offer is the same proposal


@pytest.mark.parametrize(
    ("action", "params", "target"),
    [
        ("k8s.delete_pod", {"namespace": NS, "name": "w-1"}, ObjectRef("Pod", "w-1", NS)),
        (
            "ray.kill_actor",
            {"namespace": "rl", "name": "lock"},
            ObjectRef("RayActor", "lock", "rl"),
        ),
        (
            "ray.stop_job",
            {"submission_id": "raysubmit_1"},
            ObjectRef("RayJobSubmission", "raysubmit_1"),
        ),
        (
            "ray.resubmit_job",
            {"submission_id": "raysubmit_1"},
            ObjectRef("RayJobSubmission", "raysubmit_1"),
        ),
    ],
)
def test_the_target_comes_from_the_parameters(
    action: str, params: dict[str, str], target: ObjectRef
) -> None:
    offer = ActionOffer(action, frozen_map(params), True, "why", "pb", "preview")
    assert propose(incident(offer), offer, T0).target == target


def test_a_withheld_action_cannot_become_a_proposal() -> None:
    withheld = ActionOffer("ray.kill_actor", frozen_map({}), False, "namespace is anonymous", "pb")
    with pytest.raises(ValueError, match=r"ray\.kill_actor is withheld: namespace is anonymous"):
        propose(incident(withheld), withheld, T0)


def test_reconcile_proposes_new_offers_and_supersedes_withdrawn_ones() -> None:
    kill = propose(incident(KILL), KILL, T0)
    withdrawn = ActionOffer(
        KILL.action, KILL.params, False, "the clash is a symptom of pod_oom_killed", KILL.playbook
    )
    changed = reconcile(incident(BUMP, withdrawn), [kill], at(5))
    assert [(p.action, p.state, p.history[-1].reason) for p in changed] == [
        ("k8s.bump_memory", S.OFFERED, BUMP.reason),
        (
            "ray.kill_actor",
            S.EXPIRED,
            "superseded: no longer offered (the clash is a symptom of pod_oom_killed)",
        ),
    ]
    assert reconcile(incident(BUMP, withdrawn), [*changed], at(6)) == ()


# -- the state machine --------------------------------------------------------------

ALL_MOVES = list(itertools.product(S, S))
LEGAL_MOVES = {
    (S.OFFERED, S.APPROVED),
    (S.OFFERED, S.REJECTED),
    (S.OFFERED, S.EXPIRED),
    (S.APPROVED, S.RUNNING),
    (S.APPROVED, S.FAILED),
    (S.RUNNING, S.SUCCEEDED),
    (S.RUNNING, S.FAILED),
}


def test_the_legal_moves_are_exactly_these() -> None:
    assert {(a, b) for a, nexts in LEGAL.items() for b in nexts} == LEGAL_MOVES


@pytest.mark.parametrize(("from_state", "to_state"), sorted(LEGAL_MOVES))
def test_a_legal_move_is_recorded_with_who_when_and_why(
    from_state: ProposalState, to_state: ProposalState
) -> None:
    before = in_state(from_state)
    after = transition(before, to_state, "U_BOB", at(30), "because")
    assert after.state is to_state
    assert after.history == (
        *before.history,
        Transition(to_state, at(30), "U_BOB", "because", from_state=from_state),
    )
    assert after.version == before.version + 1


@pytest.mark.parametrize(
    ("from_state", "to_state"), sorted(m for m in ALL_MOVES if m not in LEGAL_MOVES)
)
def test_an_illegal_move_is_refused_naming_both_states(
    from_state: ProposalState, to_state: ProposalState
) -> None:
    proposal = in_state(from_state)
    with pytest.raises(IllegalTransitionError) as raised:
        transition(proposal, to_state, "U_BOB", at(30))
    error = raised.value
    assert (error.from_state, error.to_state, error.proposal_id) == (
        from_state,
        to_state,
        proposal.id,
    )
    assert str(error).startswith(
        f"proposal {proposal.id} cannot go from {from_state} to {to_state} "
    )


def test_an_illegal_move_names_where_the_proposal_could_go() -> None:
    with pytest.raises(IllegalTransitionError) as raised:
        transition(in_state(S.SUCCEEDED), S.RUNNING, "U_BOB", at(30))
    assert str(raised.value).endswith(
        "cannot go from succeeded to running (from succeeded it can go to: nothing, succeeded is final)"
    )
    with pytest.raises(
        IllegalTransitionError, match=r"it can go to: approved, expired, rejected\)$"
    ):
        transition(in_state(S.OFFERED), S.OFFERED, "U_BOB", at(30))


def test_the_executor_runs_and_finishes_a_proposal() -> None:
    running = start(in_state(S.APPROVED), at(3))
    assert (running.state, running.history[-1].reason) == (S.RUNNING, "running")
    done = finish(running, at(4), ActionResult.SUCCEEDED, detail="limit is 24Gi; 8/8 pods Running")
    assert (done.state, done.history[-1].reason) == (S.SUCCEEDED, "limit is 24Gi; 8/8 pods Running")
    failed = finish(running, at(4), ActionResult.FAILED)
    assert (failed.state, failed.history[-1].reason) == (S.FAILED, "failed")


def test_a_proposal_found_running_after_a_restart_is_interrupted_never_re_run() -> None:
    running, approved, done = in_state(S.RUNNING), in_state(S.APPROVED), in_state(S.SUCCEEDED)
    (interrupted,) = recover([running, approved, done], at(20))
    assert interrupted.id == running.id
    assert interrupted.state is S.FAILED
    assert interrupted.history[-1] == Transition(
        S.FAILED, at(20), "pitcrew", INTERRUPTED, from_state=S.RUNNING
    )
    assert INTERRUPTED == "interrupted by a restart"


# -- approver policy --------------------------------------------------------------------

PER_SCOPE = ApprovalPolicy(
    approvers=(
        ApproverRule(users=("U_ALICE",)),
        ApproverRule(users=("U_BOB",), namespaces=("ml-*",)),
        ApproverRule(groups=("S_SRE",), actions=("k8s.delete_pod", "ray.*")),
        ApproverRule(users=("U_DAN",), namespaces=("shop",), actions=("k8s.bump_memory",)),
    )
)


@pytest.mark.parametrize(
    ("policy", "user", "namespace", "action", "problem"),
    [
        (PER_SCOPE, ALICE, "anything", "k8s.bump_memory", ""),
        (PER_SCOPE, BOB, NS, "k8s.bump_memory", ""),
        (
            PER_SCOPE,
            BOB,
            "shop",
            "k8s.bump_memory",
            "U_BOB is not an approver for k8s.bump_memory in shop (approvals.approvers)",
        ),
        (PER_SCOPE, SRE, NS, "ray.kill_actor", ""),
        (PER_SCOPE, SRE, NS, "k8s.delete_pod", ""),
        (
            PER_SCOPE,
            SRE,
            NS,
            "k8s.bump_memory",
            "U_CAROL is not an approver for k8s.bump_memory in ml-train (approvals.approvers)",
        ),
        (PER_SCOPE, ChatUser("U_DAN"), "shop", "k8s.bump_memory", ""),
        (
            PER_SCOPE,
            ChatUser("U_DAN"),
            "shop",
            "k8s.delete_pod",
            "U_DAN is not an approver for k8s.delete_pod in shop (approvals.approvers)",
        ),
        (
            PER_SCOPE,
            ChatUser("U_DAN"),
            NS,
            "k8s.bump_memory",
            "U_DAN is not an approver for k8s.bump_memory in ml-train (approvals.approvers)",
        ),
        (
            PER_SCOPE,
            ChatUser("U_EVE", frozenset({"S_OTHER"})),
            NS,
            "ray.stop_job",
            "U_EVE is not an approver for ray.stop_job in ml-train (approvals.approvers)",
        ),
        (
            PER_SCOPE,
            BOB,
            "",
            "ray.stop_job",
            "U_BOB is not an approver for ray.stop_job (approvals.approvers)",
        ),
        (
            ApprovalPolicy(),
            ALICE,
            NS,
            "ray.stop_job",
            "U_ALICE is not an approver for ray.stop_job in ml-train (approvals.approvers)",
        ),
        (
            ApprovalPolicy(approvers=PER_SCOPE.approvers, teams=("T_OURS",)),
            ChatUser("U_ALICE", team="T_OTHER"),
            NS,
            "ray.stop_job",
            "clicks from workspace T_OTHER are not accepted",
        ),
        (
            ApprovalPolicy(approvers=PER_SCOPE.approvers, teams=("T_OURS",)),
            ChatUser("U_ALICE", team="T_OURS"),
            NS,
            "ray.stop_job",
            "",
        ),
        (
            ApprovalPolicy(approvers=(ApproverRule(users=("console:ops",)),), teams=("T_OURS",)),
            console_user("ops"),
            NS,
            "ray.stop_job",
            "",
        ),
        (
            ApprovalPolicy(approvers=(ApproverRule(users=("console:ops",)),), teams=("T_OURS",)),
            ChatUser("console:ops"),  # a chat user of that name is still from no workspace
            NS,
            "ray.stop_job",
            "clicks from workspace (unknown) are not accepted",
        ),
        (
            ApprovalPolicy(approvers=(ApproverRule(users=("console:ops",)),), teams=("T_OURS",)),
            console_user("mallory"),
            NS,
            "ray.stop_job",
            "console:mallory is not an approver for ray.stop_job in ml-train (approvals.approvers)",
        ),
    ],
)
def test_who_may_approve(
    policy: ApprovalPolicy, user: ChatUser, namespace: str, action: str, problem: str
) -> None:
    assert may_approve(policy, user, namespace, action) == problem


BY_WORKLOAD = ApprovalPolicy(
    approvers=(
        ApproverRule(users=("U_TRAIN",), workloads=("ml-train/RayJob/*",)),
        ApproverRule(users=("U_NIGHTLY",), workloads=("*/nightly-*",), actions=("ray.*",)),
        ApproverRule(users=("U_ML",), namespaces=("ml-*",)),
    )
)
TRAIN, NIGHTLY = ChatUser("U_TRAIN"), ChatUser("U_NIGHTLY")


@pytest.mark.parametrize(
    ("user", "namespace", "workload", "action", "problem"),
    [
        (TRAIN, NS, "ml-train/rayjob/verl-ppo", "k8s.bump_memory", ""),
        (TRAIN, NS, "ML-Train/RayJob/Verl-PPO", "k8s.bump_memory", ""),  # case-insensitive
        (
            TRAIN,
            NS,
            "ml-train/raycluster/rc",
            "k8s.bump_memory",
            "U_TRAIN is not an approver for k8s.bump_memory on ml-train/raycluster/rc (approvals.approvers)",
        ),
        (
            TRAIN,
            NS,
            "",  # a proposal stored before proposals named their workload
            "k8s.bump_memory",
            "U_TRAIN is not an approver for k8s.bump_memory in ml-train (approvals.approvers)",
        ),
        (NIGHTLY, "shop", "shop/rayjob/nightly-7", "ray.stop_job", ""),
        (
            NIGHTLY,
            "shop",
            "shop/rayjob/nightly-7",
            "k8s.delete_pod",
            "U_NIGHTLY is not an approver for k8s.delete_pod on shop/rayjob/nightly-7 (approvals.approvers)",
        ),
        (ChatUser("U_ML"), NS, "ml-train/raycluster/rc", "k8s.bump_memory", ""),
    ],
)
def test_an_approver_scoped_to_workloads_approves_only_on_them(
    user: ChatUser, namespace: str, workload: str, action: str, problem: str
) -> None:
    assert may_approve(BY_WORKLOAD, user, namespace, action, workload) == problem


def test_a_proposal_on_another_workload_is_refused_to_a_workload_scoped_approver() -> None:
    proposal = offered()  # the incident's workload: ml-train/raycluster/rc
    assert approve(proposal, TRAIN, BY_WORKLOAD, at(5), GOOD) == Refused(
        "U_TRAIN is not an approver for k8s.bump_memory on ml-train/raycluster/rc (approvals.approvers)",
        proposal,
    )
    on_rc = ApprovalPolicy(approvers=(ApproverRule(users=("U_TRAIN",), workloads=("*/rc",)),))
    assert isinstance(approve(proposal, TRAIN, on_rc, at(5), GOOD), Approved)


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (
            "nightly",
            "workload 'nightly' matches no workload: a workload is namespace/kind/name "
            "(ml-train/rayjob/nightly or */*/nightly)",
        ),
        (
            "ml-train",
            "workload 'ml-train' matches no workload: a workload is namespace/kind/name "
            "(ml-train/rayjob/ml-train or */*/ml-train)",
        ),
    ],
)
def test_a_workload_pattern_that_cannot_match_a_workload_is_refused(
    pattern: str, problem: str
) -> None:
    with pytest.raises(ValidationError, match=re.escape(problem)):
        Scope(workloads=(pattern,))


def test_workload_patterns_are_kept_in_lower_case() -> None:
    found = Scope(workloads=("ML-Train/RayJob/*", "*/nightly-*", "nightly-*")).workloads
    assert found == ("ml-train/rayjob/*", "*/nightly-*", "nightly-*")


def test_an_approver_approves_once() -> None:
    decision = approve(offered(), ALICE, POLICY, at(5), GOOD)
    assert isinstance(decision, Approved)
    assert decision.approvers == ("U_ALICE",)
    assert decision.proposal.state is S.APPROVED
    assert decision.proposal.approvals == ("U_ALICE",)
    assert decision.proposal.history[-1] == Transition(
        S.APPROVED, at(5), "U_ALICE", "approved by U_ALICE", from_state=S.OFFERED
    )
    again = approve(decision.proposal, BOB, POLICY, at(6), GOOD)
    assert again == Refused("already approved by U_ALICE", decision.proposal)


def test_a_group_member_approves() -> None:
    assert isinstance(approve(offered(), SRE, POLICY, at(5), GOOD), Approved)


def test_someone_else_is_refused_and_nothing_changes() -> None:
    proposal = offered()
    decision = approve(proposal, ChatUser("U_MALLORY"), POLICY, at(5), GOOD)
    assert decision == Refused(
        "U_MALLORY is not an approver for k8s.bump_memory in ml-train (approvals.approvers)",
        proposal,
    )
    assert not decision.changed


# -- two approvers ---------------------------------------------------------------------


def test_two_distinct_approvers_are_needed_where_the_policy_says_so() -> None:
    first = approve(offered(), ALICE, TWO, at(5), GOOD)
    assert isinstance(first, NeedsSecondApprover)
    assert first.first == "U_ALICE"
    recorded = first.proposal
    assert (recorded.state, recorded.approvals, recorded.version) == (S.OFFERED, ("U_ALICE",), 1)
    assert recorded.history[-1] == Transition(
        S.OFFERED,
        at(5),
        "U_ALICE",
        "approval 1 of 2; needs a different approver",
        from_state=S.OFFERED,
    )

    same = approve(recorded, ALICE, TWO, at(6), GOOD)
    assert same == Refused(
        "U_ALICE already approved; a second, different approver is needed", recorded
    )

    second = approve(recorded, BOB, TWO, at(7), GOOD)
    assert isinstance(second, Approved)
    assert second.approvers == ("U_ALICE", "U_BOB")
    assert second.proposal.state is S.APPROVED
    assert second.proposal.history[-1].reason == "approved by U_ALICE and U_BOB"


@pytest.mark.parametrize(
    ("policy", "offer", "namespace", "needed"),
    [
        (TWO, BUMP, NS, 2),
        (TWO, BUMP, "shop", 1),
        (TWO, KILL, NS, 1),
        (TWO_ON_RC, BUMP, NS, 2),  # the incident's workload is ml-train/raycluster/rc
        (TWO_ON_RC, KILL, NS, 2),
        (TWO_ON_OTHERS, BUMP, NS, 1),
    ],
)
def test_two_approvers_apply_only_in_their_scope(
    policy: ApprovalPolicy, offer: ActionOffer, namespace: str, needed: int
) -> None:
    proposal = dataclasses.replace(propose(incident(offer), offer, T0), namespace=namespace)
    live = LiveCheck(MappingProxyType(dict.fromkeys(proposal.preconditions, True)))
    decision = approve(proposal, ALICE, policy, at(5), live)
    assert isinstance(decision, NeedsSecondApprover if needed == 2 else Approved)


# -- expiry and re-validation -------------------------------------------------------------


def test_a_proposal_expires_after_an_hour() -> None:
    proposal = offered()
    assert isinstance(approve(proposal, ALICE, POLICY, at(59.9), GOOD), Approved)
    late = approve(proposal, ALICE, POLICY, at(60), GOOD)
    assert isinstance(late, Refused)
    assert late.reason == "expired at 2026-11-03 11:00:00 UTC"
    assert late.changed
    assert late.proposal.state is S.EXPIRED
    assert late.proposal.history[-1] == Transition(
        S.EXPIRED,
        at(60),
        "pitcrew",
        "not approved by 2026-11-03 11:00:00 UTC",
        from_state=S.OFFERED,
    )
    assert approve(late.proposal, ALICE, POLICY, at(61), GOOD) == Refused("expired", late.proposal)


def test_the_expiry_job_expires_only_offered_proposals_past_their_time() -> None:
    due, fresh, approved = offered(), propose(incident(KILL), KILL, at(30)), in_state(S.APPROVED)
    (expired,) = expire_due([due, fresh, approved], at(61))
    assert (expired.id, expired.state) == (due.id, S.EXPIRED)


@pytest.mark.parametrize(
    ("live", "problem"),
    [
        (GOOD, ""),
        (LiveCheck(MappingProxyType({"k8s.within_quota": True})), ""),
        (
            LiveCheck(),
            "cannot confirm that the new limit fits node allocatable and the namespace quota",
        ),
        (
            LiveCheck(MappingProxyType({"k8s.within_quota": False}), preview=PREVIEW),
            "no longer true that the new limit fits node allocatable and the namespace quota",
        ),
        (
            LiveCheck(
                MappingProxyType({"k8s.within_quota": True}),
                preview=PREVIEW.replace("16Gi → 24Gi", "24Gi → 36Gi"),
            ),
            "the target changed since the preview: now '"
            + PREVIEW.replace("16Gi → 24Gi", "24Gi → 36Gi")
            + "'",
        ),
    ],
)
def test_revalidation_against_live_state(live: LiveCheck, problem: str) -> None:
    assert revalidate(offered(), live) == problem


def test_a_stale_proposal_is_refused_with_its_reason_at_approval_time() -> None:
    proposal = offered(KILL)
    live = LiveCheck(
        MappingProxyType(
            {"ray.holder_explicit": True, "ray.actor_stale": True, "ray.namespace_idle": False}
        )
    )
    decision = approve(proposal, ALICE, POLICY, at(5), live)
    why = "no longer true that no job is running in the actor's namespace"
    assert decision == Refused(f"stale: {why}", proposal, stale=why)


def test_a_stale_offer_is_superseded_by_one_with_the_live_preview() -> None:
    proposal = offered()
    live_params = {**proposal.params, "current": "20Gi"}
    live = LiveCheck(
        MappingProxyType({"k8s.within_quota": True}),
        preview="RayCluster ml/x limits.memory: 20Gi → 30Gi",
        params=live_params,
    )
    withdrawn, fresh = supersede(proposal, live, "the target changed", at(5))
    assert withdrawn.state is S.EXPIRED
    assert withdrawn.history[-1].reason == "superseded: the target changed"
    assert fresh is not None
    assert fresh.state is S.OFFERED
    assert fresh.id != proposal.id
    assert fresh.supersedes == proposal.id
    assert fresh.preview == live.preview
    assert dict(fresh.params) == live_params
    assert fresh.expires_at - fresh.created_at == proposal.expires_at - proposal.created_at


def test_a_stale_offer_whose_precondition_fails_is_only_withdrawn() -> None:
    proposal = offered()
    live = LiveCheck(
        MappingProxyType({"k8s.within_quota": False}),
        preview="x",
        reason="RayCluster ml/x does not exist",
        params={**proposal.params, "current": "20Gi"},
    )
    assert revalidate(proposal, live) == "RayCluster ml/x does not exist"
    withdrawn, fresh = supersede(proposal, live, revalidate(proposal, live), at(5))
    assert withdrawn.history[-1].reason == "superseded: RayCluster ml/x does not exist"
    assert fresh is None


# -- rejection -----------------------------------------------------------------------------


def test_an_approver_can_reject_and_a_rejected_proposal_cannot_be_approved() -> None:
    decision = reject(offered(), BOB, POLICY, at(5), "will fix the code instead")
    assert isinstance(decision, Rejected)
    assert decision.proposal.history[-1] == Transition(
        S.REJECTED, at(5), "U_BOB", "will fix the code instead", from_state=S.OFFERED
    )
    assert approve(decision.proposal, ALICE, POLICY, at(6), GOOD) == Refused(
        "rejected by U_BOB", decision.proposal
    )


def test_only_approvers_can_reject() -> None:
    proposal = offered()
    assert reject(proposal, ChatUser("U_MALLORY"), POLICY, at(5)) == Refused(
        "U_MALLORY is not allowed to reject k8s.bump_memory in ml-train (approvals.approvers)",
        proposal,
    )


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (S.APPROVED, "already approved by U_ALICE"),
        (S.RUNNING, "already running"),
        (S.SUCCEEDED, "already applied"),
        (S.FAILED, "already tried; it failed"),
        (S.REJECTED, "rejected by U_ALICE"),
        (S.EXPIRED, "expired"),
    ],
)
def test_a_settled_proposal_cannot_be_approved_or_rejected(
    state: ProposalState, reason: str
) -> None:
    proposal = in_state(state)
    assert approve(proposal, BOB, POLICY, at(30), GOOD) == Refused(reason, proposal)
    assert reject(proposal, BOB, POLICY, at(30)) == Refused(reason, proposal)


@pytest.mark.parametrize(
    ("policy", "user", "hours", "problem"),
    [
        (PER_SCOPE, ALICE, 4, ""),
        (
            PER_SCOPE,
            ChatUser("U_EVE", frozenset({"S_SRE"})),  # an approver by group, for some actions
            4,
            "U_EVE may silence only for actions k8s.delete_pod, ray.*; this silence is not "
            "limited to actions",
        ),
        (
            PER_SCOPE,
            ChatUser("U_MALLORY"),
            4,
            "U_MALLORY may not silence (approvals.silencers, or else the approvers, may)",
        ),
        (PER_SCOPE, ALICE, 24 * 8, "a silence lasts at most 7d"),
        (
            ApprovalPolicy(
                approvers=PER_SCOPE.approvers, silencers=(ApproverRule(users=("U_OPS",)),)
            ),
            ALICE,
            4,
            "U_ALICE may not silence (approvals.silencers, or else the approvers, may)",
        ),
        (
            ApprovalPolicy(silencers=(ApproverRule(users=("console:ops",)),), teams=("T_OURS",)),
            console_user("ops"),
            4,
            "",
        ),
        (
            ApprovalPolicy(approvers=PER_SCOPE.approvers, teams=("T_OURS",)),
            ChatUser("U_ALICE", team="T_OTHER"),
            4,
            "requests from workspace T_OTHER are not accepted",
        ),
    ],
)
def test_who_may_silence_and_for_how_long(
    policy: ApprovalPolicy, user: ChatUser, hours: int, problem: str
) -> None:
    assert may_silence(policy, user, timedelta(hours=hours)) == problem

"""What a remediation did, step by step, and what it left undone: a change applied is not
offered again (the old pod's next OOM kill at the old limit is no reason for a second
bump), a plan goes on from the step after it, and an incident whose change waits for its
next step knows it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from bot.core.actions import approvals
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.actions.progress import applied, change_key, not_applied, unfinished
from bot.core.model import (
    ActionOffer,
    ActionResult,
    Diagnosis,
    Incident,
    ObjectRef,
    Proposal,
    StepOutcome,
    frozen_map,
)

T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
POLICY = ApprovalPolicy(approvers=(ApproverRule(users=("U1",)),))
BUMP = ActionOffer(
    "k8s.bump_memory",
    frozen_map(
        {
            "namespace": "ml-train",
            "kind": "RayCluster",
            "name": "rc",
            "group": "gpu-group",
            "container": "ray-worker",
            "current": "16Gi",
            "factor": 1.5,
            "cap": "512Gi",
            "limit": "",
            "basis": "",
        }
    ),
    True,
    "Raise the memory limit (pod_oom_killed)",
    "pod-oom-killed",
    preview="RayCluster ml-train/rc …: 16Gi → 24Gi",
)
RECREATE = ActionOffer(
    "kuberay.recreate_rayjob",
    frozen_map({"namespace": "ml-train", "name": "job", "naming": "same", "override": ""}),
    True,
    "Run a failed RayJob again (pod_oom_killed)",
    "pod-oom-killed",
    preview="delete RayJob ml-train/job, then create it again with the same spec",
)


def incident(*offers: ActionOffer) -> Incident:
    return Incident(
        id="inc-1",
        key="/ml-train/RayJob/job",
        opened_at=T0,
        updated_at=T0,
        diagnosis=Diagnosis((), offers, ""),
        workload=ObjectRef("RayJob", "job", "ml-train"),
        namespace="ml-train",
    )


def ran(proposal: Proposal, *steps: StepOutcome) -> Proposal:
    live = LiveCheck(facts=dict.fromkeys(proposal.preconditions, True))
    decision = approvals.approve(proposal, ChatUser("U1"), POLICY, T0, live)
    assert isinstance(decision, approvals.Approved)
    running = approvals.start(decision.proposal, T0)
    ok = all(s.result is ActionResult.SUCCEEDED for s in steps)
    result = ActionResult.SUCCEEDED if ok else ActionResult.REFUSED
    return approvals.finish(running, T0 + timedelta(minutes=1), result, "", steps)


BUMPED = StepOutcome("k8s.bump_memory", ActionResult.SUCCEEDED, "16Gi → 24Gi; in place")
NO_KUBERAY = StepOutcome(
    "kuberay.recreate_rayjob",
    ActionResult.REFUSED,
    "no executor is configured for kuberay.recreate_rayjob (actions.executors in the config)",
)


def test_a_bump_applied_alone_is_not_offered_again_for_the_same_limit() -> None:
    (bump,) = approvals.reconcile(incident(BUMP), (), T0)
    done = ran(bump, BUMPED)
    assert approvals.reconcile(incident(BUMP), (done,), T0 + timedelta(minutes=5)) == ()
    # sized otherwise (Prometheus answered late), it is still the bump of that 16Gi limit
    resized = dataclasses.replace(
        BUMP, params=frozen_map({**BUMP.params, "limit": "20Gi", "basis": "from Prometheus"})
    )
    assert approvals.reconcile(incident(resized), (done,), T0 + timedelta(minutes=5)) == ()
    # a kill at the new limit is a new decision
    again = dataclasses.replace(BUMP, params=frozen_map({**BUMP.params, "current": "24Gi"}))
    (second,) = approvals.reconcile(incident(again), (done,), T0 + timedelta(minutes=9))
    assert second.params["current"] == "24Gi"


def test_a_plan_stopped_after_its_bump_goes_on_from_its_next_step() -> None:
    (plan,) = approvals.reconcile(incident(BUMP, RECREATE), (), T0)
    stopped = ran(plan, BUMPED, NO_KUBERAY)
    assert set(applied([stopped])) == {change_key("k8s.bump_memory", BUMP.params)}
    (rest,) = approvals.reconcile(incident(BUMP, RECREATE), (stopped,), T0 + timedelta(hours=1))
    assert (rest.action, rest.then) == ("kuberay.recreate_rayjob", ())
    assert not_applied((BUMP, RECREATE), applied([stopped])) == (RECREATE,)


def test_what_a_remediation_left_undone() -> None:
    (plan,) = approvals.reconcile(incident(BUMP, RECREATE), (), T0)
    assert unfinished([plan]) == ""  # offered, nothing done
    stopped = ran(plan, BUMPED, NO_KUBERAY)
    assert unfinished([stopped]) == (
        "step 1 (k8s.bump_memory) applied and verified; step 2 (kuberay.recreate_rayjob) "
        f"refused: {NO_KUBERAY.detail}"
    )
    (alone,) = approvals.reconcile(incident(BUMP), (), T0)
    assert unfinished([ran(alone, BUMPED)]) == (
        "k8s.bump_memory applied and verified; Pods already running keep their old limit; the "
        "workload's next run (a new submission of the RayJob, or pods KubeRay creates again) "
        "picks the new one up."
    )
    (rest,) = approvals.reconcile(incident(BUMP, RECREATE), (stopped,), T0 + timedelta(hours=1))
    recreated = StepOutcome("kuberay.recreate_rayjob", ActionResult.SUCCEEDED, "Running")
    done = ran(rest, recreated)
    assert unfinished([stopped, done]) == ""  # its next step ran: nothing is left undone

"""An offer is made only when this pitcrew can finish it: an executor for each step, an
approver who may approve it on the workload; otherwise it is withheld naming the setting,
and a plan's part that can run alone is offered alone."""

from __future__ import annotations

import pytest

from bot.core.actions.order import grouped, remains
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, Scope
from bot.core.actions.reach import Reach, within_reach
from bot.core.model import ActionOffer, Diagnosis, frozen_map

NS = "ml-train"
WORKLOAD = "ml-train/rayjob/verl-ppo-qwen"
BUMP = ActionOffer(
    "k8s.bump_memory",
    frozen_map({"namespace": NS, "kind": "RayCluster", "name": "rc", "group": "gpu-group"}),
    True,
    "Raise the memory limit (pod_oom_killed)",
    "pod-oom-killed",
    preview="RayCluster ml-train/rc …: 16Gi → 24Gi",
)
RECREATE = ActionOffer(
    "kuberay.recreate_rayjob",
    frozen_map({"namespace": NS, "name": "verl-ppo-qwen"}),
    True,
    "Run a failed RayJob again (pod_oom_killed)",
    "pod-oom-killed",
    preview="delete RayJob ml-train/verl-ppo-qwen, then create it again with the same spec",
)
SEED = Diagnosis((), (BUMP, RECREATE), "")
BOTH_KINDS = frozenset({"k8s.bump_memory", "kuberay.recreate_rayjob"})
ANYONE = ApprovalPolicy(approvers=(ApproverRule(users=("U1",)),))
NO_KUBERAY = (
    "no executor is configured for kuberay.recreate_rayjob: needs the `kuberay` executor "
    'kind in actions.executors ("kuberay.recreate_rayjob": kuberay)'
)


def decided(reach: Reach) -> list[tuple[str, bool, str]]:
    offers = within_reach(SEED, reach, NS, WORKLOAD).actions
    return [(o.action, o.offered, o.reason) for o in offers]


@pytest.mark.parametrize(
    ("reach", "expected"),
    [
        # everything configured: the offers as the diagnosis made them
        (
            Reach(BOTH_KINDS, ANYONE),
            [("k8s.bump_memory", True, BUMP.reason), (RECREATE.action, True, RECREATE.reason)],
        ),
        # the kubernetes kind on, the kuberay kind off (a cautious start)
        (
            Reach(frozenset({"k8s.bump_memory"}), ANYONE),
            [("k8s.bump_memory", True, BUMP.reason), (RECREATE.action, False, NO_KUBERAY)],
        ),
        # approvers scoped to k8s.* but not kuberay.*
        (
            Reach(
                BOTH_KINDS,
                ApprovalPolicy(approvers=(ApproverRule(users=("U1",), actions=("k8s.*",)),)),
            ),
            [
                ("k8s.bump_memory", True, BUMP.reason),
                (
                    RECREATE.action,
                    False,
                    "no approver may approve kuberay.recreate_rayjob in ml-train: needs an "
                    "approver for kuberay.recreate_rayjob in ml-train in approvals.approvers",
                ),
            ],
        ),
        # no approvers yet: nothing can be approved, and each says so
        (
            Reach(BOTH_KINDS, ApprovalPolicy()),
            [
                (
                    "k8s.bump_memory",
                    False,
                    "no approver may approve k8s.bump_memory in ml-train: needs an approver "
                    "for k8s.bump_memory in ml-train in approvals.approvers",
                ),
                (
                    RECREATE.action,
                    False,
                    "no approver may approve kuberay.recreate_rayjob in ml-train: needs an "
                    "approver for kuberay.recreate_rayjob in ml-train in approvals.approvers",
                ),
            ],
        ),
        # two approvers needed where only one may approve
        (
            Reach(
                BOTH_KINDS,
                ApprovalPolicy(
                    approvers=(ApproverRule(users=("U1",)),),
                    two_approvers=(Scope(actions=("k8s.*",)),),
                ),
            ),
            [
                (
                    "k8s.bump_memory",
                    False,
                    "k8s.bump_memory in ml-train needs two approvers and only U1 may approve "
                    "it: needs a second approver for k8s.bump_memory in ml-train in "
                    "approvals.approvers",
                ),
                (RECREATE.action, True, RECREATE.reason),
            ],
        ),
        # actions off altogether
        (
            Reach(BOTH_KINDS, ANYONE, enabled=False),
            [
                (
                    "k8s.bump_memory",
                    False,
                    "actions are disabled in this pitcrew's config: needs actions.enabled: true",
                ),
                (
                    RECREATE.action,
                    False,
                    "actions are disabled in this pitcrew's config: needs actions.enabled: true",
                ),
            ],
        ),
    ],
)
def test_each_offer_is_held_to_what_is_configured(
    reach: Reach, expected: list[tuple[str, bool, str]]
) -> None:
    assert decided(reach) == expected


def test_with_only_the_kubernetes_kind_the_bump_is_offered_alone_saying_what_completes_it() -> None:
    offers = within_reach(SEED, Reach(frozenset({"k8s.bump_memory"}), ANYONE), NS, WORKLOAD).actions
    assert [[o.action for o in group] for group in grouped(offers)] == [
        ["k8s.bump_memory"],
        ["kuberay.recreate_rayjob"],  # withheld: a plan of one step that is not proposed
    ]
    assert offers[1].lacks == (
        'the `kuberay` executor kind in actions.executors ("kuberay.recreate_rayjob": kuberay)'
    )
    assert remains("k8s.bump_memory", "pod-oom-killed", offers) == (
        "Pods already running keep their old limit; the workload's next run (a new submission "
        "of the RayJob, or pods KubeRay creates again) picks the new one up. "
        f"kuberay.recreate_rayjob would complete it but is not offered: {NO_KUBERAY}."
    )


def test_an_approver_scoped_to_other_workloads_does_not_count() -> None:
    policy = ApprovalPolicy(approvers=(ApproverRule(users=("U1",), workloads=("shop/*",)),))
    (bump,) = within_reach(
        Diagnosis((), (BUMP,), ""), Reach(BOTH_KINDS, policy), NS, WORKLOAD
    ).actions
    assert (bump.offered, bump.lacks) == (
        False,
        "an approver for k8s.bump_memory in ml-train in approvals.approvers",
    )


def test_a_group_may_approve_however_many_it_holds() -> None:
    policy = ApprovalPolicy(
        approvers=(ApproverRule(groups=("S0SRE",)),), two_approvers=(Scope(actions=("k8s.*",)),)
    )
    (bump,) = within_reach(
        Diagnosis((), (BUMP,), ""), Reach(BOTH_KINDS, policy), NS, WORKLOAD
    ).actions
    assert bump.offered


def test_an_offer_waiting_for_a_live_fact_nothing_here_could_run_waits_no_more() -> None:
    kill = ActionOffer(
        "ray.kill_actor",
        frozen_map({"name": "trainer_register_center", "namespace": "rl-train"}),
        False,
        "needs a live check that the actor is detached or its owner job has finished",
        "named-actor-conflict",
        pending_fact="ray.actor_stale",
    )
    (withheld,) = within_reach(Diagnosis((), (kill,), ""), Reach(BOTH_KINDS, ANYONE), NS).actions
    assert (withheld.pending_fact, withheld.lacks) == (
        "",
        'the `ray` executor kind in actions.executors ("ray.kill_actor": ray)',
    )


def test_without_a_reach_nothing_is_withheld() -> None:
    assert within_reach(SEED, None, NS) is SEED

"""Silences under the same policy as approvals: a silencer's namespaces, workloads and
actions bound what they may silence and unsilence (a rule covers a silence only when all
it can mute lies inside the rule's scope); a silence ends by its creator, or a silencer
or approver in its scope; each refusal says why."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType

import pytest

from bot.core.actions.approvals import propose, reconcile
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.incidents.silencing import Muted, may_silence, may_unsilence, muted
from bot.core.model import ActionOffer, Diagnosis, Incident, ObjectRef, Proposal, Silence

POLICY = ApprovalPolicy(
    approvers=(
        ApproverRule(users=("U_APPROVER",), namespaces=("ml-*",)),
        ApproverRule(users=("U_OPS",), workloads=("ml-train/*",)),
    ),
    silencers=(
        ApproverRule(users=("U_OTHER",), namespaces=("other-*",)),
        ApproverRule(users=("U_ML",), namespaces=("ml-*",)),
        ApproverRule(users=("U_ALL",)),
        ApproverRule(users=("U_TRAIN",), workloads=("ml-train/*",)),
        ApproverRule(users=("U_MEM",), actions=("k8s.bump_memory", "kuberay.*")),
        ApproverRule(users=("U_MIX",), namespaces=("ml-*",), actions=("ray.*",)),
        ApproverRule(users=("U_MIX",), workloads=("shop/*",)),
    ),
    max_silence=timedelta(hours=2),
)
OTHER, ML, ALL = ChatUser("U_OTHER"), ChatUser("U_ML"), ChatUser("U_ALL")
TRAIN, MEM, MIX = ChatUser("U_TRAIN"), ChatUser("U_MEM"), ChatUser("U_MIX")
APPROVER, OPS, STRANGER = ChatUser("U_APPROVER"), ChatUser("U_OPS"), ChatUser("U_STRANGER")
T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)

IN_TRAIN = Muted(("ml-train",), ("ml-train/rayjob/verl-ppo",), ("k8s.bump_memory",))
IN_EVAL = Muted(("ml-eval",), ("ml-eval/rayjob/x",), ("k8s.bump_memory",))
NAMESPACE_ONLY = Muted(namespaces=("ml-train",))


# -- what a silence can mute ------------------------------------------------------------

OOM = ActionOffer(
    "k8s.bump_memory",
    MappingProxyType({"kind": "RayJob", "name": "verl-ppo", "namespace": "ml-train"}),
    offered=True,
    reason="the head was OOMKilled at its 8Gi limit",
    playbook="pod-oom-killed",
    preview="memory 8Gi -> 12Gi",
)
RERUN = ActionOffer(
    "kuberay.recreate_rayjob",
    MappingProxyType({"kind": "RayJob", "name": "verl-ppo", "namespace": "ml-train"}),
    offered=False,
    reason="waits for the bump",
    playbook="pod-oom-killed",
)
INCIDENT = Incident(
    id="inc-1",
    key="/ml-train/RayJob/verl-ppo",
    opened_at=T0,
    updated_at=T0,
    diagnosis=Diagnosis((), (OOM, RERUN), "Root cause: pod_oom_killed"),
    workload=ObjectRef("RayJob", "verl-ppo", "ml-train"),
    namespace="ml-train",
)
EARLIER = ActionOffer(  # offered by an earlier diagnosis of the incident
    "ray.resubmit_job",
    MappingProxyType({"submission_id": "raysubmit_Qk8vXw2mT3nLp9Rb"}),
    offered=True,
    reason="the job failed once",
    playbook="node-lost-preemption",
)
PROPOSALS = (*reconcile(INCIDENT, (), T0), propose(INCIDENT, EARLIER, T0 - timedelta(hours=1)))
# as `Library.actions_by_playbook` says them for the built-in playbooks
OFFERS = {
    "pod-oom-killed": ("k8s.bump_memory", "kuberay.recreate_rayjob"),
    "ray-memory-monitor-oom": ("k8s.bump_memory",),
    "cuda-oom": ("k8s.reschedule_gpu_pool",),
    "crash-loop-backoff": (),
}


@pytest.mark.parametrize(
    ("matchers", "incident", "proposals", "offers", "found"),
    [
        ({"namespace": "ML-Train"}, None, (), OFFERS, Muted(namespaces=("ml-train",))),
        (
            {"workload": "ml-train/RayJob/verl-ppo"},
            None,
            (),
            OFFERS,
            Muted(("ml-train",), ("ml-train/rayjob/verl-ppo",)),
        ),
        (  # `kind/name` and `name` answer to those parts of a key: within the namespace
            {"workload": "rayjob/verl-ppo", "namespace": "ml-train"},
            None,
            (),
            OFFERS,
            Muted(("ml-train",), ("ml-train/rayjob/verl-ppo",)),
        ),
        (
            {"workload": "verl-ppo", "namespace": "ml-train"},
            None,
            (),
            OFFERS,
            Muted(("ml-train",), ("ml-train/*/verl-ppo",)),
        ),
        (  # a wildcard may match any part of a key: the whole namespace
            {"workload": "verl-*", "namespace": "ml-train"},
            None,
            (),
            OFFERS,
            Muted(("ml-train",), ("ml-train/*",)),
        ),
        ({"workload": "verl-ppo"}, None, (), OFFERS, Muted()),  # any namespace's verl-ppo
        (
            {"incident": "inc-1"},
            INCIDENT,
            PROPOSALS,
            OFFERS,
            Muted(  # what its card offers and offered, not what it withholds
                ("ml-train",),
                ("ml-train/rayjob/verl-ppo",),
                ("k8s.bump_memory", "ray.resubmit_job"),
            ),
        ),
        ({"incident": "inc-9"}, None, (), OFFERS, Muted()),  # no such incident
        (
            {"playbook": "pod-oom-killed"},
            None,
            (),
            OFFERS,
            Muted(actions=("k8s.bump_memory", "kuberay.recreate_rayjob")),
        ),
        (
            {"playbook": "*-OOM*"},
            None,
            (),
            OFFERS,
            Muted(
                actions=("k8s.bump_memory", "k8s.reschedule_gpu_pool", "kuberay.recreate_rayjob")
            ),
        ),
        ({"playbook": "crash-loop-backoff"}, None, (), OFFERS, Muted(actions=())),
        ({"playbook": "pod-oom-killed"}, None, (), None, Muted()),  # the library not known
        ({"category": "oom"}, None, (), OFFERS, Muted()),
        (
            {"category": "oom", "namespace": "ml-train", "playbook": "cuda-oom"},
            None,
            (),
            OFFERS,
            Muted(("ml-train",), None, ("k8s.reschedule_gpu_pool",)),
        ),
    ],
)
def test_what_a_silence_can_mute(
    matchers: dict[str, str],
    incident: Incident | None,
    proposals: tuple[Proposal, ...],
    offers: Mapping[str, tuple[str, ...]] | None,
    found: Muted,
) -> None:
    assert muted(matchers, incident, proposals, offers) == found


# -- who may silence --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("user", "mutes", "hours", "problem"),
    [
        (OTHER, Muted(namespaces=("other-team",)), 1, ""),
        (
            OTHER,
            NAMESPACE_ONLY,
            1,
            "U_OTHER may silence only in namespaces other-*; this silence mutes namespace ml-train",
        ),
        (
            OTHER,
            Muted(),
            1,
            "U_OTHER may silence only in namespaces other-*; this silence is not limited to "
            "a namespace",
        ),
        (OTHER, Muted(namespaces=("other-*",)), 1, ""),  # a pattern inside the scope
        (
            OTHER,
            Muted(namespaces=("*",)),
            1,
            "U_OTHER may silence only in namespaces other-*; this silence mutes namespace *",
        ),
        (ML, NAMESPACE_ONLY, 1, ""),
        (ALL, Muted(), 1, ""),
        (ALL, NAMESPACE_ONLY, 3, "a silence lasts at most 2h"),
        (
            APPROVER,
            NAMESPACE_ONLY,
            1,
            "U_APPROVER may not silence (approvals.silencers, or else the approvers, may)",
        ),
        # workloads
        (TRAIN, IN_TRAIN, 1, ""),
        (TRAIN, Muted(workloads=("ml-train/rayjob/*",)), 1, ""),
        (
            TRAIN,
            IN_EVAL,
            1,
            "U_TRAIN may silence only in workloads ml-train/*; this silence mutes workload "
            "ml-eval/rayjob/x",
        ),
        (
            TRAIN,
            NAMESPACE_ONLY,
            1,
            "U_TRAIN may silence only in workloads ml-train/*; this silence is not limited "
            "to a workload",
        ),
        (  # matched case-insensitively, as the silence matches
            TRAIN,
            Muted(workloads=("ML-Train/RayJob/verl-ppo",)),
            1,
            "",
        ),
        # actions
        (MEM, Muted(actions=("k8s.bump_memory", "kuberay.recreate_rayjob")), 1, ""),
        (
            MEM,
            Muted(actions=("ray.resubmit_job",)),
            1,
            "U_MEM may silence only for actions k8s.bump_memory, kuberay.*; this silence "
            "mutes action ray.resubmit_job",
        ),
        (
            MEM,
            Muted(actions=("k8s.bump_memory", "ray.resubmit_job")),
            1,
            "U_MEM may silence only for actions k8s.bump_memory, kuberay.*; this silence "
            "mutes actions k8s.bump_memory, ray.resubmit_job",
        ),
        (
            MEM,
            Muted(actions=()),
            1,
            "U_MEM may silence only for actions k8s.bump_memory, kuberay.*; this silence "
            "mutes cards that offer no action",
        ),
        (
            MEM,
            NAMESPACE_ONLY,
            1,
            "U_MEM may silence only for actions k8s.bump_memory, kuberay.*; this silence "
            "is not limited to actions",
        ),
        # two rules: one of them must cover all of it
        (MIX, Muted(("ml-train",), None, ("ray.resubmit_job",)), 1, ""),
        (MIX, Muted(("shop",), ("shop/rayjob/x",), ("k8s.delete_pod",)), 1, ""),
        (
            MIX,
            IN_TRAIN,
            1,
            "U_MIX may silence only in namespaces ml-* for actions ray.* or in workloads "
            "shop/*; this silence mutes namespace ml-train; workload ml-train/rayjob/verl-ppo; "
            "action k8s.bump_memory",
        ),
        (
            MIX,
            Muted(("other",), ("other/rayjob/x",), ("ray.stop_job",)),
            1,
            "U_MIX may silence only in namespaces ml-* for actions ray.* or in workloads "
            "shop/*; this silence mutes namespace other; workload other/rayjob/x; "
            "action ray.stop_job",
        ),
    ],
)
def test_a_silencers_scope_bounds_what_they_may_silence(
    user: ChatUser, mutes: Muted, hours: int, problem: str
) -> None:
    assert may_silence(POLICY, user, timedelta(hours=hours), mutes) == problem


# -- who may end a silence ---------------------------------------------------------------


def _silence(author: str) -> Silence:
    return Silence(
        "s-1", {"workload": "ml-train/rayjob/verl-ppo"}, T0, T0 + timedelta(hours=1), author
    )


@pytest.mark.parametrize(
    ("user", "author", "mutes", "problem"),
    [
        (OTHER, "U_OTHER", NAMESPACE_ONLY, ""),  # its creator, whatever the scope
        (ML, "U_OTHER", NAMESPACE_ONLY, ""),  # a silencer in scope
        (APPROVER, "U_OTHER", NAMESPACE_ONLY, ""),  # an approver in scope
        (ALL, "U_OTHER", Muted(), ""),
        (
            OTHER,
            "U_ML",
            NAMESPACE_ONLY,
            "U_OTHER may not end silence s-1: only its creator U_ML may, or a silencer or an "
            "approver whose scope covers namespace ml-train; every workload; every action",
        ),
        (
            STRANGER,
            "U_ML",
            NAMESPACE_ONLY,
            "U_STRANGER may not end silence s-1: only its creator U_ML may, or a silencer or "
            "an approver whose scope covers namespace ml-train; every workload; every action",
        ),
        (
            APPROVER,
            "U_ALL",
            Muted(),
            "U_APPROVER may not end silence s-1: only its creator U_ALL may, or a silencer or "
            "an approver whose scope covers every namespace; every workload; every action",
        ),
        # workloads
        (TRAIN, "U_ML", IN_TRAIN, ""),
        (OPS, "U_ML", IN_TRAIN, ""),  # an approver scoped to the workload
        (
            TRAIN,
            "U_ML",
            IN_EVAL,
            "U_TRAIN may not end silence s-1: only its creator U_ML may, or a silencer or an "
            "approver whose scope covers namespace ml-eval; workload ml-eval/rayjob/x; "
            "action k8s.bump_memory",
        ),
        (
            OPS,
            "U_ML",
            NAMESPACE_ONLY,
            "U_OPS may not end silence s-1: only its creator U_ML may, or a silencer or an "
            "approver whose scope covers namespace ml-train; every workload; every action",
        ),
        # actions
        (MEM, "U_ML", IN_TRAIN, ""),
        (
            MEM,
            "U_ML",
            Muted(("ml-train",), None, ("ray.resubmit_job",)),
            "U_MEM may not end silence s-1: only its creator U_ML may, or a silencer or an "
            "approver whose scope covers namespace ml-train; every workload; "
            "action ray.resubmit_job",
        ),
        (
            MEM,
            "U_ML",
            Muted(actions=()),
            "U_MEM may not end silence s-1: only its creator U_ML may, or a silencer or an "
            "approver whose scope covers every namespace; every workload; cards that offer "
            "no action",
        ),
    ],
)
def test_a_silence_ends_by_its_creator_or_someone_in_its_scope(
    user: ChatUser, author: str, mutes: Muted, problem: str
) -> None:
    assert may_unsilence(POLICY, user, _silence(author), mutes) == problem

"""Who may fetch an incident's evidence (bot.core.incidents.evidence_access): the rules of
`approvals.evidence`, or the approvers' and silencers' rules while it is empty, by the
namespaces and workloads they name (not their actions); each refusal names the rules it
read and where the incident is."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.incidents.evidence_access import may_fetch

DEFAULT = ApprovalPolicy(
    approvers=(
        ApproverRule(users=("U_ML",), namespaces=("ml-*",)),
        ApproverRule(users=("U_SHOP",), namespaces=("shop-*",)),
        ApproverRule(groups=("S_SRE",), actions=("k8s.*",)),  # every namespace, some actions
    ),
    silencers=(ApproverRule(users=("U_TRAIN",), workloads=("ml-train/rayjob/*",)),),
    teams=("T1",),
)
NAMED = ApprovalPolicy(
    approvers=DEFAULT.approvers,
    evidence=(
        ApproverRule(users=("U_AUDIT",)),
        ApproverRule(users=("U_ML",), workloads=("ml-eval/*",)),
    ),
)
WHERE = "inc-1 is in namespace ml-train, workload ml-train/rayjob/verl-ppo"


@pytest.mark.parametrize(
    ("policy", "user", "refusal"),
    [
        (DEFAULT, ChatUser("U_ML", team="T1"), ""),
        (DEFAULT, ChatUser("U_TRAIN", team="T1"), ""),
        (DEFAULT, ChatUser("U_ANY", frozenset({"S_SRE"}), "T1"), ""),  # actions do not bound it
        (
            DEFAULT,
            ChatUser("U_NOBODY", team="T1"),
            "U_NOBODY may not fetch evidence: no rule of approvals.approvers or "
            "approvals.silencers names them",
        ),
        (
            DEFAULT,
            ChatUser("U_SHOP", team="T1"),
            f"U_SHOP may fetch evidence only in namespaces shop-* (approvals.approvers[1]); {WHERE}",
        ),
        (
            DEFAULT,
            ChatUser("U_ML", team="T9"),
            "requests from workspace T9 are not accepted (approvals.teams)",
        ),
        (
            DEFAULT,
            ChatUser("console:alice", console=True),
            "console:alice may not fetch "
            "evidence: no rule of approvals.approvers or approvals.silencers names them",
        ),
        (NAMED, ChatUser("U_AUDIT"), ""),
        (
            NAMED,
            ChatUser("U_ML"),  # an approver here, but evidence has its own rules now
            f"U_ML may fetch evidence only in workloads ml-eval/* (approvals.evidence[1]); {WHERE}",
        ),
        (
            NAMED,
            ChatUser("U_TRAIN"),
            "U_TRAIN may not fetch evidence: no rule of approvals.evidence names them",
        ),
    ],
)
def test_who_may_fetch_evidence(policy: ApprovalPolicy, user: ChatUser, refusal: str) -> None:
    assert may_fetch(policy, user, "inc-1", "ml-train", "ml-train/rayjob/verl-ppo") == refusal


def test_an_evidence_rule_with_actions_is_refused_at_load() -> None:
    with pytest.raises(ValidationError) as caught:
        ApprovalPolicy.model_validate({"evidence": [{"users": ["U1"], "actions": ["k8s.*"]}]})
    assert (
        "rule 0 has actions: evidence is not an action; scope it by namespaces and workloads"
    ) in str(caught.value)

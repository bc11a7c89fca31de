"""Who may fetch an incident's evidence: its bundles (driver log, pod specs, events), as
`/pitcrew bundle` uploads them.

Why this exists: a bundle holds what a workload's logs and specs say, and anyone in a
channel could have it uploaded for any incident (only `approvals.teams` stopped it).
Evidence is now under the approval policy: the rules of `approvals.evidence`, or, while
that is empty, the approvers' and silencers' rules, give it to their users and groups
for incidents inside the rule's namespaces and workloads (a rule's actions do not bound
it: evidence is not an action). A refusal names the rules it read and what the
incident is. Pure: values in, values out.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser, any_match


@dataclass(frozen=True, slots=True)
class Named:
    """A rule and where it is in the configuration (`approvals.approvers[1]`)."""

    where: str
    rule: ApproverRule


def evidence_rules(policy: ApprovalPolicy) -> tuple[Named, ...]:
    """`approvals.evidence`, or the approvers' and silencers' rules when it is empty."""
    if policy.evidence:
        return tuple(Named(f"approvals.evidence[{n}]", r) for n, r in enumerate(policy.evidence))
    return (
        *(Named(f"approvals.approvers[{n}]", r) for n, r in enumerate(policy.approvers)),
        *(Named(f"approvals.silencers[{n}]", r) for n, r in enumerate(policy.silencers)),
    )


def may_fetch(
    policy: ApprovalPolicy, user: ChatUser, incident_id: str, namespace: str, workload: str
) -> str:
    """Why `user` may not fetch the evidence of the incident (in `namespace`, about
    `workload`: `namespace/kind/name`), or "" when they may."""
    if policy.teams and not user.console and user.team not in policy.teams:
        return (
            f"requests from workspace {user.team or '(unknown)'} are not accepted (approvals.teams)"
        )
    named = evidence_rules(policy)
    mine = [n for n in named if user.id in n.rule.users or user.groups & set(n.rule.groups)]
    if any(_covers(n.rule, namespace, workload) for n in mine):
        return ""
    which = (
        "approvals.evidence" if policy.evidence else "approvals.approvers or approvals.silencers"
    )
    if not mine:
        return f"{user.id} may not fetch evidence: no rule of {which} names them"
    scopes = "; ".join(f"{_scope(n.rule)} ({n.where})" for n in mine)
    where = f"namespace {namespace or '(none)'}, workload {workload or '(none)'}"
    return f"{user.id} may fetch evidence only {scopes}; {incident_id} is in {where}"


def _covers(rule: ApproverRule, namespace: str, workload: str) -> bool:
    return any_match(rule.namespaces, namespace) and any_match(rule.workloads, workload.lower())


def _scope(rule: ApproverRule) -> str:
    sides = []
    if rule.namespaces:
        sides.append(f"in namespaces {', '.join(rule.namespaces)}")
    if rule.workloads:
        sides.append(f"in workloads {', '.join(rule.workloads)}")
    return " and ".join(sides)

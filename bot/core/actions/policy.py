"""Who may do what: the approval policy from config (approvers by chat user id and group,
scoped by namespace, workload and action; two-approver scopes; the workspaces whose
clicks count; who may silence, for how long; who may fetch evidence), the person behind a
click (`ChatUser`) and whether they may approve (`may_approve`).

Why this exists: the proposals' state machine (`bot.core.actions.approvals`), silencing
(`bot.core.incidents.silencing`) and evidence (`bot.core.incidents.evidence_access`) all
answer to the same rules; this is where the rules and their scopes are. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_TTL = timedelta(hours=1)


class Scope(BaseModel):
    """Where a rule applies: namespace, workload (the incident's `namespace/kind/name`, as
    its card shows it; case-insensitive) and action-id patterns (wildcards); empty = all."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespaces: tuple[str, ...] = Field(default=(), description="e.g. `ml-*`; empty = all")
    workloads: tuple[str, ...] = Field(
        default=(), description="`namespace/kind/name`, e.g. `ml-train/*`; empty = all"
    )
    actions: tuple[str, ...] = Field(default=(), description="e.g. `k8s.*`; empty = all")

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for odd in (p for p in patterns if "/" not in p and "*" not in p):
            raise ValueError(
                f"workload {odd!r} matches no workload: a workload is namespace/kind/name "
                f"(ml-train/rayjob/{odd} or */*/{odd})"
            )
        return tuple(pattern.lower() for pattern in patterns)

    def covers(self, namespace: str, action: str, workload: str = "") -> bool:
        return (
            any_match(self.namespaces, namespace)
            and any_match(self.workloads, workload.lower())
            and any_match(self.actions, action)
        )


def any_match(patterns: tuple[str, ...], value: str) -> bool:
    return not patterns or any(fnmatchcase(value, p) for p in patterns)


class ApproverRule(Scope):
    """These chat users, and members of these user groups, may approve in this scope; as
    `silencers`, silence only incidents wholly inside it (their cards' actions included);
    as `evidence`, fetch the evidence of incidents in its namespaces and workloads (no
    actions there)."""

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


class ApprovalPolicy(BaseModel):
    """Who may approve which action where. With no rules nobody can approve anything."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approvers: tuple[ApproverRule, ...] = ()
    two_approvers: tuple[Scope, ...] = Field(
        default=(), description="scopes whose actions need two distinct approvers"
    )
    teams: tuple[str, ...] = Field(
        default=(), description="chat workspaces whose clicks count; empty = any"
    )
    ttl: timedelta = Field(default=DEFAULT_TTL, gt=timedelta(0))
    silencers: tuple[ApproverRule, ...] = Field(
        default=(), description="who may silence (users, groups); empty = the approvers"
    )
    max_silence: timedelta = Field(
        default=timedelta(days=7), gt=timedelta(0), description="the longest silence allowed"
    )
    evidence: tuple[ApproverRule, ...] = Field(
        default=(),
        description="who may fetch an incident's evidence bundles (`/pitcrew bundle`), by "
        "namespaces and workloads; empty = the approvers and silencers of its scope",
    )

    @field_validator("evidence")
    @classmethod
    def _evidence_not_by_action(cls, rules: tuple[ApproverRule, ...]) -> tuple[ApproverRule, ...]:
        for index, rule in enumerate(rules):
            if rule.actions:
                raise ValueError(
                    f"rule {index} has actions: evidence is not an action; scope it by "
                    "namespaces and workloads"
                )
        return rules


@dataclass(frozen=True, slots=True)
class ChatUser:
    """The person behind a click or command, as the chat adapter identified them."""

    id: str
    groups: frozenset[str] = frozenset()
    team: str = ""
    console: bool = False  # at the command line of the daemon's host: in no chat workspace


def may_approve(
    policy: ApprovalPolicy, user: ChatUser, namespace: str, action: str, workload: str = ""
) -> str:
    """Why `user` may not approve `action` in `namespace` on `workload` (`ns/kind/name`),
    or "" when they may; a refusal names the workload where rules are scoped by them."""
    if policy.teams and not user.console and user.team not in policy.teams:
        return f"clicks from workspace {user.team or '(unknown)'} are not accepted"
    for rule in policy.approvers:
        if rule.covers(namespace, action, workload) and (
            user.id in rule.users or user.groups & set(rule.groups)
        ):
            return ""
    where = f" in {namespace}" if namespace else ""
    if workload and any(rule.workloads for rule in policy.approvers):
        where = f" on {workload}"
    return f"{user.id} is not an approver for {action}{where} (approvals.approvers)"

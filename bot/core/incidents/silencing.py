"""Who may silence and unsilence: silences under the same policy as approvals.

Why this exists: a silence mutes an incident's cards, which is as much a decision as
approving an action. So a silencer's rule (`approvals.silencers`, by default the
approvers) bounds what they may silence by its scope, as an approver's rule bounds what
they may approve: a rule covers a silence only when everything the silence can mute (its
namespaces, workloads and the actions of the cards it mutes, as the caller found them:
`Muted`) is inside the rule's namespaces, workloads and actions. A silence ends by its
creator, or by a silencer or an approver whose rule covers it; and no silence outlasts
`approvals.max_silence`. Each refusal says why. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from fnmatch import fnmatchcase

from bot.core.actions.approvals import actions_of
from bot.core.actions.order import grouped
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser, any_match
from bot.core.model import Incident, Proposal, Silence


@dataclass(frozen=True, slots=True)
class Muted:
    """What a silence can mute: namespace and workload (`namespace/kind/name`) patterns,
    and the actions its cards offer. None: not limited (only a rule without that scope
    covers it); no actions: cards that offer none (likewise)."""

    namespaces: tuple[str, ...] | None = None
    workloads: tuple[str, ...] | None = None
    actions: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class _Side:
    """One side of a scope (a field of both `Scope` and `Muted`) and how it is said."""

    field: str  # `namespaces`
    only: str  # `in namespaces`: the rule's bound, `U1 may silence only in namespaces ml-*`
    one: str  # `namespace`: `this silence mutes namespace ml-train`
    unbounded: str  # `is not limited to a namespace`
    none: str  # `no namespace`: a silence found to mute nothing on this side
    every: str  # `every namespace`
    fold: bool = False  # matched case-insensitively

    def scope(self, rule: ApproverRule) -> tuple[str, ...]:
        bound: tuple[str, ...] = getattr(rule, self.field)
        return bound

    def extent(self, muted: Muted) -> tuple[str, ...] | None:
        found: tuple[str, ...] | None = getattr(muted, self.field)
        return found

    def said(self, extent: tuple[str, ...]) -> str:
        if not extent:
            return self.none
        return f"{self.one if len(extent) == 1 else self.field} {', '.join(extent)}"


_SIDES = (
    _Side(
        "namespaces",
        "in namespaces",
        "namespace",
        "is not limited to a namespace",
        "no namespace",
        "every namespace",
    ),
    _Side(
        "workloads",
        "in workloads",
        "workload",
        "is not limited to a workload",
        "no workload",
        "every workload",
        fold=True,
    ),
    _Side(
        "actions",
        "for actions",
        "action",
        "is not limited to actions",
        "cards that offer no action",
        "every action",
    ),
)


def muted(
    matchers: Mapping[str, str],
    incident: Incident | None = None,
    proposals: Sequence[Proposal] = (),
    offers: Mapping[str, tuple[str, ...]] | None = None,
) -> Muted:
    """What a silence with `matchers` can mute. `incident`: the incident its `incident`
    matcher names (None: none, or not stored), with its `proposals`; `offers`: the
    actions each playbook of the library offers, by id (None: not known here)."""
    return Muted(
        _namespaces(matchers, incident),
        _workloads(matchers, incident),
        _actions(matchers, incident, proposals, offers),
    )


def _namespaces(matchers: Mapping[str, str], incident: Incident | None) -> tuple[str, ...] | None:
    """Its `namespace`, the namespace of its `ns/kind/name` workload or of its incident."""
    if "namespace" in matchers:
        return (matchers["namespace"].lower(),)
    workload = matchers.get("workload", "").split("/")
    if len(workload) == 3 and workload[0]:
        return (workload[0].lower(),)
    return None if incident is None else (incident.namespace,)


def _workloads(matchers: Mapping[str, str], incident: Incident | None) -> tuple[str, ...] | None:
    """Its `workload` as a `namespace/kind/name` pattern: as written when it has both
    slashes (only a whole key can match it), else within its `namespace` (a `kind/name`
    or `name` answers to that part of a key, one with a wildcard to any part: then the
    whole namespace); else its incident's workload."""
    pattern, namespace = matchers.get("workload", "").lower(), matchers.get("namespace", "")
    if pattern.count("/") >= 2:
        return (pattern,)
    if pattern and namespace:
        namespace = namespace.lower()
        if any(char in pattern for char in "*?["):
            return (f"{namespace}/*",)
        return (f"{namespace}/{pattern}" if "/" in pattern else f"{namespace}/*/{pattern}",)
    if incident is not None and incident.workload is not None:
        return (str(incident.workload).lower(),)
    return None


def _actions(
    matchers: Mapping[str, str],
    incident: Incident | None,
    proposals: Sequence[Proposal],
    offers: Mapping[str, tuple[str, ...]] | None,
) -> tuple[str, ...] | None:
    """The actions its incident's card offers (its proposals' steps, and the plans its
    diagnosis offers), else those the playbooks its `playbook` matcher names may offer."""
    if incident is not None:
        found = {a for p in proposals for a in actions_of(p)}
        plans = grouped(incident.diagnosis.actions)
        found |= {offer.action for plan in plans if plan[0].offered for offer in plan}
    elif "playbook" in matchers and offers is not None:
        pattern = matchers["playbook"].lower()
        found = {
            a for pid, acts in offers.items() if fnmatchcase(pid.lower(), pattern) for a in acts
        }
    else:
        return None
    return tuple(sorted(found))


def may_silence(
    policy: ApprovalPolicy, user: ChatUser, duration: timedelta, muted: Muted = Muted()
) -> str:
    """Why `user` may not silence for `duration` what `muted` says, or "" when they may:
    a silencer (by default an approver) one of whose rules covers all of it, for at most
    `max_silence`."""
    if policy.teams and not user.console and user.team not in policy.teams:
        return f"requests from workspace {user.team or '(unknown)'} are not accepted"
    rules = [r for r in policy.silencers or policy.approvers if _member(r, user)]
    if not rules:
        return f"{user.id} may not silence (approvals.silencers, or else the approvers, may)"
    if not any(covers(rule, muted) for rule in rules):
        return _out_of_scope(user, rules, muted)
    if duration > policy.max_silence:
        return f"a silence lasts at most {describe_span(policy.max_silence)}"
    return ""


def may_unsilence(
    policy: ApprovalPolicy, user: ChatUser, silence: Silence, muted: Muted = Muted()
) -> str:
    """Why `user` may not end `silence` (which can mute what `muted` says), or "" when
    they may: its creator, or a silencer or an approver one of whose rules covers it."""
    if user.id == silence.author:
        return ""
    if policy.teams and not user.console and user.team not in policy.teams:
        return f"requests from workspace {user.team or '(unknown)'} are not accepted"
    rules = (*(policy.silencers or policy.approvers), *policy.approvers)
    if any(_member(rule, user) and covers(rule, muted) for rule in rules):
        return ""
    return (
        f"{user.id} may not end silence {silence.id}: only its creator {silence.author} "
        f"may, or a silencer or an approver whose scope covers {_extent(muted)}"
    )


def covers(rule: ApproverRule, muted: Muted) -> bool:
    """Every side of the silence falls inside the rule's scope (a pattern counts as
    inside only when the rule's patterns match it as written)."""
    return all(_covers_side(rule, muted, side) for side in _SIDES)


def _covers_side(rule: ApproverRule, muted: Muted, side: _Side) -> bool:
    scope, extent = side.scope(rule), side.extent(muted)
    if not scope:
        return True
    values = [value.lower() if side.fold else value for value in extent or ()]
    return bool(values) and all(any_match(scope, value) for value in values)


def _member(rule: ApproverRule, user: ChatUser) -> bool:
    return user.id in rule.users or bool(user.groups & set(rule.groups))


def _out_of_scope(user: ChatUser, rules: list[ApproverRule], muted: Muted) -> str:
    """The side no rule of the user covers: their scope there and what the silence mutes
    there; when each side is covered by some rule but no one rule covers all, each rule."""
    for side in _SIDES:
        if not any(_covers_side(rule, muted, side) for rule in rules):
            scope = ", ".join(sorted({p for rule in rules for p in side.scope(rule)}))
            extent = side.extent(muted)
            mutes = side.unbounded if extent is None else f"mutes {side.said(extent)}"
            return f"{user.id} may silence only {side.only} {scope}; this silence {mutes}"
    each = " or ".join(_scope_of(rule) for rule in rules)
    return f"{user.id} may silence only {each}; this silence mutes {_extent(muted)}"


def _extent(muted: Muted) -> str:
    """All a silence can mute, side by side: `namespace ml-train; every workload; ...`."""
    return "; ".join(
        side.every if (extent := side.extent(muted)) is None else side.said(extent)
        for side in _SIDES
    )


def _scope_of(rule: ApproverRule) -> str:
    """`in namespaces ml-* for actions k8s.*`: the sides a rule bounds."""
    return " ".join(
        f"{side.only} {', '.join(side.scope(rule))}" for side in _SIDES if side.scope(rule)
    )


def describe_span(span: timedelta) -> str:
    """`7d`, `8h` or `90m`: a silence's length as the policy's messages say it."""
    minutes = int(span.total_seconds() // 60)
    if minutes % 60:
        return f"{minutes}m"
    hours = minutes // 60
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"

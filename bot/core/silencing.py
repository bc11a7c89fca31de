"""Who may silence and unsilence: silences under the same policy as approvals.

Why this exists: a silence mutes an incident's cards, which is as much a decision as
approving an action. So a silencer's rule (`approvals.silencers`, by default the
approvers) bounds where they may silence by its namespaces, as an approver's rule
bounds where they may approve; a silence ends by its creator, or by a silencer or
an approver whose scope covers what it mutes; and no silence outlasts
`approvals.max_silence`. Each refusal says why. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from bot.core.approvals import ApprovalPolicy, ApproverRule, ChatUser, any_match
from bot.core.model import Silence


def may_silence(
    policy: ApprovalPolicy,
    user: ChatUser,
    duration: timedelta,
    namespaces: tuple[str, ...] | None = None,
) -> str:
    """Why `user` may not silence for `duration`, or "" when they may: a silencer (by
    default an approver) whose rule's namespaces cover every namespace the silence can
    mute (`namespaces`, as patterns; None: not limited to any), for at most `max_silence`."""
    if policy.teams and not user.console and user.team not in policy.teams:
        return f"requests from workspace {user.team or '(unknown)'} are not accepted"
    rules = [r for r in policy.silencers or policy.approvers if _member(r, user)]
    if not rules:
        return f"{user.id} may not silence (approvals.silencers, or else the approvers, may)"
    if not any(_covers_all(rule, namespaces) for rule in rules):
        return f"{user.id} may silence only in {_scopes(rules)}; {_muting(namespaces)}"
    if duration > policy.max_silence:
        return f"a silence lasts at most {describe_span(policy.max_silence)}"
    return ""


def may_unsilence(
    policy: ApprovalPolicy, user: ChatUser, silence: Silence, namespaces: tuple[str, ...] | None
) -> str:
    """Why `user` may not end `silence`, or "" when they may: its creator, or a silencer
    or an approver whose scope covers every namespace it mutes."""
    if user.id == silence.author:
        return ""
    if policy.teams and not user.console and user.team not in policy.teams:
        return f"requests from workspace {user.team or '(unknown)'} are not accepted"
    rules = (*(policy.silencers or policy.approvers), *policy.approvers)
    if any(_member(rule, user) and _covers_all(rule, namespaces) for rule in rules):
        return ""
    return (
        f"{user.id} may not end silence {silence.id}: only its creator {silence.author}, "
        f"or a silencer or an approver for {_muting(namespaces, bare=True)}, may"
    )


def _member(rule: ApproverRule, user: ChatUser) -> bool:
    return user.id in rule.users or bool(user.groups & set(rule.groups))


def _covers_all(rule: ApproverRule, namespaces: tuple[str, ...] | None) -> bool:
    """Every namespace pattern of a silence falls inside the rule's namespaces (a pattern
    counts as inside only when the rule's patterns match it as written)."""
    if not rule.namespaces:
        return True
    return namespaces is not None and all(any_match(rule.namespaces, n) for n in namespaces)


def _scopes(rules: Iterable[ApproverRule]) -> str:
    return ", ".join(sorted({n for rule in rules for n in rule.namespaces}))


def _muting(namespaces: tuple[str, ...] | None, *, bare: bool = False) -> str:
    if namespaces is None:
        return "every namespace" if bare else "this silence is not limited to a namespace"
    listed = ", ".join(namespaces)
    return listed if bare else f"this silence mutes {listed}"


def describe_span(span: timedelta) -> str:
    """`7d`, `8h` or `90m`: a silence's length as the policy's messages say it."""
    minutes = int(span.total_seconds() // 60)
    if minutes % 60:
        return f"{minutes}m"
    hours = minutes // 60
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"

"""Silences under the same policy as approvals: a silencer's namespaces bound what they
may silence and unsilence; a silence ends by its creator, or a silencer or approver in
its scope; each refusal says why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.approvals import ApprovalPolicy, ApproverRule, ChatUser
from bot.core.model import Silence
from bot.core.silencing import may_silence, may_unsilence

POLICY = ApprovalPolicy(
    approvers=(ApproverRule(users=("U_APPROVER",), namespaces=("ml-*",)),),
    silencers=(
        ApproverRule(users=("U_OTHER",), namespaces=("other-*",)),
        ApproverRule(users=("U_ML",), namespaces=("ml-*",)),
        ApproverRule(users=("U_ALL",)),
    ),
    max_silence=timedelta(hours=2),
)
OTHER, ML, ALL = ChatUser("U_OTHER"), ChatUser("U_ML"), ChatUser("U_ALL")
APPROVER, STRANGER = ChatUser("U_APPROVER"), ChatUser("U_STRANGER")
T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("user", "namespaces", "hours", "problem"),
    [
        (OTHER, ("other-team",), 1, ""),
        (
            OTHER,
            ("ml-train",),
            1,
            "U_OTHER may silence only in other-*; this silence mutes ml-train",
        ),
        (
            OTHER,
            None,
            1,
            "U_OTHER may silence only in other-*; this silence is not limited to a namespace",
        ),
        (OTHER, ("other-*",), 1, ""),  # a pattern inside the scope
        (OTHER, ("*",), 1, "U_OTHER may silence only in other-*; this silence mutes *"),
        (ML, ("ml-train",), 1, ""),
        (ALL, None, 1, ""),
        (ALL, ("ml-train",), 3, "a silence lasts at most 2h"),
        (
            APPROVER,
            ("ml-train",),
            1,
            "U_APPROVER may not silence (approvals.silencers, or else the approvers, may)",
        ),
    ],
)
def test_a_silencers_scope_bounds_what_they_may_silence(
    user: ChatUser, namespaces: tuple[str, ...] | None, hours: int, problem: str
) -> None:
    assert may_silence(POLICY, user, timedelta(hours=hours), namespaces) == problem


def _silence(author: str) -> Silence:
    return Silence("s-1", {"namespace": "ml-train"}, T0, T0 + timedelta(hours=1), author)


@pytest.mark.parametrize(
    ("user", "author", "namespaces", "problem"),
    [
        (OTHER, "U_OTHER", ("ml-train",), ""),  # its creator, whatever the scope
        (ML, "U_OTHER", ("ml-train",), ""),  # a silencer in scope
        (APPROVER, "U_OTHER", ("ml-train",), ""),  # an approver in scope
        (ALL, "U_OTHER", None, ""),
        (
            OTHER,
            "U_ML",
            ("ml-train",),
            "U_OTHER may not end silence s-1: only its creator U_ML, or a silencer or an "
            "approver for ml-train, may",
        ),
        (
            STRANGER,
            "U_ML",
            ("ml-train",),
            "U_STRANGER may not end silence s-1: only its creator U_ML, or a silencer or an "
            "approver for ml-train, may",
        ),
        (
            APPROVER,
            "U_ALL",
            None,
            "U_APPROVER may not end silence s-1: only its creator U_ALL, or a silencer or an "
            "approver for every namespace, may",
        ),
    ],
)
def test_a_silence_ends_by_its_creator_or_someone_in_its_scope(
    user: ChatUser, author: str, namespaces: tuple[str, ...] | None, problem: str
) -> None:
    assert may_unsilence(POLICY, user, _silence(author), namespaces) == problem

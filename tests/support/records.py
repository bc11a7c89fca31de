"""What the store keeps, built for its specs and the daemon's: an incident, a proposal, a
notification and a ledger entry at minutes from one start; a proposal moved or approved
as the service does it (the core decides, the store records); the outbox drained; the
store's tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from bot.adapters.store.store import Store
from bot.core.actions import approvals
from bot.core.actions.approvals import LiveCheck, StaleProposalError
from bot.core.actions.policy import ApprovalPolicy, ApproverRule, ChatUser, Scope
from bot.core.model import (
    ActionResult,
    Diagnosis,
    Evidence,
    Finding,
    Incident,
    IncidentState,
    LedgerEntry,
    Notification,
    NotificationKind,
    ObjectRef,
    Proposal,
    ProposalState,
    RankedFinding,
    Report,
    Role,
    Severity,
    SourceKind,
)
from bot.core.taxonomy import Category

T0 = datetime(2025, 11, 3, 10, 0, tzinfo=UTC)


def minutes(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def finding(playbook: str = "pod-oom-killed", count: int = 1) -> Finding:
    return Finding(
        playbook=playbook,
        category=Category.POD_OOM_KILLED,
        severity=Severity.CRITICAL,
        title="Worker pod OOMKilled",
        signature="oomkilled",
        source=SourceKind.POD_STATUS,
        captures=MappingProxyType({"limit": "16Gi"}),
        evidence=(Evidence("Reason: OOMKilled", SourceKind.POD_STATUS),),
        count=count,
        time=T0,
    )


def incident(
    iid: str,
    *,
    key: str = "",
    namespace: str = "ml",
    workload: str = "verl",
    opened: float = 0,
    updated: float | None = None,
    resolved: float | None = None,
) -> Incident:
    return Incident(
        id=iid,
        key=key or f"{namespace}/rayjob/{workload}",
        opened_at=minutes(opened),
        updated_at=minutes(opened if updated is None else updated),
        diagnosis=Diagnosis((RankedFinding(finding(), Role.PRIMARY),), (), "OOMKilled."),
        workload=ObjectRef("RayJob", workload, namespace),
        cluster="prod",
        namespace=namespace,
        counts=MappingProxyType({"pod-oom-killed": 1}),
        state=IncidentState.OPEN if resolved is None else IncidentState.RESOLVED,
        resolved_at=None if resolved is None else minutes(resolved),
    )


def proposal(pid: str, incident_id: str = "inc-1", created: float = 0, **extra: Any) -> Proposal:
    return Proposal(
        id=pid,
        incident_id=incident_id,
        action="k8s.bump_memory",
        params=MappingProxyType({"factor": 1.5, "container": "ray-worker"}),
        preview="16Gi -> 24Gi",
        state=ProposalState.OFFERED,
        created_at=minutes(created),
        expires_at=minutes(created + 60),
        target=ObjectRef("RayCluster", "verl-raycluster", "ml"),
        **extra,
    )


ONE = ApprovalPolicy(approvers=(ApproverRule(groups=("sre",)),))
TWO = ApprovalPolicy(approvers=ONE.approvers, two_approvers=(Scope(),))


def move(
    store: Store, pid: str, to_state: ProposalState, actor: str, at: datetime, reason: str = ""
) -> Proposal:
    """A move decided by the core on the stored proposal and recorded the one way a
    proposal's state is written."""
    current = store.get_proposal(pid)
    assert current is not None
    decided = approvals.transition(current, to_state, actor, at, reason)
    return store.record_decision(decided, current.version)


def click(
    store: Store, pid: str, approver: str, at: datetime, policy: ApprovalPolicy = TWO
) -> approvals.Decision:
    """An approval click as the service makes it: the core decides on the stored proposal,
    the store records the decision; a click that lost the race decides again."""
    while True:
        current = store.get_proposal(pid)
        assert current is not None
        decision = approvals.approve(
            current, ChatUser(approver, frozenset({"sre"})), policy, at, LiveCheck()
        )
        if isinstance(decision, approvals.Refused):
            return decision
        try:
            store.record_decision(decision.proposal, current.version)
        except StaleProposalError:
            continue
        return decision


def note(
    incident_id: str,
    kind: NotificationKind = NotificationKind.POST,
    channel: str = "#alerts",
    at: float = 0,
    text: str = "",
) -> Notification:
    report = Report("RayJob ml/verl failed", Severity.CRITICAL, "open", {}, "oom", (), (), "x")
    return Notification(incident_id, kind, channel, report, text=text, created_at=minutes(at))


def ledger(pid: str, started: float = 0) -> LedgerEntry:
    return LedgerEntry(pid, "k8s.bump_memory", "U1", minutes(started), ActionResult.STARTED)


def drain(store: Store, now: datetime) -> list[tuple[int | None, str]]:
    """Deliver everything due, in the order the outbox hands it out."""
    delivered = []
    while (message := store.next_due(now)) is not None:
        sent = message.notification
        assert store.mark_delivered(sent.id or 0, f"ts-{sent.id}", now)
        delivered.append((sent.id, sent.text))
    return delivered


TABLES = [
    "approvals",
    "bookmarks",
    "bundles",
    "chat_refs",
    "deliveries",
    "evidence_fetches",
    "fencing",
    "findings",
    "incidents",
    "intake",
    "ledger",
    "outbox",
    "proposals",
    "seen_requests",
    "silences",
    "transitions",
    "unchecked_cards",
    "unmatched",
]

"""The card of an incident, neutral of any chat: an `Incident` and its proposals in,
one `Report` out.

Why this exists: Slack, the console and `pitcrew render` must all say the
same thing about an incident — what failed and where, the root cause and the
symptoms with their counters, the few evidence lines that matched, the
actions with their previews and state, the actions withheld and why, and
what happened so far — and the card must read as the incident moves
(open → approved by @x → running → applied and verified / failed →
resolved). Deciding that wording once, here, keeps the chat adapters to
layout and escaping. Pure: no clock, no I/O; text is not escaped here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from bot.core.actions.catalog import CATALOG
from bot.core.actions.order import rank_key
from bot.core.model import (
    Finding,
    Incident,
    IncidentState,
    Proposal,
    ProposalState,
    RankedFinding,
    Report,
    ReportAction,
    Role,
    Severity,
    Transition,
    frozen_map,
)
from bot.core.text import truncate

MAX_EVIDENCE = 8
MAX_HISTORY = 15
LINE_LIMIT = 300
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

S = ProposalState
_IN_PROGRESS = (S.RUNNING, S.APPROVED)
_FINISHED = (S.SUCCEEDED, S.FAILED)


def _mentions(users: Iterable[str]) -> str:
    return " and ".join(f"@{u}" for u in users)


def _approvers(proposal: Proposal) -> str:
    if proposal.approvals:
        return _mentions(proposal.approvals)
    actor = next((t.actor for t in proposal.history if t.to_state is S.APPROVED), "")
    return _mentions([actor]) if actor else "someone"


def _last(proposal: Proposal) -> Transition | None:
    return proposal.history[-1] if proposal.history else None


def _moved_at(proposal: Proposal) -> datetime:
    last = _last(proposal)
    return last.at if last else proposal.created_at


def status(incident: Incident, proposals: Sequence[Proposal] = ()) -> str:
    """One line: open, approved by @x, running, applied and verified, failed, resolved."""
    if incident.state is IncidentState.RESOLVED:
        return f"resolved: {incident.resolution}" if incident.resolution else "resolved"
    active = [p for p in proposals if p.state in _IN_PROGRESS]
    if active:
        current = max(active, key=lambda p: (p.state is S.RUNNING, _moved_at(p)))
        if current.state is S.RUNNING:
            return f"running {current.action} (approved by {_approvers(current)})"
        return f"approved by {_approvers(current)}: {current.action}"
    finished = [p for p in proposals if p.state in _FINISHED]
    if finished:
        latest = max(finished, key=_moved_at)
        if latest.state is S.SUCCEEDED:
            return f"applied and verified: {latest.action}"
        last = _last(latest)
        why = f": {last.reason}" if last and last.reason else ""
        return f"failed: {latest.action}{why}"
    halfway = [p for p in proposals if p.state is S.OFFERED and p.approvals]
    if halfway:
        first = halfway[0]
        who = _mentions(first.approvals)
        return f"open: {first.action} approved by {who}, needs a second approver"
    return "open"


def _noun(finding: Finding, n: int) -> str:
    kind = finding.obj.kind.lower() if finding.obj else "object"
    return kind if n == 1 else f"{kind}s"


def _kinds(finding: Finding, kinds: Mapping[str, int]) -> str:
    """`RayJob and 1 pod`: the finding's own kind first (named when it is one object),
    then how many of each other kind."""
    own = finding.obj.kind if finding.obj else ""
    ordered = sorted(kinds.items(), key=lambda item: (item[0] != own, -item[1], item[0]))
    shown = [
        kind if i == 0 and n == 1 else f"{n} {kind.lower()}{'' if n == 1 else 's'}"
        for i, (kind, n) in enumerate(ordered)
    ]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def counter(incident: Incident, finding: Finding) -> str:
    """`340 pods, 412 times` / `3 pods` / `RayJob and 1 pod` / `x5`, or "" for a single
    occurrence."""
    objects = incident.objects.get(finding.playbook, 0)
    times = incident.counts.get(finding.playbook, finding.count)
    capped = finding.playbook in incident.objects_capped
    kinds = incident.object_kinds.get(finding.playbook, {})
    parts: list[str] = []
    if len(kinds) > 1 and not capped:
        parts.append(_kinds(finding, kinds))
    elif objects > 1 or capped:
        parts.append(f"{objects}{'+' if capped else ''} {_noun(finding, objects)}")
    if times > max(objects, 1):
        parts.append(f"{times} times" if parts else f"x{times}")
    return ", ".join(parts)


def _describe(incident: Incident, finding: Finding) -> str:
    count = counter(incident, finding)
    return f"{finding.category}: {finding.title}" + (f" ({count})" if count else "")


def _describe_primary(incident: Incident, finding: Finding) -> str:
    """The root cause; "likely" when only weak evidence (boilerplate, prose) shows it."""
    text = _describe(incident, finding)
    return f"likely {text} (weak evidence only)" if finding.weak else text


def _describe_secondary(incident: Incident, ranked: RankedFinding) -> str:
    """A secondary finding; a symptom says of what, and why, in one line."""
    text = _describe(incident, ranked.finding)
    if ranked.symptom_of is None:
        return text
    return f"{text}: symptom of {ranked.symptom_of}, {ranked.why}"


def _where(incident: Incident) -> dict[str, str]:
    where: dict[str, str] = {}
    if incident.cluster:
        where["cluster"] = incident.cluster
    if incident.namespace:
        where["namespace"] = incident.namespace
    if incident.workload is not None:
        where["workload"] = f"{incident.workload.kind} {incident.workload.name}"
    if incident.ray_job_id:
        where["ray_job_id"] = incident.ray_job_id
    return where


def _title(incident: Incident) -> str:
    primary = incident.diagnosis.primary
    what = primary.title if primary else "No failure found"
    workload = incident.workload
    if workload is not None:
        scope = f"{workload.namespace}/" if workload.namespace else ""
        what = f"{what}: {workload.kind} {scope}{workload.name}"
    elif incident.namespace:
        what = f"{what} in {incident.namespace}"
    return f"Resolved: {what}" if incident.state is IncidentState.RESOLVED else what


def _severity(incident: Incident) -> Severity:
    found = [r.finding.severity for r in incident.diagnosis.findings]
    return max(found, key=lambda s: s.weight) if found else Severity.INFO


def _evidence(incident: Incident, limit: int) -> tuple[str, ...]:
    lines: dict[str, None] = {}
    for ranked in incident.diagnosis.findings:
        for item in ranked.finding.evidence:
            origin = f"{item.origin}:{item.line}" if item.origin and item.line else item.origin
            text = item.text.strip()
            line = f"{origin}: {text}" if origin else text
            lines.setdefault(truncate(line, LINE_LIMIT), None)
            if len(lines) >= limit:
                return tuple(lines)
    return tuple(lines)


def _transition_line(proposal: Proposal, step: Transition) -> str:
    action = proposal.action
    by = f" by @{step.actor}" if step.actor and step.to_state is not S.OFFERED else ""
    why = f": {step.reason}" if step.reason else ""
    if step.to_state is S.OFFERED and step.from_state is None:
        return f"{action} offered"
    if step.to_state is S.OFFERED:  # an approval recorded, a second one needed
        return f"{action}: @{step.actor} approved; {step.reason}"
    if step.to_state is S.APPROVED:
        return f"{action} approved by {_approvers(proposal)}"
    if step.to_state is S.RUNNING:
        return f"{action} running"
    if step.to_state is S.SUCCEEDED:
        return f"{action} applied and verified{why}"
    if step.to_state is S.FAILED:
        return f"{action} failed{why}"
    if step.to_state is S.REJECTED:
        return f"{action} rejected{by}{why}"
    return f"{action} expired{why}"


def _history(incident: Incident, proposals: Sequence[Proposal], limit: int) -> tuple[str, ...]:
    events: list[tuple[datetime, int, str]] = [(note.at, 0, note.text) for note in incident.notes]
    for proposal in proposals:
        events.extend((step.at, 1, _transition_line(proposal, step)) for step in proposal.history)
    events.sort(key=lambda e: (e[0], e[1]))
    return tuple(f"{at.strftime(TIME_FORMAT)} {text}" for at, _, text in events[-limit:])


def build_report(
    incident: Incident,
    proposals: Sequence[Proposal] = (),
    *,
    max_evidence: int = MAX_EVIDENCE,
    max_history: int = MAX_HISTORY,
) -> Report:
    """The card for `incident`; `proposals` are its proposals in any order."""
    mine = sorted((p for p in proposals if p.incident_id == incident.id), key=rank_key)
    diagnosis = incident.diagnosis
    primary = diagnosis.primary
    withheld = dict.fromkeys(f"{o.action}: {o.reason}" for o in diagnosis.actions if not o.offered)
    return Report(
        title=_title(incident),
        severity=_severity(incident),
        status=status(incident, mine),
        where=frozen_map(_where(incident)),
        primary=_describe_primary(incident, primary) if primary else "",
        secondary=tuple(
            _describe_secondary(incident, r) for r in diagnosis.findings if r.role is Role.SECONDARY
        ),
        evidence=_evidence(incident, max_evidence),
        diagnosis=diagnosis.text,
        actions=tuple(
            ReportAction(
                proposal_id=p.id,
                action=p.action,
                preview=p.preview,
                state=p.state,
                impact=CATALOG[p.action].impact if p.action in CATALOG else "",
            )
            for p in mine
        ),
        withheld=tuple(withheld),
        history=_history(incident, mine, max_history),
        memory=incident.memory,
        incident_id=incident.id,
        opened_at=incident.opened_at,
    )

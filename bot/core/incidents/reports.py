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

import re
from collections.abc import Mapping, Sequence

from bot.core.actions.order import rank_key, remains
from bot.core.actions.specs import ACTION_SPECS
from bot.core.diagnosis.unmatched import UNKNOWN
from bot.core.incidents import alert_facts
from bot.core.incidents.outcomes import TIME_FORMAT, history, latest, status
from bot.core.incidents.wrappers import cause_unknown
from bot.core.model import (
    AlertFact,
    Evidence,
    Finding,
    Incident,
    IncidentState,
    Proposal,
    ProposalState,
    RankedFinding,
    Report,
    ReportAction,
    ReportAlert,
    Role,
    Severity,
    frozen_map,
)
from bot.core.origins import short_source
from bot.core.text import truncate

MAX_EVIDENCE = 3  # the decisive lines on the card; every line goes to its thread
MAX_DETAILS = 40
MAX_HISTORY = 15
MAX_STEPS = 2  # remediation steps shown when no action fits
LINE_LIMIT = 300
SURE_LINE = 140
S = ProposalState
UNKNOWN_SURENESS = "unknown: only the job's failed status and exit code say that it failed"
UNKNOWN_STEPS = (
    "Read the lines above: they look like the failure, and no playbook knows them.",
    "The evidence bundle in the card's thread keeps the driver log and the objects' state.",
)


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
    """A secondary finding in one line; a symptom says of what (why is in the thread)."""
    text = _describe(incident, ranked.finding)
    if ranked.symptom_of is None:
        return text
    return f"{text}: symptom of {ranked.symptom_of}"


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


def _title(incident: Incident, unknown: bool = False) -> str:
    primary = incident.diagnosis.primary
    nothing = UNKNOWN[0].upper() + UNKNOWN[1:] if incident.diagnosis.unknown else ""
    what = primary.title if primary else (nothing or "No failure found")
    if unknown:
        what = "pitcrew does not know why it failed"
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


def evidence_line(item: Evidence, limit: int = LINE_LIMIT) -> str:
    """`driver.log:44: text`: the source's short name (never a directory), its line."""
    origin = short_source(item.origin)
    origin = f"{origin}:{item.line}" if origin and item.line else origin
    text = " ".join(item.text.split())
    return truncate(f"{origin}: {text}" if origin else text, limit)


def _evidence(incident: Incident, limit: int, unknown: bool = False) -> tuple[str, ...]:
    """The root cause's own lines first (one fewer when other findings have lines), then
    one line of each other finding; with the cause unknown, the lines no playbook knows
    (the wrappers' lines only when there are none)."""
    if unknown and incident.unexplained:
        return tuple(truncate(" ".join(line.split()), LINE_LIMIT) for line in incident.unexplained)[
            : limit + 2
        ]
    lines: dict[tuple[str, int | None], str] = {}
    findings = incident.diagnosis.findings
    others = any(r.role is Role.SECONDARY and r.finding.evidence for r in findings)
    for ranked in findings:
        own = ranked.finding.evidence
        mine = own[: limit - 1 if others else limit] if ranked.role is Role.PRIMARY else own[:1]
        for item in mine:
            where = (item.origin, item.line) if item.line else (item.origin, hash(item.text))
            lines.setdefault(where, evidence_line(item))
            if len(lines) >= limit:
                return tuple(lines.values())
    return tuple(lines.values())


def _details(incident: Incident) -> tuple[str, ...]:
    lines = (evidence_line(e) for r in incident.diagnosis.findings for e in r.finding.evidence)
    return tuple(dict.fromkeys(lines))[:MAX_DETAILS]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")


def cause_sentence(incident: Incident) -> str:
    """What broke, in one sentence naming the object and the number: the first sentence
    of the root cause's explanation, with the exit code when it does not say it."""
    primary = incident.diagnosis.primary
    if primary is None:
        return ""
    text = " ".join(incident.diagnosis.cause.split())
    sentence = _SENTENCE_END.split(text, 1)[0] if text else ""
    if not sentence:
        where = f" on {primary.obj}" if primary.obj else ""
        sentence = f"{primary.title}{where}."
    code = primary.fields.get("exit_code", "")
    if code and code not in sentence:
        body = sentence.rstrip(".")
        sentence = f"{body} (exit code {code})" + ("." if body != sentence else "")
    return truncate(sentence, 2 * LINE_LIMIT)


def unknown_sentence(incident: Incident) -> str:
    """What broke when only wrappers say it did: the workload failed, and why is not known."""
    workload = incident.workload
    what = f"{workload.kind} {workload.namespace}/{workload.name}" if workload else "The job"
    codes = {r.finding.fields.get("exit_code", "") for r in incident.diagnosis.findings}
    codes |= {r.finding.captures.get("exit_code", "") for r in incident.diagnosis.findings}
    code = next((c for c in sorted(codes) if c), "")
    exited = f" (its entrypoint exited with code {code})" if code else ""
    lines = (
        "the lines below look like the cause"
        if incident.unexplained
        else "no line of its evidence looks like the cause"
    )
    return f"{what} failed{exited} and pitcrew does not know why: {lines}."


def sureness(incident: Incident) -> str:
    """`strong` or `likely (weak evidence only)`, and the evidence line it rests on."""
    primary = incident.diagnosis.primary
    if primary is None:
        return ""
    how = "likely (weak evidence only)" if primary.weak else "strong"
    return f"{how}: {evidence_line(primary.evidence[0], SURE_LINE)}" if primary.evidence else how


def details_text(report: Report) -> str:
    """The card's thread: every evidence line and the whole explanation, when the card
    shows less than that."""
    if len(report.details) <= len(report.evidence) and report.diagnosis.count("\n") < 1:
        return ""
    lines = [f"Evidence ({len(report.details)} lines):", *report.details]
    if report.diagnosis:
        lines += ["", report.diagnosis]
    if report.runbook:
        lines += ["", "Runbook: " + " ".join(report.runbook)]
    return "\n".join(lines)


def _alert_line(fact: AlertFact) -> ReportAlert:
    """`KubePodCrashLooping firing since …: summary` or `… resolved at … (firing since …)`,
    with the rule, the alert and a prefilled silence in Alertmanager."""
    since = fact.starts_at.strftime(TIME_FORMAT) if fact.starts_at else ""
    if fact.status == "resolved":
        ended = f" at {fact.ends_at.strftime(TIME_FORMAT)}" if fact.ends_at else ""
        text = f"{fact.name} resolved{ended}" + (f" (firing since {since})" if since else "")
    else:
        text = f"{fact.name} firing" + (f" since {since}" if since else "")
    if fact.summary:
        text += f": {fact.summary}"
    return ReportAlert(
        text=truncate(text, LINE_LIMIT),
        source=fact.generator_url,
        alertmanager=alert_facts.alert_link(fact),
        silence=alert_facts.silence_link(fact) if fact.status != "resolved" else "",
    )


def _plan_lines(proposal: Proposal) -> tuple[str, ...]:
    """A plan's steps in order, `action: the first line of its preview`; none for one."""
    if not proposal.then:
        return ()
    steps = [(proposal.action, proposal.preview), *((s.action, s.preview) for s in proposal.then)]
    return tuple(
        f"{action}: {preview.splitlines()[0] if preview else ''}" for action, preview in steps
    )


def _offered(incident: Incident, proposals: Sequence[Proposal]) -> tuple[ReportAction, ...]:
    """The offers still open, in the core's order; a change offered without its next
    step says what happens then and what would complete it."""
    return tuple(
        ReportAction(
            proposal_id=p.id,
            action=p.action,
            preview=p.preview,
            state=p.state,
            impact=_impact(p),
            steps=_plan_lines(p),
            remains="" if p.then else remains(p.action, p.playbook, incident.diagnosis.actions),
        )
        for p in proposals
        if p.state is S.OFFERED
    )


def _impact(proposal: Proposal) -> str:
    """What approving does: an action's impact; a plan's, that of the step it ends with
    (the bump's "running pods keep their old limit" is what its next step changes)."""
    last = proposal.then[-1].action if proposal.then else proposal.action
    spec = ACTION_SPECS.get(last)
    return spec.impact if spec is not None else ""


def configure(incident: Incident) -> tuple[str, ...]:
    """What this pitcrew lacks to act on the incident (the settings to configure), when
    it offers nothing it could run: one per setting, in the offers' order."""
    actions = incident.diagnosis.actions
    if any(o.offered for o in actions):
        return ()
    return tuple(dict.fromkeys(o.lacks for o in actions if o.lacks))


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
    unknown = cause_unknown(diagnosis)
    return Report(
        title=_title(incident, unknown),
        severity=_severity(incident),
        status=status(incident, mine),
        where=frozen_map(_where(incident)),
        primary=_describe_primary(incident, primary) if primary else "",
        secondary=tuple(
            _describe_secondary(incident, r) for r in diagnosis.findings if r.role is Role.SECONDARY
        ),
        evidence=_evidence(incident, max_evidence, unknown),
        cause=unknown_sentence(incident) if unknown else cause_sentence(incident),
        steps=UNKNOWN_STEPS if unknown else diagnosis.remediation[:MAX_STEPS],
        runbook=diagnosis.runbook[:1],
        sureness=UNKNOWN_SURENESS if unknown else sureness(incident),
        details=_details(incident),
        diagnosis=diagnosis.text,
        actions=_offered(incident, mine),
        withheld=tuple(withheld),
        history=history(incident, mine, max_history),
        memory=incident.memory,
        incident_id=incident.id,
        opened_at=incident.opened_at,
        alerts=tuple(_alert_line(fact) for fact in incident.alerts),
        latest=latest(mine),
        configure=configure(incident),
    )

"""What became of an incident's offers, as a card says it: the status line, what
happened last (a plan and how each of its steps ended), and the history.

Why this exists: after Approve, the seed's card led with "Action: ray.resubmit_job ·
expired" (the first proposal in its list) instead of the plan that ran, its status
named step 1 only, and the expired offer showed twice. A card leads with what happened
last, whichever proposal that was: the decision, each step's end, and what to do now;
an expired or superseded offer is one line of the history. Pure: no clock, no I/O;
text is not escaped here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from bot.core.actions.progress import ended, steps_of, unfinished
from bot.core.model import (
    ActionResult,
    Incident,
    IncidentNote,
    IncidentState,
    Proposal,
    ProposalState,
    ReportOutcome,
    ReportStep,
    Transition,
)

S = ProposalState
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
_IN_PROGRESS = (S.RUNNING, S.APPROVED)
_DECIDED = (S.APPROVED, S.RUNNING, S.SUCCEEDED, S.FAILED, S.REJECTED)


def named(proposal: Proposal) -> str:
    """An action by its id; a plan by its steps' actions in order."""
    if not proposal.then:
        return proposal.action
    return "plan " + " → ".join((proposal.action, *(s.action for s in proposal.then)))


def _mentions(users: Iterable[str]) -> str:
    return " and ".join(f"@{u}" for u in users)


def approvers(proposal: Proposal) -> str:
    if proposal.approvals:
        return _mentions(proposal.approvals)
    actor = next((t.actor for t in proposal.history if t.to_state is S.APPROVED), "")
    return _mentions([actor]) if actor else "someone"


def moved_at(proposal: Proposal) -> datetime:
    return proposal.history[-1].at if proposal.history else proposal.created_at


def _ended_run(proposal: Proposal) -> str:
    """`applied and verified: X`, `failed: X: why`, or a plan's steps as they ended."""
    last = proposal.history[-1] if proposal.history else None
    steps = steps_of(proposal)
    if proposal.then and steps and proposal.state is S.FAILED:
        done = [s for s in steps if s.result is ActionResult.SUCCEEDED]
        stop = next((s for s in steps if s.result not in (ActionResult.SUCCEEDED, None)), None)
        if done and stop is not None:
            n = len(done)
            said = "step 1" if n == 1 else f"steps 1 to {n}"
            return (
                f"{said} of {len(steps)} applied and verified; step {n + 1} "
                f"({stop.action}) {ended(stop.result)}: {stop.detail}"
            )
    if proposal.state is S.SUCCEEDED:
        return f"applied and verified: {named(proposal)}"
    verb = "refused" if last is not None and last.outcome == ActionResult.REFUSED else "failed"
    why = f": {last.reason.splitlines()[0]}" if last is not None and last.reason else ""
    return f"{verb}: {named(proposal)}{why}"


def status(incident: Incident, proposals: Sequence[Proposal] = ()) -> str:
    """One line: open, approved by @x, running, applied and verified, failed, resolved."""
    if incident.state is IncidentState.RESOLVED:
        return f"resolved: {incident.resolution}" if incident.resolution else "resolved"
    active = [p for p in proposals if p.state in _IN_PROGRESS]
    if active:
        current = max(active, key=lambda p: (p.state is S.RUNNING, moved_at(p)))
        if current.state is S.RUNNING:
            return f"running {named(current)} (approved by {approvers(current)})"
        return f"approved by {approvers(current)}: {named(current)}"
    finished = [p for p in proposals if p.state in (S.SUCCEEDED, S.FAILED)]
    if finished:
        return _ended_run(max(finished, key=moved_at))
    halfway = [p for p in proposals if p.state is S.OFFERED and p.approvals]
    if halfway:
        first = halfway[0]
        return (
            f"open: {named(first)} approved by {_mentions(first.approvals)}, "
            "needs a second approver"
        )
    return "open"


def latest(proposals: Sequence[Proposal]) -> ReportOutcome | None:
    """What happened last to the incident's offers (an expired offer is history only)."""
    decided = [p for p in proposals if p.state in _DECIDED]
    if not decided:
        return None
    proposal = max(decided, key=moved_at)
    last = proposal.history[-1]
    said = _said(proposal, last)
    return ReportOutcome(
        proposal_id=proposal.id,
        action=named(proposal),
        state=proposal.state,
        said=said,
        steps=_steps(proposal),
        next=unfinished([proposal]) if proposal.state in (S.SUCCEEDED, S.FAILED) else "",
    )


def _ending(proposal: Proposal) -> str:
    """How a run ended in a few words (each step's end is listed apart)."""
    steps = steps_of(proposal)
    total = len(steps)
    if proposal.state is S.SUCCEEDED:
        every = {0: "", 1: "", 2: "both steps "}.get(total, f"all {total} steps ")
        return f"{every}applied and verified"
    stop = next(
        (n for n, s in enumerate(steps, 1) if s.result not in (ActionResult.SUCCEEDED, None)), 0
    )
    last = proposal.history[-1]
    how = ended(steps[stop - 1].result) if stop else str(last.outcome or "failed")
    if total > 1 and stop:
        return f"stopped at step {stop} of {total} ({how})"
    return how


def _said(proposal: Proposal, last: Transition) -> str:
    by = approvers(proposal)
    if proposal.state is S.REJECTED:
        why = f": {last.reason}" if last.reason and last.reason != "rejected" else ""
        return f"rejected by @{last.actor}{why}; nothing was changed"
    if proposal.state is S.APPROVED:
        return f"approved by {by}; it runs next"
    if proposal.state is S.RUNNING:
        return f"approved by {by}; running"
    return f"approved by {by}; {_ending(proposal)}"


def _steps(proposal: Proposal) -> tuple[ReportStep, ...]:
    """Each step of the proposal: how it ended once run, else what is expected of it."""
    actions = (proposal.action, *(s.action for s in proposal.then))
    if proposal.state in (S.SUCCEEDED, S.FAILED):
        found = steps_of(proposal)
        if found:
            return tuple(ReportStep(s.action, ended(s.result), _first(s.detail)) for s in found)
        last = proposal.history[-1]  # a run recorded before its steps were
        result = ActionResult(last.outcome) if last.outcome else ActionResult.FAILED
        return (ReportStep(named(proposal), ended(result), _first(last.reason)),)
    state = {S.RUNNING: "running", S.APPROVED: "approved"}.get(proposal.state, "not run")
    return tuple(ReportStep(a, state if n == 0 else "waiting") for n, a in enumerate(actions))


def _first(detail: str) -> str:
    """A step's detail on the card: its first line (the thread has the rest)."""
    return detail.splitlines()[0] if detail else ""


def transition_line(proposal: Proposal, step: Transition) -> str:
    action = named(proposal)
    by = f" by @{step.actor}" if step.actor and step.to_state is not S.OFFERED else ""
    why = f": {step.reason}" if step.reason else ""
    if step.to_state is S.OFFERED and step.from_state is None:
        return f"{action} offered"
    if step.to_state is S.OFFERED:  # an approval recorded, a second one needed
        return f"{action}: @{step.actor} approved; {step.reason}"
    if step.to_state is S.APPROVED:
        return f"{action} approved by {approvers(proposal)}"
    if step.to_state is S.RUNNING:
        return f"{action} running"
    if step.to_state is S.SUCCEEDED:
        return f"{action} applied and verified{why}"
    if step.to_state is S.FAILED and step.outcome == ActionResult.REFUSED:
        return f"{action} refused{why}"
    if step.to_state is S.FAILED and step.outcome == ActionResult.BUG:
        return f"{action} stopped by a {step.reason}"  # "pitcrew bug: TypeError: ..."
    if step.to_state is S.FAILED:
        return f"{action} failed{why}"
    if step.to_state is S.REJECTED:
        return f"{action} rejected{by}{why}"
    return f"{action} expired{why}"


# An incident's notes a person needs on the card: each reassessment within the grouping
# window ("also seen", each flip of the root cause) stays in the store; of the root
# cause's changes only the last is shown.
_ALSO_SEEN = "also seen:"
_CAUSE_CHANGED = "root cause is now "


def _notes(notes: Sequence[IncidentNote]) -> list[tuple[datetime, int, str]]:
    changes = [n for n in notes if n.text.startswith(_CAUSE_CHANGED)]
    return [
        (note.at, 0, note.text)
        for note in notes
        if not note.text.startswith(_ALSO_SEEN)
        and (not note.text.startswith(_CAUSE_CHANGED) or note is changes[-1])
    ]


def history(incident: Incident, proposals: Sequence[Proposal], limit: int) -> tuple[str, ...]:
    """The incident's notes and every move of its proposals, oldest first, one line each
    (a plan's run: its steps in one line, first lines only)."""
    events = _notes(incident.notes)
    for proposal in proposals:
        for step in proposal.history:
            line = transition_line(proposal, step).split("\n", 1)[0]
            events.append((step.at, 1, line))
    events.sort(key=lambda e: (e[0], e[1]))
    return tuple(f"{at.strftime(TIME_FORMAT)} {text}" for at, _, text in events[-limit:])

"""What a remediation did to an incident's workload, step by step, and what it left undone.

Why this exists: a plan can stop part way (the bump applied and verified, the recreate
of the RayJob refused), and a change can be applied alone (the bump, when nothing here
can recreate the RayJob). What was applied must not be offered again (the old pod's
next OOM kill at the old limit is no reason for a second bump: the limit is raised
already), and the incident must stay the workload's own while its pods still run the
old limit, so that kill joins it instead of opening another. Both are read from the
proposals' histories: the last move of each run records how each of its steps ended
(`Transition.steps`). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from bot.core.actions.order import completes, needs_rerun
from bot.core.actions.specs import ACTION_SPECS
from bot.core.model import ActionOffer, ActionResult, Proposal, ProposalState, StepOutcome

S = ProposalState

# Parameters that size a change rather than say which change it is: a bump sized
# differently is still the bump of that limit.
_SIZING = frozenset({"factor", "cap", "limit", "basis"})


def steps_of(proposal: Proposal) -> tuple[StepOutcome, ...]:
    """How each step of a finished run ended, from its last move (a run recorded before
    steps were, or one not run: the proposal's own state for its first action)."""
    last = proposal.history[-1] if proposal.history else None
    if last is not None and last.steps:
        return last.steps
    actions = (proposal.action, *(step.action for step in proposal.then))
    if proposal.state is S.SUCCEEDED:
        return tuple(StepOutcome(a, ActionResult.SUCCEEDED) for a in actions)
    return ()


def _params(proposal: Proposal, index: int) -> Mapping[str, Any]:
    return proposal.params if index == 0 else proposal.then[index - 1].params


def change_key(action: str, params: Mapping[str, Any]) -> tuple[str, str]:
    """Which change an action makes, whatever it is sized to."""
    kept = sorted((str(k), str(v)) for k, v in params.items() if k not in _SIZING)
    return action, repr(kept)


def applied(proposals: Iterable[Proposal]) -> dict[tuple[str, str], tuple[Proposal, datetime]]:
    """Each change (`change_key`) a run of these proposals applied and verified, with
    the run and when it ended."""
    found: dict[tuple[str, str], tuple[Proposal, datetime]] = {}
    for proposal in proposals:
        if proposal.state not in (S.SUCCEEDED, S.FAILED) or not proposal.history:
            continue
        ended = proposal.history[-1].at
        for index, step in enumerate(steps_of(proposal)):
            if step.result is ActionResult.SUCCEEDED and index <= len(proposal.then):
                found[change_key(step.action, _params(proposal, index))] = (proposal, ended)
    return found


def not_applied(
    group: Sequence[ActionOffer], done: Mapping[tuple[str, str], object]
) -> tuple[ActionOffer, ...]:
    """A plan's offers without its first steps that are changes applied already (a
    limit raised is not raised again: its plan goes on from the next step)."""
    rest = list(group)
    while rest and needs_rerun(rest[0].action):
        if change_key(rest[0].action, rest[0].params) not in done:
            break
        rest.pop(0)
    return tuple(rest)


def unfinished(proposals: Sequence[Proposal]) -> str:
    """What the incident's remediation left undone, or "": a change applied and
    verified whose next step (a rerun, new pods) has not run since, said with how the
    run that applied it ended."""
    finished = [p for p in proposals if p.state in (S.SUCCEEDED, S.FAILED) and p.history]
    finished.sort(key=lambda p: p.history[-1].at)
    pending = ""
    for proposal in finished:
        steps = steps_of(proposal)
        for step in steps:
            if step.result is not ActionResult.SUCCEEDED:
                continue
            if needs_rerun(step.action):
                pending = _said(steps)
            elif completes(step.action):
                pending = ""
    return pending


def _said(steps: Sequence[StepOutcome]) -> str:
    """`step 1 (a) applied and verified; step 2 (b) refused: why` of one run; a change
    run alone, with what happens without its next step."""
    if len(steps) == 1:
        spec = ACTION_SPECS.get(steps[0].action)
        return f"{steps[0].action} applied and verified; {spec.alone if spec else ''}".strip()
    parts = []
    for number, step in enumerate(steps, 1):
        failed = step.detail and step.result is not ActionResult.SUCCEEDED
        why = f": {step.detail}" if failed else ""
        parts.append(f"step {number} ({step.action}) {ended(step.result)}{why}")
    return "; ".join(parts)


_ENDED = {
    ActionResult.SUCCEEDED: "applied and verified",
    ActionResult.REFUSED: "refused",
    ActionResult.FAILED: "failed",
    ActionResult.BUG: "stopped by a pitcrew bug",
    ActionResult.INTERRUPTED: "interrupted by a restart",
    ActionResult.STARTED: "running",
}


def ended(result: ActionResult | None) -> str:
    """How a step ended, in the card's words ("not run": an earlier step stopped it)."""
    return _ENDED.get(result, "not run") if result is not None else "not run"

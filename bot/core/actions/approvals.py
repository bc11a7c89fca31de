"""Proposals and their approval: who may approve what, once, while it is still true.

Why this exists: pitcrew changes clusters only after a person says so, and
that promise rests on a small state machine. An offered action becomes a
`Proposal` (target, parameters, preview, preconditions, expiry); it moves

    offered -> approved -> running -> succeeded | failed
    offered -> rejected | expired          approved -> failed

and every move is a `Transition` in its history (who, when, why). The
approval policy comes from config: approvers by chat user id and group,
optionally per namespace, workload and action, some actions needing two distinct
approvers. At approval time the caller passes fresh live facts and a fresh
preview; a stale proposal is refused with its reason.

The policy itself (who may approve, silence or fetch evidence, where) is
`bot.core.actions.policy`.

Pure: decisions are values (`Approved`, `NeedsSecondApprover`, `Rejected`,
`Refused`) that a chat adapter can explain. Callers apply them; the
compare-and-swap that makes an approval happen once belongs to the store,
which writes a decided proposal only through `steps_to_record`: the stored
`version` must still be the one the decision started from, and every new
step of the history must be a move `LEGAL` lists (or a first of two
approvals, recorded without a move).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from bot.core.actions.order import grouped
from bot.core.actions.policy import DEFAULT_TTL, ApprovalPolicy, ChatUser, may_approve
from bot.core.actions.progress import applied, not_applied
from bot.core.actions.specs import FACTS, preconditions_of
from bot.core.errors import PitcrewError
from bot.core.model import (
    ActionOffer,
    ActionResult,
    Incident,
    ObjectRef,
    PlanStep,
    Proposal,
    ProposalState,
    StepOutcome,
    Transition,
    frozen_map,
)

SYSTEM_ACTOR = "pitcrew"
INTERRUPTED = "interrupted by a restart"

S = ProposalState

# The whole state machine: from each state, where a proposal may go next.
LEGAL: Mapping[ProposalState, frozenset[ProposalState]] = {
    S.OFFERED: frozenset({S.APPROVED, S.REJECTED, S.EXPIRED}),
    S.APPROVED: frozenset({S.RUNNING, S.FAILED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.REJECTED: frozenset(),
    S.EXPIRED: frozenset(),
}
FINAL = frozenset(state for state, nexts in LEGAL.items() if not nexts)


class IllegalTransitionError(ValueError):
    """A move the state machine does not allow; names the proposal and both states."""

    def __init__(self, proposal: Proposal, to_state: ProposalState) -> None:
        self.proposal_id = proposal.id
        self.from_state = proposal.state
        self.to_state = to_state
        allowed = ", ".join(sorted(LEGAL[proposal.state])) or f"nothing, {proposal.state} is final"
        super().__init__(
            f"proposal {proposal.id} cannot go from {proposal.state} to {to_state} "
            f"(from {proposal.state} it can go to: {allowed})"
        )


class StaleProposalError(PitcrewError):
    """A decision made from a proposal that has changed since (another click, approver,
    thread or process wrote it first); the caller decides again on the stored one."""

    def __init__(self, proposal_id: str, stored: int, expected: int) -> None:
        self.proposal_id = proposal_id
        self.stored = stored
        self.expected = expected
        super().__init__(
            f"proposal {proposal_id} is at version {stored}, not {expected}: it changed "
            "since it was read; decide again on the stored proposal"
        )


def steps_to_record(
    stored: Proposal, decided: Proposal, expected_version: int
) -> tuple[Transition, ...]:
    """The steps `decided` adds to the history of `stored` (as stored now), checked:
    raises `StaleProposalError` unless `stored` is still at `expected_version` (the one
    the decision was made from), and `IllegalTransitionError` for a step that is neither
    a move `LEGAL` lists nor a first of two approvals (the proposal stays OFFERED)."""
    if stored.version != expected_version:
        raise StaleProposalError(stored.id, stored.version, expected_version)
    steps = decided.history[len(stored.history) :]
    current = stored
    for step in steps:
        if (
            not _recorded_approval(current, step, decided)
            and step.to_state not in LEGAL[current.state]
        ):
            raise IllegalTransitionError(current, step.to_state)
        current = dataclasses.replace(current, state=step.to_state)
    if current.state is not decided.state or not steps:
        raise IllegalTransitionError(current, decided.state)
    return steps


def _recorded_approval(current: Proposal, step: Transition, decided: Proposal) -> bool:
    return (
        current.state is S.OFFERED
        and step.to_state is S.OFFERED
        and step.from_state is S.OFFERED
        and step.actor in decided.approvals
        and step.actor not in current.approvals
    )


def transition(
    proposal: Proposal,
    to_state: ProposalState,
    actor: str,
    now: datetime,
    reason: str = "",
    outcome: str = "",
    steps: Sequence[StepOutcome] = (),
) -> Proposal:
    """The proposal moved to `to_state`, with the move in its history (`outcome`: of a
    move to FAILED, whether it was refused, failed or a bug; `steps`: how each step of
    a run ended); raises `IllegalTransitionError` for a move `LEGAL` does not list."""
    if to_state not in LEGAL[proposal.state]:
        raise IllegalTransitionError(proposal, to_state)
    step = Transition(to_state, now, actor, reason, proposal.state, str(outcome), tuple(steps))
    return dataclasses.replace(
        proposal,
        state=to_state,
        history=(*proposal.history, step),
        version=proposal.version + 1,
    )


# -- proposals from offers ---------------------------------------------------------


def proposal_id(
    incident_id: str, action: str, params: Mapping[str, Any], then: Sequence[PlanStep] = ()
) -> str:
    """Stable: the same action with the same parameters (and, for a plan, the same
    further steps) on one incident is one proposal."""
    parts = [incident_id, action, repr(sorted(params.items()))]
    parts += [f"{step.action}{sorted(step.params.items())!r}" for step in then]
    text = "\x1f".join(parts)
    return f"p-{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def plan_steps(offers: Sequence[ActionOffer]) -> tuple[PlanStep, ...]:
    """A plan's further steps, from the offers after its first."""
    return tuple(
        PlanStep(o.action, frozen_map(o.params), o.preview, preconditions_of(o.action))
        for o in offers
    )


def actions_of(proposal: Proposal) -> tuple[str, ...]:
    """Every action a proposal runs: its own, then a plan's further steps'."""
    return (proposal.action, *(step.action for step in proposal.then))


def target_of(action: str, params: Mapping[str, Any]) -> ObjectRef | None:
    """The object an action changes, from its parameters."""
    namespace = str(params.get("namespace", ""))
    if "kind" in params and "name" in params:
        return ObjectRef(str(params["kind"]), str(params["name"]), namespace)
    if action == "k8s.delete_pod":
        return ObjectRef("Pod", str(params.get("name", "")), namespace)
    if action == "ray.kill_actor":
        return ObjectRef("RayActor", str(params.get("name", "")), namespace)
    if "submission_id" in params:
        return ObjectRef("RayJobSubmission", str(params["submission_id"]))
    return None


def propose(
    incident: Incident,
    offer: ActionOffer,
    now: datetime,
    ttl: timedelta = DEFAULT_TTL,
    rank: int = 0,
    then: Sequence[ActionOffer] = (),
) -> Proposal:
    """An OFFERED proposal for an action the diagnosis offers, at `rank` among the
    incident's offers (`bot.core.actions.order`), a plan when `then` names the offers
    to run after it; raises ValueError for a withheld one (its reason says why it may
    not be offered)."""
    if not offer.offered:
        raise ValueError(f"{offer.action} is withheld: {offer.reason}")
    steps = plan_steps(then)
    return Proposal(
        id=proposal_id(incident.id, offer.action, offer.params, steps),
        incident_id=incident.id,
        action=offer.action,
        params=frozen_map(offer.params),
        preview=offer.preview,
        state=S.OFFERED,
        created_at=now,
        expires_at=now + ttl,
        target=target_of(offer.action, offer.params),
        preconditions=preconditions_of(offer.action),
        history=(Transition(S.OFFERED, now, SYSTEM_ACTOR, offer.reason),),
        namespace=incident.namespace,
        workload=str(incident.workload) if incident.workload else "",
        playbook=offer.playbook,
        reason=offer.reason,
        rank=rank,
        then=steps,
    )


SUPERSEDED = "superseded: no longer offered"


def supersede(
    proposal: Proposal, live: LiveCheck, stale: str, now: datetime
) -> tuple[Proposal, Proposal | None]:
    """A stale proposal withdrawn (EXPIRED, saying why), and the fresh offer that
    replaces it: the same action with the parameters and preview the live check found,
    when it found them and every precondition holds now (else None: withheld)."""
    withdrawn = transition(proposal, S.EXPIRED, SYSTEM_ACTOR, now, f"superseded: {stale}")
    holds = all(live.facts.get(fact) for fact in proposal.preconditions)
    if live.params is None or live.preview is None or not holds:
        return withdrawn, None
    fresh_id = proposal_id(proposal.incident_id, proposal.action, live.params, proposal.then)
    if fresh_id == proposal.id:
        return withdrawn, None
    fresh = dataclasses.replace(
        proposal,
        id=fresh_id,
        params=frozen_map(live.params),
        preview=live.preview,
        state=S.OFFERED,
        created_at=now,
        expires_at=now + (proposal.expires_at - proposal.created_at),
        target=target_of(proposal.action, live.params),
        history=(Transition(S.OFFERED, now, SYSTEM_ACTOR, f"replaces {proposal.id}: {stale}"),),
        approvals=(),
        version=0,
        supersedes=proposal.supersedes or proposal.id,
    )
    return withdrawn, fresh


def reconcile(
    incident: Incident,
    proposals: Sequence[Proposal],
    now: datetime,
    ttl: timedelta = DEFAULT_TTL,
) -> tuple[Proposal, ...]:
    """After the incident's diagnosis changed: proposals for newly offered actions (each
    ranked by `bot.core.actions.order`; a plan without its first steps that are changes
    applied already, `progress.not_applied`), and OFFERED ones the diagnosis no longer
    offers, expired as superseded (with the reason it now gives). Only new or changed
    proposals are returned."""
    existing = {p.id: p for p in proposals if p.incident_id == incident.id}
    done = applied(existing.values())
    plans = [not_applied(g, done) for g in grouped(incident.diagnosis.actions)]
    groups = {
        proposal_id(incident.id, g[0].action, g[0].params, plan_steps(g[1:])): g for g in plans if g
    }
    changed = [
        propose(incident, group[0], now, ttl, rank, group[1:])
        for rank, (pid, group) in enumerate(groups.items())
        if group[0].offered and pid not in existing
    ]
    firsts = {(g[0].action, repr(sorted(g[0].params.items()))): g[0] for g in groups.values()}
    for pid, proposal in existing.items():
        now_offered = groups.get(proposal.supersedes or pid, (None,))[0]
        if proposal.state is not S.OFFERED or (now_offered and now_offered.offered):
            continue
        first = now_offered or firsts.get((proposal.action, repr(sorted(proposal.params.items()))))
        why = f"{SUPERSEDED} ({first.reason})" if first and not first.offered else SUPERSEDED
        changed.append(transition(proposal, S.EXPIRED, SYSTEM_ACTOR, now, why))
    return tuple(changed)


def _may_approve_all(policy: ApprovalPolicy, user: ChatUser, proposal: Proposal) -> str:
    """Why `user` may not approve every step of the proposal, or "" when they may."""
    namespace, workload = proposal.namespace, proposal.workload
    problems = (may_approve(policy, user, namespace, a, workload) for a in actions_of(proposal))
    return next((problem for problem in problems if problem), "")


def approvals_needed(policy: ApprovalPolicy, proposal: Proposal) -> int:
    """2 when a step of the proposal falls in a `two_approvers` scope, else 1."""
    steps = [(proposal.namespace, action, proposal.workload) for action in actions_of(proposal)]
    return 2 if any(s.covers(*step) for s in policy.two_approvers for step in steps) else 1


# -- decisions ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LiveCheck:
    """Fresh facts about the target, gathered by the caller at approval time. `facts`:
    fact id -> holds now (see `FACTS`); an unknown fact refuses. `preview`: the action's
    preview recomputed from live state (None: not recomputed). `reason`: why a fact does
    not hold, in the target's terms ("RayCluster ml/x does not exist"). `params`: the
    parameters it would be offered with now (None: not recomputed), for a fresh proposal
    when the preview went stale. `diff`: what the executor found it would change, in live
    terms (the diagnose commands show it as the offer's preview). `done`: the target
    carries this proposal's change already (a run a failover cut short): not stale."""

    facts: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))
    preview: str | None = None
    reason: str = ""
    params: Mapping[str, Any] | None = None
    diff: str = ""
    done: str = ""


@dataclass(frozen=True, slots=True)
class Approved:
    proposal: Proposal  # now APPROVED
    approvers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NeedsSecondApprover:
    proposal: Proposal  # still OFFERED, the first approval recorded
    first: str


@dataclass(frozen=True, slots=True)
class Rejected:
    proposal: Proposal  # now REJECTED


@dataclass(frozen=True, slots=True)
class Refused:
    """Nothing approved; `reason` is for the person who clicked. `proposal` is the
    proposal as it should now be stored (EXPIRED when the click came too late)."""

    reason: str
    proposal: Proposal
    changed: bool = False  # True when `proposal` must be written back (it expired)
    stale: str = ""  # why live state no longer matches the offer (see `supersede`)


Decision = Approved | NeedsSecondApprover | Rejected | Refused


def revalidate(proposal: Proposal | PlanStep, live: LiveCheck) -> str:
    """Why the proposal (or a plan's further step) is stale given fresh live facts, or
    "" when it still holds (or is done already: `live.done`)."""
    if live.done:
        return ""
    for fact in proposal.preconditions:
        holds = live.facts.get(fact)
        text = FACTS.get(fact, fact)
        if holds is None:
            return f"cannot confirm that {text}"
        if not holds:
            return live.reason or f"no longer true that {text}"
    if live.preview is not None and live.preview != proposal.preview:
        return f"the target changed since the preview: now {live.preview!r}"
    return ""


def _settled(proposal: Proposal) -> str:
    """Why a proposal that is no longer OFFERED cannot be approved or rejected."""
    last = next((t for t in reversed(proposal.history) if t.to_state is proposal.state), None)
    by = f" by {last.actor}" if last and last.actor and last.actor != SYSTEM_ACTOR else ""
    return {
        S.APPROVED: f"already approved{by}",
        S.RUNNING: "already running",
        S.SUCCEEDED: "already applied",
        S.FAILED: "already tried; it failed",
        S.REJECTED: f"rejected{by}",
        S.EXPIRED: "expired",
    }[proposal.state]


def _expired(proposal: Proposal, now: datetime) -> Refused | None:
    if now < proposal.expires_at:
        return None
    stamp = proposal.expires_at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    expired = transition(proposal, S.EXPIRED, SYSTEM_ACTOR, now, f"not approved by {stamp}")
    return Refused(f"expired at {stamp}", expired, changed=True)


def approve(
    proposal: Proposal,
    user: ChatUser,
    policy: ApprovalPolicy,
    now: datetime,
    live: LiveCheck,
) -> Decision:
    """One approval click: checked for state, expiry, authority, staleness, and (where
    two are needed) a second, different approver.

    A first of two approvals is recorded in `approvals` and in the history as an
    OFFERED -> OFFERED entry (who, when); the state does not move until the second."""
    if proposal.state is not S.OFFERED:
        return Refused(_settled(proposal), proposal)
    late = _expired(proposal, now)
    if late is not None:
        return late
    problem = _may_approve_all(policy, user, proposal)
    if problem:
        return Refused(problem, proposal)
    stale = revalidate(proposal, live)
    if stale:
        return Refused(f"stale: {stale}", proposal, stale=stale)
    needed = approvals_needed(policy, proposal)
    if user.id in proposal.approvals:
        return Refused(
            f"{user.id} already approved; a second, different approver is needed", proposal
        )
    approvals = (*proposal.approvals, user.id)
    if len(approvals) < needed:
        note = Transition(
            S.OFFERED,
            now,
            user.id,
            f"approval {len(approvals)} of {needed}; needs a different approver",
            from_state=S.OFFERED,
        )
        recorded = dataclasses.replace(
            proposal,
            approvals=approvals,
            history=(*proposal.history, note),
            version=proposal.version + 1,
        )
        return NeedsSecondApprover(recorded, user.id)
    reason = "approved by " + " and ".join(approvals)
    approved = transition(proposal, S.APPROVED, user.id, now, reason)
    return Approved(dataclasses.replace(approved, approvals=approvals), approvals)


def reject(
    proposal: Proposal,
    user: ChatUser,
    policy: ApprovalPolicy,
    now: datetime,
    reason: str = "",
) -> Decision:
    """A rejection click; only someone who could approve may reject."""
    if proposal.state is not S.OFFERED:
        return Refused(_settled(proposal), proposal)
    late = _expired(proposal, now)
    if late is not None:
        return late
    problem = _may_approve_all(policy, user, proposal)
    if problem:
        return Refused(problem.replace("an approver for", "allowed to reject"), proposal)
    return Rejected(transition(proposal, S.REJECTED, user.id, now, reason or "rejected"))


def expire_due(proposals: Iterable[Proposal], now: datetime) -> tuple[Proposal, ...]:
    """OFFERED proposals past their expiry, now EXPIRED (for the periodic job)."""
    late = (_expired(p, now) for p in proposals if p.state is S.OFFERED)
    return tuple(refused.proposal for refused in late if refused is not None)


def start(proposal: Proposal, now: datetime, actor: str = SYSTEM_ACTOR) -> Proposal:
    """APPROVED -> RUNNING, as the executor begins."""
    return transition(proposal, S.RUNNING, actor, now, "running")


def finish(
    proposal: Proposal,
    now: datetime,
    result: ActionResult,
    detail: str = "",
    steps: Sequence[StepOutcome] = (),
) -> Proposal:
    """RUNNING -> SUCCEEDED (applied and verified) or FAILED, with what happened, how
    each step ended and, for FAILED, how the run ended (refused, failed or bug)."""
    if result is ActionResult.SUCCEEDED:
        return transition(proposal, S.SUCCEEDED, SYSTEM_ACTOR, now, detail or "verified", "", steps)
    return transition(proposal, S.FAILED, SYSTEM_ACTOR, now, detail or str(result), result, steps)


def recover(proposals: Iterable[Proposal], now: datetime) -> tuple[Proposal, ...]:
    """After a restart of one replica: RUNNING proposals are FAILED as interrupted, never
    run again (a new leader finishes them instead: `bot.daemon.runner.Runner.take_over`)."""
    return tuple(
        transition(p, S.FAILED, SYSTEM_ACTOR, now, INTERRUPTED)
        for p in proposals
        if p.state is S.RUNNING
    )

"""What an executor is given: one `Step`, from an offer or from a proposal.

Why this exists: an executor is asked the same question when an action is offered,
when it is approved and when it runs (`bot.daemon.runner.checked`), and it needs the
same things each time: the action, its parameters, the preview that was shown, and,
once there is one, the proposal (its id makes the change idempotent) and who
approved it (recorded on the target). Before approval those are empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.core.actions.specs import preconditions_of
from bot.core.model import ActionOffer, Proposal, ProposalState


@dataclass(frozen=True, slots=True)
class Step:
    """`preconditions`: the live facts the check must answer (the action's spec's)."""

    action: str
    params: Mapping[str, Any]
    preview: str = ""
    proposal_id: str = ""
    approver: str = ""
    preconditions: tuple[str, ...] = ()

    @classmethod
    def of_offer(cls, offer: ActionOffer, preconditions: tuple[str, ...] | None = None) -> Step:
        facts = preconditions_of(offer.action) if preconditions is None else preconditions
        return cls(offer.action, offer.params, offer.preview, preconditions=facts)

    @classmethod
    def of_proposal(cls, proposal: Proposal) -> Step:
        approver = approver_of(proposal)
        return cls(
            proposal.action,
            proposal.params,
            proposal.preview,
            proposal.id,
            approver,
            proposal.preconditions,
        )


def approver_of(proposal: Proposal) -> str:
    """Who approved the proposal ("a, b" for two), or "" before approval."""
    if proposal.approvals:
        return ", ".join(proposal.approvals)
    approved = (t.actor for t in proposal.history if t.to_state is ProposalState.APPROVED)
    return next(approved, "")

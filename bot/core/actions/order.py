"""The order of a card's offers: which action is the primary (green) button.

Why this exists: offered in the same second, two proposals used to be listed by
their random ids, so a rerun of the same spec could be the green button above the
memory bump that fixes it. The order is a value the core decides when it proposes
(`Proposal.rank`), stored with the proposal and used by every reader (the store's
listing, the card):

1. offered before withheld;
2. the diagnosis's own order: the root cause's actions first, then its symptoms'
   (`bot.core.diagnosis.analysis` lists them most causal first, each playbook's in its order);
3. an action that runs the workload again as it is (`ActionSpec.rerun`) never
   before another offered action: that one changes what the rerun meets (the memory
   limit, a stale actor holding a name), and without it the same run fails again.

When the fix is several steps (bump the template, then recreate the RayJob), the
steps are one plan (`grouped`): one proposal, one Approve, run in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from bot.core.actions.specs import ACTION_SPECS
from bot.core.model import ActionOffer, Proposal


def is_rerun(action: str) -> bool:
    spec = ACTION_SPECS.get(action)
    return spec is not None and spec.rerun


def ordered(offers: Sequence[ActionOffer]) -> tuple[ActionOffer, ...]:
    """The offers in the order the card shows them (see the module's rules)."""
    changes = any(o.offered and not is_rerun(o.action) for o in offers)  # a fix is offered

    def key(item: tuple[int, ActionOffer]) -> tuple[bool, bool, int]:
        index, offer = item
        return (not offer.offered, changes and is_rerun(offer.action), index)

    return tuple(offer for _, offer in sorted(enumerate(offers), key=key))


def grouped(offers: Sequence[ActionOffer]) -> tuple[tuple[ActionOffer, ...], ...]:
    """The offers as the card offers them, in `ordered` order: a change that takes
    effect only on new pods (`ActionSpec.needs_rerun`: the bump, /dev/shm) and an
    offered rerun of the same playbook are one plan, the change first; the rerun is
    then not offered alone. Every other offer is a plan of one step."""
    listed = ordered(offers)
    reruns = [o for o in listed if o.offered and is_rerun(o.action)]
    groups: list[tuple[ActionOffer, ...]] = []
    joined: set[int] = set()
    for offer in listed:
        if id(offer) in joined:
            continue
        spec = ACTION_SPECS.get(offer.action)
        if offer.offered and spec is not None and spec.needs_rerun:
            rerun = next((r for r in reruns if r.playbook == offer.playbook), None)
            if rerun is not None:
                reruns.remove(rerun)
                joined.add(id(rerun))
                groups.append((offer, rerun))
                continue
        groups.append((offer,))
    return tuple(groups)


def rank_key(proposal: Proposal) -> tuple[int, datetime, str]:
    """How proposals are listed everywhere: by the rank the core gave them, then by
    when they were offered (the id only breaks a tie the core never makes)."""
    return (proposal.rank, proposal.created_at, proposal.id)

"""The order of a card's offers: which action is the primary (green) button, and which
offers are one plan.

Why this exists: offered in the same second, two proposals used to be listed by
their random ids, so a rerun of the same spec could be the green button above the
memory bump that fixes it. The order is a value the core decides when it proposes
(`Proposal.rank`), stored with the proposal and used by every reader (the store's
listing, the card):

1. offered before withheld;
2. the diagnosis's own order: the root cause's actions first, then its symptoms'
   (`bot.core.diagnosis.analysis` lists them most causal first, each playbook's in its order);
3. an action that runs the workload again as it is (`ActionSpec.rerun`) or renews its
   pods (`ActionSpec.completes`) never before another offered action: that one changes
   what the rerun meets (the memory limit, a stale actor holding a name), and without
   it the same run fails again.

A change that only helps once the workload runs again (`ActionSpec.needs_rerun`: the
bump, /dev/shm, the kill of a stale actor) and the next step of the same playbook that
brings it into effect (`ActionSpec.completes`: recreate the RayJob, replace the group's
pods, resubmit the job) are one plan (`grouped`): one proposal, one Approve, run in
order. While such a change waits for the live check that decides it (is the actor
stale?), its next step is not offered alone (`held`): resubmitted while the stale
actor holds the name, the job fails again. A change offered without its next step
says what happens then and what would complete it (`remains`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from bot.core.actions.specs import ACTION_SPECS
from bot.core.model import ActionOffer, Proposal


def is_rerun(action: str) -> bool:
    spec = ACTION_SPECS.get(action)
    return spec is not None and spec.rerun


def completes(action: str) -> bool:
    """A next step that brings a change into effect (a rerun, new pods)."""
    spec = ACTION_SPECS.get(action)
    return spec is not None and (spec.completes or spec.rerun)


def needs_rerun(action: str) -> bool:
    spec = ACTION_SPECS.get(action)
    return spec is not None and spec.needs_rerun


def ordered(offers: Sequence[ActionOffer]) -> tuple[ActionOffer, ...]:
    """The offers in the order the card shows them (see the module's rules)."""
    changes = any(o.offered and not completes(o.action) for o in offers)  # a fix is offered

    def key(item: tuple[int, ActionOffer]) -> tuple[bool, bool, int]:
        index, offer = item
        return (not offer.offered, changes and completes(offer.action), index)

    return tuple(offer for _, offer in sorted(enumerate(offers), key=key))


def grouped(offers: Sequence[ActionOffer]) -> tuple[tuple[ActionOffer, ...], ...]:
    """The offers as the card offers them, in `ordered` order: a change that only helps
    once the workload runs again and the first offered next step of the same playbook
    are one plan, the change first; that next step is then not offered alone, and a
    next step that is no rerun (new pods from the template) is only ever offered so.
    Every other offer is a plan of one step."""
    listed = ordered(offers)
    nexts = [o for o in listed if o.offered and completes(o.action)]
    groups: list[tuple[ActionOffer, ...]] = []
    joined: set[int] = set()
    for offer in listed:
        if id(offer) in joined:
            continue
        if offer.offered and needs_rerun(offer.action):
            after = next((r for r in nexts if r.playbook == offer.playbook), None)
            if after is not None:
                nexts.remove(after)
                joined.add(id(after))
                groups.append((offer, after))
                continue
        if not (offer.offered and completes(offer.action) and not is_rerun(offer.action)):
            groups.append((offer,))
    return tuple(groups)


def held(offers: Sequence[ActionOffer]) -> tuple[ActionOffer, ...]:
    """The offers with each offered next step withheld while a change of its playbook
    waits for a live fact (`ActionOffer.pending_fact`): offered alone meanwhile, it
    would run before the change it needs (a resubmission while a stale actor may still
    hold the name). Unchanged offers come back as the same tuple."""
    waiting = {
        o.playbook: o for o in offers if not o.offered and o.pending_fact and needs_rerun(o.action)
    }
    if not waiting:
        return tuple(offers)
    result = []
    for offer in offers:
        change = waiting.get(offer.playbook)
        if change is not None and offer.offered and completes(offer.action):
            why = (
                f"not before {change.action}, which waits for a live check "
                f"({change.reason}): run first, it would meet the same failure"
            )
            offer = dataclasses.replace(offer, offered=False, reason=why)
        result.append(offer)
    return tuple(result)


def remains(action: str, playbook: str, offers: Sequence[ActionOffer]) -> str:
    """For a change offered without its next step: what happens then (its spec's
    `alone`), and the next steps that would complete it but this pitcrew cannot run
    (`ActionOffer.lacks`: the setting to configure); "" for any other action."""
    spec = ACTION_SPECS.get(action)
    if spec is None or not spec.needs_rerun:
        return ""
    missing = [
        f"{o.action} would complete it but is not offered: {o.reason}"
        for o in offers
        if o.playbook == playbook and not o.offered and o.lacks and completes(o.action)
    ]
    return " ".join([spec.alone, *(f"{m}." for m in missing)]).strip()


def rank_key(proposal: Proposal) -> tuple[int, datetime, str]:
    """How proposals are listed everywhere: by the rank the core gave them, then by
    when they were offered (the id only breaks a tie the core never makes)."""
    return (proposal.rank, proposal.created_at, proposal.id)

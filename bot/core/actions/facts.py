"""Live facts an action waits on: which offers wait, how answers merge, and how an
offer is decided once its check answered or did not.

Why this exists: a guard such as "the actor is stale" cannot be decided from the
evidence; `bot.core.diagnosis.analysis` withholds its action and names the unknown fact in
`ActionOffer.pending_fact`. And an offered action is only worth a button when its
preconditions hold now (a node can take the bigger pod, the target still exists).
Whoever may ask the cluster (the daemon's live-check workers, `pitcrew diagnose
--kube/--ray-job`, `/pitcrew diagnose`) checks the offers `awaiting` and
`to_confirm` select, merges what the checks found into one `FactAnswer`, and
assesses again with it: facts decide the guards, an offer whose check failed or
timed out is `settle`d as withheld with the reason, and an offered action whose
precondition the check found false is withheld with the check's reason. The
choice is made on values, never on the reason's wording. Pure: values only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from bot.core.actions.approvals import LiveCheck
from bot.core.actions.order import held
from bot.core.actions.specs import ACTION_SPECS, FACTS, preconditions_of
from bot.core.model import ActionOffer, Diagnosis

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class FactAnswer:
    """What the live checks of some offers found: fact id -> holds; per action why its
    check gave no answer (it failed, or did not answer in time); and per offered action
    (by `offer_key`) why it is withheld now (a precondition the check found false)."""

    facts: Mapping[str, bool] = field(default_factory=lambda: _EMPTY)
    problems: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    refused: Mapping[tuple[str, str], str] = field(default_factory=lambda: MappingProxyType({}))

    def __bool__(self) -> bool:
        return bool(self.facts or self.problems or self.refused)


def offer_key(offer: ActionOffer) -> tuple[str, str]:
    """One key per action and target, the same for rendered and validated params."""
    spec = ACTION_SPECS.get(offer.action)
    values: Mapping[str, Any] = offer.params
    if spec is not None:
        try:
            values = spec.params.check(offer.params).as_dict()
        except ValueError:
            values = offer.params
    return offer.action, repr(sorted((str(k), str(v)) for k, v in values.items()))


def awaiting(diagnosis: Diagnosis) -> tuple[ActionOffer, ...]:
    """The offers withheld only because a live fact is unknown, whose parameters name a
    target (a playbook whose evidence lacked one renders blanks, and nothing can be
    checked for it)."""
    return tuple(
        offer
        for offer in diagnosis.actions
        if not offer.offered and offer.pending_fact and _valid(offer)
    )


def to_confirm(diagnosis: Diagnosis) -> tuple[ActionOffer, ...]:
    """The offered actions with preconditions to confirm on the cluster before a card
    shows their button (`ActionSpec.preconditions`)."""
    return tuple(
        offer for offer in diagnosis.actions if offer.offered and preconditions_of(offer.action)
    )


def refusal(offer: ActionOffer, live: LiveCheck) -> str:
    """Why an offered action is withheld after its check (a precondition false now, in
    the check's words when it gave them), or "" when it stays offered."""
    if not offer.offered:
        return ""
    for fact in preconditions_of(offer.action):
        if live.facts.get(fact) is False:
            return live.reason or f"not true now that {FACTS.get(fact, fact)}"
    return ""


def merged(found: Iterable[Mapping[str, bool]]) -> dict[str, bool]:
    """One answer from several checks: a fact two checks disagree on is false (the
    cautious reading)."""
    facts: dict[str, bool] = {}
    for answer in found:
        for fact, holds in answer.items():
            facts[fact] = facts.get(fact, True) and bool(holds)
    return facts


def combined(answers: Iterable[FactAnswer]) -> FactAnswer:
    """Several answers about one incident as one (facts merged cautiously)."""
    answers = list(answers)
    problems: dict[str, str] = {}
    refused: dict[tuple[str, str], str] = {}
    for answer in answers:
        problems.update(answer.problems)
        refused.update(answer.refused)
    return FactAnswer(merged(a.facts for a in answers), problems, refused)


def settle(diagnosis: Diagnosis, answer: FactAnswer) -> Diagnosis:
    """The diagnosis with the checks' verdicts applied: an offer still waiting on a fact
    whose check gave no answer is withheld, saying why the check did not answer (and
    the next step of its plan with it: `order.held`); an offered action the check
    refused is withheld with the check's reason."""
    if not answer.problems and not answer.refused:
        return diagnosis
    offers = [_cleared(o, answer) for o in held([_settled(o, answer) for o in diagnosis.actions])]
    offers.sort(key=lambda o: not o.offered)
    if tuple(offers) == diagnosis.actions:
        return diagnosis
    return dataclasses.replace(diagnosis, actions=tuple(offers))


def _settled(offer: ActionOffer, answer: FactAnswer) -> ActionOffer:
    if offer.offered:
        refused = answer.refused.get(offer_key(offer))
        return (
            offer if refused is None else dataclasses.replace(offer, offered=False, reason=refused)
        )
    problem = answer.problems.get(offer.action)
    if not offer.pending_fact or problem is None:
        return offer
    return dataclasses.replace(offer, reason=f"{offer.reason} ({problem})")


def _cleared(offer: ActionOffer, answer: FactAnswer) -> ActionOffer:
    """A waiting offer whose check gave no answer waits no more (it is not asked again)."""
    if offer.pending_fact and offer.action in answer.problems:
        return dataclasses.replace(offer, pending_fact="")
    return offer


def _valid(offer: ActionOffer) -> bool:
    spec = ACTION_SPECS.get(offer.action)
    if spec is None:
        return False
    try:
        spec.params.check(offer.params)
    except ValueError:
        return False
    return True

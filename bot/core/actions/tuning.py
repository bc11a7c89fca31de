"""Operator settings applied to the actions a diagnosis offers.

Why this exists: playbooks say *which* action fits a failure and fill in its
target from the evidence; how far to go is the operator's call and lives in
the config (`actions.bump_memory.factor`/`cap`, the GPU pool label, the
resubmit retry bound), which the app turns into `Overrides` (parameter values per
action id: `bot.app.settings.actions.ActionSettings.overrides`). This module writes those
values into the offers and recomputes their previews, so the proposal people approve
shows exactly what would run. Pure: values in, values out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from bot.core import quantity
from bot.core.actions import memory_evidence
from bot.core.actions.specs import ACTION_SPECS
from bot.core.model import ActionOffer, Diagnosis, frozen_map

Overrides = Mapping[str, Mapping[str, Any]]
"""Parameter values the operator imposes, per action id."""


def tune(diagnosis: Diagnosis, values: Overrides) -> Diagnosis:
    """The diagnosis with configured parameters in its offered actions (previews redone).

    An offer whose parameters would no longer validate keeps the playbook's values."""
    offers = tuple(_tuned(offer, values.get(offer.action, {})) for offer in diagnosis.actions)
    if offers == diagnosis.actions:
        return diagnosis
    return dataclasses.replace(diagnosis, actions=offers)


def _tuned(offer: ActionOffer, values: Mapping[str, Any]) -> ActionOffer:
    spec = ACTION_SPECS.get(offer.action)
    if not offer.offered or spec is None or not values:
        return offer
    known = {k: v for k, v in values.items() if k in spec.params.names()}
    params = {**offer.params, **known}
    if params == dict(offer.params):
        return offer
    try:
        model = spec.params.check(params)
        preview = spec.preview(model)
    except ValueError:  # pydantic's ValidationError among them
        return offer
    return dataclasses.replace(offer, params=frozen_map(model.as_dict()), preview=preview)


def sized(
    diagnosis: Diagnosis,
    evidence: memory_evidence.MemoryEvidence | None,
    headroom: float,
    unmeasured: str = "",
) -> Diagnosis:
    """The memory bumps sized from observed usage: the group's peak × `headroom`, rounded
    up to a Gi, within each offer's cap, with where the number came from. Without usable
    evidence the offer keeps the configured factor and says why (`unmeasured`)."""
    offers = tuple(_sized(o, evidence, headroom, unmeasured) for o in diagnosis.actions)
    if offers == diagnosis.actions:
        return diagnosis
    return dataclasses.replace(diagnosis, actions=offers)


def _sized(
    offer: ActionOffer,
    evidence: memory_evidence.MemoryEvidence | None,
    headroom: float,
    unmeasured: str,
) -> ActionOffer:
    if offer.action != "k8s.bump_memory" or not offer.offered:
        return offer
    params = dict(offer.params)
    current = str(params.get("current") or "")
    if not current and evidence is not None and evidence.killed.limit:
        current = quantity.format_bytes(evidence.killed.limit)
    sizing = None
    if evidence is not None and current:
        cap = quantity.parse_bytes(str(params.get("cap") or "512Gi"))
        sizing = memory_evidence.size_limit(evidence, quantity.parse_bytes(current), headroom, cap)
    if sizing is None:
        return _tuned(offer, {"limit": "", "basis": unmeasured})
    limit = quantity.format_bytes(sizing.limit)
    return _tuned(offer, {"current": current, "limit": limit, "basis": sizing.basis})

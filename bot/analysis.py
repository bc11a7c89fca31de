"""From hits to a diagnosis: findings per playbook, root cause by precedence, and
which actions are offered or withheld, and why.

Pure: values in, values out. Live facts about the cluster (is the actor
detached? does the GPU pool have room?) come in as a mapping; an unknown fact
withholds the action that needs it rather than guessing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jinja2
from pydantic import ValidationError

from bot.actions.catalog import CATALOG, FACTS
from bot.classify import Hit
from bot.model import (
    ActionOffer,
    Diagnosis,
    Evidence,
    Finding,
    RankedFinding,
    Role,
    Severity,
    frozen_map,
)
from bot.playbooks import (
    ActionRule,
    CaptureGuard,
    EvidenceGuard,
    FactGuard,
    Library,
    NoEvidenceGuard,
    PrimaryGuard,
)
from bot.taxonomy import Category, rank
from bot.templating import compile_template, render

Facts = Mapping[str, bool]


@dataclass(frozen=True)
class _Candidate:
    hit: Hit
    category: Category


def findings_from_hits(hits: Iterable[Hit]) -> list[Finding]:
    """One finding per playbook (and per reported category), weak and suppressed hits resolved."""
    hits = list(hits)
    strong = {h.sig.loaded.playbook.category for h in hits if not h.sig.signature.weak}
    candidates: list[_Candidate] = []
    for hit in hits:
        category = hit.sig.loaded.playbook.category
        if hit.sig.signature.weak and category not in strong:
            if hit.sig.signature.otherwise is None:
                continue
            category = hit.sig.signature.otherwise
        candidates.append(_Candidate(hit, category))
    present = {c.category for c in candidates}
    kept = [
        c
        for c in candidates
        if not (set(c.hit.sig.signature.suppressed_by) & (present - {c.category}))
    ]
    groups: dict[tuple[str, Category], list[Hit]] = {}
    for candidate in kept:
        key = (candidate.hit.sig.playbook_id, candidate.category)
        groups.setdefault(key, []).append(candidate.hit)
    return [_merge(category, group) for (_, category), group in groups.items()]


def _merge(category: Category, hits: list[Hit]) -> Finding:
    hits = sorted(hits, key=lambda h: h.sig.signature.weak)
    first = hits[0]
    playbook = first.sig.loaded.playbook
    captures: dict[str, str] = {}
    fields: dict[str, str] = {}
    evidence: list[Evidence] = []
    limit = playbook.evidence.max_lines
    for hit in hits:
        for key, value in hit.captures.items():
            captures.setdefault(key, value)
        for key, value in hit.signal.fields.items():
            fields.setdefault(key, value)
        for text, line in hit.evidence:
            item = Evidence(text, hit.signal.source, hit.signal.origin, line)
            if len(evidence) < limit and item not in evidence:
                evidence.append(item)
    workload = next((h.signal.workload for h in hits if h.signal.workload), None)
    obj = next((h.signal.obj for h in hits if h.signal.obj), None)
    return Finding(
        playbook=playbook.id,
        category=category,
        severity=Severity(playbook.severity),
        title=playbook.title,
        signature=first.sig.signature.name,
        source=first.signal.source,
        captures=frozen_map(captures),
        evidence=tuple(evidence),
        count=sum(h.count for h in hits),
        weak=all(h.sig.signature.weak for h in hits),
        obj=obj,
        workload=workload,
        fields=frozen_map(fields),
        time=first.signal.time,
    )


def rank_findings(findings: Iterable[Finding]) -> tuple[RankedFinding, ...]:
    """The most causal finding is primary (TAXONOMY.md §3.2); ties go to severity, then count."""
    ordered = sorted(
        findings,
        key=lambda f: (rank(f.category), f.weak, -f.severity.weight, -f.count, f.playbook),
    )
    return tuple(
        RankedFinding(f, Role.PRIMARY if i == 0 else Role.SECONDARY) for i, f in enumerate(ordered)
    )


def diagnose(hits: Iterable[Hit], library: Library, facts: Facts | None = None) -> Diagnosis:
    ranked = rank_findings(findings_from_hits(hits))
    actions = _offers(ranked, library, facts or {})
    return Diagnosis(ranked, actions, _explain(ranked, actions, library))


# -- actions ------------------------------------------------------------------


def _offers(
    ranked: tuple[RankedFinding, ...], library: Library, facts: Facts
) -> tuple[ActionOffer, ...]:
    categories = {r.finding.category for r in ranked}
    primary = ranked[0].finding if ranked else None
    offers: list[ActionOffer] = []
    seen: set[tuple[str, str]] = set()
    for item in ranked:
        playbook = library.by_id[item.finding.playbook].playbook
        for rule in playbook.actions:
            offer = _offer(rule, item, primary, categories, facts)
            key = (offer.action, repr(sorted(offer.params.items())))
            if key in seen:
                continue
            seen.add(key)
            offers.append(offer)
    offers.sort(key=lambda o: not o.offered)
    return tuple(offers)


def _offer(
    rule: ActionRule,
    item: RankedFinding,
    primary: Finding | None,
    categories: set[Category],
    facts: Facts,
) -> ActionOffer:
    finding = item.finding
    params, problem = _render_params(rule, finding)
    reason = problem or _first_failed_guard(rule, item, primary, categories, facts, params)
    preview = ""
    if not reason:
        spec = CATALOG[rule.action]
        try:
            model = spec.params.model_validate(params)
            params = model.model_dump()
            preview = spec.preview(model)
        except (ValidationError, ValueError) as error:
            reason = f"parameters are not valid: {_first_error(error)}"
    return ActionOffer(
        action=rule.action,
        params=frozen_map(params),
        offered=not reason,
        reason=reason or _why_offered(rule, finding),
        playbook=finding.playbook,
        preview=preview,
    )


def _why_offered(rule: ActionRule, finding: Finding) -> str:
    return f"{CATALOG[rule.action].summary} ({finding.category})"


def _first_error(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        return f"{loc}: {first['msg']}" if loc else str(first["msg"])
    return str(error)


def template_context(finding: Finding) -> dict[str, Any]:
    ref = finding.workload or finding.obj
    return {
        "captures": dict(finding.captures),
        "fields": dict(finding.fields),
        "obj": finding.obj,
        "workload": finding.workload,
        "namespace": ref.namespace if ref else finding.fields.get("namespace", ""),
        "count": finding.count,
        "category": str(finding.category),
    }


def _render_params(rule: ActionRule, finding: Finding) -> tuple[dict[str, Any], str]:
    context = template_context(finding)
    params: dict[str, Any] = {}
    for key, value in rule.params.items():
        if not isinstance(value, str):
            params[key] = value
            continue
        try:
            params[key] = render(compile_template(value), context)
        except jinja2.UndefinedError:
            return params, f"the evidence does not name the {key} to act on"
    return params, ""


def _first_failed_guard(
    rule: ActionRule,
    item: RankedFinding,
    primary: Finding | None,
    categories: set[Category],
    facts: Facts,
    params: Mapping[str, Any],
) -> str:
    finding = item.finding
    values = {**finding.fields, **finding.captures}
    for guard in rule.guards:
        if isinstance(guard, PrimaryGuard) and item.role is not Role.PRIMARY:
            assert primary is not None
            return guard.reason or (
                f"{finding.category} is a symptom here; the root cause is {primary.category}"
            )
        if isinstance(guard, EvidenceGuard) and not categories & set(guard.evidence_of):
            return guard.reason or f"no evidence of {' or '.join(guard.evidence_of)}"
        if isinstance(guard, NoEvidenceGuard):
            found = sorted(categories & set(guard.no_evidence_of))
            if found:
                return guard.reason or f"not for {', '.join(found)}"
        if isinstance(guard, CaptureGuard):
            value = values.get(guard.capture, "")
            if guard.matches is not None and not _search(guard.matches, value):
                return _fill(guard.reason, values)
            if guard.not_matches is not None and _search(guard.not_matches, value):
                return _fill(guard.reason, values)
        if isinstance(guard, FactGuard):
            known = facts.get(guard.fact)
            if known is None:
                return f"needs a live check that {FACTS[guard.fact]}"
            if not known:
                return guard.reason or f"it is not true that {FACTS[guard.fact]}"
    return ""


def _search(pattern: str, value: str) -> bool:
    import re

    return re.search(pattern, value) is not None


def _fill(reason: str, values: Mapping[str, str]) -> str:
    try:
        return reason.format_map(dict(values))
    except (KeyError, IndexError, ValueError):
        return reason


# -- explanation ---------------------------------------------------------------


def _explain(
    ranked: tuple[RankedFinding, ...], actions: tuple[ActionOffer, ...], library: Library
) -> str:
    if not ranked:
        return "No failure found: nothing in the input matches a playbook."
    parts: list[str] = []
    for item in ranked:
        finding = item.finding
        template = compile_template(library.by_id[finding.playbook].playbook.diagnosis)
        context = template_context(finding) | {
            "role": str(item.role),
            "primary": str(ranked[0].finding.category),
        }
        try:
            text = render(template, context)
        except jinja2.UndefinedError as error:
            text = f"{finding.title} ({error.message})"
        label = "Root cause" if item.role is Role.PRIMARY else "Also seen"
        parts.append(f"{label}: {text}")
    return "\n".join(parts)

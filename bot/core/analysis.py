"""From hits to a diagnosis: findings per playbook, root cause by precedence, and
which actions are offered or withheld, and why.

Pure: values in, values out. Live facts about the cluster (is the actor
detached? does the GPU pool have room?) come in as a mapping; an unknown fact
withholds the action that needs it rather than guessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2
from pydantic import ValidationError

from bot.core.actions.catalog import CATALOG, FACTS
from bot.core.engine import Hit
from bot.core.model import (
    ActionOffer,
    Diagnosis,
    Evidence,
    Finding,
    RankedFinding,
    Role,
    Severity,
    frozen_map,
)
from bot.core.playbooks import (
    ActionRule,
    CaptureGuard,
    EvidenceGuard,
    FactGuard,
    Library,
    NoEvidenceGuard,
    PrimaryGuard,
)
from bot.core.taxonomy import Category, rank
from bot.core.templating import compile_template, render, render_or

Facts = Mapping[str, bool]
LIVE_CHECK = "needs a live check"
"""How an action withheld only because a fact it needs is unknown begins its reason."""


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
    kept = _unsuppressed(candidates)
    groups: dict[tuple[str, Category], list[Hit]] = {}
    for candidate in kept:
        key = (candidate.hit.sig.playbook_id, candidate.category)
        groups.setdefault(key, []).append(candidate.hit)
    return [_merge(category, group) for (_, category), group in groups.items()]


def _unsuppressed(candidates: list[_Candidate]) -> list[_Candidate]:
    """Drop candidates whose `suppressed_by` categories are found, where only candidates
    that themselves survive can suppress (so A hides B, B hides C, leaves A and C)."""
    dropped: set[int] = set()
    for _ in range(_MAX_SUPPRESSION_ROUNDS):
        present = {c.category for i, c in enumerate(candidates) if i not in dropped}
        now_dropped = {
            i
            for i, c in enumerate(candidates)
            if set(c.hit.sig.signature.suppressed_by) & (present - {c.category})
        }
        if now_dropped == dropped:
            break
        dropped = now_dropped
    return [c for i, c in enumerate(candidates) if i not in dropped]


_MAX_SUPPRESSION_ROUNDS = 8


def observations(hits: Sequence[Hit]) -> int:
    """How many things were observed: an Event or status matched by several signatures
    counts once, and so does a log line; lines beyond the evidence kept are counted by
    the signature that saw the most."""
    by_signal: dict[int, list[Hit]] = {}
    for hit in hits:
        by_signal.setdefault(id(hit.signal), []).append(hit)
    total = 0
    for group in by_signal.values():
        most = max(h.count for h in group)
        if group[0].signal.text or not all(h.count == len(h.evidence) for h in group):
            total += most
        else:
            total += len({line for h in group for _, line in h.evidence}) or most
    return total


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
        count=observations(hits),
        weak=all(h.sig.signature.weak for h in hits),
        obj=obj,
        workload=workload,
        fields=frozen_map(fields),
        time=first.signal.time,
        reason=first.signal.reason,
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
    """The verdict on one body of evidence (one `pitcrew diagnose` run)."""
    hits = list(hits)
    shared = _first_values(h.signal.fields for h in hits)
    return assess(findings_from_hits(hits), library, facts, shared)


def assess(
    findings: Iterable[Finding],
    library: Library,
    facts: Facts | None = None,
    shared_fields: Mapping[str, str] | None = None,
) -> Diagnosis:
    """Rank findings, decide each action, explain. Findings of playbooks the library does
    not hold are ranked but offer nothing. Action parameters may draw on fields of any
    finding (a resubmit caused by an OOM still needs the job id the RayJob status gave)."""
    ranked = rank_findings(findings)
    shared = _first_values([*(r.finding.fields for r in ranked), shared_fields or {}])
    actions = _offers(ranked, library, facts or {}, shared)
    return Diagnosis(ranked, actions, _explain(ranked, library, shared))


def _first_values(mappings: Iterable[Mapping[str, str]]) -> dict[str, str]:
    merged: dict[str, str] = {}
    for mapping in mappings:
        for key, value in mapping.items():
            if value:
                merged.setdefault(key, value)
    return merged


# -- actions ------------------------------------------------------------------


def _offers(
    ranked: tuple[RankedFinding, ...], library: Library, facts: Facts, shared: Mapping[str, str]
) -> tuple[ActionOffer, ...]:
    """Every action the findings' playbooks name, most causal first; an action withheld
    once is not listed again for a less causal finding."""
    categories = {r.finding.category for r in ranked}
    primary = ranked[0].finding if ranked else None
    offers: list[ActionOffer] = []
    for item in ranked:
        loaded = library.by_id.get(item.finding.playbook)
        if loaded is None:
            continue
        for rule in loaded.playbook.actions:
            offer = _offer(rule, item, primary, categories, facts, shared)
            if not _already_listed(offer, offers):
                offers.append(offer)
    offers.sort(key=lambda o: not o.offered)
    return tuple(offers)


def _already_listed(offer: ActionOffer, offers: list[ActionOffer]) -> bool:
    for listed in offers:
        if listed.action != offer.action:
            continue
        if not offer.offered or dict(listed.params) == dict(offer.params):
            return True
    return False


def _offer(
    rule: ActionRule,
    item: RankedFinding,
    primary: Finding | None,
    categories: set[Category],
    facts: Facts,
    shared: Mapping[str, str],
) -> ActionOffer:
    finding = item.finding
    context = template_context(finding, shared)
    reason, pending = _first_failed_guard(rule, item, primary, categories, facts, context)
    params, problem = _render_params(rule, context)
    reason = reason or problem
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
        reason=reason or f"{CATALOG[rule.action].summary} ({finding.category})",
        playbook=finding.playbook,
        preview=preview,
        pending_fact=pending if reason else "",
    )


def _first_error(error: Exception) -> str:
    if isinstance(error, ValidationError):
        first = error.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        return f"{loc}: {first['msg']}" if loc else str(first["msg"])
    return str(error)


def template_context(
    finding: Finding, shared: Mapping[str, str] | None = None, primary: str = ""
) -> dict[str, Any]:
    """What playbook templates (diagnosis, action params) can name."""
    ref = finding.workload or finding.obj
    fields = {**(shared or {}), **finding.fields}
    return {
        "captures": dict(finding.captures),
        "fields": fields,
        "reason": finding.reason,
        "obj": finding.obj,
        "workload": finding.workload,
        "namespace": ref.namespace if ref else fields.get("namespace", ""),
        "count": finding.count,
        "category": str(finding.category),
        "primary": primary or str(finding.category),
    }


def _render_params(rule: ActionRule, context: dict[str, Any]) -> tuple[dict[str, Any], str]:
    params: dict[str, Any] = {}
    problem = ""
    for key, value in rule.params.items():
        if not isinstance(value, str):
            params[key] = value
            continue
        try:
            params[key] = render(compile_template(value), context)
        except jinja2.UndefinedError:
            problem = problem or f"the evidence does not name the {key} to act on"
        except Exception as error:  # a template that fails or runs over its budget
            problem = problem or f"the {key} could not be rendered: {error}"
    return params, problem


def _first_failed_guard(
    rule: ActionRule,
    item: RankedFinding,
    primary: Finding | None,
    categories: set[Category],
    facts: Facts,
    context: dict[str, Any],
) -> tuple[str, str]:
    """Why the first guard that fails does ("" when all hold), and the fact it waits on
    when it fails only because that live fact is unknown."""
    finding = item.finding
    values: dict[str, str] = {**context["fields"], **finding.captures}
    values.setdefault("category", str(finding.category))
    values["primary"] = str(primary.category) if primary else ""
    for guard in rule.guards:
        failed = _guard_failure(guard, item, categories, facts, values)
        if failed:
            unknown = guard.fact if isinstance(guard, FactGuard) and guard.fact not in facts else ""
            return _fill(failed, values), unknown
    return "", ""


def _guard_failure(
    guard: Any,
    item: RankedFinding,
    categories: set[Category],
    facts: Facts,
    values: Mapping[str, str],
) -> str:
    """Why `guard` fails for this finding, or "" when it holds."""
    finding = item.finding
    if isinstance(guard, PrimaryGuard) and item.role is not Role.PRIMARY:
        return guard.reason or "{category} is a symptom here; the root cause is {primary}"
    if isinstance(guard, EvidenceGuard) and not categories & set(guard.evidence_of):
        return guard.reason or f"no evidence of {' or '.join(guard.evidence_of)}"
    if isinstance(guard, NoEvidenceGuard):
        found = sorted(categories & set(guard.no_evidence_of) - {finding.category})
        if found:
            return guard.reason or f"not for {', '.join(found)}"
    if isinstance(guard, CaptureGuard):
        value = values.get(guard.capture, "")
        if guard.matches is not None and re.search(guard.matches, value) is None:
            return guard.reason
        if guard.not_matches is not None and re.search(guard.not_matches, value) is not None:
            return guard.reason
    if isinstance(guard, FactGuard):
        known = facts.get(guard.fact)
        if known is None:
            return f"{LIVE_CHECK} that {FACTS[guard.fact]}"
        if not known:
            return guard.reason or f"it is not true that {FACTS[guard.fact]}"
    return ""


def _fill(reason: str, values: Mapping[str, str]) -> str:
    """Fill `{name}` placeholders from captures and fields; leave unknown ones as written."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), reason)


# -- explanation ---------------------------------------------------------------


def _explain(ranked: tuple[RankedFinding, ...], library: Library, shared: Mapping[str, str]) -> str:
    if not ranked:
        return "No failure found: nothing in the input matches a playbook."
    primary = str(ranked[0].finding.category)
    parts: list[str] = []
    for item in ranked:
        label = "Root cause" if item.role is Role.PRIMARY else "Also seen"
        parts.append(f"{label}: {_finding_text(item, library, shared, primary)}")
    return "\n".join(parts)


def _finding_text(
    item: RankedFinding, library: Library, shared: Mapping[str, str], primary: str
) -> str:
    finding = item.finding
    loaded = library.by_id.get(finding.playbook)
    if loaded is None:
        return finding.title
    context = template_context(finding, shared, primary) | {"role": str(item.role)}

    def plain(error: Exception) -> str:
        if isinstance(error, jinja2.UndefinedError):
            return f"{finding.title} ({error.message})"
        return f"{finding.title} (the playbook's text could not be rendered: {error})"

    return render_or(compile_template(loaded.playbook.diagnosis), context, plain)

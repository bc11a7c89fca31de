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

from bot.core import linear
from bot.core.diagnosis.classifier import Hit
from bot.core.model import (
    ActionOffer,
    Diagnosis,
    Evidence,
    Finding,
    RankedFinding,
    RenderFailure,
    Role,
    Severity,
    frozen_map,
)
from bot.core.playbooks.library import (
    ActionRule,
    CaptureGuard,
    EvidenceGuard,
    FactGuard,
    Library,
    LoadedPlaybook,
    NoEvidenceGuard,
    PrimaryGuard,
)
from bot.core.taxonomy import CATCH_ALL, EFFECTS, FOLLOWS, Category, rank, symptom_why

Facts = Mapping[str, bool]
LIVE_CHECK = "needs a live check"
"""How an action withheld only because a fact it needs is unknown begins its reason."""


@dataclass(frozen=True)
class _Candidate:
    hit: Hit
    category: Category


def findings_from_hits(hits: Iterable[Hit]) -> list[Finding]:
    """One finding per playbook (and per reported category), weak hits resolved. A hit
    whose `suppressed_by` cause is found too is that cause's symptom when its class is
    one of the usual effects (a RayJob Failed wrapper, an NCCL failure, a worker
    death): a playbook all of whose hits are explained so becomes a symptom finding
    (unless only weak signatures without `otherwise` matched). Otherwise the
    suppression says the evidence was misread (exit 137 of a probe kill is no OOM),
    and the hit is dropped."""
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
    explained = _explained(candidates)
    groups: dict[tuple[str, Category], list[tuple[Hit, bool]]] = {}
    for index, candidate in enumerate(candidates):
        key = (candidate.hit.sig.playbook_id, candidate.category)
        groups.setdefault(key, []).append((candidate.hit, index in explained))
    findings: list[Finding] = []
    for (_, category), members in groups.items():
        standing = [hit for hit, gone in members if not gone]
        if standing:
            findings.append(_merge(category, standing))
        elif category in EFFECTS and any(_reportable(hit, category) for hit, _ in members):
            kept = [hit for hit, _ in members if not _catch_all(hit, category)]
            findings.append(_merge(category, kept))
    return findings


def _reportable(hit: Hit, category: Category) -> bool:
    """Strong, or weak with an `otherwise` (a weak match its playbook reports alone), but
    the catch-all's likely evidence, nor its explaining cause's own (`same_event`)."""
    if hit.sig.signature.same_event:
        return False
    if not hit.sig.signature.weak:
        return True
    return hit.sig.signature.otherwise is not None and not _catch_all(hit, category)


def _catch_all(hit: Hit, category: Category) -> bool:
    """The catch-all's likely evidence (a user's exception, the entrypoint's exit code):
    dropped, not kept as a symptom, once another class explains it
    (docs/failure-classes.md, "Precedence"); so is a match that was its explaining
    cause's own evidence (`same_event`)."""
    return (category is CATCH_ALL and hit.sig.signature.weak) or hit.sig.signature.same_event


def _explained(candidates: list[_Candidate]) -> set[int]:
    """Candidates whose `suppressed_by` categories are found, where only candidates that
    are not themselves explained count as causes (so A explains B, B explains C, leaves
    A and C standing)."""
    explained: set[int] = set()
    for _ in range(_MAX_SUPPRESSION_ROUNDS):
        present = {c.category for i, c in enumerate(candidates) if i not in explained}
        now_explained = {
            i
            for i, c in enumerate(candidates)
            if set(c.hit.sig.signature.suppressed_by) & (present - {c.category})
        }
        if now_explained == explained:
            break
        explained = now_explained
    return explained


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
    explained_by: set[Category] = set.intersection(
        *(set(h.sig.signature.suppressed_by) for h in hits)
    )
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
        explained_by=tuple(sorted(explained_by, key=rank)),
    )


# -- ranking: root cause, symptoms, other findings --------------------------------


def rank_findings(
    findings: Iterable[Finding], facts: Facts | None = None
) -> tuple[RankedFinding, ...]:
    """The most causal finding is primary (docs/failure-classes.md, "Precedence"):
    explained findings after the rest, weak after strong, then precedence, severity,
    count. Its pairs reorder (a clash after the worker death of the same job) unless a
    live check found the clash's holder stale. Each secondary that the root cause
    explains says why."""
    items = list(findings)
    causes = _explaining_causes(items)
    order = sorted(
        range(len(items)),
        key=lambda i: (
            i in causes,
            items[i].weak,
            rank(items[i].category),
            -items[i].severity.weight,
            -items[i].count,
            items[i].playbook,
        ),
    )
    order = _apply_follows(order, items, causes, facts or {})
    if not order:
        return ()
    primary = items[order[0]].category
    ranked = [RankedFinding(items[order[0]], Role.PRIMARY)]
    for index in order[1:]:
        finding = items[index]
        cause = causes.get(index)
        if cause is not None and primary in finding.explained_by:
            cause = primary
        cause = cause or _effect_of(finding.category, primary)
        why = symptom_why(finding.category, cause) if cause else ""
        ranked.append(RankedFinding(finding, Role.SECONDARY, cause, why))
    return tuple(ranked)


def _explaining_causes(items: list[Finding]) -> dict[int, Category]:
    """Index of each finding explained by another finding (its `explained_by`) -> the
    most causal such cause; only findings not explained themselves explain others."""
    causes: dict[int, Category] = {}
    for _ in range(_MAX_SUPPRESSION_ROUNDS):
        present = {f.category for i, f in enumerate(items) if i not in causes}
        now: dict[int, Category] = {}
        for i, finding in enumerate(items):
            if finding.category not in EFFECTS:
                continue
            found = [c for c in finding.explained_by if c in present and c != finding.category]
            if found:
                now[i] = min(found, key=rank)
        if now == causes:
            break
        causes = now
    return causes


def _effect_of(category: Category, primary: Category) -> Category | None:
    """`primary`, when `category` is one of the usual effects ranked below it (a
    worker death is no effect of a clash that a live check found to be a cause)."""
    if (primary, category) in FOLLOWS:
        return None
    if category in EFFECTS and rank(category) > rank(primary):
        return primary
    for later, earlier in FOLLOWS:
        if category == later and primary == earlier:
            return primary
    return None


def holder_is_stale(facts: Facts) -> bool:
    """A live check resolved the clash's holder: one detached or finished-job actor in an
    explicit namespace (`named_actor_conflict` in docs/failure-classes.md), so the clash
    is a cause of its own."""
    return facts.get("ray.holder_explicit") is True and facts.get("ray.actor_stale") is True


def _apply_follows(
    order: list[int], items: list[Finding], causes: Mapping[int, Category], facts: Facts
) -> list[int]:
    if not order or holder_is_stale(facts):
        return order
    head = items[order[0]]
    for later, earlier in FOLLOWS:
        if head.category != later:
            continue
        first = next((i for i in order if items[i].category == earlier and i not in causes), None)
        if first is not None and items[first].weak <= head.weak:
            return [first, *(i for i in order if i != first)]
    return order


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
    ranked = rank_findings(findings, facts)
    shared = _first_values([*(r.finding.fields for r in ranked), shared_fields or {}])
    actions = _offers(ranked, library, facts or {}, shared)
    text, unrendered = _explain(ranked, library, shared)
    return Diagnosis(ranked, actions, text, unrendered, *_guidance(ranked, library, text))


def _guidance(
    ranked: tuple[RankedFinding, ...], library: Library, text: str
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The root cause's own explanation (the first line of `text`, its label removed), and
    its playbook's remediation steps and runbook links."""
    if not ranked or ranked[0].role is not Role.PRIMARY:
        return "", (), ()
    first = text.split("\n", 1)[0]
    cause = first.split(": ", 1)[1] if ": " in first else first
    loaded = library.by_id.get(ranked[0].finding.playbook)
    if loaded is None:
        return cause, (), ()
    book = loaded.playbook
    return cause, tuple(book.remediation), tuple(book.runbook)


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
    once is not listed again for a less causal finding. Guards see the findings that
    stand on their own, not those their `suppressed_by` cause explains."""
    categories = {r.finding.category for r in ranked if r.symptom_of not in r.finding.explained_by}
    primary = ranked[0].finding if ranked else None
    offers: list[ActionOffer] = []
    for item in ranked:
        loaded = library.by_id.get(item.finding.playbook)
        if loaded is None:
            continue
        for rule in loaded.playbook.actions:
            awaiting = _awaits_holder_check(rule, item, primary, facts)
            offer = _offer(rule, item, primary, categories, facts, shared, library, awaiting)
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


def _awaits_holder_check(
    rule: ActionRule, item: RankedFinding, primary: Finding | None, facts: Facts
) -> bool:
    """A clash ranked after its worker death only for want of the live check that could
    show its holder stale (the precedence's pair): the action that needs that check is
    not withheld as a symptom's until the check has answered."""
    if item.role is Role.PRIMARY or "ray.holder_explicit" in facts:
        return False
    demoted = (item.finding.category, item.symptom_of) in FOLLOWS
    needs = any(isinstance(g, FactGuard) and g.fact == "ray.holder_explicit" for g in rule.guards)
    return demoted and needs and primary is not None and primary.category == item.symptom_of


def _offer(
    rule: ActionRule,
    item: RankedFinding,
    primary: Finding | None,
    categories: set[Category],
    facts: Facts,
    shared: Mapping[str, str],
    library: Library,
    awaiting: bool = False,
) -> ActionOffer:
    finding = item.finding
    context = template_context(finding, shared)
    refusal = _strength_refusal(finding)
    reason, pending = _first_failed_guard(rule, item, primary, categories, facts, context, awaiting)
    reason, pending = (refusal, "") if refusal else (reason, pending)
    if not reason and item.symptom_of is not None and not awaiting:
        reason = f"{finding.category} is a symptom of {item.symptom_of}: {item.why}"
    params, problem = _render_params(rule, context, library)
    reason = reason or problem
    preview = ""
    if not reason:
        spec = rule.spec
        try:
            model = spec.params.check(params)
            params = model.as_dict()
            preview = spec.preview(model)
        except ValueError as error:  # pydantic's ValidationError among them
            reason = f"parameters are not valid: {_first_error(error)}"
    return ActionOffer(
        action=rule.action,
        params=frozen_map(params),
        offered=not reason,
        reason=reason or f"{rule.spec.summary} ({finding.category})",
        playbook=finding.playbook,
        preview=preview,
        pending_fact=pending if reason else "",
    )


def _first_error(error: Exception) -> str:
    from pydantic import ValidationError  # loaded with the model that raised it

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


def _render(source: str, library: Library, context: dict[str, Any]) -> str:
    """A playbook's template rendered. Jinja is imported here, the first time a finding
    is rendered: a `pitcrew diagnose` that finds nothing never loads it."""
    from bot.core.playbooks.templating import compile_template, render

    return render(compile_template(source, library.code_of(source)), context)


def _render_params(
    rule: ActionRule, context: dict[str, Any], library: Library
) -> tuple[dict[str, Any], str]:
    import jinja2  # for its errors: loaded by `_render`

    params: dict[str, Any] = {}
    problem = ""
    for key, value in rule.params.items():
        if not isinstance(value, str):
            params[key] = value
            continue
        try:
            params[key] = _render(value, library, context)
        except jinja2.UndefinedError:
            problem = problem or f"the evidence does not name the {key} to act on"
        except Exception as error:  # a template that fails or runs over its budget
            problem = problem or f"the {key} could not be rendered: {error}"
    return params, problem


def _strength_refusal(finding: Finding) -> str:
    """A weak finding (a boilerplate list of possible causes, prose) never carries an offer."""
    if not finding.weak:
        return ""
    return (
        f"the evidence of {finding.category} is weak ({finding.signature}): "
        "a likely cause is never acted on"
    )


def _first_failed_guard(
    rule: ActionRule,
    item: RankedFinding,
    primary: Finding | None,
    categories: set[Category],
    facts: Facts,
    context: dict[str, Any],
    awaiting: bool = False,
) -> tuple[str, str]:
    """Why the first guard that fails does ("" when all hold), and the fact it waits on
    when it fails only because that live fact is unknown."""
    finding = item.finding
    values: dict[str, str] = {**context["fields"], **finding.captures}
    values.setdefault("category", str(finding.category))
    values["primary"] = str(primary.category) if primary else ""
    for guard in rule.guards:
        if awaiting and isinstance(guard, PrimaryGuard):
            continue
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
        if guard.matches is not None and linear.compiled(guard.matches).search(value) is None:
            return guard.reason
        unwanted = guard.not_matches
        if unwanted is not None and linear.compiled(unwanted).search(value) is not None:
            return guard.reason
    if isinstance(guard, FactGuard):
        known = facts.get(guard.fact)
        if known is None:
            return f"{LIVE_CHECK} that {guard.said}"
        if not known:
            return guard.reason or f"it is not true that {guard.said}"
    return ""


def _fill(reason: str, values: Mapping[str, str]) -> str:
    """Fill `{name}` placeholders from captures and fields; leave unknown ones as written."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), reason)


# -- explanation ---------------------------------------------------------------


def _explain(
    ranked: tuple[RankedFinding, ...], library: Library, shared: Mapping[str, str]
) -> tuple[str, tuple[RenderFailure, ...]]:
    """The explanation, one line per finding, and the findings whose text fell back."""
    if not ranked:
        return "No failure found: nothing in the input matches a playbook.", ()
    primary = str(ranked[0].finding.category)
    parts: list[str] = []
    failures: list[RenderFailure] = []
    for item in ranked:
        finding = item.finding
        if item.role is not Role.PRIMARY and item.symptom_of is None:
            parts.append(f"Also seen: {finding.category}: {finding.title} (a separate finding)")
            continue
        cause = primary if item.role is Role.PRIMARY else str(item.symptom_of)
        text, failure = _finding_text(item, library, shared, cause)
        if failure is not None:
            failures.append(failure)
        if item.role is not Role.PRIMARY:
            parts.append(f"Symptom of {item.symptom_of}: {text}")
        elif finding.weak:
            parts.append(f"Likely root cause (weak evidence): {text}")
        else:
            parts.append(f"Root cause: {text}")
    return "\n".join(parts), tuple(failures)


def _finding_text(
    item: RankedFinding, library: Library, shared: Mapping[str, str], primary: str
) -> tuple[str, RenderFailure | None]:
    """The playbook's diagnosis rendered for this finding, or its plain fallback text
    and what went wrong."""
    import jinja2  # for its errors: loaded by `_render`

    finding = item.finding
    loaded = library.by_id.get(finding.playbook)
    if loaded is None:
        return item.why or finding.title, None
    context = template_context(finding, shared, primary) | {"role": str(item.role)}
    try:
        return _render(loaded.playbook.diagnosis, library, context), None
    except jinja2.UndefinedError as error:  # the evidence lacks a name the text uses
        reason = error.message or "a name the text uses is undefined"
        return f"{finding.title} ({reason})", _render_failure(loaded, reason)
    except Exception as error:  # a template that fails or runs over its budget
        reason = str(error) or type(error).__name__
        text = f"{finding.title} (the playbook's text could not be rendered: {reason})"
        return text, _render_failure(loaded, reason)


def _render_failure(loaded: LoadedPlaybook, reason: str) -> RenderFailure:
    line = loaded.line_of("diagnosis")
    return RenderFailure(
        loaded.playbook.id, f"{loaded.source}:{line}" if line else loaded.source, reason
    )

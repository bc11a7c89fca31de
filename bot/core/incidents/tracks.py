"""The bookkeeping behind one open incident: its representative finding per playbook,
counters, distinct objects, keys and notes, and how findings fold into them.

Why this exists: the correlator (`bot.core.incidents.correlator`) decides which incident a
finding joins; what joining does to the incident's numbers and evidence (a strong
finding replacing a weak one, evidence lines added up to a bound, an object
counted once, labels taken from fields) is this module's, so that a finding
absorbed and an incident merged into another add up the same way. Pure.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

from bot.core.actions.facts import FactAnswer
from bot.core.incidents.workloads import LABEL_PREFIX
from bot.core.model import Finding, Incident, IncidentNote
from bot.core.taxonomy import Category

EMPTY_LABELS: Mapping[str, str] = MappingProxyType({})


class Track:
    """The mutable bookkeeping behind one open incident (owned by one correlator)."""

    __slots__ = (
        "answer",
        "asked",
        "attempts",
        "capped",
        "counts",
        "incident",
        "keys",
        "kinds",
        "names",
        "notes",
        "objects",
        "reps",
    )

    def __init__(self, incident: Incident, max_notes: int) -> None:
        self.incident = incident
        self.keys: list[str] = [incident.key, *incident.keys]
        self.reps: dict[str, Finding] = {
            r.finding.playbook: r.finding for r in incident.diagnosis.findings
        }
        self.counts: dict[str, int] = dict(incident.counts)
        self.objects: dict[str, int] = dict(incident.objects)
        self.kinds: dict[str, dict[str, int]] = {
            playbook: dict(kinds) for playbook, kinds in incident.object_kinds.items()
        }
        self.names: dict[str, set[str]] = {}
        self.capped: set[str] = set(incident.objects_capped)
        self.notes: deque[IncidentNote] = deque(incident.notes, maxlen=max_notes)
        self.answer = FactAnswer()  # what live checks found so far
        self.asked: set[tuple[str, str]] = set()  # offers handed out for a live check
        self.attempts = incident.attempts  # a RayJob's runs under KubeRay's retries

    def copy(self) -> Track:
        """A copy with containers of its own (findings and incidents are values)."""
        twin = copy.copy(self)
        twin.keys, twin.reps = list(self.keys), dict(self.reps)
        twin.counts, twin.objects = dict(self.counts), dict(self.objects)
        twin.kinds = {playbook: dict(kinds) for playbook, kinds in self.kinds.items()}
        twin.names = {playbook: set(names) for playbook, names in self.names.items()}
        twin.capped, twin.asked = set(self.capped), set(self.asked)
        twin.notes = deque(self.notes, maxlen=self.notes.maxlen)
        return twin

    def amend(self, now: datetime, **changes: Any) -> Incident:
        """The incident with `changes` (and the notes as they stand), a new revision."""
        self.incident = dataclasses.replace(
            self.incident,
            **changes,
            notes=tuple(self.notes),
            updated_at=now,
            revision=self.incident.revision + 1,
        )
        return self.incident

    @property
    def last_seen(self) -> datetime:
        return self.incident.last_seen_at or self.incident.updated_at

    def count_object(self, finding: Finding, max_objects: int) -> None:
        """Count the finding's object once per playbook; past `max_objects` names the
        count is a lower bound and the names are no longer kept."""
        if finding.obj is None:
            return
        playbook = finding.playbook
        if playbook in self.capped:
            return
        names = self.names.setdefault(playbook, set())
        name = str(finding.obj)
        if name in names:
            return
        if len(names) >= max_objects:
            self.capped.add(playbook)
            del self.names[playbook]
            return
        names.add(name)
        self.objects[playbook] = self.objects.get(playbook, 0) + 1
        kinds = self.kinds.setdefault(playbook, {})
        kinds[finding.obj.kind] = kinds.get(finding.obj.kind, 0) + 1

    def take_counts(self, other: Track) -> None:
        """Add `other`'s counters and objects to these (an incident merged into this
        one). Objects both counted by name count once; counts restored without names
        are added as they are."""
        for playbook, count in other.counts.items():
            self.counts[playbook] = self.counts.get(playbook, 0) + count
        for playbook, count in other.objects.items():
            shared = self.names.get(playbook, set()) & other.names.get(playbook, set())
            self.objects[playbook] = self.objects.get(playbook, 0) + count - len(shared)
            if playbook in other.names and playbook in self.names:
                self.names[playbook] |= other.names[playbook]
        for playbook, kinds in other.kinds.items():
            mine = self.kinds.setdefault(playbook, {})
            for kind, count in kinds.items():
                mine[kind] = mine.get(kind, 0) + count
        self.capped |= other.capped


def trimmed(finding: Finding, max_evidence: int) -> Finding:
    if len(finding.evidence) <= max_evidence:
        return finding
    return dataclasses.replace(finding, evidence=finding.evidence[:max_evidence])


def merged(rep: Finding, new: Finding, max_evidence: int) -> Finding:
    """The finding that represents a playbook on the card: a strong one replaces a
    weak one; otherwise missing captures, fields and evidence lines are added
    (bounded). Returns `rep` itself when nothing changed, so callers can tell."""
    limit = max_evidence
    if rep.weak and not new.weak:
        evidence = tuple(dict.fromkeys((*new.evidence, *rep.evidence)))[:limit]
        return dataclasses.replace(new, evidence=evidence)
    captures = _missing(rep.captures, new.captures)
    fields = _missing(rep.fields, new.fields)
    evidence = rep.evidence
    if len(evidence) < limit:
        extra = tuple(e for e in new.evidence if e not in evidence)
        evidence = (*evidence, *extra)[:limit]
    if captures is None and fields is None and evidence == rep.evidence:
        return rep
    return dataclasses.replace(
        rep,
        captures=captures if captures is not None else rep.captures,
        fields=fields if fields is not None else rep.fields,
        evidence=evidence,
        obj=rep.obj or new.obj,
        workload=rep.workload or new.workload,
    )


def with_labels(current: Mapping[str, str], finding: Finding, max_labels: int) -> Mapping[str, str]:
    """Fields named `label.KEY` (set by sources from workload labels) become labels."""
    extra = {
        k.removeprefix(LABEL_PREFIX): v
        for k, v in finding.fields.items()
        if k.startswith(LABEL_PREFIX) and k.removeprefix(LABEL_PREFIX) not in current
    }
    if not extra or len(current) >= max_labels:
        return current
    labels = dict(current)
    for key, value in extra.items():
        if len(labels) >= max_labels:
            break
        labels[key] = value
    return MappingProxyType(labels)


def identity(finding: Finding) -> tuple[str, Category]:
    return (finding.playbook, finding.category)


def _missing(base: Mapping[str, str], new: Mapping[str, str]) -> Mapping[str, str] | None:
    """`base` plus the keys only `new` has, or None when `new` adds nothing."""
    added = {k: v for k, v in new.items() if k not in base}
    if not added:
        return None
    return MappingProxyType({**base, **added})

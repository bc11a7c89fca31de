"""The diagnosis service: inputs -> hits -> one Diagnosis, and its JSON form.

Used by `pitcrew diagnose`, by playbook examples, and later by the live
sources (which hand in signals and log streams of their own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from io import BytesIO
from typing import Any

from bot.core.diagnosis.analysis import Facts, diagnose
from bot.core.diagnosis.classifier import Classifier, Hit
from bot.core.diagnosis.known_messages import KnownMessages, name_lines
from bot.core.diagnosis.prefilter import PatternCache
from bot.core.diagnosis.unmatched import UNKNOWN, FailureLine, part_lines
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.reader import read_stream
from bot.core.model import Diagnosis, Signal
from bot.core.playbooks.library import Library


class Engine:
    """A library compiled once, ready to diagnose any number of inputs."""

    def __init__(
        self,
        library: Library,
        cache: PatternCache | None = None,
        known: Callable[[], KnownMessages] | None = None,
    ) -> None:
        """`cache`: where compiled pattern databases are kept between runs (without one,
        each Engine compiles the library again: about a second). `known`: the message
        inventory, asked for the first time a failure-looking line matched nothing."""
        self.library = library
        self.classifier = Classifier(library, cache)
        self._known = known
        self._known_messages: KnownMessages | None = None

    def hits(self, parts: Iterable[InputPart]) -> list[Hit]:
        hits: list[Hit] = []
        for part in parts:
            if isinstance(part, Signal):
                hits.extend(self.classifier.classify(part))
            elif isinstance(part, LogText):
                hits.extend(
                    self.classifier.scan_log(
                        part.chunks, part.source, part.origin, part.obj, part.workload
                    )
                )
        return hits

    def diagnose(self, parts: Iterable[InputPart], facts: Facts | None = None) -> Diagnosis:
        """The verdict; with no finding, the failure-looking lines of the parts that can
        be read again are named as a failure pitcrew does not know."""
        parts = list(parts)
        return self.verdict(parts, self.hits(parts), facts)

    def verdict(
        self, parts: list[InputPart], hits: list[Hit], facts: Facts | None = None
    ) -> Diagnosis:
        """The verdict on `parts` whose `hits` are known (`--explain` shows them too)."""
        found = diagnose(hits, self.library, facts)
        if found.findings:
            return found
        return unknown_failure(found, self.unknown_lines(parts))

    def unknown_lines(self, parts: Iterable[InputPart]) -> list[FailureLine]:
        """The failure-looking lines of `parts` (a line only a weak signature matched, the
        final exception alone, among them), but those the noise list or a signature's
        `unless` knows to be benign; each line the message inventory knows is named, and
        one whole of a message it calls benign is left out."""
        unknown = [line for line in part_lines(parts) if not self.classifier.known_line(line.text)]
        if unknown and self._known is not None:
            if self._known_messages is None:
                self._known_messages = self._known()
            unknown = name_lines(self._known_messages, unknown)
        return unknown

    def categories(self, parts: Iterable[InputPart]) -> set[str]:
        """The classes the evidence shows on its own (a symptom kept beside its cause is
        left out): what a resubmission's check asks."""
        return set(self.diagnose(parts).categories)

    def diagnose_text(self, text: str, origin: str = "<text>") -> Diagnosis:
        return self.diagnose(read_stream(BytesIO(text.encode("utf-8")), origin))


def to_json(diagnosis: Diagnosis) -> dict[str, Any]:
    """The `--format json` object (docs/diagnose.md documents its shape)."""
    primary = diagnosis.primary
    return {
        "primary": str(primary.category) if primary else None,
        "likely": bool(primary and primary.weak),
        "secondary": list(dict.fromkeys(str(f.category) for f in diagnosis.secondary)),
        "findings": [
            {
                "playbook": r.finding.playbook,
                "category": str(r.finding.category),
                "severity": str(r.finding.severity),
                "role": str(r.role),
                "strength": r.finding.strength,
                "symptom_of": str(r.symptom_of) if r.symptom_of else None,
                "why": r.why,
                "evidence": [e.text for e in r.finding.evidence],
                "captures": dict(r.finding.captures),
                "count": r.finding.count,
            }
            for r in diagnosis.findings
        ],
        "actions": [
            {
                "action": a.action,
                "params": dict(a.params),
                "offered": a.offered,
                "reason": a.reason,
                "preview": a.preview,
            }
            for a in diagnosis.actions
        ],
        "diagnosis": diagnosis.text,
        "remediation": list(diagnosis.remediation),
        "runbook": list(diagnosis.runbook),
        "unknown": list(diagnosis.unknown),
        "unrendered": [
            {"playbook": u.playbook, "source": u.source, "reason": u.reason}
            for u in diagnosis.unrendered
        ],
    }


def unknown_failure(diagnosis: Diagnosis, lines: Iterable[FailureLine]) -> Diagnosis:
    """`diagnosis` (which found nothing) told it does not know the failure these lines
    show; unchanged when there are none (then it is "No failure found")."""
    shown = tuple(
        f"{line.origin}:{line.line}  {line.text}" if line.origin else line.text for line in lines
    )
    if diagnosis.findings or not shown:
        return diagnosis
    text = "\n".join(
        [f"{UNKNOWN}: no playbook matches it, but these lines look like a failure:", *shown]
    )
    return replace(diagnosis, unknown=shown, text=text)

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
from bot.core.diagnosis.known_messages import KnownMessages, name_lines, system_raise
from bot.core.diagnosis.prefilter import PatternCache
from bot.core.diagnosis.unmatched import UNKNOWN, FailureLine, part_lines
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.reader import read_stream
from bot.core.model import Diagnosis, Signal
from bot.core.playbooks.library import Library
from bot.core.taxonomy import CATCH_ALL

_EXCEPTION_LINES = frozenset({"user-exception", "final-exception"})
"""The catch-all's evidence that is an exception line alone."""
_YIELDING = _EXCEPTION_LINES | {"jobs-api-application-error", "entrypoint-exit-code"}
"""The catch-all's evidence that gives way to a known raise (the wrappers of any exit)."""


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
        self._known_source = known
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
        if found.findings and not self._left_to_inventory(found, hits):
            return found
        if found.findings:
            found = diagnose([], self.library, facts)
        return unknown_failure(found, self.unknown_lines(parts))

    def _known(self) -> KnownMessages | None:
        if self._known_messages is None and self._known_source is not None:
            self._known_messages = self._known_source()
        return self._known_messages

    def _left_to_inventory(self, found: Diagnosis, hits: list[Hit]) -> bool:
        """The catch-all yields to the inventory (TAXONOMY "Known but unclassified"):
        when application_error stands only on an exception line and the wrappers around
        it (the Jobs API's words, the entrypoint's exit code), and that exception is an
        emitting system's own raise no class explains (vLLM's `ValueError: The prompt
        cannot be empty`), pitcrew does not know the failure and names the raise (a
        RayJob's failure that only wraps it goes with the catch-all). Ray's word that
        the job's own task or actor raised it keeps the catch-all."""
        if any(CATCH_ALL not in (r.finding.category, r.symptom_of) for r in found.findings):
            return False
        catch = [h for h in hits if h.sig.loaded.playbook.category is CATCH_ALL]
        names = {h.sig.signature.name for h in catch}
        if not names <= _YIELDING or not names & _EXCEPTION_LINES:
            return False
        known = self._known()
        lines = [
            t for h in catch if h.sig.signature.name in _EXCEPTION_LINES for t, _ in h.evidence
        ]
        return known is not None and any(system_raise(known, line) for line in lines)

    def unknown_lines(self, parts: Iterable[InputPart]) -> list[FailureLine]:
        """The failure-looking lines of `parts` (a line only a weak signature matched, the
        final exception alone, among them), but those the noise list or a signature's
        `unless` knows to be benign; each line the message inventory knows is named, and
        one whole of a message it calls benign is left out."""
        unknown = [line for line in part_lines(parts) if not self.classifier.known_line(line.text)]
        known = self._known() if unknown else None
        return name_lines(known, unknown) if known is not None else unknown

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

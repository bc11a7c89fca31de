"""A playbook signature compiled for the classifier: its regexes (RE2, `bot.core.linear`)
for text and for bytes,
and what the scan needs to know about its regex (anchored at line starts, able to
span lines)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from bot.core.diagnosis.regexes import can_span_lines
from bot.core.inputs.alerts import ANNOTATIONS, LABELS
from bot.core.linear import Linear
from bot.core.model import LOG_SOURCES, Signal, SourceKind
from bot.core.normalize import anchors_lines, lenient_anchors
from bot.core.playbooks.library import LoadedPlaybook, Signature


@dataclass(frozen=True, eq=False)
class CompiledSignature:
    """A signature ready to run: its regexes for text and for bytes, each compiled by RE2
    on first use. Hyperscan rules most signatures out of a given text, so a short run
    (`pitcrew diagnose` of a paste) compiles few of them, and a classifier builds fast."""

    id: int
    loaded: LoadedPlaybook
    signature: Signature
    sources: frozenset[SourceKind]
    anchored: bool = False

    @property
    def has_regex(self) -> bool:
        return bool(self.signature.regex)

    @cached_property
    def reason(self) -> Linear[str] | None:
        alert = self.signature.alert
        reason = alert.alertname if alert is not None else self.signature.reason
        return Linear(reason) if reason is not None else None

    @cached_property
    def not_reason(self) -> Linear[str] | None:
        reason = self.signature.not_reason
        return Linear(reason) if reason is not None else None

    @cached_property
    def fields(self) -> tuple[tuple[str, Linear[str]], ...]:
        """Whole-value regexes on fields; an alert's annotations are searched."""
        alert = self.signature.alert
        notes = alert.annotations.items() if alert is not None else ()
        searched = ((f"{ANNOTATIONS}{k}", f"(?s).*(?:{v}).*") for k, v in notes)
        return tuple((k, Linear(v)) for k, v in (*self.signature.fields.items(), *searched))

    @cached_property
    def labels(self) -> tuple[tuple[str, bool, Linear[str]], ...]:
        """An alert's label matchers: (field, negated, whole-value regex)."""
        alert = self.signature.alert
        matchers = alert.matchers if alert is not None else ()
        return tuple((f"{LABELS}{m.name}", m.negated, Linear(m.regex)) for m in matchers)

    @cached_property
    def text_regex(self) -> Linear[str] | None:
        regex = self.signature.regex
        return Linear(regex, ignore_case=self.signature.ignore_case) if regex else None

    @cached_property
    def bytes_regex(self) -> Linear[bytes] | None:
        regex = self.signature.regex
        return Linear(regex.encode(), ignore_case=self.signature.ignore_case) if regex else None

    @cached_property
    def unless(self) -> tuple[Linear[str], ...]:
        patterns = [*self.signature.unless, *self.loaded.playbook.unless]
        return tuple(Linear(u, ignore_case=self.signature.ignore_case) for u in patterns)

    @cached_property
    def spans_lines(self) -> bool:
        return can_span_lines(self.signature.regex or "", flags_of(self.signature))

    @property
    def playbook_id(self) -> str:
        return self.loaded.playbook.id

    def applies_to(self, source: SourceKind) -> bool:
        return not self.sources or source in self.sources

    def structured_match(self, signal: Signal) -> bool:
        if self.reason is not None and not self._full(self.reason, signal.reason):
            return False
        if self.not_reason is not None and self._full(self.not_reason, signal.reason):
            return False
        for name, pattern in self.fields:
            value = signal.fields.get(name)
            if value is None or not self._full(pattern, value):
                return False
        return all(
            self._full(pattern, signal.fields.get(name, "")) is not negated
            for name, negated, pattern in self.labels
        )

    @cached_property
    def _answers(self) -> dict[tuple[int, str], bool]:
        """Earlier answers of `_full`: reasons and field values repeat from signal to
        signal, and each RE2 call from Python costs more than the lookup."""
        return {}

    def _full(self, pattern: Linear[str], value: str) -> bool:
        key = (id(pattern), value)
        answers = self._answers
        known = answers.get(key)
        if known is None:
            if len(answers) >= _MAX_ANSWERS:
                answers.clear()
            known = answers[key] = pattern.fullmatch(value) is not None
        return known


_MAX_ANSWERS = 4096


def flags_of(signature: Signature) -> int:
    return (re.IGNORECASE if signature.ignore_case else 0) | re.MULTILINE


def compile_signature(
    index: int, loaded: LoadedPlaybook, signature: Signature
) -> CompiledSignature:
    return CompiledSignature(
        id=index,
        loaded=loaded,
        signature=signature,
        sources=frozenset([SourceKind.ALERT] if signature.alert else signature.sources),
        anchored=anchors_lines(signature.regex or ""),
    )


def scans_logs(sig: CompiledSignature) -> bool:
    """Log text has no reason or fields: only plain regex signatures that allow a log source."""
    if sig.signature.reason is not None or sig.signature.fields or sig.signature.alert:
        return False
    return any(sig.applies_to(source) for source in LOG_SOURCES)


def hyperscan_pattern(sig: CompiledSignature) -> bytes:
    """The expression Hyperscan gets: a line-start anchor also accepts a line prefix."""
    assert sig.signature.regex is not None
    regex = sig.signature.regex
    return (lenient_anchors(regex) if sig.anchored else regex).encode()

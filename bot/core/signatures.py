"""A playbook signature compiled for the classifier: its regexes for text and for bytes,
and what the scan needs to know about its regex (anchored at line starts, able to
span lines)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.core.model import LOG_SOURCES, Signal, SourceKind
from bot.core.normalize import anchors_lines, lenient_anchors
from bot.core.playbooks import LoadedPlaybook, Signature
from bot.core.regexes import can_span_lines


@dataclass(frozen=True, eq=False)
class CompiledSignature:
    """A signature ready to run: its regexes compiled for text and for bytes."""

    id: int
    loaded: LoadedPlaybook
    signature: Signature
    sources: frozenset[SourceKind]
    reason: re.Pattern[str] | None
    fields: tuple[tuple[str, re.Pattern[str]], ...]
    text_regex: re.Pattern[str] | None
    bytes_regex: re.Pattern[bytes] | None
    unless: tuple[re.Pattern[str], ...]
    anchored: bool = False
    spans_lines: bool = True

    @property
    def playbook_id(self) -> str:
        return self.loaded.playbook.id

    def applies_to(self, source: SourceKind) -> bool:
        return not self.sources or source in self.sources

    def structured_match(self, signal: Signal) -> bool:
        if self.reason is not None and not self.reason.fullmatch(signal.reason):
            return False
        for name, pattern in self.fields:
            value = signal.fields.get(name)
            if value is None or not pattern.fullmatch(value):
                return False
        return True


def flags_of(signature: Signature) -> int:
    return (re.IGNORECASE if signature.ignore_case else 0) | re.MULTILINE


def compile_signature(
    index: int, loaded: LoadedPlaybook, signature: Signature
) -> CompiledSignature:
    flags = flags_of(signature)
    unless = [*signature.unless, *loaded.playbook.unless]
    return CompiledSignature(
        id=index,
        loaded=loaded,
        signature=signature,
        sources=frozenset(signature.sources),
        reason=re.compile(signature.reason) if signature.reason is not None else None,
        fields=tuple((k, re.compile(v)) for k, v in signature.fields.items()),
        text_regex=re.compile(signature.regex, flags) if signature.regex else None,
        bytes_regex=re.compile(signature.regex.encode(), flags) if signature.regex else None,
        unless=tuple(re.compile(u, flags) for u in unless),
        anchored=anchors_lines(signature.regex or ""),
        spans_lines=can_span_lines(signature.regex or "", flags),
    )


def scans_logs(sig: CompiledSignature) -> bool:
    """Log text has no reason or fields: only plain regex signatures that allow a log source."""
    if sig.reason is not None or sig.fields:
        return False
    return any(sig.applies_to(source) for source in LOG_SOURCES)


def hyperscan_pattern(sig: CompiledSignature) -> bytes:
    """The expression Hyperscan gets: a line-start anchor also accepts a line prefix."""
    assert sig.signature.regex is not None
    regex = sig.signature.regex
    return (lenient_anchors(regex) if sig.anchored else regex).encode()

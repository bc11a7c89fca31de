"""`pitcrew diagnose --explain`: which lines matched which signature, and, when nothing
matched, the lines that look like failures that no playbook knows.

Why this exists: "No failure found" must explain itself. A reader who sees no
finding wants to know whether pitcrew read the paste at all and what in it looked
like a failure; a reader who sees a finding wants to know which line made it.
Pure: hits and texts in, an explanation out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.diagnosis.classifier import Hit
from bot.core.diagnosis.unmatched import FailureLine


@dataclass(frozen=True, slots=True)
class MatchedLine:
    playbook: str
    signature: str
    strength: str
    origin: str
    line: int | None
    text: str


@dataclass(frozen=True, slots=True)
class Explanation:
    matched: tuple[MatchedLine, ...]
    unmatched: tuple[FailureLine, ...]
    """Failure-looking lines; listed only when no playbook found anything."""


def explain(hits: Sequence[Hit], unknown: Iterable[FailureLine], found: bool) -> Explanation:
    """`unknown`: the failure-looking lines no playbook knows (`Engine.unknown_lines`);
    `found`: the diagnosis has findings."""
    matched = tuple(
        MatchedLine(
            hit.sig.playbook_id,
            hit.sig.signature.name,
            "weak" if hit.sig.signature.weak else "strong",
            hit.signal.origin,
            line,
            text,
        )
        for hit in hits
        for text, line in hit.evidence
    )
    return Explanation(matched, () if found else tuple(unknown))


def explanation_json(explanation: Explanation) -> dict[str, Any]:
    return {
        "matched": [
            {
                "playbook": m.playbook,
                "signature": m.signature,
                "strength": m.strength,
                "origin": m.origin,
                "line": m.line,
                "text": m.text,
            }
            for m in explanation.matched
        ],
        "unmatched": [
            {"origin": u.origin, "line": u.line, "text": u.text, "shape": u.shape}
            for u in explanation.unmatched
        ],
    }


def explanation_lines(explanation: Explanation) -> list[str]:
    """The explanation for a terminal, one line each."""
    lines = [
        f"{m.origin}:{m.line or '-'}  {m.playbook}/{m.signature} ({m.strength})  {m.text[:200]}"
        for m in explanation.matched
    ]
    if not lines:
        lines.append("No line matched any signature.")
    if explanation.unmatched:
        lines.append("Lines that look like failures and that no playbook knows:")
        lines.extend(f"{u.origin}:{u.line}  {u.text}" for u in explanation.unmatched)
    return lines

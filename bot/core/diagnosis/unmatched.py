"""Lines that look like failures but that no playbook knows: the playbook to write next.

Why this exists: "No failure found" should explain itself. When nothing matched,
`pitcrew diagnose --explain` shows the lines that look like a failure (a traceback,
an `ERROR`, `Killed`, a non-zero exit code, an exception type); the daemon keeps
them, grouped by shape (digits, ids, hex and addresses normalised away), so
`pitcrew unmatched` can list the failures a team keeps seeing with counts and
first and last seen. Pure: text in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

UNKNOWN = "pitcrew does not know this failure"
"""The verdict on evidence no playbook matched that still looks like a failure."""
MAX_LINES = 20
"""At most this many failure-looking lines are kept from one input."""
LINE_LIMIT = 300

_FAILURE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\b(?:ERROR|FATAL|CRITICAL|Error|Failed|FAILED)\b"
    r"|\bKilled\b|Segmentation fault|core dumped|\bpanic:"
    r"|\b(?:exit(?:ed)?(?: with)? (?:code|status)|Exit Code|exitCode|exit_code)[:=\s]+-?[1-9]\d*"
    r"|^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit)\b(?:\(\w+\))?:"
)
# A word every line `_FAILURE` matches contains: looked for first, it rules out the
# ordinary lines that are most of a log five times faster than `_FAILURE` itself (a
# flood of 1 MiB logs is read in a fraction of the time).
_MAYBE = re.compile(
    r"Traceback|ERROR|FATAL|CRITICAL|Error|Failed|FAILED|Killed|Segmentation fault"
    r"|core dumped|panic:|[eE]xit|Exception"
)
_BENIGN = re.compile(
    r"\b(?:0 errors?|no errors?|errors?=0|error_count[:=]\s*0)\b|FutureWarning|UserWarning"
    r"|DeprecationWarning|\bINFO\b",
    re.IGNORECASE,
)
_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\x1b\[[0-9;]*[A-Za-z]|#033\[[0-9;]*[A-Za-z]"), ""),
    (re.compile(r"^\s*\((?:\w+)(?: pid=\d+)?(?:, ip=[\d.]+)?\)\s*"), ""),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.I), "<hex>"),
    (re.compile(r"\b[a-z0-9]+(?:-[a-z0-9]+)*-[a-z0-9]{5}\b"), "<name>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)


# The line that ends a Python traceback: the exception, whatever its name, at the
# margin (a frame's `File` line and its code are indented).
_TRACEBACK_END = re.compile(
    r"(?!Traceback|During handling|The above exception)[A-Za-z_][\w.]*(?::|$)"
)
_PROCESS_PREFIX = re.compile(
    r"^(?:\x1b\[[0-9;]*m)*\((?:[^()\n]*?\b(?:pid|ip)=[^()\n]*|raylet)\)(?:\x1b\[[0-9;]*m)* ?"
)


def shape_prefix(text: str) -> str:
    """`text` without Ray's process prefix (`(Actor pid=…, ip=…) `, `(raylet) `)."""
    return _PROCESS_PREFIX.sub("", text, count=1)


@dataclass(frozen=True, slots=True)
class FailureLine:
    """A line of the input that looks like a failure; `shape` groups its kind."""

    text: str
    line: int
    origin: str = ""

    @property
    def shape(self) -> str:
        return shape(self.text)


@dataclass(frozen=True, slots=True)
class UnmatchedShape:
    """Failures of one shape no playbook matched, as the daemon keeps them."""

    shape: str
    example: str
    origin: str
    count: int
    first_seen: datetime
    last_seen: datetime


def shape(text: str) -> str:
    """`text` with colour codes, Ray's process prefix, ids, addresses, hex and numbers
    replaced by placeholders, so one kind of failure is one shape."""
    for pattern, placeholder in _SHAPES:
        text = pattern.sub(placeholder, text)
    return text.strip()[:LINE_LIMIT]


def looks_like_failure(text: str) -> bool:
    return (
        _MAYBE.search(text) is not None
        and _FAILURE.search(text) is not None
        and _BENIGN.search(text) is None
    )


def failure_lines(
    lines: Iterable[str], origin: str = "", limit: int = MAX_LINES
) -> list[FailureLine]:
    """The first `limit` lines that look like failures, one per shape."""
    found: dict[str, FailureLine] = {}
    in_traceback = False
    for number, text in enumerate(lines, start=1):
        text = text.rstrip("\r\n")
        bare = shape_prefix(text)
        ends_traceback = in_traceback and _TRACEBACK_END.match(bare) is not None
        in_traceback = (in_traceback and not ends_traceback) or "Traceback (most recent" in text
        if not text.strip() or not (ends_traceback or looks_like_failure(text)):
            continue
        item = FailureLine(text.strip()[:LINE_LIMIT], number, origin)
        found.setdefault(item.shape, item)
        if len(found) >= limit:
            break
    return list(found.values())


def part_lines(parts: Iterable[object]) -> list[FailureLine]:
    """Failure-looking lines of the parts whose text can be read again: signals' text
    and log chunks held in memory (a one-shot stream was the classifier's alone)."""
    found: list[FailureLine] = []
    for part in parts:
        origin = str(getattr(part, "origin", ""))
        text = getattr(part, "text", None)
        chunks = getattr(part, "chunks", None)
        if isinstance(text, str):
            found.extend(failure_lines(text.splitlines(), origin))
        elif isinstance(chunks, list | tuple):
            data = b"".join(c for c in chunks if isinstance(c, bytes))
            found.extend(failure_lines(data.decode("utf-8", "replace").splitlines(), origin))
        if len(found) >= MAX_LINES:
            break
    return found[:MAX_LINES]

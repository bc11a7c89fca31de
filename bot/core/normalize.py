"""What people paste, made matchable: the decorations around a failure line taken away.

Ray and terminals wrap a message in things no signature should have to spell:
colour codes (`ESC[31m`, or the literal `#033[31m` that syslog writes),
the driver's actor and raylet prefixes (`(WorkerDict pid=123, ip=10.0.0.1) `,
`(raylet) `), and the dedup suffix ` [repeated 6x across cluster]`, which
says how often a line was seen, not that it is benign. Every function here
keeps the line count of its input, so line numbers found in normalized text
are those of the user's text, and evidence is taken from the original lines.
"""

from __future__ import annotations

import re

COLOUR_MARK = rb"\x1b\[|#033\["
"""Where a colour code may start (a pattern for the prefilter's scan)."""
_COLOUR = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]|#033\[[0-9;]*[A-Za-z]")
_COLOUR_MARK = re.compile(COLOUR_MARK)

# `(Name pid=N, ip=X) `, `(pid=runtime_env, ip=X) `, `(raylet) `, `(raylet, ip=X) `,
# `(autoscaler +8m46s) `, `(scheduler +2h13m57s, ip=xx) `, optionally after a
# `[timestamp] ` that log collectors add in front.
_PREFIX = re.compile(
    rb"^(?:\[[0-9][^\]\n]{6,40}\] )?"
    rb"\((?:[^()\n]*?\b(?:pid|ip)=[^()\n]*|raylet|autoscaler[^()\n]*|scheduler[^()\n]*)\) ?",
    re.MULTILINE,
)
_PREFIX_MARK = re.compile(rb"^(?:\[[^\]\n]*\] )?\(", re.MULTILINE)

_DEDUP = re.compile(
    r"[ \t]?\[repeated (?P<times>\d+)x across cluster\]"
    r"(?:[ \t]*\(Ray deduplicates logs by default\.[^\n]*\))?"
)


def colour_spans(data: bytes, marks: list[int] | None = None) -> list[tuple[int, int]]:
    """(start, end) of each colour code in `data`, in order. `marks`, where known, are
    the offsets just after each code's `ESC[` / `#033[` (the prefilter reports them);
    else the codes are looked for."""
    if marks is None:
        marks = [m.end() for m in _COLOUR_MARK.finditer(data)]
    spans: list[tuple[int, int]] = []
    for mark in marks:
        start = mark - 2 if data[mark - 2 : mark] == b"\x1b[" else mark - 5
        code = _COLOUR.match(data, start)
        if code is not None and (not spans or start >= spans[-1][1]):
            spans.append((start, code.end()))
    return spans


def without_spans(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    """`data` without the (ordered) spans."""
    if not spans:
        return data
    kept: list[bytes] = []
    position = 0
    for start, end in spans:
        kept.append(data[position:start])
        position = max(position, end)
    kept.append(data[position:])
    return b"".join(kept)


def without_colour(data: bytes) -> bytes:
    """`data` with colour codes removed (same lines)."""
    return without_spans(data, colour_spans(data))


def without_prefixes(data: bytes) -> bytes:
    """`data` with each line's actor, raylet or autoscaler prefix removed (same lines)."""
    if _PREFIX_MARK.search(data) is None:
        return data
    return _PREFIX.sub(b"", data)


def without_dedup(text: str) -> tuple[str, int]:
    """(`text` without Ray's dedup suffixes, how many times the line was seen)."""
    if "[repeated " not in text:
        return text, 1
    times = 1
    for match in _DEDUP.finditer(text):
        times = max(times, int(match["times"]))
    return _DEDUP.sub("", text), times


def lenient_anchors(pattern: str) -> str:
    """`pattern` with each line-start anchor `^` also accepting a line prefix's closing
    `) `: the prefilter then flags prefixed lines, which are confirmed once the
    prefix is removed. A `^` escaped or inside a character class is left alone."""
    if "^" not in pattern:
        return pattern
    return _ANCHOR_OR_SKIPPED.sub(_lenient_anchor, pattern)


# An escaped character, a character class (to its end, or the pattern's), or an anchor:
# every classifier built (each `pitcrew diagnose`) rewrites the library's patterns.
_ANCHOR_OR_SKIPPED = re.compile(r"\\.|\[(?:\\.|[^\]\\])*(?:\]|\\?\Z)|\^", re.DOTALL)


def _lenient_anchor(token: re.Match[str]) -> str:
    return r"(?:^|\) )" if token[0] == "^" else token[0]


def anchors_lines(pattern: str) -> bool:
    """True when `pattern` has a line-start anchor outside a character class."""
    return lenient_anchors(pattern) != pattern


UNWRAP_MIN_WIDTH = 60
"""A line shorter than this was not wrapped."""
# A line that starts a record of its own: indented, a prefix, a timestamp or level,
# a traceback line, an exception name, a list item or table rule.
_STARTS_RECORD = re.compile(
    rb"[ \t(\[<>{}|#*=+-]|\d{1,4}[-/:. ]|[A-Z]{3,}\b"
    rb"|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b|File \"|Traceback|During handling"
)


TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 160, 200})
"""Widths terminals and pagers are commonly set to: a line exactly this long was cut
there, even when it is the paste's only long line."""
# After a line cut at a terminal's width the rest may start with a digit, a sign or a
# bracket (a number or a word cut in two) or one space (the cut fell on it); an indent,
# a list item, a process prefix, a timestamp and the rest of what `_STARTS_RECORD` names
# still start a record.
_STARTS_RECORD_AFTER_CUT = re.compile(
    rb"[ \t]{2}|\t|\((?:[^()\n]*?\b(?:pid|ip)=|raylet|autoscaler)|\[\d|[|#*=+-][ \t]"
    rb"|\d{4}-\d\d-\d\d[ T]|\d\d:\d\d:\d\d|[A-Z]{3,}\b"
    rb"|(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b|File \"|Traceback|During handling"
)


def unwrap(data: bytes) -> tuple[bytes, list[int]] | None:
    """`data` with hard-wrapped lines joined again, and for each joined line the index
    of its first original line; None when no line looks wrapped.

    A line is a wrap's first half when it is long and the next line does not start
    a record of its own. A line exactly as long as the paste's most common long
    width was cut by a terminal, possibly inside a word, so it is joined without a
    space; a shorter one was broken at a space, which is put back unless the next line
    still starts with it."""
    lines = [line.removesuffix(b"\r") for line in data.split(b"\n")]
    width = _terminal_width(lines)
    joined: list[bytes] = []
    firsts: list[int] = []
    previous = b""
    for index, line in enumerate(lines):
        if joined and _continues(previous, line):
            cut = previous.endswith((b" ", b"\t")) or len(previous) in (width, *TERMINAL_WIDTHS)
            spaced = cut or line.startswith((b" ", b"\t"))  # the break kept its space
            joined[-1] += (b"" if spaced else b" ") + line
        else:
            joined.append(line)
            firsts.append(index)
        previous = line
    if len(joined) == len(lines):
        return None
    return b"\n".join(joined), firsts


def _terminal_width(lines: list[bytes]) -> int:
    counts: dict[int, int] = {}
    for line in lines:
        if len(line) >= UNWRAP_MIN_WIDTH:
            counts[len(line)] = counts.get(len(line), 0) + 1
    width, seen = max(counts.items(), key=lambda item: item[1], default=(0, 0))
    return width if seen >= 2 else -1


def _continues(previous: bytes, line: bytes) -> bool:
    if len(previous) < UNWRAP_MIN_WIDTH or not line.strip():
        return False
    if len(previous) in TERMINAL_WIDTHS:
        # Cut by a terminal, possibly inside a number or a word.
        return _STARTS_RECORD_AFTER_CUT.match(line) is None
    if previous.rstrip().endswith(b":"):
        return False
    return _STARTS_RECORD.match(line) is None

"""A prefilter's candidate confirmed by RE2 at a cost bounded whatever the line.

Why this exists: Hyperscan says which signature may match and where its match ends; RE2
then finds the match and its captures. On a long line that cost was unbounded twice over:
RE2 over the whole line costs its length times the regex's program once RE2 leaves its
DFA for its NFA (a capture over a 500-fold repeat on a 1 MB line: about 10 s a call, four
calls a diagnosis), and every match on the line was taken in turn, each reading the whole
line again (a 1 MB line of 170,000 matches ran for over ten minutes). Here a region longer
than its signature's `confirm_window` (`CONFIRM_WORK` of bytes times program size) is cut to the
window around where Hyperscan saw the match end, and a cut region gives one match: on
such a line the captures and the evidence come from around the match, and the line
counts once. A match longer than the window keeps its line as evidence when Hyperscan's
match is exact (its captures are then not known), and is not taken when it was only
Hyperscan's approximation. `playbooks check` needs no refusal for it: no regex can cost
more than its window.
"""

from __future__ import annotations

from collections.abc import Iterator

from bot.core.diagnosis.signatures import CompiledSignature
from bot.core.linear import Found
from bot.core.normalize import without_prefixes

CONFIRM_WORK = 1 << 23
"""What one confirmation may cost: bytes given to RE2 times its program's instructions
(about 0.2 s on RE2's slowest path, its NFA)."""
MIN_WINDOW = 4 << 10
"""The smallest window, whatever the program: room for a line and its captures."""

Confirmed = tuple[int, int, Found[bytes]]
"""(start, end, match) of a match in the scanned bytes."""


def confirm_window(sig: CompiledSignature) -> int:
    """How many bytes around a candidate this signature's RE2 confirmation reads at most."""
    assert sig.bytes_regex is not None
    return max(MIN_WINDOW, CONFIRM_WORK // max(sig.bytes_regex.program_size, 1))


def confirm(
    sig: CompiledSignature,
    scan: bytes,
    region: tuple[int, int],
    end: int = -1,
    exact: bool = False,
) -> Iterator[Confirmed]:
    """The signature's matches in `scan[region]`; for a region longer than its `confirm_window`
    around `end` (where Hyperscan saw a match end, -1: not known), the first match in that
    window only, or, when there is none there and Hyperscan's match is `exact`, the line
    without captures."""
    narrowed = narrowed_region(sig, scan, region, end)
    if narrowed == region:
        yield from matches(sig, scan, region)
        return
    first = next(matches(sig, scan, narrowed), None)
    if first is not None:
        yield first
    elif exact:
        start = max(end - 1, region[0])
        yield start, end, Found(start, end, {})


def narrowed_region(
    sig: CompiledSignature, scan: bytes, region: tuple[int, int], end: int
) -> tuple[int, int]:
    """`region`, or the signature's window of it around `end` when it is longer (from its
    line's start for a signature anchored at line starts)."""
    begin, stop = region
    room = confirm_window(sig)
    if stop - begin <= room or end < 0:
        return region
    if sig.anchored:
        line_start = max(begin, scan.rfind(b"\n", 0, max(end - 1, begin)) + 1)
        return line_start, min(stop, line_start + room)
    half = room // 2
    return max(begin, end - half), min(stop, end + half)


def line_window(data: bytes, start: int, stop: int, room: int) -> tuple[int, int]:
    """The line (or lines) holding `data[start:stop]`, cut to `room` bytes around it when
    longer: a match's evidence on a 1 MB line is what surrounds it."""
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", max(stop - 1, start))
    line_end = len(data) if line_end == -1 else line_end
    if line_end - line_start <= room:
        return line_start, line_end
    first = max(line_start, start - room // 2)
    return first, min(line_end, first + room)


def matches(sig: CompiledSignature, scan: bytes, region: tuple[int, int]) -> Iterator[Confirmed]:
    """(start, end, match) of the signature's matches in `scan[region]`, found by RE2
    (`bot.core.linear`: no backtracking, so no line can stall the scan). A signature
    anchored at line starts is run over the region's lines without their prefixes;
    its start and end are then those of the lines it matched in `scan`."""
    assert sig.bytes_regex is not None
    if not sig.anchored:
        for match in sig.bytes_regex.finditer(scan, *region):
            yield match.start(), match.end(), match
        return
    begin, stop = region
    original = scan[begin:stop]
    plain = without_prefixes(original)
    if plain is original:
        for match in sig.bytes_regex.finditer(scan, *region):
            yield match.start(), match.end(), match
        return
    for match in sig.bytes_regex.finditer(plain):
        first = plain.count(b"\n", 0, match.start())
        last = plain.count(b"\n", 0, max(match.end() - 1, match.start()))
        start = nth_line_start(original, first)
        end = nth_line_start(original, last)
        line_end = original.find(b"\n", end)
        yield begin + start, begin + (len(original) if line_end == -1 else line_end), match


def nth_line_start(data: bytes, n: int) -> int:
    offset = 0
    for _ in range(n):
        offset = data.index(b"\n", offset) + 1
    return offset

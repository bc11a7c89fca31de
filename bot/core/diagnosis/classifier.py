"""Classification: playbooks x signals -> hits, fast.

Every regex of every playbook is compiled once into one Hyperscan database,
used as a prefilter: a text is scanned once, whatever the number of playbooks,
and Python `re` re-runs only the signatures that Hyperscan says matched, to
get exact positions and named-group captures. Logs are scanned as bytes in
large chunks (with a few lines of overlap so signatures spanning lines are
not lost at chunk borders), so a 1 GB file never sits in memory.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from bot.core.diagnosis.confirm import (
    MIN_WINDOW,
    confirm,
    confirm_window,
    line_window,
    nth_line_start,
)
from bot.core.diagnosis.prefilter import AnyOf, PatternCache, Prefilter
from bot.core.diagnosis.signatures import CompiledSignature, compile_signature, scans_logs
from bot.core.linear import Found
from bot.core.model import ObjectRef, Signal, SourceKind
from bot.core.normalize import (
    COLOUR_MARK,
    colour_spans,
    unwrap,
    without_colour,
    without_dedup,
    without_spans,
)
from bot.core.playbooks.library import Library

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
OVERLAP_LINES = 12
OVERLAP_MAX_BYTES = 64 << 10
MAX_LINE_BYTES = 8 << 20
EVIDENCE_CHARS = 500
# Hard wraps come from pastes (a terminal, a chat, an issue), not from log files:
# only inputs up to this size are also read with their wrapped lines joined.
UNWRAP_MAX_BYTES = 256 << 10


@dataclass
class Hit:
    """A signature matched: how often, the first evidence lines, and the first captures."""

    sig: CompiledSignature
    signal: Signal
    captures: dict[str, str]
    evidence: list[tuple[str, int | None]]
    count: int = 1
    max_evidence: int = 5

    @property
    def full(self) -> bool:
        """No further match can add evidence lines (captures are kept from the first ones)."""
        return len(self.evidence) >= self.max_evidence

    def add(self, text: str, line: int | None, captures: dict[str, str], times: int = 1) -> None:
        self.count += times
        for key, value in captures.items():
            self.captures.setdefault(key, value)
        if len(self.evidence) < self.max_evidence:
            self.evidence.append((text, line))


@dataclass
class _LogState:
    hits: dict[int, Hit] = field(default_factory=dict)


class Classifier:
    """Runs a library's signatures over signals and log streams."""

    def __init__(self, library: Library, cache: PatternCache | None = None) -> None:
        """`cache`: where compiled pattern databases are kept between runs."""
        self.library = library
        compiled: list[CompiledSignature] = []
        for loaded in library.playbooks:
            for signature in loaded.playbook.match:
                compiled.append(compile_signature(len(compiled), loaded, signature))
        self.signatures = compiled
        self._noise = AnyOf([n.regex for n in library.noise], cache)
        self._unless_sigs = [  # by their patterns: each regex is compiled when a line asks
            s
            for s in compiled
            if (s.signature.unless or s.loaded.playbook.unless) and not s.signature.weak
        ]
        self._any_unless = AnyOf(
            sorted(
                {
                    f"(?i){u}" if s.signature.ignore_case else u
                    for s in self._unless_sigs
                    for u in (*s.signature.unless, *s.loaded.playbook.unless)
                }
            ),
            cache,
        )
        regex_sigs = [s for s in compiled if s.has_regex]
        self._prefilter = Prefilter(regex_sigs, single_match=True, cache=cache)
        self.log_signatures = [s for s in regex_sigs if scans_logs(s)]
        self._log_prefilter = Prefilter(
            self.log_signatures, single_match=False, marker=COLOUR_MARK, cache=cache
        )
        self._plain: dict[SourceKind, list[CompiledSignature]] = {
            source: [s for s in compiled if not s.has_regex and s.applies_to(source)]
            for source in SourceKind
        }

    def known_line(self, text: str) -> bool:
        """Whether a line is one the playbooks know to be benign: a noise line, or one a
        strong signature's regex finds and its `unless` then sets aside (its author looked
        at that very line and said it is not the failure; a weak signature's `unless` only
        narrows what it takes as evidence)."""
        text, _ = without_dedup(text)
        if self._noise.search(text):
            return True
        if not self._any_unless.search(text):  # one scan for the usual line no unless takes
            return False
        return any(
            any(p.search(text) for p in s.unless)
            and s.text_regex is not None
            and s.text_regex.search(text) is not None
            for s in self._unless_sigs
        )

    # -- structured signals -------------------------------------------------

    def classify(self, signal: Signal) -> list[Hit]:
        """The signatures one event-sized signal matches."""
        hits: list[Hit] = []
        for sig in self._plain[signal.source]:
            if sig.structured_match(signal) and not self._benign(sig, signal.text):
                hits.append(self._hit(sig, signal, {}, signal.text, signal.line))
        if not signal.text:
            return hits
        data = signal.text.encode()
        if len(data) > MIN_WINDOW:
            return hits + self._classify_long(signal, data)
        for sig in self._prefilter.candidates(data):
            if not sig.applies_to(signal.source) or not sig.structured_match(signal):
                continue
            assert sig.text_regex is not None
            match = sig.text_regex.search(signal.text)
            if match is None:
                continue
            evidence = _line_around(signal.text, match.start(), match.end())
            if self._benign(sig, evidence):
                continue
            captures = {k: v for k, v in match.groupdict().items() if v is not None}
            hits.append(self._hit(sig, signal, captures, evidence, signal.line))
        return hits

    def _classify_long(self, signal: Signal, data: bytes) -> list[Hit]:
        """A signal whose text is longer than a window: each candidate confirmed around
        where Hyperscan saw it end (`bot.core.diagnosis.confirm`), as a log line is."""
        hits: list[Hit] = []
        candidates, _ = self._prefilter.line_candidates(data)
        for sig, end in candidates:
            if not sig.applies_to(signal.source) or not sig.structured_match(signal):
                continue
            if end == -1:
                region = (0, len(data))
            else:
                spans = sig.spans_lines
                region = _region_before(data, end, 0) if spans else _line_bounds(data, end - 1, end)
            found = next(confirm(sig, data, region, end, sig.id in self._prefilter.exact), None)
            if found is None:
                continue
            start, stop, match = found
            first, last = line_window(data, start, stop, confirm_window(sig))
            evidence = data[first:last].decode("utf-8", "replace").rstrip("\r")
            if self._benign(sig, evidence):
                continue
            captures = {
                k: v.decode("utf-8", "replace")
                for k, v in match.groupdict().items()
                if v is not None
            }
            hits.append(self._hit(sig, signal, captures, evidence, signal.line))
        return hits

    def _hit(
        self,
        sig: CompiledSignature,
        signal: Signal,
        captures: dict[str, str],
        evidence: str,
        line: int | None,
    ) -> Hit:
        spec = sig.loaded.playbook.evidence
        return Hit(sig, signal, captures, [(_clip(evidence), line)], max_evidence=spec.max_lines)

    def _benign(self, sig: CompiledSignature, evidence: str) -> bool:
        """Whether the evidence is one of the benign lines; Ray's dedup suffix only says
        how often a line was seen, so it never makes a line benign."""
        evidence, _ = without_dedup(evidence)
        return any(p.search(evidence) for p in sig.unless) or self._noise.search(evidence)

    # -- logs -----------------------------------------------------------------

    def scan_log(
        self,
        chunks: Iterable[bytes],
        source: SourceKind = SourceKind.DRIVER_LOG,
        origin: str = "",
        obj: ObjectRef | None = None,
        workload: ObjectRef | None = None,
    ) -> list[Hit]:
        """Hits of log signatures in a byte stream, one per signature, in first-seen order."""
        state = _LogState()
        template = Signal(source=source, text="", origin=origin, obj=obj, workload=workload)
        pasted: list[bytes] | None = []
        size = 0
        for window, first_line, fresh_from in _windows(chunks):
            self._scan_window(window, first_line, fresh_from, source, template, state)
            if pasted is not None:
                size += len(window) - fresh_from
                pasted = [*pasted, window[fresh_from:]] if size <= UNWRAP_MAX_BYTES else None
        if pasted:
            self._scan_unwrapped(b"".join(pasted), source, template, state)
        return list(state.hits.values())

    def _scan_unwrapped(
        self, data: bytes, source: SourceKind, template: Signal, state: _LogState
    ) -> None:
        """A paste's hard-wrapped lines joined again, scanned for the signatures the
        lines as written did not show; evidence is the user's lines, with their numbers."""
        unwrapped = unwrap(data)  # widths as pasted: a terminal counted the codes too
        if unwrapped is None:
            return
        joined, firsts = unwrapped
        text = without_colour(joined)
        original = data.decode("utf-8", "replace").split("\n")
        candidates, _ = self._log_prefilter.line_candidates(text)
        lines = _LineCounter(text, 0)
        for sig, end in candidates:
            if not sig.applies_to(source) or sig.id in state.hits:
                continue
            region = (0, len(text)) if end == -1 else _region_before(text, end, 0)
            for start, stop, match in confirm(sig, text, region, end):
                first, last = lines.at(start), lines.at(max(stop - 1, start))
                upto = firsts[last + 1] if last + 1 < len(firsts) else len(original)
                shown = "\n".join(original[firsts[first] : upto]).rstrip("\r")
                bounds = line_window(text, start, stop, confirm_window(sig))
                evidence = text[bounds[0] : bounds[1]].decode("utf-8", "replace")
                self._record(sig, match, evidence, shown, firsts[first] + 1, template, state)
                break

    def _scan_window(
        self,
        window: bytes,
        first_line: int,
        fresh_from: int,
        source: SourceKind,
        template: Signal,
        state: _LogState,
    ) -> None:
        """Re-check with `re` only the lines Hyperscan pointed at (plus a few lines before,
        for signatures that span lines), and record each new match once. Colour codes
        are removed first when the window has any; line prefixes are removed from the
        lines being re-checked for signatures anchored at a line start."""
        candidates, marks = self._log_prefilter.line_candidates(window)
        view = _View(window, marks)
        if marks:
            candidates, _ = self._log_prefilter.line_candidates(view.scan)
        scan = view.scan
        fresh = view.scan_offset(fresh_from)
        lines = _LineCounter(scan, first_line)
        done_until: dict[int, int] = {}
        exact = self._log_prefilter.exact
        for sig, end in candidates:
            if not sig.applies_to(source):
                continue
            hit = state.hits.get(sig.id)
            full = hit is not None and hit.full
            if hit is not None and full and sig.id in exact:
                if end > max(fresh, done_until.get(sig.id, -1)):
                    done_until[sig.id] = end
                    first, last = line_window(scan, end - 1, end, confirm_window(sig))
                    self._count(sig, hit, scan[first:last].decode("utf-8", "replace"))
                continue
            if end == -1:
                region = (0, len(scan))
            elif not sig.spans_lines:
                region = _line_bounds(scan, end - 1, end)
            else:
                region = _region_before(scan, end, done_until.get(sig.id, 0))
            for start, stop, match in confirm(sig, scan, region, end, sig.id in exact):
                if stop <= max(fresh, done_until.get(sig.id, -1)):
                    continue
                done_until[sig.id] = stop
                first, last = line_window(scan, start, stop, confirm_window(sig))
                evidence = scan[first:last].decode("utf-8", "replace").rstrip("\r")
                if full and hit is not None:  # confirmed; nothing more to keep but the count
                    self._count(sig, hit, evidence)
                    continue
                line = lines.at(start)
                shown = view.original_lines(first, last, evidence)
                self._record(sig, match, evidence, shown, line, template, state)

    def _count(self, sig: CompiledSignature, hit: Hit, evidence: str) -> None:
        """One more match of a signature whose evidence and captures are complete:
        Hyperscan's own match stands (no `re` re-run), the line is only checked for noise."""
        plain, times = without_dedup(evidence)
        if not self._benign(sig, plain):
            hit.count += times

    def _record(
        self,
        sig: CompiledSignature,
        match: Found[bytes],
        evidence: str,
        shown: str,
        line: int,
        template: Signal,
        state: _LogState,
    ) -> None:
        if self._benign(sig, evidence):
            return
        _, times = without_dedup(evidence)
        captures = {
            k: v.decode("utf-8", "replace") for k, v in match.groupdict().items() if v is not None
        }
        existing = state.hits.get(sig.id)
        if existing is None:
            signal = _with_text(template, shown, line)
            hit = self._hit(sig, signal, captures, shown, line)
            hit.count = times
            state.hits[sig.id] = hit
        else:
            existing.add(_clip(shown), line, captures, times)


class _View:
    """A window as scanned (colour codes removed, when it had any) and as the user wrote it."""

    def __init__(self, window: bytes, marks: list[int]) -> None:
        """`marks`: where the prefilter saw colour codes begin (the end of their `ESC[`)."""
        self.window = window
        spans = colour_spans(window, marks) if marks else []
        self.scan = without_spans(window, spans)
        # For each removed code: where it was in `scan`, and the bytes removed up to it.
        self._at: list[int] = []
        self._removed: list[int] = []
        removed = 0
        for start, end in spans:
            self._at.append(start - removed)
            removed += end - start
            self._removed.append(removed)

    def scan_offset(self, offset: int) -> int:
        """The offset in `scan` of the line that starts at `offset` in the window."""
        if self.scan is self.window or offset <= 0:
            return offset
        return nth_line_start(self.scan, self.window.count(b"\n", 0, offset))

    def original_lines(self, start: int, end: int, scanned: str) -> str:
        """The user's text of the lines `scan[start:end]` (`scanned`, when unchanged)."""
        if self.scan is self.window:
            return scanned
        text = self.window[self._original(start, strict=True) : self._original(end, strict=False)]
        return text.decode("utf-8", "replace").rstrip("\r")

    def _original(self, offset: int, strict: bool) -> int:
        """The window offset of a scan offset; at a line start (`strict`), the codes that
        begin the line are kept in front of it."""
        index = (bisect_left if strict else bisect_right)(self._at, offset)
        return offset + (self._removed[index - 1] if index else 0)


class _LineCounter:
    """Line numbers of offsets in a window, counted from the last offset asked for."""

    def __init__(self, window: bytes, first_line: int) -> None:
        self._window = window
        self._offset = 0
        self._line = first_line

    def at(self, offset: int) -> int:
        if offset < self._offset:
            self._line -= self._window.count(b"\n", offset, self._offset)
        else:
            self._line += self._window.count(b"\n", self._offset, offset)
        self._offset = offset
        return self._line


def _region_before(window: bytes, end: int, floor: int) -> tuple[int, int]:
    """From up to OVERLAP_LINES lines before `end` (not before the line holding `floor`)
    to the end of the line holding `end`."""
    line_end = window.find(b"\n", end)
    stop = len(window) if line_end == -1 else line_end + 1
    start = end
    lowest = window.rfind(b"\n", 0, floor) + 1 if floor > 0 else 0
    for _ in range(OVERLAP_LINES):
        previous = window.rfind(b"\n", 0, max(start - 1, 0))
        start = previous + 1
        if previous == -1 or start <= lowest:
            break
    return max(start, lowest), stop


def _with_text(template: Signal, text: str, line: int) -> Signal:
    return Signal(
        source=template.source,
        text=text,
        origin=template.origin,
        obj=template.obj,
        workload=template.workload,
        line=line,
    )


def _windows(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, int, int]]:
    """(window, line number of its first line, offset where unseen bytes start).

    Windows end on a line break; each starts with the last few lines of the
    previous one so a signature that spans lines is seen whole at least once.
    """
    carry = b""
    overlap = b""
    overlap_line = 1
    for chunk in chunks:
        if not chunk:
            continue
        cut = chunk.rfind(b"\n")
        if cut == -1 and len(carry) + len(chunk) < MAX_LINE_BYTES:
            carry += chunk
            continue
        if cut == -1:  # a line too long to wait for its end: cut it here
            window = b"".join((overlap, carry, chunk))
            carry = b""
        else:  # one copy: the overlap, the carried start of a line, the chunk's full lines
            window = b"".join((overlap, carry, memoryview(chunk)[: cut + 1]))
            carry = chunk[cut + 1 :]
        yield window, overlap_line, len(overlap)
        overlap, overlap_line = _tail_lines(window, overlap_line)
    if carry:
        window = overlap + carry
        yield window, overlap_line, len(overlap)


def _tail_lines(window: bytes, first_line: int) -> tuple[bytes, int]:
    """The last OVERLAP_LINES lines of `window` (at most OVERLAP_MAX_BYTES) and the
    number of the first of them."""
    start = len(window)
    for _ in range(OVERLAP_LINES):
        previous = window.rfind(b"\n", 0, max(start - 1, 0))
        candidate = previous + 1
        if len(window) - candidate > OVERLAP_MAX_BYTES:
            break
        start = candidate
        if previous == -1:
            break
    return window[start:], first_line + window.count(b"\n", 0, start)


def _line_bounds(data: bytes, start: int, end: int) -> tuple[int, int]:
    """(start of the line holding `start`, end of the line holding the last byte before `end`)."""
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", max(end - 1, start))
    return line_start, len(data) if line_end == -1 else line_end


def _line_around(text: str, start: int, end: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", max(end - 1, start))
    if line_end == -1:
        line_end = len(text)
    return text[line_start:line_end].rstrip("\r")


def _clip(text: str) -> str:
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"

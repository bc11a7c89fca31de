"""Classification: playbooks x signals -> hits, fast.

Every regex of every playbook is compiled once into one Hyperscan database,
used as a prefilter: a text is scanned once, whatever the number of playbooks,
and Python `re` re-runs only the signatures that Hyperscan says matched, to
get exact positions and named-group captures. Logs are scanned as bytes in
large chunks (with a few lines of overlap so signatures spanning lines are
not lost at chunk borders), so a 1 GB file never sits in memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.core.model import LOG_SOURCES, ObjectRef, Signal, SourceKind
from bot.core.playbooks import Library, LoadedPlaybook, Signature

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
OVERLAP_LINES = 12
OVERLAP_MAX_BYTES = 64 << 10
MAX_LINE_BYTES = 8 << 20
EVIDENCE_CHARS = 500

_hs: Any
try:
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised only where no wheel exists
    _hs = None


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


@dataclass
class Hit:
    """A signature matched: how often, the first evidence lines, and the first captures."""

    sig: CompiledSignature
    signal: Signal
    captures: dict[str, str]
    evidence: list[tuple[str, int | None]]
    count: int = 1
    max_evidence: int = 5

    def add(self, text: str, line: int | None, captures: dict[str, str]) -> None:
        self.count += 1
        for key, value in captures.items():
            self.captures.setdefault(key, value)
        if len(self.evidence) < self.max_evidence:
            self.evidence.append((text, line))


def _flags(signature: Signature) -> int:
    return (re.IGNORECASE if signature.ignore_case else 0) | re.MULTILINE


def _compile(index: int, loaded: LoadedPlaybook, signature: Signature) -> CompiledSignature:
    flags = _flags(signature)
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
    )


class Prefilter:
    """Which regex signatures may match a buffer, from one scan of it."""

    def __init__(self, signatures: list[CompiledSignature], single_match: bool) -> None:
        self._single_match = single_match
        self._always: list[CompiledSignature] = []
        self._by_id = {s.id: s for s in signatures}
        self._db: Any = None
        if _hs is None:
            log.warning("hyperscan is not installed: classification runs each regex in turn")
            self._always = list(signatures)
            return
        self._compile_database(signatures)

    def _compile_database(self, signatures: list[CompiledSignature]) -> None:
        """One database of all signatures; if Hyperscan rejects one, each is probed alone
        and the ones it cannot take (even in PREFILTER mode) are always run with `re`."""
        if not signatures:
            return
        try:
            self._db = self._database([(s, self._likely_flags(s)) for s in signatures])
            return
        except _hs.error:
            pass
        accepted: list[tuple[CompiledSignature, int]] = []
        for sig in signatures:
            flags = self._accepted_flags(sig)
            if flags is None:
                log.info("signature %s/%s runs without prefilter", sig.playbook_id, sig.id)
                self._always.append(sig)
            else:
                accepted.append((sig, flags))
        self._db = self._database(accepted) if accepted else None

    def _database(self, entries: list[tuple[CompiledSignature, int]]) -> Any:
        expressions = [_pattern(s) for s, _ in entries]
        ids = [s.id for s, _ in entries]
        flags = [f for _, f in entries]
        cache = _cache_file(expressions, ids, flags)
        db = _load_cached(cache)
        if db is None:
            db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
            db.compile(expressions=expressions, ids=ids, elements=len(entries), flags=flags)
            _store_cached(cache, db)
        self._scratch = _hs.Scratch(db)
        return db

    def _base_flags(self, sig: CompiledSignature) -> int:
        flags: int = _hs.HS_FLAG_MULTILINE
        if self._single_match:
            flags |= _hs.HS_FLAG_SINGLEMATCH
        if sig.signature.ignore_case:
            flags |= _hs.HS_FLAG_CASELESS
        return flags

    def _likely_flags(self, sig: CompiledSignature) -> int:
        """Base flags, plus PREFILTER for constructs Hyperscan only approximates
        (lookaround, back-references, atomic groups, possessive quantifiers, conditionals)."""
        flags = self._base_flags(sig)
        if _NEEDS_PREFILTER.search(sig.signature.regex or ""):
            flags |= _hs.HS_FLAG_PREFILTER
        return flags

    def _accepted_flags(self, sig: CompiledSignature) -> int | None:
        base = self._base_flags(sig)
        for flags in (base, base | _hs.HS_FLAG_PREFILTER):
            try:
                probe = _hs.Database(mode=_hs.HS_MODE_BLOCK)
                probe.compile(expressions=[_pattern(sig)], ids=[0], elements=1, flags=[flags])
            except _hs.error:
                continue
            return flags
        return None

    def candidates(self, data: bytes) -> list[CompiledSignature]:
        """Signatures that may match somewhere in `data` (a small text)."""
        found: list[CompiledSignature] = list(self._always)
        if self._db is None or not data:
            return found
        ids: set[int] = set()

        def on_match(pattern_id: int, start: int, end: int, flags: int, ctx: Any) -> None:
            ids.add(pattern_id)

        self._db.scan(data, match_event_handler=on_match, scratch=self._scratch)
        found.extend(self._by_id[i] for i in sorted(ids))
        return found

    def line_candidates(self, data: bytes) -> list[tuple[CompiledSignature, int]]:
        """(signature, offset where a match may end) at most once per signature and line,
        in order; signatures Hyperscan cannot take are reported with offset -1."""
        found: list[tuple[CompiledSignature, int]] = [(s, -1) for s in self._always]
        if self._db is None or not data:
            return found
        line_end_of: dict[int, int] = {}
        by_id = self._by_id
        find = data.find

        def on_match(pattern_id: int, start: int, end: int, flags: int, ctx: Any) -> None:
            if end <= line_end_of.get(pattern_id, -1):
                return
            line_end = find(b"\n", end)
            line_end_of[pattern_id] = len(data) if line_end == -1 else line_end
            found.append((by_id[pattern_id], end))

        self._db.scan(data, match_event_handler=on_match, scratch=self._scratch)
        return found


@dataclass
class _LogState:
    hits: dict[int, Hit] = field(default_factory=dict)


class Classifier:
    """Runs a library's signatures over signals and log streams."""

    def __init__(self, library: Library) -> None:
        self.library = library
        compiled: list[CompiledSignature] = []
        for loaded in library.playbooks:
            for signature in loaded.playbook.match:
                compiled.append(_compile(len(compiled), loaded, signature))
        self.signatures = compiled
        self._noise = tuple(re.compile(n.regex) for n in library.noise)
        regex_sigs = [s for s in compiled if s.text_regex is not None]
        self._prefilter = Prefilter(regex_sigs, single_match=True)
        self.log_signatures = [s for s in regex_sigs if _scans_logs(s)]
        self._log_prefilter = Prefilter(self.log_signatures, single_match=False)
        self._plain: dict[SourceKind, list[CompiledSignature]] = {
            source: [s for s in compiled if s.text_regex is None and s.applies_to(source)]
            for source in SourceKind
        }

    # -- structured signals -------------------------------------------------

    def classify(self, signal: Signal) -> list[Hit]:
        """The signatures one event-sized signal matches."""
        hits: list[Hit] = []
        for sig in self._plain[signal.source]:
            if sig.structured_match(signal) and not self._benign(sig, signal.text):
                hits.append(self._hit(sig, signal, {}, signal.text, signal.line))
        if not signal.text:
            return hits
        for sig in self._prefilter.candidates(signal.text.encode()):
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
        return any(p.search(evidence) for p in sig.unless) or any(
            p.search(evidence) for p in self._noise
        )

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
        for window, first_line, fresh_from in _windows(chunks):
            self._scan_window(window, first_line, fresh_from, source, template, state)
        return list(state.hits.values())

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
        for signatures that span lines), and record each new match once."""
        lines = _LineCounter(window, first_line)
        done_until: dict[int, int] = {}
        for sig, end in self._log_prefilter.line_candidates(window):
            if not sig.applies_to(source):
                continue
            assert sig.bytes_regex is not None
            if end == -1:
                region = (0, len(window))
            else:
                region = _region_before(window, end, done_until.get(sig.id, 0))
            for match in sig.bytes_regex.finditer(window, *region):
                if match.end() <= max(fresh_from, done_until.get(sig.id, -1)):
                    continue
                done_until[sig.id] = match.end()
                self._record(sig, match, window, lines, template, state)

    def _record(
        self,
        sig: CompiledSignature,
        match: re.Match[bytes],
        window: bytes,
        lines: _LineCounter,
        template: Signal,
        state: _LogState,
    ) -> None:
        evidence = _bytes_line_around(window, match.start(), match.end())
        if self._benign(sig, evidence):
            return
        line = lines.at(match.start())
        captures = {
            k: v.decode("utf-8", "replace") for k, v in match.groupdict().items() if v is not None
        }
        existing = state.hits.get(sig.id)
        if existing is None:
            signal = _with_text(template, evidence, line)
            state.hits[sig.id] = self._hit(sig, signal, captures, evidence, line)
        else:
            existing.add(_clip(evidence), line, captures)


class _LineCounter:
    """Line numbers of offsets in a window, counted incrementally (offsets mostly ascend)."""

    def __init__(self, window: bytes, first_line: int) -> None:
        self._window = window
        self._first_line = first_line
        self._offset = 0
        self._line = first_line

    def at(self, offset: int) -> int:
        if offset < self._offset:
            self._offset, self._line = 0, self._first_line
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


_NEEDS_PREFILTER = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=|\(\?>|[*+?}]\+|\(\?\(")


def _cache_file(expressions: list[bytes], ids: list[int], flags: list[int]) -> Path | None:
    """Where a compiled database for exactly these patterns is kept between runs
    (compiling the library takes a second or two; loading it, milliseconds)."""
    base = os.environ.get("PITCREW_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pitcrew"
    )
    if not base or base == "off":
        return None
    digest = hashlib.sha256()
    digest.update(_hs_version().encode())
    for expression, pattern_id, flag in zip(expressions, ids, flags, strict=True):
        digest.update(b"%d\x00%d\x00%s\x00" % (pattern_id, flag, expression))
    return Path(base) / f"hyperscan-{digest.hexdigest()[:32]}.db"


def _hs_version() -> str:
    return str(getattr(_hs, "__version__", "")) + str(getattr(_hs, "HS_VERSION", ""))


def _load_cached(path: Path | None) -> Any:
    if path is None or not path.is_file():
        return None
    try:
        return _hs.loadb(path.read_bytes(), mode=_hs.HS_MODE_BLOCK)
    except (OSError, _hs.error, TypeError, ValueError):
        log.info("ignoring unreadable pattern cache %s", path)
        return None


def _store_cached(path: Path | None, db: Any) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(_hs.dumpb(db))
        partial.replace(path)
    except OSError as error:
        log.info("cannot cache compiled patterns in %s: %s", path, error)


def _scans_logs(sig: CompiledSignature) -> bool:
    """Log text has no reason or fields: only plain regex signatures that allow a log source."""
    if sig.reason is not None or sig.fields:
        return False
    return any(sig.applies_to(source) for source in LOG_SOURCES)


def _pattern(sig: CompiledSignature) -> bytes:
    assert sig.signature.regex is not None
    return sig.signature.regex.encode()


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
        buffer = carry + chunk if carry else chunk
        cut = buffer.rfind(b"\n")
        if cut == -1 and len(buffer) < MAX_LINE_BYTES:
            carry = buffer
            continue
        if cut == -1:
            cut = len(buffer) - 1
        complete, carry = buffer[: cut + 1], buffer[cut + 1 :]
        window = overlap + complete
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


def _bytes_line_around(data: bytes, start: int, end: int) -> str:
    line_start = data.rfind(b"\n", 0, start) + 1
    line_end = data.find(b"\n", max(end - 1, start))
    if line_end == -1:
        line_end = len(data)
    return data[line_start:line_end].decode("utf-8", "replace").rstrip("\r")


def _line_around(text: str, start: int, end: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", max(end - 1, start))
    if line_end == -1:
        line_end = len(text)
    return text[line_start:line_end].rstrip("\r")


def _clip(text: str) -> str:
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"

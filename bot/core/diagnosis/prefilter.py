"""Hyperscan as a prefilter: which signatures may match a buffer, from one scan of it.

Every regex of every playbook is compiled once into one database (kept between
runs by the caller's `PatternCache`, the user's cache directory for the CLI and
the daemon); a scan reports which signatures may match and where their
matches end, and the classifier re-runs Python `re` only there. Signatures
Hyperscan cannot take run with `re` alone.
"""

from __future__ import annotations

import hashlib
import logging
import re
from contextlib import suppress
from typing import Any, Protocol

from bot.core import linear
from bot.core.diagnosis.signatures import CompiledSignature, hyperscan_pattern

log = logging.getLogger(__name__)

_hs: Any
try:
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised only where no wheel exists
    _hs = None


class PatternCache(Protocol):
    """Compiled pattern databases kept between runs, by a key of what made them."""

    def load(self, key: str) -> bytes | None: ...

    def save(self, key: str, data: bytes) -> None: ...


class Prefilter:
    """Which regex signatures may match a buffer, from one scan of it."""

    def __init__(
        self,
        signatures: list[CompiledSignature],
        single_match: bool,
        marker: bytes | None = None,
        cache: PatternCache | None = None,
    ) -> None:
        """`marker`: a regex whose presence `line_candidates` reports too, found in the
        same scan (the classifier uses it for colour codes); `cache`: where a database
        compiled before for the same patterns is found (compiling takes a second)."""
        self._cache = cache
        self._single_match = single_match
        self._marker = marker
        self._marker_id = max((s.id for s in signatures), default=-1) + 1
        self._always: list[CompiledSignature] = []
        self.exact: set[int] = set()
        """Signatures whose Hyperscan matches are their regex's own (no approximation)."""
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
            entries = [(s, self._likely_flags(s)) for s in signatures]
            self._db = self._database(entries)
            self._note_exact(entries)
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
        self._note_exact(accepted)

    def _note_exact(self, entries: list[tuple[CompiledSignature, int]]) -> None:
        self.exact = {
            s.id for s, flags in entries if not flags & _hs.HS_FLAG_PREFILTER and not s.anchored
        }

    def _database(self, entries: list[tuple[CompiledSignature, int]]) -> Any:
        expressions = [hyperscan_pattern(s) for s, _ in entries]
        ids = [s.id for s, _ in entries]
        flags = [f for _, f in entries]
        if self._marker is not None:
            expressions.append(self._marker)
            ids.append(self._marker_id)
            flags.append(0)  # every occurrence: the caller wants where they are
        key = _cache_key(expressions, ids, flags)
        db = _load_cached(self._cache, key)
        if db is None:
            db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
            db.compile(expressions=expressions, ids=ids, elements=len(ids), flags=flags)
            _store_cached(self._cache, key, db)
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
                probe.compile(
                    expressions=[hyperscan_pattern(sig)], ids=[0], elements=1, flags=[flags]
                )
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

    def line_candidates(self, data: bytes) -> tuple[list[tuple[CompiledSignature, int]], list[int]]:
        """(signature, offset where a match may end) at most once per signature and line,
        in order (signatures Hyperscan cannot take are reported with offset -1), and
        the offsets where the marker's occurrences end."""
        found: list[tuple[CompiledSignature, int]] = [(s, -1) for s in self._always]
        if self._db is None or not data:
            if self._marker is None:
                return found, []
            return found, [m.end() for m in re.finditer(self._marker, data)]
        line_end_of: dict[int, int] = {}
        by_id = self._by_id
        find = data.find
        marker_id = self._marker_id
        marks: list[int] = []

        def on_match(pattern_id: int, start: int, end: int, flags: int, ctx: Any) -> None:
            if pattern_id == marker_id:
                marks.append(end)
                return
            if end <= line_end_of.get(pattern_id, -1):
                return
            line_end = find(b"\n", end)
            line_end_of[pattern_id] = len(data) if line_end == -1 else line_end
            found.append((by_id[pattern_id], end))

        self._db.scan(data, match_event_handler=on_match, scratch=self._scratch)
        return found, marks


class AnyOf:
    """Whether a line matches any of some regexes: one Hyperscan scan of the line
    (Python `re` tries each regex in turn, which costs more than the line itself)."""

    def __init__(self, patterns: list[str], cache: PatternCache | None = None) -> None:
        self._patterns = [linear.compiled(p) for p in patterns]
        self._db: Any = None
        if _hs is None or not patterns:
            return
        flags = [_hs.HS_FLAG_SINGLEMATCH | _hs.HS_FLAG_ALLOWEMPTY] * len(patterns)
        expressions = [p.encode() for p in patterns]
        ids = list(range(len(patterns)))
        key = _cache_key(expressions, ids, flags)
        db = _load_cached(cache, key)
        if db is None:
            try:
                db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
                db.compile(expressions=expressions, ids=ids, flags=flags)
            except _hs.error:
                log.info("noise patterns run with Python re: Hyperscan rejects one")
                return
            _store_cached(cache, key, db)
        self._db = db
        self._scratch = _hs.Scratch(db)

    def search(self, text: str) -> bool:
        if self._db is None:
            return any(p.search(text) for p in self._patterns)
        found: list[int] = []

        def on_match(pattern_id: int, start: int, end: int, flags: int, ctx: Any) -> bool:
            found.append(pattern_id)
            return True  # stop scanning: one match answers the question

        with suppress(_hs.error):  # raised when the handler stops the scan
            self._db.scan(text.encode(), match_event_handler=on_match, scratch=self._scratch)
        return bool(found)


_NEEDS_PREFILTER = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=|\(\?>|[*+?}]\+|\(\?\(")


def _cache_key(expressions: list[bytes], ids: list[int], flags: list[int]) -> str:
    """What a compiled database for exactly these patterns is kept under between runs
    (compiling the library takes a second or two; loading it, milliseconds)."""
    digest = hashlib.sha256()
    digest.update(_hs_version().encode())
    for expression, pattern_id, flag in zip(expressions, ids, flags, strict=True):
        digest.update(b"%d\x00%d\x00%s\x00" % (pattern_id, flag, expression))
    return digest.hexdigest()[:32]


def _hs_version() -> str:
    return str(getattr(_hs, "__version__", "")) + str(getattr(_hs, "HS_VERSION", ""))


def _load_cached(cache: PatternCache | None, key: str) -> Any:
    data = cache.load(key) if cache is not None else None
    if data is None:
        return None
    try:
        return _hs.loadb(data, mode=_hs.HS_MODE_BLOCK)
    except (_hs.error, TypeError, ValueError):
        log.info("ignoring an unreadable compiled pattern database %s", key)
        return None


def _store_cached(cache: PatternCache | None, key: str, db: Any) -> None:
    if cache is not None:
        cache.save(key, _hs.dumpb(db))

"""The user's cache of what pitcrew derives from its playbooks, so a start is fast.

Why this exists: `pitcrew diagnose` is run by hand over and over, and most of a
cold start is turning the same playbook files into the same values (parsing and
validating the YAML, compiling the Hyperscan database). Those results are kept in
one directory ($PITCREW_CACHE_DIR, else $XDG_CACHE_HOME/pitcrew or ~/.cache/pitcrew;
`off` disables it) under a name that is the hash of everything they came from:
the input bytes and, for values of pitcrew's own classes, the code that made them
(pitcrew's version, Python's, and the text of `bot/core`). So an entry is never
used across versions, any edit makes a new one, and deleting the directory is
always safe. An entry is only read if it belongs to the user and nobody else can
write it; an unreadable entry is ignored and rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import stat
import sys
from functools import cache
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)

KEEP_PER_KIND = 16
T = TypeVar("T")


def cache_dir() -> Path | None:
    """The cache directory, or None when caching is switched off."""
    base = os.environ.get("PITCREW_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pitcrew"
    )
    if not base or base == "off":
        return None
    return Path(base)


@cache
def code_fingerprint() -> bytes:
    """pitcrew's version, the interpreter's, and a digest of the core's source text."""
    from bot import __version__

    digest = hashlib.sha256(f"{__version__}\x00{sys.version}\x00".encode())
    core = Path(__file__).resolve().parents[2] / "core"
    for path in sorted(core.rglob("*.py")):
        digest.update(path.relative_to(core).as_posix().encode() + b"\x00")
        digest.update(path.read_bytes())
    return digest.digest()


def entry(kind: str, key: str, suffix: str) -> Path | None:
    """Where the `kind` entry for `key` lives (None when caching is off)."""
    base = cache_dir()
    return None if base is None else base / f"{kind}-{key}{suffix}"


def read(path: Path | None) -> bytes | None:
    """The entry's bytes if it exists and is the user's alone, else None."""
    if path is None:
        return None
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            log.info("ignoring cache entry %s: not the user's alone", path)
            return None
        return path.read_bytes()
    except OSError:
        return None


def write(path: Path | None, data: bytes) -> None:
    """Write an entry atomically (readers see all of it or none), then drop the oldest
    entries of its kind beyond KEEP_PER_KIND; a cache that cannot be written is skipped."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.chmod(0o600)
        partial.replace(path)
    except OSError as error:
        log.info("cannot write cache entry %s: %s", path, error)
        return
    _prune(path)


def _prune(path: Path) -> None:
    kind = path.name.split("-", 1)[0]
    try:
        siblings = sorted(
            path.parent.glob(f"{kind}-*{path.suffix}"),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in siblings[KEEP_PER_KIND:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def read_value(path: Path | None, expected: type[T]) -> T | None:
    """A value written by `write_value`, if the entry is there, readable and of that type."""
    data = read(path)
    if data is None:
        return None
    try:
        value = pickle.loads(data)
    except Exception as error:  # any unreadable entry (truncated, from other code) is a miss
        log.info("ignoring unreadable cache entry %s: %s", path, error)
        return None
    return value if isinstance(value, expected) else None


def write_value(path: Path | None, value: object) -> None:
    write(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


class Entries:
    """The entries of one kind, by key: the core's `PatternCache` (compiled Hyperscan
    databases keyed on their patterns and Hyperscan's version)."""

    def __init__(self, kind: str, suffix: str) -> None:
        self.kind = kind
        self.suffix = suffix

    def load(self, key: str) -> bytes | None:
        return read(entry(self.kind, key, self.suffix))

    def save(self, key: str, data: bytes) -> None:
        write(entry(self.kind, key, self.suffix), data)


PATTERNS = Entries("hyperscan", ".db")

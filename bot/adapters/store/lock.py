"""One daemon per store: an exclusive lock on the store file itself, held while
`pitcrew run` runs.

Why this exists: two daemons on one store file each post the cards, run the
sources and flush the outbox, so every incident got its card twice (and
more). SQLite serializes their writes but cannot tell them apart. The daemon
takes `flock(LOCK_EX)` on the database file, reached by its resolved path,
before it opens the store: a second daemon that reaches the same file through
a symlink, or after someone deleted a file beside it, meets the same lock and
is refused with the holder's pid, host and start time (written, best effort,
into `<resolved store>.lock`, which holds nothing else). The kernel drops the
lock when the holder's process ends, however it ends, so a crash leaves no
stale lock; `flock` and SQLite's own `fcntl` locks do not interfere, and the
descriptor stays open until the store is closed (closing another descriptor
of the file would drop SQLite's locks). Short-lived commands (`pitcrew
approve`, `incidents`) do not take it: they change state only by the store's
compare-and-swap. Running several replicas means a Kubernetes Lease in front
of this, never two writers.

A store whose disk is full is refused before anything is written, in one line
naming the path and the space left (`StoreError`), and nothing in it changes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bot.core.errors import StoreError

# Below this much free space a start is refused: SQLite needs room for its
# write-ahead log and a migration before the daemon takes anything in.
MIN_FREE = 16 << 20


def lock_path(store_path: str) -> Path:
    """Where the holder of the store's lock is described (the lock is on the store)."""
    return Path(f"{os.path.realpath(store_path)}.lock")


def free_space_refusal(store_path: str, minimum: int = MIN_FREE) -> str:
    """Why the store's disk cannot take a start ("" when it can)."""
    resolved = Path(os.path.realpath(store_path))
    try:
        free = shutil.disk_usage(resolved.parent).free
    except OSError:
        return ""  # no answer: let opening the store say what is wrong
    if free >= minimum:
        return ""
    return _full(resolved, free)


def _full(path: Path, free: int | None = None) -> str:
    if free is None:
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(path.parent).free
    left = "an unknown amount" if free is None else _size(free)
    return f"the disk of {path} is full ({left} free); free some space and start again"


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


class StoreLock:
    """The exclusive hold of one store; `release` (or the process's end) lets it go."""

    def __init__(self, store_path: str, min_free: int = MIN_FREE) -> None:
        self.store_path = store_path
        self.min_free = min_free
        self.resolved = Path(os.path.realpath(store_path))
        self.path = lock_path(store_path)
        self._fd: int | None = None

    def acquire(self, create: Callable[[], None]) -> None:
        """Take the lock, or raise StoreError naming who holds it (or the full disk);
        `create` makes the store file when there is none yet (the lock is on it)."""
        full = free_space_refusal(self.store_path, self.min_free)
        if full:
            raise StoreError(self.store_path, full)
        if not self.resolved.exists():
            create()
        try:
            fd = os.open(self.resolved, os.O_RDWR | os.O_CLOEXEC)
        except OSError as error:
            raise StoreError(self.store_path, _cannot(self.resolved, error)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(
                self.store_path,
                f"another pitcrew daemon uses this store ({_describe(self._holder())}); "
                "stop it first, or give this one another store.path",
            ) from None
        self._fd = fd
        self._write_holder()

    def release(self) -> None:
        """Let the lock go; call after the store is closed."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def _write_holder(self) -> None:
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        with contextlib.suppress(OSError):  # only a description: the lock is held already
            self.path.write_text(json.dumps(holder) + "\n", encoding="utf-8")

    def _holder(self) -> dict[str, object]:
        try:
            found = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}


def _cannot(path: Path, error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return _full(path)
    return f"cannot open {path}: {error.strerror}"


def _describe(holder: dict[str, object]) -> str:
    if "pid" not in holder:
        return "holder unknown"
    return f"pid {holder['pid']} on host {holder.get('host', '?')} since {holder.get('since', '?')}"

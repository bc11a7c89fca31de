"""One daemon per store: an exclusive lock on a file beside the store, held while
`pitcrew run` runs.

Why this exists: two daemons on one store file each post the cards, run the
sources and flush the outbox, so every incident got its card twice (and
more). SQLite serializes their writes but cannot tell them apart. The daemon
takes `flock(LOCK_EX)` on `<store>.lock` before it opens the store; a second
one is refused with the holder's pid, host and start time, which the holder
wrote into the lock file. The kernel drops the lock when the holder's
process ends, however it ends, so a crash leaves no stale lock. Short-lived
commands (`pitcrew approve`, `incidents`) do not take it: they change state
only by the store's compare-and-swap. Running several replicas means a
Kubernetes Lease in front of this, never two writers.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from bot.core.errors import StoreError


def lock_path(store_path: str) -> Path:
    return Path(f"{store_path}.lock")


class StoreLock:
    """The exclusive hold of one store; `release` (or the process's end) lets it go."""

    def __init__(self, store_path: str) -> None:
        self.store_path = store_path
        self.path = lock_path(store_path)
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or raise StoreError naming who holds it."""
        try:
            handle = self.path.open("a+", encoding="utf-8")
        except OSError as error:
            raise StoreError(
                self.store_path, f"cannot open the lock file {self.path}: {error.strerror}"
            ) from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read_holder(handle))
            handle.close()
            raise StoreError(
                self.store_path,
                f"another pitcrew daemon uses this store ({holder}); "
                "stop it first, or give this one another store.path",
            ) from None
        _write_holder(handle)
        self._file = handle

    def release(self) -> None:
        if self._file is None:
            return
        with contextlib.suppress(OSError):
            self._file.truncate(0)
            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()
        self._file = None


def _write_holder(handle: IO[str]) -> None:
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    handle.seek(0)
    handle.truncate(0)
    handle.write(json.dumps(holder) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def _read_holder(handle: IO[str]) -> dict[str, object]:
    handle.seek(0)
    try:
        found = json.loads(handle.read() or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _describe(holder: dict[str, object]) -> str:
    if "pid" not in holder:
        return "holder unknown"
    return f"pid {holder['pid']} on host {holder.get('host', '?')} since {holder.get('since', '?')}"

"""Pod-log reads that found nothing, tried again on a schedule.

Why this exists: the source reads a failed pod's log when a watch event first shows the
pod, and a Failed pod sends no later event. A read that the API answered with nothing
(a 404 before the kubelet serves the log, a passing API error) or that the per-minute
log budget put off would otherwise lose that log for good: the driver log is the
evidence a card is built from. Each such read is kept here with its next due time and
tried again after each delay of `delays` (a later read of the same log, by a new
signal, takes its place); what is still unread after the last one is given up, counted
and logged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from bot.core.model import ObjectRef, SourceKind

LogKey = tuple[str, str, str, bool]
"""(namespace, pod, container, previous)."""


@dataclass(frozen=True)
class LogRead:
    """One pod-log read to try: whose log, for which workload, as which source."""

    pod: ObjectRef
    container: str
    previous: bool
    workload: ObjectRef | None
    source: SourceKind
    attempt: int = 0
    due: float = 0.0

    @property
    def key(self) -> LogKey:
        return (self.pod.namespace, self.pod.name, self.container, self.previous)


class LogRetries:
    """The reads waiting to be tried again, by key; thread-safe."""

    def __init__(self, delays: tuple[float, ...]) -> None:
        self.delays = delays
        self._waiting: dict[LogKey, LogRead] = {}
        self._lock = threading.Lock()

    def later(self, read: LogRead, now: float) -> bool:
        """Keep `read` for its next try; False when its tries are used up."""
        if read.attempt >= len(self.delays):
            return False
        with self._lock:
            self._waiting[read.key] = replace(
                read, attempt=read.attempt + 1, due=now + self.delays[read.attempt]
            )
        return True

    def done(self, key: LogKey) -> None:
        """The log was read (by a later signal): nothing to try again."""
        with self._lock:
            self._waiting.pop(key, None)

    def due(self, now: float) -> list[LogRead]:
        """The reads whose time has come, taken out of the schedule."""
        with self._lock:
            ready = [r for r in self._waiting.values() if r.due <= now]
            for read in ready:
                del self._waiting[read.key]
        return ready

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)

"""What the Ray source remembers between polls and restarts, and under which keys.

Why this exists: "exactly once per job across restarts" rests on a few bookmarks (the
reported-jobs ledger per cluster, the stale actors already reported, the jobs
`ray.stop_job` stopped on purpose); the source, the executors and RayCluster discovery
must agree on their keys and on how the ledger reads and writes.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger("bot.adapters.ray.source")


class MemoryBookmarks:
    """Bookmarks kept in memory (tests, `pitcrew diagnose`, a daemon without a store)."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.values = dict(values or {})
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        with self._lock:
            self.values[key] = value


def jobs_key(cluster: str) -> str:
    return f"ray/{cluster}/jobs"


def stale_key(cluster: str) -> str:
    return f"ray/{cluster}/stale-actors"


def expected_stop_key(cluster: str, submission_id: str) -> str:
    """Set by `ray.stop_job` before it stops a job, so its STOPPED is not reported."""
    return f"ray/{cluster}/expected-stop/{submission_id}"


@dataclass
class Ledger:
    """Which terminal jobs were reported: an end-time watermark (Ray's clock, ms), the
    ids reported within `window` below it, and the floor set on the very first start
    (nothing that ended before it is ever reported)."""

    watermark: int
    floor: int
    recent: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, text: str | None, floor: int) -> Ledger:
        if text:
            try:
                data = json.loads(text)
                recent = {str(k): int(v) for k, v in dict(data.get("recent", {})).items()}
                mark = int(data["watermark"])
                return cls(mark, int(data.get("floor", mark)), recent)
            except (ValueError, KeyError, TypeError, AttributeError):
                log.warning("ignoring an unreadable Ray bookmark: %.80s", text)
        return cls(floor, floor)

    def dump(self) -> str:
        return json.dumps(
            {"v": 1, "watermark": self.watermark, "floor": self.floor, "recent": self.recent}
        )

    def is_new(self, key: str, end: int, window: int) -> bool:
        return key not in self.recent and end >= max(self.floor, self.watermark - window)

    def record(self, key: str, end: int, window: int) -> None:
        self.recent[key] = end
        self.watermark = max(self.watermark, end)
        floor = self.watermark - window
        self.recent = {k: v for k, v in self.recent.items() if v >= floor}

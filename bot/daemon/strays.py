"""Clicks for another cluster's pitcrew: the sign that two pitcrews share one Slack app.

Why this exists: in Socket Mode Slack hands each payload of an app to one of the app's
open connections, chosen at random, so two clusters' pitcrews on one app each receive
about half of the other's clicks, and in HTTP mode an app's one Request URL reaches one
of them only. Every button names the cluster whose pitcrew made it, so the pitcrew a
click for another cluster reaches knows it: it answers "this is cluster X's", changes
nothing, and records it here, in the store's bookmarks (so `pitcrew status`, another
process, and a restarted daemon see it too). `/readyz` and `pitcrew status` report it
with the fix for `WINDOW` after the last such click.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.core.codec import decode_time, encode_time
from bot.daemon.ports import Bookmarks, Clock

log = logging.getLogger("pitcrew.chat")

KEY = "chat.other_clusters"
WINDOW = timedelta(hours=1)
FIX = (
    "give each cluster its own Slack app in Socket Mode, or run HTTP mode with one "
    "Request URL per cluster (docs/operations.md, Several clusters)"
)


@dataclass(frozen=True, slots=True)
class Stray:
    """Clicks for one other cluster: how many, the first and the last."""

    cluster: str
    count: int
    first: datetime
    last: datetime


def read(value: str | None) -> tuple[Stray, ...]:
    """The strays a bookmark holds (none when it is absent or unreadable)."""
    if not value:
        return ()
    try:
        rows = json.loads(value)
        return tuple(
            Stray(str(c), int(r["count"]), decode_time(r["first"]), decode_time(r["last"]))
            for c, r in dict(rows).items()
        )
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        log.warning("the record of clicks for other clusters is unreadable: %s", error)
        return ()


def recorded(value: str | None, cluster: str, at: datetime) -> str:
    """The bookmark once one more click for `cluster` arrived at `at`."""
    kept = {s.cluster: s for s in read(value)}
    seen = kept.get(cluster)
    kept[cluster] = Stray(cluster, (seen.count if seen else 0) + 1, seen.first if seen else at, at)
    return json.dumps(
        {
            s.cluster: {
                "count": s.count,
                "first": encode_time(s.first),
                "last": encode_time(s.last),
            }
            for s in kept.values()
        },
        sort_keys=True,
    )


def problem(value: str | None, ours: str, now: datetime) -> str:
    """What `/readyz` and `pitcrew status` say while a click for another cluster came
    within `WINDOW` ("" otherwise)."""
    recent = sorted((s for s in read(value) if now - s.last < WINDOW), key=lambda s: s.cluster)
    if not recent:
        return ""
    seen = "; ".join(
        f"{s.count} for cluster {s.cluster} (the last at {s.last:%Y-%m-%d %H:%M:%S} UTC)"
        for s in recent
    )
    return (
        f"clicks for other clusters reached this pitcrew (cluster {ours or 'unnamed'}): "
        f"{seen}. Two pitcrews share one Slack app, and each misses clicks meant for it. "
        f"Fix: {FIX}"
    )


@dataclass(frozen=True)
class StrayRecorder:
    """Keeps each click for another cluster in `bookmarks` (the store)."""

    bookmarks: Bookmarks
    clock: Clock

    def __call__(self, cluster: str) -> None:
        self.bookmarks.set(KEY, recorded(self.bookmarks.get(KEY), cluster, self.clock()))

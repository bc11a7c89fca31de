"""Signed chat requests already seen, kept in the store for Slack's signature window.

Why this exists: a signed request copied off the wire can be sent again for five
minutes, and a daemon that remembered what it had seen only in memory forgot
it at a restart, so a replayed `/pitcrew silence` was accepted after one. A
request's signature is written here the first time; a second copy within the
window finds it and is refused. Rows older than the window are deleted as new
ones come.
"""

from __future__ import annotations

from bot.adapters.sqlite.connection import SharedConnection

REPLAY_WINDOW = 6 * 60.0  # seconds: Slack's five-minute window and a minute of clock skew


class ReplayRecords(SharedConnection):
    def first_time(self, signature: str, now: float) -> bool:
        """Record `signature` (seen at `now`, seconds since the epoch); False when it was
        already seen within the window."""
        with self._writing("remember a signed request") as conn:
            conn.execute("DELETE FROM seen_requests WHERE seen_at < ?", (now - REPLAY_WINDOW,))
            added = conn.execute(
                "INSERT OR IGNORE INTO seen_requests (signature, seen_at) VALUES (?, ?)",
                (signature, now),
            ).rowcount
        return added == 1

"""Source bookmarks (a watch's resourceVersion, a poller's cursor) in the store."""

from __future__ import annotations

from bot.adapters.store.connection import SharedConnection


class BookmarkRecords(SharedConnection):
    """One value per key, overwritten."""

    def bookmark(self, key: str) -> str | None:
        with self._reading(f"read bookmark {key}") as conn:
            row = conn.execute("SELECT value FROM bookmarks WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row["value"])

    def set_bookmark(self, key: str, value: str) -> None:
        with self._writing(f"save bookmark {key}") as conn:
            conn.execute(
                """INSERT INTO bookmarks (key, value) VALUES (?, ?)
                   ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                (key, value),
            )

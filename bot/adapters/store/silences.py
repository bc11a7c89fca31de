"""Silences in the store: kept with their author and reason until cleanup."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from bot.adapters.store.connection import SharedConnection
from bot.adapters.store.database import Tx, exists
from bot.core.codec import dumps, encode_time
from bot.core.errors import StoreError
from bot.core.model import Silence


class SilenceRecords(SharedConnection):
    """Silences by id and by the time they are active."""

    def add_silence(self, silence: Silence) -> None:
        with self._writing(f"add silence {silence.id}") as conn:
            if exists(conn, "SELECT 1 FROM silences WHERE id = ?", silence.id):
                raise StoreError(self.path, f"silence {silence.id} already exists")
            _write_silence(conn, silence, insert=True)

    def silence(self, silence_id: str) -> Silence | None:
        found = self._silences(
            "SELECT id, body FROM silences WHERE id = ?", [silence_id], f"read silence {silence_id}"
        )
        return found[0] if found else None

    def active_silences(self, now: datetime) -> tuple[Silence, ...]:
        """Silences with starts_at <= now < ends_at, earliest start first."""
        stamp = encode_time(now)
        return self._silences(
            """SELECT id, body FROM silences WHERE starts_at <= ? AND ends_at > ?
               ORDER BY starts_at, id""",
            [stamp, stamp],
            "list active silences",
        )

    def expire_silence(self, silence_id: str, at: datetime) -> Silence | None:
        """End the silence at `at` (kept, with its author and reason, until cleanup).

        Returns the silence as it now stands, or None if there is no such silence."""
        with self._writing(f"expire silence {silence_id}") as conn:
            row = conn.execute("SELECT body FROM silences WHERE id = ?", (silence_id,)).fetchone()
            if row is None:
                return None
            silence = self._load(Silence, row["body"], silence_id)
            if silence.ends_at <= at:
                return silence
            ended = dataclasses.replace(silence, ends_at=at)
            _write_silence(conn, ended, insert=False)
            return ended

    def _silences(self, sql: str, args: list[Any], what: str) -> tuple[Silence, ...]:
        with self._reading(what) as conn:
            rows = conn.execute(sql, args).fetchall()
        return tuple(self._load(Silence, row["body"], row["id"]) for row in rows)


def _write_silence(conn: Tx, silence: Silence, *, insert: bool) -> None:
    values = (encode_time(silence.starts_at), encode_time(silence.ends_at), dumps(silence))
    if insert:
        conn.execute(
            "INSERT INTO silences (starts_at, ends_at, body, id) VALUES (?, ?, ?, ?)",
            (*values, silence.id),
        )
    else:
        conn.execute(
            "UPDATE silences SET starts_at = ?, ends_at = ?, body = ? WHERE id = ?",
            (*values, silence.id),
        )

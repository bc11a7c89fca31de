"""Unmatched failures in the store: lines that looked like failures and that no playbook
matched, one row per shape with a count and the first and last time it was seen
(`pitcrew unmatched`, `/pitcrew unmatched`: the playbook a team should write next)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from bot.adapters.store.connection import SharedConnection
from bot.core.codec import decode_time, encode_time
from bot.core.diagnosis.unmatched import FailureLine, UnmatchedShape

MAX_SHAPES = 10_000
"""The table keeps at most this many shapes; the least recently seen go first."""


class UnmatchedRecords(SharedConnection):
    """Failure shapes no playbook knows, counted as they recur."""

    def record_unmatched(self, lines: Iterable[FailureLine], now: datetime) -> int:
        """Count each line under its shape; returns how many lines were recorded."""
        rows = [(line.shape, line.text, line.origin) for line in lines if line.shape]
        if not rows:
            return 0
        stamp = encode_time(now)
        with self._writing("record unmatched failures") as conn:
            conn.executemany(
                """INSERT INTO unmatched (shape, example, origin, count, first_seen, last_seen)
                   VALUES (?, ?, ?, 1, ?, ?)
                   ON CONFLICT (shape) DO UPDATE SET count = unmatched.count + 1,
                       example = excluded.example, origin = excluded.origin,
                       last_seen = excluded.last_seen""",
                [(shape, example, origin, stamp, stamp) for shape, example, origin in rows],
            )
            conn.execute(
                """DELETE FROM unmatched WHERE shape NOT IN
                   (SELECT shape FROM unmatched ORDER BY last_seen DESC LIMIT ?)""",
                (MAX_SHAPES,),
            )
        return len(rows)

    def unmatched(self, limit: int = 50) -> tuple[UnmatchedShape, ...]:
        """The most frequent shapes first (then the most recently seen)."""
        with self._reading("list unmatched failures") as conn:
            rows = conn.execute(
                """SELECT shape, example, origin, count, first_seen, last_seen FROM unmatched
                   ORDER BY count DESC, last_seen DESC LIMIT ?""",
                (limit,),
            ).fetchall()
        return tuple(
            UnmatchedShape(
                shape=str(row["shape"]),
                example=str(row["example"]),
                origin=str(row["origin"]),
                count=int(row["count"]),
                first_seen=decode_time(row["first_seen"]),
                last_seen=decode_time(row["last_seen"]),
            )
            for row in rows
        )

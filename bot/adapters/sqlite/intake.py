"""Evidence accepted and not yet taken in by the pipeline, kept in the store.

Why this exists: `/ingest` answers 202 only once what it accepted is on disk, and
what a stop leaves in the pipeline's queue is kept for the next start; a restart
or a crash then loses nothing that was acknowledged. A row is written before
the evidence is queued and deleted once the pipeline has taken it in. What a
row holds (`meta`, `body`) is the daemon's business (`bot.daemon.spool`).
"""

from __future__ import annotations

from datetime import datetime

from bot.adapters.sqlite.connection import SharedConnection
from bot.core.codec import encode_time
from bot.daemon.ports import SpooledRow


class IntakeRecords(SharedConnection):
    """Rows of accepted evidence, oldest first."""

    def spool(self, meta: str, body: bytes, at: datetime) -> int:
        """Keep one piece of evidence; returns its row id."""
        with self._writing("keep accepted evidence") as conn:
            cursor = conn.execute(
                "INSERT INTO intake (received_at, meta, body) VALUES (?, ?, ?)",
                (encode_time(at), meta, body),
            )
        return int(cursor.lastrowid or 0)

    def unspool(self, row_id: int) -> None:
        """The pipeline has taken the row's evidence in."""
        with self._writing("forget evidence taken in") as conn:
            conn.execute("DELETE FROM intake WHERE id = ?", (row_id,))

    def spooled(self, after: int = 0, limit: int = 64) -> tuple[SpooledRow, ...]:
        """Rows with an id over `after`, oldest first."""
        with self._reading("read kept evidence") as conn:
            rows = conn.execute(
                "SELECT id, meta, body FROM intake WHERE id > ? ORDER BY id LIMIT ?",
                (after, limit),
            ).fetchall()
        return tuple(SpooledRow(int(r["id"]), str(r["meta"]), bytes(r["body"])) for r in rows)

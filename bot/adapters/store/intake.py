"""Evidence accepted and not yet taken in by the pipeline, kept in the store.

Why this exists: `/ingest` answers 202 only once what it accepted is on disk, and
what a stop leaves in the pipeline's queue is kept for the next start; a restart
or a crash then loses nothing that was acknowledged. A row is written before
the evidence is queued and deleted once the pipeline has taken it in. What a
row holds (`meta`, `body`) is the daemon's business (`bot.daemon.spool`).

A row a bug or a budget stopped stays, set aside with the stage and the
problem: `failed` rows are taken in again at the next start, `quarantined`
ones only once `pitcrew requeue` releases them; `takes` counts the times the
pipeline began on a row and did not finish it (a crash or a kill in the middle).
`pitcrew requeue` (another process) marks a row `released`; the daemon takes
released rows back (`take_released`, back to `queued`) every few seconds while
it runs, and at its start (`queue_all`), so no row is queued twice.
"""

from __future__ import annotations

from datetime import datetime

from bot.adapters.store.connection import SharedConnection
from bot.adapters.store.database import Row
from bot.core.codec import decode_time, encode_time
from bot.daemon.ports import SetAside, SpooledRow

QUEUED, FAILED, QUARANTINED, RELEASED = "queued", "failed", "quarantined", "released"
_COLUMNS = "id, meta, body, takes"


class IntakeRecords(SharedConnection):
    """Rows of accepted evidence, oldest first."""

    def spool(self, meta: str, body: bytes, at: datetime) -> int:
        """Keep one piece of evidence; returns its row id."""
        with self._writing("keep accepted evidence") as conn:
            row = conn.execute(
                "INSERT INTO intake (received_at, meta, body) VALUES (?, ?, ?) RETURNING id",
                (encode_time(at), meta, body),
            ).fetchone()
        return int(row["id"])

    def unspool(self, row_id: int) -> None:
        """The pipeline has taken the row's evidence in."""
        with self._writing("forget evidence taken in") as conn:
            conn.execute("DELETE FROM intake WHERE id = ?", (row_id,))

    def spooled(self, after: int = 0, limit: int = 64) -> tuple[SpooledRow, ...]:
        """Rows to take in (not set aside) with an id over `after`, oldest first."""
        with self._reading("read kept evidence") as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM intake WHERE id > ? AND state = ? ORDER BY id LIMIT ?",
                (after, QUEUED, limit),
            ).fetchall()
        return tuple(_row(r) for r in rows)

    def queue_all(self) -> int:
        """At a start: rows a bug stopped, and rows released, are to be taken in again;
        returns how many."""
        with self._writing("queue kept evidence again") as conn:
            cursor = conn.execute(
                "UPDATE intake SET state = ? WHERE state IN (?, ?)", (QUEUED, FAILED, RELEASED)
            )
        return int(cursor.rowcount)

    def take_released(self, limit: int = 64) -> tuple[SpooledRow, ...]:
        """Rows `pitcrew requeue` released since the last look, oldest first, now queued."""
        with self._reading("look for released evidence") as conn:  # the index: no write lock
            if conn.execute("SELECT 1 FROM intake WHERE state = ?", (RELEASED,)).fetchone() is None:
                return ()
        with self._writing("take released evidence") as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM intake WHERE state = ? ORDER BY id LIMIT ?",
                (RELEASED, limit),
            ).fetchall()
            conn.executemany(
                "UPDATE intake SET state = ? WHERE id = ?", [(QUEUED, r["id"]) for r in rows]
            )
        return tuple(_row(r) for r in rows)

    def taking(self, row_id: int) -> None:
        """The pipeline begins on the row's evidence (one more take not yet finished)."""
        with self._writing("count a take of kept evidence") as conn:
            conn.execute("UPDATE intake SET takes = takes + 1 WHERE id = ?", (row_id,))

    def set_aside(self, row_id: int, state: str, stage: str, problem: str, at: datetime) -> None:
        """A bug (`failed`) or a budget (`quarantined`) stopped the row's evidence."""
        with self._writing("set kept evidence aside") as conn:
            conn.execute(
                "UPDATE intake SET state = ?, stage = ?, problem = ?, stopped_at = ? WHERE id = ?",
                (state, stage, problem[:2000], encode_time(at), row_id),
            )

    def set_aside_rows(self) -> tuple[SetAside, ...]:
        """Every row a bug or a budget stopped, oldest first."""
        with self._reading("list evidence set aside") as conn:
            rows = conn.execute(
                """SELECT id, state, stage, problem, stopped_at, takes, LENGTH(body) AS size
                   FROM intake WHERE state IN (?, ?) ORDER BY id""",
                (FAILED, QUARANTINED),
            ).fetchall()
        return tuple(
            SetAside(
                int(r["id"]),
                str(r["state"]),
                str(r["stage"]),
                str(r["problem"]),
                decode_time(r["stopped_at"]) if r["stopped_at"] else None,
                int(r["takes"]),
                int(r["size"]),
            )
            for r in rows
        )

    def requeue(self, row_id: int | None = None) -> int:
        """Release set-aside rows (all, or `row_id`) to be taken in by the running daemon,
        or at the next start; returns how many."""
        sql = """UPDATE intake SET state = ?, takes = 0, stage = '', problem = ''
                 WHERE state IN (?, ?)"""
        args: tuple[object, ...] = (RELEASED, FAILED, QUARANTINED)
        if row_id is not None:
            sql += " AND id = ?"
            args += (row_id,)
        with self._writing("requeue evidence set aside") as conn:
            return int(conn.execute(sql, args).rowcount)


def _row(r: Row) -> SpooledRow:
    return SpooledRow(int(r["id"]), str(r["meta"]), bytes(r["body"]), int(r["takes"]))

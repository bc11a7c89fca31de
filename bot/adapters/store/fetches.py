"""The audit of evidence fetches: each `/pitcrew bundle` (and `pitcrew bundle`) with who
asked, for which incident, how, and whether the policy gave it (`evidence_access`),
kept for `store.retention` (`Store.cleanup`) and listed newest first (`pitcrew history`)."""

from __future__ import annotations

from bot.adapters.store.connection import SharedConnection
from bot.core.codec import decode_time, encode_time
from bot.daemon.ports import EvidenceFetch


class FetchRecords(SharedConnection):
    """One row per fetch asked for, allowed or refused."""

    def record_fetch(self, fetch: EvidenceFetch) -> None:
        with self._writing(f"audit a fetch of the evidence of {fetch.incident_id}") as conn:
            conn.execute(
                """INSERT INTO evidence_fetches (incident_id, user_id, via, outcome, detail, at)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                (
                    fetch.incident_id,
                    fetch.user,
                    fetch.via,
                    fetch.outcome,
                    fetch.detail,
                    encode_time(fetch.at),
                ),
            )

    def recent_fetches(self, limit: int = 10) -> tuple[EvidenceFetch, ...]:
        with self._reading("list evidence fetches") as conn:
            rows = conn.execute(
                "SELECT * FROM evidence_fetches ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return tuple(
            EvidenceFetch(
                incident_id=str(row["incident_id"]),
                user=str(row["user_id"]),
                via=str(row["via"]),
                outcome=str(row["outcome"]),
                detail=str(row["detail"]),
                at=decode_time(row["at"]),
            )
            for row in rows
        )

"""Evidence bundles in the store: the tar.gz captured for an incident while its RayJob's or
RayCluster's objects still existed (`bot.daemon.capture`), kept with the incident and
deleted with it (`Store.cleanup`, `store.retention`); `pitcrew bundle` writes one out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.adapters.store.connection import SharedConnection
from bot.core.codec import decode_time, encode_time


@dataclass(frozen=True, slots=True)
class StoredBundle:
    incident_id: str
    name: str
    captured_at: datetime
    body: bytes

    @property
    def size(self) -> int:
        return len(self.body)


class BundleRecords(SharedConnection):
    """One row per bundle, named within its incident (one per RayJob attempt)."""

    def save_bundle(self, incident_id: str, name: str, body: bytes, now: datetime) -> None:
        with self._writing("save an evidence bundle") as conn:
            conn.execute(
                """INSERT INTO bundles (incident_id, name, captured_at, size, body)
                   VALUES (?, ?, ?, ?, ?)
                   ON CONFLICT (incident_id, name) DO UPDATE SET captured_at =
                       excluded.captured_at, size = excluded.size, body = excluded.body""",
                (incident_id, name, encode_time(now), len(body), body),
            )

    def bundle_sizes(self, incident_id: str) -> list[tuple[str, int, datetime]]:
        """(name, bytes, captured at) of the incident's bundles, oldest first."""
        with self._reading("list evidence bundles") as conn:
            rows = conn.execute(
                """SELECT name, size, captured_at FROM bundles WHERE incident_id = ?
                   ORDER BY captured_at, name""",
                (incident_id,),
            ).fetchall()
        return [(str(r["name"]), int(r["size"]), decode_time(r["captured_at"])) for r in rows]

    def bundles(self, incident_id: str) -> list[StoredBundle]:
        """The incident's bundles, oldest first."""
        with self._reading("read evidence bundles") as conn:
            rows = conn.execute(
                """SELECT incident_id, name, captured_at, body FROM bundles
                   WHERE incident_id = ? ORDER BY captured_at, name""",
                (incident_id,),
            ).fetchall()
        return [
            StoredBundle(
                str(r["incident_id"]),
                str(r["name"]),
                decode_time(r["captured_at"]),
                bytes(r["body"]),
            )
            for r in rows
        ]

"""Incidents and their finding history in the store."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from bot.adapters.store.connection import SharedConnection
from bot.core.codec import dumps, encode_time
from bot.core.model import Finding, Incident, IncidentState, ObjectRef

DEFAULT_FINDINGS_PER_INCIDENT = 200


class IncidentRecords(SharedConnection):
    """Incidents by id, key, state and workload; each with its newest findings."""

    findings_per_incident: int = DEFAULT_FINDINGS_PER_INCIDENT

    def upsert_incident(self, incident: Incident) -> None:
        row = _incident_columns(incident)
        with self._writing(f"save incident {incident.id}") as conn:
            conn.execute(
                """INSERT INTO incidents (id, key, state, cluster, namespace, workload,
                       opened_at, updated_at, resolved_at, body)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (id) DO UPDATE SET key = excluded.key, state = excluded.state,
                       cluster = excluded.cluster, namespace = excluded.namespace,
                       workload = excluded.workload, opened_at = excluded.opened_at,
                       updated_at = excluded.updated_at, resolved_at = excluded.resolved_at,
                       body = excluded.body""",
                tuple(row.values()),
            )

    def incident(self, incident_id: str) -> Incident | None:
        with self._reading(f"read incident {incident_id}") as conn:
            row = conn.execute("SELECT body FROM incidents WHERE id = ?", (incident_id,)).fetchone()
        return None if row is None else self._load(Incident, row["body"], incident_id)

    def open_incidents(
        self, namespace: str | None = None, workload: ObjectRef | None = None
    ) -> tuple[Incident, ...]:
        """Open incidents, oldest first, optionally only those of one namespace or workload."""
        sql = "SELECT id, body FROM incidents WHERE state = ?"
        args: list[str] = [IncidentState.OPEN.value]
        if namespace is not None:
            sql += " AND namespace = ?"
            args.append(namespace)
        if workload is not None:
            sql += " AND workload = ?"
            args.append(str(workload))
        return self._incidents(sql + " ORDER BY opened_at, id", args, "list open incidents")

    def recent_incidents(self, n: int) -> tuple[Incident, ...]:
        """The `n` most recently updated incidents, newest first, open or resolved."""
        return self._incidents(
            "SELECT id, body FROM incidents ORDER BY updated_at DESC, id DESC LIMIT ?",
            [n],
            "list recent incidents",
        )

    def append_findings(self, incident_id: str, findings: Iterable[Finding], at: datetime) -> None:
        """Add to the incident's finding history, keeping the newest `findings_per_incident`."""
        rows = [(incident_id, encode_time(at), dumps(f)) for f in findings]
        if not rows:
            return
        with self._writing(f"append findings to incident {incident_id}") as conn:
            conn.executemany(
                "INSERT INTO findings (incident_id, at, body) VALUES (?, ?, ?)",
                rows,
            )
            conn.execute(
                """DELETE FROM findings WHERE incident_id = ? AND seq <= (
                       SELECT seq FROM findings WHERE incident_id = ?
                       ORDER BY seq DESC LIMIT 1 OFFSET ?)""",
                (incident_id, incident_id, self.findings_per_incident),
            )

    def findings(self, incident_id: str) -> tuple[Finding, ...]:
        """The incident's finding history, oldest first."""
        with self._reading(f"read findings of incident {incident_id}") as conn:
            rows = conn.execute(
                "SELECT body FROM findings WHERE incident_id = ? ORDER BY seq", (incident_id,)
            ).fetchall()
        return tuple(self._load(Finding, row["body"], incident_id) for row in rows)

    def _incidents(self, sql: str, args: list[Any], what: str) -> tuple[Incident, ...]:
        with self._reading(what) as conn:
            rows = conn.execute(sql, args).fetchall()
        return tuple(self._load(Incident, row["body"], row["id"]) for row in rows)


def _incident_columns(incident: Incident) -> dict[str, Any]:
    return {
        "id": incident.id,
        "key": incident.key,
        "state": incident.state.value,
        "cluster": incident.cluster,
        "namespace": incident.namespace,
        "workload": "" if incident.workload is None else str(incident.workload),
        "opened_at": encode_time(incident.opened_at),
        "updated_at": encode_time(incident.updated_at),
        "resolved_at": None if incident.resolved_at is None else encode_time(incident.resolved_at),
        "body": dumps(incident),
    }

"""Durable state in one database (docs/design.md, "State"): a SQLite file, the embedded default,
or a PostgreSQL more than one replica can share (`store.url: postgresql://…`).

Everything pitcrew must not forget across a restart lives here: incidents and
their findings, proposals with their transition history and partial approvals,
the action ledger, silences, the notification outbox with the chat references
of delivered cards and the cards posted unchecked (while the chat's history did not
answer), source bookmarks, and evidence accepted but not yet taken in.

Safety rests on three rules, on both databases:

- A proposal changes state only by compare-and-swap (`record_decision`): the stored
  proposal is read, checked and written with its history rows in one write
  transaction holding the store's one write lock, so two clicks, two approvers, two
  threads, two processes or two replicas move it once.
- An action is recorded as STARTED before it runs; after a restart the pipeline finds
  its proposal RUNNING and `mark_interrupted` reports it interrupted, never re-run.
- The outbox returns only undelivered messages, oldest first per incident and
  channel, so a chat outage delays cards but never loses or repeats them.

Each kind of record has its own module (`incidents`, `proposals`, `ledger`,
`silences`, `outbox`, `bookmarks`, `unmatched`, `intake`, `bundles`, `unchecked`,
`fetches`),
written once in the SQL both databases share, over one `connection.SharedConnection`
(the drivers: `sqlite`, `postgres`); `Store` composes them and owns retention, which
spans them all. A leader fences the store with its term (`connection.fence`).

Model values are stored as JSON through `bot.core.codec` (so fields added to them
need no schema change) next to the indexed columns the queries need. Times
are passed in; there is no hidden clock. One connection guarded by a lock
serves all threads of a process; the database's write lock serializes processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.adapters.store.bookmarks import BookmarkRecords
from bot.adapters.store.bundles import BundleRecords
from bot.adapters.store.connection import DEFAULT_BUSY_TIMEOUT
from bot.adapters.store.fetches import FetchRecords
from bot.adapters.store.incidents import DEFAULT_FINDINGS_PER_INCIDENT, IncidentRecords
from bot.adapters.store.intake import IntakeRecords
from bot.adapters.store.ledger import LedgerRecords
from bot.adapters.store.outbox import OutboxRecords, OutboxState
from bot.adapters.store.proposals import ProposalRecords
from bot.adapters.store.replays import ReplayRecords
from bot.adapters.store.silences import SilenceRecords
from bot.adapters.store.unchecked import UncheckedRecords
from bot.adapters.store.unmatched import UnmatchedRecords
from bot.core.codec import encode_time
from bot.core.model import IncidentState

DEFAULT_RETENTION = timedelta(days=14)


@dataclass(frozen=True, slots=True)
class Cleanup:
    """How many rows `Store.cleanup` deleted."""

    incidents: int
    notifications: int
    silences: int


class Store(
    IncidentRecords,
    ProposalRecords,
    LedgerRecords,
    SilenceRecords,
    OutboxRecords,
    BookmarkRecords,
    ReplayRecords,
    UnmatchedRecords,
    IntakeRecords,
    BundleRecords,
    UncheckedRecords,
    FetchRecords,
):
    """pitcrew's state in SQLite or PostgreSQL, safe to share between threads and processes
    (and, on PostgreSQL, replicas)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        findings_per_incident: int = DEFAULT_FINDINGS_PER_INCIDENT,
        init: bool = False,
        password: str | None = None,
        cluster: str = "",
    ) -> None:
        """`path`: the SQLite file (default ./pitcrew.db) or a `postgresql://` URL."""
        if findings_per_incident < 1:
            raise ValueError(
                f"findings_per_incident must be at least 1, not {findings_per_incident}"
            )
        self.findings_per_incident = findings_per_incident
        super().__init__(path, busy_timeout, init=init, password=password, cluster=cluster)

    def cleanup(self, now: datetime, retention: timedelta = DEFAULT_RETENTION) -> Cleanup:
        """Delete what ended before `now - retention`: resolved incidents (with their
        findings, proposals, transitions, approvals, chat references, evidence bundles
        and cards still to check for a duplicate), delivered or
        abandoned notifications, expired silences and the audit of evidence fetches.
        The action ledger is kept."""
        cutoff = encode_time(now - retention)
        with self._writing("clean up old state") as conn:
            old = [
                str(row["id"])
                for row in conn.execute(
                    """SELECT id FROM incidents
                       WHERE state = ? AND COALESCE(resolved_at, updated_at) < ?""",
                    (IncidentState.RESOLVED.value, cutoff),
                )
            ]
            conn.executemany("DELETE FROM chat_refs WHERE incident_id = ?", [(i,) for i in old])
            conn.executemany("DELETE FROM bundles WHERE incident_id = ?", [(i,) for i in old])
            conn.executemany(
                "DELETE FROM unchecked_cards WHERE incident_id = ?", [(i,) for i in old]
            )
            conn.executemany("DELETE FROM incidents WHERE id = ?", [(i,) for i in old])
            notifications = conn.execute(
                "DELETE FROM outbox WHERE status <> ? AND settled_at < ?",
                (OutboxState.PENDING, cutoff),
            ).rowcount
            silences = conn.execute("DELETE FROM silences WHERE ends_at < ?", (cutoff,)).rowcount
            conn.execute("DELETE FROM evidence_fetches WHERE at < ?", (cutoff,))
        return Cleanup(incidents=len(old), notifications=notifications, silences=silences)

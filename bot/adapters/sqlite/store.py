"""Durable state in one SQLite file (DESIGN.md "State"; the only module that imports sqlite3).

Everything pitcrew must not forget across a restart lives here: incidents and
their findings, proposals with their transition history and partial approvals,
the action ledger, silences, the notification outbox with the chat references
of delivered cards and the cards posted unchecked (while the chat's history did not
answer), source bookmarks, and evidence accepted but not yet taken in.

Safety rests on three rules:

- A proposal changes state only by compare-and-swap (`transition`): one
  `UPDATE ... WHERE state = expected` and its history row in one IMMEDIATE
  transaction, so two clicks, two approvers, two threads or two processes
  (`pitcrew approve ID` runs in another process) move it once.
- An action is recorded as STARTED before it runs; after a restart the pipeline finds
  its proposal RUNNING and `mark_interrupted` reports it interrupted, never re-run.
- The outbox returns only undelivered messages, oldest first per incident and
  channel, so a chat outage delays cards but never loses or repeats them.

Each kind of record has its own module (`incidents`, `proposals`, `ledger`,
`silences`, `outbox`, `bookmarks`, `unmatched`, `intake`, `bundles`, `unchecked`)
over one `connection.SharedConnection`; `Store` composes them and owns retention, which
spans them all.

Model values are stored as JSON through `bot.core.codec` (so fields added to them
need no schema change) next to the indexed columns the queries need. Times
are passed in; there is no hidden clock. One connection guarded by a lock
serves all threads of a process; SQLite's locking (WAL, busy timeout)
serializes processes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.adapters.sqlite.bookmarks import BookmarkRecords
from bot.adapters.sqlite.bundles import BundleRecords
from bot.adapters.sqlite.connection import (
    DEFAULT_BUSY_TIMEOUT,
)
from bot.adapters.sqlite.incidents import DEFAULT_FINDINGS_PER_INCIDENT, IncidentRecords
from bot.adapters.sqlite.intake import IntakeRecords
from bot.adapters.sqlite.ledger import LedgerRecords
from bot.adapters.sqlite.outbox import OutboxRecords, OutboxState
from bot.adapters.sqlite.proposals import ProposalRecords
from bot.adapters.sqlite.replays import ReplayRecords
from bot.adapters.sqlite.silences import SilenceRecords
from bot.adapters.sqlite.unchecked import UncheckedRecords
from bot.adapters.sqlite.unmatched import UnmatchedRecords
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
):
    """pitcrew's state in one SQLite file, safe to share between threads and processes."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        findings_per_incident: int = DEFAULT_FINDINGS_PER_INCIDENT,
        init: bool = False,
    ) -> None:
        if findings_per_incident < 1:
            raise ValueError(
                f"findings_per_incident must be at least 1, not {findings_per_incident}"
            )
        self.findings_per_incident = findings_per_incident
        super().__init__(path, busy_timeout, init=init)

    def cleanup(self, now: datetime, retention: timedelta = DEFAULT_RETENTION) -> Cleanup:
        """Delete what ended before `now - retention`: resolved incidents (with their
        findings, proposals, transitions, approvals, chat references, evidence bundles
        and cards still to check for a duplicate), delivered or
        abandoned notifications, and expired silences. The action ledger is kept."""
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
        return Cleanup(incidents=len(old), notifications=notifications, silences=silences)

"""The action ledger: an action is recorded as STARTED before it runs, so after a
restart `running_actions()` finds it and it is reported as interrupted, never re-run."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from bot.adapters.store.connection import SharedConnection
from bot.adapters.store.database import Tx, exists
from bot.core.codec import dumps, encode_time
from bot.core.errors import StoreError
from bot.core.model import ActionResult, LedgerEntry

INTERRUPTED_DETAIL = "interrupted: pitcrew stopped while the action was running"


class LedgerRecords(SharedConnection):
    """One ledger entry per proposal's action: started once, finished once."""

    def start_action(self, entry: LedgerEntry) -> None:
        """Record an action as STARTED before it runs; a proposal's action starts once."""
        if entry.result is not ActionResult.STARTED:
            raise ValueError(f"a ledger entry starts as {ActionResult.STARTED}, not {entry.result}")
        with self._writing(f"record the start of proposal {entry.proposal_id}'s action") as conn:
            if exists(conn, "SELECT 1 FROM ledger WHERE proposal_id = ?", entry.proposal_id):
                raise StoreError(
                    self.path, f"the action of proposal {entry.proposal_id} was already started"
                )
            local = dataclasses.replace(entry, cluster=entry.cluster or self.cluster)
            _write_ledger(conn, local, insert=True)

    def action_entry(self, proposal_id: str) -> LedgerEntry | None:
        """The proposal's ledger entry, started or finished (None: never started)."""
        with self._reading(f"read the ledger entry of proposal {proposal_id}") as conn:
            row = conn.execute(
                "SELECT body FROM ledger WHERE proposal_id = ?", (proposal_id,)
            ).fetchone()
        return None if row is None else self._entry(row["body"], proposal_id)

    def finish_action(
        self, proposal_id: str, result: ActionResult, at: datetime, detail: str = ""
    ) -> LedgerEntry | None:
        """Close a STARTED entry with its result; None if there is no running entry.

        An empty `detail` keeps the detail recorded so far."""
        if result is ActionResult.STARTED:
            raise ValueError("finish_action needs a final result, not started")
        with self._writing(f"record the end of proposal {proposal_id}'s action") as conn:
            row = conn.execute(
                "SELECT body FROM ledger WHERE proposal_id = ? AND result = ?",
                (proposal_id, ActionResult.STARTED.value),
            ).fetchone()
            if row is None:
                return None
            entry = self._entry(row["body"], proposal_id)
            finished = dataclasses.replace(
                entry, result=result, finished_at=at, detail=detail or entry.detail
            )
            _write_ledger(conn, finished, insert=False)
            return finished

    def mark_interrupted(
        self, proposal_id: str, at: datetime, detail: str = INTERRUPTED_DETAIL
    ) -> LedgerEntry | None:
        """Close an action a restart found STARTED: it is reported, never silently re-run."""
        return self.finish_action(proposal_id, ActionResult.INTERRUPTED, at, detail)

    def recent_actions(self, n: int) -> tuple[LedgerEntry, ...]:
        """The `n` most recently started actions, newest first."""
        return self._ledger(
            "SELECT proposal_id, body FROM ledger ORDER BY started_at DESC, proposal_id DESC "
            "LIMIT ?",
            [n],
            "list recent actions",
        )

    def _ledger(self, sql: str, args: list[Any], what: str) -> tuple[LedgerEntry, ...]:
        with self._reading(what) as conn:
            rows = conn.execute(sql, args).fetchall()
        return tuple(self._entry(row["body"], row["proposal_id"]) for row in rows)

    def _entry(self, body: str, proposal_id: str) -> LedgerEntry:
        """A stored entry; one from before clusters were named ran on this one."""
        entry = self._load(LedgerEntry, body, proposal_id)
        return entry if entry.cluster else dataclasses.replace(entry, cluster=self.cluster)


def _write_ledger(conn: Tx, entry: LedgerEntry, *, insert: bool) -> None:
    finished = None if entry.finished_at is None else encode_time(entry.finished_at)
    values = (entry.result.value, encode_time(entry.started_at), finished, dumps(entry))
    if insert:
        conn.execute(
            """INSERT INTO ledger (result, started_at, finished_at, body, proposal_id)
               VALUES (?, ?, ?, ?, ?)""",
            (*values, entry.proposal_id),
        )
    else:
        conn.execute(
            """UPDATE ledger SET result = ?, started_at = ?, finished_at = ?, body = ?
               WHERE proposal_id = ?""",
            (*values, entry.proposal_id),
        )

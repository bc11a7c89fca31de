"""Durable state in one SQLite file (DESIGN.md "State"; the only module that imports sqlite3).

Everything pitcrew must not forget across a restart lives here: incidents and
their findings, proposals with their transition history and partial approvals,
the action ledger, silences, the notification outbox with the chat references
of delivered cards, and source bookmarks.

Safety rests on three rules:

- A proposal changes state only by compare-and-swap (`transition`): one
  `UPDATE ... WHERE state = expected` and its history row in one IMMEDIATE
  transaction, so two clicks, two approvers, two threads or two processes
  (`pitcrew approve ID` runs in another process) move it once.
- An action is recorded as STARTED before it runs; after a restart
  `running_actions()` finds it and it is reported as interrupted, never re-run.
- The outbox returns only undelivered messages, oldest first per incident and
  channel, so a chat outage delays cards but never loses or repeats them.

Model values are stored as JSON through `bot.core.codec` (so fields added to them
need no schema change) next to the indexed columns the queries need. Times
are passed in; there is no hidden clock. One connection guarded by a lock
serves all threads of a process; SQLite's locking (WAL, busy timeout)
serializes processes.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from bot.core.codec import CodecError, decode_time, dumps, encode_time, loads
from bot.core.errors import StoreError
from bot.core.model import (
    ActionResult,
    Finding,
    Incident,
    IncidentState,
    LedgerEntry,
    Notification,
    NotificationKind,
    ObjectRef,
    Proposal,
    ProposalState,
    Silence,
    Transition,
)
from bot.core.notify import Delivery
from bot.daemon.ports import ProposalChange

T = TypeVar("T")

DEFAULT_FILENAME = "pitcrew.db"
DEFAULT_BUSY_TIMEOUT = 5.0
DEFAULT_FINDINGS_PER_INCIDENT = 200
DEFAULT_RETENTION = timedelta(days=14)
INTERRUPTED_DETAIL = "interrupted: pitcrew stopped while the action was running"


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema; `version` becomes `PRAGMA user_version` once applied."""

    version: int
    summary: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "incidents, findings, proposals, transitions, ledger, silences, outbox, bookmarks",
        (
            """CREATE TABLE incidents (
                id TEXT PRIMARY KEY,
                key TEXT NOT NULL,
                state TEXT NOT NULL,
                cluster TEXT NOT NULL,
                namespace TEXT NOT NULL,
                workload TEXT NOT NULL,
                opened_at TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                resolved_at TEXT,
                body TEXT NOT NULL)""",
            "CREATE INDEX incidents_by_key ON incidents (key, updated_at)",
            "CREATE INDEX incidents_by_state ON incidents (state, namespace, workload)",
            "CREATE INDEX incidents_by_update ON incidents (updated_at)",
            """CREATE TABLE findings (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                incident_id TEXT NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
                at TEXT NOT NULL,
                body TEXT NOT NULL)""",
            "CREATE INDEX findings_by_incident ON findings (incident_id, seq)",
            """CREATE TABLE proposals (
                id TEXT PRIMARY KEY,
                incident_id TEXT NOT NULL REFERENCES incidents (id) ON DELETE CASCADE,
                action TEXT NOT NULL,
                state TEXT NOT NULL,
                created_at TEXT NOT NULL,
                expires_at TEXT NOT NULL,
                body TEXT NOT NULL)""",
            "CREATE INDEX proposals_by_incident ON proposals (incident_id, created_at)",
            "CREATE INDEX proposals_by_state ON proposals (state, expires_at)",
            """CREATE TABLE transitions (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                proposal_id TEXT NOT NULL REFERENCES proposals (id) ON DELETE CASCADE,
                to_state TEXT NOT NULL,
                at TEXT NOT NULL,
                body TEXT NOT NULL)""",
            "CREATE INDEX transitions_by_proposal ON transitions (proposal_id, seq)",
            """CREATE TABLE ledger (
                proposal_id TEXT PRIMARY KEY,
                result TEXT NOT NULL,
                started_at TEXT NOT NULL,
                finished_at TEXT,
                body TEXT NOT NULL)""",
            "CREATE INDEX ledger_by_result ON ledger (result, started_at)",
            """CREATE TABLE silences (
                id TEXT PRIMARY KEY,
                starts_at TEXT NOT NULL,
                ends_at TEXT NOT NULL,
                body TEXT NOT NULL)""",
            "CREATE INDEX silences_by_end ON silences (ends_at)",
            """CREATE TABLE outbox (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                incident_id TEXT NOT NULL,
                channel TEXT NOT NULL,
                kind TEXT NOT NULL,
                status TEXT NOT NULL DEFAULT 'pending',
                attempts INTEGER NOT NULL DEFAULT 0,
                last_error TEXT NOT NULL DEFAULT '',
                next_attempt_at TEXT,
                chat_ref TEXT,
                settled_at TEXT,
                body TEXT NOT NULL)""",
            """CREATE INDEX outbox_pending ON outbox (incident_id, channel, id)
                WHERE status = 'pending'""",
            "CREATE INDEX outbox_settled ON outbox (settled_at) WHERE status <> 'pending'",
            "CREATE TABLE bookmarks (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ),
    ),
    Migration(
        2,
        "partial approvals for two-approver actions; chat references per incident and channel",
        (
            """CREATE TABLE approvals (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                proposal_id TEXT NOT NULL REFERENCES proposals (id) ON DELETE CASCADE,
                approver TEXT NOT NULL,
                at TEXT NOT NULL,
                UNIQUE (proposal_id, approver))""",
            """CREATE TABLE chat_refs (
                incident_id TEXT NOT NULL,
                channel TEXT NOT NULL,
                ref TEXT NOT NULL,
                posted_at TEXT NOT NULL,
                PRIMARY KEY (incident_id, channel))""",
            # Version 1 found a card's reference among the delivered posts in the outbox.
            """INSERT INTO chat_refs (incident_id, channel, ref, posted_at)
                SELECT incident_id, channel, chat_ref, COALESCE(settled_at, '') FROM outbox
                WHERE kind = 'post' AND status = 'delivered' AND chat_ref IS NOT NULL
                ORDER BY id
                ON CONFLICT (incident_id, channel)
                DO UPDATE SET ref = excluded.ref, posted_at = excluded.posted_at""",
        ),
    ),
    Migration(
        3,
        "what the chat has seen of each incident (the notification policy's delivery record)",
        (
            """CREATE TABLE deliveries (
                incident_id TEXT PRIMARY KEY REFERENCES incidents (id) ON DELETE CASCADE,
                done INTEGER NOT NULL DEFAULT 0,
                body TEXT NOT NULL)""",
            "CREATE INDEX deliveries_pending ON deliveries (incident_id) WHERE done = 0",
        ),
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version


@dataclass(frozen=True, slots=True)
class Approval:
    """One approver's approval of a proposal that needs more than one."""

    proposal_id: str
    approver: str
    at: datetime


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """An undelivered notification (its `id` set) with its delivery attempts so far."""

    notification: Notification
    attempts: int = 0
    last_error: str = ""
    next_attempt_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Cleanup:
    """How many rows `Store.cleanup` deleted."""

    incidents: int
    notifications: int
    silences: int


class Status:
    """Outbox row states: pending until delivered, or abandoned when it can never be."""

    PENDING = "pending"
    DELIVERED = "delivered"
    ABANDONED = "abandoned"


def default_path() -> Path:
    """`pitcrew.db` in the working directory."""
    return Path.cwd() / DEFAULT_FILENAME


class Store:
    """pitcrew's state in one SQLite file, safe to share between threads and processes."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        findings_per_incident: int = DEFAULT_FINDINGS_PER_INCIDENT,
    ) -> None:
        if findings_per_incident < 1:
            raise ValueError(
                f"findings_per_incident must be at least 1, not {findings_per_incident}"
            )
        self.path = _display_path(path)
        self.busy_timeout = busy_timeout
        self.findings_per_incident = findings_per_incident
        self._lock = threading.RLock()
        self._conn = _connect(self.path, busy_timeout)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def schema_version(self) -> int:
        with self._reading("read the schema version") as conn:
            return _user_version(conn)

    def ping(self) -> None:
        """Raises StoreError unless the database answers (for readiness checks)."""
        with self._reading("check the database") as conn:
            conn.execute("SELECT 1 FROM incidents LIMIT 1").fetchall()

    # -- incidents and findings ------------------------------------------------------------

    def upsert_incident(self, incident: Incident) -> None:
        row = _incident_columns(incident)
        with self._writing(f"save incident {incident.id}") as conn:
            conn.execute(
                """INSERT INTO incidents (id, key, state, cluster, namespace, workload,
                       opened_at, updated_at, resolved_at, body)
                   VALUES (:id, :key, :state, :cluster, :namespace, :workload,
                       :opened_at, :updated_at, :resolved_at, :body)
                   ON CONFLICT (id) DO UPDATE SET key = excluded.key, state = excluded.state,
                       cluster = excluded.cluster, namespace = excluded.namespace,
                       workload = excluded.workload, opened_at = excluded.opened_at,
                       updated_at = excluded.updated_at, resolved_at = excluded.resolved_at,
                       body = excluded.body""",
                row,
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

    def incident_by_key(self, key: str, since: datetime) -> Incident | None:
        """The incident with this correlation key updated most recently at or after `since`,
        whatever its state (the caller decides whether a resolved one reopens)."""
        found = self._incidents(
            """SELECT id, body FROM incidents WHERE key = ? AND updated_at >= ?
               ORDER BY updated_at DESC, id DESC LIMIT 1""",
            [key, encode_time(since)],
            f"find incident {key}",
        )
        return found[0] if found else None

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

    # -- proposals, transitions and approvals ----------------------------------------------

    def create_proposal(self, proposal: Proposal) -> Proposal:
        """Store a new proposal with the history and approvals it carries; its incident
        must be stored first."""
        body = dumps(dataclasses.replace(proposal, history=(), approvals=()))
        with self._writing(f"create proposal {proposal.id}") as conn:
            if _exists(conn, "SELECT 1 FROM proposals WHERE id = ?", proposal.id):
                raise StoreError(self.path, f"proposal {proposal.id} already exists")
            if not _exists(conn, "SELECT 1 FROM incidents WHERE id = ?", proposal.incident_id):
                raise StoreError(
                    self.path,
                    f"proposal {proposal.id} names incident {proposal.incident_id}, "
                    "which is not stored; save the incident first",
                )
            conn.execute(
                """INSERT INTO proposals (id, incident_id, action, state, created_at,
                       expires_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                (
                    proposal.id,
                    proposal.incident_id,
                    proposal.action,
                    proposal.state.value,
                    encode_time(proposal.created_at),
                    encode_time(proposal.expires_at),
                    body,
                ),
            )
            for change in proposal.history:
                _insert_transition(conn, proposal.id, change)
            for approver in dict.fromkeys(proposal.approvals):
                _insert_approval(conn, proposal.id, approver, proposal.created_at)
            return self._proposal(conn, proposal.id) or proposal

    def get_proposal(self, proposal_id: str) -> Proposal | None:
        with self._snapshot(f"read proposal {proposal_id}") as conn:
            return self._proposal(conn, proposal_id)

    def proposals_for_incident(self, incident_id: str) -> tuple[Proposal, ...]:
        """The incident's proposals, oldest first, each with its full history."""
        return self._proposals(
            "SELECT id FROM proposals WHERE incident_id = ? ORDER BY created_at, id",
            [incident_id],
            f"list proposals of incident {incident_id}",
        )

    def expired_offers(self, now: datetime) -> tuple[Proposal, ...]:
        """Proposals still OFFERED whose `expires_at` is at or before `now`."""
        return self._proposals(
            "SELECT id FROM proposals WHERE state = ? AND expires_at <= ? ORDER BY expires_at, id",
            [ProposalState.OFFERED.value, encode_time(now)],
            "list expired offers",
        )

    def proposals_in_state(self, state: ProposalState) -> tuple[Proposal, ...]:
        """Proposals in `state`, oldest first (APPROVED ones wait for the executing daemon;
        RUNNING ones found at start were interrupted)."""
        return self._proposals(
            "SELECT id FROM proposals WHERE state = ? ORDER BY created_at, id",
            [state.value],
            f"list {state} proposals",
        )

    def proposal_changes(self, after: int, limit: int = 1000) -> tuple[ProposalChange, ...]:
        """Transitions recorded after sequence number `after`, oldest first, whichever
        thread or process made them: how a daemon notices what `pitcrew approve` did."""
        with self._reading("list proposal changes") as conn:
            rows = conn.execute(
                """SELECT t.seq, t.proposal_id, p.incident_id, t.body FROM transitions AS t
                   JOIN proposals AS p ON p.id = t.proposal_id
                   WHERE t.seq > ? ORDER BY t.seq LIMIT ?""",
                (after, limit),
            ).fetchall()
        changes = []
        for row in rows:
            step = self._load(Transition, row["body"], row["proposal_id"])
            changes.append(
                ProposalChange(
                    seq=int(row["seq"]),
                    proposal_id=str(row["proposal_id"]),
                    incident_id=str(row["incident_id"]),
                    to_state=step.to_state,
                    actor=step.actor,
                    at=step.at,
                )
            )
        return tuple(changes)

    def last_proposal_change(self) -> int:
        """The sequence number of the newest transition (0 when there is none)."""
        with self._reading("read the last proposal change") as conn:
            row = conn.execute("SELECT COALESCE(MAX(seq), 0) AS seq FROM transitions").fetchone()
        return int(row["seq"])

    def transition(
        self,
        proposal_id: str,
        expected_state: ProposalState,
        new_state: ProposalState,
        actor: str,
        at: datetime,
        reason: str = "",
    ) -> Proposal | None:
        """Compare-and-swap: move the proposal to `new_state` only if it is in `expected_state`.

        Returns the updated proposal, or None if it is missing or in another state (another
        click, approver, thread or process got there first); `get_proposal` tells which."""
        change = Transition(
            to_state=new_state, at=at, actor=actor, reason=reason, from_state=expected_state
        )
        with self._writing(f"move proposal {proposal_id} to {new_state}") as conn:
            moved = conn.execute(
                """UPDATE proposals SET state = ?, body = json_set(body, '$.state', ?)
                   WHERE id = ? AND state = ?""",
                (new_state.value, new_state.value, proposal_id, expected_state.value),
            ).rowcount
            if moved != 1:
                return None
            _insert_transition(conn, proposal_id, change)
            return self._proposal(conn, proposal_id)

    def add_approval(
        self,
        proposal_id: str,
        approver: str,
        at: datetime,
        expected_state: ProposalState = ProposalState.OFFERED,
    ) -> tuple[Approval, ...] | None:
        """Record one approver's approval while the proposal is still in `expected_state`.

        Returns every approval so far, first approver first (an approver who approves twice
        counts once), or None if the proposal is missing or no longer in `expected_state`.
        The approvers also appear in the proposal's `approvals`. Reaching the quorum is then
        acted on with `transition`, which decides any race."""
        with self._writing(f"record approval of proposal {proposal_id}") as conn:
            if not _exists(
                conn,
                "SELECT 1 FROM proposals WHERE id = ? AND state = ?",
                proposal_id,
                expected_state.value,
            ):
                return None
            _insert_approval(conn, proposal_id, approver, at)
            return _approvals(conn, proposal_id)

    def approvals(self, proposal_id: str) -> tuple[Approval, ...]:
        with self._reading(f"read approvals of proposal {proposal_id}") as conn:
            return _approvals(conn, proposal_id)

    # -- the action ledger -----------------------------------------------------------------

    def start_action(self, entry: LedgerEntry) -> None:
        """Record an action as STARTED before it runs; a proposal's action starts once."""
        if entry.result is not ActionResult.STARTED:
            raise ValueError(f"a ledger entry starts as {ActionResult.STARTED}, not {entry.result}")
        with self._writing(f"record the start of proposal {entry.proposal_id}'s action") as conn:
            if _exists(conn, "SELECT 1 FROM ledger WHERE proposal_id = ?", entry.proposal_id):
                raise StoreError(
                    self.path, f"the action of proposal {entry.proposal_id} was already started"
                )
            _write_ledger(conn, entry, insert=True)

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
            entry = self._load(LedgerEntry, row["body"], proposal_id)
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

    def running_actions(self) -> tuple[LedgerEntry, ...]:
        """Entries still STARTED, oldest first: after a restart, actions that were interrupted."""
        return self._ledger(
            """SELECT proposal_id, body FROM ledger WHERE result = ?
               ORDER BY started_at, proposal_id""",
            [ActionResult.STARTED.value],
            "list running actions",
        )

    def ledger_entry(self, proposal_id: str) -> LedgerEntry | None:
        found = self._ledger(
            "SELECT proposal_id, body FROM ledger WHERE proposal_id = ?",
            [proposal_id],
            f"read the ledger of proposal {proposal_id}",
        )
        return found[0] if found else None

    def recent_actions(self, n: int) -> tuple[LedgerEntry, ...]:
        """The `n` most recently started actions, newest first."""
        return self._ledger(
            "SELECT proposal_id, body FROM ledger ORDER BY started_at DESC, proposal_id DESC "
            "LIMIT ?",
            [n],
            "list recent actions",
        )

    # -- silences --------------------------------------------------------------------------

    def add_silence(self, silence: Silence) -> None:
        with self._writing(f"add silence {silence.id}") as conn:
            if _exists(conn, "SELECT 1 FROM silences WHERE id = ?", silence.id):
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

    def delete_silence(self, silence_id: str) -> bool:
        with self._writing(f"delete silence {silence_id}") as conn:
            return conn.execute("DELETE FROM silences WHERE id = ?", (silence_id,)).rowcount == 1

    # -- the notification outbox -----------------------------------------------------------

    def enqueue(self, notification: Notification) -> Notification:
        """Queue a notification; returns it with its outbox id (which also fixes its order).

        It is due from its `created_at` (at once if that is None)."""
        with self._writing(f"queue a notification for incident {notification.incident_id}") as conn:
            return _insert_notification(conn, notification)

    def save_delivery(
        self,
        delivery: Delivery,
        notifications: Iterable[Notification] = (),
        *,
        done: bool = False,
    ) -> tuple[Notification, ...]:
        """Record what the chat has seen of an incident together with the notifications
        that make it so, in one transaction: a restart neither loses a card nor posts it
        twice. `done`: the card needs nothing more (resolved and said so). The incident
        must be stored first. Returns the notifications with their outbox ids."""
        with self._writing(f"save the delivery record of incident {delivery.incident_id}") as conn:
            conn.execute(
                """INSERT INTO deliveries (incident_id, done, body) VALUES (?, ?, ?)
                   ON CONFLICT (incident_id) DO UPDATE SET done = excluded.done,
                       body = excluded.body""",
                (delivery.incident_id, int(done), dumps(delivery)),
            )
            return tuple(_insert_notification(conn, n) for n in notifications)

    def delivery(self, incident_id: str) -> Delivery | None:
        with self._reading(f"read the delivery record of incident {incident_id}") as conn:
            row = conn.execute(
                "SELECT body FROM deliveries WHERE incident_id = ?", (incident_id,)
            ).fetchone()
        return None if row is None else self._load(Delivery, row["body"], incident_id)

    def pending_deliveries(self) -> tuple[Delivery, ...]:
        """Delivery records of incidents whose card still needs something (not done)."""
        with self._reading("list pending delivery records") as conn:
            rows = conn.execute(
                "SELECT incident_id, body FROM deliveries WHERE done = 0 ORDER BY incident_id"
            ).fetchall()
        return tuple(self._load(Delivery, row["body"], row["incident_id"]) for row in rows)

    def next_due(self, now: datetime) -> OutboxMessage | None:
        """The oldest undelivered message that heads its (incident, channel) queue and whose
        next attempt is due at `now`. Later messages of a queue wait behind its head, so
        an update never overtakes the post it updates."""
        with self._reading("read the outbox") as conn:
            row = conn.execute(
                """SELECT * FROM outbox AS o
                   WHERE o.status = :pending
                     AND o.id = (SELECT MIN(h.id) FROM outbox AS h
                                 WHERE h.status = :pending AND h.incident_id = o.incident_id
                                   AND h.channel = o.channel)
                     AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= :now)
                   ORDER BY o.id LIMIT 1""",
                {"pending": Status.PENDING, "now": encode_time(now)},
            ).fetchone()
        return None if row is None else self._outbox_message(row)

    def pending_notifications(self) -> int:
        with self._reading("count the outbox") as conn:
            row = conn.execute(
                "SELECT COUNT(*) AS n FROM outbox WHERE status = ?", (Status.PENDING,)
            ).fetchone()
        return int(row["n"])

    def mark_delivered(self, message_id: int, chat_ref: str, at: datetime) -> bool:
        """The chat accepted the message; a POST's `chat_ref` becomes the incident's card in
        its channel (see `chat_ref`). False if the message was not pending."""
        with self._writing(f"mark notification {message_id} delivered") as conn:
            row = conn.execute(
                "SELECT incident_id, channel, kind FROM outbox WHERE id = ? AND status = ?",
                (message_id, Status.PENDING),
            ).fetchone()
            if row is None:
                return False
            conn.execute(
                "UPDATE outbox SET status = ?, chat_ref = ?, settled_at = ? WHERE id = ?",
                (Status.DELIVERED, chat_ref, encode_time(at), message_id),
            )
            if row["kind"] == NotificationKind.POST.value:
                _remember_chat_ref(conn, row["incident_id"], row["channel"], chat_ref, at)
            return True

    def mark_failed(self, message_id: int, error: str, next_attempt_at: datetime) -> bool:
        """A delivery attempt failed: count it and retry no earlier than `next_attempt_at`."""
        with self._writing(f"record a failed delivery of notification {message_id}") as conn:
            return (
                conn.execute(
                    """UPDATE outbox SET attempts = attempts + 1, last_error = ?,
                           next_attempt_at = ? WHERE id = ? AND status = ?""",
                    (error, encode_time(next_attempt_at), message_id, Status.PENDING),
                ).rowcount
                == 1
            )

    def mark_abandoned(self, message_id: int, error: str, at: datetime) -> bool:
        """Give up on a message the chat will never accept, so it stops blocking its queue."""
        with self._writing(f"abandon notification {message_id}") as conn:
            return (
                conn.execute(
                    """UPDATE outbox SET status = ?, attempts = attempts + 1, last_error = ?,
                           settled_at = ? WHERE id = ? AND status = ?""",
                    (Status.ABANDONED, error, encode_time(at), message_id, Status.PENDING),
                ).rowcount
                == 1
            )

    def chat_ref(self, incident_id: str, channel: str | None = None) -> str | None:
        """The chat reference of the incident's card (its delivered POST) in `channel`,
        or in the channel it was posted to first when `channel` is None."""
        sql = "SELECT ref FROM chat_refs WHERE incident_id = ?"
        args = [incident_id]
        if channel is not None:
            sql += " AND channel = ?"
            args.append(channel)
        with self._reading(f"read the chat reference of incident {incident_id}") as conn:
            row = conn.execute(sql + " ORDER BY posted_at, rowid LIMIT 1", args).fetchone()
        return None if row is None else str(row["ref"])

    # -- bookmarks -------------------------------------------------------------------------

    def bookmark(self, key: str) -> str | None:
        with self._reading(f"read bookmark {key}") as conn:
            row = conn.execute("SELECT value FROM bookmarks WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row["value"])

    def set_bookmark(self, key: str, value: str) -> None:
        with self._writing(f"save bookmark {key}") as conn:
            conn.execute(
                """INSERT INTO bookmarks (key, value) VALUES (?, ?)
                   ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
                (key, value),
            )

    # -- retention -------------------------------------------------------------------------

    def cleanup(self, now: datetime, retention: timedelta = DEFAULT_RETENTION) -> Cleanup:
        """Delete what ended before `now - retention`: resolved incidents (with their
        findings, proposals, transitions, approvals and chat references), delivered or
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
            conn.executemany("DELETE FROM incidents WHERE id = ?", [(i,) for i in old])
            notifications = conn.execute(
                "DELETE FROM outbox WHERE status <> ? AND settled_at < ?", (Status.PENDING, cutoff)
            ).rowcount
            silences = conn.execute("DELETE FROM silences WHERE ends_at < ?", (cutoff,)).rowcount
        return Cleanup(incidents=len(old), notifications=notifications, silences=silences)

    # -- helpers ---------------------------------------------------------------------------

    @contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """One statement (autocommit reads see a consistent state per statement)."""
        with self._lock, self._translated(what):
            yield self._conn

    @contextmanager
    def _snapshot(self, what: str) -> Iterator[sqlite3.Connection]:
        """Several reads that must see one state."""
        with self._lock, self._translated(what), _transaction(self._conn, "BEGIN"):
            yield self._conn

    @contextmanager
    def _writing(self, what: str) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds SQLite's write lock from its first statement, so
        a read-then-write inside it cannot be overtaken by another process."""
        with self._lock, self._translated(what), _transaction(self._conn, "BEGIN IMMEDIATE"):
            yield self._conn

    @contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(
                self.path, f"cannot {what}: {_problem(exc, self.busy_timeout)}"
            ) from exc

    def _load(self, cls: type[T], body: str, what: str) -> T:
        try:
            return loads(cls, body)
        except CodecError as exc:
            raise StoreError(
                self.path, f"stored {cls.__name__} {what} is unreadable: {exc}"
            ) from exc

    def _incidents(self, sql: str, args: list[Any], what: str) -> tuple[Incident, ...]:
        with self._reading(what) as conn:
            rows = conn.execute(sql, args).fetchall()
        return tuple(self._load(Incident, row["body"], row["id"]) for row in rows)

    def _proposal(self, conn: sqlite3.Connection, proposal_id: str) -> Proposal | None:
        row = conn.execute(
            "SELECT state, body FROM proposals WHERE id = ?", (proposal_id,)
        ).fetchone()
        if row is None:
            return None
        stored = self._load(Proposal, row["body"], proposal_id)
        history = tuple(
            self._load(Transition, change["body"], proposal_id)
            for change in conn.execute(
                "SELECT body FROM transitions WHERE proposal_id = ? ORDER BY seq", (proposal_id,)
            )
        )
        approvers = tuple(a.approver for a in _approvals(conn, proposal_id))
        return dataclasses.replace(
            stored, state=ProposalState(row["state"]), history=history, approvals=approvers
        )

    def _proposals(self, sql: str, args: list[Any], what: str) -> tuple[Proposal, ...]:
        with self._snapshot(what) as conn:
            ids = [str(row["id"]) for row in conn.execute(sql, args).fetchall()]
            found = [self._proposal(conn, proposal_id) for proposal_id in ids]
        return tuple(p for p in found if p is not None)

    def _ledger(self, sql: str, args: list[Any], what: str) -> tuple[LedgerEntry, ...]:
        with self._reading(what) as conn:
            rows = conn.execute(sql, args).fetchall()
        return tuple(self._load(LedgerEntry, row["body"], row["proposal_id"]) for row in rows)

    def _silences(self, sql: str, args: list[Any], what: str) -> tuple[Silence, ...]:
        with self._reading(what) as conn:
            rows = conn.execute(sql, args).fetchall()
        return tuple(self._load(Silence, row["body"], row["id"]) for row in rows)

    def _outbox_message(self, row: sqlite3.Row) -> OutboxMessage:
        notification = self._load(Notification, row["body"], f"notification {row['id']}")
        retry_at = row["next_attempt_at"]
        return OutboxMessage(
            notification=dataclasses.replace(notification, id=int(row["id"])),
            attempts=int(row["attempts"]),
            last_error=str(row["last_error"]),
            next_attempt_at=None if retry_at is None else decode_time(retry_at),
        )


# -- opening and migrating ----------------------------------------------------------------


def _display_path(path: str | os.PathLike[str] | None) -> str:
    if path is None:
        return str(default_path())
    text = os.fspath(path)
    return text if text == ":memory:" else str(Path(text).absolute())


def _connect(path: str, busy_timeout: float) -> sqlite3.Connection:
    """Open, configure and migrate; every failure becomes a StoreError naming the file."""
    try:
        conn = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise StoreError(path, f"cannot open the database: {_problem(exc, busy_timeout)}") from exc
    try:
        conn.row_factory = sqlite3.Row
        _configure(conn, busy_timeout)
        _check_not_newer(path, _user_version(conn))
        conn.execute("PRAGMA journal_mode = WAL").fetchone()
        migrate(conn, path)
    except StoreError:
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(path, f"cannot open the database: {_problem(exc, busy_timeout)}") from exc
    return conn


def _configure(conn: sqlite3.Connection, busy_timeout: float) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    conn.execute("PRAGMA foreign_keys = ON")
    # FULL: a committed approval must survive a power cut, or its action could run twice.
    conn.execute("PRAGMA synchronous = FULL")


def migrate(conn: sqlite3.Connection, path: str, upto: int = SCHEMA_VERSION) -> None:
    """Apply the migrations after the file's version up to `upto`, each in its own
    IMMEDIATE transaction that re-reads the version, so two processes opening the
    same new file migrate it once."""
    for migration in MIGRATIONS:
        if migration.version > upto or migration.version <= _user_version(conn):
            continue
        with _transaction(conn, "BEGIN IMMEDIATE"):
            current = _user_version(conn)
            _check_not_newer(path, current)
            if current < migration.version:
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {migration.version}")


def _check_not_newer(path: str, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(
            path,
            f"the database is at schema version {version}, newer than this pitcrew supports "
            f"(version {SCHEMA_VERSION}); upgrade pitcrew or point it at another file",
        )


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


@contextmanager
def _transaction(conn: sqlite3.Connection, begin: str) -> Iterator[None]:
    conn.execute(begin)
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


_PROBLEMS = (
    ("file is not a database", "not a SQLite database (corrupted, or another kind of file)"),
    ("malformed", "the database file is corrupted ({error})"),
    (
        "unable to open database file",
        "cannot open the file: its directory is missing or not "
        "accessible, or the path is a directory",
    ),
    (
        "readonly database",
        "the file is read-only: pitcrew needs write access to the file and its directory",
    ),
    ("disk i/o error", "disk I/O error"),
)


def _problem(exc: sqlite3.Error, busy_timeout: float) -> str:
    """The failure in words a user can act on."""
    error = str(exc)
    lowered = error.lower()
    if "locked" in lowered or "busy" in lowered:
        return f"the database stayed locked by another connection for more than {busy_timeout:g}s"
    for fragment, problem in _PROBLEMS:
        if fragment in lowered:
            return problem.format(error=error)
    return error


# -- row writers --------------------------------------------------------------------------


def _exists(conn: sqlite3.Connection, sql: str, *args: object) -> bool:
    return conn.execute(sql, args).fetchone() is not None


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


def _insert_notification(conn: sqlite3.Connection, notification: Notification) -> Notification:
    body = dumps(dataclasses.replace(notification, id=None))
    due = None if notification.created_at is None else encode_time(notification.created_at)
    cursor = conn.execute(
        """INSERT INTO outbox (incident_id, channel, kind, next_attempt_at, body)
           VALUES (?, ?, ?, ?, ?)""",
        (notification.incident_id, notification.channel, notification.kind.value, due, body),
    )
    return dataclasses.replace(notification, id=cursor.lastrowid)


def _insert_transition(conn: sqlite3.Connection, proposal_id: str, change: Transition) -> None:
    conn.execute(
        "INSERT INTO transitions (proposal_id, to_state, at, body) VALUES (?, ?, ?, ?)",
        (proposal_id, change.to_state.value, encode_time(change.at), dumps(change)),
    )


def _insert_approval(
    conn: sqlite3.Connection, proposal_id: str, approver: str, at: datetime
) -> None:
    conn.execute(
        """INSERT INTO approvals (proposal_id, approver, at) VALUES (?, ?, ?)
           ON CONFLICT (proposal_id, approver) DO NOTHING""",
        (proposal_id, approver, encode_time(at)),
    )


def _approvals(conn: sqlite3.Connection, proposal_id: str) -> tuple[Approval, ...]:
    rows = conn.execute(
        "SELECT approver, at FROM approvals WHERE proposal_id = ? ORDER BY seq", (proposal_id,)
    ).fetchall()
    return tuple(
        Approval(proposal_id, str(row["approver"]), decode_time(row["at"])) for row in rows
    )


def _write_ledger(conn: sqlite3.Connection, entry: LedgerEntry, *, insert: bool) -> None:
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


def _write_silence(conn: sqlite3.Connection, silence: Silence, *, insert: bool) -> None:
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


def _remember_chat_ref(
    conn: sqlite3.Connection, incident_id: str, channel: str, ref: str, at: datetime
) -> None:
    conn.execute(
        """INSERT INTO chat_refs (incident_id, channel, ref, posted_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (incident_id, channel)
           DO UPDATE SET ref = excluded.ref, posted_at = excluded.posted_at""",
        (incident_id, channel, ref, encode_time(at)),
    )

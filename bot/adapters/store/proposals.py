"""Proposals, their transition history and partial approvals in the store.

A proposal changes state only by compare-and-swap (`record_decision`): a decision
of `bot.core.actions.approvals` is checked against the stored proposal's `version` and
`LEGAL`, and written with its history rows in one write transaction (which holds
the store's one write lock, SQLite's or PostgreSQL's), so two
clicks, two approvers, two threads or two processes move it once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.adapters.store.connection import SharedConnection
from bot.adapters.store.database import Tx, exists
from bot.core.actions.approvals import steps_to_record
from bot.core.actions.order import rank_key
from bot.core.codec import decode_time, dumps, encode_time
from bot.core.errors import StoreError
from bot.core.model import Proposal, ProposalState, Transition
from bot.daemon.ports import ProposalChange


@dataclass(frozen=True, slots=True)
class Approval:
    """One approver's approval of a proposal that needs more than one."""

    proposal_id: str
    approver: str
    at: datetime


class ProposalRecords(SharedConnection):
    """Proposals with their history and approvals, changed only by compare-and-swap."""

    def create_proposal(self, proposal: Proposal) -> Proposal:
        """Store a new proposal with the history and approvals it carries; its incident
        must be stored first."""
        local = proposal.cluster or self.cluster
        body = dumps(dataclasses.replace(proposal, history=(), approvals=(), cluster=local))
        with self._writing(f"create proposal {proposal.id}") as conn:
            if proposal.state is not ProposalState.OFFERED:
                raise StoreError(
                    self.path, f"proposal {proposal.id} is created offered, not {proposal.state}"
                )
            if exists(conn, "SELECT 1 FROM proposals WHERE id = ?", proposal.id):
                raise StoreError(self.path, f"proposal {proposal.id} already exists")
            if not exists(conn, "SELECT 1 FROM incidents WHERE id = ?", proposal.incident_id):
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
        """The incident's proposals in the order the core ranked them (`rank_key`: the
        root cause's own action first), each with its full history."""
        found = self._proposals(
            "SELECT id FROM proposals WHERE incident_id = ? ORDER BY created_at, id",
            [incident_id],
            f"list proposals of incident {incident_id}",
        )
        return tuple(sorted(found, key=rank_key))

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

    def record_decision(self, decided: Proposal, expected_version: int) -> Proposal:
        """The one write of a proposal's state: compare-and-swap of a decision of
        `bot.core.actions.approvals` made from the proposal at `expected_version`.

        In one write transaction the stored proposal is read, the decision checked
        against it (`approvals.steps_to_record`: raises `StaleProposalError` when another
        click, approver, thread or process wrote it first, `IllegalTransitionError` for a
        move `LEGAL` does not list), and its new state, version, history steps and
        approvers written. Returns the proposal as now stored."""
        what = f"record the decision on proposal {decided.id}"
        with self._writing(what) as conn:
            stored = self._proposal(conn, decided.id)
            if stored is None:
                raise StoreError(self.path, f"cannot record a decision: no proposal {decided.id}")
            steps = steps_to_record(stored, decided, expected_version)
            body = dataclasses.replace(
                stored, state=decided.state, version=decided.version, history=(), approvals=()
            )
            conn.execute(
                "UPDATE proposals SET state = ?, body = ? WHERE id = ?",
                (decided.state.value, dumps(body), decided.id),
            )
            for step in steps:
                _insert_transition(conn, decided.id, step)
            for approver in dict.fromkeys(decided.approvals):
                if approver not in stored.approvals:
                    _insert_approval(conn, decided.id, approver, steps[-1].at)
            recorded = self._proposal(conn, decided.id)
            assert recorded is not None
            return recorded

    def approvals(self, proposal_id: str) -> tuple[Approval, ...]:
        with self._reading(f"read approvals of proposal {proposal_id}") as conn:
            return _approvals(conn, proposal_id)

    def _proposal(self, conn: Tx, proposal_id: str) -> Proposal | None:
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
            stored,
            state=ProposalState(row["state"]),
            history=history,
            approvals=approvers,
            cluster=stored.cluster or self.cluster,
        )

    def _proposals(self, sql: str, args: list[Any], what: str) -> tuple[Proposal, ...]:
        with self._snapshot(what) as conn:
            ids = [str(row["id"]) for row in conn.execute(sql, args).fetchall()]
            found = [self._proposal(conn, proposal_id) for proposal_id in ids]
        return tuple(p for p in found if p is not None)


def _insert_transition(conn: Tx, proposal_id: str, change: Transition) -> None:
    conn.execute(
        "INSERT INTO transitions (proposal_id, to_state, at, body) VALUES (?, ?, ?, ?)",
        (proposal_id, change.to_state.value, encode_time(change.at), dumps(change)),
    )


def _insert_approval(conn: Tx, proposal_id: str, approver: str, at: datetime) -> None:
    conn.execute(
        """INSERT INTO approvals (proposal_id, approver, at) VALUES (?, ?, ?)
           ON CONFLICT (proposal_id, approver) DO NOTHING""",
        (proposal_id, approver, encode_time(at)),
    )


def _approvals(conn: Tx, proposal_id: str) -> tuple[Approval, ...]:
    rows = conn.execute(
        "SELECT approver, at FROM approvals WHERE proposal_id = ? ORDER BY seq", (proposal_id,)
    ).fetchall()
    return tuple(
        Approval(proposal_id, str(row["approver"]), decode_time(row["at"])) for row in rows
    )

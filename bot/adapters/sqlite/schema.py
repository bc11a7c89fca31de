"""The SQLite schema as numbered migrations (DESIGN.md "State").

A new table or index is a new `Migration` at the end of `MIGRATIONS`; a file's
`PRAGMA user_version` says which have been applied (see `connection.migrate`).
"""

from __future__ import annotations

from dataclasses import dataclass


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
    Migration(
        4,
        "signed chat requests already seen (replays refused across a restart)",
        (
            """CREATE TABLE seen_requests (
                signature TEXT PRIMARY KEY,
                seen_at REAL NOT NULL)""",
            "CREATE INDEX seen_requests_by_time ON seen_requests (seen_at)",
        ),
    ),
    Migration(
        5,
        "failure lines no playbook matched, one row per shape (pitcrew unmatched)",
        (
            """CREATE TABLE unmatched (
                shape TEXT PRIMARY KEY,
                example TEXT NOT NULL,
                origin TEXT NOT NULL,
                count INTEGER NOT NULL,
                first_seen TEXT NOT NULL,
                last_seen TEXT NOT NULL)""",
            "CREATE INDEX unmatched_by_count ON unmatched (count DESC, last_seen DESC)",
        ),
    ),
    Migration(
        6,
        "evidence accepted and not yet taken in by the pipeline (kept across a restart)",
        (
            """CREATE TABLE intake (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                received_at TEXT NOT NULL,
                meta TEXT NOT NULL,
                body BLOB NOT NULL)""",
        ),
    ),
    Migration(
        7,
        "signed requests remembered until their signature expires; kept evidence that a bug "
        "or a budget stopped is set aside (pitcrew status, pitcrew requeue)",
        (
            "ALTER TABLE seen_requests RENAME COLUMN seen_at TO forget_at",
            # Version 6 kept a row from its receipt; a timestamp it accepted was at most
            # five minutes ahead of that, so ten minutes from receipt covers each one.
            "UPDATE seen_requests SET forget_at = forget_at + 600",
            # queued, failed (retried at the next start) or quarantined (until requeued)
            "ALTER TABLE intake ADD COLUMN state TEXT NOT NULL DEFAULT 'queued'",
            "ALTER TABLE intake ADD COLUMN takes INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE intake ADD COLUMN stage TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE intake ADD COLUMN problem TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE intake ADD COLUMN stopped_at TEXT",
        ),
    ),
    Migration(
        8,
        "evidence bundles captured at a RayJob's or RayCluster's first failure signal, kept "
        "with the incident after the cluster is deleted (pitcrew bundle)",
        (
            """CREATE TABLE bundles (
                incident_id TEXT NOT NULL,
                name TEXT NOT NULL,
                captured_at TEXT NOT NULL,
                size INTEGER NOT NULL,
                body BLOB NOT NULL,
                PRIMARY KEY (incident_id, name))""",
        ),
    ),
    Migration(
        9,
        "cards posted while the chat's history did not answer, kept until they are checked "
        "for a second card of their incident (across a restart)",
        (
            """CREATE TABLE unchecked_cards (
                channel_id TEXT NOT NULL,
                incident_id TEXT NOT NULL,
                ts TEXT NOT NULL,
                since TEXT,
                posted_at TEXT NOT NULL,
                PRIMARY KEY (channel_id, incident_id))""",
        ),
    ),
    Migration(
        10,
        "kept evidence by state: a running daemon looks for the rows pitcrew requeue released "
        "every few seconds",
        ("CREATE INDEX intake_by_state ON intake (state)",),
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version

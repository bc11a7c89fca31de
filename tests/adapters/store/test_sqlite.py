"""What only the SQLite store has: a file (made whole, in WAL mode, in the working
directory by default), `PRAGMA user_version`, and SQLite's own failures named with the
file and the problem."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.store.proposals import Approval
from bot.adapters.store.schema import SCHEMA_VERSION
from bot.adapters.store.sqlite import migrate
from bot.adapters.store.store import Store
from bot.core.actions import approvals
from bot.core.codec import dumps, encode_time
from bot.core.errors import StoreError
from bot.core.model import NotificationKind
from tests.support.records import T0, TABLES, click, drain, incident, minutes, note, proposal


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def user_version(path: Path) -> int:
    with raw(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def test_a_new_file_is_in_wal_mode(db: Path) -> None:
    with Store(db) as store:
        assert user_version(db) == SCHEMA_VERSION
        store.ping()
    with raw(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name"
        ).fetchall()
        assert [name for (name,) in tables] == TABLES


def test_the_default_file_is_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Store() as store:
        assert store.path == str(tmp_path / "pitcrew.db")
    assert (tmp_path / "pitcrew.db").is_file()


def version_1_file(path: Path) -> None:
    """A database as pitcrew left it at schema version 1, with a card posted and two
    notifications still queued."""
    with raw(path) as conn:
        migrate(conn, str(path), upto=1)
        conn.execute(
            "INSERT INTO incidents VALUES (?, ?, 'open', 'prod', 'ml', 'ml/rayjob/verl', ?, ?, "
            "NULL, ?)",
            ("inc-1", "ml/rayjob/verl", encode_time(T0), encode_time(T0), dumps(incident("inc-1"))),
        )
        rows = [
            ("post", "delivered", "C1/171.1", dumps(note("inc-1", text="card"))),
            ("update", "pending", None, dumps(note("inc-1", NotificationKind.UPDATE, text="u1"))),
            ("reply", "pending", None, dumps(note("inc-1", NotificationKind.REPLY, text="r1"))),
        ]
        for kind, status, ref, body in rows:
            conn.execute(
                "INSERT INTO outbox (incident_id, channel, kind, status, chat_ref, settled_at, "
                "body) VALUES ('inc-1', '#alerts', ?, ?, ?, ?, ?)",
                (kind, status, ref, encode_time(minutes(1)) if ref else None, body),
            )


def test_a_version_1_file_is_migrated_and_keeps_its_data(db: Path) -> None:
    version_1_file(db)
    assert user_version(db) == 1
    with Store(db) as store:
        assert user_version(db) == SCHEMA_VERSION
        assert store.incident("inc-1") == incident("inc-1")
        assert store.chat_ref("inc-1") == "C1/171.1"
        assert drain(store, minutes(5)) == [(2, "u1"), (3, "r1")]
        store.create_proposal(proposal("p-1"))
        assert isinstance(click(store, "p-1", "U1", minutes(1)), approvals.NeedsSecondApprover)
        assert store.approvals("p-1") == (Approval("p-1", "U1", minutes(1)),)
    assert user_version(db) == SCHEMA_VERSION


def test_a_newer_schema_is_refused_and_left_alone(db: Path) -> None:
    with raw(db) as conn:
        conn.execute("CREATE TABLE future (x)")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError) as caught:
        Store(db)
    assert str(caught.value) == (
        f"{db}: the database is at schema version {SCHEMA_VERSION + 1}, newer than this "
        f"pitcrew supports (version {SCHEMA_VERSION}); upgrade pitcrew or point it at "
        "another file"
    )
    assert user_version(db) == SCHEMA_VERSION + 1


def corrupt_schema(path: Path) -> None:
    """A real pitcrew database whose first page (the schema) was overwritten."""
    Store(path).close()
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xa5" * (4096 - 100)
    path.write_bytes(bytes(data))


OPEN_FAILURES = [
    pytest.param(
        lambda p: p.write_bytes(b"this is not a database, just some text\n" * 200),
        lambda p: p,
        "cannot open the database: not a SQLite database (corrupted, or another kind of file)",
        id="not-a-database",
    ),
    pytest.param(
        lambda p: p.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4080),
        lambda p: p,
        "cannot open the database: not a SQLite database (corrupted, or another kind of file)",
        id="corrupted-header",
    ),
    pytest.param(
        corrupt_schema,
        lambda p: p,
        "cannot open the database: the database file is corrupted "
        "(database disk image is malformed)",
        id="corrupted-schema",
    ),
    pytest.param(
        lambda p: p.mkdir(),
        lambda p: p,
        "cannot open the database: cannot open the file: its directory is missing or not "
        "accessible, or the path is a directory",
        id="a-directory",
    ),
    pytest.param(
        lambda p: None,
        lambda p: p / "missing" / "state.db",
        "cannot open the database: cannot open the file: its directory is missing or not "
        "accessible, or the path is a directory",
        id="missing-directory",
    ),
]


@pytest.mark.parametrize(("prepare", "target", "problem"), OPEN_FAILURES)
def test_files_that_cannot_be_opened_are_named_with_the_problem(
    db: Path, prepare: Any, target: Any, problem: str
) -> None:
    prepare(db)
    path = target(db)
    with pytest.raises(StoreError) as caught:
        Store(path)
    assert caught.value.path == str(path)
    assert caught.value.problem == problem
    assert str(caught.value) == f"{path}: {problem}"


def test_a_database_locked_too_long_is_named_with_the_problem(db: Path) -> None:
    with raw(db) as holder:
        holder.execute("CREATE TABLE other (x)")
        holder.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        with pytest.raises(StoreError) as caught:
            Store(db, busy_timeout=0.2)
        waited = time.monotonic() - started
        holder.execute("ROLLBACK")
    assert caught.value.problem == (
        "cannot open the database: the database stayed locked by another connection for "
        "more than 0.2s"
    )
    assert 0.15 < waited < 5


def test_a_closed_store_says_so(db: Path) -> None:
    store = Store(db)
    store.close()
    with pytest.raises(StoreError) as caught:
        store.incident("inc-1")
    assert str(caught.value) == (
        f"{db}: cannot read incident inc-1: Cannot operate on a closed database."
    )

"""The two stores a test can open, and a look at either beside the store.

A pytest plugin (tests/conftest.py loads it): `postgres`, the session's real PostgreSQL
(Debian's package, `make postgresql`; bot.adapters.store.local_postgres), started the
first time a test asks for it and stopped by pid at the session's end; `postgres_url`,
a fresh empty database on it for one test; `store_location`, a SQLite file or a
PostgreSQL database for the test's parameter `store_kind` (the store suite runs each
spec on both: tests/adapters/store/conftest.py).

`execute`, `schema_version` and `tables` read or change a store's database on a
connection of their own, whichever kind it is (`?` parameters on both).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bot.adapters.store.local_postgres import LocalPostgres
from bot.adapters.store.urls import is_url

KINDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    server = LocalPostgres()
    server.start()
    pid = server.pid
    try:
        yield server
    finally:
        server.stop()
        assert not _running(pid), f"postgres (pid {pid}) survived its stop"


@pytest.fixture
def postgres_url(postgres: LocalPostgres) -> str:
    return postgres.database()


@pytest.fixture
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the test's store is: `state.db` in its temporary directory, or a new
    PostgreSQL database, by the `store_kind` parameter."""
    kind = request.param if hasattr(request, "param") else "sqlite"
    if kind == "postgresql":
        server: LocalPostgres = request.getfixturevalue("postgres")
        return server.database()
    return str(tmp_path / "state.db")


def execute(location: str, sql: str, args: Sequence[object] = ()) -> list[tuple[Any, ...]]:
    """One statement on a connection of its own; the rows it returned."""
    if is_url(location):
        with psycopg.connect(location, autocommit=True) as conn:
            cursor = conn.execute(sql.replace("?", "%s"), tuple(args))
            return list(cursor.fetchall()) if cursor.description else []
    conn = sqlite3.connect(location, isolation_level=None)
    try:
        return list(conn.execute(sql, tuple(args)).fetchall())
    finally:
        conn.close()


def schema_version(location: str) -> int:
    if is_url(location):
        return int(execute(location, "SELECT version FROM pitcrew_schema")[0][0])
    return int(execute(location, "PRAGMA user_version")[0][0])


def tables(location: str) -> list[str]:
    """The store's tables, by name (the database's own bookkeeping left out)."""
    if is_url(location):
        rows = execute(
            location,
            """SELECT table_name FROM information_schema.tables
               WHERE table_schema = current_schema() AND table_name <> 'pitcrew_schema'
               ORDER BY table_name""",
        )
    else:
        rows = execute(
            location,
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name",
        )
    return [str(name) for (name,) in rows]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False

"""The shared store: PostgreSQL through psycopg 3, for more than one replica (the only
module that imports psycopg).

Why this exists: SQLite's file lives on one pod's volume, so a standby replica has no
state to take over with. With `store.url: postgresql://…` every replica opens the same
database; the records run unchanged (their `?` parameters become psycopg's `%s` here),
and the one history of `schema.MIGRATIONS` is applied under an advisory lock, its
version kept in the one-row table `pitcrew_schema`, so replicas starting together
migrate once.

Writers are serialized as SQLite serializes them: each write transaction (READ
COMMITTED) first takes a transaction-scoped advisory lock, so the read-then-write
inside it (a proposal's compare-and-swap, a ledger claim, an outbox row's move) is
atomic against every other replica and process, and rows numbered inside it commit in
their order (a reader of `transitions` after sequence N never misses a row committed
later under a smaller number). pitcrew writes a few rows a second at most; one lock
costs nothing there and leaves no statement to reason about alone. Snapshots are
REPEATABLE READ, READ ONLY. A connection lost (a restart, a failover of the server) is
opened again at the next use; until then each use fails with a `StoreError`, which
`/readyz` reports.

Every message names the URL without its password (`where`). The password may be in the
URL, or given apart (`PITCREW_STORE_PASSWORD`, a mounted Secret's file).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from bot.adapters.store.database import Cursor
from bot.adapters.store.schema import MIGRATIONS, SCHEMA_VERSION, Dialect
from bot.adapters.store.urls import redacted
from bot.core.errors import StoreError

WRITE_LOCK = 0x70697463  # "pitc": the advisory lock every write transaction takes first
CONNECT_TIMEOUT = 10  # seconds, unless the URL says otherwise
INIT_HINT = "start `pitcrew run --init-store` to make it one, or point store.url elsewhere"


class PostgresTx:
    """The records' statements on one psycopg connection."""

    def __init__(self, conn: psycopg.Connection[dict[str, object]]) -> None:
        self._conn = conn

    def execute(self, sql: str, args: Sequence[object] = ()) -> Cursor:
        return self._conn.execute(_spelt(sql), tuple(args))

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(_spelt(sql), [tuple(row) for row in rows])


@lru_cache(maxsize=512)
def _spelt(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresDatabase:
    """One psycopg connection (autocommit; transactions begun explicitly), migrated."""

    dialect: Dialect = "postgresql"
    kind = "PostgreSQL"

    def __init__(
        self, url: str, busy_timeout: float, *, init: bool = False, password: str | None = None
    ) -> None:
        self.where = redacted(url)
        self.busy_timeout = busy_timeout
        self._conninfo = _conninfo(url, password)
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            raise StoreError(self.where, self.problem(exc)) from exc
        try:
            migrate(self._conn, self.where, init=init)
        except psycopg.Error as exc:
            self._conn.close()
            raise StoreError(
                self.where, f"cannot migrate the database: {self.problem(exc)}"
            ) from exc
        except StoreError:
            self._conn.close()
            raise

    def _connect(self) -> psycopg.Connection[dict[str, object]]:
        conn = psycopg.connect(self._conninfo, autocommit=True, row_factory=dict_row)
        try:
            conn.execute(f"SET lock_timeout = {int(self.busy_timeout * 1000)}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> psycopg.Connection[dict[str, object]]:
        """The connection, opened again if the last one was lost."""
        if self._conn.closed or self._conn.broken:
            self._conn.close()
            self._conn = self._connect()
        return self._conn

    @contextmanager
    def reading(self) -> Iterator[PostgresTx]:
        yield PostgresTx(self._open())

    @contextmanager
    def snapshot(self) -> Iterator[PostgresTx]:
        conn = self._open()
        with transaction(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"):
            yield PostgresTx(conn)

    @contextmanager
    def writing(self) -> Iterator[PostgresTx]:
        conn = self._open()
        with transaction(conn, "BEGIN ISOLATION LEVEL READ COMMITTED"):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            yield PostgresTx(conn)

    def is_error(self, error: BaseException) -> bool:
        return isinstance(error, psycopg.Error)

    def problem(self, error: BaseException) -> str:
        if isinstance(error, pg_errors.LockNotAvailable):
            return f"the store stayed locked by another writer for more than {self.busy_timeout:g}s"
        if isinstance(error, pg_errors.DiskFull):
            return "the database server's disk is full"
        if isinstance(error, pg_errors.ReadOnlySqlTransaction):
            return "the database is read-only (a standby server?): pitcrew needs to write"
        if isinstance(error, psycopg.OperationalError):
            return f"PostgreSQL does not answer: {_first_line(error)}"
        primary = error.diag.message_primary if isinstance(error, psycopg.Error) else None
        return primary or _first_line(error)

    def disk_refused(self, error: BaseException) -> bool:
        return isinstance(
            error, (pg_errors.DiskFull, pg_errors.ReadOnlySqlTransaction, pg_errors.IoError)
        )

    def close(self) -> None:
        self._conn.close()


def answer(url: str, password: str | None = None) -> tuple[bool, str]:
    """Whether the server answers, and the database's schema version, read without
    changing anything (`pitcrew config check`)."""
    try:
        with psycopg.connect(
            _conninfo(url, password), autocommit=True, row_factory=dict_row
        ) as conn:
            found = version(conn)
    except psycopg.Error as exc:
        return False, f"does not answer: {_first_line(exc)}"
    if found is None:
        return True, "answers (no pitcrew schema yet: `pitcrew run` makes it)"
    return True, f"answers (schema version {found})"


def _conninfo(url: str, password: str | None) -> str:
    given = conninfo_to_dict(url)
    extra: dict[str, str | int] = {"application_name": "pitcrew"}
    if "connect_timeout" not in given:
        extra["connect_timeout"] = CONNECT_TIMEOUT
    if password and "password" not in given:
        extra["password"] = password
    return make_conninfo(url, **{k: v for k, v in extra.items() if k not in given})


def _first_line(error: BaseException) -> str:
    text = str(error).strip().removeprefix("connection failed: ")
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or repr(error)


@contextmanager
def transaction(conn: psycopg.Connection[dict[str, object]], begin: str) -> Iterator[None]:
    conn.execute(begin)
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            with suppress(psycopg.Error):  # the connection is gone, and its transaction too
                conn.execute("ROLLBACK")
        raise


# -- the schema's version, and the migrations -------------------------------------------


def migrate(
    conn: psycopg.Connection[dict[str, object]],
    where: str,
    upto: int = SCHEMA_VERSION,
    *,
    init: bool = False,
) -> None:
    """Apply the migrations after the database's version up to `upto`, each in its own
    transaction under the write lock that re-reads the version, so replicas opening a
    new database together migrate it once. A database with tables and no pitcrew
    schema is refused unless `init`. An up-to-date database is only read."""
    found = version(conn)
    if found is not None and found >= upto:
        _check_not_newer(where, found)
        return
    with transaction(conn, "BEGIN"):
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        if version(conn) is None:
            if not init:
                _refuse_foreign(conn, where)
            conn.execute("CREATE TABLE pitcrew_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO pitcrew_schema (version) VALUES (0)")
    for migration in MIGRATIONS:
        if migration.version > upto:
            break
        with transaction(conn, "BEGIN"):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            current = version(conn) or 0
            _check_not_newer(where, current)
            if current < migration.version:
                for statement in migration.sql("postgresql"):
                    conn.execute(statement)
                conn.execute("UPDATE pitcrew_schema SET version = %s", (migration.version,))


def version(conn: psycopg.Connection[dict[str, object]]) -> int | None:
    """The schema version recorded, None when the database has no pitcrew schema."""
    found = conn.execute(  # the statement's snapshot: a table another replica just made
        """SELECT 1 FROM information_schema.tables
           WHERE table_schema = current_schema() AND table_name = 'pitcrew_schema'"""
    ).fetchone()
    if found is None:
        return None
    row = conn.execute("SELECT version FROM pitcrew_schema").fetchone()
    return 0 if row is None else int(str(row["version"]))


def _refuse_foreign(conn: psycopg.Connection[dict[str, object]], where: str) -> None:
    rows = conn.execute(
        """SELECT table_name AS name FROM information_schema.tables
           WHERE table_schema = current_schema() ORDER BY table_name LIMIT 4"""
    ).fetchall()
    if rows:
        tables = ", ".join(str(row["name"]) for row in rows)
        raise StoreError(
            where,
            f"a PostgreSQL database that is not a pitcrew store (tables {tables}); {INIT_HINT}",
        )


def _check_not_newer(where: str, current: int) -> None:
    if current > SCHEMA_VERSION:
        raise StoreError(
            where,
            f"the database is at schema version {current}, newer than this pitcrew supports "
            f"(version {SCHEMA_VERSION}); upgrade pitcrew or point it at another database",
        )

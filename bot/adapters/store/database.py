"""What the store's records need of a database, whichever it is: SQLite's file or a shared
PostgreSQL.

Why this exists: the records (`incidents`, `proposals`, `ledger`, `outbox`, ...) are
written once, in the SQL both databases share, with `?` parameters and rows read by
column name; a driver (`sqlite.SqliteDatabase`, `postgres.PostgresDatabase`) hands them a
`Tx` in one of three modes and says what its errors mean. The modes are the same on
both: a `reading` is one statement; a `snapshot` is several reads that see one state;
a `writing` is a transaction that holds the store's one write lock from its first
statement (SQLite's `BEGIN IMMEDIATE`, a transaction-scoped advisory lock on
PostgreSQL), so every read-then-write inside it — a compare-and-swap of a proposal, a
ledger claim, an outbox row — is atomic against every other writer, thread or process,
and rows numbered inside it commit in their order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from bot.adapters.store.schema import Dialect

Row = Any
"""A row whose columns are read by name (`row["id"]`)."""


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Row:
        """The next row, or None."""
        ...

    def fetchall(self) -> Sequence[Row]: ...

    def __iter__(self) -> Iterator[Row]: ...


class Tx(Protocol):
    """Statements in the store's SQL: `?` for each parameter, in order."""

    def execute(self, sql: str, args: Any = ()) -> Cursor:
        """`args`: a sequence, one value per `?`."""
        ...

    def executemany(self, sql: str, rows: Iterable[Any]) -> object: ...


class Database(Protocol):
    """One open database; not thread-safe by itself (the store's lock guards it)."""

    dialect: Dialect
    where: str
    """The file, or the URL without its password: what a message names."""
    kind: str
    """`SQLite` or `PostgreSQL`, for what `pitcrew status` and `/readyz` say."""

    def reading(self) -> AbstractContextManager[Tx]: ...

    def snapshot(self) -> AbstractContextManager[Tx]: ...

    def writing(self) -> AbstractContextManager[Tx]: ...

    def is_error(self, error: BaseException) -> bool:
        """The driver's own error (anything else is a bug and passes through)."""
        ...

    def problem(self, error: BaseException) -> str:
        """The failure in words a user can act on."""
        ...

    def disk_refused(self, error: BaseException) -> bool:
        """The write failed for want of room or write access, not for what it wrote."""
        ...

    def close(self) -> None: ...


def exists(conn: Tx, sql: str, *args: object) -> bool:
    return conn.execute(sql, args).fetchone() is not None

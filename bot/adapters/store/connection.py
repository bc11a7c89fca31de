"""One database connection shared by the threads of a process: opening the store a
location names, transactions, fencing, and the database's errors in words a user can act on.

`SharedConnection` is the base of every record class of the store: it owns the lock and
the `database.Database` (SQLite's file, or PostgreSQL when the location is a
`postgresql://` URL), and hands out reads, snapshots and write transactions that
translate the driver's errors into `StoreError` naming the file or the URL (never its
password).

Fencing (`fence`, `bot.daemon.ports.Fenced`): once a leader has given the store its
term, every write of this store object first checks, in the same transaction, that no
newer term was recorded, and records its own (one conditional UPDATE of the one-row
`fencing` table, under the store's write lock); a write under an older term is refused
with `StaleTermError` and changes nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Self, TypeVar

from bot.adapters.store import sqlite
from bot.adapters.store.database import Database, Tx
from bot.adapters.store.sqlite import SqliteDatabase, display_path
from bot.adapters.store.urls import is_url, redacted
from bot.core.codec import CodecError, loads
from bot.core.errors import StaleTermError, StoreError

T = TypeVar("T")

DEFAULT_BUSY_TIMEOUT = 5.0


def open_database(
    location: str | os.PathLike[str] | None,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    *,
    init: bool = False,
    password: str | None = None,
) -> Database:
    """The database `location` names: a `postgresql://` URL, else a SQLite file."""
    if is_url(location):
        from bot.adapters.store.postgres import PostgresDatabase  # psycopg only when used

        return PostgresDatabase(str(location), busy_timeout, init=init, password=password)
    return SqliteDatabase(display_path(location), busy_timeout, init=init)


@dataclass(frozen=True, slots=True)
class Answer:
    """Which store a location names and whether it answers, in one line."""

    kind: str
    where: str
    answers: bool
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} {self.where}: {self.detail}"


def probe(location: str | os.PathLike[str] | None, password: str | None = None) -> Answer:
    """Whether the store `location` names answers, without opening it as a store: nothing
    is created, migrated or written."""
    if is_url(location):
        from bot.adapters.store import postgres

        url = str(location)
        return Answer("PostgreSQL", redacted(url), *postgres.answer(url, password))
    path = display_path(location)
    return Answer("SQLite", path, *sqlite.answer(path))


class SharedConnection:
    """The lock and the database every record class of the store works through."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        *,
        init: bool = False,
        password: str | None = None,
        cluster: str = "",
    ) -> None:
        """`path`: a SQLite file or a `postgresql://` URL. `init`: make an existing empty
        file, or a database that is not a pitcrew store, into one (otherwise such a
        database is refused: it may be a mistake). `password`: PostgreSQL's, when the
        URL leaves it out. `cluster`: this pitcrew's, on the proposals and actions it
        stores and on those stored before clusters were named."""
        self.busy_timeout = busy_timeout
        self.cluster = cluster
        self._lock = threading.RLock()
        self._write_failure: str | None = None
        self._term: int | None = None
        self._refused: Callable[[StaleTermError], None] | None = None
        self._database = open_database(path, busy_timeout, init=init, password=password)
        self.path = self._database.where
        self.kind = self._database.kind

    def close(self) -> None:
        with self._lock:
            self._database.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def describe(self) -> str:
        """`SQLite /var/lib/pitcrew/pitcrew.db`, `PostgreSQL postgresql://pitcrew@db/pitcrew`."""
        return f"{self.kind} {self.path}"

    def ping(self) -> None:
        """Raises StoreError unless the database answers (for readiness checks)."""
        with self._reading("check the database") as conn:
            conn.execute("SELECT 1 FROM incidents LIMIT 1").fetchall()

    def fence(self, term: int, refused: Callable[[StaleTermError], None] | None = None) -> None:
        """Every write of this store from now on carries `term`: made only while no newer
        term is recorded, recording `term` as the newest (`bot.daemon.ports.Fenced`).
        Raises `StaleTermError` at once when a newer one is recorded already; `refused`
        is called with each such error before it is raised."""
        if term < 0:
            raise ValueError(f"a term is 0 or more, not {term}")
        with self._lock:
            self._term, self._refused = term, refused
            with self._writing(f"take term {term}"):
                pass

    def term(self) -> int:
        """The newest term any writer carried (0: never fenced)."""
        with self._reading("read the fencing term") as conn:
            row = conn.execute("SELECT term FROM fencing WHERE id = 1").fetchone()
        return 0 if row is None else int(row["term"])

    @contextmanager
    def _reading(self, what: str) -> Iterator[Tx]:
        """One statement (autocommit reads see a consistent state per statement)."""
        with self._lock, self._translated(what), self._database.reading() as conn:
            yield conn

    @contextmanager
    def _snapshot(self, what: str) -> Iterator[Tx]:
        """Several reads that must see one state."""
        with self._lock, self._translated(what), self._database.snapshot() as conn:
            yield conn

    @contextmanager
    def _writing(self, what: str) -> Iterator[Tx]:
        """A write transaction that holds the store's write lock from its first statement,
        so a read-then-write inside it cannot be overtaken by another writer; fenced by
        the store's term when it has one. A write the disk refuses (full, I/O error,
        read-only) is remembered until one succeeds."""
        with self._lock, self._translated(what):
            try:
                with self._database.writing() as conn:
                    if self._term is not None:
                        self._check_term(conn, self._term, what)
                    yield conn
            except Exception as exc:
                if self._database.is_error(exc) and self._database.disk_refused(exc):
                    self._write_failure = self._database.problem(exc)
                raise
            self._write_failure = None

    def _check_term(self, conn: Tx, term: int, what: str) -> None:
        moved = conn.execute(
            "UPDATE fencing SET term = ? WHERE id = 1 AND term <= ?", (term, term)
        ).rowcount
        if moved == 1:
            return
        row = conn.execute("SELECT term FROM fencing WHERE id = 1").fetchone()
        error = StaleTermError(
            self.path,
            f"refused to {what}: this pitcrew's term {term} is older than the store's "
            f"{'?' if row is None else row['term']} (another replica leads now)",
        )
        if self._refused is not None:
            self._refused(error)
        raise error

    def write_failure(self) -> str | None:
        """Why the last write failed when the disk refused it (None: writes work)."""
        return self._write_failure

    @contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            if not self._database.is_error(exc):
                raise
            raise StoreError(self.path, f"cannot {what}: {self._database.problem(exc)}") from exc

    def _load(self, cls: type[T], body: str, what: str) -> T:
        try:
            return loads(cls, body)
        except CodecError as exc:
            raise StoreError(
                self.path, f"stored {cls.__name__} {what} is unreadable: {exc}"
            ) from exc

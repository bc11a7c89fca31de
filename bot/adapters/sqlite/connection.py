"""One SQLite connection shared by the threads of a process: opening, migrating,
transactions, and SQLite's errors in words a user can act on.

`SharedConnection` is the base of every record class of the store: it owns the
lock and the connection, and hands out reads, snapshots and write transactions
that translate `sqlite3.Error` into `StoreError` naming the file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self, TypeVar

from bot.adapters.sqlite.schema import MIGRATIONS, SCHEMA_VERSION
from bot.core.codec import CodecError, loads
from bot.core.errors import StoreError

T = TypeVar("T")

DEFAULT_FILENAME = "pitcrew.db"
DEFAULT_BUSY_TIMEOUT = 5.0


def default_path() -> Path:
    """`pitcrew.db` in the working directory."""
    return Path.cwd() / DEFAULT_FILENAME


class SharedConnection:
    """The lock and the connection every record class of the store works through."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        *,
        init: bool = False,
    ) -> None:
        """`init`: make an existing empty file, or a SQLite file that is not a pitcrew
        store, into one (otherwise such a file is refused: it may be a mistake)."""
        self.path = _display_path(path)
        self.busy_timeout = busy_timeout
        self._lock = threading.RLock()
        self._write_failure: str | None = None
        self._conn = _connect(self.path, busy_timeout, init)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def ping(self) -> None:
        """Raises StoreError unless the database answers (for readiness checks)."""
        with self._reading("check the database") as conn:
            conn.execute("SELECT 1 FROM incidents LIMIT 1").fetchall()

    @contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """One statement (autocommit reads see a consistent state per statement)."""
        with self._lock, self._translated(what):
            yield self._conn

    @contextmanager
    def _snapshot(self, what: str) -> Iterator[sqlite3.Connection]:
        """Several reads that must see one state."""
        with self._lock, self._translated(what), transaction(self._conn, "BEGIN"):
            yield self._conn

    @contextmanager
    def _writing(self, what: str) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds SQLite's write lock from its first statement, so
        a read-then-write inside it cannot be overtaken by another process. A write the
        disk refuses (full, I/O error, read-only) is remembered until one succeeds."""
        with self._lock, self._translated(what):
            try:
                with transaction(self._conn, "BEGIN IMMEDIATE"):
                    yield self._conn
            except sqlite3.Error as exc:
                if _disk_refused(exc):
                    self._write_failure = problem(exc, self.busy_timeout)
                raise
            self._write_failure = None

    def write_failure(self) -> str | None:
        """Why the last write failed when the disk refused it (None: writes work)."""
        return self._write_failure

    @contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(
                self.path, f"cannot {what}: {problem(exc, self.busy_timeout)}"
            ) from exc

    def _load(self, cls: type[T], body: str, what: str) -> T:
        try:
            return loads(cls, body)
        except CodecError as exc:
            raise StoreError(
                self.path, f"stored {cls.__name__} {what} is unreadable: {exc}"
            ) from exc


# -- opening and migrating ----------------------------------------------------------------


def _display_path(path: str | os.PathLike[str] | None) -> str:
    if path is None:
        return str(default_path())
    text = os.fspath(path)
    return text if text == ":memory:" else str(Path(text).absolute())


def _connect(path: str, busy_timeout: float, init: bool) -> sqlite3.Connection:
    """Open, configure and migrate; every failure becomes a StoreError naming the file."""
    if not init:
        _refuse_empty(path)
    if path != ":memory:" and not os.path.exists(path):
        _create(path, busy_timeout)
    try:
        conn = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as exc:
        raise StoreError(path, f"cannot open the database: {problem(exc, busy_timeout)}") from exc
    try:
        conn.row_factory = sqlite3.Row
        _configure(conn, busy_timeout)
        _check_not_newer(path, user_version(conn))
        if not init:
            _refuse_foreign(conn, path)
        conn.execute("PRAGMA journal_mode = WAL").fetchone()
        migrate(conn, path)
    except StoreError:
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(path, f"cannot open the database: {problem(exc, busy_timeout)}") from exc
    return conn


def _create(path: str, busy_timeout: float) -> None:
    """A new store appears whole: made beside the path and linked into place, so no
    opener ever sees the store file empty (an empty one is refused, see below) and
    of several processes creating it at once one wins and the others open its file."""
    temporary = f"{path}.new-{os.getpid()}-{threading.get_ident()}"
    try:
        conn = sqlite3.connect(temporary, timeout=busy_timeout, isolation_level=None)
        try:
            _configure(conn, busy_timeout)
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            migrate(conn, path)
        finally:
            conn.close()
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    except sqlite3.Error as exc:
        raise StoreError(path, f"cannot open the database: {problem(exc, busy_timeout)}") from exc
    except OSError as exc:
        raise StoreError(path, f"cannot create the database: {exc.strerror}") from exc
    finally:
        for leftover in (temporary, f"{temporary}-wal", f"{temporary}-shm"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)


INIT_HINT = "start `pitcrew run --init-store` to make it one, or point store.path elsewhere"


def _refuse_empty(path: str) -> None:
    """A store file cut to 0 bytes would otherwise open as a fresh store, silently."""
    if path == ":memory:":
        return
    try:
        size = os.stat(path).st_size
    except OSError:
        return  # no file yet: a first start creates it
    if size == 0:
        raise StoreError(path, f"the file is empty (0 bytes), not a pitcrew store; {INIT_HINT}")


def _refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    """A SQLite file with tables but no pitcrew schema belongs to something else."""
    if user_version(conn) > 0:
        return
    tables = [
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name LIMIT 4"
        )
    ]
    if tables:
        raise StoreError(
            path,
            f"a SQLite database that is not a pitcrew store (tables {', '.join(tables)}); "
            + INIT_HINT,
        )


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
        if migration.version > upto or migration.version <= user_version(conn):
            continue
        with transaction(conn, "BEGIN IMMEDIATE"):
            current = user_version(conn)
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


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


@contextmanager
def transaction(conn: sqlite3.Connection, begin: str) -> Iterator[None]:
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
    ("database or disk is full", "the disk (or the database's size limit) is full"),
)
_DISK_REFUSALS = ("database or disk is full", "disk i/o error", "readonly database")


def _disk_refused(exc: sqlite3.Error) -> bool:
    lowered = str(exc).lower()
    return any(fragment in lowered for fragment in _DISK_REFUSALS)


def problem(exc: sqlite3.Error, busy_timeout: float) -> str:
    """The failure in words a user can act on."""
    error = str(exc)
    lowered = error.lower()
    if "locked" in lowered or "busy" in lowered:
        return f"the database stayed locked by another connection for more than {busy_timeout:g}s"
    for fragment, problem in _PROBLEMS:
        if fragment in lowered:
            return problem.format(error=error)
    return error


def exists(conn: sqlite3.Connection, sql: str, *args: object) -> bool:
    return conn.execute(sql, args).fetchone() is not None

"""The embedded store: one SQLite file, one writer (the only module that imports sqlite3).

Why this exists: with no server to run, pitcrew keeps its state in a file beside it
(`store.path`). This opens it, configures it (WAL, a busy timeout, foreign keys, FULL
sync: a committed approval must survive a power cut), migrates it (`PRAGMA
user_version` says which of `schema.MIGRATIONS` it has), refuses a file that is empty
or belongs to something else unless asked to make it a store, and says SQLite's
errors in words a user can act on. A new store appears whole (made beside the path
and linked into place). SQLite's locking serializes processes; `lock.StoreLock` keeps
a second daemon off the file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.adapters.store.database import Tx
from bot.adapters.store.schema import MIGRATIONS, SCHEMA_VERSION, Dialect
from bot.core.errors import StoreError

DEFAULT_FILENAME = "pitcrew.db"
INIT_HINT = "start `pitcrew run --init-store` to make it one, or point store.path elsewhere"


def default_path() -> Path:
    """`pitcrew.db` in the working directory."""
    return Path.cwd() / DEFAULT_FILENAME


def display_path(path: str | os.PathLike[str] | None) -> str:
    if path is None:
        return str(default_path())
    text = os.fspath(path)
    return text if text == ":memory:" else str(Path(text).absolute())


class SqliteDatabase:
    """One SQLite connection, opened, configured and migrated."""

    dialect: Dialect = "sqlite"
    kind = "SQLite"

    def __init__(self, path: str, busy_timeout: float, *, init: bool = False) -> None:
        self.where = path
        self.busy_timeout = busy_timeout
        self._conn = _connect(path, busy_timeout, init)

    @contextmanager
    def reading(self) -> Iterator[Tx]:
        yield self._conn

    @contextmanager
    def snapshot(self) -> Iterator[Tx]:
        with transaction(self._conn, "BEGIN"):
            yield self._conn

    @contextmanager
    def writing(self) -> Iterator[Tx]:
        with transaction(self._conn, "BEGIN IMMEDIATE"):
            yield self._conn

    def is_error(self, error: BaseException) -> bool:
        return isinstance(error, sqlite3.Error)

    def problem(self, error: BaseException) -> str:
        return problem(error, self.busy_timeout)

    def disk_refused(self, error: BaseException) -> bool:
        lowered = str(error).lower()
        return any(fragment in lowered for fragment in _DISK_REFUSALS)

    def close(self) -> None:
        self._conn.close()


def answer(path: str) -> tuple[bool, str]:
    """Whether the file answers, and its schema version, read without creating or
    changing anything (`pitcrew config check`)."""
    if path == ":memory:":
        return True, "answers (in memory)"
    if not os.path.exists(path):
        return True, "no file yet (`pitcrew run` creates it)"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
        try:
            version = user_version(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return False, f"does not answer: {problem(exc, 1.0)}"
    return True, f"answers (schema version {version})"


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
                for statement in migration.sql("sqlite"):
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


def problem(exc: BaseException, busy_timeout: float) -> str:
    """The failure in words a user can act on."""
    error = str(exc)
    lowered = error.lower()
    if "locked" in lowered or "busy" in lowered:
        return f"the database stayed locked by another connection for more than {busy_timeout:g}s"
    for fragment, problem in _PROBLEMS:
        if fragment in lowered:
            return problem.format(error=error)
    return error

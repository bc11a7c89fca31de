"""One daemon per store, and no store made silently out of a file that is not one.

Two real `pitcrew run` processes on one store file: the second is refused with
the holder's pid and host and posts nothing; the lock goes with the holder's
process however it ends (SIGKILL included). A store file cut to 0 bytes, or a
SQLite file of something else, is refused unless `pitcrew run --init-store`."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from bot.adapters.store.store import Store
from bot.core.errors import StoreError
from tests.support.daemon import DESCRIBE, SEED, config, http
from tests.support.daemon_process import Daemon, posts, wait_until
from tests.support.faults import Measured

HINT = "start `pitcrew run --init-store` to make it one, or point store.path elsewhere"


@pytest.mark.slow
def test_a_second_daemon_on_one_store_is_refused_naming_the_holder(
    tmp_path: Path, daemons: list[Daemon], measured: Measured
) -> None:
    config(tmp_path)
    db = tmp_path / "state.db"
    first = Daemon(tmp_path, "first")
    daemons.append(first)
    first.ready()
    status, _ = http(f"{first.url}/ingest?origin=describe", (SEED / DESCRIBE).read_bytes())
    assert status == 202

    second = Daemon(tmp_path, "second")
    daemons.append(second)
    assert second.exit_code() == 2
    wait_until(lambda: posts(first) == 1, 15, "the first daemon's card")
    measured.duplicated(cards=posts(first) + posts(second), incidents=1)
    pattern = (
        rf"pitcrew: {re.escape(str(db))}: another pitcrew daemon uses this store "
        rf"\(pid {first.proc.pid} on host {re.escape(socket.gethostname())} since "
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\); "
        r"stop it first, or give this one another store.path"
    )
    assert re.fullmatch(pattern, second.refusal()), second.refusal()
    assert "pitcrew running" not in second.err.read_text()

    os.kill(first.proc.pid, signal.SIGKILL)  # a crash: the kernel lets the lock go
    first.proc.wait(10)
    third = Daemon(tmp_path, "third")
    daemons.append(third)
    third.ready()
    os.kill(third.proc.pid, signal.SIGTERM)
    assert third.exit_code() == 0


@pytest.mark.slow
def test_an_empty_store_file_is_refused_until_init_store(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    config(tmp_path)
    db = tmp_path / "state.db"
    db.write_bytes(b"")
    refused = Daemon(tmp_path, "refused")
    daemons.append(refused)
    assert refused.exit_code() == 2
    assert refused.refusal() == (
        f"pitcrew: {db}: the file is empty (0 bytes), not a pitcrew store; {HINT}"
    )
    assert db.stat().st_size == 0

    made = Daemon(tmp_path, "made", "--init-store")
    daemons.append(made)
    made.ready()
    os.kill(made.proc.pid, signal.SIGTERM)
    assert made.exit_code() == 0
    with Store(db):
        assert schema_version(db) > 0


def schema_version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.close()


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: p.write_bytes(b""), f"the file is empty (0 bytes), not a pitcrew store; {HINT}"),
        (
            _foreign,
            f"a SQLite database that is not a pitcrew store (tables orders, users); {HINT}",
        ),
    ],
    ids=["empty", "foreign"],
)
def test_a_file_that_is_not_a_store_is_refused_by_every_opener(
    tmp_path: Path, make: object, problem: str
) -> None:
    path = tmp_path / "state.db"
    make(path)  # type: ignore[operator]
    with pytest.raises(StoreError) as refused:
        Store(path)
    assert str(refused.value) == f"{path}: {problem}"
    with Store(path, init=True):
        version = schema_version(path)
    assert version > 0
    with Store(path):  # a store now: opens as one
        assert schema_version(path) == version


def test_a_new_file_is_still_created_as_a_store(tmp_path: Path) -> None:
    started = time.monotonic()
    with Store(tmp_path / "fresh.db"):
        assert schema_version(tmp_path / "fresh.db") > 0
    assert time.monotonic() - started < 5

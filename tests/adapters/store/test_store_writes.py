"""A store that cannot write says so: `/readyz` turns false and `/ingest` answers 503
(the sender keeps its evidence), until a write succeeds again.

The daemon runs in process on a real store; the disk's refusal is SQLite's own:
a size limit the next write does not fit in (`database or disk is full`), or a
connection made read-only (`attempt to write a readonly database`)."""

from __future__ import annotations

import json

import pytest

from bot.adapters.store.store import Store
from bot.app import wiring as app
from bot.core.errors import StoreError
from tests.support.daemon import DRIVER_LOG, SEED, http
from tests.support.faults import Measured


def _full(daemon: app.Daemon) -> None:
    conn = daemon.store._database._conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")


def _read_only(daemon: app.Daemon) -> None:
    daemon.store._database._conn.execute("PRAGMA query_only = ON")


@pytest.mark.parametrize(
    ("refuse", "problem"),
    [
        (_full, "the disk (or the database's size limit) is full"),
        (
            _read_only,
            "the file is read-only: pitcrew needs write access to the file and its directory",
        ),
    ],
    ids=["disk-full", "read-only"],
)
def test_a_store_that_cannot_write_is_not_ready_and_refuses_evidence(
    daemon: app.Daemon, refuse: object, problem: str, measured: Measured
) -> None:
    base = f"http://127.0.0.1:{daemon.http.port}"
    assert http(f"{base}/readyz")[0] == 200
    refuse(daemon)  # type: ignore[operator]
    with pytest.raises(StoreError):
        daemon.store.set_bookmark("fault", "x" * 200_000)

    status, body = http(f"{base}/readyz")
    assert status == 503
    assert json.loads(body)["checks"]["store"] is False
    status, body = http(f"{base}/ingest?origin=driver.log", (SEED / DRIVER_LOG).read_bytes())
    measured.lost(accepted=int(status == 202), arrived=0)  # acknowledged, and could not be kept
    assert (status, json.loads(body)) == (
        503,
        {"error": f"the store cannot be written ({problem}); retry later"},
    )

    conn = daemon.store._database._conn
    conn.execute("PRAGMA query_only = OFF")
    conn.execute("PRAGMA max_page_count = 1073741823")
    daemon.store.set_bookmark("fault", "written")
    assert http(f"{base}/readyz")[0] == 200
    status, _ = http(f"{base}/ingest?origin=driver.log", (SEED / DRIVER_LOG).read_bytes())
    assert status == 202


def test_a_signed_request_is_remembered_across_a_reopen_until_it_expires(
    store_location: str,
) -> None:
    path = store_location
    with Store(path) as store:  # stamped 1_290 (in the future): valid until 1_590
        assert store.first_time("v0=abc", 1_000.0, 1_590.0) is True
        assert store.first_time("v0=abc", 1_010.0, 1_590.0) is False
    with Store(path) as reopened:  # a restart forgets nothing while it is valid
        assert reopened.first_time("v0=abc", 1_589.0, 1_590.0) is False
        assert reopened.first_time("v0=abc", 1_591.0, 1_590.0) is True
        assert reopened.first_time("v0=other", 1_000.0, 1_300.0) is True

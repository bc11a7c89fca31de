"""The store suite runs every specification on both stores: `store_location` is a SQLite
file and a PostgreSQL database (the session's real server, tests/support/stores.py) in
turn, so `test_x[sqlite]` and `test_x[postgresql]` hold the two to the same behaviour.
What only one store has (SQLite's file, its lock and its errors; PostgreSQL's URL,
server and connection) is specified in test_sqlite.py, test_store_lock*.py and
test_postgres.py. The PostgreSQL cases carry the `postgres` marker (a real server:
left out of `make test-fast`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bot.adapters.store.store import Store
from tests.support.stores import KINDS


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_location" in metafunc.fixturenames:
        metafunc.parametrize(
            "store_location",
            [pytest.param(kind, id=kind, marks=_marks(kind)) for kind in KINDS],
            indirect=True,
        )


def _marks(kind: str) -> Any:
    return [pytest.mark.postgres] if kind == "postgresql" else []


@pytest.fixture
def store(store_location: str) -> Iterator[Store]:
    with Store(store_location) as opened:
        yield opened

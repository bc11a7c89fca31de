"""What only the PostgreSQL store has: a URL whose password no message shows, a server
that may not answer (at start: a clear error naming the URL; later: each use fails until
the connection is opened again), a database that may belong to something else, and a
schema version kept in a table."""

from __future__ import annotations

import socket

import psycopg
import pytest

from bot.adapters.store.local_postgres import PASSWORD, LocalPostgres
from bot.adapters.store.schema import SCHEMA_VERSION
from bot.adapters.store.store import Store
from bot.adapters.store.urls import redacted
from bot.core.errors import StoreError
from tests.support.stores import execute, schema_version

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://pitcrew:s3cret@db:5432/pitcrew", "postgresql://pitcrew@db:5432/pitcrew"),
        ("postgresql://pitcrew@db/pitcrew", "postgresql://pitcrew@db/pitcrew"),
        (
            "postgres://db/pitcrew?password=s3cret&sslmode=require",
            "postgres://db/pitcrew?sslmode=require",
        ),
        ("postgresql://u:p%40ss@[::1]:5433/x", "postgresql://u@[::1]:5433/x"),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert redacted(url) == shown


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_server_that_does_not_answer_at_start_is_named_without_the_password() -> None:
    port = _closed_port()
    with pytest.raises(StoreError) as caught:
        Store(f"postgresql://pitcrew:s3cret@127.0.0.1:{port}/pitcrew")
    assert str(caught.value) == (
        f"postgresql://pitcrew@127.0.0.1:{port}/pitcrew: PostgreSQL does not answer: "
        f'connection to server at "127.0.0.1", port {port} failed: Connection refused '
        "Is the server running on that host and accepting TCP/IP connections?"
    )
    assert "s3cret" not in str(caught.value)


def test_the_password_may_be_given_apart_from_the_url(postgres_url: str) -> None:
    bare = postgres_url.replace(f":{PASSWORD}@", "@")
    with Store(bare, password=PASSWORD) as store:
        store.set_bookmark("k", "v")
        assert store.path == bare
    with pytest.raises(StoreError) as caught:
        Store(bare, password="wrong")
    assert str(caught.value).startswith(f"{bare}: PostgreSQL does not answer: ")
    assert 'password authentication failed for user "pitcrew"' in str(caught.value)
    assert "wrong" not in str(caught.value).replace("password authentication failed", "")


def test_a_database_of_something_else_is_refused_until_init(postgres_url: str) -> None:
    execute(postgres_url, "CREATE TABLE customers (id INTEGER)")
    with pytest.raises(StoreError) as caught:
        Store(postgres_url)
    assert caught.value.problem == (
        "a PostgreSQL database that is not a pitcrew store (tables customers); start "
        "`pitcrew run --init-store` to make it one, or point store.url elsewhere"
    )
    with Store(postgres_url, init=True) as store:
        store.set_bookmark("k", "v")
    assert schema_version(postgres_url) == SCHEMA_VERSION


def test_a_newer_schema_is_refused_and_left_alone(postgres_url: str) -> None:
    Store(postgres_url).close()
    execute(postgres_url, "UPDATE pitcrew_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError) as caught:
        Store(postgres_url)
    assert caught.value.problem == (
        f"the database is at schema version {SCHEMA_VERSION + 1}, newer than this pitcrew "
        f"supports (version {SCHEMA_VERSION}); upgrade pitcrew or point it at another database"
    )
    assert schema_version(postgres_url) == SCHEMA_VERSION + 1


def test_a_lost_connection_fails_one_use_and_is_opened_again(postgres_url: str) -> None:
    with Store(postgres_url) as store:
        store.set_bookmark("k", "before")
        execute(
            postgres_url,
            """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
               WHERE application_name = 'pitcrew' AND pid <> pg_backend_pid()""",
        )
        with pytest.raises(StoreError) as caught:
            store.ping()
        assert caught.value.problem.startswith(
            "cannot check the database: PostgreSQL does not answer"
        )
        store.ping()
        store.set_bookmark("k", "after")
        assert store.bookmark("k") == "after"


def test_a_server_gone_is_not_ready_and_back_is(tmp_path: object) -> None:
    with LocalPostgres() as server:
        url = server.database()
        store = Store(url)
        store.set_bookmark("k", "v")
    with pytest.raises(StoreError) as caught:  # the server stopped
        store.ping()
    assert caught.value.path == redacted(url)
    assert "PostgreSQL does not answer" in caught.value.problem
    store.close()


def test_the_write_lock_waits_no_longer_than_the_busy_timeout(postgres_url: str) -> None:
    Store(postgres_url).close()
    with psycopg.connect(postgres_url) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (0x70697463,))
        with Store(postgres_url, busy_timeout=0.2) as store, pytest.raises(StoreError) as caught:
            store.set_bookmark("k", "v")
    assert caught.value.problem == (
        "cannot save bookmark k: the store stayed locked by another writer for more than 0.2s"
    )

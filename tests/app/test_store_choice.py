"""Which store pitcrew uses is said wherever an operator looks, with whether it answers:
`pitcrew config check` (reading only: nothing is created or migrated), `pitcrew status`,
`/readyz`; and a PostgreSQL that does not answer at start stops `pitcrew run` with its URL,
never its password. `store.url` picks PostgreSQL (its password in the URL or in
PITCREW_STORE_PASSWORD); without it the SQLite file `store.path` is the store."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.adapters.store.local_postgres import PASSWORD, LocalPostgres
from bot.adapters.store.store import Store
from bot.adapters.store.urls import redacted
from bot.app import wiring as app
from bot.app.cli_app import app as cli_app
from bot.app.settings.loading import load
from tests.support.daemon import RecordingChat, config, engine, http
from tests.support.daemon_process import wait_until


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def refused(port: int) -> str:
    return (
        f'connection to server at "127.0.0.1", port {port} failed: Connection refused '
        "Is the server running on that host and accepting TCP/IP connections?"
    )


def on_postgres(tmp_path: Path, url: str) -> Path:
    """The plain daemon config with its store in PostgreSQL at `url`."""
    cfg = config(tmp_path)
    path_line = f"store: {{path: {tmp_path / 'state.db'}}}"
    cfg.write_text(cfg.read_text().replace(path_line, f"store: {{url: '{url}'}}"))
    return cfg


def check(cfg: Path, **env: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli_app, ["config", "check", str(cfg)], env=env)
    return result.exit_code, result.output.splitlines()


def test_config_check_names_the_sqlite_file_and_creates_nothing(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    db = tmp_path / "state.db"
    assert check(cfg) == (
        0,
        [f"store: SQLite {db}: no file yet (`pitcrew run` creates it)", f"{cfg}: OK"],
    )
    assert not db.exists()
    Store(db).close()
    assert check(cfg) == (0, [f"store: SQLite {db}: answers (schema version 12)", f"{cfg}: OK"])


@pytest.mark.postgres
def test_config_check_names_postgresql_without_its_password_and_migrates_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    cfg = on_postgres(tmp_path, postgres_url)
    shown = redacted(postgres_url)
    assert check(cfg) == (
        0,
        [
            f"store: PostgreSQL {shown}: answers (no pitcrew schema yet: `pitcrew run` makes it)",
            f"{cfg}: OK",
        ],
    )
    Store(postgres_url).close()
    assert check(cfg)[1][0] == f"store: PostgreSQL {shown}: answers (schema version 12)"
    bare = on_postgres(tmp_path, shown)  # the password apart, as the chart mounts it
    assert check(bare, PITCREW_STORE_PASSWORD=PASSWORD)[1][0] == (
        f"store: PostgreSQL {shown}: answers (schema version 12)"
    )


def test_config_check_fails_when_postgresql_does_not_answer(tmp_path: Path) -> None:
    port = _closed_port()
    cfg = on_postgres(tmp_path, f"postgresql://pitcrew:s3cret@127.0.0.1:{port}/pitcrew")
    assert check(cfg) == (
        2,
        [
            f"store: PostgreSQL postgresql://pitcrew@127.0.0.1:{port}/pitcrew: does not answer: "
            + refused(port)
        ],
    )


def test_a_postgresql_that_does_not_answer_at_start_stops_the_daemon(tmp_path: Path) -> None:
    port = _closed_port()
    cfg = on_postgres(tmp_path, f"postgresql://pitcrew:s3cret@127.0.0.1:{port}/pitcrew")
    ran = CliRunner().invoke(cli_app, ["run", "--config", str(cfg)], env={})
    assert ran.exit_code == 2
    assert ran.output == (
        f"pitcrew: postgresql://pitcrew@127.0.0.1:{port}/pitcrew: PostgreSQL does not "
        f"answer: {refused(port)}\n"
    )
    status = CliRunner().invoke(cli_app, ["status", "--config", str(cfg)], env={})
    assert (status.exit_code, status.output) == (2, ran.output)
    assert not (tmp_path / "state.db").exists()  # no SQLite file made in its place


@pytest.mark.postgres
def test_status_says_which_store_answered(tmp_path: Path, postgres_url: str) -> None:
    Store(postgres_url).close()
    status = CliRunner().invoke(
        cli_app, ["status", "--config", str(on_postgres(tmp_path, postgres_url))], env={}
    )
    assert status.exit_code == 0, status.output
    assert status.output.splitlines()[0] == (f"store: PostgreSQL {redacted(postgres_url)}: answers")
    db = tmp_path / "state.db"
    Store(db).close()
    on_file = CliRunner().invoke(cli_app, ["status", "--config", str(config(tmp_path))], env={})
    assert on_file.output.splitlines()[0] == f"store: SQLite {db}: answers"


def readyz(daemon: app.Daemon) -> tuple[int, dict[str, object]]:
    status, body = http(f"http://127.0.0.1:{daemon.http.port}/readyz")
    return status, json.loads(body)


def test_readyz_says_which_store_answers(daemon: app.Daemon, tmp_path: Path) -> None:
    status, answer = readyz(daemon)
    assert status == 200
    assert answer["notes"] == {"store": f"SQLite {tmp_path / 'state.db'}: answers"}


@pytest.mark.postgres
def test_readyz_says_when_postgresql_stops_answering(tmp_path: Path) -> None:
    server = LocalPostgres()
    server.start()
    try:
        url = server.database()
        settings = load(on_postgres(tmp_path, url), {})
        daemon = app.build(settings, chat=RecordingChat(), engine=engine())
        daemon.start()
        try:
            shown = redacted(url)
            assert readyz(daemon) == (
                200,
                {
                    "checks": {"chat": True, "outbox": True, "pipeline": True, "store": True},
                    "notes": {"store": f"PostgreSQL {shown}: answers"},
                    "ok": True,
                },
            )
            port = server.port
            server.stop()
            # The connection the stop broke is given up at its next use, and a new one is
            # refused: /readyz says so from then on.
            wait_until(
                lambda: "Connection refused" in str(readyz(daemon)[1]["notes"]),
                what="the refused connection",
            )
            status, answer = readyz(daemon)
            assert status == 503
            assert answer["checks"] == {
                "chat": True,
                "outbox": True,
                "pipeline": True,
                "store": False,
            }
            assert answer["notes"] == {
                "store": f"PostgreSQL {shown}: does not answer: cannot check the database: "
                f"PostgreSQL does not answer: {refused(port)}"
            }
        finally:
            daemon.stop()
    finally:
        server.stop()

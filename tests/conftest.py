"""Fixtures every test directory sees.

- `daemon`: the one in-process daemon (`bot.app.wiring.build`, started, stopped at
  teardown) on the plain config of tests/support/daemon.py, a recording console chat
  and the built-in playbooks. A module that needs a variant overrides what it is made
  of, not the fixture: `daemon_settings` (the config), `daemon_chat` (None: the chat
  the settings name) or `daemon_engine` (None: the playbooks the settings name).
  `start_daemon` starts more, or starts them inside a test, on the same terms.
- `measured` (what a fault test measured, for `bench/faults.py`: tests/support/faults.py)
  and `daemons` (real `pitcrew run` processes, stopped by pid:
  tests/support/daemon_process.py); `postgres`, `postgres_url` and `store_location`
  (the session's real PostgreSQL, a database on it, either store: tests/support/stores.py).

Every test under tests/e2e/ is marked `e2e` here (it runs a real service: Ray, kmock's
emulator, the Slack emulator, Prometheus, Helm's renderer, the demo), so the fast loop
(`make test-fast`) leaves them out, and `-m "not e2e"` does anywhere. The session's
real Ray head is in tests/e2e/conftest.py, beside the tests that use it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app import wiring
from bot.app.settings.loading import load
from bot.app.settings.sections import Settings
from bot.core.diagnosis.engine import Engine
from bot.daemon.ports import Chat
from tests.support.daemon import RecordingChat, StartDaemon, config, engine

pytest_plugins = ["tests.support.faults", "tests.support.daemon_process", "tests.support.stores"]

E2E = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if E2E in item.path.parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def root_logging_as_it_was() -> Iterator[None]:
    """Each test leaves the root logger's handlers and level as it found them: a command run
    through typer's CliRunner (`pitcrew run`) sets logging up on the runner's stderr, which
    is closed when the command returns, and every later log line would fail on it."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if type(handler) is logging.StreamHandler and handler not in before:
            root.removeHandler(handler)  # what logging.basicConfig added (pytest's are others)
    root.setLevel(level)


@pytest.fixture
def start_daemon() -> Iterator[StartDaemon]:
    """`start(settings, chat=..., engine=...)`: a daemon built and started; every one
    started is stopped at teardown, last first."""
    started: list[wiring.Daemon] = []

    def start(
        settings: Settings, *, chat: Chat | None = None, engine: Engine | None = None
    ) -> wiring.Daemon:
        running = wiring.build(settings, chat=chat, engine=engine)
        running.start()
        started.append(running)
        return running

    yield start
    for running in reversed(started):
        running.stop()


@pytest.fixture
def daemon_settings(tmp_path: Path) -> Settings:
    return load(config(tmp_path), {})


@pytest.fixture
def daemon_chat() -> Chat | None:
    return RecordingChat()


@pytest.fixture
def daemon_engine() -> Engine | None:
    return engine()


@pytest.fixture
def daemon(
    start_daemon: StartDaemon,
    daemon_settings: Settings,
    daemon_chat: Chat | None,
    daemon_engine: Engine | None,
) -> wiring.Daemon:
    return start_daemon(daemon_settings, chat=daemon_chat, engine=daemon_engine)

"""Fixtures of the failover tests: the two replicas' world (tests/support/failover.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.kubernetes.conftest import Emulator
from tests.support.daemon_process import Daemon
from tests.support.failover import Pair, Slowed, prepare
from tests.support.slack_emulator import SlackEmulator


@pytest.fixture
def slowed() -> Slowed:
    return Slowed()


@pytest.fixture
def pair(tmp_path: Path, postgres_url: str, slowed: Slowed) -> Iterator[Pair]:
    kube = Emulator()
    slack = SlackEmulator().start()
    daemons: list[Daemon] = []
    made = Pair(tmp_path, kube, slack, postgres_url, daemons)
    try:
        prepare(kube)
        slowed.install(kube)
        yield made
    finally:
        made.stop()
        slack.stop()
        kube.stop()

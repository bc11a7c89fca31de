"""Fixtures every test directory sees: `measured` (what a fault test measured, for
`bench/faults.py`: tests/support/faults.py) and `daemons` (real `pitcrew run`
processes, stopped by pid: tests/support/daemon_process.py). The session's real Ray
head is in tests/e2e/conftest.py, beside the tests that use it."""

from __future__ import annotations

pytest_plugins = ["tests.support.faults", "tests.support.daemon_process"]

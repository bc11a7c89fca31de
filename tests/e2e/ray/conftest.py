"""Fixtures of the Ray tests (marker `ray`). The session's real Ray head (`ray_head`)
and the job runner (`jobs`) are in tests/conftest.py, shared with the Slack end-to-end
tests; `Jobs` (tests/support/ray_jobs.py) is re-exported here for the scenarios."""

from __future__ import annotations

import pytest

from bot.adapters.files.playbooks import builtin_engine
from bot.core.diagnosis.engine import Engine
from tests.support.ray_jobs import Jobs

__all__ = ["Jobs"]


@pytest.fixture(scope="session")
def engine() -> Engine:
    return builtin_engine([])

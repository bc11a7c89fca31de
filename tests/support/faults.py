"""What a fault test measured, for `bench/faults.py`: evidence lost, cards posted
twice, actions run twice, bad clicks accepted.

Why this exists: the fault matrix's summary line must count what happened, not map
pass/fail to a kind. A fault test takes the `measured` fixture and reports each
count it observed (zero included); the counts travel as the test's user properties
(`record_property`), which `bench/faults.py` sums over the run."""

from __future__ import annotations

from collections.abc import Callable

import pytest

KINDS = ("lost", "duplicated", "double_runs", "bad_clicks_accepted")


class Measured:
    """Counts one test observed; each call adds to a kind."""

    def __init__(self, record: Callable[[str, object], None]) -> None:
        self._record = record

    def lost(self, accepted: int, arrived: int) -> None:
        """`accepted` pieces of evidence were taken in, `arrived` of them reached a card."""
        self._record("faults.cases", 1)
        self._record("faults.lost", max(accepted - arrived, 0))

    def duplicated(self, cards: int, incidents: int) -> None:
        """`cards` were posted for `incidents` distinct incidents."""
        self._record("faults.cases", 1)
        self._record("faults.duplicated", max(cards - incidents, 0))

    def double_runs(self, executions: int, approved: int) -> None:
        """`executions` happened for `approved` proposals."""
        self._record("faults.cases", 1)
        self._record("faults.double_runs", max(executions - approved, 0))

    def seconds(self, name: str, value: float) -> None:
        """A duration the case measured (`bench/failover.py`: a failover's)."""
        self._record(name, f"{value:.2f}")

    def bad_clicks_accepted(self, accepted: int) -> None:
        """`accepted` clicks (or commands) that should have been refused were acted on."""
        self._record("faults.cases", 1)
        self._record("faults.bad_clicks_accepted", accepted)


@pytest.fixture
def measured(record_property: Callable[[str, object], None]) -> Measured:
    return Measured(record_property)

"""A failover, timed: the leader killed (SIGKILL) at three moments of an approved action,
and how long the standby takes to act, with what it did twice.

Each round runs the three kill cases of tests/e2e/failover/test_failover.py (two real
`pitcrew run` replicas on one PostgreSQL store, elected on a Lease in kmock's API, the
Slack emulator): after the approval is recorded, after the ledger claim, after the
patch. Each case reports the seconds from the kill to the standby's first action (the
target patched, or, when the old leader had patched it, the card applied), the cards
beyond one per incident and the target's changes beyond one. The last lines:

    failover: kill -> the standby's first action: min Xs median Xs max Xs over N kills
        (goal under 20 s: the lease duration, 15 s, and 5 s)
    duplicated_cards=N double_runs=N failed=N

    .venv/bin/python bench/failover.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = "tests/e2e/failover/test_failover.py"
KILLS = "killed"  # the three SIGKILL cases
GOAL = 15.0 + 5.0


@dataclass(eq=False)  # pytest keeps its plugins in a set
class Tally:
    seconds: list[tuple[str, float]] = field(default_factory=list)
    duplicated: int = 0
    double_runs: int = 0
    failed: list[str] = field(default_factory=list)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.outcome == "failed":
            self.failed.append(report.nodeid)
        if report.when != "call":
            return
        case = report.nodeid.split("::", 1)[-1]
        for name, value in report.user_properties:
            if name == "failover.seconds":
                self.seconds.append((case, float(value)))
            elif name == "faults.duplicated":
                self.duplicated += int(value)
            elif name == "faults.double_runs":
                self.double_runs += int(value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=1, help="times to run the three kills")
    options = parser.parse_args()
    tally = Tally()
    for _ in range(options.rounds):
        args = ["-q", "-p", "no:cacheprovider", "--no-header", "-rN", CASES, "-k", KILLS]
        pytest.main([*args, "--rootdir", str(ROOT)], plugins=[tally])
    for case, seconds in tally.seconds:
        print(f"{case}: {seconds:.1f} s from the kill to the standby's first action")
    times = [s for _, s in tally.seconds]
    if times:
        print(
            f"failover: kill -> the standby's first action: min {min(times):.1f}s "
            f"median {statistics.median(times):.1f}s max {max(times):.1f}s over {len(times)} "
            f"kills (goal under {GOAL:.0f} s: the lease duration, 15 s, and 5 s)"
        )
    print(
        f"duplicated_cards={tally.duplicated} double_runs={tally.double_runs} "
        f"failed={len(tally.failed)}"
    )
    return 1 if tally.failed or tally.double_runs else 0


if __name__ == "__main__":
    raise SystemExit(main())

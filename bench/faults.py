"""The fault matrix of issue 14, run against the real parts, with one summary line.

Each case is one of the fault tests (uvicorn on loopback, the Slack emulator
behind the real SlackChat and Bolt app, real `pitcrew run` processes, a real
SQLite store refusing writes, RE2 and the render budget on real playbooks);
this script runs them through pytest and sorts each case's outcome into what
the issue counts: evidence lost, a card posted twice, an action run twice, a
bad click accepted. A case that fails counts once in its kind. The last line:

    cases=N passed=N lost=N duplicated=N double_runs=N bad_clicks_accepted=N

    .venv/bin/python bench/faults.py [-k EXPR]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# test file -> what a failure of one of its cases means
MATRIX: dict[str, str] = {
    "tests/test_http_edge.py": "bad_clicks_accepted",  # limits that keep the edge answering
    "tests/slack/test_http_mode.py": "bad_clicks_accepted",
    "tests/slack/test_no_duplicate_card.py": "duplicated",
    "tests/test_store_lock.py": "duplicated",  # two daemons posted every card twice
    "tests/test_store_writes.py": "lost",
    "tests/test_render_budget.py": "lost",  # a bad template cost the other findings
    "tests/test_daemon_bad_playbooks.py": "lost",  # a bad playbook stalled the ordinary card
    "tests/test_classify.py": "lost",  # a regex that stalls the scan loses what follows
    "tests/test_pipeline_bounds.py": "lost",  # a flood that starves the ordinary failure
    "tests/test_daemon_flood.py": "lost",  # 1 MiB logs at a real daemon (bench/flood.py: 20 s)
    "tests/test_approvals.py": "bad_clicks_accepted",  # who may approve and silence
}
# cases inside those files that are about running an action once
DOUBLE_RUNS = ("execute_once", "run_once", "runs_once", "fifty_simultaneous")


@dataclass(eq=False)  # pytest keeps its plugins in a set
class Tally:
    outcomes: dict[str, str] = field(default_factory=dict)

    def pytest_runtest_logreport(self, report: Any) -> None:
        counted = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
        if counted and (report.nodeid not in self.outcomes or report.outcome != "passed"):
            self.outcomes[report.nodeid] = report.outcome


def kind_of(nodeid: str) -> str:
    if any(word in nodeid for word in DOUBLE_RUNS):
        return "double_runs"
    return MATRIX[nodeid.split("::", 1)[0]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-k", default="", help="only the cases matching this pytest expression")
    options = parser.parse_args()
    tally = Tally()
    args = ["-q", "-p", "no:cacheprovider", "--no-header", "-rN", *MATRIX]
    if options.k:
        args += ["-k", options.k]
    pytest.main([*args, "--rootdir", str(ROOT)], plugins=[tally])
    counts: Counter[str] = Counter()
    for nodeid, outcome in sorted(tally.outcomes.items()):
        print(f"{outcome:7} {nodeid}")
        if outcome != "passed":
            counts[kind_of(nodeid)] += 1
    passed = sum(1 for outcome in tally.outcomes.values() if outcome == "passed")
    print(
        f"cases={len(tally.outcomes)} passed={passed} lost={counts['lost']} "
        f"duplicated={counts['duplicated']} double_runs={counts['double_runs']} "
        f"bad_clicks_accepted={counts['bad_clicks_accepted']}"
    )
    return 0 if tally.outcomes and passed == len(tally.outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

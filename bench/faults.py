"""The fault matrix of issue 14, run against the real parts, with one summary line.

Each case is one of the fault tests (uvicorn on loopback, the Slack emulator
behind the real SlackChat and Bolt app, real `pitcrew run` processes, a real
SQLite store refusing writes, RE2 and the render budget on real playbooks);
this script runs them through pytest and adds up what the issue counts:
evidence lost, a card posted twice, an action run twice, a bad click accepted.
The counts are what each case measured and reported through the `measured`
fixture (`tests/support/faults.py`: accepted vs. arrived, cards vs. incidents,
executions vs. approvals); a case that fails without having measured its kind
counts once in the kind its file stands for. Each case's line shows its own
counts (`measured=` how many measurements it made). The last line:

    cases=N passed=N lost=N duplicated=N double_runs=N bad_clicks_accepted=N
    flood: the ordinary card came Ns after a 10 s flood of 1 MiB logs (goal under 5 s)

The flood line is `tests/app/test_daemon_flood.py`'s matching flood (`bench/flood.py
--matching` runs it alone).

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
    # limits that keep the edge answering
    "tests/adapters/http/test_http_edge.py": "bad_clicks_accepted",
    "tests/e2e/slack/test_http_mode.py": "bad_clicks_accepted",
    "tests/e2e/slack/test_no_duplicate_card.py": "duplicated",
    "tests/e2e/slack/test_daemon_no_duplicate.py": "duplicated",  # real daemons: SIGKILL, slow
    "tests/e2e/slack/test_no_duplicate_reply.py": "duplicated",  # a thread reply or chart twice
    "tests/e2e/slack/test_daemon_no_duplicate_reply.py": "duplicated",  # SIGKILL, reply in flight
    "tests/adapters/store/test_store_lock.py": "duplicated",  # two daemons posted every card twice
    "tests/adapters/store/test_store_writes.py": "lost",
    "tests/core/test_render_budget.py": "lost",  # a bad template cost the other findings
    "tests/daemon/test_daemon_bad_playbooks.py": "lost",  # a bad playbook stalled the ordinary card
    "tests/core/test_classify.py": "lost",  # a regex that stalls the scan loses what follows
    "tests/daemon/test_pipeline_bounds.py": "lost",  # a flood that starves the ordinary failure
    "tests/app/test_daemon_flood.py": "lost",  # 1 MiB logs at a real daemon (bench/flood.py: 20 s)
    "tests/daemon/test_intake.py": "lost",  # evidence acknowledged, then a kill or a short drain
    "tests/core/test_approvals.py": "bad_clicks_accepted",  # who may approve and silence
    # issue 23: nothing freezes the daemon, no outage holds a card, no way around the policy
    "tests/core/test_regex_fields.py": "lost",  # a guard's regex that stalls every card
    "tests/daemon/test_kept_items.py": "lost",  # a bug, a slow scan or render: kept, requeued
    "tests/daemon/test_outbox_dead_letters.py": "lost",  # given up visibly, never silently
    "tests/e2e/slack/test_history_outage.py": "duplicated",  # posted anyway, then reconciled
    "tests/e2e/slack/test_history_outage_restart.py": "duplicated",  # stopped or killed first
    "tests/adapters/http/test_probes_outside_caps.py": "bad_clicks_accepted",  # probes answer
    "tests/adapters/slack/test_replay_window.py": "bad_clicks_accepted",  # replays refused
    "tests/core/test_silence_policy.py": "bad_clicks_accepted",  # silencers within scope
    "tests/daemon/test_service_silences.py": "bad_clicks_accepted",  # ... as the service finds it
    "tests/e2e/slack/test_silence_scope.py": "bad_clicks_accepted",  # ... at the Slack edge
    "tests/app/test_silence_settings.py": "bad_clicks_accepted",  # a button always refused
    "tests/adapters/store/test_store_lock_file.py": "duplicated",  # a second daemon
    # issue 31: who reads the evidence, what a preview runs, the delivery holes left
    "tests/e2e/slack/test_bundle_command.py": "bad_clicks_accepted",  # evidence by policy
    "tests/core/test_evidence_access.py": "bad_clicks_accepted",  # ... and its refusals
    "tests/core/test_text.py": "bad_clicks_accepted",  # hostile text, each medium
    "tests/adapters/slack/test_preview.py": "bad_clicks_accepted",  # no element from a log
    "tests/adapters/slack/test_blocks_escaping.py": "bad_clicks_accepted",  # no ping, link
    "tests/adapters/console/test_terminal_text.py": "bad_clicks_accepted",  # no escape
    "tests/app/test_render.py": "bad_clicks_accepted",  # render --open of a hostile log
    "tests/e2e/kubernetes/test_bundle_names.py": "bad_clicks_accepted",  # extracts inside
    "tests/adapters/kuberay/test_capture.py": "lost",  # the cap in bytes, left-outs named
    "tests/app/test_bundle_command.py": "bad_clicks_accepted",  # -o writes its file only
    "tests/core/test_stuck.py": "lost",  # durations on pitcrew's clock
    "tests/e2e/kubernetes/test_stuck_rayjobs.py": "lost",  # a server an hour off: a card
    "tests/core/diagnosis/test_confirm.py": "lost",  # a 1 MB line costs one window
    "tests/e2e/slack/test_unanswered_posts.py": "duplicated",  # unanswered, hollow, held
    "tests/adapters/store/test_outbox_held.py": "lost",  # held kept and listed, all counted
}
# cases inside those files that are about running an action once
DOUBLE_RUNS = ("execute_once", "run_once", "runs_once", "fifty_simultaneous")


KINDS = ("lost", "duplicated", "double_runs", "bad_clicks_accepted")


@dataclass(eq=False)  # pytest keeps its plugins in a set
class Tally:
    outcomes: dict[str, str] = field(default_factory=dict)
    measured: dict[str, Counter[str]] = field(default_factory=dict)
    card_after: float | None = None  # the matching flood's ordinary card, seconds

    def pytest_runtest_logreport(self, report: Any) -> None:
        counted = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
        if counted and (report.nodeid not in self.outcomes or report.outcome != "passed"):
            self.outcomes[report.nodeid] = report.outcome
        if report.when == "call":
            counts = self.measured.setdefault(report.nodeid, Counter())
            for name, value in report.user_properties:
                if name == "flood.card_after":
                    self.card_after = float(value)
                if str(name).startswith("faults."):
                    counts[str(name).removeprefix("faults.")] += int(value)

    def counts_of(self, nodeid: str) -> Counter[str]:
        """What the case measured; a failure it did not measure counts once in its kind."""
        counts = Counter(self.measured.get(nodeid, Counter()))
        kind = kind_of(nodeid)
        if self.outcomes[nodeid] != "passed" and not counts[kind]:
            counts[kind] += 1
        return counts


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
        case = tally.counts_of(nodeid)
        found = " ".join(f"{kind}={case[kind]}" for kind in KINDS if case[kind])
        print(f"{outcome:7} {nodeid}  measured={case['cases']} {found}".rstrip())
        counts.update({kind: case[kind] for kind in KINDS})
    passed = sum(1 for outcome in tally.outcomes.values() if outcome == "passed")
    counted = sum(1 for nodeid in tally.outcomes if tally.counts_of(nodeid)["cases"])
    print(f"{counted} of the {len(tally.outcomes)} cases measured what they count")
    print(
        f"cases={len(tally.outcomes)} passed={passed} lost={counts['lost']} "
        f"duplicated={counts['duplicated']} double_runs={counts['double_runs']} "
        f"bad_clicks_accepted={counts['bad_clicks_accepted']}"
    )
    after = "not measured" if tally.card_after is None else f"{tally.card_after:.1f}s"
    print(
        f"flood: the ordinary card came {after} after a 10 s flood of 1 MiB logs (goal under 5 s)"
    )
    return 0 if tally.outcomes and passed == len(tally.outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

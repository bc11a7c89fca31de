"""Never silent on real failure text: every row of the first-seen batches
(tests/data/corpus/first_seen/) and of the shared development corpora (`dev`, `dev2`,
beside the checkout in `../shared/corpus/` when they are there) that holds a failure
answers a class or "pitcrew does not know this failure" with its lines, never "No
failure found"; a healthy row (label `none`) answers "No failure found" and lists no
failure-looking line.

`NO_FAILURE_IN_THE_TEXT` names the few labelled rows whose text shows no failure pitcrew
can name (the failure is in the reporter's prose, or the row is ambiguous), each with
why; the test fails when a row leaves it or another joins it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.files.playbooks import builtin_engine
from bot.core.diagnosis.engine import Engine, to_json

ROOT = Path(__file__).resolve().parents[2]
FIRST_SEEN = ROOT / "tests" / "data" / "corpus" / "first_seen"
SHARED = (ROOT.parent / "shared" / "corpus", ROOT.parent.parent / "shared" / "corpus")
NO_FAILURE = "No failure found: nothing in the input matches a playbook."

NO_FAILURE_IN_THE_TEXT: dict[str, str] = {
    "rc-094": "a raylet's graceful shutdown on SIGTERM (EXPECTED_TERMINATION), which the "
    "node-lost playbook holds to be the end of a job; the loss is in the reporter's words",
    "d2-004": "`ray status` with a pending demand, the same shape as d2-081 (labelled none); "
    "the hang is in the reporter's words",
    "d2-023": "KubeRay's probe command and a complaint, no probe result (ambiguous)",
    "d2-055": "Tune's status with a PENDING trial and no error (ambiguous)",
    "d2-056": "the autoscaler's INFO lines requeuing a launch (ambiguous)",
    "A-059": "RayService's INFO line preparing a new cluster for a changed config (ambiguous)",
    "A-039": "a describe of a Running container, Ready False, five restarts and no state or "
    "reason of its last end (ambiguous)",
    "A-006": "a Kueue Workload admitted and its Job Suspended, no condition saying why (ambiguous)",
    "A-018": "a PyTorchJob with an empty STATE column (ambiguous)",
    "A-043": "one line of the job's code, an assert statement, without the AssertionError "
    "(ambiguous)",
    "C-014": "the raylet's INFO line killing a worker, cut before it says why (ambiguous)",
    "C-022": "a DCGM metric series naming Xid 45, the cleanup after a process ended, and no "
    "failure (ambiguous)",
    "C-051": "a Volcano Queue's describe at its capability, jobs waiting by policy (ambiguous)",
    "F-025": "an MCAD AppWrapper's queueing conditions, cut before any refusal (ambiguous)",
}
"""Rows labelled with a failure whose text shows none that pitcrew can name: each says
why. They answer "No failure found"; any other row that holds a failure must not."""
NOT_YET_READ: dict[str, str] = {}
"""First-seen rows that answered "No failure found" when their batch was scored, until
their misses are read (for their kind) and this list is emptied."""
STILL_ALARMED = frozenset({"d2-044", "E-025"})
"""Healthy rows still answered with a failure: d2-044 (ambiguous), a raylet SIGKILLed by
`ray stop` after its grace period. No class is given (the playbook reads ray stop's own
words before it), but the line is Ray's error-level "Raylet is terminated", which
pitcrew names as a message it knows and does not classify. E-025 (ambiguous), a job's
own "Error in reward_fn: …" print with no traceback or death, which pitcrew shows as a
failure-looking line it does not know."""


def _corpora() -> list[Path]:
    shared = next((d for d in SHARED if d.is_dir()), None)
    dev = [shared / n for n in ("dev.jsonl", "dev2.jsonl") if shared and (shared / n).is_file()]
    return [*dev, *sorted(FIRST_SEEN.glob("batch-*.jsonl"))]


ROWS: list[dict[str, Any]] = [
    json.loads(line)
    for path in _corpora()
    for line in path.read_text(encoding="utf-8").splitlines()
    if line.strip()
]


@pytest.fixture(scope="module")
def engine() -> Engine:
    return builtin_engine()


def test_the_first_seen_batches_are_read() -> None:
    assert sum(1 for r in ROWS if r["id"][:2] in ("A-", "B-")) >= 54


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_a_row_that_holds_a_failure_is_never_no_failure_found(
    engine: Engine, row: dict[str, Any]
) -> None:
    out = to_json(engine.diagnose_text(row["text"], "-"))
    said_nothing = out["primary"] is None and not out["unknown"]
    if row["primary_class"] == "none":
        alarmed = not said_nothing
        assert alarmed == (row["id"] in STILL_ALARMED), (out["primary"], out["unknown"])
        if not alarmed:
            assert out["diagnosis"] == NO_FAILURE
    else:
        assert said_nothing == (row["id"] in {*NO_FAILURE_IN_THE_TEXT, *NOT_YET_READ}), (
            out["primary"],
            out["unknown"],
        )
        if not said_nothing:
            assert out["diagnosis"] != NO_FAILURE


def test_the_open_target_names_only_rows_that_are_read() -> None:
    read = {r["id"] for r in ROWS}
    shared_absent = ("rc-", "d2-") if "rc-001" not in read else ()
    named = {
        i
        for i in {*NO_FAILURE_IN_THE_TEXT, *NOT_YET_READ, *STILL_ALARMED}
        if not i.startswith(shared_absent)
    }
    assert named - read == set()

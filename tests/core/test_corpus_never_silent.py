"""Never silent on real failure text: every row of the first-seen batches
(tests/data/corpus/first_seen/) and of the shared development corpora (`dev`, `dev2`,
beside the checkout in `../shared/corpus/` when they are there) that holds a failure
answers a class or "pitcrew does not know this failure" with its lines, never "No
failure found"; a healthy row (label `none`) answers "No failure found" and lists no
failure-looking line.

`STILL_SILENT` is the target still open: the rows that answer "No failure found" today
although they hold a failure. It only shrinks; the test fails when a row leaves it
(take it out) or joins it.
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

STILL_SILENT = frozenset(["rc-094", "d2-004", "d2-023", "d2-055", "d2-056", "A-066", "A-075"])
"""Rows holding a failure that still answer "No failure found" (the open target)."""
STILL_ALARMED = frozenset({"d2-044"})
"""Healthy rows that are still given a class or failure-looking lines (the open target)."""


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
        assert said_nothing == (row["id"] in STILL_SILENT), (out["primary"], out["unknown"])
        if not said_nothing:
            assert out["diagnosis"] != NO_FAILURE


def test_the_open_target_names_only_rows_that_are_read() -> None:
    read = {r["id"] for r in ROWS}
    shared_absent = ("rc-", "d2-") if "rc-001" not in read else ()
    named = {i for i in STILL_SILENT | STILL_ALARMED if not i.startswith(shared_absent)}
    assert named - read == set()

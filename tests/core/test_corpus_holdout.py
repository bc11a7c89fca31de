"""The held-out corpus of real failure text keeps the development corpus's format.

`bench/corpus.py` scores the engine on it; these checks keep every row
scorable: the fields the shared scorer reads, a category the taxonomy knows,
one row per public thread. (`bench/corpus.py` refuses a held-out row whose
thread the development corpus already cites.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.core.taxonomy import Category

HOLDOUT = Path(__file__).resolve().parents[1] / "data" / "corpus" / "holdout.jsonl"
FIELDS = {
    "id",
    "source_url",
    "text",
    "primary_class",
    "secondary_class",
    "signal_kind",
    "ambiguous",
    "audit_reason",
}
KINDS = {"driver_log", "worker_log", "pod_status", "k8s_event", "ray_job", "mixed"}
ROWS = [json.loads(line) for line in HOLDOUT.read_text(encoding="utf-8").splitlines() if line]
LABELS = {c.value for c in Category} | {"none"}


@pytest.mark.parametrize("row", ROWS, ids=[r.get("id", "?") for r in ROWS])
def test_each_row_is_a_labelled_excerpt_of_a_public_thread(row: dict[str, object]) -> None:
    assert set(row) == FIELDS
    assert str(row["source_url"]).startswith("https://github.com/")
    assert row["primary_class"] in LABELS
    assert row["secondary_class"] is None or row["secondary_class"] in LABELS - {"none"}
    assert row["signal_kind"] in KINDS
    assert isinstance(row["ambiguous"], bool)
    assert str(row["text"]).strip()
    assert str(row["audit_reason"]).strip()


def test_ids_and_threads_are_unique() -> None:
    assert len({r["id"] for r in ROWS}) == len(ROWS)
    assert len({r["source_url"] for r in ROWS}) == len(ROWS)


def test_the_size_the_bench_reports_on() -> None:
    assert 60 <= len(ROWS) <= 100

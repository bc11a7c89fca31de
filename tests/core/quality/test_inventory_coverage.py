"""The inventory's coverage: each message carried the way its emitter prints it, held
to its verdict, reported per project with the misses (bot.core.quality.inventory_coverage)."""

from __future__ import annotations

import json

import pytest

from bot.adapters.files.playbooks import engine_of, load_builtin
from bot.core.diagnosis.engine import Engine
from bot.core.diagnosis.known_messages import known_messages, read_known
from bot.core.quality.inventory import InventoryEntry, parse_inventory
from bot.core.quality.inventory_coverage import answer_of, report_lines, run

HEADER = {"project": "kubernetes", "read": "the test", "releases": ["1.28.7"]}


def item(ident: str, level: str, template: str, verdict: str) -> dict[str, object]:
    return {
        "id": ident, "emitter": "kubelet", "level": level, "kind": "log",
        "source": "pkg/kubelet/kubelet.go", "versions": "1.28.7",
        "wordings": [{"template": template, "versions": "1.28.7"}], "verdict": verdict,
    }  # fmt: skip


TEXT = "\n".join(
    json.dumps(x)
    for x in (
        HEADER,
        item("kubelet-orphaned-volume-dirs", "error", "orphaned pod {pod} found, volume paths are still present on disk", "unclassified"),
        item("kubelet-cgroup-driver-guess", "warning", "cgroup driver guessed as {driver}", "unclassified"),
    )
) + "\n"  # fmt: skip


@pytest.fixture(scope="module")
def entries() -> tuple[InventoryEntry, ...]:
    return parse_inventory(TEXT, "kubernetes.jsonl")


@pytest.fixture(scope="module")
def engine() -> Engine:
    return engine_of(load_builtin(), lambda: known_messages(read_known(TEXT, "kubernetes.jsonl")))


@pytest.mark.parametrize(
    ("index", "text", "answer"),
    [
        # an unclassified error must be answered 'does not know', naming the entry
        (0, "E1206 12:00:00.123456    4721 kubelet.go:123] orphaned pod x found, volume paths "
            "are still present on disk", (True, "unknown", True)),
        (0, "orphaned pod x found, volume paths are still present on disk", (False, "none", False)),
        # at warning level, staying quiet is as good an answer
        (1, "W1206 12:00:00.123456    4721 kubelet.go:123] cgroup driver guessed as systemd",
         (True, "none", False)),
    ],
)  # fmt: skip
def test_an_answer_is_held_to_the_verdict_and_the_level(
    engine: Engine, entries: tuple[InventoryEntry, ...], index: int, text: str,
    answer: tuple[bool, str, bool],
) -> None:  # fmt: skip
    assert answer_of(engine, entries[index], text) == answer


def test_the_report_gives_each_project_its_shares_and_lists_the_misses(
    engine: Engine, entries: tuple[InventoryEntry, ...]
) -> None:
    lines = report_lines(entries, run(engine, entries))
    assert lines[1:4] == [
        "inventory      messages wordings  class  none unclass.  verdict   texts recognized",
        "kubernetes            2        2      0     0        2     0.0%       7      71.4%",
        "total                 2        2      0     0        2     0.0%       7      71.4%",
    ]
    # a bare quote of an error says nothing of its level: no detector raises it yet
    assert lines[5:] == [
        "inventory misses (1 messages; wanted: the verdict):",
        "  kubernetes#kubelet-orphaned-volume-dirs  wanted unclassified, answered none"
        "  in 2 carrier(s): bare, wrap-80",
    ]

"""The repository stands alone: what bot/, tests/ and docs/ cite is inside it, and no file
there names a path of the machine it was written on.

An absolute path into the directory that holds the checkout (the workspace: the `work`
directory at the root of the development machine) would break on any other clone, and
so would a citation of a document kept beside the checkout rather than in `docs/`. Real text quoted from public
threads may hold another machine's paths (a user's home directory in the held-out
corpus): those are data, and are not paths of this machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = ROOT.parent
SCANNED = ("bot", "tests", "docs")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}
# A path that starts at the workspace, not the tail of a longer path (a home directory).
OWN_PATH = re.compile(rf"(?<![\w.~/-]){re.escape(str(WORKSPACE))}/")
OUTSIDE_DOCS = re.compile(r"\b(?:DESIGN|TAXONOMY)\.md\b")


def files() -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and not SKIPPED_DIRS & set(path.parts):
                yield path


def hits(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in files():
        text = path.read_bytes().decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}")
    return found


@pytest.mark.parametrize(
    ("line", "found"),
    [
        (f'"{WORKSPACE}/shared/kuberay/crds"', True),
        (f"see {WORKSPACE}/main/examples/seed/driver.log", True),
        (f"/home/octopus{WORKSPACE}/conda/envs/ds_zero", False),
        (f"/Users/someone{WORKSPACE}/ray/python/ray/worker.py", False),
        ("../shared/kuberay/crds", False),
    ],
)
def test_a_path_of_this_machine_is_told_from_another_machines(line: str, found: bool) -> None:
    assert bool(OWN_PATH.search(line)) is found


def test_no_file_names_a_path_of_this_machine() -> None:
    assert hits(OWN_PATH) == []


def test_what_the_code_cites_is_in_docs() -> None:
    assert hits(OUTSIDE_DOCS) == []

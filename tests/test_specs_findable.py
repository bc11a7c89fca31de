"""Every module's spec can be found from the module: named after it (`bot/x/y.py` is
specified by `tests/x/test_y.py`, by `test_y_<aspect>.py` files, or under `tests/e2e/`),
or listed in tests/README.md's "Where a module's spec is" with specs that exist."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests.support.tree import BOT, modules

TESTS = Path(__file__).resolve().parent
README = TESTS / "README.md"
SECTION = "## Where a module's spec is"


def specs_named_after(module: Path) -> list[Path]:
    return [
        spec
        for spec in TESTS.rglob("test_*.py")
        if spec.stem == f"test_{module.stem}" or spec.stem.startswith(f"test_{module.stem}_")
    ]


def cell_paths(cell: str) -> list[str]:
    """The paths a table cell names; a bare `name.py` is in the folder named before it."""
    paths: list[str] = []
    folder = ""
    for name in re.findall(r"`([^`]+)`", cell):
        if not name.endswith((".py", "*")):
            continue
        if "/" in name:
            folder = name.rsplit("/", 1)[0]
            paths.append(name)
        elif name.endswith(".py"):
            paths.append(f"{folder}/{name}")
    return paths


def listed(text: str) -> list[tuple[list[str], list[str]]]:
    """(modules or patterns, specs) of each row of the README's map."""
    table = text.split(SECTION, 1)[1]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cell_paths(cells[0]) and cell_paths(cells[1]):
            rows.append((cell_paths(cells[0]), cell_paths(cells[1])))
    return rows


ROWS = listed(README.read_text(encoding="utf-8"))
MODULES = [
    path.relative_to(BOT).as_posix()
    for path in modules()
    if path.name not in ("__init__.py", "__main__.py")
]


@pytest.mark.parametrize(
    ("cell", "paths"),
    [
        ("`core/a.py`, `b.py`", ["core/a.py", "core/b.py"]),
        ("`adapters/store/*`", ["adapters/store/*"]),
        ("`e2e/x/test_a.py` (a note), `app/test_b.py`", ["e2e/x/test_a.py", "app/test_b.py"]),
    ],
)
def test_a_cell_names_its_paths(cell: str, paths: list[str]) -> None:
    assert cell_paths(cell) == paths


def test_the_map_is_read() -> None:
    assert len(ROWS) > 40
    assert (["core/actions/order.py"], ["e2e/slack/test_offer_order.py"]) in ROWS


def test_every_spec_the_map_names_exists_and_every_module_it_names_too() -> None:
    missing = [spec for _, specs in ROWS for spec in specs if not (TESTS / spec).is_file()]
    unknown = [
        name
        for names, _ in ROWS
        for name in names
        if not any(fnmatch(module, name) for module in MODULES)
    ]
    assert (missing, unknown) == ([], [])


def test_every_module_has_a_spec_named_after_it_or_listed() -> None:
    patterns = [name for names, _ in ROWS for name in names]
    lost = [
        module
        for module in MODULES
        if not specs_named_after(BOT / module) and not any(fnmatch(module, p) for p in patterns)
    ]
    assert lost == []

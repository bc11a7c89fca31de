"""No module in bot/ imports a private part of another package: a module or name whose
own part of its path begins with `_` (`from typer._coercion import ...`, `import click._compat`,
`from typer import _click`). Such a part changes with any release of its package, so
pitcrew would break on an upgrade that changes nothing it was promised.

pitcrew's own modules are not held to it, nor is `__future__`; the standard library's
C accelerators (`_thread`...) are imported by no module and would be flagged too.
"""

from __future__ import annotations

import ast

import pytest

from tests.support.tree import BOT, modules

# Names with a leading underscore that their library documents as public, stable API.
DOCUMENTED = frozenset({"os._exit"})  # exit without cleanup: a deposed leader, at once


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.endswith("__") for part in name.split("."))


def private_imports(source: str) -> list[str]:
    """`line: what` for each import of a private part of a package other than `bot`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if _private(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            privately = [f"{module}.{a.name}" for a in node.names if _private(a.name)]
            names = [module] if _private(module) else privately
        else:
            continue
        found += [
            f"{node.lineno}: {name}"
            for name in names
            if name.split(".")[0] not in ("bot", "__future__")
        ]
    return found + _private_attributes(source)


def _private_attributes(source: str) -> list[str]:
    """`line: what` for each private name reached through a package imported whole
    (`import typer.core` then `typer.core._TyperParameter`)."""
    tree = ast.parse(source)
    imported = {
        (alias.asname or alias.name.split(".")[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.split(".")[0] != "bot"
    }
    found = []
    for node in ast.walk(tree):
        chain: list[str] = []
        inner: ast.AST = node
        while isinstance(inner, ast.Attribute):
            chain.insert(0, inner.attr)
            inner = inner.value
        if not (isinstance(node, ast.Attribute) and isinstance(inner, ast.Name)):
            continue
        dotted = ".".join([inner.id, *chain])
        if inner.id in imported and _private(node.attr) and dotted not in DOCUMENTED:
            found.append(f"{node.lineno}: {dotted}")
    return found


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from typer._coercion import build_runtime_param", ["1: typer._coercion"]),
        ("import click._compat", ["1: click._compat"]),
        ("x = 1\nfrom typer import _click as click", ["2: typer._click"]),
        (
            "if TYPE_CHECKING:\n    from typer.core import _TyperParameter",
            ["2: typer.core._TyperParameter"],
        ),
        ("import _thread", ["1: _thread"]),
        ("from typer.core import TyperGroup\nfrom bot import __version__", []),
        ("from bot.core.model import _private\nfrom .x import _y", []),
        ("from pydantic import BaseModel\nimport importlib.metadata", []),
        (
            "import typer.core\nshown = typer.core._TyperParameter.display_type",
            ["2: typer.core._TyperParameter"],
        ),
        ("import sys\nframe = sys._getframe()", ["2: sys._getframe"]),
        ("import gc\ngc.freeze()\nthing._private = 1", []),
    ],
)
def test_the_scan_finds_a_private_import_however_it_is_written(
    source: str, found: list[str]
) -> None:
    assert private_imports(source) == found


def test_no_module_imports_a_private_part_of_a_dependency() -> None:
    offenders = [
        f"{path.relative_to(BOT.parent)}:{hit}"
        for path in modules()
        for hit in private_imports(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "imports of private modules:\n" + "\n".join(offenders)

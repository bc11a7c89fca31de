"""No module in bot/ over 600 lines, no function over 60: a module says one thing, a
function does one.

The demo's scenes are the exception, by name: each is the script of one scene of
`pitcrew demo` (what it starts, what it shows, in order), read top to bottom.
Lines are counted as the file has them, a function from its first decorator to its
last line, docstring and comments included; a nested function counts on its own too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

BOT = Path(__file__).resolve().parents[1] / "bot"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
SCENES = {
    "bot/app/demo/runner.py": {"Demo.stale_actor", "Demo.missing_dependency", "Demo.seed"},
}


def modules() -> list[Path]:
    return sorted(BOT.rglob("*.py"))


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int, int]]:
    """(qualified name, first line, lines) of every function and method under `tree`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            end = node.end_lineno or node.lineno
            yield f"{prefix}{node.name}", node.lineno, end - first + 1
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def test_the_walk_sees_the_package() -> None:
    names = {path.relative_to(BOT.parent).as_posix() for path in modules()}
    assert {
        "bot/daemon/pipeline.py",
        "bot/core/diagnosis/engine.py",
        "bot/app/demo/runner.py",
    } <= names
    tree = ast.parse((BOT / "app/demo/runner.py").read_text(encoding="utf-8"))
    assert SCENES["bot/app/demo/runner.py"] <= {name for name, _, _ in functions(tree)}


def test_no_module_is_over_600_lines() -> None:
    offenders = []
    for path in modules():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            offenders.append(f"{path.relative_to(BOT.parent)}: {lines} lines")
    assert not offenders, "modules over 600 lines:\n" + "\n".join(offenders)


def test_no_function_is_over_60_lines() -> None:
    offenders = []
    for path in modules():
        where = path.relative_to(BOT.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, line, lines in functions(tree):
            if lines > MAX_FUNCTION_LINES and name not in SCENES.get(where, set()):
                offenders.append(f"{where}:{line} {name}: {lines} lines")
    assert not offenders, "functions over 60 lines:\n" + "\n".join(offenders)

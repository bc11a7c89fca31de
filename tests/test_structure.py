"""No module in bot/ over 600 lines, no function over 60, no function or constructor
taking more than 8 parameters: a module says one thing, a function does one, and what
travels together has a name (a config or value object that says what it is).

The demo's scenes are the exception, by name: each is the script of one scene of
`pitcrew demo` (what it starts, what it shows, in order), read top to bottom.
Lines are counted as the file has them, a function from its first decorator to its
last line, docstring and comments included; a nested function counts on its own too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from tests.support.tree import BOT, modules

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8
# A CLI command's parameters are its command-line options: typer reads them from the
# signature, one parameter per option, so a command cannot group them.
CLI_DECORATORS = frozenset({"command", "callback"})
SCENES = {
    "bot/app/demo/runner.py": {"Demo.stale_actor", "Demo.missing_dependency", "Demo.seed"},
}


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


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters a caller may pass, as `def` spells them: positional-only, ordinary
    and keyword-only ones, and `*args` and `**kwargs` as one each; a method's leading
    `self` or `cls` is not one. A dataclass's fields are not counted (its generated
    `__init__` has no `def`): a dataclass is the value object that groups them."""
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [f"*{a.arg}" for a in (args.vararg, args.kwarg) if a is not None]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def is_cli_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated `@<typer app>.command(...)` or `.callback(...)`."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr in CLI_DECORATORS:
            return True
    return False


def crowded(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int, int]]:
    """(qualified name, line, parameters) of each function or method over the limit."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            yield from crowded(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            count = len(parameters(node))
            if count > MAX_PARAMETERS and not is_cli_command(node):
                yield f"{prefix}{node.name}", node.lineno, count
            yield from crowded(node, f"{prefix}{node.name}.")
        else:
            yield from crowded(node, prefix)


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


def test_no_function_or_constructor_takes_more_than_8_parameters() -> None:
    offenders = []
    for path in modules():
        where = path.relative_to(BOT.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name, line, count in crowded(tree):
            offenders.append(f"{where}:{line} {name}: {count} parameters")
    assert not offenders, "functions over 8 parameters:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("def f(a, b, c, d, e, f, g, h): ...", []),
        ("def f(a, b, c, d, e, f, g, h, i): ...", [("f", 1, 9)]),
        ("def f(a, /, b, *rest, c, d, e, f, g, **more): ...", [("f", 1, 9)]),
        ("class C:\n    def __init__(self, a, b, c, d, e, f, g, h): ...", []),
        (
            "class C:\n    def __init__(self, *, a, b, c, d, e, f, g, h, i): ...",
            [("C.__init__", 2, 9)],
        ),
        ("class C:\n    @classmethod\n    def of(cls, a, b, c, d, e, f, g, h): ...", []),
        ("@app.command('x')\ndef x(a, b, c, d, e, f, g, h, i): ...", []),
        ("def outer():\n    def inner(a, b, c, d, e, f, g, h, i): ...", [("outer.inner", 2, 9)]),
    ],
    ids=["eight", "nine", "every-kind", "self", "keyword-only", "cls", "cli-command", "nested"],
)
def test_parameters_are_counted_as_def_spells_them(
    source: str, found: list[tuple[str, int, int]]
) -> None:
    assert list(crowded(ast.parse(source))) == found

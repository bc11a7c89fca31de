"""Python raises and warning/error log calls, as templates, read with `ast`.

A message built with an f-string, `%`, `.format()` or `+` becomes literal text with
`{name}` for each value; a message held in a variable is followed to its assignment in
the same function. A raise is kept with its exception's name (a traceback prints
`Name: message`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from common import clean, escape, name_of, printf_template

_LOGGERS = re.compile(r"(?:^|\.|_)(?:log|logger|logging|_logger|LOGGER|log_)$|^logger$|^log$|^logging$", re.I)
_LEVELS = {
    "error": "error", "exception": "error", "critical": "fatal", "fatal": "fatal",
    "warning": "warning", "warn": "warning",
}
_SKIP_EXC = {"StopIteration", "StopAsyncIteration", "KeyboardInterrupt", "SystemExit", "GeneratorExit"}


def _src(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - any node ast cannot print is a value
        return "value"


def _placeholder(node: ast.AST) -> str:
    return "{" + name_of(_src(node)) + "}"


class _Scope:
    def __init__(self, assigns: dict[str, ast.AST]) -> None:
        self.assigns = assigns


def template(node: ast.AST, scope: _Scope, depth: int = 0) -> str | None:
    """The template of a string expression, or None when it has no literal text."""
    if depth > 4:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return escape(node.value)
    if isinstance(node, ast.JoinedStr):
        out: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(escape(value.value))
            elif isinstance(value, ast.FormattedValue):
                out.append(_placeholder(value.value))
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = template(node.left, scope, depth + 1)
        right = template(node.right, scope, depth + 1)
        if left is None and right is None:
            return None
        return (left if left is not None else _placeholder(node.left)) + (
            right if right is not None else _placeholder(node.right)
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return printf_template(node.left.value, [_src(a) for a in args])
        return None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return _format(node.func.value.value, node)
    if isinstance(node, ast.Name) and node.id in scope.assigns:
        return template(scope.assigns[node.id], scope, depth + 1)
    return None


def _format(fmt: str, call: ast.Call) -> str:
    positional = [_src(a) for a in call.args]
    keywords = {k.arg: _src(k.value) for k in call.keywords if k.arg}
    counter = iter(range(1000))

    def field(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token
        key = match.group(1).split("!")[0].split(":")[0].split(".")[0].split("[")[0]
        if key == "":
            index = next(counter)
            expr = positional[index] if index < len(positional) else "value"
        elif key.isdigit():
            expr = positional[int(key)] if int(key) < len(positional) else "value"
        else:
            expr = keywords.get(key, key)
        return "{" + name_of(expr) + "}"

    return re.sub(r"\{\{|\}\}|\{([^{}]*)\}", field, fmt)


def _assigns(function: ast.AST) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found.setdefault(node.targets[0].id, node.value)
    return found


def _receiver(func: ast.Attribute) -> str:
    return _src(func.value)


def messages(source: str) -> Iterator[tuple[str, str, str]]:
    """(level, exception name or "", template) of every raise and warning/error log."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    owner: dict[int, _Scope] = {}
    for function in functions:
        scope = _Scope(_assigns(function))
        for node in ast.walk(function):
            owner.setdefault(id(node), scope)
    module_scope = _Scope({})
    for node in ast.walk(tree):
        scope = owner.get(id(node), module_scope)
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            name = _src(node.exc.func).rsplit(".", 1)[-1]
            if name in _SKIP_EXC or not name[:1].isupper():
                continue
            text = template(node.exc.args[0], scope)
            if text:
                yield "raise", name, clean(text)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            level = _LEVELS.get(node.func.attr)
            if level is None or not node.args:
                continue
            if not _LOGGERS.search(_receiver(node.func)):
                continue
            first = node.args[0]
            text = template(first, scope)
            if text is None:
                continue
            if len(node.args) > 1 and isinstance(first, ast.Constant) and "%" in str(first.value):
                text = printf_template(str(first.value), [_src(a) for a in node.args[1:]])
            yield level, "", clean(text)

"""What a signature's regex can do, read from its parse tree: can a match span lines?

The classifier re-checks a Hyperscan candidate with Python `re`; a regex that
can never match a line break is re-checked on its own line, not on the lines
before it too, which is most of the cost of a scan of a failing job's log.
Anything this module does not recognise counts as "may span lines".
"""

from __future__ import annotations

import importlib
import re
from typing import Any

# Python's own regex parser and its opcodes (no public API, no type stubs).
sre_parse: Any = importlib.import_module("re._parser")
sre: Any = importlib.import_module("re._constants")

_NEWLINE = ord("\n")
_CATEGORIES_WITH_NEWLINE = {
    sre.CATEGORY_SPACE,
    sre.CATEGORY_NOT_WORD,
    sre.CATEGORY_NOT_DIGIT,
    sre.CATEGORY_LINEBREAK,
    sre.CATEGORY_UNI_SPACE,
    sre.CATEGORY_UNI_NOT_WORD,
    sre.CATEGORY_UNI_NOT_DIGIT,
    sre.CATEGORY_UNI_LINEBREAK,
}
_ZERO_WIDTH = {sre.AT}
_NESTED_LAST = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}


def can_span_lines(pattern: str, flags: int = 0) -> bool:
    """True when some match of `pattern` may contain a line break (True when unsure)."""
    if not pattern:
        return False
    try:
        tree = sre_parse.parse(pattern, flags)
    except re.error:
        return True
    dotall = bool(tree.state.flags & re.DOTALL)
    try:
        return _any_newline(list(tree), dotall)
    except (TypeError, ValueError, IndexError):
        return True


def _any_newline(items: list[tuple[Any, Any]], dotall: bool) -> bool:
    return any(_node_newline(op, arg, dotall) for op, arg in items)


def _node_newline(op: Any, arg: Any, dotall: bool) -> bool:
    if op is sre.LITERAL:
        return bool(arg == _NEWLINE)
    if op is sre.NOT_LITERAL:
        return bool(arg != _NEWLINE)
    if op is sre.ANY:
        return dotall
    if op is sre.IN:
        return _set_newline(arg)
    if op in _ZERO_WIDTH:
        return False
    if op is sre.SUBPATTERN:
        return _any_newline(list(arg[-1]), dotall or bool(arg[1] & re.DOTALL))
    if op in _NESTED_LAST:
        return _any_newline(list(arg[-1]), dotall)
    if op is sre.BRANCH:
        return any(_any_newline(list(branch), dotall) for branch in arg[1])
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return _any_newline(list(arg[1]), dotall)
    if op is sre.ATOMIC_GROUP:
        return _any_newline(list(arg), dotall)
    return True


def _set_newline(items: list[tuple[Any, Any]]) -> bool:
    """Whether a character set (`[...]`, `\\s` …) holds a line break."""
    negate = False
    inside = False
    for op, arg in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            inside = inside or arg == _NEWLINE
        elif op is sre.RANGE:
            inside = inside or arg[0] <= _NEWLINE <= arg[1]
        elif op is sre.CATEGORY:
            inside = inside or arg in _CATEGORIES_WITH_NEWLINE
        else:
            return True
    return inside != negate

"""A call's argument list, read from source text: enough of Go, C/C++ to split the
arguments of `f(a, "b" + c, g(d, e))` at the top level and to evaluate string literals
and their concatenation. Not a parser: what it cannot read it leaves out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CLOSE = {"(": ")", "[": "]", "{": "}"}


def call_args(text: str, open_paren: int, limit: int = 6000) -> list[str] | None:
    """The top-level arguments of the call whose `(` is at `open_paren`."""
    depth = 0
    args: list[str] = []
    start = open_paren + 1
    i = open_paren
    end = min(len(text), open_paren + limit)
    while i < end:
        ch = text[i]
        if ch in "\"'`":
            i = _skip_string(text, i)
            continue
        if ch == "/" and text.startswith("//", i):
            nl = text.find("\n", i)
            i = end if nl < 0 else nl
            continue
        if ch == "/" and text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = end if close < 0 else close + 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i])
                return [a.strip() for a in args if a.strip()] if any(a.strip() for a in args) else []
        elif ch == "," and depth == 1:
            args.append(text[start:i])
            start = i + 1
        i += 1
    return None


def _skip_string(text: str, i: int) -> int:
    quote = text[i]
    j = i + 1
    while j < len(text):
        ch = text[j]
        if ch == "\\" and quote != "`":
            j += 2
            continue
        if ch == quote:
            return j + 1
        if ch == "\n" and quote != "`":
            return j + 1
        j += 1
    return j


@dataclass(frozen=True)
class Piece:
    """A literal (`text`) or an expression (`expr`) of a concatenation."""

    text: str | None = None
    expr: str | None = None


_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"|`([^`]*)`|R"\(((?:.|\n)*?)\)"')
_ESC = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "", "0": ""}


def unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESC.get(m.group(1), m.group(1)), body)


def pieces(expr: str, join: str = "+") -> list[Piece]:
    """`"a" + x + "b"` (Go), `"a" "b"` (C), `a << "b"` (join `<<`) as pieces."""
    out: list[Piece] = []
    for part in split_top(expr, join):
        part = part.strip()
        if not part:
            continue
        literal = _literal_run(part)
        if literal is not None:
            out.append(Piece(text=literal))
        else:
            out.append(Piece(expr=part))
    return out


def _literal_run(part: str) -> str | None:
    """Adjacent string literals (C), with `PRIu64`-style macros between them."""
    text = ""
    pos = 0
    found = False
    while pos < len(part):
        while pos < len(part) and part[pos].isspace():
            pos += 1
        if pos >= len(part):
            break
        match = _STRING.match(part, pos)
        if match:
            body = match.group(1)
            text += unescape(body) if body is not None else (match.group(2) or match.group(3) or "")
            pos = match.end()
            found = True
            continue
        macro = re.match(r"PRI[diuxX](?:8|16|32|64|MAX|PTR)|SCNu64|NCCL_\w+_FMT", part[pos:])
        if macro and found:
            text += "d"
            pos += macro.end()
            continue
        return None
    return text if found else None


def split_top(expr: str, sep: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch in "\"'`":
            i = _skip_string(expr, i)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(sep, i):
            if sep == "+" and (expr.startswith("++", i) or expr.startswith("+=", i)):
                i += 2
                continue
            parts.append(expr[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(expr[start:])
    return parts


def literal(expr: str) -> str | None:
    """The value of an argument that is only string literals (concatenated)."""
    items = pieces(expr)
    if items and all(p.text is not None for p in items):
        return "".join(p.text or "" for p in items)
    return None


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1

"""Ray's C++ messages as templates: `RAY_LOG(ERROR|WARNING|FATAL) << a << b` (and its
`_EVERY_MS`/`_EVERY_N`/`_ONCE` forms, `.WithField(...)` chains, `RAY_EVENT`), and the
text streamed after a failed check (`RAY_CHECK(cond) << a`, `RAY_CHECK_EQ(x, y) << a`,
`RAY_CHECK_OK(status) << a`), which prints `Check failed: <cond> <text>`.

A streamed operand that is a string built just before (`absl::StrCat`, `absl::StrFormat`,
an `std::ostringstream` filled with `<<`) is followed to where it is built in the same
function; any other operand is a `{name}` placeholder.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from cfamily import statement_end
from common import clean, escape, literal_text, name_of, printf_template
from lexer import _skip_string, call_args, literal, pieces

_LOG = re.compile(r"(?<![\w])RAY_(?:LOG|EVENT)(?:_EVERY_MS|_EVERY_N|_EVERY_N_OR_DEBUG|_ONCE_PER_PROCESS|_EVERY_MS_OR)?\s*\(\s*(ERROR|WARNING|FATAL)\b")
_CHECK = re.compile(r"(?<![\w])RAY_CHECK(?:_OK|_EQ|_NE|_LE|_LT|_GE|_GT)?\s*\(")
_WITH = re.compile(r"\s*\.\s*WithField\s*\(")
_LEVEL = {"ERROR": "error", "WARNING": "warning", "FATAL": "fatal"}


def strip_comments(text: str) -> str:
    """The text with `//` and `/* */` comments blanked (strings kept, lines kept)."""
    out: list[str] = []
    i = 0
    start = 0
    while i < len(text):
        ch = text[i]
        if ch == '"' or (ch == "'" and i > 0 and not text[i - 1].isalnum()):
            i = _skip_string(text, i)
            continue
        if text.startswith("//", i):
            out.append(text[start:i])
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            start = i
            continue
        if text.startswith("/*", i):
            out.append(text[start:i])
            close = text.find("*/", i + 2)
            end = len(text) if close < 0 else close + 2
            out.append("\n" * text.count("\n", i, end))
            i = start = end
            continue
        i += 1
    out.append(text[start:])
    return "".join(out)


def _after_call(text: str, open_paren: int) -> int | None:
    """Where the text after the call whose `(` is at `open_paren` begins."""
    depth = 0
    i = open_paren
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            i = _skip_string(text, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _skip_fields(text: str, pos: int) -> int:
    while True:
        match = _WITH.match(text, pos)
        if not match:
            return pos
        end = _after_call(text, match.end() - 1)
        if end is None:
            return pos
        pos = end


def _stream(text: str, pos: int) -> tuple[str, int] | None:
    """The `<< a << b` operands at `pos` (up to the statement's end)."""
    match = re.compile(r"\s*<<").match(text, pos)
    if not match:
        return None
    end = statement_end(text, match.end())
    return text[match.end() : end], end


def _operand(expr: str, before: str, depth: int) -> str:
    expr = expr.strip()
    value = literal(expr)
    if value is not None:
        return escape(value)
    call = re.match(r"^(?:absl::)?(StrCat|StrFormat)\s*\(", expr)
    if call:
        args = call_args(expr, call.end() - 1) or []
        if call.group(1) == "StrFormat":
            fmt = literal(args[0]) if args else None
            if fmt is not None:
                return printf_template(fmt, args[1:])
        else:
            return "".join(_operand(a, before, depth + 1) for a in args)
    name = re.match(r"^([A-Za-z_]\w*)(?:\.str\(\))?$", expr)
    if name and depth < 2:
        built = _built(name.group(1), before, depth)
        if built:
            return built
    return "{" + name_of(expr) + "}"


def _built(name: str, before: str, depth: int) -> str | None:
    """How a string streamed by name was built within the 3,000 characters before."""
    window = before[-3000:]
    assigned = list(re.finditer(r"(?<![\w.])" + re.escape(name) + r"\s*=\s*(?!=)", window))
    if assigned:
        start = assigned[-1].end()
        end = statement_end(window, start)
        text = _operand(window[start:end], window[: assigned[-1].start()], depth + 1)
        return text if re.search(r"[A-Za-z]{3}", re.sub(r"\{[a-z_0-9]+\}", "", text)) else None
    streamed = [m for m in re.finditer(r"(?<![\w.])" + re.escape(name) + r"\s*<<", window)]
    if not streamed:
        return None
    out: list[str] = []
    for match in streamed:
        end = statement_end(window, match.end())
        out.append(_joined(window[match.end() : end], window[: match.start()], depth + 1))
    text = "".join(out)
    return text if re.search(r"[A-Za-z]{3}", re.sub(r"\{[a-z_0-9]+\}", "", text)) else None


def _joined(operands: str, before: str, depth: int) -> str:
    return "".join(
        escape(p.text) if p.text is not None else _operand(p.expr or "", before, depth)
        for p in pieces(operands, join="<<")
    )


def _has_words(template: str) -> bool:
    return bool(re.search(r"[A-Za-z]{3}", re.sub(r"\{[a-z_0-9]+\}", "", template)))


def ray_calls(source: str) -> Iterator[tuple[str, str, str]]:
    """(level, template, what it says) of every RAY_LOG at ERROR/WARNING/FATAL and every
    failed check with streamed text in one C++ file; what a check says is its streamed
    text (its condition is code: `runtime_env_agent_client_` says nothing of a runtime
    env that failed), "" for a log (all of its text)."""
    text = strip_comments(source)
    for match in _LOG.finditer(text):
        open_paren = text.index("(", match.start())
        after = _after_call(text, open_paren)
        if after is None:
            continue
        streamed = _stream(text, _skip_fields(text, after))
        if streamed is None:
            continue
        template = clean(_joined(streamed[0], text[: match.start()], 0))
        if _has_words(template):
            yield _LEVEL[match.group(1)], template, ""
    for match in _CHECK.finditer(text):
        after = _after_call(text, match.end() - 1)
        if after is None:
            continue
        streamed = _stream(text, after)
        if streamed is None:
            continue
        tail = clean(_joined(streamed[0], text[: match.start()], 0))
        if not _has_words(tail):
            continue
        args = call_args(text, match.end() - 1) or [""]
        if match.group(0).rstrip("( \n") == "RAY_CHECK" and len(args) == 1:
            condition = escape(" ".join(args[0].split()))
        else:
            condition = "{condition}"
        yield "fatal", f"Check failed: {condition} {tail}", literal_text(tail)


def streamed_conditions(source: str) -> set[str]:
    """The conditions (spaces removed) of the plain checks that stream text in one file:
    their `Check failed: <cond>` alone is the same message as the template with text."""
    text = strip_comments(source)
    found: set[str] = set()
    for match in _CHECK.finditer(text):
        if match.group(0).rstrip("( \n") != "RAY_CHECK":
            continue
        args = call_args(text, match.end() - 1) or []
        after = _after_call(text, match.end() - 1)
        if len(args) == 1 and after is not None and _stream(text, after) is not None:
            found.add("".join(args[0].split()))
    return found

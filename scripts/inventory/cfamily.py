"""C and C++ call sites that print at warning or error level, as templates.

Three shapes: printf-like (`WARN(fmt, ...)` in NCCL, `pr_err(fmt, ...)` in the kernel,
`error(fmt, ...)` in Slurm), comma concatenation (PyTorch's `TORCH_CHECK(cond, a, b)`,
`c10::str(a, b)`, `C10_THROW_ERROR(Type, msg)`), and streams (`LOG(ERROR) << a << b`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from common import clean, escape, name_of, printf_template
from lexer import _skip_string, call_args, literal, pieces, split_top


def _concat(args: list[str]) -> str | None:
    out: list[str] = []
    for arg in args:
        arg = arg.strip()
        value = literal(arg)
        if value is not None:
            out.append(escape(value))
            continue
        inner = re.match(r"^(?:c10::str|::c10::str|std::string)\((.*)\)$", arg, re.S)
        if inner:
            nested = call_args(arg, arg.index("("))
            sub = _concat(nested or [])
            if sub:
                out.append(sub)
                continue
        if "logPrefix" in arg:
            out.append("{log_prefix}")
            continue
        out.append("{" + name_of(arg) + "}")
    text = "".join(out)
    return text if re.search(r"[A-Za-z]{3}", re.sub(r"\{[a-z_0-9]+\}", "", text)) else None


def _printf(args: list[str]) -> str | None:
    if not args:
        return None
    fmt = literal(args[0])
    if fmt is None:
        return None
    return printf_template(fmt, args[1:])


def statement_end(text: str, start: int) -> int:
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            i = _skip_string(text, i)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                return i
        elif ch == ";" and depth == 0:
            return i
        i += 1
    return i


def printf_calls(text: str, names: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(level, template) for `name(fmt, ...)` calls; `names` maps a function to its level."""
    pattern = re.compile(r"(?<![\w.>])(" + "|".join(map(re.escape, names)) + r")\s*\(")
    for match in pattern.finditer(text):
        args = call_args(text, match.end() - 1)
        if args is None:
            continue
        if match.group(1) == "printk" and args:
            head = re.match(r"^(KERN_\w+)\s*(.*)$", args[0], re.S)
            if not head:
                continue
            args = [head.group(2), *args[1:]]
        template = _printf(args)
        if template:
            yield names[match.group(1)], clean(template)


_TORCH = re.compile(
    r"(?<![\w])(TORCH_CHECK(?:_WITH|_VALUE|_TYPE|_INDEX|_NOT_IMPLEMENTED)?|TORCH_WARN(?:_ONCE)?"
    r"|TORCH_INTERNAL_ASSERT|C10_THROW_ERROR|C10_CUDA_CHECK_WARN)\s*\("
)
_STREAM = re.compile(r"(?<![\w])(?:LOG|VLOG|C10_LOG_FIRST_N|LOG_IF)\s*\(\s*(ERROR|WARNING|FATAL)\s*(?:,[^)]*)?\)\s*<<")
_ASSIGNED = re.compile(
    r"(?:std::string|auto|const\s+std::string|const\s+auto)\s*&?\s*(\w*(?:[Mm]sg|[Mm]essage|[Ee]rror\w*|[Ee]xception\w*|what))\s*=\s*(?:c10::str|::c10::str)\s*\("
)


def torch_calls(text: str) -> Iterator[tuple[str, str]]:
    """(level, template) of PyTorch's checks, warnings, thrown errors and log streams."""
    for match in _TORCH.finditer(text):
        args = call_args(text, match.end() - 1)
        if not args:
            continue
        macro = match.group(1)
        if macro.startswith("TORCH_WARN") or macro == "C10_CUDA_CHECK_WARN":
            rest, level = args, "warning"
        elif macro == "TORCH_CHECK_WITH":
            rest, level = args[2:], "error"
        elif macro == "C10_THROW_ERROR":
            rest, level = args[1:], "error"
        elif macro == "TORCH_INTERNAL_ASSERT":
            rest, level = args[1:], "fatal"
        else:
            rest, level = args[1:], "error"
        template = _concat(rest) if rest else None
        if template:
            yield level, clean(template)
    for match in _STREAM.finditer(text):
        end = statement_end(text, match.end())
        items = pieces(text[match.end() : end], join="<<")
        template = "".join(escape(p.text) if p.text is not None else "{" + name_of(p.expr or "") + "}" for p in items)
        if re.search(r"[A-Za-z]{3}", re.sub(r"\{[a-z_0-9]+\}", "", template)):
            yield match.group(1).lower(), clean(template)
    for match in _ASSIGNED.finditer(text):
        args = call_args(text, match.end() - 1)
        template = _concat(args or [])
        if template:
            yield "error", clean(template)


def split_args(text: str) -> list[str]:
    return [a.strip() for a in split_top(text, ",")]

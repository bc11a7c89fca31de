"""Go call sites that print at warning or error level, as templates.

Read: Kubernetes Events of type Warning (`Eventf`/`Event`/`AnnotatedEventf`),
logr's `Error(err, msg)` and `Info(msg, ..., "error", err)`, klog's
`Error*`/`Warning*`/`Fatal*`/`ErrorS`, logrus' `Error*`/`Warn*`/`Fatal*`, and errors
made with `fmt.Errorf`/`errors.New`/`errors.Wrap*` (the text a caller prints or a pod
status carries). A format's verbs become `{name}` after the argument they print.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from common import clean, escape, name_of, printf_template
from lexer import call_args, literal, pieces

_EVENT = re.compile(r"\.(Eventf|Event|AnnotatedEventf|logIt)\(")
_LOG = re.compile(
    r"(?<![\w])(?:klog|log|logger|logrus|glog|l|lg|log\.G\(ctx\)|log\.L|[\w.()]*[Ll]og(?:ger)?(?:\(\w*\))?)"
    r"((?:\.With\w*\([^()]*(?:\([^()]*\))?[^()]*\))*)"
    r"\.(Errorf|Error|ErrorS|Warnf|Warn|Warningf|Warning|WarningS|Fatalf|Fatal|Info|Infof)\("
)
_ERR = re.compile(r"(?<![\w.])(?:fmt\.Errorf|errors\.New|errors\.Errorf|errors\.Wrapf|errors\.Wrap|pkgerrors\.Wrapf|status\.Errorf|status\.Error)\(")
_CONST = re.compile(r"^\s*(\w+)\s*(?:\w+\s*)?=\s*((?:\"(?:[^\"\\\n]|\\.)*\"\s*\+?\s*)+)", re.M)
LEVELS = {
    "Errorf": "error", "Error": "error", "ErrorS": "error", "Warnf": "warning",
    "Warn": "warning", "Warningf": "warning", "Warning": "warning", "WarningS": "warning",
    "Fatalf": "fatal", "Fatal": "fatal", "Info": "info-with-error", "Infof": "info-with-error",
}


def constants(text: str) -> dict[str, str]:
    """`Name = "value"` declarations (const or var blocks) of one file."""
    found: dict[str, str] = {}
    for match in _CONST.finditer(text):
        value = literal(match.group(2).rstrip().rstrip("+"))
        if value is not None:
            found[match.group(1)] = value
    return found


def _resolve(expr: str, consts: Mapping[str, str]) -> str | None:
    expr = expr.strip()
    value = literal(expr)
    if value is not None:
        return value
    bare = re.sub(r"^string\((.*)\)$", r"\1", expr).strip()
    name = bare.rsplit(".", 1)[-1]
    return consts.get(name)


def _format(args: list[str], consts: Mapping[str, str]) -> str | None:
    """A format argument followed by its values, as a template."""
    if not args:
        return None
    sprintf = re.match(r"^fmt\.Sprintf\(", args[0].strip())
    if sprintf and len(args) == 1:
        inner = call_args(args[0].strip(), sprintf.end() - 1)
        return _format(inner or [], consts)
    fmt = _resolve(args[0], consts)
    if fmt is None:
        items = pieces(args[0])
        if not any(p.text for p in items):
            return None
        return "".join(escape(p.text) if p.text is not None else "{" + name_of(p.expr or "") + "}" for p in items)
    if "%" in fmt:
        return printf_template(fmt, args[1:])
    return escape(fmt)


def _sprint(args: list[str], consts: Mapping[str, str]) -> str | None:
    """klog.Error(a, b, c) / logrus.Error(a, b): operands printed one after another."""
    out: list[str] = []
    for arg in args:
        value = _resolve(arg, consts)
        out.append(escape(value) if value is not None else "{" + name_of(arg) + "}")
    text = "".join(out)
    return text if re.search(r"[A-Za-z]{3}", re.sub(r"\{[a-z_0-9]+\}", "", text)) else None


def events(text: str, consts: Mapping[str, str]) -> Iterator[tuple[str, str, str]]:
    """(reason, template, "event-warning") for every Warning event a file records."""
    for match in _EVENT.finditer(text):
        args = call_args(text, match.end() - 1)
        if not args:
            continue
        kind = match.group(1)
        rest = args[2:] if kind == "AnnotatedEventf" else args[1:]
        if kind == "logIt" and len(rest) >= 4:
            rest = [rest[0], rest[1], rest[3]]
        if len(rest) < 3 or not re.search(r"EventTypeWarning|\"Warning\"", rest[0]):
            continue
        reason = _resolve(rest[1], consts) or rest[1].rsplit(".", 1)[-1].strip("()")
        if kind == "Event":
            template = _format([rest[2]], consts) if "%" not in (literal(rest[2]) or "") else escape(literal(rest[2]) or "")
        else:
            template = _format(rest[2:], consts)
        if template:
            yield reason, clean(template), "event-warning"


def logs(text: str, consts: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """(level, template) for every warning/error log call of a file."""
    for match in _LOG.finditer(text):
        method = match.group(2)
        args = call_args(text, match.end() - 1)
        if not args:
            continue
        level = LEVELS[method]
        if method in ("Info", "Infof"):
            if not any(re.fullmatch(r'"(?:error|err)"', a) for a in args[1:]):
                continue
            template = _format(args[:1], consts)
        elif method == "ErrorS" or method == "WarningS":
            template = _format(args[1:2], consts) if method == "ErrorS" else _format(args[:1], consts)
        elif method.endswith("f"):
            template = _format(args, consts)
        elif _resolve(args[0], consts) is None and len(args) >= 2 and _resolve(args[1], consts) is not None:
            template = _format(args[1:2], consts)  # logr: Error(err, "msg", kv...)
        else:
            template = _sprint(args, consts) if len(args) > 1 else _format(args[:1], consts)
        if template:
            yield level, clean(template)


def errors(text: str, consts: Mapping[str, str]) -> Iterator[str]:
    """Templates of the errors a file makes (`fmt.Errorf`, `errors.New`, `Wrap*`)."""
    for match in _ERR.finditer(text):
        args = call_args(text, match.end() - 1)
        if not args:
            continue
        call = text[match.start() : match.end() - 1]
        if call.endswith(("Wrapf", "Wrap")):
            template = _format(args[1:], consts)
            if template:
                template = template + ": {error}"
        elif call.startswith("status."):
            template = _format(args[1:], consts)
        else:
            template = _format(args, consts)
        if template:
            yield clean(template)


_STATUS = re.compile(r"(?:\.Status\.Message\s*=|\bMessage:)\s*")


def status_messages(text: str, consts: Mapping[str, str]) -> Iterator[str]:
    """Templates of the messages a controller writes into a custom resource's status."""
    for match in _STATUS.finditer(text):
        rest = text[match.end() : match.end() + 2000]
        call = re.match(r"fmt\.Sprintf\(", rest)
        if call:
            args = call_args(rest, call.end() - 1)
            template = _format(args or [], consts)
        else:
            expr = re.match(r"((?:\"(?:[^\"\\\n]|\\.)*\"\s*\+?\s*)+)", rest)
            template = escape(literal(expr.group(1).rstrip().rstrip("+")) or "") if expr else None
        if template:
            yield clean(template)

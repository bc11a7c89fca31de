"""What every extractor shares: one printed message as found at one release, template
helpers (printf verbs and expressions to `{name}`), and merging a project's releases into
inventory entries with every wording and the releases that print it.

Why this exists: the inventory (`playbooks/inventory/*.jsonl`) is read mechanically from
the emitting projects' source at release tags; these are the rules that turn a call
site into a template, so that the same rules apply to Go, C/C++ and Python.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# `{name}` placeholders; literal braces are doubled, as in the message catalogue.
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([a-z_][a-z0-9_]*)\}")
PRINTF = re.compile(r"%(?:\[\d+\])?[-+# 0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|I32)?(p[A-Za-z]*|[a-zA-Z%])")


@dataclass(frozen=True)
class Found:
    """One message as one release prints it."""

    emitter: str
    level: str
    kind: str
    source: str
    template: str
    version: str
    reason: str = ""
    exception: str = ""
    said: str = ""
    """What the message says of the failure, when not all of its text (a failed check's
    streamed text without its condition): the verdict reads this."""


@dataclass
class Message:
    emitter: str
    level: str
    kind: str
    source: str
    reason: str
    exception: str
    said: str = ""
    wordings: dict[str, list[str]] = field(default_factory=dict)
    """template -> the releases that print it, in release order."""

    def versions(self, order: Sequence[str]) -> list[str]:
        seen = {v for vs in self.wordings.values() for v in vs}
        return [v for v in order if v in seen]


def name_of(expr: str) -> str:
    """A placeholder name for an argument expression: `pod.Name` -> `pod_name`."""
    expr = expr.strip()
    expr = re.sub(r"^(?:string|len|str|repr|int|float|klog\.KObj|klog\.KRef|format\.Pod|\*|&)\(?", "", expr)
    expr = re.sub(r"\(\)$", "", expr)
    parts = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)
    drop = {"self", "r", "c", "m", "s", "p", "e", "err", "ctx", "this", "instance", "kl", "m_"}
    words = [p for p in parts if p not in drop] or parts or ["value"]
    tail = words[-2:] if len(words) >= 2 else words
    text = "_".join(tail)
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text).lower()
    text = re.sub(r"[^a-z0-9_]+", "_", text).strip("_")
    text = re.sub(r"_+", "_", text)
    if not text or not text[0].isalpha():
        text = "value" if not text else f"v_{text}"
    if expr in ("err", "e", "error", "exc", "ex"):
        return "error"
    return text[:40].rstrip("_")


def escape(literal: str) -> str:
    return literal.replace("{", "{{").replace("}", "}}")


def printf_template(fmt: str, args: Sequence[str]) -> str:
    """A printf/Go format string with its verbs replaced by the arguments' names."""
    out: list[str] = []
    index = 0
    position = 0
    for match in PRINTF.finditer(fmt):
        out.append(escape(fmt[position : match.start()]))
        position = match.end()
        if match.group(1) == "%":
            out.append("%")
            continue
        name = name_of(args[index]) if index < len(args) else "value"
        index += 1
        out.append("{" + name + "}")
    out.append(escape(fmt[position:]))
    return "".join(out)


def literals(template: str) -> list[str]:
    """The literal parts of a template, in order (braces undoubled)."""
    parts = PLACEHOLDER.split(template)
    # split() interleaves the group: keep the text between placeholders.
    text: list[str] = []
    current = ""
    for token in re.split(r"(\{\{|\}\}|\{[a-z_][a-z0-9_]*\})", template):
        if token == "{{":
            current += "{"
        elif token == "}}":
            current += "}"
        elif PLACEHOLDER.fullmatch(token):
            text.append(current)
            current = ""
        else:
            current += token
    text.append(current)
    del parts
    return [t for t in text]


def literal_text(template: str) -> str:
    return " ".join(" ".join(literals(template)).split())


def usable(template: str) -> bool:
    """A template worth keeping: some words a reader and a matcher can hold on to."""
    text = literal_text(template)
    words = re.findall(r"[A-Za-z]{3,}", text)
    return len(text) >= 12 and len(words) >= 2


def clean(template: str) -> str:
    """One line per message as printed (trailing newlines and padding dropped)."""
    template = template.replace("\r", "")
    template = template.strip("\n").rstrip()
    template = re.sub(r"^\s+", "", template)
    return template


def merge(found: Iterable[Found], order: Sequence[str]) -> list[Message]:
    """Messages of one project: the same call site at several releases is one message
    with one wording per distinct text (a wording that changed between releases is kept
    beside the old one when they are alike and never printed by the same release)."""
    by_site: dict[tuple[str, str, str, str], list[Message]] = {}
    rank = {v: i for i, v in enumerate(order)}
    items = sorted(found, key=lambda f: (rank.get(f.version, 0), f.source, f.template))
    for item in items:
        base = item.source.rsplit("/", 1)[-1]
        key = (base, item.level, item.kind, item.exception)
        messages = by_site.setdefault(key, [])
        exact = next((m for m in messages if item.template in m.wordings), None)
        if exact is None:
            exact = _similar(messages, item)
        if exact is None:
            exact = Message(item.emitter, item.level, item.kind, item.source, item.reason, item.exception, item.said)
            messages.append(exact)
        versions = exact.wordings.setdefault(item.template, [])
        if item.version not in versions:
            versions.append(item.version)
        exact.source = item.source
        if item.reason and not exact.reason:
            exact.reason = item.reason
    return [m for ms in by_site.values() for m in ms]


def _similar(messages: list[Message], item: Found) -> Message | None:
    text = literal_text(item.template)
    best: tuple[float, Message | None] = (0.0, None)
    for message in messages:
        if item.reason and message.reason and item.reason != message.reason:
            continue
        if any(item.version in vs for vs in message.wordings.values()):
            continue
        last = list(message.wordings)[-1]
        ratio = difflib.SequenceMatcher(None, literal_text(last), text, autojunk=False).ratio()
        if ratio > best[0]:
            best = (ratio, message)
    return best[1] if best[0] >= 0.8 else None


def ranges(versions: Sequence[str], order: Sequence[str]) -> str:
    """`a-b, c` over the releases read: consecutive reads are one range."""
    index = {v: i for i, v in enumerate(order)}
    picked = sorted({index[v] for v in versions if v in index})
    spans: list[tuple[int, int]] = []
    for i in picked:
        if spans and spans[-1][1] == i - 1:
            spans[-1] = (spans[-1][0], i)
        else:
            spans.append((i, i))
    return ", ".join(order[a] if a == b else f"{order[a]}-{order[b]}" for a, b in spans)


def slug(text: str, words: int = 7) -> str:
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    return "-".join(tokens[:words]) or "message"

"""JSON values and YAML documents inside a paste -> Kubernetes or Ray job parts.

JSON: `json.JSONDecoder.raw_decode` reads one value from the candidate line
and says where it ends; a value that fails to parse, or that is neither a
Kubernetes object nor Ray job info, stays log text.

YAML: a document starts at a column-0 `apiVersion:`/`kind:` line (or a `---`
before one) and runs while lines look like Kubernetes YAML (indented, `- `
items, comments, or a column-0 key an object can have); it ends at the next
`---`, so multi-document YAML is read one document at a time. It is parsed
with PyYAML's SafeLoader (the libyaml one when available). If a trailing line
broke the document, it is parsed once more without that line and what
follows, which is then scanned again.

Both detectors tell the segmenter where they stopped reading on a miss, so
every byte is parsed a bounded number of times whatever the paste holds.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from bot.core.inputs import InputPart, yamltext
from bot.core.inputs.alerts import alert_parts
from bot.core.inputs.blocks import Block, Line, Miss, block_end, lines_from
from bot.core.inputs.clusterstatus import cluster_status_parts
from bot.core.inputs.kubeobjects import kube_parts
from bot.core.inputs.rayjob import ray_job_parts
from bot.core.inputs.raystate import state_parts

log = logging.getLogger(__name__)

# What a line must look like for the JSON detector to try it: a lone `{`, `[` or
# `[{` (pretty-printed JSON, as kubectl prints it), or a `{`/`[` line that names a
# key Kubernetes or Ray job JSON starts with. JSON-lines logs and `[2025-11-03 …]`
# log lines are not even tried.
JSON_START = (
    r"[ \t]*(?:(?:\{|\[[ \t]*\{?)[ \t]*\r?$"
    r'|[\[{][^\n]*?"(?:apiVersion|kind|metadata|items|job_id|submission_id|status|actor_id|task_id'
    r'|node_id|availableWorkerReplicas|desiredWorkerReplicas|conditions)"[ \t]*:)'
)
YAML_START = r"(?:---|apiVersion:|kind:)"

_DECODER = json.JSONDecoder()
_FIRST_WINDOW = 64 << 10
# A document is parsed at most twice: whole, then without the line that broke it.
_YAML_ATTEMPTS = 2

_OBJECT_START = re.compile(r"^(?:apiVersion|kind):")
_OBJECT_KEYS = frozenset({"apiVersion", "kind"})
_SEPARATOR = re.compile(r"^(?:---|\.\.\.)(?:[ \t].*)?$")
_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9]*):(?:[ \t]|$)")
# Keys a Kubernetes object (Pods, Events of both APIs, Lists, CRs …) or a pitcrew Signal
# has at column 0.
TOP_KEYS = frozenset(
    {
        "apiVersion",
        "kind",
        "metadata",
        "spec",
        "status",
        "items",
        "data",
        "stringData",
        "binaryData",
        "immutable",
        "type",
        "reason",
        "message",
        "note",
        "action",
        "involvedObject",
        "regarding",
        "related",
        "source",
        "count",
        "series",
        "firstTimestamp",
        "lastTimestamp",
        "eventTime",
        "reportingComponent",
        "reportingController",
        "reportingInstance",
        "deprecatedSource",
        "deprecatedCount",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        # pitcrew's own Signal objects (bot/core/inputs/signals.py)
        "text",
        "fields",
        "object",
        "workload",
        "cluster",
    }
)


def structured_parts(data: Any, origin: str) -> tuple[InputPart, ...] | None:
    """Parts of parsed data that is Kubernetes objects or Ray job info; None otherwise."""
    for reader in _STRUCTURED_READERS:
        parts = reader(data, origin)
        if parts is not None:
            return parts
    return None


_STRUCTURED_READERS = (kube_parts, ray_job_parts, state_parts, cluster_status_parts, alert_parts)


# -- JSON ---------------------------------------------------------------------------


def json_block(text: str, start: int, origin: str) -> Block | Miss:
    """A JSON value starting on the line at `start`, if it is an object pitcrew knows."""
    begin = start
    while begin < len(text) and text[begin] in " \t":
        begin += 1
    try:
        data, end = _decode(text, begin)
    except _NotJsonError as miss:
        log.debug("%s: no JSON value at offset %d", origin, begin)
        return Miss(max(miss.at, start + 1))
    except RecursionError:
        log.debug("%s: JSON nested too deeply at offset %d; no more JSON here", origin, begin)
        return Miss(len(text))
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    if text[end:line_end].strip():
        return Miss(end)  # more text follows the value on its line: a log line
    parts = structured_parts(data, origin)
    if parts is None:
        return Miss(end)
    return Block(min(line_end + 1, len(text)), parts)


class _NotJsonError(Exception):
    """No JSON value here; JSON cannot start again before offset `at`."""

    def __init__(self, at: int) -> None:
        super().__init__(at)
        self.at = at


def _decode(text: str, begin: int) -> tuple[Any, int]:
    """(value, end offset) of the JSON value at `begin`.

    The decoder sees a growing window of the text, starting with the first line:
    a failing `raw_decode` costs time in proportion to what it was given (its
    error counts lines from the start), so handing it the whole paste at every
    candidate line of a JSON-lines log would be quadratic. An error before the
    window's last line is a real one; an error on it may be the window's cut,
    and the window grows fourfold.
    """
    first_line_end = text.find("\n", begin)
    size = (len(text) if first_line_end == -1 else first_line_end + 1) - begin
    while True:
        end = min(len(text), begin + size)
        window = text[begin:end]
        try:
            value, stop = _DECODER.raw_decode(window)
        except json.JSONDecodeError as error:
            if end == len(text) or "\n" in window[error.pos :]:
                raise _NotJsonError(begin + error.pos) from None
            size = max(size * 4, _FIRST_WINDOW)
            continue
        return value, begin + stop


# -- YAML ---------------------------------------------------------------------------


def yaml_block(text: str, start: int, origin: str) -> Block | Miss:
    """One YAML document starting at `start` (an object line or a `---` before one)."""
    lines = _document_lines(text, start)
    if not lines:
        return Miss(start + 1)
    resume = block_end(lines[-1], text)
    for _ in range(_YAML_ATTEMPTS):
        try:
            data = yamltext.load(text[lines[0].start : lines[-1].end])
        except yamltext.YamlTextError as error:
            lines = _before_error(lines, error)
            if not lines:
                break
            continue
        parts = structured_parts(data, origin)
        if parts is None:
            break
        return Block(block_end(lines[-1], text), parts)
    return Miss(resume)


def _document_lines(text: str, start: int) -> list[Line]:
    """The lines of the Kubernetes-looking document at `start` (leading `---` included,
    trailing blanks not), or none when it cannot be a Kubernetes object."""
    reader = lines_from(text, start)
    first = next(reader, None)
    if first is None:
        return []
    lines = [first]
    keys: set[str] = set()
    if _SEPARATOR.match(first.text):
        following = _next_content_line(text, first.next)
        if following is None or not _OBJECT_START.match(following.text):
            return []
    else:
        keys.add(_column0_key(first))
    for line in reader:
        if _SEPARATOR.match(line.text) or not _yamlish(line):
            break
        key = _column0_key(line)
        if key in keys and key in _OBJECT_KEYS:
            break  # a second object pasted right after the first, without `---`
        keys.add(key)
        lines.append(line)
    while lines and lines[-1].blank:
        lines.pop()
    return lines if "kind" in keys and keys & {"apiVersion", "metadata"} else []


def _column0_key(line: Line) -> str:
    key = _TOP_KEY.match(line.text)
    return key["key"] if key else ""


def _next_content_line(text: str, start: int) -> Line | None:
    """The first line from `start` that is neither blank nor a comment."""
    for line in lines_from(text, start):
        if not line.blank and not line.text.lstrip().startswith("#"):
            return line
    return None


def _yamlish(line: Line) -> bool:
    """Could this line belong to a Kubernetes YAML document?"""
    if line.blank or line.indented:
        return True
    if line.text.startswith(("- ", "#")) or line.text == "-":
        return True
    key = _TOP_KEY.match(line.text)
    return key is not None and key["key"] in TOP_KEYS


def _before_error(lines: list[Line], error: yamltext.YamlTextError) -> list[Line]:
    """The lines before the one the error points at (none when that is the first).

    The problem mark names the offending line; when it points past the end (an
    unfinished key or value), the context mark says where that construct began.
    """
    at = error.problem_line
    if at is None or at >= len(lines):
        at = error.context_line
    kept = lines[: at if at is not None and 0 < at < len(lines) else 0]
    while kept and kept[-1].blank:
        kept.pop()
    return kept

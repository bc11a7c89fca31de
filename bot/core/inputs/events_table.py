"""`kubectl get events` tables -> Event objects -> `k8s_event` signals.

Handles the default columns (`LAST SEEN TYPE REASON OBJECT MESSAGE`), `-A`
(a leading NAMESPACE column), `-o wide` (SUBOBJECT, SOURCE, and FIRST SEEN,
COUNT, NAME after MESSAGE) and the old layout with separate NAME and KIND
columns. The table ends at the first line that is not an event row. Without
a NAMESPACE column, the namespace comes from a `kubectl get events -n NS`
command line pasted just above the table, when there is one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bot.core.inputs.blocks import Block, Line, Miss, block_end, lines_from
from bot.core.inputs.events import event_signal
from bot.core.inputs.object_refs import canonical_kind
from bot.core.inputs.tables import Columns

HEADER_START = r"(?:NAMESPACE[ \t]+)?LAST SEEN[ \t]"
_REQUIRED = ("TYPE", "REASON", "MESSAGE")
_TYPE = re.compile(r"^[A-Z][A-Za-z]*$")
# The command line a table was pasted with, when it names the namespace.
_COMMAND = re.compile(r"\bkubectl\b.*\bget\s+(?:events?|ev)\b")
_NAMESPACE_FLAG = re.compile(
    r"(?:^|\s)(?:-n|--namespace)(?:=|\s+)(?P<namespace>[a-z0-9][-a-z0-9]*)"
)


def events_table_block(text: str, start: int, origin: str) -> Block | Miss:
    """The events table whose header is the line at `start`."""
    lines = lines_from(text, start)
    header = next(lines, None)
    if header is None:
        return Miss(start + 1)
    columns = Columns.from_header(header.text)
    if not all(name in columns for name in _REQUIRED) or not (
        "OBJECT" in columns or "NAME" in columns
    ):
        return Miss(start + 1)
    last: Line = header
    events: list[dict[str, Any]] = []
    namespace = _command_namespace(text, start)
    for line in lines:
        event = _event(columns.split(line.text), namespace)
        if event is None:
            break
        events.append(event)
        last = line
    parts = tuple(event_signal(event, origin) for event in events)
    return Block(block_end(last, text), parts)


def _command_namespace(text: str, start: int) -> str:
    """The namespace of a `kubectl get events -n NS` line just above the table, if any."""
    if start == 0:
        return ""
    previous = text[text.rfind("\n", 0, start - 1) + 1 : start - 1]
    if not _COMMAND.search(previous):
        return ""
    flag = _NAMESPACE_FLAG.search(previous)
    return flag["namespace"] if flag else ""


def _event(cells: Mapping[str, str] | None, namespace: str = "") -> dict[str, Any] | None:
    """The core/v1 Event a row describes, or None when the row is not an event."""
    if cells is None:
        return None
    kind, name = _involved(cells)
    event_type, reason = cells.get("TYPE", ""), cells.get("REASON", "")
    if not name or not _TYPE.match(event_type) or not reason or " " in reason:
        return None
    namespace = cells.get("NAMESPACE", "") or namespace
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": namespace},
        "type": event_type,
        "reason": reason,
        "message": cells.get("MESSAGE", ""),
        "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
    }
    if cells.get("COUNT"):
        event["count"] = cells["COUNT"]
    return event


def _involved(cells: Mapping[str, str]) -> tuple[str, str]:
    """(kind, name) of the object an event row is about."""
    target = cells.get("OBJECT", "")
    if target:
        kind, slash, name = target.partition("/")
        return (canonical_kind(kind), name) if slash else ("", "")
    kind = cells.get("KIND", "")
    return (canonical_kind(kind) if kind else "", cells.get("NAME", ""))

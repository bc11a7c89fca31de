"""Event rows pasted without their table header -> core/v1 Events -> `k8s_event` signals.

People paste the lines that matter and drop the header: rows of `kubectl get
events` / `kubectl events` (`4m11s  Warning  Evicted  pod/egg-1  The node was
low on resource: memory.`, with a leading NAMESPACE column under `-A`, and
names a reporter redacted as `pod/egg-<id here>`), rows
of a describe's Events section (`Warning  Unhealthy  27m (x476 over 72m)
kubelet  Readiness probe failed:`) and kubectl ≤ 1.13's tab-separated rows.
Consecutive rows of one of these shapes are one block; each row becomes the Event
the API would have returned, so event signatures (reasons, counts) apply to them as to a full table.
"""

from __future__ import annotations

import re
from typing import Any

from bot.core.inputs.blocks import Block, Line, Miss, block_end, lines_from
from bot.core.inputs.events import event_signal
from bot.core.inputs.object_refs import canonical_kind

_AGE = r"(?:\d+[smhd][\dsmhd]*|<unknown>|<invalid>)"
_REASON = r"[A-Z][A-Za-z]+"
# `kubectl get events` / `kubectl events`: [NAMESPACE] LAST SEEN TYPE REASON OBJECT MESSAGE
_GET_ROW = re.compile(
    rf"^(?:(?P<namespace>[a-z0-9][-a-z0-9]*)\s+)?(?P<age>{_AGE})\s+(?P<type>Normal|Warning)"
    rf"\s+(?P<reason>{_REASON})\s+(?P<kind>[a-z][a-z.]*)/(?P<name>(?:[^\s<]|<[^>\n]*>)+)"
    r"\s+(?P<message>\S.*)$"
)
# A describe's Events rows: TYPE REASON AGE FROM MESSAGE, indented.
_DESCRIBE_ROW = re.compile(
    rf"^[ \t]+(?P<type>Normal|Warning)\s+(?P<reason>{_REASON})\s+(?P<age>{_AGE})"
    r"(?:\s+\(x(?P<count>\d+) over [^)]*\))?\s+(?P<source>[a-z][-a-z0-9]*(?:, [-\w.]+)?)"
    r"\s+(?P<message>\S.*)$"
)
# kubectl ≤ 1.13's tab-separated rows: FIRSTSEEN LASTSEEN COUNT NAME KIND SUBOBJECT TYPE
# REASON SOURCE (`{component host}`) MESSAGE. A row cut before its COUNT stays log text.
_TAB_ROW = re.compile(
    r"^[^\t\n]+\t[^\t\n]+\t(?P<count>\d+)\t(?P<name>[^\t\n]+)\t(?P<tab_kind>[A-Z][A-Za-z]+)\t[^\t\n]*\t"
    rf"(?P<type>Normal|Warning)\t+(?P<reason>{_REASON})\t+"
    r"(?P<source_braced>\{[^}\t\n]*\})\t+(?P<message>[^\t\n]+)$"
)
ROWS_START = (
    rf"(?:[a-z0-9][-a-z0-9]*[ \t]+)?{_AGE}[ \t]+(?:Normal|Warning)[ \t]+{_REASON}[ \t]+"
    r"[a-z][a-z.]*/"
    rf"|[ \t]+(?:Normal|Warning)[ \t]+{_REASON}[ \t]+{_AGE}[ \t]"
    r"|[^\t\n]+\t[^\t\n]+\t\d+\t"
)


def event_rows_block(text: str, start: int, origin: str) -> Block | Miss:
    """The header-less event rows starting at the line at `start`."""
    last: Line | None = None
    events: list[dict[str, Any]] = []
    for line in lines_from(text, start):
        event = _event(line.text.rstrip())
        if event is None:
            break
        events.append(event)
        last = line
    if last is None:
        return Miss(start + 1)
    return Block(block_end(last, text), tuple(event_signal(e, origin) for e in events))


def _event(row: str) -> dict[str, Any] | None:
    match = _GET_ROW.match(row) or _DESCRIBE_ROW.match(row) or _TAB_ROW.match(row)
    if match is None:
        return None
    cells = match.groupdict()
    if cells.get("source_braced"):
        cells["source"] = cells["source_braced"].strip("{}").split(" ")[0]
        cells["kind"] = cells["tab_kind"].lower()
    namespace = cells.get("namespace") or ""
    kind = cells.get("kind")
    involved = {"namespace": namespace}
    if kind:
        involved.update(kind=canonical_kind(kind), name=cells["name"])
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": namespace},
        "type": cells["type"],
        "reason": cells["reason"],
        "message": cells["message"],
        "count": cells.get("count") or "1",
        "involvedObject": involved,
    }
    if cells.get("source"):
        event["source"] = {"component": cells["source"]}
    return event

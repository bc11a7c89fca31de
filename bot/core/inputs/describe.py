"""`kubectl describe` output -> the object it shows (Pod, Node, RayJob, RayCluster) and its Events.

The text is rebuilt into the same object shapes the API returns (a Pod with
`status.containerStatuses[].state|lastState`, `spec.containers[].resources`,
conditions; a Node with taints and conditions; a custom resource with its
`status`), then turned into signals by `kubeobjects`, so a describe paste
gives exactly the signals the live object would. The Events table becomes
core/v1 Events about the described object.

A describe block starts at `Name:` followed by another describe key, and runs
over indented lines and column-0 `Key:` lines. A multi-line value that kubectl
printed at column 0 (a long termination message, a RayJob's runtimeEnvYAML)
does not end it when a describe key follows within a few lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.core.inputs import InputPart, LogText
from bot.core.inputs.blocks import Block, Line, Miss, block_end, lines_from
from bot.core.inputs.kubeobjects import object_parts
from bot.core.inputs.object_refs import canonical_kind
from bot.core.inputs.tables import Columns, is_rule
from bot.core.inputs.values import as_text

# `Name:` and, on the next line, a key kubectl prints second (pods, nodes, custom
# resources, cluster-scoped objects): checked by the regex engine, not in Python.
DESCRIBE_START = (
    r"Name:[ \t][^\n]*\n(?:Namespace|Roles|Labels|Annotations|Kind|API Version|Priority"
    r"|Status|CreationTimestamp):"
    # a node's resources pasted alone: Capacity, then its resource lines
    r"|Capacity:[ \t]*\n[ \t]+[\w./-]+:"
)

# Column-0 keys of `kubectl describe` for pods, nodes, jobs and custom resources.
KNOWN_KEYS = frozenset(
    {
        "Name", "Namespace", "Priority", "Priority Class Name", "Runtime Class Name",
        "Service Account", "Node", "Start Time", "Labels", "Annotations", "Status", "Reason",
        "Message", "SeccompProfile", "AppArmor Profile", "IP", "IPs", "Controlled By",
        "NominatedNodeName", "Init Containers", "Containers", "Ephemeral Containers",
        "Readiness Gates", "Conditions", "Volumes", "QoS Class", "Node-Selectors",
        "Tolerations", "Topology Spread Constraints", "Scheduling Gates", "Events",
        "Roles", "CreationTimestamp", "Taints", "Unschedulable", "Lease", "Addresses",
        "Capacity", "Allocatable", "System Info", "PodCIDR", "PodCIDRs", "ProviderID",
        "Non-terminated Pods", "Allocated resources", "API Version", "Kind", "Metadata",
        "Spec", "Selector", "Pod Template", "Replicas", "Parallelism", "Completions",
    }
)  # fmt: skip
# Keys only a pod's describe prints: a pod excerpt cut before `Containers:` still is a pod.
_POD_KEYS = frozenset({"Start Time", "IP", "IPs", "QoS Class", "Controlled By", "Service Account"})
# Keys after which a describe block may resume past column-0 lines of a multi-line value.
_RESUME_KEYS = KNOWN_KEYS - {"Name"}
_RESYNC_LINES = 200

_KNOWN_KEY = re.compile(r"^(?P<key>[^:\s][^:]*):(?:[ \t]+(?P<value>.*?))?[ \t]*$")
# An unknown key still looks like describe output: capitalised words, then a colon
# and either nothing or a tab-aligned value (two or more spaces).
_LOOSE_KEY = re.compile(r"^(?P<key>[A-Z][\w./-]*(?: [\w./-]+)*):(?:[ \t]{2,}(?P<value>\S.*?))?\s*$")
# An indented describe field: Title Case words, a colon, then a tab-aligned value or nothing.
_INDENTED_KEY = re.compile(
    r"^[ \t]+[A-Z][A-Za-z0-9-]*(?: [A-Z][A-Za-z0-9-]*)*:(?:[ \t]{2,}\S|[ \t]*$)"
)
_NEXT_OBJECT = re.compile(r"^Name:[ \t]")
_TREE_KEY = re.compile(r"^(?P<key>[^:\s][^:]*?):(?:[ \t]+(?P<value>.*?))?[ \t]*$")
_REPEAT = re.compile(r"\(x(?P<count>\d+) over [^)]*\)")


@dataclass
class Section:
    """A column-0 `Key: value` line and the indented lines under it."""

    key: str
    value: str
    body: list[str] = field(default_factory=list)


@dataclass
class _Node:
    """A `Key: value` line inside a section, with what is indented under it."""

    key: str
    value: str
    indent: int
    children: list[_Node] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    def child(self, key: str) -> _Node | None:
        return next((c for c in self.children if c.key == key), None)

    def text(self, key: str) -> str:
        found = self.child(key)
        return found.full_value if found else ""

    @property
    def full_value(self) -> str:
        return as_text("\n".join([self.value, *self.extra]).strip())


# -- finding the block -------------------------------------------------------------


def describe_block(text: str, start: int, origin: str) -> Block | Miss:
    """The `kubectl describe` output starting with the `Name:` line at `start`."""
    lines = _block_lines(text, start)
    if not lines:
        return Miss(start + 1)
    sections = _sections(lines)
    return Block(block_end(lines[-1], text), tuple(_parts(sections, origin)))


def _block_lines(text: str, start: int) -> list[Line]:
    reader = lines_from(text, start)
    first = next(reader, None)
    second = next(reader, None)
    if first is None or second is None:
        return []
    resources = first.text.startswith("Capacity:") and second.indented
    if not resources and _top_key(second.text, strict=True, keys=_RESUME_KEYS) is None:
        return []
    lines = [first, second]
    pending: list[Line] = []
    for line in reader:
        if _NEXT_OBJECT.match(line.text):
            break  # the next object of a `kubectl describe pods` listing
        if pending:
            if len(pending) >= _RESYNC_LINES:
                break
            if _resumes(line):
                lines.extend(pending)
                lines.append(line)
                pending = []
            else:
                pending.append(line)
        elif line.indented or _top_key(line.text) is not None:
            lines.append(line)  # whitespace-only lines are indented output too
        elif line.blank:
            break
        else:
            pending.append(line)
    return lines


def _resumes(line: Line) -> bool:
    """After column-0 lines of a multi-line value: is this describe output again?"""
    if line.indented:
        return _INDENTED_KEY.match(line.text) is not None
    return _top_key(line.text, strict=True, keys=_RESUME_KEYS) is not None


def _top_key(
    line: str, strict: bool = False, keys: frozenset[str] = KNOWN_KEYS
) -> tuple[str, str] | None:
    """(key, value) of a column-0 describe line, or None."""
    known = _KNOWN_KEY.match(line)
    if known and known["key"] in keys:
        return known["key"], known["value"] or ""
    loose = None if strict else _LOOSE_KEY.match(line)
    if loose:
        return loose["key"], loose["value"] or ""
    return None


def _sections(lines: list[Line]) -> list[Section]:
    sections: list[Section] = []
    for line in lines:
        key = None if line.indented else _top_key(line.text)
        if key is not None:
            sections.append(Section(*key))
        elif sections:
            sections[-1].body.append(line.text)
    return sections


# -- sections -> objects -----------------------------------------------------------


def _parts(sections: list[Section], origin: str) -> Iterator[InputPart]:
    top: dict[str, Section] = {}
    for section in sections:
        top.setdefault(section.key, section)
    kind = _kind(top)
    metadata = _metadata(top)
    involved = {"kind": kind, "name": metadata["name"], "namespace": metadata["namespace"]}
    events = _events(top.get("Events"), involved)
    obj = _object(kind, top, metadata, events)
    if obj is not None:
        yield from object_parts(obj, origin)
    for event in events:
        yield from object_parts(event, origin)
    unread = _unread_rows(top.get("Events"))
    if unread:  # a layout the table reader does not know: its lines are still read
        where = f"{origin} (describe Events)" if origin else "describe Events"
        yield LogText([("\n".join(unread) + "\n").encode("utf-8")], origin=where)


def _kind(top: Mapping[str, Section]) -> str:
    if "Kind" in top:
        return canonical_kind(top["Kind"].value)
    if "Containers" in top or len(_POD_KEYS & top.keys()) >= 2:
        return "Pod"
    if "Roles" in top or "Taints" in top or "System Info" in top or "Allocatable" in top:
        return "Node"
    return ""


def _metadata(top: Mapping[str, Section]) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": _value(top, "Name"),
        "namespace": _value(top, "Namespace"),
        "labels": _labels(top.get("Labels")),
    }
    owner = _value(top, "Controlled By")
    owner_kind, slash, owner_name = owner.partition("/")
    if slash and owner_name:
        metadata["ownerReferences"] = [{"kind": owner_kind, "name": owner_name, "controller": True}]
    return metadata


def _value(top: Mapping[str, Section], key: str) -> str:
    section = top.get(key)
    return as_text(section.value) if section else ""


def _labels(section: Section | None) -> dict[str, str]:
    if section is None:
        return {}
    labels: dict[str, str] = {}
    for entry in [section.value, *section.body]:
        key, equals, value = entry.strip().partition("=")
        if equals and key:
            labels[key] = value
    return labels


def _object(
    kind: str, top: Mapping[str, Section], metadata: dict[str, Any], events: list[dict[str, Any]]
) -> dict[str, Any] | None:
    if kind == "Pod":
        return _pod(top, metadata, events)
    if kind == "Node":
        return _node(top, metadata)
    if kind and "Status" in top:
        status = _data(_tree(top["Status"].body))
        return {"kind": kind, "metadata": metadata, "status": status}
    return None


# -- Pod -----------------------------------------------------------------------------


def _pod(
    top: Mapping[str, Section], metadata: dict[str, Any], events: list[dict[str, Any]]
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": _value(top, "Node").partition("/")[0]}
    status: dict[str, Any] = {
        "phase": _value(top, "Status").split(" ", 1)[0],
        "reason": _value(top, "Reason"),
        "message": _value(top, "Message"),
        "conditions": _pod_conditions(top, events),
    }
    for section_key, spec_key, status_key in (
        ("Init Containers", "initContainers", "initContainerStatuses"),
        ("Containers", "containers", "containerStatuses"),
    ):
        section = top.get(section_key)
        nodes = _tree(section.body) if section else []
        spec[spec_key] = [_container_spec(node) for node in nodes]
        status[status_key] = [_container_status(node) for node in nodes]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def _container_spec(node: _Node) -> dict[str, Any]:
    resources = {
        kind: {child.key: child.full_value for child in section.children}
        for kind, section in (
            ("limits", node.child("Limits")),
            ("requests", node.child("Requests")),
        )
        if section is not None
    }
    return {"name": node.key, "resources": resources}


def _container_status(node: _Node) -> dict[str, Any]:
    status: dict[str, Any] = {"name": node.key, "restartCount": node.text("Restart Count")}
    for key, target in (("State", "state"), ("Last State", "lastState")):
        state = node.child(key)
        if state is not None:
            status[target] = _state(state)
    return status


def _state(node: _Node) -> dict[str, Any]:
    """`State: Terminated` + `Reason:`, `Exit Code:` … -> {"terminated": {...}}."""
    name = node.value.strip().lower()
    if name == "terminated":
        return {
            "terminated": {
                "reason": node.text("Reason"),
                "exitCode": node.text("Exit Code"),
                "signal": node.text("Signal"),
                "message": node.text("Message"),
                "startedAt": node.text("Started"),
                "finishedAt": node.text("Finished"),
            }
        }
    if name == "waiting":
        return {"waiting": {"reason": node.text("Reason"), "message": node.text("Message")}}
    if name == "running":
        return {"running": {"startedAt": node.text("Started")}}
    return {}


def _pod_conditions(
    top: Mapping[str, Section], events: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """Pod conditions; describe shows no reason, so PodScheduled=False gets the API's
    (`Unschedulable`, or `SchedulingGated` for a gated pod) and the last FailedScheduling
    event's message."""
    conditions = _table(top.get("Conditions"))
    for condition in conditions:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            condition.setdefault("reason", "SchedulingGated" if _gated(top) else "Unschedulable")
            failed = [e for e in events if e.get("reason") == "FailedScheduling"]
            if failed and not condition.get("message"):
                condition["message"] = failed[-1].get("message", "")
    return conditions


def _gated(top: Mapping[str, Section]) -> bool:
    gates = top.get("Scheduling Gates")
    return gates is not None and bool(
        as_text(gates.value) or any(as_text(line) for line in gates.body)
    )


# -- Node ----------------------------------------------------------------------------


def _node(top: Mapping[str, Section], metadata: dict[str, Any]) -> dict[str, Any]:
    taints = []
    section = top.get("Taints")
    for entry in [section.value, *section.body] if section else []:
        taint = _taint(entry.strip())
        if taint:
            taints.append(taint)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": {"taints": taints},
        "status": {
            "conditions": _table(top.get("Conditions")),
            "capacity": _resources(top.get("Capacity")),
            "allocatable": _resources(top.get("Allocatable")),
        },
    }


def _resources(section: Section | None) -> dict[str, str]:
    """`  nvidia.com/gpu:  8` lines -> {"nvidia.com/gpu": "8"} (a comment after the value,
    as people mark a line, is left out)."""
    found: dict[str, str] = {}
    for line in section.body if section else []:
        key, colon, value = line.strip().partition(":")
        if colon and key and value.split():
            found[key] = value.split()[0]
    return found


def _taint(entry: str) -> dict[str, str] | None:
    """`nvidia.com/gpu=present:NoSchedule` -> key, value, effect."""
    if not entry or entry.startswith("<"):
        return None
    target, colon, effect = entry.rpartition(":")
    if not colon:
        return None
    key, _, value = target.partition("=")
    return {"key": key, "value": value, "effect": effect}


# -- tables and trees ----------------------------------------------------------------


def _table(section: Section | None) -> list[dict[str, str]]:
    """Rows of a describe table (Conditions), keyed by the API's lower-camel field names."""
    rows = [line for line in section.body if line.strip()] if section else []
    if not rows:
        return []
    columns = Columns.from_header(rows[0])
    keys = [_camel(name) for name in columns.names]
    found: list[dict[str, str]] = []
    for line in rows[1:]:
        if is_rule(line):
            continue
        cells = columns.split(line)
        if cells is None:
            break
        found.append({key: cells[name] for key, name in zip(keys, columns.names, strict=True)})
    return found


def _unread_rows(section: Section | None) -> list[str]:
    """The rows of a describe table that its header's columns do not split (an old
    kubectl's tab-separated Events with empty cells): kept as text, never dropped."""
    rows = [line for line in section.body if line.strip()] if section else []
    if len(rows) < 2:
        return []
    columns = Columns.from_header(rows[0])
    return [line for line in rows[1:] if not is_rule(line) and columns.split(line) is None]


def _events(section: Section | None, involved: Mapping[str, str]) -> list[dict[str, Any]]:
    """The Events table as core/v1 Events about the described object."""
    events: list[dict[str, Any]] = []
    for row in _table(section):
        reason = row.get("reason", "")
        if not reason:
            continue
        repeat = _REPEAT.search(row.get("age", "") or row.get("lastSeen", ""))
        count = repeat["count"] if repeat else row.get("count", "") or "1"
        events.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"namespace": involved["namespace"]},
                "type": row.get("type", ""),
                "reason": reason,
                "message": row.get("message", ""),
                "count": count,
                "source": {"component": row.get("from", "")},
                "involvedObject": dict(involved),
            }
        )
    return events


def _tree(lines: list[str]) -> list[_Node]:
    """Indented `Key: value` lines as a tree; other lines, and lines left of the first
    one (a multi-line value kubectl printed from column 0), continue the value above."""
    roots: list[_Node] = []
    stack: list[_Node] = []
    base: int | None = None
    for raw in lines:
        content = raw.strip()
        if not content:
            continue
        indent = len(raw) - len(raw.lstrip())
        base = indent if base is None else base
        match = _TREE_KEY.match(content) if indent >= base else None
        if match is None:
            if stack:
                stack[-1].extra.append(content)
            continue
        while stack and stack[-1].indent >= indent:
            stack.pop()
        node = _Node(match["key"], match["value"] or "", indent)
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
    return roots


def _data(nodes: list[_Node]) -> Any:
    """A custom resource's describe tree as API data (`Job Deployment Status` ->
    `jobDeploymentStatus`); a key that repeats starts the next item of a list."""
    items: list[dict[str, Any]] = [{}]
    for node in nodes:
        key = _camel(node.key)
        if key in items[-1]:
            items.append({})
        items[-1][key] = _data(node.children) if node.children else node.full_value
    return items[0] if len(items) == 1 else items


def _camel(label: str) -> str:
    """kubectl's `smartLabelFor`, reversed: `Job Deployment Status` -> `jobDeploymentStatus`,
    `API Version` -> `apiVersion`, `Dashboard URL` -> `dashboardURL`."""
    words = label.split()
    if not words:
        return label
    first = words[0]
    first = first.lower() if first.isupper() else first[:1].lower() + first[1:]
    return first + "".join(word[:1].upper() + word[1:] for word in words[1:])

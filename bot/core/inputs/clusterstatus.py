"""A RayCluster's `status` pasted on its own -> the `ray_cluster` signal of that cluster.

People paste what `kubectl get raycluster X -o yaml` printed under `status:`,
or `yq .status` / `-o jsonpath='{.status}'` output without the key, or only
`conditions` (`-o jsonpath='{.status.conditions}'`). Such a fragment has no
`kind`, so it is recognised by what only a KubeRay `ray.io/v1` RayCluster
status has: the worker replica counts and desired resources, or a condition
whose type is one KubeRay sets (`HeadPodReady`, `RayClusterProvisioned`,
`ReplicaFailure`, `RayClusterSuspending`, `RayClusterSuspended`). A status
that is not a RayCluster's (a pod's, a RayJob's) is not claimed and stays
log text for the log signatures.

YAML: the block runs from a `status:` line or a status key at the candidate's
indentation over deeper lines and sibling keys, and is parsed with PyYAML's
safe loader. JSON values are read by `documents` and handed to
`cluster_status_parts`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from typing import Any

from bot.core.inputs import InputPart, yamltext
from bot.core.inputs.blocks import Block, Line, Miss, block_end, lines_from
from bot.core.inputs.kuberay import raycluster_parts
from bot.core.inputs.values import as_list, as_map, text_at

# Keys only a RayCluster status has (ray.io/v1 RayClusterStatus).
CLUSTER_KEYS = frozenset(
    {
        "availableWorkerReplicas",
        "readyWorkerReplicas",
        "desiredWorkerReplicas",
        "minWorkerReplicas",
        "maxWorkerReplicas",
        "desiredCPU",
        "desiredGPU",
        "desiredMemory",
        "desiredTPU",
    }
)
CONDITION_TYPES = frozenset(
    {
        "HeadPodReady",
        "RayClusterProvisioned",
        "ReplicaFailure",
        "RayClusterSuspending",
        "RayClusterSuspended",
    }
)
# Every key of a RayCluster status, so a fragment may start at any of them.
_STATUS_KEYS = (
    *sorted(CLUSTER_KEYS),
    "conditions",
    "endpoints",
    "head",
    "lastUpdateTime",
    "observedGeneration",
    "reason",
    "state",
    "stateTransitionTimes",
)
STATUS_FRAGMENT_START = rf"[ \t]*(?:status|{'|'.join(_STATUS_KEYS)}):"

_SIBLINGS = frozenset(_STATUS_KEYS)
_KEY = re.compile(r"^(?P<indent>[ \t]*)(?P<key>[A-Za-z][A-Za-z0-9]*):(?:[ \t]|$)")
_MAX_LINES = 400


def is_cluster_status(data: Any) -> bool:
    """Is `data` a RayCluster status (or a list of its conditions)?"""
    if isinstance(data, list):
        return bool(data) and all(_is_cluster_condition(item) for item in data)
    if not isinstance(data, Mapping) or "kind" in data or "apiVersion" in data:
        return False
    if set(data) & CLUSTER_KEYS:
        return True
    conditions = as_list(data.get("conditions"))
    return bool(conditions) and any(_is_cluster_condition(item) for item in conditions)


def _is_cluster_condition(item: Any) -> bool:
    return text_at(item, "type") in CONDITION_TYPES and "status" in as_map(item)


def cluster_status_parts(data: Any, origin: str = "") -> tuple[InputPart, ...] | None:
    """The parts of a RayCluster status fragment (`status:` included or not); None if it
    is not one."""
    if isinstance(data, Mapping) and set(data) == {"status"}:
        data = data["status"]
    if not is_cluster_status(data):
        return None
    status = {"conditions": data} if isinstance(data, list) else data
    return raycluster_parts({"kind": "RayCluster", "status": status}, origin)


def cluster_status_block(text: str, start: int, origin: str) -> Block | Miss:
    """A YAML RayCluster status starting on the line at `start`."""
    lines = _fragment_lines(text, start)
    if not lines:
        return Miss(start + 1)
    resume = block_end(lines[-1], text)
    body = textwrap.dedent("\n".join(line.text for line in lines))
    try:
        data = yamltext.load(body)
    except yamltext.YamlTextError:
        return Miss(resume)
    parts = cluster_status_parts(data, origin)
    if parts is None:
        return Miss(resume)
    return Block(resume, parts)


def _fragment_lines(text: str, start: int) -> list[Line]:
    """The first line's key and everything under it, plus sibling status keys (and the
    `- ` items kubectl prints at a list's own indentation)."""
    reader = lines_from(text, start)
    first = next(reader, None)
    key = _KEY.match(first.text) if first else None
    if first is None or key is None:
        return []
    indent = len(key["indent"])
    siblings = frozenset() if key["key"] == "status" else _SIBLINGS
    lines = [first]
    for line in reader:
        if len(lines) >= _MAX_LINES or not _belongs(line, indent, siblings):
            break
        lines.append(line)
    while lines and lines[-1].blank:
        lines.pop()
    return lines


def _belongs(line: Line, indent: int, siblings: frozenset[str]) -> bool:
    if line.blank:
        return True
    depth = len(line.text) - len(line.text.lstrip(" \t"))
    if depth != indent:
        return depth > indent
    if line.text[depth:].startswith("- "):
        return True
    key = _KEY.match(line.text)
    return key is not None and key["key"] in siblings

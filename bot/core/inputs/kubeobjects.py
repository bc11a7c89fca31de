"""Kubernetes objects (parsed JSON/YAML) -> signals, by kind.

Pod, Event (core/v1 and events.k8s.io/v1), Node, Job (a RayJob's
submitter), RayJob, RayCluster, the gang schedulers' PodGroup and Workload
(bot/core/inputs/gangs.py) are understood, and pitcrew's own `Signal`
objects (bot/core/inputs/signals.py);
`List` and `<Kind>List` objects (and JSON arrays) are opened and their items
read, with the item kind implied by the list kind. Other kinds are recognised
as Kubernetes objects, so their text is not scanned as a log, but give no
signals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from bot.core.inputs import InputPart
from bot.core.inputs.events import event_signal
from bot.core.inputs.gangs import gang_signals
from bot.core.inputs.jobs import job_signals
from bot.core.inputs.kuberay import raycluster_parts, rayjob_parts
from bot.core.inputs.nodes import node_signals
from bot.core.inputs.pods import pod_signals
from bot.core.inputs.signals import signal_parts
from bot.core.inputs.values import as_list, as_text

log = logging.getLogger(__name__)

Handler = Callable[[Mapping[str, Any], str], Sequence[InputPart]]

_HANDLERS: dict[str, Handler] = {
    "Pod": pod_signals,
    "Event": lambda event, origin: (event_signal(event, origin),),
    "Node": node_signals,
    "Job": job_signals,
    "RayJob": rayjob_parts,
    "RayCluster": raycluster_parts,
    "Signal": signal_parts,
    "PodGroup": gang_signals,
    "Workload": gang_signals,
}
# Lists hold objects, not other lists; deeper nesting (only possible through YAML
# aliases) is ignored rather than multiplied out.
_MAX_LIST_DEPTH = 1


def is_kube_object(data: Any) -> bool:
    """A mapping with a string `kind` and an `apiVersion` or `metadata`."""
    return (
        isinstance(data, Mapping)
        and isinstance(data.get("kind"), str)
        and ("apiVersion" in data or "metadata" in data)
    )


def kube_parts(data: Any, origin: str = "") -> tuple[InputPart, ...] | None:
    """The parts of an object, a List or an array of objects; None if none is a k8s object."""
    if isinstance(data, list):
        objects = [item for item in data if is_kube_object(item)]
        if not objects:
            return None
        return tuple(part for item in objects for part in object_parts(item, origin))
    if not is_kube_object(data):
        return None
    return tuple(object_parts(data, origin))


def object_parts(
    obj: Mapping[str, Any], origin: str = "", implied_kind: str = "", depth: int = 0
) -> Iterator[InputPart]:
    """The parts of one object (recursing into List items)."""
    kind = as_text(obj.get("kind")) or implied_kind
    if kind == "List" or kind.endswith("List"):
        if depth >= _MAX_LIST_DEPTH:
            return
        item_kind = kind.removesuffix("List")
        for item in as_list(obj.get("items")):
            if isinstance(item, Mapping):
                yield from object_parts(item, origin, item_kind, depth + 1)
        return
    handler = _HANDLERS.get(kind)
    if handler is None:
        log.debug("%s: ignoring a %s object", origin, kind or "kind-less")
        return
    yield from handler(obj, origin)

"""Watched Kubernetes objects -> the signals that are new since the last look, each once.

Why this exists: a watch delivers the same object many times (every status
update, every relist after a 410 Gone or a cut stream, every replay of a watch
that restarts), but the pipeline must see each observed state once: an
OOMKilled `lastState` stays on a pod for hours, and reporting it on every
update would be a storm. So every object's signals are keyed by what they
observe (object uid + state: the container, its termination time and reason,
the event's reason and message …) and only keys the object did not show last
time are reported. Reconciling a relist is then the same operation as a
watch update, which is what makes "relist and reconcile by state" safe.

The conversion itself is `bot.core.inputs` (pods.py, events.py, nodes.py,
kuberay.py): the same signals as pasted objects give. This module only adds
what a live view knows and a pasted object does not: the owning workload
(through `OwnerResolver`) and the relevant spec (`node_selector`).

Memory is bounded: state is kept only for objects that have something to
report, in an LRU of at most `max_objects` uids; strings in objects are cut to
`MAX_TEXT` before conversion.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.owner_resolver import OwnerResolver
from bot.core.incidents.kuberay_retries import FAILED_STATES, attempt_in_progress
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.events import event_signal
from bot.core.inputs.kuberay import raycluster_parts, rayjob_parts
from bot.core.inputs.nodes import node_signals
from bot.core.inputs.object_refs import object_ref
from bot.core.inputs.pods import pod_signals
from bot.core.inputs.values import as_list, as_map, text_at
from bot.core.model import ObjectRef, Signal, SourceKind

MAX_TEXT = 64 * 1024  # KubeRay already cuts a RayJob message to 20,000 characters
WATCHED_KINDS = ("Event", "Pod", "Node", "RayJob", "RayCluster")

# Pod states that are normal life, not failures.
_BENIGN_WAITING = frozenset({"ContainerCreating", "PodInitializing"})
# Fields that change while the observed state does not (a growing back-off, a count).
_VOLATILE_FIELDS = frozenset({"restart_count", "count", "phase", "message"})
# Sources whose own timestamp moves on every update (so it cannot be part of the key).
_UNTIMED_SOURCES = frozenset({SourceKind.K8S_EVENT, SourceKind.RAY_CLUSTER})
_RAY_LABELS = {
    "ray_cluster": "ray.io/cluster",
    "ray_group": "ray.io/group",
    "ray_node_type": "ray.io/node-type",
}


@dataclass(frozen=True, slots=True)
class Keyed:
    """Parts that belong together (a RayJob status and its message as log), under one key."""

    key: str
    parts: tuple[InputPart, ...]

    @property
    def signal(self) -> Signal | None:
        return next((p for p in self.parts if isinstance(p, Signal)), None)


def bounded(value: Any, limit: int = MAX_TEXT) -> Any:
    """A copy of a JSON value with every string cut to `limit` characters."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return value[:limit] + f"… [{len(value) - limit} more characters cut by pitcrew]"
    if isinstance(value, Mapping):
        return {str(k): bounded(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [bounded(v, limit) for v in value]
    return value


def identity(kind: str, obj: Mapping[str, Any]) -> str:
    """The uid, else kind/namespace/name, else a digest of the object itself."""
    metadata = as_map(obj.get("metadata"))
    uid = text_at(metadata, "uid")
    if uid:
        return uid
    name = text_at(metadata, "name")
    if name:
        return f"{kind}/{text_at(metadata, 'namespace')}/{name}"
    digest = hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
    return f"{kind}/?/{digest[:16]}"


_LISTS = {
    "spec": ("containers", "initContainers", "taints", "tolerations"),
    "status": ("containerStatuses", "initContainerStatuses", "conditions"),
}


def problems(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """What is wrong with an object's shape (it is still read as far as it goes)."""
    found: list[str] = []
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        found.append("no metadata")
    elif not text_at(metadata, "name"):
        found.append("no metadata.name")
    if kind == "Event":
        if not isinstance(obj.get("involvedObject") or obj.get("regarding"), Mapping):
            found.append("no involvedObject")
        return found
    for section, keys in _LISTS.items():
        if section in obj and not isinstance(obj[section], Mapping):
            found.append(f"{section} is a {type(obj[section]).__name__}, not an object")
            continue
        part = as_map(obj.get(section))
        for key in keys:
            if key in part and not isinstance(part[key], list):
                found.append(f"{section}.{key} is a {type(part[key]).__name__}, not a list")
    return found


def state_key(signal: Signal) -> str:
    """What a signal observes, without what changes while the state stays the same."""
    if signal.source is SourceKind.K8S_EVENT:
        parts = [str(signal.source), signal.reason, signal.text]
    else:
        fields = sorted((k, v) for k, v in signal.fields.items() if k not in _VOLATILE_FIELDS)
        when = "" if signal.source in _UNTIMED_SOURCES or signal.time is None else signal.time
        parts = [str(signal.source), signal.reason, repr(fields), str(when)]
        if signal.source is SourceKind.RAY_JOB:
            parts.append(signal.text)  # a RayJob's new message is a new observation
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:20]


def worth_reporting(signal: Signal) -> bool:
    """False for states that are normal life: a container that completed with exit 0,
    a container still being created."""
    if signal.source is not SourceKind.POD_STATUS:
        return True
    state = signal.fields.get("state", "")
    if state in ("terminated", "last_terminated"):
        return not (signal.reason == "Completed" and signal.fields.get("exit_code", "0") == "0")
    if state == "waiting":
        return signal.reason not in _BENIGN_WAITING
    return True


class Converter:
    """Turns one watched object into keyed parts, with owners resolved."""

    def __init__(self, resolver: OwnerResolver, cluster: str = "") -> None:
        self.resolver = resolver
        self.cluster = cluster

    def keyed(self, kind: str, obj: Mapping[str, Any]) -> list[Keyed]:
        obj = bounded(obj)
        if kind == "Pod":
            return self._pod(obj)
        if kind == "Event":
            return self._group([self._event(obj)])
        if kind == "Node":
            return self._group(node_signals(obj, origin=_origin("Node", obj)))
        if kind == "RayJob":
            return self._group(rayjob_parts(obj, origin=_origin("RayJob", obj)))
        if kind == "RayCluster":
            self.resolver.note("RayCluster", obj)
            return self._ray_cluster(obj)
        return []

    def _pod(self, pod: Mapping[str, Any]) -> list[Keyed]:
        metadata = as_map(pod.get("metadata"))
        self.resolver.note("Pod", pod)
        workload = self.resolver.workload("Pod", metadata)
        extra = {"node_selector": _selector_text(as_map(pod.get("spec")).get("nodeSelector"))}
        signals = [
            self._enrich(s, workload, extra)
            for s in pod_signals(pod, origin=_origin("Pod", pod))
            if worth_reporting(s)
        ]
        return self._group(signals)

    def _event(self, event: Mapping[str, Any]) -> Signal:
        signal = event_signal(event, origin=_origin("Event", event))
        obj = signal.obj
        if obj is None or not obj.name:
            return self._enrich(signal, signal.workload, {})
        workload = self.resolver.workload_named(obj.kind, obj.namespace, obj.name)
        extra: dict[str, str] = {}
        if obj.kind == "Pod":
            meta = self.resolver.meta("Pod", obj.namespace, obj.name)
            labels = meta.labels if meta is not None else {}
            extra = {field: labels.get(label, "") for field, label in _RAY_LABELS.items()}
        return self._enrich(signal, workload or signal.workload, extra)

    def _ray_cluster(self, cluster: Mapping[str, Any]) -> list[Keyed]:
        metadata = as_map(cluster.get("metadata"))
        workload = self.resolver.workload("RayCluster", metadata)
        parts = raycluster_parts(cluster, origin=_origin("RayCluster", cluster))
        return self._group(
            [self._enrich(p, workload, {}) if isinstance(p, Signal) else p for p in parts]
        )

    def _enrich(
        self, signal: Signal, workload: ObjectRef | None, extra: Mapping[str, str]
    ) -> Signal:
        fields = dict(signal.fields)
        for key, value in extra.items():
            if value and key not in fields:
                fields[key] = value
        return dataclasses.replace(
            signal,
            workload=workload or signal.workload,
            fields=fields,
            cluster=self.cluster or signal.cluster,
        )

    def _group(self, parts: Iterable[InputPart]) -> list[Keyed]:
        """One group per signal, with the log text that follows it (a RayJob message)."""
        groups: list[Keyed] = []
        for part in parts:
            if isinstance(part, Signal):
                groups.append(Keyed(state_key(part), (part,)))
            elif isinstance(part, LogText) and groups:
                last = groups[-1]
                groups[-1] = Keyed(last.key, (*last.parts, _materialize(part)))
        return groups


def _materialize(log: LogText) -> LogText:
    """A log whose chunks can be read more than once (the source may retry an emit)."""
    return dataclasses.replace(log, chunks=tuple(bytes(c) for c in log.chunks))


def _origin(kind: str, obj: Mapping[str, Any]) -> str:
    return str(object_ref(kind, as_map(obj.get("metadata"))))


def _selector_text(selector: Any) -> str:
    items = as_map(selector)
    return ",".join(f"{k}={v}" for k, v in sorted(items.items()) if isinstance(v, str))


class Tracker:
    """Which observed states of which objects were reported: one watch's memory.

    `update` returns the parts whose key the object did not show last time, and
    remembers the keys it shows now (so a state that goes away and comes back is
    reported again). Bounded: the least recently updated objects are forgotten
    first (their current states would then be reported once more)."""

    def __init__(self, max_objects: int = 50_000) -> None:
        self._active: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._max = max_objects
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._active)

    def __contains__(self, uid: object) -> bool:
        return uid in self._active

    def update(self, uid: str, groups: list[Keyed]) -> list[InputPart]:
        previous = self._active.get(uid, frozenset())
        current = frozenset(g.key for g in groups)
        new = [part for g in groups if g.key not in previous for part in g.parts]
        if current:
            self._active[uid] = current
            self._active.move_to_end(uid)
            while len(self._active) > self._max:
                self._active.popitem(last=False)
                self.evicted += 1
        else:
            self._active.pop(uid, None)
        return new

    def forget(self, uid: str) -> None:
        self._active.pop(uid, None)

    def uids(self) -> set[str]:
        return set(self._active)


def containers_to_read(signal: Signal) -> tuple[str, bool] | None:
    """(container, previous) whose log tail is evidence for a pod signal, if any:
    the previous instance after a restart (`lastState.terminated`), the current one
    when it terminated itself."""
    if signal.source is not SourceKind.POD_STATUS:
        return None
    state = signal.fields.get("state", "")
    container = signal.fields.get("container", "")
    if not container:
        return None
    if state == "last_terminated":
        return container, True
    if state == "terminated":
        return container, False
    return None


def health_of(signal: Signal | None) -> tuple[str, ObjectRef | None]:
    """("healthy" | "failed" | "other", the workload that is healthy) of a KubeRay status
    signal: a RayJob running or succeeded; a RayCluster of its own (no RayJob) ready."""
    if signal is None or signal.obj is None:
        return "other", None
    fields = signal.fields
    if signal.source is SourceKind.RAY_JOB:
        deployment, job = fields.get("job_deployment_status", ""), fields.get("job_status", "")
        if deployment in FAILED_STATES or job in ("FAILED", "STOPPED"):
            return "failed", None
        if attempt_in_progress(fields):  # KubeRay's retry of a failed attempt
            return "other", None
        if (deployment == "Running" and job in ("", "PENDING", "RUNNING")) or (
            deployment == "Complete" and job == "SUCCEEDED"
        ):
            return "healthy", signal.obj
        return "other", None
    if signal.source is SourceKind.RAY_CLUSTER:
        state = fields.get("state", "")
        if state == "failed" or (not state and signal.reason):
            return "failed", None
        if state == "ready" and signal.workload in (None, signal.obj):
            return "healthy", signal.obj
    return "other", None


def failed_rayjob(signal: Signal) -> bool:
    return signal.source is SourceKind.RAY_JOB and (
        signal.fields.get("job_deployment_status") in FAILED_STATES
        or signal.fields.get("job_status") == "FAILED"
    )


def submitter_pods(
    pods: Iterable[Mapping[str, Any]], rayjob: str, limit: int = 2
) -> list[Mapping[str, Any]]:
    """The RayJob's submitter pods (its K8s Job has the RayJob's name), newest first."""
    found = []
    for pod in pods:
        metadata = as_map(pod.get("metadata"))
        labels = as_map(metadata.get("labels"))
        job = text_at(labels, "batch.kubernetes.io/job-name") or text_at(labels, "job-name")
        owners = {
            text_at(ref, "name")
            for ref in as_list(metadata.get("ownerReferences"))
            if text_at(ref, "kind") == "Job"
        }
        if job == rayjob or rayjob in owners:
            found.append(pod)
    found.sort(key=lambda p: text_at(p, "metadata", "creationTimestamp"), reverse=True)
    return found[:limit]

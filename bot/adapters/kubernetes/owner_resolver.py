"""Which workload a live object belongs to, following owner references through the API, cached.

Why this exists: incidents and actions are keyed by the owning workload, and a
pod says only who its *direct* owner is. `bot.core.inputs.object_refs.workload_of` reads
what an object says about itself (the `ray.io/cluster` label, the controller
reference, the `pod-template-hash` guess); live, the resolver follows the chain
to the top: Pod → ReplicaSet → Deployment, Pod → Job (→ CronJob, or → RayJob
for a RayJob's submitter), Pod → RayCluster → RayJob.

Owner lookups are cached with a time to live in a bounded LRU, so a storm of
events about 300 pods of one RayCluster costs one lookup, and memory stays
bounded whatever the cluster size. Objects the source watches anyway (pods,
RayClusters, RayJobs) are fed in with `note` so they need no lookup at all.
The fetch function is injected: this module holds no Kubernetes client.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.errors import KubeApiError
from bot.core.inputs.object_refs import (
    RAY_CLUSTER_LABEL,
    WORKLOAD_KINDS,
    canonical_kind,
    workload_of,
)
from bot.core.inputs.values import as_list, as_map, text_at
from bot.core.model import ObjectRef

# (kind, namespace, name) -> the object (only its metadata is read), or None if absent.
Fetch = Callable[[str, str, str], Mapping[str, Any] | None]

# Labels worth keeping about an object: what owner resolution and signals need.
KEPT_LABELS = (
    RAY_CLUSTER_LABEL,
    "ray.io/group",
    "ray.io/node-type",
    "pod-template-hash",
    "batch.kubernetes.io/job-name",
    "job-name",
)
# Kinds whose owner is worth a lookup: they are made by a higher-level controller.
_OWNED_KINDS = frozenset({"Pod", "ReplicaSet", "Job", "RayCluster"})
_MAX_DEPTH = 5
# Most encompassing first (as bot.core.incidents.correlator ranks them).
_TOP_ORDER = ("RayJob", "RayService", "CronJob", "Deployment", "StatefulSet", "DaemonSet", "Job")


@dataclass(frozen=True, slots=True)
class Meta:
    """What the resolver keeps about one object: a few labels and its controller."""

    uid: str
    labels: Mapping[str, str]
    owner: ObjectRef | None
    node: str = ""


def meta_of(kind: str, obj: Mapping[str, Any]) -> Meta:
    metadata = as_map(obj.get("metadata"))
    labels = as_map(metadata.get("labels"))
    kept = {key: text_at(labels, key) for key in KEPT_LABELS if text_at(labels, key)}
    namespace = text_at(metadata, "namespace")
    return Meta(
        uid=text_at(metadata, "uid"),
        labels=kept,
        owner=_direct_owner(kind, metadata, kept, namespace),
        node=text_at(obj, "spec", "nodeName"),
    )


def _direct_owner(
    kind: str, metadata: Mapping[str, Any], labels: Mapping[str, str], namespace: str
) -> ObjectRef | None:
    if kind == "Pod" and labels.get(RAY_CLUSTER_LABEL):
        return ObjectRef("RayCluster", labels[RAY_CLUSTER_LABEL], namespace)
    refs = [as_map(ref) for ref in as_list(metadata.get("ownerReferences")) if as_map(ref)]
    chosen = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    if chosen is None:
        return None
    owner_kind, owner_name = text_at(chosen, "kind"), text_at(chosen, "name")
    if not owner_kind or not owner_name:
        return None
    return ObjectRef(canonical_kind(owner_kind), owner_name, namespace)


@dataclass
class _Entry:
    meta: Meta | None
    expires: float


class OwnerResolver:
    """Resolves owners with a bounded, expiring cache; safe to share between threads."""

    def __init__(
        self,
        fetch: Fetch | None = None,
        *,
        max_entries: int = 20_000,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._max = max_entries
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self.lookups = 0
        self.failures = 0

    def __len__(self) -> int:
        return len(self._cache)

    def note(self, kind: str, obj: Mapping[str, Any]) -> Meta:
        """Remember what a watched object says about itself."""
        meta = meta_of(kind, obj)
        metadata = as_map(obj.get("metadata"))
        key = (kind, text_at(metadata, "namespace"), text_at(metadata, "name"))
        if key[2]:
            self._put(key, meta)
        return meta

    def forget(self, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            self._cache.pop((kind, namespace, name), None)

    def meta(self, kind: str, namespace: str, name: str) -> Meta | None:
        """The cached metadata of an object, looked up when unknown or expired."""
        key = (kind, namespace, name)
        now = self._clock()
        with self._lock:
            entry = self._cache.get(key)
            if entry is not None and entry.expires > now:
                self._cache.move_to_end(key)
                return entry.meta
        if self._fetch is None or kind not in _OWNED_KINDS:
            return None
        self.lookups += 1
        try:
            obj = self._fetch(kind, namespace, name)
        except KubeApiError:
            self.failures += 1
            return None  # not cached: the next signal tries again
        meta = meta_of(kind, obj) if obj is not None else None
        self._put(key, meta)
        return meta

    def chain(self, kind: str, metadata: Mapping[str, Any]) -> tuple[ObjectRef, ...]:
        """The owners of an object, nearest first, up to the top-level workload."""
        namespace = text_at(metadata, "namespace")
        meta = meta_of(kind, {"metadata": metadata})
        found: list[ObjectRef] = []
        ref = meta.owner
        while ref is not None and len(found) < _MAX_DEPTH and ref not in found:
            found.append(ref)
            parent = self.meta(ref.kind, ref.namespace or namespace, ref.name)
            ref = parent.owner if parent is not None else None
        return tuple(found)

    def workload(self, kind: str, metadata: Mapping[str, Any]) -> ObjectRef | None:
        """The most encompassing workload that owns the object (itself if it is one)."""
        own = ObjectRef(kind, text_at(metadata, "name"), text_at(metadata, "namespace"))
        refs = [*self.chain(kind, metadata)]
        if kind in WORKLOAD_KINDS:
            refs.insert(0, own)
        top = top_workload(refs)
        if top is not None:
            if top.kind == "ReplicaSet":  # its Deployment could not be looked up: guess
                return workload_of(kind, metadata) or top
            return top
        return workload_of(kind, metadata)

    def workload_named(self, kind: str, namespace: str, name: str) -> ObjectRef | None:
        """`workload` of an object known only by name (what an Event refers to)."""
        meta = self.meta(kind, namespace, name)
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if meta is not None:
            metadata["labels"] = dict(meta.labels)
            if meta.owner is not None:
                owner = meta.owner
                metadata["ownerReferences"] = [
                    {"kind": owner.kind, "name": owner.name, "controller": True}
                ]
        return self.workload(kind, metadata)

    def _put(self, key: tuple[str, str, str], meta: Meta | None) -> None:
        with self._lock:
            self._cache[key] = _Entry(meta, self._clock() + self._ttl)
            self._cache.move_to_end(key)
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)


def top_workload(refs: list[ObjectRef]) -> ObjectRef | None:
    """The most encompassing workload among `refs` (RayJob over RayCluster, Deployment over
    ReplicaSet …); the last reference when none is a known workload kind."""
    for kind in _TOP_ORDER:
        for ref in refs:
            if ref.kind == kind:
                return ref
    for ref in refs:
        if ref.kind == "RayCluster":
            return ref
    return refs[-1] if refs else None

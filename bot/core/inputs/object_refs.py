"""Which object a signal is about, and which workload owns it.

Incidents and actions are keyed by the owning workload (docs/signals.md): a
KubeRay pod belongs to the RayCluster named by its `ray.io/cluster` label,
other pods to their controller (a ReplicaSet's Deployment when the
`pod-template-hash` label shows it), and a workload object to itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.core.inputs.values import as_list, as_map, text_at
from bot.core.model import ObjectRef

RAY_CLUSTER_LABEL = "ray.io/cluster"

# Workload kinds: an object of one of these kinds is its own workload.
WORKLOAD_KINDS = frozenset(
    {
        "RayJob",
        "RayService",
        "RayCluster",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "CronJob",
    }
)

# `kubectl` prints kinds in lower case (`pod/x`, `rayjob/y`); these are their API names.
_KINDS = {
    kind.lower(): kind
    for kind in (
        *WORKLOAD_KINDS,
        "Pod",
        "Node",
        "Event",
        "ReplicaSet",
        "Service",
        "ConfigMap",
        "Secret",
        "Namespace",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "Ingress",
        "Endpoints",
        "EndpointSlice",
        "Lease",
        "ServiceAccount",
    )
}


def canonical_kind(kind: str) -> str:
    """`Pod` for `pod`, `pods` or `pod.v1.`; `RayJob` for `rayjob.ray.io`; other kinds as given."""
    base = kind.split(".", 1)[0]
    known = _KINDS.get(base.lower()) or _KINDS.get(base.lower().removesuffix("s"))
    if known:
        return known
    return base[:1].upper() + base[1:]


def object_ref(kind: str, metadata: Any) -> ObjectRef:
    """The reference of an object of `kind` from its metadata."""
    return ObjectRef(kind, text_at(metadata, "name"), text_at(metadata, "namespace"))


def workload_of(kind: str, metadata: Any) -> ObjectRef | None:
    """The workload that owns an object, or None when nothing says."""
    namespace = text_at(metadata, "namespace")
    if kind in WORKLOAD_KINDS:
        return ObjectRef(kind, text_at(metadata, "name"), namespace)
    labels = as_map(as_map(metadata).get("labels"))
    cluster = text_at(labels, RAY_CLUSTER_LABEL)
    if cluster:
        return ObjectRef("RayCluster", cluster, namespace)
    owner = _controller(as_list(as_map(metadata).get("ownerReferences")))
    if owner is None:
        return None
    owner_kind, owner_name = text_at(owner, "kind"), text_at(owner, "name")
    if not owner_kind or not owner_name:
        return None
    if owner_kind == "ReplicaSet":
        return _deployment_of(owner_name, labels, namespace)
    return ObjectRef(canonical_kind(owner_kind), owner_name, namespace)


def _controller(owners: list[Any]) -> Mapping[str, Any] | None:
    """The owner reference marked `controller: true`, else the first one."""
    refs = [as_map(ref) for ref in owners if as_map(ref)]
    for ref in refs:
        if ref.get("controller") is True:
            return ref
    return refs[0] if refs else None


def _deployment_of(replicaset: str, labels: Mapping[str, Any], namespace: str) -> ObjectRef:
    """The Deployment behind a ReplicaSet named `<deployment>-<pod-template-hash>`."""
    template_hash = text_at(labels, "pod-template-hash")
    suffix = f"-{template_hash}"
    if template_hash and replicaset.endswith(suffix) and len(replicaset) > len(suffix):
        return ObjectRef("Deployment", replicaset.removesuffix(suffix), namespace)
    return ObjectRef("ReplicaSet", replicaset, namespace)

"""Filling in what one part of a paste knows about another.

An events table names a pod (`pod/x`) but not its workload, namespace or Ray
labels; a `kubectl describe` or Pod JSON in the same paste does. Events about
a pod shown elsewhere in the paste get that pod's workload, namespace and
`ray_cluster`/`ray_group`/`ray_node_type` fields. An event about a pod not
shown, whose name follows KubeRay's pattern (`<cluster>-<group>-worker-<id>`,
`<cluster>-head-<id>`) for a RayCluster that the paste does show, gets that
cluster and group. Nothing is guessed about clusters the paste does not name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from bot.core.inputs import InputPart
from bot.core.model import ObjectRef, Signal, SourceKind

RAY_FIELDS = ("ray_cluster", "ray_group", "ray_node_type")
_WORKER_POD = re.compile(r"^(?P<prefix>[-a-z0-9.]+)-worker-[a-z0-9]{5}$")
_HEAD_POD = re.compile(r"^(?P<cluster>[-a-z0-9.]+)-head-[a-z0-9]{5}$")
_HEAD_GROUP = "headgroup"  # the `ray.io/group` KubeRay gives head pods


@dataclass(frozen=True)
class _Pod:
    ref: ObjectRef
    workload: ObjectRef | None
    fields: Mapping[str, str]


def with_known_pods(parts: Iterable[InputPart]) -> list[InputPart]:
    """`parts`, with events about pods completed from the rest of the paste."""
    parts = list(parts)
    pods = _pods(parts)
    clusters = _clusters(parts)
    if not pods and not clusters:
        return parts
    return [_completed(part, pods, clusters) for part in parts]


def _pods(parts: list[InputPart]) -> dict[tuple[str, str], _Pod]:
    """Pods with a signal of their own, by (namespace, name) and by ("", name)."""
    pods: dict[tuple[str, str], _Pod] = {}
    for part in parts:
        if isinstance(part, Signal) and part.source is SourceKind.POD_STATUS and part.obj:
            ray = {k: part.fields[k] for k in RAY_FIELDS if k in part.fields}
            pod = _Pod(part.obj, part.workload, ray)
            pods.setdefault((part.obj.namespace, part.obj.name), pod)
            pods.setdefault(("", part.obj.name), pod)
    return pods


def _clusters(parts: list[InputPart]) -> dict[str, str]:
    """RayCluster name -> namespace, for clusters the paste names."""
    clusters: dict[str, str] = {}
    for part in parts:
        if not isinstance(part, Signal):
            continue
        name = part.fields.get("ray_cluster", "")
        if name:
            clusters.setdefault(name, part.fields.get("namespace", ""))
    return clusters


def _completed(
    part: InputPart, pods: dict[tuple[str, str], _Pod], clusters: Mapping[str, str]
) -> InputPart:
    if not isinstance(part, Signal) or part.source is not SourceKind.K8S_EVENT:
        return part
    if part.obj is None or part.obj.kind != "Pod" or "ray_cluster" in part.fields:
        return part
    pod = pods.get((part.obj.namespace, part.obj.name)) or _kuberay_pod(part.obj, clusters)
    if pod is None:
        return part
    fields = {**part.fields, **pod.fields}
    if pod.ref.namespace:
        fields.setdefault("namespace", pod.ref.namespace)
    return replace(part, obj=pod.ref, workload=part.workload or pod.workload, fields=fields)


def _kuberay_pod(ref: ObjectRef, clusters: Mapping[str, str]) -> _Pod | None:
    """A pod of a cluster the paste names, recognised by KubeRay's pod naming."""
    head = _HEAD_POD.match(ref.name)
    if head and head["cluster"] in clusters:
        return _cluster_pod(ref, head["cluster"], _HEAD_GROUP, "head", clusters)
    worker = _WORKER_POD.match(ref.name)
    if worker is None:
        return None
    prefix = worker["prefix"]
    cuts = [i for i, char in enumerate(prefix) if char == "-"]
    for cut in reversed(cuts):  # the longest known cluster name wins
        cluster, group = prefix[:cut], prefix[cut + 1 :]
        if cluster in clusters and group:
            return _cluster_pod(ref, cluster, group, "worker", clusters)
    return None


def _cluster_pod(
    ref: ObjectRef, cluster: str, group: str, node_type: str, clusters: Mapping[str, str]
) -> _Pod | None:
    known = clusters[cluster]
    if ref.namespace and known and ref.namespace != known:
        return None
    scope = ref.namespace or known
    fields = {"ray_cluster": cluster, "ray_group": group, "ray_node_type": node_type}
    return _Pod(ObjectRef("Pod", ref.name, scope), ObjectRef("RayCluster", cluster, scope), fields)

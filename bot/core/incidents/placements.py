"""Which workload a pod, a Job or a node belongs to, learned from the evidence seen.

Why this exists: an alert names what its series name: a pod (kube-state-metrics'
`pod`), a Job (`job_name`), a node (KubeNodeNotReady's `node`, the DCGM exporter's
`Hostname`); the Kubernetes watch's evidence about the same pod names its RayCluster
and RayJob (KubeRay's `ray.io/cluster` label, the owner references). A finding that
names its workload and a pod, Job or node is a `Placement`: the correlator
remembers them (`Placements`, bounded), completes a finding that names only such a
place with its workload (`Placements.of`), and an incident opened on the place
alone becomes the workload's (a `bot.core.incidents.claims.Claim`), whichever
arrived first. A node is a workload's only while that workload is the one that
failed there within the correlation window: a node two workloads failed on keeps
an incident of its own. Pure: nothing here asks a cluster.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from bot.core.incidents.workloads import Item, cluster_of, key_of, namespace_of, workload_refs
from bot.core.model import Finding, ObjectRef, frozen_map

MAX_PLACES = 10_000
"""Pods, Jobs and nodes remembered; the least recently seen are forgotten first."""
_NODE, _POD, _JOB = "Node", "Pod", "Job"


@dataclass(frozen=True, slots=True)
class Placement:
    """`place` (a Pod, a Job or a Node on `cluster`) is where `workload` failed."""

    place: ObjectRef
    workload: ObjectRef
    cluster: str = ""
    ray_cluster: str = ""

    @property
    def namespace(self) -> str:
        return self.workload.namespace

    @property
    def ray_job_id(self) -> str:
        return ""

    @property
    def home_keys(self) -> tuple[str, ...]:
        keys = [key_of(self.cluster, self.workload)]
        if self.ray_cluster and self.workload.kind != "RayCluster":
            ray_cluster = ObjectRef("RayCluster", self.ray_cluster, self.namespace)
            keys.append(key_of(self.cluster, ray_cluster))
        return tuple(keys)

    @property
    def stray_keys(self) -> tuple[str, ...]:
        keys = (key_of(self.cluster, self.place), key_of("", self.place))
        return tuple(k for k in dict.fromkeys(keys) if k not in self.home_keys)

    def _place(self) -> str:
        scope = f"{self.place.namespace}/" if self.place.namespace else ""
        return f"{self.place.kind.lower()} {scope}{self.place.name}"

    def _describe(self) -> str:
        return f"{self.workload.kind} {self.namespace}/{self.workload.name}"

    @property
    def why(self) -> str:
        if self.place.kind == _NODE:
            return f"{self._place()} is where {self._describe()}'s pod failed"
        return f"{self._place()} is {self._describe()}'s"

    @property
    def whose(self) -> str:
        return self.why

    @property
    def ours(self) -> str:
        if self.place.kind == _NODE:
            return f"{self._place()} is where this {self.workload.kind}'s pod failed"
        return f"{self._place()} is this {self.workload.kind}'s"

    def belongs(self, item: Item) -> bool:
        """`item` is about the place alone (no other workload), nowhere else."""
        if any(ref != self.place for ref in workload_refs(item)):
            return False
        if cluster_of(item) not in ("", self.cluster):
            return False
        namespace = namespace_of(item)
        if self.place.kind != _NODE and namespace not in ("", self.place.namespace):
            return False
        return place_of(item) == self.place

    def complete(self, finding: Finding) -> Finding:
        """`finding` as the workload's: its workload, namespace, RayCluster and RayJob
        added where it says none."""
        fields = dict(finding.fields)
        added = {"namespace": self.namespace, "ray_cluster": self.ray_cluster}
        if self.workload.kind == "RayJob":
            added["rayjob"] = self.workload.name
        if self.cluster and not cluster_of(finding):
            added["cluster"] = self.cluster
        for name, value in added.items():
            if value and not fields.get(name):
                fields[name] = value
        workload = finding.workload
        if workload is None or workload == self.place:
            workload = self.workload
        if fields == dict(finding.fields) and workload == finding.workload:
            return finding
        return dataclasses.replace(finding, fields=frozen_map(fields), workload=workload)


def place_of(item: Item) -> ObjectRef | None:
    """The pod, Job or node `item` is about, when it is one of those."""
    obj = item.obj
    if obj is not None and obj.kind in (_POD, _JOB):
        return ObjectRef(obj.kind, obj.name, obj.namespace or namespace_of(item))
    if obj is not None and obj.kind == _NODE:
        return ObjectRef(_NODE, obj.name)
    if item.fields.get("node"):
        return ObjectRef(_NODE, item.fields["node"])
    return None


def placements_of(item: Item) -> tuple[Placement, ...]:
    """The places a finding that names its workload puts that workload: its pod (or
    Job), and the node the pod ran on."""
    refs = workload_refs(item)
    if not refs:
        return ()
    home, cluster = refs[0], cluster_of(item)
    ray_cluster = next((ref.name for ref in refs if ref.kind == "RayCluster"), "")
    places: list[ObjectRef] = []
    own = place_of(item)
    if own is not None and own.kind != _NODE:
        places.append(own)
    if item.fields.get("job") and home.kind != _JOB:
        places.append(ObjectRef(_JOB, item.fields["job"], namespace_of(item)))
    if item.fields.get("node"):
        places.append(ObjectRef(_NODE, item.fields["node"]))
    unique = dict.fromkeys(p for p in places if p != home)
    return tuple(Placement(place, home, cluster, ray_cluster) for place in unique)


class Placements:
    """The placements seen so far (bounded by `limit`): pods and Jobs by name, nodes
    with the workloads that failed on them and when."""

    def __init__(self, limit: int = MAX_PLACES) -> None:
        self._limit = limit
        self._places: OrderedDict[ObjectRef, Placement] = OrderedDict()
        self._nodes: OrderedDict[str, dict[ObjectRef, tuple[Placement, datetime]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._places) + len(self._nodes)

    def learn(self, placement: Placement, now: datetime) -> None:
        place = placement.place
        if place.kind == _NODE:
            failed = self._nodes.pop(place.name, {})
            failed[placement.workload] = (placement, now)
            self._nodes[place.name] = failed
            _bound(self._nodes, self._limit)
        else:
            self._places.pop(place, None)
            self._places[place] = placement
            _bound(self._places, self._limit)

    def of(self, item: Item, now: datetime, window: timedelta) -> Placement | None:
        """The placement of the pod, Job or node `item` names alone, if one is known
        (a node's: the one workload that failed there within `window`)."""
        place = place_of(item)
        if place is None:
            return None
        if place.kind == _NODE:
            failed = self._nodes.get(place.name, {}).values()
            recent = [p for p, at in failed if now - at <= window]
            found = recent[0] if len(recent) == 1 else None
        else:
            found = self._places.get(place)
        return found if found is not None and found.belongs(item) else None


_K = TypeVar("_K")
_V = TypeVar("_V")


def _bound(memory: OrderedDict[_K, _V], limit: int) -> None:
    while len(memory) > limit:
        memory.popitem(last=False)

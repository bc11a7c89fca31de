"""`pitcrew diagnose --kube NAMESPACE/KIND/NAME`: diagnose a live object as if it were pasted.

Why this exists: during an incident people want the verdict on the RayJob or pod
in front of them now, without copying `kubectl describe`, events and logs into
a file. This collects what a person would look at, turns it into the same
signals the watch source emits (`kubernetes_state.Converter`, so the owning
workload and the spec are there too), runs the same Engine, then asks the
Kubernetes executors for the live facts withheld actions wait on (GPU pool
capacity, quota, pod failed) and diagnoses once more with them, so the output
has the same shape as file diagnosis with the live checks filled in.

What is collected, all bounded:
- pod: the pod, its recent Events, the log tail of each terminated container,
  and the status of its RayCluster and RayJob;
- rayjob / raycluster: the object, its RayCluster (or owning RayJob), up to
  `max_pods` of the cluster's pods (those with something to report first),
  their Events, a few log tails, and a failed RayJob's submitter log.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.api import (
    BY_KIND,
    EVENTS,
    PODS,
    RAY_CLUSTERS,
    RAY_JOBS,
    KubeApi,
    Resource,
)
from bot.adapters.kubernetes.errors import KubeApiError, reason_of
from bot.adapters.kubernetes.logs import driver_logs, is_submitter, log_tail
from bot.adapters.kubernetes.owner_resolver import OwnerResolver
from bot.adapters.kubernetes.state import Converter, containers_to_read, failed_rayjob
from bot.core.actions.facts import offer_key
from bot.core.diagnosis.engine import Engine
from bot.core.errors import PitcrewError
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.object_refs import object_ref
from bot.core.inputs.values import as_map, text_at
from bot.core.model import ActionOffer, Diagnosis, ObjectRef, Signal, SourceKind
from bot.daemon import live_checks
from bot.daemon.executor import Registry
from bot.daemon.ports import Executor

log = logging.getLogger(__name__)

_KINDS = {
    "pod": "Pod",
    "pods": "Pod",
    "po": "Pod",
    "rayjob": "RayJob",
    "rayjobs": "RayJob",
    "raycluster": "RayCluster",
    "rayclusters": "RayCluster",
}
_RESOURCES: Mapping[str, Resource] = {"Pod": PODS, "RayJob": RAY_JOBS, "RayCluster": RAY_CLUSTERS}


@dataclass(frozen=True, slots=True)
class Target:
    namespace: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind.lower()}/{self.name}"


def parse_target(text: str) -> Target:
    """`NAMESPACE/pod/NAME`, `NAMESPACE/rayjob/NAME`, `NAMESPACE/raycluster/NAME`, or
    `NAMESPACE/NAME` for a pod."""
    parts = text.strip().split("/")
    if len(parts) == 2 and all(parts):
        return Target(parts[0], "Pod", parts[1])
    if len(parts) == 3 and all(parts):
        kind = _KINDS.get(parts[1].lower().split(".", 1)[0])
        if kind is None:
            raise PitcrewError(
                f"--kube {text}: unknown kind {parts[1]!r}; use pod, rayjob or raycluster"
            )
        return Target(parts[0], kind, parts[2])
    raise PitcrewError(
        f"--kube {text}: expected NAMESPACE/pod/NAME, NAMESPACE/rayjob/NAME or "
        "NAMESPACE/raycluster/NAME"
    )


@dataclass(frozen=True)
class Limits:
    max_pods: int = 30
    max_log_tails: int = 5
    max_events_per_object: int = 20
    log_tail_lines: int = 200
    log_tail_bytes: int = 64 * 1024


class Collector:
    """Reads one target and what belongs to it; every part once."""

    def __init__(self, api: KubeApi, limits: Limits | None = None) -> None:
        self.api = api
        self.limits = limits or Limits()
        self.resolver = OwnerResolver(self._fetch)
        self.converter = Converter(self.resolver)
        self._logs = 0
        self._read: set[tuple[str, str, str, bool]] = set()

    def collect(self, target: Target) -> list[InputPart]:
        obj = self._get(_RESOURCES[target.kind], target.namespace, target.name)
        if obj is None:
            raise PitcrewError(f"{target}: not found")
        parts: list[InputPart] = []
        pods: list[dict[str, Any]] = []
        clusters: list[dict[str, Any]] = []
        rayjobs: list[dict[str, Any]] = []
        if target.kind == "Pod":
            pods, clusters = [obj], self._pod_owners(obj)
        elif target.kind == "RayCluster":
            clusters = [obj]
        else:
            rayjobs = [obj]
        for rayjob in rayjobs:
            cluster = self._named(RAY_CLUSTERS, rayjob, text_at(rayjob, "status", "rayClusterName"))
            clusters += [cluster] if cluster is not None else []
        for cluster in clusters:
            owner = self._owner_rayjob(cluster)
            if owner is not None and not any(_same(owner, r) for r in rayjobs):
                rayjobs.append(owner)
            if target.kind != "Pod":
                pods += self._cluster_pods(cluster)
        for rayjob in rayjobs:
            parts += self._parts("RayJob", rayjob)
        for cluster in clusters:
            parts += self._parts("RayCluster", cluster)
        for pod in pods[: self.limits.max_pods]:
            parts += self._parts("Pod", pod)
        names = {("Pod", text_at(p, "metadata", "name")) for p in pods[: self.limits.max_pods]}
        names |= {("RayCluster", text_at(c, "metadata", "name")) for c in clusters}
        names |= {("RayJob", text_at(r, "metadata", "name")) for r in rayjobs}
        parts += self._events(target.namespace, names, single=target.kind == "Pod")
        return parts

    # -- pieces ----------------------------------------------------------------------------

    def _parts(self, kind: str, obj: Mapping[str, Any]) -> list[InputPart]:
        parts: list[InputPart] = []
        for group in self.converter.keyed(kind, obj):
            parts.extend(group.parts)
            parts.extend(self._evidence(group.signal))
        return parts

    def _evidence(self, signal: Signal | None) -> list[InputPart]:
        if signal is None or signal.obj is None or self._logs >= self.limits.max_log_tails:
            return []
        target = containers_to_read(signal)
        if target is not None and signal.obj.kind == "Pod":
            container, previous = target
            kind = SourceKind.DRIVER_LOG if is_submitter(signal) else SourceKind.WORKER_LOG
            tail = self._tail(signal.obj, container, previous, signal.workload, kind)
            return [tail] if tail is not None else []
        if failed_rayjob(signal):
            return driver_logs(
                self.api,
                signal.obj,
                lambda pod, container: self._tail(
                    pod, container, False, signal.obj, SourceKind.DRIVER_LOG
                ),
            )
        return []

    def _tail(
        self,
        pod: ObjectRef,
        container: str,
        previous: bool,
        workload: ObjectRef | None,
        source: SourceKind = SourceKind.WORKER_LOG,
    ) -> LogText | None:
        key = (pod.namespace, pod.name, container, previous)
        if self._logs >= self.limits.max_log_tails or key in self._read:
            return None
        self._read.add(key)
        tail = log_tail(
            self.api,
            pod,
            container,
            previous=previous,
            workload=workload,
            source=source,
            lines=self.limits.log_tail_lines,
            limit_bytes=self.limits.log_tail_bytes,
        )
        if tail is not None:
            self._logs += 1
        return tail

    def _pod_owners(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        cluster = text_at(pod, "metadata", "labels", "ray.io/cluster")
        found = self._named(RAY_CLUSTERS, pod, cluster) if cluster else None
        return [found] if found is not None else []

    def _owner_rayjob(self, cluster: Mapping[str, Any]) -> dict[str, Any] | None:
        for ref in as_map(cluster.get("metadata")).get("ownerReferences") or []:
            if text_at(ref, "kind") == "RayJob":
                return self._named(RAY_JOBS, cluster, text_at(ref, "name"))
        return None

    def _cluster_pods(self, cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The cluster's pods, those with something to report first."""
        name = text_at(cluster, "metadata", "name")
        namespace = text_at(cluster, "metadata", "namespace")
        try:
            pods = [
                p
                for p in self.api.list_all(PODS, namespace, label_selector=f"ray.io/cluster={name}")
                if text_at(p, "metadata", "labels", "ray.io/cluster") == name
            ]
        except KubeApiError as error:
            log.warning("cannot list the pods of RayCluster %s: %s", name, reason_of(error))
            return []
        pods.sort(key=lambda p: not self.converter.keyed("Pod", p))
        return pods

    def _events(
        self, namespace: str, names: set[tuple[str, str]], *, single: bool
    ) -> list[InputPart]:
        selector = None
        if single and len(names) == 1:
            kind, name = next(iter(names))
            selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        per_object: dict[tuple[str, str], list[dict[str, Any]]] = {}
        try:
            for event in self.api.list_all(EVENTS, namespace, field_selector=selector):
                involved = as_map(event.get("involvedObject") or event.get("regarding"))
                key = (text_at(involved, "kind"), text_at(involved, "name"))
                if key in names:
                    per_object.setdefault(key, []).append(event)
        except KubeApiError as error:
            log.warning("cannot list events in %s: %s", namespace, reason_of(error))
            return []
        parts: list[InputPart] = []
        for events in per_object.values():
            events.sort(key=_event_time)
            for event in events[-self.limits.max_events_per_object :]:
                parts += self._parts("Event", event)
        return parts

    def _named(
        self, resource: Resource, near: Mapping[str, Any], name: str
    ) -> dict[str, Any] | None:
        return self._get(resource, text_at(near, "metadata", "namespace"), name) if name else None

    def _get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.api.get(resource, namespace, name)
        except KubeApiError as error:
            raise PitcrewError(
                f"cannot read {resource.kind} {namespace}/{name} from {self.api.host}: "
                f"{reason_of(error)}"
            ) from error

    def _fetch(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        resource = BY_KIND.get(kind)
        return self.api.get(resource, namespace, name) if resource else None


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return object_ref("x", as_map(a.get("metadata"))) == object_ref("x", as_map(b.get("metadata")))


def _event_time(event: Mapping[str, Any]) -> str:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = text_at(event, key)
        if value:
            return value
    return text_at(event, "metadata", "creationTimestamp")


# -- live facts -----------------------------------------------------------------------------------


def kube_checks(executors: Mapping[str, Executor]) -> dict[str, live_checks.Check]:
    """Each executor's live check of an offer (`bot.daemon.executor.checked`, as the
    daemon's offers and approvals make it), for `bot.daemon.live_checks`."""
    return live_checks.executor_checks(Registry(executors))


def with_live_previews(diagnosis: Diagnosis, notes: Mapping[tuple[str, str], str]) -> Diagnosis:
    """Offered actions show the executor's live diff; withheld ones say what the live check
    found (`notes`: each checked offer's note, by `offer_key`)."""
    actions: list[ActionOffer] = []
    for offer in diagnosis.actions:
        note = notes.get(offer_key(offer))
        if note is None:
            actions.append(offer)
        elif offer.offered:
            actions.append(dataclasses.replace(offer, preview=note))
        else:
            withheld = _withheld(note)
            reason = offer.reason
            if withheld and withheld not in reason:
                reason = f"{reason} ({withheld})"
            actions.append(dataclasses.replace(offer, reason=reason))
    actions.sort(key=lambda o: not o.offered)
    return dataclasses.replace(diagnosis, actions=tuple(actions))


def _withheld(note: str) -> str:
    """What a check's note says keeps the action back ("withheld: ..."), or ""."""
    line = next((x for x in note.splitlines() if x.startswith("withheld: ")), "")
    return line.removeprefix("withheld: ")


def diagnose_live(
    engine: Engine,
    api: KubeApi,
    target: Target,
    checkers: Mapping[str, Executor] | None = None,
    limits: Limits | None = None,
) -> Diagnosis:
    """Collect, diagnose, fill in the live facts, diagnose again."""
    return diagnose_parts(engine, Collector(api, limits).collect(target), checkers)


def diagnose_parts(
    engine: Engine, parts: Sequence[InputPart], checkers: Mapping[str, Executor] | None = None
) -> Diagnosis:
    """Diagnose what a `Collector` collected, fill in the live facts, diagnose again; the
    offered actions are checked too, for their live diffs."""
    first = engine.diagnose(parts)
    if not checkers:
        return first
    offered = tuple(offer for offer in first.actions if offer.offered)
    second, checked = live_checks.decide(
        first, lambda facts: engine.diagnose(parts, facts), kube_checks(checkers), offered
    )
    return with_live_previews(second, checked.notes)


def diagnose_target(
    engine: Engine,
    target: str,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> Diagnosis:
    """What `pitcrew diagnose --kube TARGET` prints."""
    parsed = parse_target(target)
    api = KubeApi.from_config(kubeconfig, context)
    from bot.adapters.kubernetes.executors import executors

    return diagnose_live(engine, api, parsed, executors(api))

"""One watched resource of the Kubernetes source: list, watch, resume, relist, report.

Why this exists: each resource (per namespace, or cluster-wide) is one loop
(`bot.adapters.kubernetes.watch.WatchLoop`) whose list and events are turned into
signals by the source's converter and tracker, so a relist reports exactly the states
the watch missed. What is specific to the source (which objects are tracked, when a
KubeRay object is healthy again, a CRD that is not served) lives here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from bot.adapters.kubernetes.api import Resource, WatchEvent
from bot.adapters.kubernetes.owner_resolver import OwnerResolver
from bot.adapters.kubernetes.state import (
    Converter,
    Keyed,
    Tracker,
    health_of,
    identity,
    problems,
)
from bot.adapters.kubernetes.templates import RERUN_ANNOTATION
from bot.adapters.kubernetes.watch import NotServedError, WatchHost, WatchLoop, WatchOptions
from bot.core.inputs import InputPart
from bot.core.inputs.values import as_map, text_at
from bot.core.model import ObjectRef

log = logging.getLogger("bot.adapters.kubernetes.source")

KUBERAY_KINDS = ("RayJob", "RayCluster")


class ResourceOptions(WatchOptions, Protocol):
    """How a resource is watched, and how much of it is kept (`KubeSourceConfig`)."""

    @property
    def max_tracked_objects(self) -> int: ...

    @property
    def resume_from(self) -> Mapping[str, str]: ...


class ResourceHost(WatchHost, Protocol):
    """What a resource watch needs of the source that runs it (`KubernetesSource`): its
    options, clock, owner resolver and converter, and where what it saw goes."""

    @property
    def config(self) -> ResourceOptions: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def resolver(self) -> OwnerResolver: ...

    @property
    def converter(self) -> Converter: ...

    def kuberay_absent(self) -> None: ...

    def deliver(self, parts: list[InputPart]) -> None: ...

    def deliver_healthy(self, workload: ObjectRef, reason: str = "") -> None: ...

    def malformed(self, kind: str, uid: str, issues: list[str]) -> None: ...

    def evidence(self, new: list[InputPart]) -> list[InputPart]: ...


def deleted_workload(kind: str, obj: Mapping[str, Any]) -> ObjectRef | None:
    """The workload whose incidents end with this deletion: a RayJob, or a RayCluster
    of its own (a RayJob's cluster going away is the RayJob's business, not its end)."""
    if kind not in KUBERAY_KINDS:
        return None
    metadata = as_map(obj.get("metadata"))
    if text_at(metadata, "annotations", RERUN_ANNOTATION):
        return None  # deleted to be created again: the incident follows the rerun
    if kind == "RayCluster":
        owners = metadata.get("ownerReferences")
        owned = (
            any(text_at(r, "kind") == "RayJob" for r in owners if isinstance(r, Mapping))
            if isinstance(owners, list)
            else False
        )
        if owned or text_at(metadata, "labels", "ray.io/originated-from-crd") == "RayJob":
            return None
    name, namespace = text_at(metadata, "name"), text_at(metadata, "namespace")
    return ObjectRef(kind, name, namespace) if name else None


class ResourceWatch(WatchLoop):
    """One resource in one namespace (or cluster-wide): list, watch, resume, relist, and
    report what is new about each object."""

    LOG = log

    def __init__(
        self, source: ResourceHost, kind: str, resource: Resource, namespace: str | None
    ) -> None:
        super().__init__(source, source.config, resource, namespace, kind, clock=source.clock)
        self.source = source
        self.config = source.config
        self.kind = kind
        self.tracker = Tracker(self.config.max_tracked_objects)
        self.failed: dict[str, bool] = {}  # KubeRay objects: failed since last healthy
        self.rv = self.config.resume_from.get(self.id) or None
        self.disabled = ""
        self._seen: set[str] = set()

    # -- health ------------------------------------------------------------------------

    def healthy(self, now: float) -> bool:
        if self.disabled:
            return True  # a CRD that is not installed is not a failure of the source
        return super().healthy(now)

    def _state_text(self) -> str:
        return f"disabled: {self.disabled}" if self.disabled else self.state

    def _status_details(self) -> dict[str, Any]:
        return {"tracked_objects": len(self.tracker)}

    # -- what the loop sees -----------------------------------------------------------

    def _not_served(self, error: NotServedError) -> bool:
        reason = str(error)
        self.disabled = reason
        self.synced = True
        self.state = "disabled"
        if self.kind in KUBERAY_KINDS:
            self.source.kuberay_absent()
        else:
            log.warning("watch %s disabled: %s", self.id, reason)
        return False

    def _list_started(self) -> None:
        self._seen = set()

    def _listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        for item in items:
            uid = self._observe(item)
            if uid in self.tracker:
                self._seen.add(uid)

    def _list_done(self) -> None:
        """Objects gone while we were not watching are forgotten."""
        for uid in self.tracker.uids() - self._seen:
            self.tracker.forget(uid)
        self._seen = set()

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        if event.type in ("ADDED", "MODIFIED"):
            self._observe(obj)
        elif event.type == "DELETED":
            self.tracker.forget(identity(self.kind, obj))
            metadata = as_map(obj.get("metadata"))
            self.source.resolver.forget(
                self.kind, text_at(metadata, "namespace"), text_at(metadata, "name")
            )
            gone = deleted_workload(self.kind, obj)
            if gone is not None:
                self.source.deliver_healthy(gone, f"the {self.kind} was deleted")
        else:
            self.source.malformed("watch event", event.type or "(no type)", ["unknown type"])

    def _observe(self, obj: Mapping[str, Any]) -> str:
        """Report what is new about one object; returns its identity."""
        uid = identity(self.kind, obj)
        issues = problems(self.kind, obj)
        if issues:
            self.source.malformed(self.kind, uid, issues)
        try:
            groups = self.source.converter.keyed(self.kind, obj)
        except Exception as error:  # a shape no parser foresaw must not stop the watch
            self.source.malformed(self.kind, uid, [f"unreadable: {error!r}"])
            return uid
        new = self.tracker.update(uid, groups)
        if new:
            self.source.deliver([*new, *self.source.evidence(new)])
        recovered = self._recovered(uid, groups)
        if recovered is not None:
            self.source.deliver_healthy(recovered)
        return uid

    def _recovered(self, uid: str, groups: list[Keyed]) -> ObjectRef | None:
        """A RayJob (or a RayCluster of its own) seen failing by this watch that is now
        running or done: the workload is healthy again."""
        if self.kind not in KUBERAY_KINDS:
            return None
        health, workload = health_of(groups[0].signal if groups else None)
        failed = self.failed.get(uid, False)
        if health == "failed":
            self.failed[uid] = True
        elif health == "healthy":
            self.failed[uid] = False
        if len(self.failed) > self.config.max_tracked_objects:
            self.failed.pop(next(iter(self.failed)))
        return workload if health == "healthy" and failed else None

"""k8s.reschedule_gpu_pool: move a worker group onto a GPU pool with free capacity.

Why this exists: pods stuck Pending on a full or broken GPU pool wait forever; when
another labelled pool has room for the group, the group's nodeSelector (and the
tolerations the pool's taints need) is changed on its template and the pending pods
are deleted so KubeRay recreates them there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.api import BY_KIND, NODES, PODS
from bot.adapters.kubernetes.base import (
    KubeExecutor,
)
from bot.adapters.kubernetes.capacity import (
    gpu_count,
    missing_tolerations,
    node_ready,
    selector_text,
    toleration_text,
)
from bot.adapters.kubernetes.errors import KubeApiError, NotFoundError, reason_of
from bot.adapters.kubernetes.templates import (
    PROPOSAL_ANNOTATION,
    Site,
    annotation_ops,
    escape,
    locate,
    proposal_of,
    resolve,
    set_ops,
)
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import RescheduleGpuPool
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.core.inputs.values import as_list, as_map, text_at


@dataclass
class ReschedulePlan:
    params: RescheduleGpuPool
    sites: list[Site]  # the live RayCluster first (when there is one), then the template
    cluster: str  # the RayCluster whose pending pods are recreated
    per_pod: int
    pending: list[Mapping[str, Any]]
    free: dict[str, int]
    tolerations: list[dict[str, str]]
    has_capacity: bool
    why: str

    def preview(self, gpu: str) -> str:
        p = self.params
        lines = []
        for site in self.sites:
            old = as_map(site.pod_spec.get("nodeSelector"))
            new = {**old, p.label_key: p.label_value}
            lines.append(
                f"{site.describe()} {site.label}.template.spec.nodeSelector: "
                f"{selector_text(old)} → {selector_text(new)}"
            )
            if self.tolerations:
                added = ", ".join(toleration_text(t) for t in self.tolerations)
                lines.append(f"  {site.label}.template.spec.tolerations: + {added}")
        pool = ", ".join(f"{n}: {f}" for n, f in sorted(self.free.items())) or "no nodes"
        lines.append(
            f"target pool {p.label_key}={p.label_value}: free {gpu} per node ({pool}); "
            f"the group needs {self.per_pod} per pod for {max(len(self.pending), 1)} pod(s)"
        )
        names = ", ".join(text_at(pod, "metadata", "name") for pod in self.pending)
        lines.append(f"then delete pending pods: {names}" if names else "no pending pods now")
        lines.append(("fits: " if self.has_capacity else "withheld: ") + self.why)
        return "\n".join(lines)


class RescheduleGpuPoolExecutor(KubeExecutor):
    """Move a worker group onto a GPU pool with free capacity, then recreate its pending pods."""

    action = "k8s.reschedule_gpu_pool"

    def plan(self, step: Step) -> ReschedulePlan:
        p = self.validated(RescheduleGpuPool, step.params)
        gpu = self.config.gpu_resource
        obj = self._get(p.kind, p.namespace, p.name)
        objects: list[tuple[str, Mapping[str, Any]]] = []
        if p.kind == "RayJob":
            live = self._live_cluster(obj)
            if live is not None:
                objects.append(("RayCluster", live))
            objects.append(("RayJob", obj))
        else:
            objects.append(("RayCluster", obj))
            rayjob = self._owner_rayjob(obj)
            if rayjob is not None:
                objects.append(("RayJob", rayjob))
        sites = [s for kind, o in objects if (s := locate(kind, o, p.group)) is not None]
        if not sites:
            raise ActionRefusedError(f"{p.kind} {p.namespace}/{p.name} has no group {p.group}")
        main = sites[0]
        per_pod = sum(
            gpu_count(resolve(c, f"/resources/requests/{escape(gpu)}"))
            or gpu_count(resolve(c, f"/resources/limits/{escape(gpu)}"))
            for c in as_list(main.pod_spec.get("containers"))
        )
        if per_pod <= 0:
            raise ActionRefusedError(f"group {p.group} requests no {gpu}: another pool cannot help")
        cluster = main.name if main.kind == "RayCluster" else ""
        pending = self._pending(p.namespace, cluster, p.group) if cluster else []
        nodes = [
            n
            for n in self.api.list_all(NODES, label_selector=f"{p.label_key}={p.label_value}")
            if text_at(n, "metadata", "labels", p.label_key) == p.label_value
        ]
        usable = [n for n in nodes if node_ready(n) and not resolve(n, "/spec/unschedulable")]
        free = self._free(usable, gpu)
        needed = max(len(pending), 1)
        fits = sum(f // per_pod for f in free.values())
        tolerations = missing_tolerations(usable, main.pod_spec, self.config.extra_tolerations)
        pool = f"{p.label_key}={p.label_value}"
        if not usable:
            has, why = False, f"no Ready schedulable node in the pool {pool}"
        elif fits < needed:
            has, why = (
                False,
                (
                    f"the pool {pool} has {sum(free.values())} free {gpu} on "
                    f"{len(usable)} node(s), room for {fits} pod(s) of {per_pod}; {needed} needed"
                ),
            )
        else:
            has, why = True, f"room for {fits} pod(s) of {per_pod} {gpu} in {pool}"
        return ReschedulePlan(p, sites, cluster, per_pod, pending, free, tolerations, has, why)

    def _pending(self, namespace: str, cluster: str, group: str) -> list[Mapping[str, Any]]:
        selector = f"ray.io/cluster={cluster},ray.io/group={group}"
        pods = self.api.list_all(PODS, namespace, label_selector=selector)
        return [
            pod
            for pod in pods
            if text_at(pod, "metadata", "labels", "ray.io/cluster") == cluster
            and text_at(pod, "metadata", "labels", "ray.io/group") == group
            and text_at(pod, "status", "phase") == "Pending"
            and not text_at(pod, "metadata", "deletionTimestamp")
        ]

    def _free(self, nodes: Sequence[Mapping[str, Any]], gpu: str) -> dict[str, int]:
        """Allocatable GPUs minus what pods already scheduled there request, per node."""
        names = {text_at(n, "metadata", "name") for n in nodes}
        used = dict.fromkeys(names, 0)
        if names:
            for pod in self.api.list_all(PODS):
                on = text_at(pod, "spec", "nodeName")
                if on in used and text_at(pod, "status", "phase") not in ("Succeeded", "Failed"):
                    used[on] += sum(
                        gpu_count(resolve(c, f"/resources/requests/{escape(gpu)}"))
                        or gpu_count(resolve(c, f"/resources/limits/{escape(gpu)}"))
                        for c in as_list(resolve(pod, "/spec/containers"))
                    )
        free: dict[str, int] = {}
        for node in nodes:
            name = text_at(node, "metadata", "name")
            allocatable = gpu_count(resolve(node, f"/status/allocatable/{escape(gpu)}"))
            free[name] = max(allocatable - used[name], 0)
        return free

    def check(self, step: Step, plan: ReschedulePlan) -> LiveCheck:
        facts = {"k8s.gpu_pool_has_capacity": plan.has_capacity}
        done = self.done_by(step, *(site.obj for site in plan.sites))
        return self.live(step, facts, plan.preview(self.config.gpu_resource), done=done)

    def execute(self, step: Step, plan: ReschedulePlan) -> str:
        proposal_id, approver = step.proposal_id, step.approver
        p = plan.params
        if all(proposal_of(s.obj) == proposal_id for s in plan.sites):
            return f"already applied by proposal {proposal_id}"
        if not plan.has_capacity:
            raise ActionRefusedError(f"withheld: {plan.why}; nothing was changed")
        done: list[str] = []
        dry = ""
        for site in plan.sites:
            old = as_map(site.pod_spec.get("nodeSelector"))
            ops: list[dict[str, Any]] = [*site.guards]
            ops += set_ops(
                site.obj, f"{site.pod_spec_path}/nodeSelector", {**old, p.label_key: p.label_value}
            )
            if plan.tolerations:
                existing = [dict(as_map(t)) for t in as_list(site.pod_spec.get("tolerations"))]
                ops += set_ops(
                    site.obj, f"{site.pod_spec_path}/tolerations", existing + plan.tolerations
                )
            ops += annotation_ops(site.obj, PROPOSAL_ANNOTATION, proposal_id)
            try:
                dry = self._apply(site, ops, f"nodeSelector {selector_text(old)}") or dry
            except ActionRefusedError:
                if site is plan.sites[0]:
                    raise
                done.append(f"{site.describe()} changed meanwhile: not updated")
                continue
            what = (
                f"{site.label}.template.spec.nodeSelector: {selector_text(old)} → "
                f"{selector_text({**old, p.label_key: p.label_value})}"
            )
            if plan.tolerations:
                what += "; tolerations + " + ", ".join(toleration_text(t) for t in plan.tolerations)
            self._record(site.kind, site.obj, proposal_id, approver, what)
            done.append(f"{site.describe()}: {what}")
        deleted = []
        for pod in self._pending(p.namespace, plan.cluster, p.group) if plan.cluster else []:
            metadata = as_map(pod.get("metadata"))
            try:
                self.api.delete(
                    PODS, p.namespace, text_at(metadata, "name"), uid=text_at(metadata, "uid")
                )
                deleted.append(text_at(metadata, "name"))
            except NotFoundError:
                pass  # gone already
            except KubeApiError as error:
                done.append(f"pod {text_at(metadata, 'name')} not deleted: {reason_of(error)}")
        done.append(f"deleted pending pods: {', '.join(deleted)}" if deleted else "no pending pods")
        done.append(dry)
        return "\n".join(done)

    def verified(self, params: Mapping[str, Any]) -> bool:
        p = RescheduleGpuPool.check(params)
        obj = self.api.get(BY_KIND[p.kind], p.namespace, p.name)
        if obj is None:
            return False
        if p.kind == "RayJob":
            obj = self._live_cluster(obj) or obj
        kind = "RayCluster" if obj.get("kind") == "RayCluster" else p.kind
        site = locate(kind, obj, p.group)
        if site is None:
            return False
        selector = as_map(site.pod_spec.get("nodeSelector"))
        return text_at(selector, p.label_key) == p.label_value

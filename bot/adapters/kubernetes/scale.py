"""k8s.scale_worker_group: add workers to a RayCluster's group, within its maxReplicas.

Why this exists: a job whose demand no node of the cluster can meet waits forever
(`ray_resources_infeasible`, pending placement groups) when the group it needs is at
its replicas. Raising `replicas` (or, with the autoscaler on, `minReplicas`, which the
autoscaler keeps to) by the playbook's count lets KubeRay create the workers; never
past `maxReplicas`, which is the operator's limit. The live RayCluster is what is
scaled (a RayJob's cluster, found from its status); the RayJob's template is not, so
the next submission starts at its own size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.api import RAY_CLUSTERS
from bot.adapters.kubernetes.base import KubeExecutor
from bot.adapters.kubernetes.templates import (
    PROPOSAL_ANNOTATION,
    Site,
    annotation_ops,
    locate,
    proposal_of,
    resolve,
    set_ops,
)
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import ScaleWorkerGroup
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.core.inputs.values import as_map, text_at

FACT = "k8s.within_max_replicas"
UNBOUNDED = 2**31 - 1  # KubeRay's default maxReplicas


@dataclass(frozen=True)
class ScalePlan:
    """One group's sizes now and after."""

    site: Site
    field: str  # "replicas", or "minReplicas" when the autoscaler sizes the group
    replicas: int
    minimum: int
    maximum: int
    target: int

    @property
    def group_path(self) -> str:
        return self.site.pod_spec_path.rsplit("/template/spec", 1)[0]

    def line(self) -> str:
        now = max(self.minimum if self.field == "minReplicas" else self.replicas, self.minimum)
        cap = "unbounded" if self.maximum >= UNBOUNDED else str(self.maximum)
        return (
            f"{self.site.describe()} {self.site.label}.{self.field}: {now} → {self.target} "
            f"(maxReplicas {cap})"
        )

    def ops(self, proposal_id: str) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = [*self.site.guards]
        ops += set_ops(self.site.obj, f"{self.group_path}/{self.field}", self.target)
        if self.field == "minReplicas" and self.replicas < self.target:
            ops += set_ops(self.site.obj, f"{self.group_path}/replicas", self.target)
        if resolve(self.site.obj, f"{self.group_path}/maxReplicas") is not None:
            ops += set_ops(self.site.obj, f"{self.group_path}/maxReplicas", self.maximum)
        return ops + annotation_ops(self.site.obj, PROPOSAL_ANNOTATION, proposal_id)


def plan_scale(site: Site, add: int) -> ScalePlan:
    """The group's new size, `add` more within maxReplicas; refused when at it."""
    cluster_spec = as_map(site.obj.get("spec"))
    group = as_map(resolve(site.obj, site.pod_spec_path.rsplit("/template/spec", 1)[0]))
    replicas, minimum = _count(group.get("replicas"), 0), _count(group.get("minReplicas"), 0)
    maximum = _count(group.get("maxReplicas"), UNBOUNDED)
    autoscaled = cluster_spec.get("enableInTreeAutoscaling") is True
    field = "minReplicas" if autoscaled else "replicas"
    now = max(minimum if autoscaled else replicas, minimum)
    target = min(now + add, maximum)
    if target <= now:
        raise ActionRefusedError(
            f"{site.describe()} {site.label} is at its maxReplicas ({maximum}): it cannot "
            "grow; raise maxReplicas or free resources"
        )
    return ScalePlan(site, field, replicas, minimum, maximum, target)


def _count(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class ScaleWorkerGroupExecutor(KubeExecutor):
    """Raise a worker group's replicas (or minReplicas) within maxReplicas."""

    action = "k8s.scale_worker_group"

    def plan(self, step: Step) -> ScalePlan:
        p = self.validated(ScaleWorkerGroup, step.params)
        obj = self._get(p.kind, p.namespace, p.name)
        if p.kind == "RayJob":
            live = self._live_cluster(obj)
            if live is None:
                raise ActionRefusedError(
                    f"RayJob {p.namespace}/{p.name} has no RayCluster now "
                    f"({text_at(obj, 'status', 'rayClusterName') or 'none in its status'})"
                )
            obj = live
        site = locate("RayCluster", obj, p.group)
        if site is None or p.group == "head":
            raise ActionRefusedError(
                f"RayCluster {text_at(obj, 'metadata', 'namespace')}/"
                f"{text_at(obj, 'metadata', 'name')} has no worker group {p.group}"
            )
        return plan_scale(site, p.add)

    def check(self, step: Step, plan: ScalePlan) -> LiveCheck:
        diff = f"{plan.line()}\n{ACTION_SPECS[self.action].impact}"
        return self.live(step, {FACT: True}, diff, done=self.done_by(step, plan.site.obj))

    def execute(self, step: Step, plan: ScalePlan) -> str:
        proposal_id, approver = step.proposal_id, step.approver
        if proposal_of(plan.site.obj) == proposal_id:
            return f"already applied by proposal {proposal_id}"
        dry = self._apply(plan.site, plan.ops(proposal_id), f"{plan.field} was read as before")
        self._record("RayCluster", plan.site.obj, proposal_id, approver, plan.line())
        return "\n".join([plan.line(), dry, ACTION_SPECS[self.action].impact])

    def verified(self, params: Mapping[str, Any]) -> bool:
        p = ScaleWorkerGroup.check(params)
        obj = self.api.get(RAY_CLUSTERS, p.namespace, p.name) if p.kind == "RayCluster" else None
        if p.kind == "RayJob":
            rayjob = self._get("RayJob", p.namespace, p.name)
            obj = self._live_cluster(rayjob)
        site = locate("RayCluster", obj, p.group) if obj else None
        if site is None:
            return False
        group = as_map(resolve(site.obj, site.pod_spec_path.rsplit("/template/spec", 1)[0]))
        return proposal_of(site.obj) != "" and _count(group.get("replicas"), 0) >= 1

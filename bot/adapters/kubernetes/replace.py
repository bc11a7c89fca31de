"""k8s.replace_worker_pods: renew a running group's dying worker pods from its template.

Why this exists: KubeRay does not roll pods when a RayCluster's template changes. After
a memory bump on a RayJob that still runs, its OOM-killed worker is restarted by the
kubelet in the same pod, with the old limit, and killed again; the new limit only
reaches pods KubeRay creates. This action deletes the group's dying worker pods (their
containers died at least once) whose containers' resources differ from the template's,
each guarded by its uid, and KubeRay creates them again from the template; a healthy
pod keeps running until it dies too (then the incident offers this step again). It is
the next step of a bump while the workload runs (`k8s.workload_running`); a finished
RayJob is recreated instead (`kuberay.recreate_rayjob`). What ran on the deleted pods
is lost (the spec's impact says so on the card).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.api import PODS
from bot.adapters.kubernetes.base import KubeExecutor
from bot.adapters.kubernetes.capacity import quantity_text, same_bytes
from bot.adapters.kubernetes.errors import KubeApiError, NotFoundError, reason_of
from bot.adapters.kubernetes.templates import Site, locate
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import ReplaceWorkerPods
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.errors import ActionFailedError, ActionRefusedError
from bot.core.inputs.values import as_list, as_map, text_at

FACT = "k8s.workload_running"
FINISHED = frozenset({"Failed", "Complete"})
_RESOURCES = ("limits", "requests")


@dataclass(frozen=True)
class ReplacePlan:
    """The group's template, whether its workload still runs, and its pods on an older
    template (each with what differs)."""

    site: Site
    running: bool
    why: str
    stale: tuple[tuple[Mapping[str, Any], str], ...]

    def lines(self) -> list[str]:
        where = f"{self.site.describe()} {self.site.label}"
        if not self.running:
            return [f"withheld: {self.why}"]
        if not self.stale:
            return [f"{where}: no dying worker pod runs an older template; none to replace"]
        shown = [f"{where}: {len(self.stale)} dying worker pod(s) on an older template, to delete:"]
        shown += [f"  pod {text_at(pod, 'metadata', 'name')}: {what}" for pod, what in self.stale]
        return [*shown, "KubeRay creates them again from the current template"]


def differences(pod: Mapping[str, Any], template: Mapping[str, Any]) -> str:
    """What of the template's containers' resources a pod runs otherwise ("" : none)."""
    containers = as_list(as_map(pod.get("spec")).get("containers"))
    running = {text_at(c, "name"): as_map(c) for c in containers}
    found = []
    for container in as_list(template.get("containers")):
        name = text_at(container, "name")
        theirs = running.get(name)
        if theirs is None:
            continue
        for kind in _RESOURCES:
            wanted = as_map(as_map(as_map(container).get("resources")).get(kind))
            has = as_map(as_map(theirs.get("resources")).get(kind))
            for resource, value in wanted.items():
                now = quantity_text(has.get(resource))
                if not same_bytes(now, quantity_text(value)):
                    found.append(f"{name} {kind}.{resource} {now or 'unset'} (template {value})")
    return "; ".join(found)


def dying(pod: Mapping[str, Any]) -> bool:
    """A pod whose containers died at least once (restarted, or terminated now): the
    ones an older limit kills; a healthy pod keeps running until it is one of them."""
    status = as_map(pod.get("status"))
    if text_at(status, "phase") == "Failed":
        return True
    for container in as_list(status.get("containerStatuses")):
        state = as_map(container)
        restarts = state.get("restartCount")
        if (isinstance(restarts, int) and restarts > 0) or as_map(state.get("lastState")).get(
            "terminated"
        ):
            return True
        if as_map(state.get("state")).get("terminated"):
            return True
    return False


class ReplaceWorkerPodsExecutor(KubeExecutor):
    """Delete a running group's worker pods that run an older template."""

    action = "k8s.replace_worker_pods"

    def plan(self, step: Step) -> ReplacePlan:
        p = self.validated(ReplaceWorkerPods, step.params)
        obj = self._get(p.kind, p.namespace, p.name)
        rayjob = obj if p.kind == "RayJob" else self._owner_rayjob(obj)
        cluster = self._live_cluster(obj) if p.kind == "RayJob" else obj
        if cluster is None:
            raise ActionRefusedError(f"RayJob {p.namespace}/{p.name} has no RayCluster now")
        site = locate("RayCluster", cluster, p.group)
        if site is None or p.group == "head":
            raise ActionRefusedError(f"{_describe(cluster)} has no worker group {p.group}")
        state = text_at(rayjob, "status", "jobDeploymentStatus") if rayjob else ""
        if state in FINISHED:
            assert rayjob is not None
            why = (
                f"RayJob {p.namespace}/{text_at(rayjob, 'metadata', 'name')} is {state}: it "
                "is rerun from its template, its old pods are not replaced"
            )
            return ReplacePlan(site, False, why, ())
        return ReplacePlan(site, True, "", self._stale(site, p))

    def _stale(self, site: Site, p: ReplaceWorkerPods) -> tuple[tuple[Mapping[str, Any], str], ...]:
        selector = f"ray.io/cluster={site.name},ray.io/group={p.group}"
        found = []
        for pod in self.api.list_all(PODS, p.namespace, label_selector=selector):
            labels = as_map(as_map(pod.get("metadata")).get("labels"))
            if (
                text_at(labels, "ray.io/cluster") != site.name
                or text_at(labels, "ray.io/group") != p.group
            ):
                continue
            if text_at(pod, "metadata", "deletionTimestamp") or not dying(pod):
                continue
            what = differences(pod, site.pod_spec)
            if what:
                found.append((pod, what))
        return tuple(found)

    def check(self, step: Step, plan: ReplacePlan) -> LiveCheck:
        diff = "\n".join([*plan.lines(), ACTION_SPECS[self.action].impact])
        return self.live(step, {FACT: plan.running}, diff)

    def execute(self, step: Step, plan: ReplacePlan) -> str:
        if not plan.running:
            raise ActionRefusedError(f"{plan.why}; nothing was deleted")
        if not plan.stale:
            return plan.lines()[0]
        deleted, problems = self._delete(plan.stale, plan.site.namespace)
        what = f"deleted {len(deleted)} worker pod(s) on an older template: {', '.join(deleted)}"
        if deleted:
            self._record("RayCluster", plan.site.obj, step.proposal_id, step.approver, what)
        if problems and not deleted:
            raise ActionFailedError("; ".join(problems))
        lines = [f"{plan.site.describe()} {plan.site.label}: {what}", *problems]
        return "\n".join([*lines, "KubeRay creates them again from the current template"])

    def _delete(
        self, stale: Sequence[tuple[Mapping[str, Any], str]], namespace: str
    ) -> tuple[list[str], list[str]]:
        deleted: list[str] = []
        problems: list[str] = []
        for pod, _ in stale:
            name, uid = text_at(pod, "metadata", "name"), text_at(pod, "metadata", "uid")
            try:
                self.api.delete(PODS, namespace, name, uid=uid)
            except NotFoundError:
                continue  # gone already: KubeRay makes its successor from the template
            except KubeApiError as error:
                problems.append(f"pod {name} not deleted: {reason_of(error)}")
                continue
            deleted.append(name)
        return deleted, problems

    def verified(self, params: Mapping[str, Any]) -> bool:
        """No worker pod of the group runs an older template any more (pods being
        deleted do not count: KubeRay replaces them)."""
        p = ReplaceWorkerPods.check(params)
        obj = self._get(p.kind, p.namespace, p.name)
        cluster = self._live_cluster(obj) if p.kind == "RayJob" else obj
        site = locate("RayCluster", cluster, p.group) if cluster else None
        return site is not None and not self._stale(site, p)


def _describe(obj: Mapping[str, Any]) -> str:
    metadata = as_map(obj.get("metadata"))
    return f"RayCluster {text_at(metadata, 'namespace')}/{text_at(metadata, 'name')}"

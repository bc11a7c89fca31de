"""k8s.bump_memory: raise a container's memory limit (and request) on its owning template.

Why this exists: an OOM-killed Ray worker comes back with the same limit unless the
template that makes it changes: the RayCluster's group, the RayJob's `rayClusterSpec`
(both, when a RayJob runs the cluster: the next submission keeps the fix), a
Deployment's or StatefulSet's template, or a Job (immutable: recreated). The new limit
must fit a node the template can run on and the namespace quotas.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.adapters.kubernetes.api import BY_KIND, NODES, RESOURCE_QUOTAS
from bot.adapters.kubernetes.base import (
    KubeExecutor,
    changed_since_read,
    guarded,
    log,
)
from bot.adapters.kubernetes.capacity import (
    allocatable_bytes,
    byte_delta,
    node_matches,
    quantity_text,
    quota_fits,
    same_bytes,
)
from bot.adapters.kubernetes.errors import ConflictError, KubeApiError, reason_of
from bot.adapters.kubernetes.templates import (
    PROPOSAL_ANNOTATION,
    Site,
    annotation_ops,
    group_of,
    locate,
    proposal_of,
    replicas_of,
    resolve,
    test_op,
)
from bot.core import quantity
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import BumpMemory
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.errors import ActionFailedError, ActionRefusedError
from bot.core.inputs.values import as_map, text_at

_RECREATE_ATTEMPTS = 10  # half-second waits for a deleted Job's name to be free


@dataclass
class _Bump:
    """One site's memory change."""

    site: Site
    limit: str
    request: str
    new_limit: str
    new_request: str

    def lines(self) -> list[str]:
        label = self.site.container_label
        shown = [f"{label}.resources.limits.memory: {self.limit} → {self.new_limit}"]
        if self.request and self.new_request != self.request:
            shown.append(f"{label}.resources.requests.memory: {self.request} → {self.new_request}")
        return shown

    def ops(self) -> list[dict[str, Any]]:
        resources = f"{self.site.container_path}/resources"
        limits = resolve(self.site.obj, f"{resources}/limits/memory")
        ops: list[dict[str, Any]] = [*self.site.guards]
        ops += [
            test_op(f"{resources}/limits/memory", limits),
            {"op": "replace", "path": f"{resources}/limits/memory", "value": self.new_limit},
        ]
        if self.request:
            requests = resolve(self.site.obj, f"{resources}/requests/memory")
            ops += [
                test_op(f"{resources}/requests/memory", requests),
                {
                    "op": "replace",
                    "path": f"{resources}/requests/memory",
                    "value": self.new_request,
                },
            ]
        return ops


@dataclass
class BumpPlan:
    params: BumpMemory
    primary: _Bump
    follow: list[_Bump] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fits: bool = True
    why: str = ""

    def preview(self) -> str:
        lines = [f"{self.primary.site.describe()}:"]
        lines += [f"  {line}" for line in self.primary.lines()]
        for bump in self.follow:
            lines.append(f"{bump.site.describe()} (template of the next submission):")
            lines += [f"  {line}" for line in bump.lines()]
        lines += self.notes
        lines.append(("fits: " if self.fits else "withheld: ") + self.why)
        lines.append(ACTION_SPECS["k8s.bump_memory"].impact)
        return "\n".join(lines)


class BumpMemoryExecutor(KubeExecutor):
    """Raise the memory limit (and request) of the owning template by a bounded factor."""

    action = "k8s.bump_memory"

    def plan(self, step: Step) -> BumpPlan:
        p = self.validated(BumpMemory, step.params)
        obj = self._get(p.kind, p.namespace, p.name)
        site = locate(p.kind, obj, p.group, p.container)
        if site is None:
            raise ActionRefusedError(
                f"{p.kind} {p.namespace}/{p.name} has no group {p.group or '(template)'} "
                f"with container {p.container or '(first)'}"
            )
        primary = self._bump(site, p)
        plan = BumpPlan(p, primary)
        for other in self._followers(p, obj):
            follow = locate(other[0], other[1], p.group, site.container_name)
            if follow is None:
                continue
            limit = quantity_text(resolve(follow.container, "/resources/limits/memory"))
            if same_bytes(limit, primary.limit):
                plan.follow.append(
                    _Bump(
                        follow,
                        limit,
                        quantity_text(resolve(follow.container, "/resources/requests/memory")),
                        primary.new_limit,
                        primary.new_request,
                    )
                )
            else:
                plan.notes.append(
                    f"{follow.describe()} has {limit or 'no limit'} for this container: "
                    "left as it is"
                )
        plan.fits, plan.why = self._fits(primary)
        return plan

    def _followers(self, p: BumpMemory, obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """The other copy of the same template: a RayCluster's RayJob, a RayJob's cluster."""
        if p.kind == "RayCluster":
            rayjob = self._owner_rayjob(obj)
            return [("RayJob", rayjob)] if rayjob is not None else []
        if p.kind == "RayJob":
            cluster = self._live_cluster(obj)
            return [("RayCluster", cluster)] if cluster is not None else []
        return []

    def _bump(self, site: Site, p: BumpMemory) -> _Bump:
        limit = quantity_text(resolve(site.container, "/resources/limits/memory"))
        request = quantity_text(resolve(site.container, "/resources/requests/memory"))
        if not limit:
            raise ActionRefusedError(
                f"{site.container_label} has no memory limit to raise (an OOM kill without a "
                "limit is node memory pressure)"
            )
        cap_bytes = min(quantity.parse_bytes(p.cap), quantity.parse_bytes(self.config.max_memory))
        cap = quantity.format_bytes(cap_bytes)
        try:
            new_limit = (
                quantity.format_bytes(min(quantity.parse_bytes(p.limit), cap_bytes))
                if p.limit  # sized from the group's observed usage
                else quantity.bump(limit, p.factor, cap)
            )
        except quantity.QuantityError as error:
            raise ActionRefusedError(f"{site.container_label}: {error}") from error
        if quantity.parse_bytes(new_limit) <= quantity.parse_bytes(limit):
            raise ActionRefusedError(
                f"{site.container_label}.resources.limits.memory is {limit}, already at "
                f"the cap of {cap}"
            )
        new_request = request
        if request:
            if same_bytes(request, limit):
                new_request = new_limit  # keep Guaranteed QoS
            else:
                bumped = quantity.bump(request, p.factor, cap)
                smaller = min(quantity.parse_bytes(bumped), quantity.parse_bytes(new_limit))
                new_request = quantity.format_bytes(smaller)
        return _Bump(site, limit, request, new_limit, new_request)

    def _fits(self, bump: _Bump) -> tuple[bool, str]:
        """The new limit fits a node the template can run on and the namespace quotas."""
        new_limit = quantity.parse_bytes(bump.new_limit)
        selector = as_map(bump.site.pod_spec.get("nodeSelector"))
        try:
            nodes = [n for n in self.api.list_all(NODES) if node_matches(n, selector)]
        except KubeApiError as error:
            return False, f"cannot read node allocatable memory: {reason_of(error)}"
        if not nodes:
            wanted = ",".join(f"{k}={v}" for k, v in selector.items()) or "(any)"
            return False, f"no node matches the template's nodeSelector {wanted}"
        largest = max(allocatable_bytes(n, "memory") for n in nodes)
        if new_limit > largest:
            return False, (
                f"{bump.new_limit} is more than the largest node allocatable memory "
                f"({quantity.format_bytes(largest)}) the template can run on"
            )
        replicas = replicas_of(bump.site)
        deltas = {
            "limits.memory": (new_limit - quantity.parse_bytes(bump.limit)) * replicas,
            "requests.memory": byte_delta(bump.request, bump.new_request) * replicas,
        }
        deltas["memory"] = deltas["requests.memory"]
        try:
            quotas = list(self.api.list_all(RESOURCE_QUOTAS, bump.site.namespace))
        except KubeApiError as error:
            return False, f"cannot read the namespace ResourceQuota: {reason_of(error)}"
        shown = [f"largest matching node allocatable {quantity.format_bytes(largest)}"]
        for quota in quotas:
            ok, text = quota_fits(quota, deltas)
            shown.append(text)
            if not ok:
                return False, text
        if not quotas:
            shown.append("no ResourceQuota in the namespace")
        return True, "; ".join(shown)

    def check(self, step: Step, plan: BumpPlan) -> LiveCheck:
        """Whether the new limit fits, and the parameters as they would be offered now:
        a memory limit changed since the offer makes the preview differ, so approval
        refuses and offers the fresh one."""
        p, live = plan.params, plan.primary.limit
        if p.current and live and not same_bytes(live, p.current):
            p = dataclasses.replace(p, current=live)
        facts = {"k8s.within_quota": plan.fits}
        done = self.done_by(step, plan.primary.site.obj)
        return self.live(step, facts, plan.preview(), p.as_dict(), done)

    def execute(self, step: Step, plan: BumpPlan) -> str:
        proposal_id, approver = step.proposal_id, step.approver
        p, primary = plan.params, plan.primary
        if proposal_of(primary.site.obj) == proposal_id:
            return f"already applied by proposal {proposal_id}: {'; '.join(primary.lines())}"
        if p.current and not same_bytes(primary.limit, p.current):
            raise ActionRefusedError(
                f"{primary.site.container_label}.resources.limits.memory of "
                f"{primary.site.describe()} is now {primary.limit}, not {p.current} as the "
                "preview showed: refusing to overwrite it; nothing was changed"
            )
        if not plan.fits:
            raise ActionRefusedError(f"the new limit does not fit: {plan.why}")
        if primary.site.kind == "Job":
            return self._recreate_job(plan, proposal_id, approver)
        done: list[str] = []
        dry = ""
        for bump in [primary, *plan.follow]:
            ops = bump.ops() + annotation_ops(bump.site.obj, PROPOSAL_ANNOTATION, proposal_id)
            try:
                dry = self._apply(bump.site, ops, f"expected {bump.limit}") or dry
            except ActionRefusedError:
                if bump is primary:
                    raise
                done.append(f"{bump.site.describe()} changed meanwhile: not updated")
                continue
            self._check_read_back(bump)
            what = "; ".join(bump.lines())
            self._record(bump.site.kind, bump.site.obj, proposal_id, approver, what)
            done.append(f"{bump.site.describe()}: {what}")
        done.append(dry)
        done.append(ACTION_SPECS[self.action].impact)
        return "\n".join(done)

    def _check_read_back(self, bump: _Bump) -> None:
        site = bump.site
        after = self.api.get(site.resource, site.namespace, site.name) or {}
        again = locate(site.kind, after, group_of(site), site.container_name)
        limit = quantity_text(resolve(again.container, "/resources/limits/memory")) if again else ""
        if not same_bytes(limit, bump.new_limit):
            raise ActionFailedError(
                f"{site.describe()} was patched but reads back {limit or 'no limit'} "
                f"instead of {bump.new_limit}"
            )

    def _recreate_job(self, plan: BumpPlan, proposal_id: str, approver: str) -> str:
        """A Job's pod template is immutable: delete it (with its pods) and create it again
        with the new memory, guarded by the old Job's uid."""
        site = plan.primary.site
        manifest = _fresh_job(site.obj, plan.primary, proposal_id)
        uid = text_at(site.obj, "metadata", "uid")
        changed = changed_since_read(site, "a different Job of that name")
        with guarded(changed, f"{site.describe()}: delete failed"):
            self.api.delete(site.resource, site.namespace, site.name, uid=uid)
        try:
            created = self._create_when_gone(site, manifest)
        except Exception as error:
            log.error(
                "%s was deleted but not created again; its manifest: %s",
                site.describe(),
                json.dumps(manifest, sort_keys=True),
            )
            raise ActionFailedError(
                f"{site.describe()} was deleted but could not be created again: "
                f"{reason_of(error)}; the manifest is in the pitcrew log"
            ) from error
        what = "; ".join(plan.primary.lines()) + " (Job recreated)"
        self._record("Job", created or manifest, proposal_id, approver, what)
        return f"{site.describe()}: {what}"

    def _create_when_gone(self, site: Site, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Create the Job again, waiting (a little) while the old one is still going."""
        for attempt in range(_RECREATE_ATTEMPTS):
            try:
                return self.api.create(site.resource, site.namespace, manifest)
            except ConflictError:
                if attempt == _RECREATE_ATTEMPTS - 1:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def verified(self, params: Mapping[str, Any]) -> bool:
        p = BumpMemory.check(params)
        obj = self.api.get(BY_KIND[p.kind], p.namespace, p.name)
        site = locate(p.kind, obj, p.group, p.container) if obj else None
        if site is None:
            return False
        limit = quantity_text(resolve(site.container, "/resources/limits/memory"))
        if not limit:
            return False
        if p.current:
            return quantity.parse_bytes(limit) > quantity.parse_bytes(p.current)
        return proposal_of(site.obj) != ""


def _fresh_job(job: Mapping[str, Any], bump: _Bump, proposal_id: str) -> dict[str, Any]:
    """The Job's manifest for creating it again: server-set fields and the generated
    selector dropped, the new memory set, the proposal noted."""
    manifest = copy.deepcopy(dict(job))
    manifest.pop("status", None)
    metadata = manifest.setdefault("metadata", {})
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
        metadata.pop(key, None)
    metadata.setdefault("annotations", {})[PROPOSAL_ANNOTATION] = proposal_id
    manifest.setdefault("spec", {}).pop("selector", None)  # generated from the old uid
    labels = as_map(resolve(manifest, "/spec/template/metadata/labels"))
    if labels:
        template_labels = dict(labels)
        for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
            template_labels.pop(key, None)
        manifest["spec"]["template"]["metadata"]["labels"] = template_labels
    container = manifest["spec"]["template"]["spec"]["containers"][bump.site.container_index]
    resources = container.setdefault("resources", {})
    resources.setdefault("limits", {})["memory"] = bump.new_limit
    if bump.request:
        resources.setdefault("requests", {})["memory"] = bump.new_request
    return manifest

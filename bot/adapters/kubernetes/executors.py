"""The Kubernetes executors: k8s.bump_memory, k8s.reschedule_gpu_pool, k8s.delete_pod.

Why this exists: an approved remediation has to change the right object, only
if it is still safe, never overwrite a change someone made since the preview,
and leave a trace in the cluster. Each executor has the same three steps:

- `check(params) -> (facts, preview)`: read live state; the facts the action's
  guards name (`k8s.within_quota`, `k8s.gpu_pool_has_capacity`,
  `k8s.pod_failed`) and a preview that shows the diff
  (`workerGroupSpecs[gpu-group].containers[ray-worker].resources.limits.memory:
  16Gi → 24Gi`). Read-only.
- `execute(params, proposal_id, approver) -> str`: re-read, refuse
  (`ActionRefusedError`) when the preview no longer holds, then a server-side
  dry-run and the change as a JSON patch whose `test` operations pin every
  value the preview showed, so a spec changed in between is refused by the API
  server itself and nothing is overwritten. Idempotent per proposal (the target
  remembers the proposal id in an annotation). Records a Kubernetes Event
  (`reason: PitcrewRemediation`) on the target: who approved, what changed.
- `verify(params) -> bool`: whether the change is in place.

The owning template is what gets patched, never a pod: a RayCluster's head or
worker group, a RayJob's `rayClusterSpec` (and the RayCluster it runs now), a
Deployment's or StatefulSet's template; a Job's template is immutable, so the
Job is recreated. `KubernetesExecutor` adapts the three executors to the
daemon's registry (`bot.daemon.runner.Executor`, built by `build(settings)`)
and every executor declares the RBAC it needs (`RBAC`, docs/rbac.md).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.adapters.kubernetes.api import (
    BY_KIND,
    EVENTS,
    NODES,
    PODS,
    RAY_CLUSTERS,
    RAY_JOBS,
    RESOURCE_QUOTAS,
    KubeApi,
    RbacRule,
    Resource,
    hostname,
    reason_of,
    status_of,
)
from bot.app.settings import Settings
from bot.core import quantity
from bot.core.actions.catalog import CATALOG, BumpMemory, DeletePod, RescheduleGpuPool
from bot.core.approvals import LiveCheck
from bot.core.errors import PitcrewError
from bot.core.inputs.values import as_list, as_map, text_at
from bot.core.model import Proposal, ProposalState
from bot.daemon.runner import Verification

log = logging.getLogger("pitcrew.actions.kubernetes")

PROPOSAL_ANNOTATION = "pitcrew.io/last-proposal"
PROBE_ANNOTATION = "pitcrew.io/dry-run-probe"
EVENT_REASON = "PitcrewRemediation"
_RECREATE_ATTEMPTS = 10  # half-second waits for a deleted Job's name to be free
# Taints a GPU pool's own tolerations never need to cover (node conditions, roles).
_SYSTEM_TAINT_PREFIXES = ("node.kubernetes.io/", "node-role.kubernetes.io/")
_FAILED_REASONS = frozenset(
    {"Evicted", "NodeLost", "NodeShutdown", "Terminated", "UnexpectedAdmissionError"}
)


class ActionRefusedError(PitcrewError):
    """The action was not applied because it is no longer safe or the target changed;
    nothing was changed. The message says why."""


class ActionFailedError(PitcrewError):
    """The action was attempted and the API server did not accept or keep the change."""


@dataclass(frozen=True)
class KubeActionConfig:
    """Limits the cluster operator sets; playbook parameters can only be stricter."""

    max_memory: str = "512Gi"  # absolute cap on any memory limit pitcrew writes
    gpu_resource: str = "nvidia.com/gpu"
    extra_tolerations: tuple[Mapping[str, str], ...] = ()
    dry_run: bool = True  # server-side dry-run before each patch
    component: str = "pitcrew"


# -- where a group's pod template lives ------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """One container of one pod template inside an object, with the paths to it."""

    kind: str
    namespace: str
    name: str
    obj: Mapping[str, Any]
    pod_spec_path: str  # JSON pointer to the template's pod spec
    label: str  # human path: `workerGroupSpecs[gpu-group]`
    container_index: int
    container_name: str
    guards: tuple[dict[str, Any], ...]  # test ops pinning the group and container

    @property
    def resource(self) -> Resource:
        return BY_KIND[self.kind]

    @property
    def pod_spec(self) -> Mapping[str, Any]:
        return as_map(_resolve(self.obj, self.pod_spec_path))

    @property
    def container(self) -> Mapping[str, Any]:
        containers = as_list(self.pod_spec.get("containers"))
        return as_map(containers[self.container_index]) if containers else {}

    @property
    def container_path(self) -> str:
        return f"{self.pod_spec_path}/containers/{self.container_index}"

    @property
    def container_label(self) -> str:
        return f"{self.label}.containers[{self.container_name}]"

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def locate(kind: str, obj: Mapping[str, Any], group: str, container: str = "") -> Site | None:
    """The site of `group` (a worker group name, `head`, or "" for a plain workload) and
    `container` (name; "" = the first, which KubeRay treats as the Ray container)."""
    metadata = as_map(obj.get("metadata"))
    namespace, name = text_at(metadata, "namespace"), text_at(metadata, "name")
    guards: list[dict[str, Any]] = []
    if kind in ("RayCluster", "RayJob"):
        base = "/spec" if kind == "RayCluster" else "/spec/rayClusterSpec"
        prefix = "" if kind == "RayCluster" else "rayClusterSpec."
        cluster_spec = as_map(_resolve(obj, base))
        if group == "head":
            path, label = f"{base}/headGroupSpec/template/spec", f"{prefix}headGroupSpec"
        else:
            groups = as_list(cluster_spec.get("workerGroupSpecs"))
            index = next(
                (i for i, g in enumerate(groups) if text_at(g, "groupName") == group), None
            )
            if index is None:
                return None
            path = f"{base}/workerGroupSpecs/{index}/template/spec"
            label = f"{prefix}workerGroupSpecs[{group}]"
            guards.append(_test(f"{base}/workerGroupSpecs/{index}/groupName", group))
    else:
        path, label = "/spec/template/spec", "spec.template"
    pod_spec = as_map(_resolve(obj, path))
    containers = [as_map(c) for c in as_list(pod_spec.get("containers"))]
    if not containers:
        return None
    if container:
        index = next((i for i, c in enumerate(containers) if text_at(c, "name") == container), -1)
        if index < 0:
            return None
    else:
        index = 0
    container_name = text_at(containers[index], "name")
    guards.append(_test(f"{path}/containers/{index}/name", container_name))
    return Site(
        kind, namespace, name, obj, path, label, index, container_name or str(index), tuple(guards)
    )


# -- JSON pointer and patch helpers ------------------------------------------------------------


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _resolve(obj: Any, pointer: str) -> Any:
    value = obj
    for raw in pointer.strip("/").split("/") if pointer.strip("/") else []:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, Mapping):
            value = value.get(key)
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            return None
    return value


def _test(path: str, value: Any) -> dict[str, Any]:
    return {"op": "test", "path": path, "value": value}


def _set(obj: Mapping[str, Any], path: str, value: Any) -> list[dict[str, Any]]:
    """Ops that set `path` to `value`, creating missing parent mappings, pinning the old
    value with a test when there is one."""
    current = _resolve(obj, path)
    if current is not None:
        return [_test(path, current), {"op": "replace", "path": path, "value": value}]
    parent, _, last = path.rpartition("/")
    if parent and _resolve(obj, parent) is None:
        return _set(obj, parent, _nest(last, value))
    return [{"op": "add", "path": path, "value": value}]


def _nest(escaped_key: str, value: Any) -> dict[str, Any]:
    return {escaped_key.replace("~1", "/").replace("~0", "~"): value}


def _annotation_ops(obj: Mapping[str, Any], key: str, value: str) -> list[dict[str, Any]]:
    annotations = _resolve(obj, "/metadata/annotations")
    if not isinstance(annotations, Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": {key: value}}]
    return [{"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value}]


def _is_test_failure(error: BaseException) -> bool:
    """A JSON patch `test` failed: 422 on a real API server (409 for a conflict); an
    emulator may answer 500 naming the failed test."""
    status = status_of(error)
    if status in (409, 422):
        return True
    text = reason_of(error).lower()
    return status == 500 and any(w in text for w in ("jsonpatch", "jsonpointer", "tested value"))


def _quantity_text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    return str(value)


def _same_bytes(a: str, b: str) -> bool:
    try:
        return quantity.parse_bytes(a) == quantity.parse_bytes(b)
    except quantity.QuantityError:
        return a == b


def _gpu_count(value: Any) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def _replicas(site: Site) -> int:
    """How many pods run with the site's template (what a quota is charged for)."""
    if site.kind in ("RayCluster", "RayJob"):
        if site.label.endswith("headGroupSpec"):
            return 1
        group = as_map(_resolve(site.obj, site.pod_spec_path.rsplit("/template/spec", 1)[0]))
        for key in ("replicas", "minReplicas"):
            value = group.get(key)
            if isinstance(value, int) and value >= 0:
                return max(value, 1)
        return 1
    spec = as_map(site.obj.get("spec"))
    value = spec.get("parallelism" if site.kind == "Job" else "replicas")
    return value if isinstance(value, int) and value > 0 else 1


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- what every executor shares -------------------------------------------------------------------


class KubeExecutor(ABC):
    """What every Kubernetes executor shares: the API, the limits, dry-run detection,
    guarded patches and the remediation Event."""

    action = ""
    rbac: tuple[RbacRule, ...] = ()

    def __init__(self, api: KubeApi, config: KubeActionConfig | None = None) -> None:
        self.api = api
        self.config = config or KubeActionConfig()
        self._dry_run: dict[str, bool] = {}

    @abstractmethod
    def check(self, params: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
        """The facts the action's guards name and a preview of the change (read-only)."""

    @abstractmethod
    def execute(self, params: Mapping[str, Any], proposal_id: str, approver: str) -> str:
        """Apply the change; raises ActionRefusedError when it no longer holds."""

    @abstractmethod
    def verify(self, params: Mapping[str, Any]) -> bool:
        """Whether the change is in place."""

    def _get(self, kind: str, namespace: str, name: str) -> dict[str, Any]:
        obj = self.api.get(BY_KIND[kind], namespace, name)
        if obj is None:
            raise ActionRefusedError(f"{kind} {namespace}/{name} does not exist")
        return obj

    def _owner_rayjob(self, cluster: Mapping[str, Any]) -> dict[str, Any] | None:
        metadata = as_map(cluster.get("metadata"))
        for ref in as_list(metadata.get("ownerReferences")):
            if text_at(ref, "kind") == "RayJob" and text_at(ref, "name"):
                return self.api.get(RAY_JOBS, text_at(metadata, "namespace"), text_at(ref, "name"))
        return None

    def _live_cluster(self, rayjob: Mapping[str, Any]) -> dict[str, Any] | None:
        name = text_at(rayjob, "status", "rayClusterName")
        namespace = text_at(rayjob, "metadata", "namespace")
        return self.api.get(RAY_CLUSTERS, namespace, name) if name else None

    def dry_run_honoured(self, site: Site) -> bool:
        """Whether the API server honours `dryRun=All`, probed once per server with an
        annotation on the target: a server that ignores dryRun (an emulator) applies the
        probe, which is then detected and taken back."""
        if not self.config.dry_run:
            return False
        known = self._dry_run.get(self.api.host)
        if known is not None:
            return known
        nonce = uuid.uuid4().hex[:12]
        resource = site.resource
        self.api.patch(
            resource,
            site.namespace,
            site.name,
            _annotation_ops(site.obj, PROBE_ANNOTATION, nonce),
            dry_run=True,
        )
        after = self.api.get(resource, site.namespace, site.name) or {}
        annotations = as_map(_resolve(after, "/metadata/annotations"))
        honoured = annotations.get(PROBE_ANNOTATION) != nonce
        if not honoured:
            path = f"/metadata/annotations/{_escape(PROBE_ANNOTATION)}"
            self.api.patch(
                resource,
                site.namespace,
                site.name,
                [_test(path, nonce), {"op": "remove", "path": path}],
            )
            log.warning(
                "the API server at %s ignores dryRun (it applied a dry-run probe, now "
                "taken back): server-side dry-runs are skipped; real servers honour them",
                self.api.host,
            )
        self._dry_run[self.api.host] = honoured
        return honoured

    def _apply(self, site: Site, ops: list[dict[str, Any]], what: str) -> str:
        """Dry-run (when honoured) then the patch. A failed `test` means the spec changed
        since it was read: refused, nothing overwritten."""
        resource = site.resource
        dry = "server-side dry-run skipped: this API server ignores dryRun"
        if self.dry_run_honoured(site):
            try:
                self.api.patch(resource, site.namespace, site.name, ops, dry_run=True)
            except Exception as error:
                if _is_test_failure(error):
                    raise self._changed(site, what) from error
                raise ActionRefusedError(
                    f"{site.describe()}: the server-side dry-run rejected the change: "
                    f"{reason_of(error)}; nothing was changed"
                ) from error
            dry = "server-side dry-run passed"
        elif not self.config.dry_run:
            dry = "server-side dry-run off (config)"
        try:
            self.api.patch(resource, site.namespace, site.name, ops)
        except Exception as error:
            if _is_test_failure(error):
                raise self._changed(site, what) from error
            raise ActionFailedError(
                f"{site.describe()}: the API server refused the patch: {reason_of(error)}"
            ) from error
        return dry

    def _changed(self, site: Site, what: str) -> ActionRefusedError:
        return ActionRefusedError(
            f"{site.describe()} changed after pitcrew read it ({what}): the patch's test "
            "operation failed on the API server, so nothing was overwritten; "
            "re-diagnose for a fresh proposal"
        )

    def _record(
        self, kind: str, obj: Mapping[str, Any], proposal_id: str, approver: str, what: str
    ) -> None:
        record_event(
            self.api, kind, obj, self.action, proposal_id, approver, what, self.config.component
        )


def record_event(
    api: KubeApi,
    kind: str,
    obj: Mapping[str, Any],
    action: str,
    proposal_id: str,
    approver: str,
    what: str,
    component: str = "pitcrew",
) -> None:
    """A `PitcrewRemediation` Event on the target (once per proposal and target)."""
    metadata = as_map(obj.get("metadata"))
    namespace, name = text_at(metadata, "namespace"), text_at(metadata, "name")
    digest = hashlib.sha1(f"{action}\x1f{proposal_id}\x1f{kind}/{name}".encode()).hexdigest()[:10]
    message = f"{action} approved by {approver or 'unknown'} (proposal {proposal_id}): {what}"
    now = _now()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name[:200]}.pitcrew-{digest}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": BY_KIND[kind].api_version,
            "kind": kind,
            "name": name,
            "namespace": namespace,
            "uid": text_at(metadata, "uid"),
            "resourceVersion": text_at(metadata, "resourceVersion"),
        },
        "reason": EVENT_REASON,
        "message": message[:1024],
        "type": "Normal",
        "action": action,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": hostname()[:128],
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
    try:
        api.create(EVENTS, namespace, event)
    except Exception as error:
        if status_of(error) == 409:
            return  # recorded by an earlier attempt of the same proposal
        log.warning("could not record the %s Event on %s %s: %s", action, kind, name, error)


# -- k8s.bump_memory -------------------------------------------------------------------------------


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
        limits = _resolve(self.site.obj, f"{resources}/limits/memory")
        ops: list[dict[str, Any]] = [*self.site.guards]
        ops += [
            _test(f"{resources}/limits/memory", limits),
            {"op": "replace", "path": f"{resources}/limits/memory", "value": self.new_limit},
        ]
        if self.request:
            requests = _resolve(self.site.obj, f"{resources}/requests/memory")
            ops += [
                _test(f"{resources}/requests/memory", requests),
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
        lines.append(CATALOG["k8s.bump_memory"].impact)
        return "\n".join(lines)


class BumpMemoryExecutor(KubeExecutor):
    """Raise the memory limit (and request) of the owning template by a bounded factor."""

    action = "k8s.bump_memory"
    rbac = (
        RbacRule("ray.io", ("rayclusters", "rayjobs"), ("get", "patch"), "patch the template"),
        RbacRule("apps", ("deployments", "statefulsets"), ("get", "patch"), "patch the template"),
        RbacRule("batch", ("jobs",), ("get", "create", "delete"), "recreate a Job"),
        RbacRule("", ("nodes",), ("list",), "node allocatable memory"),
        RbacRule("", ("resourcequotas",), ("list",), "namespace ResourceQuota"),
        RbacRule("", ("events",), ("create",), "record the remediation"),
    )

    def plan(self, params: Mapping[str, Any]) -> BumpPlan:
        p = BumpMemory.model_validate(dict(params))
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
            limit = _quantity_text(_resolve(follow.container, "/resources/limits/memory"))
            if _same_bytes(limit, primary.limit):
                plan.follow.append(
                    _Bump(
                        follow,
                        limit,
                        _quantity_text(_resolve(follow.container, "/resources/requests/memory")),
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
        limit = _quantity_text(_resolve(site.container, "/resources/limits/memory"))
        request = _quantity_text(_resolve(site.container, "/resources/requests/memory"))
        if not limit:
            raise ActionRefusedError(
                f"{site.container_label} has no memory limit to raise (an OOM kill without a "
                "limit is node memory pressure)"
            )
        cap_bytes = min(quantity.parse_bytes(p.cap), quantity.parse_bytes(self.config.max_memory))
        cap = quantity.format_bytes(cap_bytes)
        try:
            new_limit = quantity.bump(limit, p.factor, cap)
        except quantity.QuantityError as error:
            raise ActionRefusedError(f"{site.container_label}: {error}") from error
        if quantity.parse_bytes(new_limit) <= quantity.parse_bytes(limit):
            raise ActionRefusedError(
                f"{site.container_label}.resources.limits.memory is {limit}, already at "
                f"the cap of {cap}"
            )
        new_request = request
        if request:
            if _same_bytes(request, limit):
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
            nodes = [n for n in self.api.list_all(NODES) if _matches(n, selector)]
        except Exception as error:
            return False, f"cannot read node allocatable memory: {reason_of(error)}"
        if not nodes:
            wanted = ",".join(f"{k}={v}" for k, v in selector.items()) or "(any)"
            return False, f"no node matches the template's nodeSelector {wanted}"
        largest = max(_allocatable_bytes(n, "memory") for n in nodes)
        if new_limit > largest:
            return False, (
                f"{bump.new_limit} is more than the largest node allocatable memory "
                f"({quantity.format_bytes(largest)}) the template can run on"
            )
        replicas = _replicas(bump.site)
        deltas = {
            "limits.memory": (new_limit - quantity.parse_bytes(bump.limit)) * replicas,
            "requests.memory": _delta(bump.request, bump.new_request) * replicas,
        }
        deltas["memory"] = deltas["requests.memory"]
        try:
            quotas = list(self.api.list_all(RESOURCE_QUOTAS, bump.site.namespace))
        except Exception as error:
            return False, f"cannot read the namespace ResourceQuota: {reason_of(error)}"
        shown = [f"largest matching node allocatable {quantity.format_bytes(largest)}"]
        for quota in quotas:
            ok, text = _quota_fits(quota, deltas)
            shown.append(text)
            if not ok:
                return False, text
        if not quotas:
            shown.append("no ResourceQuota in the namespace")
        return True, "; ".join(shown)

    def check(self, params: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
        try:
            plan = self.plan(params)
        except ActionRefusedError as error:
            return {"k8s.within_quota": False}, f"withheld: {error}"
        except Exception as error:
            return {"k8s.within_quota": False}, f"withheld: {reason_of(error)}"
        return {"k8s.within_quota": plan.fits}, plan.preview()

    def execute(self, params: Mapping[str, Any], proposal_id: str, approver: str) -> str:
        plan = self.plan(params)
        p, primary = plan.params, plan.primary
        if _proposal_of(primary.site.obj) == proposal_id:
            return f"already applied by proposal {proposal_id}: {'; '.join(primary.lines())}"
        if p.current and not _same_bytes(primary.limit, p.current):
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
            ops = bump.ops() + _annotation_ops(bump.site.obj, PROPOSAL_ANNOTATION, proposal_id)
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
        done.append(CATALOG[self.action].impact)
        return "\n".join(done)

    def _check_read_back(self, bump: _Bump) -> None:
        site = bump.site
        after = self.api.get(site.resource, site.namespace, site.name) or {}
        again = locate(site.kind, after, _group_of(site), site.container_name)
        limit = (
            _quantity_text(_resolve(again.container, "/resources/limits/memory")) if again else ""
        )
        if not _same_bytes(limit, bump.new_limit):
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
        try:
            self.api.delete(site.resource, site.namespace, site.name, uid=uid)
        except Exception as error:
            if _is_test_failure(error):
                raise self._changed(site, "a different Job of that name") from error
            raise ActionFailedError(
                f"{site.describe()}: delete failed: {reason_of(error)}"
            ) from error
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
            except Exception as error:
                if status_of(error) != 409 or attempt == _RECREATE_ATTEMPTS - 1:
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def verify(self, params: Mapping[str, Any]) -> bool:
        p = BumpMemory.model_validate(dict(params))
        obj = self.api.get(BY_KIND[p.kind], p.namespace, p.name)
        site = locate(p.kind, obj, p.group, p.container) if obj else None
        if site is None:
            return False
        limit = _quantity_text(_resolve(site.container, "/resources/limits/memory"))
        if not limit:
            return False
        if p.current:
            return quantity.parse_bytes(limit) > quantity.parse_bytes(p.current)
        return _proposal_of(site.obj) != ""


def _group_of(site: Site) -> str:
    if site.label.endswith("headGroupSpec"):
        return "head"
    if "[" in site.label:
        return site.label.rsplit("[", 1)[1].rstrip("]")
    return ""


def _delta(old: str, new: str) -> int:
    if not old or not new:
        return 0
    return quantity.parse_bytes(new) - quantity.parse_bytes(old)


def _proposal_of(obj: Mapping[str, Any]) -> str:
    return text_at(obj, "metadata", "annotations", PROPOSAL_ANNOTATION)


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
    labels = as_map(_resolve(manifest, "/spec/template/metadata/labels"))
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


def _matches(node: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    labels = as_map(_resolve(node, "/metadata/labels"))
    return all(text_at(labels, key) == str(value) for key, value in selector.items())


def _allocatable_bytes(node: Mapping[str, Any], resource: str) -> int:
    value = _quantity_text(_resolve(node, f"/status/allocatable/{_escape(resource)}"))
    try:
        return quantity.parse_bytes(value) if value else 0
    except quantity.QuantityError:
        return 0


def _quota_fits(quota: Mapping[str, Any], deltas: Mapping[str, int]) -> tuple[bool, str]:
    name = text_at(quota, "metadata", "name")
    hard = as_map(_resolve(quota, "/status/hard")) or as_map(_resolve(quota, "/spec/hard"))
    used = as_map(_resolve(quota, "/status/used"))
    shown: list[str] = []
    for key, delta in deltas.items():
        if key not in hard or delta <= 0:
            continue
        try:
            limit = quantity.parse_bytes(_quantity_text(hard[key]))
        except quantity.QuantityError:
            return False, f"quota {name}: cannot read {key} {hard[key]!r}"
        if key not in used:
            return False, f"quota {name} reports no {key} usage yet: cannot confirm it fits"
        try:
            now = quantity.parse_bytes(_quantity_text(used[key]))
        except quantity.QuantityError:
            return False, f"quota {name}: cannot read used {key} {used[key]!r}"
        after = now + delta
        text = (
            f"quota {name} {key}: {quantity.format_bytes(now)} used + "
            f"{quantity.format_bytes(delta)} of {quantity.format_bytes(limit)}"
        )
        if after > limit:
            return False, f"{text} is over the quota"
        shown.append(text)
    return True, "; ".join(shown) or f"quota {name} does not limit memory"


# -- k8s.reschedule_gpu_pool ----------------------------------------------------------------------


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
                f"{_selector(old)} → {_selector(new)}"
            )
            if self.tolerations:
                added = ", ".join(_toleration_text(t) for t in self.tolerations)
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
    rbac = (
        RbacRule("ray.io", ("rayclusters", "rayjobs"), ("get", "patch"), "set nodeSelector"),
        RbacRule("", ("nodes",), ("list",), "GPU pool allocatable and taints"),
        RbacRule("", ("pods",), ("list",), "GPU requests on the pool, pending pods"),
        RbacRule("", ("pods",), ("delete",), "recreate the group's pending pods"),
        RbacRule("", ("events",), ("create",), "record the remediation"),
    )

    def plan(self, params: Mapping[str, Any]) -> ReschedulePlan:
        p = RescheduleGpuPool.model_validate(dict(params))
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
            _gpu_count(_resolve(c, f"/resources/requests/{_escape(gpu)}"))
            or _gpu_count(_resolve(c, f"/resources/limits/{_escape(gpu)}"))
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
        usable = [n for n in nodes if _ready(n) and not _resolve(n, "/spec/unschedulable")]
        free = self._free(usable, gpu)
        needed = max(len(pending), 1)
        fits = sum(f // per_pod for f in free.values())
        tolerations = _tolerations(usable, main.pod_spec, self.config.extra_tolerations)
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
                        _gpu_count(_resolve(c, f"/resources/requests/{_escape(gpu)}"))
                        or _gpu_count(_resolve(c, f"/resources/limits/{_escape(gpu)}"))
                        for c in as_list(_resolve(pod, "/spec/containers"))
                    )
        free: dict[str, int] = {}
        for node in nodes:
            name = text_at(node, "metadata", "name")
            allocatable = _gpu_count(_resolve(node, f"/status/allocatable/{_escape(gpu)}"))
            free[name] = max(allocatable - used[name], 0)
        return free

    def check(self, params: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
        try:
            plan = self.plan(params)
        except ActionRefusedError as error:
            return {"k8s.gpu_pool_has_capacity": False}, f"withheld: {error}"
        except Exception as error:
            return {"k8s.gpu_pool_has_capacity": False}, f"withheld: {reason_of(error)}"
        return {"k8s.gpu_pool_has_capacity": plan.has_capacity}, plan.preview(
            self.config.gpu_resource
        )

    def execute(self, params: Mapping[str, Any], proposal_id: str, approver: str) -> str:
        plan = self.plan(params)
        p = plan.params
        if all(_proposal_of(s.obj) == proposal_id for s in plan.sites):
            return f"already applied by proposal {proposal_id}"
        if not plan.has_capacity:
            raise ActionRefusedError(f"withheld: {plan.why}; nothing was changed")
        done: list[str] = []
        dry = ""
        for site in plan.sites:
            old = as_map(site.pod_spec.get("nodeSelector"))
            ops: list[dict[str, Any]] = [*site.guards]
            ops += _set(
                site.obj, f"{site.pod_spec_path}/nodeSelector", {**old, p.label_key: p.label_value}
            )
            if plan.tolerations:
                existing = [dict(as_map(t)) for t in as_list(site.pod_spec.get("tolerations"))]
                ops += _set(
                    site.obj, f"{site.pod_spec_path}/tolerations", existing + plan.tolerations
                )
            ops += _annotation_ops(site.obj, PROPOSAL_ANNOTATION, proposal_id)
            try:
                dry = self._apply(site, ops, f"nodeSelector {_selector(old)}") or dry
            except ActionRefusedError:
                if site is plan.sites[0]:
                    raise
                done.append(f"{site.describe()} changed meanwhile: not updated")
                continue
            what = (
                f"{site.label}.template.spec.nodeSelector: {_selector(old)} → "
                f"{_selector({**old, p.label_key: p.label_value})}"
            )
            if plan.tolerations:
                what += "; tolerations + " + ", ".join(
                    _toleration_text(t) for t in plan.tolerations
                )
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
            except Exception as error:
                if status_of(error) != 404:
                    done.append(f"pod {text_at(metadata, 'name')} not deleted: {reason_of(error)}")
        done.append(f"deleted pending pods: {', '.join(deleted)}" if deleted else "no pending pods")
        done.append(dry)
        return "\n".join(done)

    def verify(self, params: Mapping[str, Any]) -> bool:
        p = RescheduleGpuPool.model_validate(dict(params))
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


def _ready(node: Mapping[str, Any]) -> bool:
    for condition in as_list(_resolve(node, "/status/conditions")):
        if text_at(condition, "type") == "Ready":
            return text_at(condition, "status") == "True"
    return False


def _tolerations(
    nodes: Sequence[Mapping[str, Any]],
    pod_spec: Mapping[str, Any],
    extra: Sequence[Mapping[str, str]],
) -> list[dict[str, str]]:
    """Tolerations the group needs on the pool and does not have yet."""
    existing = [as_map(t) for t in as_list(pod_spec.get("tolerations"))]
    wanted: list[dict[str, str]] = [dict(t) for t in extra]
    for node in nodes:
        for taint in as_list(_resolve(node, "/spec/taints")):
            key, value, effect = (text_at(taint, k) for k in ("key", "value", "effect"))
            if not key or effect not in ("NoSchedule", "NoExecute"):
                continue
            if key.startswith(_SYSTEM_TAINT_PREFIXES):
                continue
            toleration = {"key": key, "operator": "Exists", "effect": effect}
            if value:
                toleration = {"key": key, "operator": "Equal", "value": value, "effect": effect}
            if toleration not in wanted:
                wanted.append(toleration)
    return [t for t in wanted if not any(_tolerates(e, t) for e in existing)]


def _tolerates(existing: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    if text_at(existing, "effect") not in ("", wanted.get("effect", "")):
        return False
    if text_at(existing, "operator") == "Exists":
        return text_at(existing, "key") in ("", wanted.get("key", ""))
    return text_at(existing, "key") == wanted.get("key") and text_at(
        existing, "value"
    ) == wanted.get("value", "")


def _toleration_text(t: Mapping[str, str]) -> str:
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key', '')}{value}:{t.get('effect', '')} ({t.get('operator', 'Equal')})"


def _selector(selector: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(selector.items())) + "}"


# -- k8s.delete_pod -------------------------------------------------------------------------------


class DeletePodExecutor(KubeExecutor):
    """Delete a Failed, Evicted or lost pod so its controller creates a fresh one."""

    action = "k8s.delete_pod"
    rbac = (
        RbacRule("", ("pods",), ("get", "delete"), "delete the failed pod"),
        RbacRule("", ("events",), ("create",), "record the remediation"),
    )

    def _state(self, params: Mapping[str, Any]) -> tuple[DeletePod, dict[str, Any], bool, str]:
        p = DeletePod.model_validate(dict(params))
        pod = self._get("Pod", p.namespace, p.name)
        phase = text_at(pod, "status", "phase")
        reason = text_at(pod, "status", "reason")
        failed = phase in ("Failed", "Unknown") or reason in _FAILED_REASONS
        owner = next(
            (
                f"{text_at(r, 'kind')}/{text_at(r, 'name')}"
                for r in as_list(_resolve(pod, "/metadata/ownerReferences"))
                if as_map(r).get("controller") is True
            ),
            "",
        )
        recreated = f"{owner} creates a new one" if owner else "no controller: it is not recreated"
        shown = ", ".join(x for x in (phase, reason) if x) or "no status"
        return p, pod, failed, f"delete pod {p.namespace}/{p.name} ({shown}); {recreated}"

    def check(self, params: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
        try:
            _, _, failed, preview = self._state(params)
        except ActionRefusedError as error:
            return {"k8s.pod_failed": False}, f"withheld: {error}"
        except Exception as error:
            return {"k8s.pod_failed": False}, f"withheld: {reason_of(error)}"
        if not failed:
            preview = f"withheld: the pod is no longer Failed or Evicted; {preview}"
        return {"k8s.pod_failed": failed}, preview

    def execute(self, params: Mapping[str, Any], proposal_id: str, approver: str) -> str:
        try:
            p, pod, failed, preview = self._state(params)
        except ActionRefusedError:
            p = DeletePod.model_validate(dict(params))
            return f"pod {p.namespace}/{p.name} is already gone"
        if not failed:
            raise ActionRefusedError(
                f"pod {p.namespace}/{p.name} is no longer Failed or Evicted; nothing was deleted"
            )
        self._record("Pod", pod, proposal_id, approver, preview)
        try:
            self.api.delete(PODS, p.namespace, p.name, uid=text_at(pod, "metadata", "uid"))
        except Exception as error:
            if status_of(error) == 404:
                return f"pod {p.namespace}/{p.name} is already gone"
            if _is_test_failure(error):
                raise ActionRefusedError(
                    f"pod {p.namespace}/{p.name} was replaced meanwhile; nothing was deleted"
                ) from error
            raise ActionFailedError(f"delete failed: {reason_of(error)}") from error
        return preview

    def verify(self, params: Mapping[str, Any]) -> bool:
        p = DeletePod.model_validate(dict(params))
        pod = self.api.get(PODS, p.namespace, p.name)
        if pod is None:
            return True
        phase = text_at(pod, "status", "phase")
        return phase not in ("Failed", "Unknown") and not text_at(
            pod, "metadata", "deletionTimestamp"
        )


EXECUTORS: Mapping[str, type[KubeExecutor]] = {
    BumpMemoryExecutor.action: BumpMemoryExecutor,
    RescheduleGpuPoolExecutor.action: RescheduleGpuPoolExecutor,
    DeletePodExecutor.action: DeletePodExecutor,
}


def executors(api: KubeApi, config: KubeActionConfig | None = None) -> dict[str, KubeExecutor]:
    """One executor per Kubernetes action id."""
    return {action: cls(api, config) for action, cls in EXECUTORS.items()}


# -- the daemon's registry ------------------------------------------------------------------------


class KubernetesExecutor:
    """`bot.daemon.runner.Executor` for the three Kubernetes actions (select it with
    `actions.executors: {"k8s.*": kubernetes}`)."""

    def __init__(self, api: KubeApi, config: KubeActionConfig | None = None) -> None:
        self.executors = executors(api, config)

    def _for(self, proposal: Proposal) -> KubeExecutor:
        executor = self.executors.get(proposal.action)
        if executor is None:
            raise ActionRefusedError(f"the Kubernetes executor does not run {proposal.action}")
        return executor

    def check(self, proposal: Proposal) -> LiveCheck:
        """Live facts, and the proposal's own preview recomputed from live values (a
        memory limit changed since the offer makes it differ, so approval refuses)."""
        executor = self._for(proposal)
        facts, _ = executor.check(proposal.params)
        return LiveCheck(facts=facts, preview=self._catalog_preview(proposal))

    def _catalog_preview(self, proposal: Proposal) -> str | None:
        spec = CATALOG[proposal.action]
        try:
            model = spec.params.model_validate(dict(proposal.params))
        except ValueError:
            return None
        if isinstance(model, BumpMemory) and model.current:
            obj = self.executors[proposal.action].api.get(
                BY_KIND[model.kind], model.namespace, model.name
            )
            site = locate(model.kind, obj, model.group, model.container) if obj else None
            live = (
                _quantity_text(_resolve(site.container, "/resources/limits/memory")) if site else ""
            )
            if live and not _same_bytes(live, model.current):
                model = model.model_copy(update={"current": live})
        return spec.preview(model)

    def execute(self, proposal: Proposal) -> str:
        return self._for(proposal).execute(proposal.params, proposal.id, _approver(proposal))

    def verify(self, proposal: Proposal) -> Verification:
        ok = self._for(proposal).verify(proposal.params)
        return Verification(ok, "in place" if ok else "the change is not visible on the target")


def _approver(proposal: Proposal) -> str:
    if proposal.approvals:
        return ", ".join(proposal.approvals)
    return next((t.actor for t in proposal.history if t.to_state is ProposalState.APPROVED), "")


def build(settings: Settings) -> KubernetesExecutor:
    """The executor kind `kubernetes` (bot.daemon.runner loads it by this name)."""
    kube = settings.sources.kubernetes
    api = KubeApi.from_config(
        str(kube.kubeconfig) if kube.kubeconfig else None,
        kube.context or None,
        in_cluster=kube.in_cluster or None,
    )
    bump = settings.actions.bump_memory
    return KubernetesExecutor(api, KubeActionConfig(max_memory=bump.cap))


RBAC: tuple[RbacRule, ...] = tuple(rule for cls in EXECUTORS.values() for rule in cls.rbac)

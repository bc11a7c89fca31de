"""kuberay.recreate_rayjob: run a failed RayJob again as a RayJob, not behind its back.

Why this exists: resubmitting a KubeRay-owned job through the Ray Jobs API leaves the
RayJob `Failed` (and with `shutdownAfterJobFinishes` its cluster may be gone). The
rerun KubeRay understands is a new RayJob with the same spec: under the same name once
the old one is deleted (guarded by its uid; KubeRay's garbage collection takes its
RayCluster), or as `<name>-retry-N` beside it (`actions.recreate_rayjob.naming`). The
spec is the RayJob's as it stands now, so a memory bump already applied to its
`rayClusterSpec` is in the rerun; the preview shows the entrypoint and each group's
memory. A playbook may name one entrypoint override (`key=value`, e.g.
`trainer.ray_wait_register_center_timeout=600`), set in the new entrypoint. Verified
when the new RayJob reaches `Running` (or finishes `Complete`).
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.adapters.kubernetes.api import RAY_JOBS, KubeApi, RbacRule
from bot.adapters.kubernetes.base import KubeActionConfig, KubeExecutor, guarded, rules_of
from bot.adapters.kubernetes.errors import (
    ConflictError,
    KubeApiError,
    NotFoundError,
    reason_of,
)
from bot.adapters.kubernetes.templates import (
    PROPOSAL_ANNOTATION,
    RERUN_ANNOTATION,
    annotation_ops,
    proposal_of,
    test_op,
)
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.entrypoint import with_override
from bot.core.actions.params import RecreateRayJob
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.errors import ActionFailedError, ActionRefusedError
from bot.core.inputs.values import as_list, as_map, text_at

FACT = "kuberay.rayjob_finished"
RECREATED_FROM = "pitcrew.io/recreated-from"
FINISHED = frozenset({"Failed", "Complete"})
RUNNING = frozenset({"Running", "Complete"})
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")
_RETRY = re.compile(r"^(?P<base>.+?)-retry-(?P<n>\d+)$")


@dataclass(frozen=True)
class Rerun:
    """The RayJob to replace and the manifest of the one to create."""

    old: Mapping[str, Any]
    manifest: dict[str, Any]
    delete_first: bool

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])

    def lines(self) -> list[str]:
        namespace = text_at(self.old, "metadata", "namespace")
        old = text_at(self.old, "metadata", "name")
        state = text_at(self.old, "status", "jobDeploymentStatus") or "no status"
        first = (
            f"delete RayJob {namespace}/{old} ({state}), then create RayJob {namespace}/"
            f"{self.name} with the same spec"
            if self.delete_first
            else f"create RayJob {namespace}/{self.name} with the spec of {old} ({state})"
        )
        spec = as_map(self.manifest.get("spec"))
        lines = [first, f"  entrypoint: {text_at(spec, 'entrypoint') or '(none)'}"]
        cluster = as_map(spec.get("rayClusterSpec"))
        for label, group in _groups(cluster):
            lines.append(f"  {label}: {_memory(group)}")
        if spec.get("shutdownAfterJobFinishes") is True:
            lines.append("  shutdownAfterJobFinishes: true (its RayCluster goes when it ends)")
        return lines


def _groups(cluster: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    found: list[tuple[str, Mapping[str, Any]]] = []
    if cluster.get("headGroupSpec"):
        found.append(("rayClusterSpec.headGroupSpec", as_map(cluster.get("headGroupSpec"))))
    for group in as_list(cluster.get("workerGroupSpecs")):
        name = text_at(group, "groupName")
        found.append((f"rayClusterSpec.workerGroupSpecs[{name}]", as_map(group)))
    return found


def _memory(group: Mapping[str, Any]) -> str:
    containers = as_list(as_map(as_map(group.get("template")).get("spec")).get("containers"))
    shown = [
        f"{text_at(c, 'name')} memory {text_at(c, 'resources', 'limits', 'memory') or 'no limit'}"
        for c in containers
    ]
    replicas = group.get("replicas", group.get("minReplicas"))
    count = f" × {replicas}" if isinstance(replicas, int) else ""
    return ", ".join(shown) + count


def fresh_manifest(
    rayjob: Mapping[str, Any], name: str, proposal_id: str, override: str
) -> dict[str, Any]:
    """The RayJob to create: its spec (an override set in the entrypoint), its labels and
    annotations, server-set fields, the status and `spec.jobId` dropped (KubeRay makes a
    new submission id)."""
    manifest: dict[str, Any] = {
        "apiVersion": text_at(rayjob, "apiVersion") or "ray.io/v1",
        "kind": "RayJob",
        "metadata": copy.deepcopy(dict(as_map(rayjob.get("metadata")))),
        "spec": copy.deepcopy(dict(as_map(rayjob.get("spec")))),
    }
    metadata = manifest["metadata"]
    for key in (*_SERVER_FIELDS, "ownerReferences", "finalizers", "deletionTimestamp"):
        metadata.pop(key, None)
    metadata.get("annotations", {}).pop(RERUN_ANNOTATION, None)
    metadata["name"] = name
    annotations = metadata.setdefault("annotations", {})
    annotations[PROPOSAL_ANNOTATION] = proposal_id
    annotations[RECREATED_FROM] = text_at(rayjob, "metadata", "uid")
    manifest["spec"].pop("jobId", None)
    if override and manifest["spec"].get("entrypoint"):
        manifest["spec"]["entrypoint"] = with_override(manifest["spec"]["entrypoint"], override)
    return manifest


def retry_name(name: str, taken: Callable[[str], bool]) -> str:
    """`<base>-retry-N` with the first N not taken (a retry of a retry counts on)."""
    found = _RETRY.match(name)
    base, n = (found["base"], int(found["n"])) if found else (name, 0)
    while True:
        n += 1
        candidate = f"{base}-retry-{n}"
        if not taken(candidate):
            return candidate


class RecreateRayJobExecutor(KubeExecutor):
    """Delete a finished RayJob and create it again (or create `-retry-N` beside it)."""

    action = "kuberay.recreate_rayjob"
    verify_timeout = 120.0
    poll = 0.5

    def plan(self, step: Step) -> Rerun | None:
        """The rerun to make; None when this proposal has made it already."""
        p, proposal_id = self.validated(RecreateRayJob, step.params), step.proposal_id
        old = self._get("RayJob", p.namespace, p.name)
        if proposal_id and proposal_of(old) == proposal_id:
            return None
        state = text_at(old, "status", "jobDeploymentStatus")
        if state not in FINISHED:
            raise ActionRefusedError(
                f"RayJob {p.namespace}/{p.name} is {state or 'without a status'}, not Failed "
                "or Complete: it is not rerun while it may still run"
            )
        name = p.name
        if p.naming == "retry":
            name = retry_name(p.name, lambda n: self.api.get(RAY_JOBS, p.namespace, n) is not None)
        manifest = fresh_manifest(old, name, proposal_id, p.override)
        return Rerun(old, manifest, delete_first=p.naming == "same")

    def check(self, step: Step, plan: Rerun | None) -> LiveCheck:
        if plan is None:
            done = f"already applied by proposal {step.proposal_id}"
            return self.live(step, {FACT: True}, done, done=done)
        return self.live(
            step, {FACT: True}, "\n".join([*plan.lines(), ACTION_SPECS[self.action].impact])
        )

    def execute(self, step: Step, plan: Rerun | None) -> str:
        p = self.validated(RecreateRayJob, step.params)
        proposal_id, approver = step.proposal_id, step.approver
        if plan is None:
            return f"already applied by proposal {proposal_id}"
        rerun = plan
        if rerun.delete_first:
            self._mark(rerun.old, proposal_id)
            self._delete(rerun.old)
        created = self._create(rerun)
        what = "; ".join(line.strip() for line in rerun.lines())
        self._record("RayJob", created, proposal_id, approver, what)
        return f"RayJob {p.namespace}/{rerun.name} created: {what}"

    def _mark(self, old: Mapping[str, Any], proposal_id: str) -> None:
        """Say on the old RayJob that it is deleted for a rerun, so its deletion does not
        read as the workload going away (its incident stays open for the rerun)."""
        namespace, name = text_at(old, "metadata", "namespace"), text_at(old, "metadata", "name")
        ops = [test_op("/metadata/uid", text_at(old, "metadata", "uid"))]
        ops += annotation_ops(old, RERUN_ANNOTATION, proposal_id)
        with guarded(_replaced(namespace, name), f"RayJob {namespace}/{name}"):
            self.api.patch(RAY_JOBS, namespace, name, ops)

    def _delete(self, old: Mapping[str, Any]) -> None:
        namespace, name = text_at(old, "metadata", "namespace"), text_at(old, "metadata", "name")
        with guarded(_replaced(namespace, name), "delete failed"):
            try:
                self.api.delete(RAY_JOBS, namespace, name, uid=text_at(old, "metadata", "uid"))
            except NotFoundError:
                return  # deleted already (by a person, or an earlier attempt)

    def _create(self, rerun: Rerun) -> dict[str, Any]:
        """Create the new RayJob, waiting (a little) while the old one is being deleted."""
        namespace = str(rerun.manifest["metadata"].get("namespace") or "")
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.api.create(RAY_JOBS, namespace, rerun.manifest)
            except KubeApiError as error:
                if not isinstance(error, ConflictError) or time.monotonic() > deadline:
                    raise ActionFailedError(
                        f"RayJob {namespace}/{rerun.name} could not be created: {reason_of(error)}"
                    ) from error
                time.sleep(self.poll)

    def verified(self, params: Mapping[str, Any]) -> bool:
        """The new RayJob (this proposal's) reaches Running, or finishes Complete."""
        p = RecreateRayJob.check(params)
        deadline = time.monotonic() + self.verify_timeout
        while True:
            found = self._rerun_of(p)
            state = text_at(found, "status", "jobDeploymentStatus") if found else ""
            if state in RUNNING:
                return True
            if state == "Failed" or time.monotonic() > deadline:
                return False
            time.sleep(self.poll)

    def _rerun_of(self, p: RecreateRayJob) -> Mapping[str, Any] | None:
        if p.naming == "same":
            found = self.api.get(RAY_JOBS, p.namespace, p.name)
            return (
                found
                if found and text_at(found, "metadata", "annotations", RECREATED_FROM)
                else None
            )
        pattern = re.compile(rf"^{re.escape(p.name)}-retry-\d+$")
        reruns = [
            j
            for j in self.api.list_all(RAY_JOBS, p.namespace)
            if pattern.match(text_at(j, "metadata", "name"))
        ]
        return reruns[-1] if reruns else None


RERUN_EXECUTORS: Mapping[str, type[KubeExecutor]] = {
    RecreateRayJobExecutor.action: RecreateRayJobExecutor
}


RBAC: tuple[RbacRule, ...] = rules_of(RERUN_EXECUTORS)


def executors(api: KubeApi, config: KubeActionConfig | None = None) -> dict[str, KubeExecutor]:
    """The executor kind `kuberay`: one executor per KubeRay action id."""
    return {action: cls(api, config) for action, cls in RERUN_EXECUTORS.items()}


def _replaced(namespace: str, name: str) -> str:
    return f"RayJob {namespace}/{name} was replaced meanwhile; nothing was deleted"

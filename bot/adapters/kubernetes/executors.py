"""The Kubernetes executors: which actions there are, and k8s.delete_pod.

Why this exists: the executor kind `kubernetes` (`bot.app.factories`) runs one
executor per Kubernetes action, each a `bot.daemon.ports.Executor`:

- `plan(step)` / `check(step, plan)`: read live state; the facts the action's spec
  names as preconditions (`k8s.within_quota`, `k8s.gpu_pool_has_capacity`,
  `k8s.pod_failed`), the spec's preview of the parameters as offered now, and a
  live diff. Read-only.
- `execute(step, plan)`: refuse (`ActionRefusedError`) when the plan no longer holds,
  then a server-side dry-run and the change as a JSON patch whose `test` operations
  pin every value the preview showed (`bot.adapters.kubernetes.templates`).
  Idempotent per proposal (the target remembers the proposal id in an annotation).
  Records a `PitcrewRemediation` Event naming the approver.
- `verify(step)`: whether the change is in place.

The actions live in their own modules (`bump`, `reschedule`, `shm`, `scale`,
`cordon`, `replace`); the RBAC each needs is in its spec (`RBAC`, docs/rbac.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.adapters.kubernetes.api import PODS, KubeApi, RbacRule
from bot.adapters.kubernetes.base import (
    KubeActionConfig,
    KubeExecutor,
    guarded,
    rules_of,
)
from bot.adapters.kubernetes.bump import BumpMemoryExecutor
from bot.adapters.kubernetes.cordon import CordonNodeExecutor
from bot.adapters.kubernetes.errors import CHECK_ERRORS, NotFoundError, reason_of
from bot.adapters.kubernetes.replace import ReplaceWorkerPodsExecutor
from bot.adapters.kubernetes.reschedule import RescheduleGpuPoolExecutor
from bot.adapters.kubernetes.scale import ScaleWorkerGroupExecutor
from bot.adapters.kubernetes.shm import AddShmExecutor
from bot.adapters.kubernetes.templates import (
    resolve,
)
from bot.core.actions.params import DeletePod
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError
from bot.core.inputs.values import as_list, as_map, text_at

_FAILED_REASONS = frozenset(
    {"Evicted", "NodeLost", "NodeShutdown", "Terminated", "UnexpectedAdmissionError"}
)


class DeletePodExecutor(KubeExecutor):
    """Delete a Failed, Evicted or lost pod so its controller creates a fresh one."""

    action = "k8s.delete_pod"

    def _state(self, params: Mapping[str, Any]) -> tuple[DeletePod, dict[str, Any], bool, str]:
        p = DeletePod.check(params)
        pod = self._get("Pod", p.namespace, p.name)
        phase = text_at(pod, "status", "phase")
        reason = text_at(pod, "status", "reason")
        failed = phase in ("Failed", "Unknown") or reason in _FAILED_REASONS
        owner = next(
            (
                f"{text_at(r, 'kind')}/{text_at(r, 'name')}"
                for r in as_list(resolve(pod, "/metadata/ownerReferences"))
                if as_map(r).get("controller") is True
            ),
            "",
        )
        recreated = f"{owner} creates a new one" if owner else "no controller: it is not recreated"
        shown = ", ".join(x for x in (phase, reason) if x) or "no status"
        return p, pod, failed, f"delete pod {p.namespace}/{p.name} ({shown}); {recreated}"

    def look(self, params: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
        try:
            _, _, failed, preview = self._state(params)
        except ActionRefusedError as error:
            return {"k8s.pod_failed": False}, f"withheld: {error}"
        except CHECK_ERRORS as error:
            return {"k8s.pod_failed": False}, f"withheld: {reason_of(error)}"
        if not failed:
            preview = f"withheld: the pod is no longer Failed or Evicted; {preview}"
        return {"k8s.pod_failed": failed}, preview

    def execute(self, step: Step, plan: Any) -> str:
        params, proposal_id, approver = step.params, step.proposal_id, step.approver
        try:
            p, pod, failed, preview = self._state(params)
        except ActionRefusedError:
            p = DeletePod.check(params)
            return f"pod {p.namespace}/{p.name} is already gone"
        if not failed:
            raise ActionRefusedError(
                f"pod {p.namespace}/{p.name} is no longer Failed or Evicted; nothing was deleted"
            )
        self._record("Pod", pod, proposal_id, approver, preview)
        replaced = f"pod {p.namespace}/{p.name} was replaced meanwhile; nothing was deleted"
        with guarded(replaced, "delete failed"):
            try:
                self.api.delete(PODS, p.namespace, p.name, uid=text_at(pod, "metadata", "uid"))
            except NotFoundError:
                return f"pod {p.namespace}/{p.name} is already gone"
        return preview

    def verified(self, params: Mapping[str, Any]) -> bool:
        p = DeletePod.check(params)
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
    AddShmExecutor.action: AddShmExecutor,
    ScaleWorkerGroupExecutor.action: ScaleWorkerGroupExecutor,
    CordonNodeExecutor.action: CordonNodeExecutor,
    ReplaceWorkerPodsExecutor.action: ReplaceWorkerPodsExecutor,
}


def executors(api: KubeApi, config: KubeActionConfig | None = None) -> dict[str, KubeExecutor]:
    """The executor kind `kubernetes`: one executor per Kubernetes action id."""
    return {action: cls(api, config) for action, cls in EXECUTORS.items()}


RBAC: tuple[RbacRule, ...] = rules_of(EXECUTORS)

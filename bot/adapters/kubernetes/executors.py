"""The Kubernetes executors: which actions there are, k8s.delete_pod, the daemon's adapter.

Why this exists: the daemon's registry (`bot.daemon.runner.Executor`, built by
`bot.app.factories`) runs one executor per Kubernetes action; each has the same three
steps:

- `check(params) -> (facts, preview)`: read live state; the facts the action's
  guards name (`k8s.within_quota`, `k8s.gpu_pool_has_capacity`, `k8s.pod_failed`)
  and a preview that shows the diff. Read-only.
- `execute(params, proposal_id, approver) -> str`: re-read, refuse
  (`ActionRefusedError`) when the preview no longer holds, then a server-side dry-run
  and the change as a JSON patch whose `test` operations pin every value the preview
  showed (`bot.adapters.kubernetes.templates`). Idempotent per proposal (the target
  remembers the proposal id in an annotation). Records a `PitcrewRemediation` Event.
- `verify(params) -> bool`: whether the change is in place.

The actions live in their own modules (`bump`, `reschedule`, `shm`, `scale`,
`cordon`); every executor declares
the RBAC it needs (`RBAC`, docs/rbac.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.adapters.kubernetes.api import BY_KIND, PODS, KubeApi, RbacRule
from bot.adapters.kubernetes.base import (
    KubeActionConfig,
    KubeExecutor,
    is_test_failure,
    rules_of,
)
from bot.adapters.kubernetes.bump import BumpMemoryExecutor
from bot.adapters.kubernetes.capacity import quantity_text, same_bytes
from bot.adapters.kubernetes.cordon import CordonNodeExecutor
from bot.adapters.kubernetes.errors import CHECK_ERRORS, KubeApiError, NotFoundError, reason_of
from bot.adapters.kubernetes.reschedule import RescheduleGpuPoolExecutor
from bot.adapters.kubernetes.scale import ScaleWorkerGroupExecutor
from bot.adapters.kubernetes.shm import AddShmExecutor
from bot.adapters.kubernetes.templates import (
    locate,
    resolve,
)
from bot.core.actions.catalog import CATALOG, BumpMemory, DeletePod
from bot.core.approvals import LiveCheck
from bot.core.errors import ActionFailedError, ActionRefusedError
from bot.core.inputs.values import as_list, as_map, text_at
from bot.core.model import Proposal, ProposalState
from bot.daemon.runner import Verification

_FAILED_REASONS = frozenset(
    {"Evicted", "NodeLost", "NodeShutdown", "Terminated", "UnexpectedAdmissionError"}
)


class DeletePodExecutor(KubeExecutor):
    """Delete a Failed, Evicted or lost pod so its controller creates a fresh one."""

    action = "k8s.delete_pod"

    def _state(self, params: Mapping[str, Any]) -> tuple[DeletePod, dict[str, Any], bool, str]:
        p = DeletePod.model_validate(dict(params))
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

    def check(self, params: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
        try:
            _, _, failed, preview = self._state(params)
        except ActionRefusedError as error:
            return {"k8s.pod_failed": False}, f"withheld: {error}"
        except CHECK_ERRORS as error:
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
        except NotFoundError:
            return f"pod {p.namespace}/{p.name} is already gone"
        except KubeApiError as error:
            if is_test_failure(error):
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
    AddShmExecutor.action: AddShmExecutor,
    ScaleWorkerGroupExecutor.action: ScaleWorkerGroupExecutor,
    CordonNodeExecutor.action: CordonNodeExecutor,
}


def executors(api: KubeApi, config: KubeActionConfig | None = None) -> dict[str, KubeExecutor]:
    """One executor per Kubernetes action id."""
    return {action: cls(api, config) for action, cls in EXECUTORS.items()}


class KubernetesExecutor:
    """`bot.daemon.runner.Executor` for the Kubernetes actions (select it with
    `actions.executors: {"k8s.*": kubernetes}`)."""

    def __init__(
        self,
        api: KubeApi,
        config: KubeActionConfig | None = None,
        classes: Mapping[str, type[KubeExecutor]] | None = None,
    ) -> None:
        kinds = EXECUTORS if classes is None else classes
        self.executors = {action: cls(api, config) for action, cls in kinds.items()}

    def _for(self, proposal: Proposal) -> KubeExecutor:
        executor = self.executors.get(proposal.action)
        if executor is None:
            raise ActionRefusedError(f"the Kubernetes executor does not run {proposal.action}")
        return executor

    def check(self, proposal: Proposal) -> LiveCheck:
        """Live facts with the reason one fails, and the proposal's own preview (and
        parameters) recomputed from live values: a memory limit changed since the offer
        makes the preview differ, so approval refuses and offers the fresh one."""
        executor = self._for(proposal)
        facts, preview = executor.check(proposal.params)
        params = self._live_params(proposal)
        return LiveCheck(
            facts=facts,
            preview=self._catalog_preview(proposal.action, params),
            reason=withheld_reason(preview),
            params=params,
        )

    def _live_params(self, proposal: Proposal) -> dict[str, Any] | None:
        """The parameters as the action would be offered now (the live memory limit)."""
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
                quantity_text(resolve(site.container, "/resources/limits/memory")) if site else ""
            )
            if live and not same_bytes(live, model.current):
                model = model.model_copy(update={"current": live})
        return model.model_dump()

    def _catalog_preview(self, action: str, params: Mapping[str, Any] | None) -> str | None:
        if params is None:
            return None
        spec = CATALOG[action]
        return spec.preview(spec.params.model_validate(dict(params)))

    def execute(self, proposal: Proposal) -> str:
        return self._for(proposal).execute(proposal.params, proposal.id, _approver(proposal))

    def verify(self, proposal: Proposal) -> Verification:
        ok = self._for(proposal).verify(proposal.params)
        return Verification(ok, "in place" if ok else "the change is not visible on the target")


def withheld_reason(preview: str) -> str:
    """Why a check withholds the action: its preview's `withheld: ...` line, if any."""
    for line in preview.splitlines():
        if line.startswith("withheld: "):
            return line.removeprefix("withheld: ")
    return ""


def _approver(proposal: Proposal) -> str:
    if proposal.approvals:
        return ", ".join(proposal.approvals)
    return next((t.actor for t in proposal.history if t.to_state is ProposalState.APPROVED), "")


RBAC: tuple[RbacRule, ...] = rules_of(EXECUTORS)

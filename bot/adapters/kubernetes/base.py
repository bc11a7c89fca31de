"""What every Kubernetes executor shares: limits, dry-run, guarded patches, the Event.

Why this exists: an approved remediation has to change the right object, only if it
is still safe, never overwrite a change someone made since the preview, and leave a
trace in the cluster. `KubeExecutor` holds the steps every action needs for that:
reading the target (refused when it is gone), probing whether the API server honours
`dryRun=All`, applying a JSON patch whose failed `test` means "changed since read"
(refused, nothing overwritten), and recording a `PitcrewRemediation` Event.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from bot.adapters.kubernetes.api import (
    BY_KIND,
    EVENTS,
    RAY_CLUSTERS,
    RAY_JOBS,
    KubeApi,
    RbacRule,
    hostname,
)
from bot.adapters.kubernetes.errors import (
    ConflictError,
    InvalidError,
    KubeApiError,
    UnavailableError,
    reason_of,
)
from bot.adapters.kubernetes.templates import (
    PROPOSAL_ANNOTATION,
    Site,
    escape,
    proposal_of,
    resolve,
    test_op,
)
from bot.core.actions.approvals import LiveCheck
from bot.core.actions.params import ActionParams
from bot.core.actions.specs import ACTION_SPECS
from bot.core.actions.step import Step
from bot.core.errors import ActionFailedError, ActionRefusedError
from bot.core.inputs.values import as_list, as_map, text_at
from bot.daemon.ports import Verification

log = logging.getLogger("pitcrew.actions.kubernetes")

P = TypeVar("P", bound=ActionParams)
PROBE_ANNOTATION = "pitcrew.io/dry-run-probe"
EVENT_REASON = "PitcrewRemediation"
CLUSTER_ANNOTATION = "pitcrew.io/cluster"


@dataclass(frozen=True)
class KubeActionConfig:
    """Limits the cluster operator sets; playbook parameters can only be stricter."""

    max_memory: str = "512Gi"  # absolute cap on any memory limit pitcrew writes
    gpu_resource: str = "nvidia.com/gpu"
    extra_tolerations: tuple[Mapping[str, str], ...] = ()
    dry_run: bool = True  # server-side dry-run before each patch
    component: str = "pitcrew"
    cluster: str = ""  # this pitcrew's cluster, named on each remediation Event


def is_test_failure(error: BaseException) -> bool:
    """A JSON patch `test` failed: 422 on a real API server (409 for a conflict); an
    emulator may answer 500 naming the failed test."""
    if isinstance(error, ConflictError | InvalidError):
        return True
    text = reason_of(error).lower()
    return isinstance(error, UnavailableError) and any(
        w in text for w in ("jsonpatch", "jsonpointer", "tested value")
    )


@contextlib.contextmanager
def guarded(changed: str, failed: str, *, dry_run: bool = False) -> Iterator[None]:
    """Around a write its own guard protects (a JSON patch `test`, a uid precondition):
    a failed guard means the object changed since pitcrew read it, and the action is
    refused with `changed` (nothing was overwritten); any other API error says `failed`
    and the server's reason: the action failed, or, for a server-side dry-run, is
    refused with nothing changed."""
    try:
        yield
    except KubeApiError as error:
        if is_test_failure(error):
            raise ActionRefusedError(changed) from error
        if dry_run:
            why = f"{failed}: {reason_of(error)}; nothing was changed"
            raise ActionRefusedError(why) from error
        raise ActionFailedError(f"{failed}: {reason_of(error)}") from error


def changed_since_read(site: Site, what: str) -> str:
    """Why a write to `site` was refused when its guard failed (`what`: what pitcrew read)."""
    return (
        f"{site.describe()} changed after pitcrew read it ({what}): the patch's test "
        "operation failed on the API server, so nothing was overwritten; "
        "re-diagnose for a fresh proposal"
    )


def withheld_reason(diff: str) -> str:
    """Why a check withholds the action: its diff's `withheld: ...` line, if any."""
    for line in diff.splitlines():
        if line.startswith("withheld: "):
            return line.removeprefix("withheld: ")
    return ""


def rules_of(executors: Mapping[str, object]) -> tuple[RbacRule, ...]:
    """The RBAC the actions of `executors` need, as their specs declare it."""
    return tuple(
        RbacRule(p.group, p.resources, p.verbs, p.why)
        for action in executors
        for p in ACTION_SPECS[action].rbac
    )


def marked_with(ops: list[dict[str, Any]]) -> str:
    """The proposal a JSON patch marks its target with (`pitcrew.io/last-proposal`)."""
    key = f"/metadata/annotations/{escape(PROPOSAL_ANNOTATION)}"
    for op in ops:
        if op.get("op") in ("add", "replace") and op.get("path") == key:
            return str(op.get("value") or "")
        if op.get("path") == "/metadata/annotations" and isinstance(op.get("value"), Mapping):
            return str(op["value"].get(PROPOSAL_ANNOTATION) or "")
    return ""


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeExecutor(ABC):
    """What every Kubernetes executor shares: the API, the limits, dry-run detection,
    guarded patches and the remediation Event. Each is a `bot.daemon.ports.Executor`
    of its one action: an executor with no plan of its own plans by `look` (the facts
    and the live diff); one with a plan (`BumpPlan`, `Rerun`) overrides `plan` and
    `check`."""

    action = ""

    def __init__(self, api: KubeApi, config: KubeActionConfig | None = None) -> None:
        self.api = api
        self.config = config or KubeActionConfig()
        self._dry_run: dict[str, bool] = {}

    def plan(self, step: Step) -> Any:
        return self.look(step.params)

    def check(self, step: Step, plan: Any) -> LiveCheck:
        facts, diff = plan
        return self.live(step, facts, diff)

    def look(self, params: Mapping[str, Any]) -> tuple[dict[str, bool], str]:
        """The facts the action's preconditions name and the live diff (read-only)."""
        raise NotImplementedError(f"{self.action} plans with its own `plan`")

    @abstractmethod
    def execute(self, step: Step, plan: Any) -> str:
        """Apply the change; raises ActionRefusedError when it no longer holds."""

    def verify(self, step: Step) -> Verification:
        ok = self.verified(step.params)
        return Verification(ok, "in place" if ok else "the change is not visible on the target")

    @abstractmethod
    def verified(self, params: Mapping[str, Any]) -> bool:
        """Whether the change is in place."""

    def live(
        self,
        step: Step,
        facts: Mapping[str, bool],
        diff: str,
        params: Mapping[str, Any] | None = None,
        done: str = "",
    ) -> LiveCheck:
        """The check's answer: `facts`, the spec's preview of the parameters as
        offered now (`params`, else the step's; it differs from the offered preview when
        the target changed since), why a fact does not hold (the diff's `withheld:`
        line), the live diff, and `done` when the target carries this proposal's change."""
        spec = ACTION_SPECS[self.action]
        try:
            model = spec.params.check(step.params if params is None else params)
        except ValueError:
            return LiveCheck(facts=facts, reason=withheld_reason(diff), diff=diff, done=done)
        return LiveCheck(
            facts=facts,
            preview=spec.preview(model),
            reason=withheld_reason(diff),
            params=model.as_dict(),
            diff=diff,
            done=done,
        )

    def done_by(self, step: Step, *objects: Mapping[str, Any]) -> str:
        """What is in place when every one of `objects` carries this step's proposal in
        `pitcrew.io/last-proposal` ("" otherwise, or before there is a proposal)."""
        if not step.proposal_id or not objects:
            return ""
        if any(proposal_of(obj) != step.proposal_id for obj in objects):
            return ""
        return f"already applied by proposal {step.proposal_id}"

    def validated(self, model: type[P], params: Mapping[str, Any]) -> P:
        """The action's parameters, or refused naming what is invalid."""
        try:
            return model.check(params)
        except ValueError as error:
            raise ActionRefusedError(f"{self.action}: invalid parameters: {error}") from None

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

    def _twins(self, kind: str, obj: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
        """The object and the other copy of its template, the live one first: a RayJob's
        RayCluster then the RayJob, a RayCluster then the RayJob that owns it."""
        if kind == "RayJob":
            live = self._live_cluster(obj)
            return [*([("RayCluster", live)] if live is not None else []), ("RayJob", obj)]
        owner = self._owner_rayjob(obj) if kind == "RayCluster" else None
        return [(kind, obj), *([("RayJob", owner)] if owner is not None else [])]

    def dry_run_honoured(self, site: Site) -> bool:
        """Whether the API server honours `dryRun=All`, probed once per server with an
        annotation on the target: a server that ignores dryRun (an emulator) applies the
        probe, which is then detected and taken back. The probe is a merge patch, so
        whatever annotations the target gained since it was read stay."""
        if not self.config.dry_run:
            return False
        known = self._dry_run.get(self.api.host)
        if known is not None:
            return known
        nonce = uuid.uuid4().hex[:12]
        resource = site.resource
        probe = {"metadata": {"annotations": {PROBE_ANNOTATION: nonce}}}
        self.api.patch(resource, site.namespace, site.name, probe, dry_run=True)
        after = self.api.get(resource, site.namespace, site.name) or {}
        annotations = as_map(resolve(after, "/metadata/annotations"))
        honoured = annotations.get(PROBE_ANNOTATION) != nonce
        if not honoured:
            path = f"/metadata/annotations/{escape(PROBE_ANNOTATION)}"
            self.api.patch(
                resource,
                site.namespace,
                site.name,
                [test_op(path, nonce), {"op": "remove", "path": path}],
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
        since it was read: refused, nothing overwritten; unless the target now carries
        the proposal this patch marks it with (a deposed leader's late patch, or two
        replicas' runs of one proposal): then it is done, by the other."""
        try:
            return self._patch(site, ops, what)
        except ActionRefusedError as refused:
            cause = refused.__cause__
            made = self._made_meanwhile(site, ops) if cause and is_test_failure(cause) else ""
            if made:
                return made
            raise

    def _patch(self, site: Site, ops: list[dict[str, Any]], what: str) -> str:
        resource = site.resource
        dry = "server-side dry-run skipped: this API server ignores dryRun"
        changed = changed_since_read(site, what)
        if self.dry_run_honoured(site):
            rejected = f"{site.describe()}: the server-side dry-run rejected the change"
            with guarded(changed, rejected, dry_run=True):
                self.api.patch(resource, site.namespace, site.name, ops, dry_run=True)
            dry = "server-side dry-run passed"
        elif not self.config.dry_run:
            dry = "server-side dry-run off (config)"
        with guarded(changed, f"{site.describe()}: the API server refused the patch"):
            self.api.patch(resource, site.namespace, site.name, ops)
        return dry

    def _made_meanwhile(self, site: Site, ops: list[dict[str, Any]]) -> str:
        """Why a patch whose `test` failed is done all the same: the target now carries
        the very proposal the patch marks it with (another replica made the change, e.g.
        the leader that took over after a failover); "" when it does not."""
        proposal_id = marked_with(ops)
        after = self.api.get(site.resource, site.namespace, site.name) if proposal_id else None
        if after is None or proposal_of(after) != proposal_id:
            return ""
        return f"already applied by proposal {proposal_id} (made meanwhile by another replica)"

    def _record(
        self, kind: str, obj: Mapping[str, Any], proposal_id: str, approver: str, what: str
    ) -> None:
        record_event(self.api, kind, obj, self.action, proposal_id, approver, what, self.config)


def record_event(
    api: KubeApi,
    kind: str,
    obj: Mapping[str, Any],
    action: str,
    proposal_id: str,
    approver: str,
    what: str,
    config: KubeActionConfig | None = None,
) -> None:
    """A `PitcrewRemediation` Event on the target (once per proposal and target), from
    `config.component`, naming `config.cluster` (its message and `pitcrew.io/cluster`)."""
    config = config or KubeActionConfig()
    component, cluster = config.component, config.cluster
    metadata = as_map(obj.get("metadata"))
    namespace, name = text_at(metadata, "namespace"), text_at(metadata, "name")
    involved = namespace
    namespace = namespace or "default"  # a Node's Events live in `default`
    digest = hashlib.sha1(f"{action}\x1f{proposal_id}\x1f{kind}/{name}".encode()).hexdigest()[:10]
    on = f" on cluster {cluster}" if cluster else ""
    message = f"{action} approved by {approver or 'unknown'} (proposal {proposal_id}{on}): {what}"
    now = now_text()
    named: dict[str, Any] = {"name": f"{name[:200]}.pitcrew-{digest}", "namespace": namespace}
    if cluster:
        named["annotations"] = {CLUSTER_ANNOTATION: cluster}
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": named,
        "involvedObject": {
            "apiVersion": BY_KIND[kind].api_version,
            "kind": kind,
            "name": name,
            "namespace": involved,
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
    except ConflictError:
        return  # recorded by an earlier attempt of the same proposal
    except KubeApiError as error:
        log.warning("could not record the %s Event on %s %s: %s", action, kind, name, error)

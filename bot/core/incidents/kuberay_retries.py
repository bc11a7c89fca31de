"""KubeRay's own retries of a failed RayJob, so pitcrew neither races them nor miscounts them.

Why this exists: a RayJob with `spec.backoffLimit` is retried by KubeRay itself, on a new
RayCluster with the same spec. A rerun pitcrew offered meanwhile only races that retry,
and each attempt's failure must join the incident of the first, counted, saying whether
the cause is the same each time: when it is (the same OOM at the same limit), retrying
will not help and the fix is what the card offers.

KubeRay's rules, as of v1.7.0 (ray-project/kuberay; the rule is unchanged since v1.3.0
except where said):

- `ray-operator/controllers/ray/rayjob_controller.go`, `checkBackoffLimitAndUpdateStatusIfNeeded`:
  on a failure KubeRay counts it (`status.failed` += 1) and, when
  `status.failed < spec.backoffLimit + 1` and `status.reason` is neither `DeadlineExceeded`
  nor (v1.7.0) `JobStatusCheckTimeoutExceeded`, sets `jobDeploymentStatus: Retrying`
  instead of `Failed`, in the same status update. So `backoffLimit: 3` means four
  attempts; the status pitcrew sees for a retried failure is `Retrying` (with the
  failure's `reason`, `message` and count), and `Failed` only for the last one.
  Retried reasons: `AppFailed`, `SubmissionFailed`,
  `JobDeploymentStatusTransitionGracePeriodExceeded` and (v1.6.0+)
  `PreRunningDeadlineExceeded`, which `checkPreRunningDeadlineAndUpdateStatusIfNeeded`
  sets with `jobDeploymentStatus: Failed` and the rule does not exclude.
- Same file, `Reconcile` (validation): a spec that fails validation gets
  `jobDeploymentStatus: ValidationFailed`, reason `ValidationFailed` (v1.5.0+), which the
  backoff rule (it needs `Failed`) never retries.
- Same file, the `Retrying` case: KubeRay deletes the attempt's RayCluster and submitter,
  clears `reason`, `message`, `rayClusterName` and `jobId`, and starts again from `New`
  (`initRayJobStatusIfNeed` names a new RayCluster and job id). Each attempt therefore
  has its own RayCluster: the findings of attempt N are those naming its cluster.
- `ray-operator/apis/ray/v1/rayjob_types.go`: `backoffLimit` defaults to 0 ("Specifies the
  number of retries before marking this job failed. Each retry creates a new RayCluster");
  `status.failed` and `status.succeeded` count attempts.

Pure: values in, values out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.core.actions.specs import ACTION_SPECS
from bot.core.model import (
    ActionOffer,
    Diagnosis,
    Finding,
    ObjectRef,
    RayJobAttempt,
    SourceKind,
    frozen_map,
)
from bot.core.taxonomy import RANK, Category

KUBERAY_VERSION = "v1.7.0"
CONTROLLER = "ray-operator/controllers/ray/rayjob_controller.go"

NOT_RETRIED: frozenset[str] = frozenset({"DeadlineExceeded", "JobStatusCheckTimeoutExceeded"})
"""`status.reason` values `checkBackoffLimitAndUpdateStatusIfNeeded` does not retry (v1.7.0;
before it, `DeadlineExceeded` alone: `JobStatusCheckTimeoutExceeded` is new in v1.7.0)."""

FAILED_STATES: frozenset[str] = frozenset({"Retrying", "Failed", "ValidationFailed"})
"""Deployment statuses that end an attempt in failure (`ValidationFailed`: v1.5.0+)."""

RERUNS: frozenset[str] = frozenset({"kuberay.recreate_rayjob", "ray.resubmit_job"})
"""Actions that run the same job again: what KubeRay's retry already does."""

MAX_ATTEMPTS_KEPT = 16

# Fields of a RayJob's `ray_job` signal (bot.core.inputs.kuberay, docs/signals.md).
BACKOFF_LIMIT = "backoff_limit"
FAILED_ATTEMPTS = "failed_attempts"
DEPLOYMENT = "job_deployment_status"
CLUSTER = "ray_cluster"

_OOM = frozenset({Category.POD_OOM_KILLED, Category.RAY_MEMORY_MONITOR_OOM})


@dataclass(frozen=True, slots=True)
class Position:
    """Where a RayJob stands in KubeRay's retries, read from one of its failure statuses."""

    backoff_limit: int  # spec.backoffLimit (0: no retries)
    failed: int  # status.failed, this failure counted
    deployment: str  # jobDeploymentStatus
    reason: str  # status.reason

    @property
    def total(self) -> int:
        """Attempts KubeRay makes in all: the first, then `backoffLimit` retries."""
        return self.backoff_limit + 1

    @property
    def will_retry(self) -> bool:
        """KubeRay's own rule (`checkBackoffLimitAndUpdateStatusIfNeeded`, v1.7.0)."""
        if self.deployment == "Retrying":
            return True
        return (
            self.deployment == "Failed"
            and self.failed < self.total
            and self.reason not in NOT_RETRIED
        )

    @property
    def spent(self) -> bool:
        return not self.will_retry and self.failed >= self.total


def position_of(fields: Mapping[str, str], reason: str) -> Position | None:
    """The retry position a RayJob failure status shows; None for any other signal."""
    deployment = fields.get(DEPLOYMENT, "")
    if deployment not in FAILED_STATES or FAILED_ATTEMPTS not in fields:
        return None
    try:
        failed = int(fields[FAILED_ATTEMPTS])
        limit = int(fields.get(BACKOFF_LIMIT) or 0)
    except ValueError:
        return None
    return Position(max(limit, 0), max(failed, 0), deployment, reason)


def attempt_in_progress(fields: Mapping[str, str]) -> bool:
    """A RayJob running (or starting) again after KubeRay counted a failed attempt that
    its `backoffLimit` retries: a retry, not the workload healthy again."""
    if fields.get(DEPLOYMENT, "") in FAILED_STATES | {"Complete"}:
        return False
    try:
        failed = int(fields.get(FAILED_ATTEMPTS) or 0)
        limit = int(fields.get(BACKOFF_LIMIT) or 0)
    except ValueError:
        return False
    return 0 < failed <= limit


# -- an incident's attempts ----------------------------------------------------


def recorded(attempts: Sequence[RayJobAttempt], finding: Finding) -> tuple[RayJobAttempt, ...]:
    """`attempts` with what `finding` says about one of them: a RayJob failure status
    numbers its cluster's attempt; any other finding naming a RayJob's RayCluster is a
    candidate cause of that attempt (the most causal class wins). Unchanged values come
    back as the same tuple, so a caller can tell."""
    current = tuple(attempts)
    cluster = finding.fields.get(CLUSTER, "")
    workload = finding.workload
    if not cluster or workload is None or workload.kind != "RayJob":
        return current
    index = next((i for i, a in enumerate(current) if a.cluster == cluster), None)
    attempt = current[index] if index is not None else RayJobAttempt(cluster)
    updated = _with(attempt, finding)
    if updated == attempt and index is not None:
        return current
    if index is None:
        return (*current, updated)[-MAX_ATTEMPTS_KEPT:]
    return (*current[:index], updated, *current[index + 1 :])


def _with(attempt: RayJobAttempt, finding: Finding) -> RayJobAttempt:
    position = (
        position_of(finding.fields, finding.reason)
        if finding.source is SourceKind.RAY_JOB
        else None
    )
    if position is not None and position.failed >= attempt.number:
        attempt = dataclasses.replace(
            attempt,
            number=position.failed,
            reason=position.reason,
            backoff_limit=position.backoff_limit,
            deployment=position.deployment,
        )
    if not attempt.cause or _rank(finding.category) < _rank(attempt.cause):
        detail = finding.fields.get("memory_limit", "") if finding.category in _OOM else ""
        attempt = dataclasses.replace(attempt, cause=str(finding.category), detail=detail)
    return attempt


def _rank(category: str) -> int:
    try:
        return RANK.get(Category(category), len(RANK))
    except ValueError:  # a class this version does not know (a store written by another)
        return len(RANK)


def awaits_retry(attempts: Sequence[RayJobAttempt]) -> bool:
    """The last failed attempt is one KubeRay retries: the next attempt's findings belong
    to this incident however long it takes to start."""
    position = _latest(attempts)
    return position is not None and position.will_retry


def _latest(attempts: Sequence[RayJobAttempt]) -> Position | None:
    failed = [a for a in attempts if a.number > 0]
    if not failed:
        return None
    last = max(failed, key=lambda a: a.number)
    return Position(last.backoff_limit, last.number, last.deployment, last.reason)


# -- the verdict ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the card says about KubeRay's retries, and which reruns it withholds."""

    line: str
    withhold: str = ""  # the reason reruns are withheld; empty: they stay as assessed


def verdict(attempts: Sequence[RayJobAttempt], fix_offered: bool = False) -> Verdict | None:
    """None for a RayJob without retries (`backoffLimit` 0 or unset) or none failed yet."""
    position = _latest(attempts)
    if position is None or position.backoff_limit <= 0:
        return None
    failed = sorted((a for a in attempts if a.number > 0), key=lambda a: a.number)
    same = _same_cause(failed)
    history = _history(failed)
    next_try = f"attempt {position.failed + 1} of {position.total}"
    if position.will_retry:
        race = f"KubeRay will retry ({next_try}): a rerun now would race it"
        if same:
            line = (
                f"Retrying will not help: attempts 1–{position.failed} of {position.total} "
                f"failed the same way ({same}). KubeRay will retry ({next_try}) with the same "
                "spec unless the fix is applied first."
            )
            return Verdict(line, race)
        return Verdict(f"KubeRay will retry ({next_try}). {history}", race)
    if position.spent:
        if same:
            line = (
                f"KubeRay's retries are spent and retrying will not help: all "
                f"{position.total} attempts failed the same way ({same})."
            )
            withhold = "" if fix_offered else f"retrying will not help: every attempt was {same}"
            return Verdict(line, withhold)
        return Verdict(f"KubeRay's retries are spent: {position.total} attempts. {history}")
    line = (
        f"KubeRay does not retry a {position.reason or position.deployment} failure "
        f"({CONTROLLER}, {KUBERAY_VERSION}): attempt {position.failed} of {position.total} "
        f"was the last. {history}"
    )
    return Verdict(line)


def _cause_text(attempt: RayJobAttempt) -> str:
    cause = attempt.cause or attempt.reason or "unknown"
    return f"{cause} at memory limit {attempt.detail}" if attempt.detail else cause


def _same_cause(failed: Sequence[RayJobAttempt]) -> str:
    """The cause every failed attempt shares (two at least), else ""."""
    if len(failed) < 2:
        return ""
    causes = {(a.cause, a.detail) for a in failed}
    if len(causes) != 1 or not failed[0].cause:
        return ""
    return _cause_text(failed[0])


def _history(failed: Sequence[RayJobAttempt]) -> str:
    said = "; ".join(
        f"attempt {a.number}: {_cause_text(a)}" + (f" ({a.reason})" if a.reason else "")
        for a in failed
    )
    return f"{said[0].upper()}{said[1:]}." if said else ""


def judged(
    diagnosis: Diagnosis, attempts: Sequence[RayJobAttempt], rayjob: ObjectRef | None = None
) -> Diagnosis:
    """`diagnosis` with KubeRay's retries said first in its text, and its reruns withheld
    while KubeRay will retry (or when every attempt failed the same way and no fix is
    offered). A fix aimed at an attempt's RayCluster aims at `rayjob`'s template instead
    (`retargeted`)."""
    fix = any(o.offered and o.action not in RERUNS for o in diagnosis.actions)
    found = verdict(attempts, fix)
    if found is None:
        return diagnosis
    clusters = {a.cluster for a in attempts}
    actions = tuple(
        _held(retargeted(o, clusters, rayjob), found.withhold) for o in diagnosis.actions
    )
    text = f"{found.line}\n{diagnosis.text}" if diagnosis.text else found.line
    return dataclasses.replace(diagnosis, actions=actions, text=text)


def _held(offer: ActionOffer, reason: str) -> ActionOffer:
    if not reason or not offer.offered or offer.action not in RERUNS:
        return offer
    return dataclasses.replace(offer, offered=False, reason=reason, pending_fact="")


def retargeted(offer: ActionOffer, clusters: set[str], rayjob: ObjectRef | None) -> ActionOffer:
    """`offer` aimed at the RayJob's `spec.rayClusterSpec` when it names one of the
    attempts' RayClusters: KubeRay deletes each retried attempt's RayCluster and makes the
    next from that template (the `Retrying` case above), so a fix aimed at the finding's
    cluster would be refused as not found once approved, and would not reach the next
    attempt. The executor changes the RayJob's live RayCluster with it (bot.adapters.
    kubernetes.bump). Any other offer comes back as it is."""
    params = offer.params
    spec = ACTION_SPECS.get(offer.action)
    if (
        rayjob is None
        or rayjob.kind != "RayJob"
        or spec is None
        or params.get("kind") != "RayCluster"
        or params.get("name") not in clusters
        or params.get("namespace") != rayjob.namespace
    ):
        return offer
    try:
        model = spec.params.check({**params, "kind": "RayJob", "name": rayjob.name})
    except ValueError:  # pydantic's ValidationError among them
        return offer
    preview = spec.preview(model) if offer.preview else ""
    return dataclasses.replace(offer, params=frozen_map(model.as_dict()), preview=preview)

"""`ray.resubmit_job`: a failed job submitted again with the same entrypoint,
runtime_env, metadata and resources, under a new submission id derived from the proposal.

Refused for dependency, version and application errors (a rerun would fail the same
way), beyond the retry cap, and for a job a RayJob owns (that rerun is the RayJob's).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.adapters.ray.client import (
    ACTIVE,
    SUPERVISOR_NAME,
    SUPERVISOR_NAMESPACE,
    TERMINAL,
    RayClusterConfig,
    RayDashboard,
)
from bot.adapters.ray.executor_base import (
    ACTION_KEY,
    ATTEMPT_KEY,
    PROPOSAL_KEY,
    RESUBMIT_OF_KEY,
    ROOT_KEY,
    Facts,
    RayClusters,
    RayExecutor,
    as_mapping,
    clip,
    metadata_of,
    remediation_id,
)
from bot.adapters.ray.jobs import job_parts
from bot.adapters.ray.signals import DEFAULT_RAYJOB_KEYS
from bot.core.actions.entrypoint import with_override
from bot.core.actions.params import ActionParams, ResubmitJob
from bot.core.actions.step import Step
from bot.core.errors import ActionRefusedError

NOT_RESUBMITTABLE = frozenset(
    {"dependency_runtime_env", "ray_version_mismatch", "application_error"}
)


class ResubmitJobExecutor(RayExecutor):
    action = "ray.resubmit_job"
    params_model = ResubmitJob

    def __init__(
        self,
        clusters: RayClusters,
        *,
        categorize: Callable[[Sequence[Any]], set[str]],
        rayjob_keys: Sequence[str] = DEFAULT_RAYJOB_KEYS,
        max_retries: int | None = None,
        start_timeout: float = 60.0,
        poll_every: float = 0.5,
    ) -> None:
        """`categorize` maps a job's parts to the failure categories found in them (the
        daemon's own classification, `Engine.categories`); `max_retries`,
        when given, is the operator's cap and overrides the proposal's; `verify` waits up
        to `start_timeout` seconds for a PENDING resubmission to start."""
        super().__init__(clusters)
        self._categorize = categorize
        self.rayjob_keys = rayjob_keys
        self.max_retries = max_retries
        self.start_timeout = start_timeout
        self.poll_every = poll_every

    def cap(self, p: ResubmitJob) -> int:
        return self.max_retries if self.max_retries is not None else p.max_retries

    def categories(self, parts: Sequence[Any]) -> set[str]:
        return self._categorize(parts)

    def _plan(self, client: RayDashboard, config: RayClusterConfig, p: ResubmitJob) -> _Plan:
        old = client.get_job(p.submission_id)
        if old is None:
            return _Plan(None, "", 0, {}, set(), f"no Ray job {p.submission_id}")
        metadata = metadata_of(old)
        root = metadata.get(ROOT_KEY) or p.submission_id
        earlier = [j for j in client.list_jobs() if metadata_of(j).get(ROOT_KEY) == root]
        resources = entrypoint_resources(client, p.submission_id)
        parts = job_parts(client, old, config, rayjob_keys=self.rayjob_keys)
        blocked = self.categories(parts) & NOT_RESUBMITTABLE
        return _Plan(old, root, len(earlier), resources, blocked, "", config.rayjob)

    def look(self, params: Mapping[str, Any] | ActionParams) -> tuple[Facts, str]:
        p = self.params(params)
        with self.clusters.client(p.cluster) as (config, client):
            plan = self._plan(client, config, p)
        if plan.old is None:
            keys = ("ray.job_terminal", "ray.job_running", "ray.resubmits_below_cap")
            return dict.fromkeys(keys, False), f"[{config.name}] {plan.problem}"
        status = str(plan.old.get("status") or "")
        facts = {
            "ray.job_terminal": status in TERMINAL,
            "ray.job_running": status in ACTIVE,
            "ray.resubmits_below_cap": plan.attempts < self.cap(p),
            "ray.not_rayjob_owned": not config.rayjob,
        }
        entrypoint = with_override(str(plan.old.get("entrypoint") or ""), p.override)
        preview = (
            f"[{config.name}] resubmit Ray job {p.submission_id} ({status}) as a new submission: "
            f"entrypoint {clip(entrypoint)}; "
            f"runtime_env keys {sorted(as_mapping(plan.old.get('runtime_env')))}; "
            f"metadata kept, plus {RESUBMIT_OF_KEY}={p.submission_id}; "
            f"entrypoint resources {plan.resources_text()}; "
            f"resubmission {plan.attempts + 1} of at most {self.cap(p)}"
        )
        refusal = self._refusal(p, plan)
        if refusal:
            preview += f". Would refuse: {refusal}"
        return facts, preview

    def _refusal(self, p: ResubmitJob, plan: _Plan) -> str:
        if plan.old is None:
            return plan.problem
        status = str(plan.old.get("status") or "")
        if status not in TERMINAL:
            return f"the job is still {status}: stop it first"
        if plan.rayjob:
            return (
                f"the job belongs to RayJob {plan.rayjob}: a Jobs API resubmission "
                "would leave the RayJob Failed; rerun it with kuberay.recreate_rayjob"
            )
        if plan.attempts >= self.cap(p):
            return f"already resubmitted {plan.attempts} time(s), the cap is {self.cap(p)}"
        if plan.blocked:
            return (
                f"the failure is {', '.join(sorted(plan.blocked))}: "
                "a resubmission would fail the same way"
            )
        return ""

    def execute(self, step: Step, plan: Any) -> str:
        params, proposal_id = step.params, step.proposal_id
        p = self.params(params)
        submission = remediation_id("resubmit", proposal_id)
        with self.clusters.client(p.cluster) as (config, client):
            existing = client.get_job(submission)
            if existing is not None:
                return (
                    f"[{config.name}] already resubmitted {p.submission_id} as {submission} "
                    f"({existing.get('status')}) for this proposal"
                )
            plan = self._plan(client, config, p)
            refusal = self._refusal(p, plan)
            if refusal or plan.old is None:
                raise ActionRefusedError(f"{self.action}: {refusal}")
            old = plan.old
            metadata = {
                **metadata_of(old),
                ROOT_KEY: plan.root,
                RESUBMIT_OF_KEY: p.submission_id,
                ATTEMPT_KEY: str(plan.attempts + 1),
                PROPOSAL_KEY: proposal_id,
                ACTION_KEY: self.action,
            }
            client.submit_job(
                with_override(str(old.get("entrypoint") or ""), p.override),
                submission_id=submission,
                runtime_env=as_mapping(old.get("runtime_env")) or None,
                metadata=metadata,
                **plan.resources,
            )
        return (
            f"[{config.name}] resubmitted Ray job {p.submission_id} as {submission} "
            f"(resubmission {plan.attempts + 1} of at most {self.cap(p)}; "
            f"entrypoint resources {plan.resources_text()})"
        )

    def verified(self, params: Mapping[str, Any] | ActionParams) -> bool:
        """The newest resubmission of the job runs or has succeeded (one just submitted is
        PENDING while Ray sets up its runtime_env: waited for, up to `start_timeout`)."""
        p = self.params(params)
        deadline = time.monotonic() + self.start_timeout
        with self.clusters.client(p.cluster) as (_, client):
            while True:
                mine = [
                    j
                    for j in client.list_jobs()
                    if metadata_of(j).get(RESUBMIT_OF_KEY) == p.submission_id
                ]
                if not mine:
                    return False
                newest = max(mine, key=lambda j: int(j.get("start_time") or 0))
                status = str(newest.get("status") or "")
                if status != "PENDING" or time.monotonic() >= deadline:
                    return status in ("RUNNING", "SUCCEEDED")
                time.sleep(self.poll_every)


@dataclass(frozen=True)
class _Plan:
    old: dict[str, Any] | None
    root: str
    attempts: int
    resources: dict[str, Any]
    blocked: set[str]
    problem: str
    rayjob: str = ""  # the RayJob the job's cluster runs for, if any

    def resources_text(self) -> str:
        if not self.resources:
            return "none (or unknown)"
        return ", ".join(f"{k}={v}" for k, v in sorted(self.resources.items()))


def entrypoint_resources(client: RayDashboard, submission_id: str) -> dict[str, Any]:
    """The entrypoint's resources, as `submit_job` keyword arguments.

    The Jobs API does not return them (JobDetails drops `entrypoint_num_cpus` & co.),
    but Ray schedules the job's JobSupervisor actor with exactly these resources, and
    the State API keeps that actor (also DEAD) with its `required_resources`."""
    supervisors = client.actors(
        name=SUPERVISOR_NAME.format(submission_id=submission_id), namespace=SUPERVISOR_NAMESPACE
    )
    if not supervisors:
        return {}
    required = dict(supervisors[0].required_resources)
    out: dict[str, Any] = {}
    if required.get("CPU"):
        out["entrypoint_num_cpus"] = required.pop("CPU")
    else:
        required.pop("CPU", None)
    if required.get("GPU"):
        out["entrypoint_num_gpus"] = required.pop("GPU")
    else:
        required.pop("GPU", None)
    if required.get("memory"):
        out["entrypoint_memory"] = int(required.pop("memory"))
    else:
        required.pop("memory", None)
    custom = {k: v for k, v in required.items() if v and not k.startswith("node:")}
    if custom:
        out["entrypoint_resources"] = custom
    return out

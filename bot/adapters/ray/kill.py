"""`ray.kill_actor`: kill a stale named actor through a short remediation job.

The holder of the name is resolved live with the State API (Ray prints the namespace
passed to `.options`, not the one the name was looked up in), and the kill refuses a
live verl register center or WorkerDict, an actor that is not stale, and a namespace
where a job still runs.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.adapters.ray.client import (
    ACTIVE,
    TERMINAL,
    RayDashboard,
)
from bot.adapters.ray.executor_base import (
    ACTION_KEY,
    NAMESPACE_KEY,
    PROPOSAL_KEY,
    PROTECTED,
    Facts,
    RayClusters,
    RayExecutor,
    last_line,
    metadata_of,
    remediation_id,
    until,
    wait_terminal,
)
from bot.core.actions.params import ActionParams, KillActor
from bot.core.actions.step import Step
from bot.core.errors import ActionFailedError, ActionRefusedError
from bot.core.inputs.ray_actors import ActorInfo


@dataclass(frozen=True)
class ActorState:
    """What the cluster says about the actor a kill would target."""

    live: tuple[ActorInfo, ...]
    owner_status: Mapping[str, str]
    busy_jobs: tuple[str, ...]
    pending_jobs: tuple[str, ...]

    @property
    def stale(self) -> bool:
        """Every live holder of the name is detached or belongs to a finished job."""
        return bool(self.live) and all(
            a.is_detached or self.owner_status.get(a.job_id, "") in TERMINAL for a in self.live
        )

    @property
    def owners_finished(self) -> bool:
        """Every live holder of the name belongs to a job that has finished."""
        return bool(self.live) and all(
            self.owner_status.get(a.job_id, "") in TERMINAL for a in self.live
        )

    @property
    def idle(self) -> bool:
        """No RUNNING job owns actors in the namespace or calls the actor, and no
        PENDING job (whose namespace is not known yet) could."""
        return not self.busy_jobs and not self.pending_jobs

    def describe(self, name: str, namespace: str) -> str:
        if not self.live:
            return f"no live actor named {name!r} in namespace {namespace!r}"
        parts = []
        for actor in self.live:
            owner = self.owner_status.get(actor.job_id, "unknown")
            lifetime = "detached" if actor.is_detached else "non-detached"
            parts.append(
                f"{actor.state} {lifetime} {actor.class_name or 'actor'} {actor.actor_id} "
                f"(owner job {actor.job_id or '?'}: {owner})"
            )
        text = f"actor {name!r} in namespace {namespace!r}: " + "; ".join(parts)
        if self.busy_jobs:
            text += f"; RUNNING jobs using the namespace or the actor: {', '.join(self.busy_jobs)}"
        if self.pending_jobs:
            text += f"; PENDING jobs (namespace not known yet): {', '.join(self.pending_jobs)}"
        return text


def actor_state(client: RayDashboard, name: str, namespace: str) -> ActorState:
    """The live holder(s) of `name` in `namespace` and the jobs around them.

    A job "in the namespace" is one that owns an actor there (any state) or has
    called the actor (its task events name the caller's driver task, whose id ends
    in the caller's job id)."""
    live = tuple(a for a in client.actors(name=name, namespace=namespace) if a.state != "DEAD")
    jobs = client.list_jobs()
    status = {str(j["job_id"]): str(j.get("status") or "") for j in jobs if j.get("job_id")}
    involved = {a.job_id for a in client.actors(namespace=namespace) if a.job_id}
    for actor in live:
        for task in client.actor_tasks(actor.actor_id):
            parent = str(task.get("parent_task_id") or "")
            if len(parent) >= 8 and re.fullmatch(r"[0-9a-f]{8}", parent[-8:]):
                involved.add(parent[-8:])
    busy = tuple(sorted(j for j in involved if status.get(j) in ACTIVE))
    pending = tuple(
        sorted(
            str(j.get("submission_id") or "")
            for j in jobs
            if j.get("status") == "PENDING" and not j.get("job_id")
        )
    )
    return ActorState(live, status, busy, pending)


ANONYMOUS_NAMESPACE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
"""The namespace Ray gives a job whose driver named none: a fresh UUID per job."""
UNNAMED = ("", "None")
"""What the clash message prints when `.options()` got no namespace: the caller's current one."""


@dataclass(frozen=True)
class Holder:
    """The live actor holding a name, resolved with the State API (`named_actor_conflict`
    in docs/failure-classes.md)."""

    namespace: str
    problem: str = ""
    """Why the holder is not one actor in an explicit namespace ("" when it is)."""


def resolve_holder(client: RayDashboard, name: str, hinted: str) -> Holder:
    """Where the actor named `name` lives. Ray prints the namespace passed to
    `.options(...)`, not the one the name was looked up in: `None` means the failing
    job's current namespace, explicit whenever its driver called
    `ray.init(namespace=...)`. So every live holder of the name is listed (only in
    `hinted` when the message named one): exactly one, in an explicit namespace, is the
    holder; one in an anonymous per-job namespace is the job's own actor."""
    scope = None if hinted in UNNAMED else hinted
    live = [a for a in client.actors(name=name, namespace=scope) if a.state != "DEAD"]
    spaces = sorted({a.namespace for a in live if a.name == name})
    if not spaces:
        where = f"namespace {hinted!r}" if scope else "any namespace"
        return Holder(scope or "", f"no live actor named {name!r} in {where}")
    if len(spaces) > 1:
        return Holder("", f"live actors named {name!r} in several namespaces ({', '.join(spaces)})")
    namespace = spaces[0]
    if ANONYMOUS_NAMESPACE.match(namespace):
        return Holder(
            namespace,
            f"the holder of {name!r} is in the anonymous per-job namespace {namespace}: "
            "it is the failing job's own actor (a restart), not a leftover",
        )
    if namespace.startswith("_ray_internal"):
        return Holder(namespace, f"namespace {namespace!r} is not an explicit user namespace")
    return Holder(namespace)


class KillActorExecutor(RayExecutor):
    action = "ray.kill_actor"
    params_model = KillActor

    def __init__(
        self,
        clusters: RayClusters,
        *,
        python: str = "python",
        job_timeout: float = 120.0,
        dead_timeout: float = 30.0,
        poll_every: float = 0.5,
    ) -> None:
        super().__init__(clusters)
        self.python = python
        self.job_timeout = job_timeout
        self.dead_timeout = dead_timeout
        self.poll_every = poll_every

    def look(self, params: Mapping[str, Any] | ActionParams) -> tuple[Facts, str]:
        p = self.params(params)
        with self.clusters.client(p.cluster) as (config, client):
            holder = resolve_holder(client, p.name, p.namespace)
            target = dataclasses.replace(p, namespace=holder.namespace or p.namespace)
            state = actor_state(client, target.name, target.namespace)
        facts = {
            "ray.holder_explicit": not holder.problem,
            "ray.actor_stale": state.stale,
            "ray.namespace_idle": state.idle,
            "ray.not_live_verl": not PROTECTED.search(p.name) or state.owners_finished,
        }
        preview = f"[{config.name}] {state.describe(target.name, target.namespace)}"
        refusal = holder.problem or self._refusal(target, state)
        if refusal:
            preview += f". Would refuse: {refusal}"
        else:
            preview += (
                f". Would submit a remediation job running ray.kill(ray.get_actor("
                f"{target.name!r}, namespace={target.namespace!r}), no_restart=True)"
            )
        return facts, preview

    def _refusal(self, p: KillActor, state: ActorState | None) -> str:
        if p.namespace in UNNAMED or p.namespace.startswith("_ray_internal"):
            return f"namespace {p.namespace!r} is not an explicit user namespace"
        if state is None:
            return ""
        if not state.live:
            return ""
        if PROTECTED.search(p.name) and not state.owners_finished:
            return (
                f"{p.name} is a verl register center or WorkerDict actor of a job that "
                "has not finished: never killed"
            )
        if not state.stale:
            return "the actor is neither detached nor owned by a finished job"
        if not state.idle:
            return "a job is running (or pending) in the actor's namespace"
        return ""

    def _target(self, client: RayDashboard, p: KillActor) -> KillActor | None:
        """`p` aimed at the holder resolved live; None when no live actor holds the
        name; refused when the holder is not one actor in an explicit namespace."""
        holder = resolve_holder(client, p.name, p.namespace)
        if holder.problem and not _live(client, p):
            return None
        if holder.problem:
            raise ActionRefusedError(f"{self.action}: {holder.problem}")
        return dataclasses.replace(p, namespace=holder.namespace)

    def execute(self, step: Step, plan: Any) -> str:
        params, proposal_id = step.params, step.proposal_id
        hinted = self.params(params)
        if hinted.namespace.startswith("_ray_internal"):
            raise ActionRefusedError(f"{self.action}: {self._refusal(hinted, None)}")
        submission = remediation_id("kill", proposal_id)
        with self.clusters.client(hinted.cluster) as (config, client):
            job = client.get_job(submission)
            if job is not None:
                resolved = metadata_of(job).get(NAMESPACE_KEY) or hinted.namespace
                p = dataclasses.replace(hinted, namespace=resolved)
            else:
                target = self._target(client, hinted)
                state = actor_state(client, target.name, target.namespace) if target else None
                if target is None or state is None or not state.live:
                    return (
                        f"[{config.name}] nothing to kill: no live actor {hinted.name!r} in "
                        f"namespace {hinted.namespace!r}; no remediation job submitted"
                    )
                p = target
                refusal = self._refusal(p, state)
                if refusal:
                    raise ActionRefusedError(f"{self.action}: {refusal}")
                client.submit_job(
                    self._entrypoint(p, state.live[0].actor_id),
                    submission_id=submission,
                    metadata={
                        PROPOSAL_KEY: proposal_id,
                        ACTION_KEY: self.action,
                        NAMESPACE_KEY: p.namespace,
                    },
                    entrypoint_num_cpus=0,
                )
            job = wait_terminal(client, submission, self.job_timeout, self.poll_every)
            status = str(job.get("status") or "")
            if status != "SUCCEEDED":
                message = last_line(str(job.get("message") or ""))
                raise ActionFailedError(
                    f"remediation job {submission} {status or 'did not finish'}: {message}"
                )
            if not until(lambda: not _live(client, p), self.dead_timeout, self.poll_every):
                raise ActionFailedError(
                    f"remediation job {submission} SUCCEEDED but actor {p.name!r} in "
                    f"namespace {p.namespace!r} is not DEAD after {self.dead_timeout:g}s"
                )
        return (
            f"[{config.name}] remediation job {submission} SUCCEEDED: actor {p.name!r} in "
            f"namespace {p.namespace!r} is DEAD (ray.kill, no_restart=True)"
        )

    def verified(self, params: Mapping[str, Any] | ActionParams) -> bool:
        p = self.params(params)
        with self.clusters.client(p.cluster) as (_, client):
            return not _live(client, p)

    def _entrypoint(self, p: KillActor, actor_id: str) -> str:
        code = _KILL_CODE.format(name=p.name, namespace=p.namespace, expected=actor_id)
        return f"{self.python} -c {shlex.quote(code)}"


_KILL_CODE = """\
import sys
import ray
NAME, NAMESPACE, EXPECTED = {name!r}, {namespace!r}, {expected!r}
ray.init(namespace=NAMESPACE, log_to_driver=False)
try:
    actor = ray.get_actor(NAME, namespace=NAMESPACE)
except ValueError:
    print(f"pitcrew: no live actor {{NAME!r}} in namespace {{NAMESPACE!r}}; nothing to kill")
    sys.exit(0)
found = getattr(getattr(actor, "_actor_id", None), "hex", lambda: "")()
if EXPECTED and found and found != EXPECTED:
    print(f"pitcrew: {{NAME!r}} is now actor {{found}}, not the approved {{EXPECTED}}; not killed")
    sys.exit(3)
ray.kill(actor, no_restart=True)
print(f"pitcrew: killed actor {{NAME!r}} ({{found}}) in namespace {{NAMESPACE!r}}")
"""


def _live(client: RayDashboard, p: KillActor) -> bool:
    """A live actor holds the name (anywhere, when the message named no namespace)."""
    scope = None if p.namespace in UNNAMED else p.namespace
    return any(a.state != "DEAD" for a in client.actors(name=p.name, namespace=scope))

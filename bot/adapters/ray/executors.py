"""Executors of the Ray actions: kill a stale named actor, stop a job, resubmit a job.

Why this exists: the catalog (bot.core.actions.catalog) declares what these actions take
and the playbooks decide when they are offered; this adapter is what touches the
cluster. Each executor can `check` (the live FACTS the guards need, and a preview),
`execute` (once per proposal id, however often it is called) and `verify`.

Defence in depth: the executors re-check at execution what the playbooks already
guard, and refuse (ActionRefusedError) rather than act when
- a kill targets a verl `*_register_center` / `*WorkerDict*` actor whose job has
  not finished, an actor that is not stale (neither detached nor of a finished
  job), or a namespace with a RUNNING or PENDING job (one that owns actors there
  or calls the actor);
- a resubmit would repeat a dependency, version or application error, exceed the
  retry cap, or start while the old job still runs.

The kill runs as a short remediation job through the Jobs API (the daemon needs no
Ray client of the cluster's version): `ray.kill(ray.get_actor(name, namespace=ns),
no_restart=True)`, with the submission id derived from the proposal id, so a
repeated call finds the job instead of killing twice; the State API then shows the
actor DEAD. Resubmissions are found again the same way (`pitcrew.proposal` in their
metadata, an id derived from the proposal).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ValidationError

from bot.adapters.ray.bookmarks import expected_stop_key
from bot.adapters.ray.client import (
    ACTIVE,
    SUPERVISOR_NAME,
    SUPERVISOR_NAMESPACE,
    TERMINAL,
    ActorInfo,
    RayClusterConfig,
    RayDashboard,
)
from bot.adapters.ray.jobs import job_parts
from bot.adapters.ray.signals import DEFAULT_RAYJOB_KEYS
from bot.core.actions.catalog import ActionParams, KillActor, ResubmitJob, StopJob
from bot.core.actions.entrypoint import with_override
from bot.core.approvals import LiveCheck
from bot.core.diagnosis import Engine
from bot.core.errors import ActionFailedError, ActionRefusedError
from bot.core.model import Proposal
from bot.core.playbooks import load_builtin
from bot.daemon.ports import Bookmarks
from bot.daemon.runner import Verification

PROTECTED = re.compile(r"_register_center$|WorkerDict")
"""verl's register center and WorkerDict workers: killed only once their job has finished."""
NOT_RESUBMITTABLE = frozenset(
    {"dependency_runtime_env", "ray_version_mismatch", "application_error"}
)
PROPOSAL_KEY = "pitcrew.proposal"
ACTION_KEY = "pitcrew.action"
RESUBMIT_OF_KEY = "pitcrew.resubmit_of"
ROOT_KEY = "pitcrew.root"
ATTEMPT_KEY = "pitcrew.attempt"
NAMESPACE_KEY = "pitcrew.namespace"


Facts = dict[str, bool]


class RayClusters:
    """The Ray clusters actions may act on, found by pitcrew's cluster name or RayCluster
    name; an empty name means the only one there is.

    `discovered` returns the live set of clusters found from RayCluster objects
    (`bot.adapters.kuberay.discovery.discovered_configs`), asked at each lookup: configured
    clusters first, then those. A discovered one is also found as `namespace/name`; a
    RayCluster name found in several namespaces is refused as ambiguous."""

    def __init__(
        self,
        configs: Sequence[RayClusterConfig],
        client_factory: Callable[[RayClusterConfig], RayDashboard] = RayDashboard.of,
        discovered: Callable[[], Sequence[RayClusterConfig]] | None = None,
    ) -> None:
        self.configs = tuple(configs)
        self.client_factory = client_factory
        self.discovered = discovered

    def live(self) -> tuple[RayClusterConfig, ...]:
        """The discovered clusters now (none without discovery)."""
        return tuple(self.discovered()) if self.discovered is not None else ()

    def config(self, name: str) -> RayClusterConfig:
        if not name:
            known = {c.name: c for c in (*self.configs, *self.live())}
            if len(known) == 1:
                return next(iter(known.values()))
            found = "configured or discovered" if self.discovered is not None else "configured"
            raise ActionRefusedError(
                f"the action names no Ray cluster and {len(known)} are {found}"
            )
        for config in self.configs:
            if name in (config.name, config.ray_cluster):
                return config
        matches: dict[tuple[str, str], RayClusterConfig] = {}
        for config in self.live():
            scoped = f"{config.k8s_namespace}/{config.ray_cluster}"
            if name in (config.name, config.ray_cluster, scoped):
                matches.setdefault((config.name, config.url), config)
        if len(matches) == 1:
            return next(iter(matches.values()))
        if matches:
            places = ", ".join(sorted(c.k8s_namespace or c.name for c in matches.values()))
            raise ActionRefusedError(
                f"Ray cluster {name!r} is ambiguous (RayClusters in {places}); "
                "name it as namespace/name"
            )
        if self.discovered is not None:
            raise ActionRefusedError(f"no Ray cluster {name!r} is configured or discovered")
        raise ActionRefusedError(f"no Ray cluster {name!r} is configured")

    @contextmanager
    def client(self, name: str) -> Iterator[tuple[RayClusterConfig, RayDashboard]]:
        """A fresh client per use: executors may run on several threads at once."""
        config = self.config(name)
        client = self.client_factory(config)
        try:
            yield config, client
        finally:
            client.close()


def remediation_id(kind: str, proposal_id: str) -> str:
    """A submission id derived from the proposal: the same proposal, the same job."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", proposal_id).strip("-")[:40] or "proposal"
    digest = hashlib.sha256(proposal_id.encode()).hexdigest()[:8]
    return f"pitcrew-{kind}-{safe}-{digest}"


# -- live facts --------------------------------------------------------------------------


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
    """The live actor holding a name, resolved with the State API (TAXONOMY.md §1.1)."""

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


def live_status(client: RayDashboard, submission_id: str) -> str:
    job = client.get_job(submission_id)
    return str(job.get("status") or "") if job else ""


# -- executors ---------------------------------------------------------------------------


class RayExecutor(ABC):
    """What the action registry needs of an executor."""

    action: ClassVar[str]
    params_model: ClassVar[type[ActionParams]]

    def __init__(self, clusters: RayClusters) -> None:
        self.clusters = clusters

    def params(self, params: Mapping[str, Any] | ActionParams) -> Any:
        if isinstance(params, self.params_model):
            return params
        try:
            return self.params_model.model_validate(dict(params))
        except ValidationError as error:
            raise ActionRefusedError(f"{self.action}: invalid parameters: {error}") from None

    @abstractmethod
    def check(self, params: Mapping[str, Any] | ActionParams) -> tuple[Facts, str]:
        """The live facts the action's guards name, and a preview."""

    @abstractmethod
    def execute(self, params: Mapping[str, Any] | ActionParams, proposal_id: str) -> str:
        """Act once per proposal id; returns what was done."""

    @abstractmethod
    def verify(self, params: Mapping[str, Any] | ActionParams) -> bool:
        """Whether the change is in place."""


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

    def check(self, params: Mapping[str, Any] | ActionParams) -> tuple[Facts, str]:
        p = self.params(params)
        with self.clusters.client(p.cluster) as (config, client):
            holder = resolve_holder(client, p.name, p.namespace)
            target = p.model_copy(update={"namespace": holder.namespace or p.namespace})
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
        return p.model_copy(update={"namespace": holder.namespace})

    def execute(self, params: Mapping[str, Any] | ActionParams, proposal_id: str) -> str:
        hinted = self.params(params)
        if hinted.namespace.startswith("_ray_internal"):
            raise ActionRefusedError(f"{self.action}: {self._refusal(hinted, None)}")
        submission = remediation_id("kill", proposal_id)
        with self.clusters.client(hinted.cluster) as (config, client):
            job = client.get_job(submission)
            if job is not None:
                resolved = _metadata(job).get(NAMESPACE_KEY) or hinted.namespace
                p = hinted.model_copy(update={"namespace": resolved})
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
            job = _wait_terminal(client, submission, self.job_timeout, self.poll_every)
            status = str(job.get("status") or "")
            if status != "SUCCEEDED":
                message = _last_line(str(job.get("message") or ""))
                raise ActionFailedError(
                    f"remediation job {submission} {status or 'did not finish'}: {message}"
                )
            if not _until(lambda: not _live(client, p), self.dead_timeout, self.poll_every):
                raise ActionFailedError(
                    f"remediation job {submission} SUCCEEDED but actor {p.name!r} in "
                    f"namespace {p.namespace!r} is not DEAD after {self.dead_timeout:g}s"
                )
        return (
            f"[{config.name}] remediation job {submission} SUCCEEDED: actor {p.name!r} in "
            f"namespace {p.namespace!r} is DEAD (ray.kill, no_restart=True)"
        )

    def verify(self, params: Mapping[str, Any] | ActionParams) -> bool:
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


class StopJobExecutor(RayExecutor):
    action = "ray.stop_job"
    params_model = StopJob

    def __init__(
        self,
        clusters: RayClusters,
        *,
        bookmarks: Bookmarks | None = None,
        stop_timeout: float = 60.0,
        poll_every: float = 0.5,
    ) -> None:
        super().__init__(clusters)
        self.bookmarks = bookmarks
        self.stop_timeout = stop_timeout
        self.poll_every = poll_every

    def check(self, params: Mapping[str, Any] | ActionParams) -> tuple[Facts, str]:
        p = self.params(params)
        with self.clusters.client(p.cluster) as (config, client):
            job = client.get_job(p.submission_id)
        if job is None:
            return (
                {"ray.job_running": False, "ray.job_terminal": False},
                f"[{config.name}] no Ray job {p.submission_id}",
            )
        status = str(job.get("status") or "")
        facts = {"ray.job_running": status in ACTIVE, "ray.job_terminal": status in TERMINAL}
        verb = "stop" if status in ACTIVE else "nothing to stop:"
        return facts, (
            f"[{config.name}] {verb} Ray job {p.submission_id} ({status}, "
            f"entrypoint {_clip(str(job.get('entrypoint') or ''))})"
        )

    def execute(self, params: Mapping[str, Any] | ActionParams, proposal_id: str) -> str:
        p = self.params(params)
        with self.clusters.client(p.cluster) as (config, client):
            job = client.get_job(p.submission_id)
            if job is None:
                raise ActionFailedError(f"[{config.name}] no Ray job {p.submission_id}")
            status = str(job.get("status") or "")
            if status in TERMINAL:
                return f"[{config.name}] Ray job {p.submission_id} is already {status}; not stopped"
            if self.bookmarks is not None:
                # Before stopping: the source must not report this STOPPED as unexpected.
                self.bookmarks.set(expected_stop_key(config.name, p.submission_id), proposal_id)
            client.stop_job(p.submission_id)
            job = _wait_terminal(client, p.submission_id, self.stop_timeout, self.poll_every)
            status = str(job.get("status") or "")
        if status not in TERMINAL:
            raise ActionFailedError(
                f"[{config.name}] Ray job {p.submission_id} still {status} "
                f"{self.stop_timeout:g}s after the stop request"
            )
        return f"[{config.name}] stopped Ray job {p.submission_id}: now {status}"

    def verify(self, params: Mapping[str, Any] | ActionParams) -> bool:
        p = self.params(params)
        with self.clusters.client(p.cluster) as (_, client):
            return live_status(client, p.submission_id) in TERMINAL


class ResubmitJobExecutor(RayExecutor):
    action = "ray.resubmit_job"
    params_model = ResubmitJob

    def __init__(
        self,
        clusters: RayClusters,
        *,
        categorize: Callable[[Sequence[Any]], set[str]] | None = None,
        rayjob_keys: Sequence[str] = DEFAULT_RAYJOB_KEYS,
        max_retries: int | None = None,
        start_timeout: float = 60.0,
        poll_every: float = 0.5,
    ) -> None:
        """`categorize` maps a job's parts to the failure categories found in them
        (default: the built-in playbooks through bot.core.diagnosis.Engine); `max_retries`,
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
        if self._categorize is None:
            engine = Engine(load_builtin([]))

            def categorize(parts: Sequence[Any]) -> set[str]:
                return set(engine.diagnose(parts).categories)

            self._categorize = categorize
        return self._categorize(parts)

    def _plan(self, client: RayDashboard, config: RayClusterConfig, p: ResubmitJob) -> _Plan:
        old = client.get_job(p.submission_id)
        if old is None:
            return _Plan(None, "", 0, {}, set(), f"no Ray job {p.submission_id}")
        metadata = _metadata(old)
        root = metadata.get(ROOT_KEY) or p.submission_id
        earlier = [j for j in client.list_jobs() if _metadata(j).get(ROOT_KEY) == root]
        resources = entrypoint_resources(client, p.submission_id)
        parts = job_parts(client, old, config, rayjob_keys=self.rayjob_keys)
        blocked = self.categories(parts) & NOT_RESUBMITTABLE
        return _Plan(old, root, len(earlier), resources, blocked, "", config.rayjob)

    def check(self, params: Mapping[str, Any] | ActionParams) -> tuple[Facts, str]:
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
            f"entrypoint {_clip(entrypoint)}; "
            f"runtime_env keys {sorted(_mapping(plan.old.get('runtime_env')))}; "
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

    def execute(self, params: Mapping[str, Any] | ActionParams, proposal_id: str) -> str:
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
                **_metadata(old),
                ROOT_KEY: plan.root,
                RESUBMIT_OF_KEY: p.submission_id,
                ATTEMPT_KEY: str(plan.attempts + 1),
                PROPOSAL_KEY: proposal_id,
                ACTION_KEY: self.action,
            }
            client.submit_job(
                with_override(str(old.get("entrypoint") or ""), p.override),
                submission_id=submission,
                runtime_env=_mapping(old.get("runtime_env")) or None,
                metadata=metadata,
                **plan.resources,
            )
        return (
            f"[{config.name}] resubmitted Ray job {p.submission_id} as {submission} "
            f"(resubmission {plan.attempts + 1} of at most {self.cap(p)}; "
            f"entrypoint resources {plan.resources_text()})"
        )

    def verify(self, params: Mapping[str, Any] | ActionParams) -> bool:
        """The newest resubmission of the job runs or has succeeded (one just submitted is
        PENDING while Ray sets up its runtime_env: waited for, up to `start_timeout`)."""
        p = self.params(params)
        deadline = time.monotonic() + self.start_timeout
        with self.clusters.client(p.cluster) as (_, client):
            while True:
                mine = [
                    j
                    for j in client.list_jobs()
                    if _metadata(j).get(RESUBMIT_OF_KEY) == p.submission_id
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


def ray_executors(
    configs: Sequence[RayClusterConfig],
    *,
    bookmarks: Bookmarks | None = None,
    python: str = "python",
    categorize: Callable[[Sequence[Any]], set[str]] | None = None,
    discovered: Callable[[], Sequence[RayClusterConfig]] | None = None,
) -> dict[str, RayExecutor]:
    """The three Ray executors by action id, for the action registry."""
    clusters = RayClusters(configs, discovered=discovered)
    executors: list[RayExecutor] = [
        KillActorExecutor(clusters, python=python),
        StopJobExecutor(clusters, bookmarks=bookmarks),
        ResubmitJobExecutor(clusters, categorize=categorize),
    ]
    return {e.action: e for e in executors}


# -- helpers -----------------------------------------------------------------------------


def _wait_terminal(
    client: RayDashboard, submission_id: str, timeout: float, every: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while True:
        job = client.get_job(submission_id) or {}
        if str(job.get("status") or "") in TERMINAL or time.monotonic() >= deadline:
            return job
        time.sleep(every)


def _until(condition: Callable[[], bool], timeout: float, every: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)


def _metadata(job: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in _mapping(job.get("metadata")).items()}


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return _clip(lines[-1], 300) if lines else ""


# -- the daemon's executor kind `ray` (bot.daemon.runner) -------------------------------


class RayActionExecutor:
    """The executor kind `ray`: serves ray.kill_actor, ray.stop_job and ray.resubmit_job
    for the action runner (`check`, `execute`, `verify` of a Proposal)."""

    def __init__(self, executors: Mapping[str, RayExecutor]) -> None:
        self.executors = dict(executors)

    def _for(self, proposal: Proposal) -> RayExecutor:
        executor = self.executors.get(proposal.action)
        if executor is None:
            raise ActionRefusedError(f"the ray executor does not run {proposal.action}")
        return executor

    def check(self, proposal: Proposal) -> LiveCheck:
        """Live facts; no preview to compare (the live description is in `describe`)."""
        facts, _ = self._for(proposal).check(proposal.params)
        return LiveCheck(facts=facts, preview=None)

    def describe(self, proposal: Proposal) -> str:
        """The live preview: what the cluster shows and what would be done."""
        return self._for(proposal).check(proposal.params)[1]

    def execute(self, proposal: Proposal) -> str:
        return self._for(proposal).execute(proposal.params, proposal.id)

    def verify(self, proposal: Proposal) -> Verification:
        ok = self._for(proposal).verify(proposal.params)
        return Verification(ok, "verified on the cluster" if ok else "not in effect yet")


def build(
    clusters: RayClusters,
    bookmarks: Bookmarks | None = None,
    *,
    max_retries: int = 2,
    categorize: Callable[[Sequence[Any]], set[str]] | None = None,
) -> RayActionExecutor:
    """The executor kind `ray` for `clusters`, resubmitting a job at most `max_retries`
    times and only when `categorize` (the daemon's own classification) finds no reason
    not to. Pass the store's bookmarks so the Ray source does not report a job pitcrew
    stopped (`bot.app.factories` builds it from the settings)."""
    executors: list[RayExecutor] = [
        KillActorExecutor(clusters),
        StopJobExecutor(clusters, bookmarks=bookmarks),
        ResubmitJobExecutor(clusters, categorize=categorize, max_retries=max_retries),
    ]
    return RayActionExecutor({e.action: e for e in executors})

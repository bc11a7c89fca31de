"""Executors of the Ray actions: kill a stale named actor, stop a job, resubmit a job.

Why this exists: the action specs (bot.core.actions.specs) declare what these actions take
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

The executors themselves are in `kill`, `resubmit` and here (stop); what they share is
in `executor_base`. This module is the adapter's face: `ray_executors` and `build`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.adapters.ray.bookmarks import expected_stop_key
from bot.adapters.ray.client import (
    ACTIVE,
    TERMINAL,
    RayClusterConfig,
)
from bot.adapters.ray.executor_base import (
    Facts,
    RayClusters,
    RayExecutor,
    clip,
    live_status,
    wait_terminal,
)
from bot.adapters.ray.kill import KillActorExecutor
from bot.adapters.ray.resubmit import ResubmitJobExecutor
from bot.core.actions.params import ActionParams, StopJob
from bot.core.actions.step import Step
from bot.core.errors import ActionFailedError
from bot.daemon.ports import Bookmarks


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

    def look(self, params: Mapping[str, Any] | ActionParams) -> tuple[Facts, str]:
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
            f"entrypoint {clip(str(job.get('entrypoint') or ''))})"
        )

    def execute(self, step: Step, plan: Any) -> str:
        params, proposal_id = step.params, step.proposal_id
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
            job = wait_terminal(client, p.submission_id, self.stop_timeout, self.poll_every)
            status = str(job.get("status") or "")
        if status not in TERMINAL:
            raise ActionFailedError(
                f"[{config.name}] Ray job {p.submission_id} still {status} "
                f"{self.stop_timeout:g}s after the stop request"
            )
        return f"[{config.name}] stopped Ray job {p.submission_id}: now {status}"

    def verified(self, params: Mapping[str, Any] | ActionParams) -> bool:
        p = self.params(params)
        with self.clusters.client(p.cluster) as (_, client):
            return live_status(client, p.submission_id) in TERMINAL


def ray_executors(
    configs: Sequence[RayClusterConfig],
    *,
    bookmarks: Bookmarks | None = None,
    python: str = "python",
    categorize: Callable[[Sequence[Any]], set[str]],
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


def build(
    clusters: RayClusters,
    bookmarks: Bookmarks | None = None,
    *,
    max_retries: int = 2,
    categorize: Callable[[Sequence[Any]], set[str]],
) -> dict[str, RayExecutor]:
    """The executor kind `ray` for `clusters` (one executor per Ray action id),
    resubmitting a job at most `max_retries` times and only when `categorize` (the
    daemon's own classification) finds no reason not to. Pass the store's bookmarks so
    the Ray source does not report a job pitcrew stopped (`bot.app.factories` builds it
    from the settings)."""
    executors: list[RayExecutor] = [
        KillActorExecutor(clusters),
        StopJobExecutor(clusters, bookmarks=bookmarks),
        ResubmitJobExecutor(clusters, categorize=categorize, max_retries=max_retries),
    ]
    return {e.action: e for e in executors}

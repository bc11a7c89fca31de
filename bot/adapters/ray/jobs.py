"""Everything pitcrew reads about one Ray job, through the dashboard.

Why this exists: a failed job is more than its JobDetails: the tail of its driver log,
its DEAD actors' death causes, its JobSupervisor's death when Ray's memory monitor took
it, and the ALIVE actors holding a name the failure says is taken. The source, `pitcrew
diagnose --ray-job` and the Ray executors gather the same parts; `job_parts` does it
once, and `bot.adapters.ray.signals` says what each record means.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from bot.adapters.ray.client import (
    LOG_LIMIT,
    SUPERVISOR_NAME,
    SUPERVISOR_NAMESPACE,
    DashboardUnreachableError,
    RayApiError,
    RayClusterConfig,
    RayDashboard,
    job_key,
)
from bot.adapters.ray.signals import (
    DEFAULT_RAYJOB_KEYS,
    IGNORED_NAMESPACES,
    context_fields,
    covered,
    death_parts,
    is_stale,
    names_taken,
    stale_signal,
)
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.ray_actors import ActorInfo
from bot.core.inputs.rayjob import job_info_parts
from bot.core.model import Signal, SourceKind, frozen_map

log = logging.getLogger("bot.adapters.ray.source")


def job_parts(
    client: RayDashboard,
    job: Mapping[str, Any],
    config: RayClusterConfig,
    *,
    log_limit: int = LOG_LIMIT,
    rayjob_keys: Sequence[str] = DEFAULT_RAYJOB_KEYS,
    jobs_by_id: Mapping[str, Mapping[str, Any]] | None = None,
    ignored_namespaces: Sequence[str] = IGNORED_NAMESPACES,
    now: datetime | None = None,
) -> list[InputPart]:
    """Everything pitcrew reads about one job: its `ray_job` signal with context fields,
    its driver log tail, its DEAD actors' death causes, and the stale actors its failure
    names. Used by the source and by `pitcrew diagnose --ray-job`.

    Raises DashboardUnreachableError when the dashboard stops answering; other API
    errors on the log or actors only leave those parts out."""
    key = job_key(job)
    origin = f"ray://{config.name}/jobs/{key}"
    base = job_info_parts(job, origin)
    first = base[0]
    assert isinstance(first, Signal)
    message_log = next((p for p in base[1:] if isinstance(p, LogText)), None)
    context = context_fields(job, config, rayjob_keys)
    signal = replace(first, fields=frozen_map({**first.fields, **context}), cluster=config.name)
    ref = signal.obj
    parts: list[InputPart] = [signal]

    tail = _optional(lambda: client.driver_log_tail(job, log_limit), b"", f"driver log of {key}")
    if tail:
        parts.append(LogText((tail,), SourceKind.DRIVER_LOG, f"{origin}/driver.log", ref, ref))
    if message_log is not None and not covered(message_log, tail):
        parts.append(message_log)

    job_id = str(job.get("job_id") or "")
    no_actors: list[ActorInfo] = []
    if job_id:
        dead = _optional(
            lambda: client.actors(job_id=job_id, state="DEAD"), no_actors, f"actors of {key}"
        )
        parts.extend(death_parts(dead, config, context, origin, ref))
    submission = str(job.get("submission_id") or "")
    if str(job.get("error_type") or "").startswith("JOB_SUPERVISOR") and submission:
        # The job died with its JobSupervisor actor (Ray's memory monitor can kill it):
        # its death cause, structured; the job message already carries the text.
        supervisors = _optional(
            lambda: client.actors(
                name=SUPERVISOR_NAME.format(submission_id=submission),
                namespace=SUPERVISOR_NAMESPACE,
                state="DEAD",
            ),
            no_actors,
            f"supervisor of {key}",
        )
        deaths = death_parts(supervisors, config, context, origin, ref)
        parts.extend(p for p in deaths if isinstance(p, Signal))
    names = names_taken(parts)
    if names:
        parts.extend(_holders(client, names, config, context, jobs_by_id, ignored_namespaces, now))
    return parts


def _holders(
    client: RayDashboard,
    names: Sequence[tuple[str, str]],
    config: RayClusterConfig,
    context: Mapping[str, str],
    jobs_by_id: Mapping[str, Mapping[str, Any]] | None,
    ignored: Sequence[str],
    now: datetime | None,
) -> list[InputPart]:
    """Stale signals for ALIVE actors holding a name the failure says is taken."""
    parts: list[InputPart] = []
    none: list[ActorInfo] = []
    no_jobs: list[dict[str, Any]] = []
    for name, namespace in names:
        scope = namespace if namespace not in ("", "None") else None

        def holding(name: str = name, scope: str | None = scope) -> list[ActorInfo]:
            return client.actors(name=name, namespace=scope, state="ALIVE")

        holders = _optional(holding, none, f"holders of {name}")
        if not holders:
            continue
        if jobs_by_id is None:
            jobs = _optional(client.list_jobs, no_jobs, "jobs")
            jobs_by_id = {str(j.get("job_id")): j for j in jobs if j.get("job_id")}
        for actor in holders:
            owner = jobs_by_id.get(actor.job_id)
            if is_stale(actor, owner, ignored):
                parts.append(stale_signal(actor, owner, config, context, now or datetime.now(UTC)))
    return parts


_T = TypeVar("_T")


def _optional(call: Callable[[], _T], default: _T, what: str) -> _T:
    """Call; on an API error other than the dashboard being unreachable, log and go on."""
    try:
        return call()
    except DashboardUnreachableError:
        raise
    except RayApiError as error:
        log.info("%s: %s", what, error)
        return default

"""Live diagnosis of one Ray job by its submission id, with the cluster's live facts.

Why this exists: `pitcrew diagnose --ray-address URL --ray-job ID` (and the
`/pitcrew diagnose <ray-job-id>` slash command) should say what file diagnosis
says, but from the cluster itself: the job's status and message, its driver log
tail and its actors (as the Ray source reads them), and the live facts that let
guarded actions be offered (is the actor stale? is the namespace idle? how often
was the job resubmitted?). Offline those facts are unknown and the actions stay
withheld; here the Ray executors' `check` computes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from bot.adapters.ray.client import RayApiError, RayClusterConfig, RayDashboard, headers_from_env
from bot.adapters.ray.executor_base import RayExecutor
from bot.adapters.ray.executors import ray_executors
from bot.adapters.ray.jobs import job_parts
from bot.core.diagnosis.analysis import diagnose as analyse
from bot.core.diagnosis.engine import Engine
from bot.core.errors import PitcrewError
from bot.core.inputs import InputPart
from bot.core.model import Diagnosis
from bot.daemon import live_checks
from bot.daemon.executor import Registry


@dataclass(frozen=True)
class LiveDiagnosis:
    diagnosis: Diagnosis
    facts: Mapping[str, bool]
    parts: tuple[InputPart, ...]
    job: Mapping[str, Any]


def normalize_address(address: str) -> str:
    """`host:port` or a URL -> the dashboard's base URL."""
    address = address.strip().rstrip("/")
    if not address:
        raise PitcrewError("--ray-address is empty")
    if "://" not in address:
        address = f"http://{address}"
    if urlparse(address).scheme not in ("http", "https"):
        raise PitcrewError(f"--ray-address must be an http(s) dashboard URL, not {address!r}")
    return address


class JobNotFoundError(PitcrewError):
    """The cluster answered, and has no job by that id."""


def diagnose_ray_job(
    engine: Engine,
    address: str,
    submission_id: str,
    *,
    headers: Mapping[str, str] | None = None,
    cluster: str = "",
    timeout: float = 10.0,
    executors: Mapping[str, RayExecutor] | None = None,
) -> LiveDiagnosis:
    """Fetch the job, its log tail and actors; diagnose; compute the facts the offered
    actions need; diagnose again with them. Raises PitcrewError naming the URL
    (JobNotFoundError when the cluster has no such job)."""
    url = normalize_address(address)
    config = RayClusterConfig(
        name=cluster or (urlparse(url).netloc or "ray"),
        url=url,
        headers=dict(headers_from_env() if headers is None else headers),
        timeout=timeout,
    )
    return diagnose_ray_job_on(engine, config, submission_id, executors=executors)


def diagnose_ray_job_on(
    engine: Engine,
    config: RayClusterConfig,
    submission_id: str,
    *,
    executors: Mapping[str, RayExecutor] | None = None,
) -> LiveDiagnosis:
    """`diagnose_ray_job` on a configured cluster (the daemon's `sources.ray` entries, so
    the signals carry its Kubernetes namespace as the Ray source's do)."""
    url = config.url
    client = RayDashboard.of(config)
    try:
        job = client.get_job(submission_id)
        if job is None:
            raise JobNotFoundError(f"{url}: no Ray job {submission_id!r}")
        jobs = client.list_jobs()
        by_id = {str(j["job_id"]): j for j in jobs if j.get("job_id")}
        parts = tuple(job_parts(client, job, config, jobs_by_id=by_id))
    except RayApiError as error:
        raise PitcrewError(str(error)) from None
    finally:
        client.close()
    hits = engine.hits(parts)
    first = analyse(hits, engine.library)
    if executors is None:
        executors = ray_executors([config], categorize=engine.categories)
    diagnosis, checked = live_checks.decide(
        first, lambda facts: analyse(hits, engine.library, facts), ray_checks(executors)
    )
    return LiveDiagnosis(diagnosis, checked.answer.facts, parts, job)


def ray_checks(executors: Mapping[str, RayExecutor]) -> dict[str, live_checks.Check]:
    """Each Ray executor's live check of an offer (`bot.daemon.executor.checked`, as
    the daemon's offers and approvals make it), for `bot.daemon.live_checks`."""
    return live_checks.executor_checks(Registry(executors))

"""What a Ray job or actor record means, as signals: pure values in, values out.

Why this exists: the source, `pitcrew diagnose --ray-job` and the Ray executors read the
same records (JobDetails, State API actors) and must agree on what they say: which
fields name where a job runs, which actor deaths tell a cause and which only follow
from the job ending, when a detached actor is stale, which actor names a failure says
are taken. Nothing here calls the dashboard; `bot.adapters.ray.jobs` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.adapters.ray.client import SUPERVISOR_NAMESPACE, TERMINAL, RayClusterConfig
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.ray_actors import (
    ActorInfo,
    actor_fields,
    actor_ref,
    death_log,
    death_signal,
    telling,
)
from bot.core.model import ObjectRef, Signal, SourceKind, frozen_map

DEFAULT_RAYJOB_KEYS = ("ray.io/rayjob", "kuberay.io/rayjob", "rayjob", "rayjob_name")
"""Job metadata keys naming the KubeRay RayJob (`name` or `namespace/name`)."""
IGNORED_NAMESPACES = ("serve", SUPERVISOR_NAMESPACE)
"""Namespaces whose detached actors outlive their drivers by design (Ray Serve)."""
_INTERNAL_PREFIX = "_ray_internal"
_TAKEN = re.compile(r"The name (?P<name>[^\s(]+) (?:\(namespace=(?P<ns>[^)]*)\) )?is already taken")
_MAX_ACTORS = 20
_MAX_METADATA = 20


def context_fields(
    job: Mapping[str, Any], config: RayClusterConfig, rayjob_keys: Sequence[str]
) -> dict[str, str]:
    """Fields naming where a job runs: pitcrew's cluster name, the Kubernetes namespace,
    RayCluster and RayJob (from the cluster's config or the job's metadata), and the
    job's metadata as `metadata.<key>`."""
    fields: dict[str, str] = {"cluster": config.name}
    if config.k8s_cluster:
        fields["k8s_cluster"] = config.k8s_cluster
    metadata = job.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    namespace, rayjob = config.k8s_namespace, config.rayjob
    for key in rayjob_keys:
        value = str(metadata.get(key) or "").strip()
        if value:
            scope, _, name = value.rpartition("/")
            rayjob = name
            namespace = scope or namespace
            break
    fields.update(
        {k: v for k, v in (("namespace", namespace), ("ray_cluster", config.ray_cluster)) if v}
    )
    if rayjob:
        fields["rayjob"] = rayjob
    for key, value in list(metadata.items())[:_MAX_METADATA]:
        fields[f"metadata.{key}"] = str(value)[:200]
    return fields


def death_parts(
    actors: Iterable[ActorInfo],
    config: RayClusterConfig,
    context: Mapping[str, str],
    origin: str,
    workload: ObjectRef | None,
) -> list[InputPart]:
    """A `ray_actor` signal per death that tells a cause (`ray_actors.telling`), and the
    death messages as worker log text, as a pasted `ray list actors` makes them."""
    dead = [actor for actor in actors if telling(actor)][:_MAX_ACTORS]
    parts: list[InputPart] = [
        death_signal(actor, f"{origin}/actors/{actor.actor_id}", context, workload, config.name)
        for actor in dead
    ]
    text = death_log(dead)
    if text:
        parts.append(
            LogText((text,), SourceKind.WORKER_LOG, f"{origin}/actor-deaths", workload, workload)
        )
    return parts


def stale_signal(
    actor: ActorInfo,
    owner: Mapping[str, Any] | None,
    config: RayClusterConfig,
    context: Mapping[str, str],
    now: datetime,
) -> Signal:
    """A detached named actor still ALIVE although the job that created it has finished."""
    status = str(owner.get("status") or "") if owner else ""
    submission = str(owner.get("submission_id") or "") if owner else ""
    ended = ms_time(owner.get("end_time")) if owner else None
    age = f" {human(now - ended)} ago" if ended else ""
    owner_text = f"job {actor.job_id}" + (f" ({submission})" if submission else "")
    fields = {
        **context,
        **actor_fields(actor),
        "owner_job_id": actor.job_id,
        "owner_submission_id": submission,
        "owner_status": status,
        "stale_seconds": str(int((now - ended).total_seconds())) if ended else "",
        "severity": "warning",
    }
    return Signal(
        source=SourceKind.RAY_ACTOR,
        text=(
            f"Detached actor {actor.name} ({actor.class_name}, namespace {actor.namespace}) "
            f"is ALIVE but its owner {owner_text} finished {status or 'earlier'}{age}"
        ),
        reason="StaleActor",
        fields=frozen_map({k: v for k, v in fields.items() if v}),
        obj=actor_ref(actor),
        cluster=config.name,
        time=now,
        origin=f"ray://{config.name}/actors/{actor.actor_id}",
    )


def is_stale(
    actor: ActorInfo, owner: Mapping[str, Any] | None, ignored_namespaces: Sequence[str]
) -> bool:
    """ALIVE, named, detached, outside Ray's own namespaces, and its owner job finished."""
    if actor.state != "ALIVE" or not actor.name or not actor.is_detached:
        return False
    if actor.namespace in ignored_namespaces or actor.namespace.startswith(_INTERNAL_PREFIX):
        return False
    return owner is not None and str(owner.get("status") or "") in TERMINAL


def names_taken(parts: Sequence[InputPart]) -> list[tuple[str, str]]:
    found: dict[tuple[str, str], None] = {}
    for part in parts:
        texts: Iterable[bytes | str] = ()
        if isinstance(part, Signal):
            texts = (part.text,)
        elif isinstance(part.chunks, list | tuple):
            # Only re-iterable chunks: a one-shot stream belongs to the classifier.
            texts = part.chunks
        for text in texts:
            decoded = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
            for match in _TAKEN.finditer(decoded):
                found[(match["name"].strip("'\""), match["ns"] or "")] = None
    return list(found)[:5]


def covered(message_log: LogText, tail: bytes) -> bool:
    """The job message's log excerpt is already in the driver log tail."""
    if not tail:
        return False
    text = b"".join(message_log.chunks)
    _, _, body = text.partition(b"\n")
    probe = body.strip()[-400:]
    return bool(probe) and probe in tail


def as_int(value: Any) -> int:
    """An integer field of a record; 0 when it is missing, a bool or not a number."""
    if isinstance(value, bool):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def ms_time(value: Any) -> datetime | None:
    ms = as_int(value)
    return datetime.fromtimestamp(ms / 1000, UTC) if ms > 0 else None


def human(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"

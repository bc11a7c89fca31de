"""A Ray actor as the State API lists it, and the `ray_actor` signal its death makes.

Why this exists: the Ray source polls `GET /api/v0/actors?detail=true` and a person pastes
`ray list actors --detail` (YAML, JSON or a table): the same records, so they must make
the same signal, with the same fields and the same object, and key to the same incident.
One reader (`ActorInfo.parse`), one rule for which deaths tell a cause (`telling`), one
builder of the signal (`death_signal`) and of the death messages as worker log text
(`death_log`). The object is `RayActor/<name or id>` without a namespace: the actor's Ray
namespace is its field `ray_namespace`, never a Kubernetes namespace, so it must not
take part in the workload key. Pure: records in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from bot.core.inputs.values import as_map, as_text, compact, text_at
from bot.core.model import ObjectRef, Signal, SourceKind, frozen_map

# Deaths that follow from the job ending (or a deliberate kill), not a cause.
_CONSEQUENTIAL = frozenset({"OWNER_DIED", "OUT_OF_SCOPE", "REF_DELETED", "RAY_KILL"})
_INTENDED = re.compile(r"Worker exit type: INTENDED_(?:USER|SYSTEM)_EXIT")


@dataclass(frozen=True)
class ActorInfo:
    """One actor as the State API lists it (`detail=true`), with its death cause flattened."""

    actor_id: str
    name: str
    namespace: str
    state: str
    job_id: str
    class_name: str = ""
    is_detached: bool = False
    pid: int = 0
    node_id: str = ""
    num_restarts: int = 0
    death_kind: str = ""
    death_reason: str = ""
    death_message: str = ""
    required_resources: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> ActorInfo:
        """The actor of one State API record, from the dashboard's JSON or read back from
        `ray list actors` output (where booleans and numbers may arrive as text)."""
        kind, reason, message = death_of(data.get("death_cause"))
        resources = data.get("required_resources")
        return cls(
            actor_id=text_at(data, "actor_id"),
            name=text_at(data, "name"),
            namespace=text_at(data, "ray_namespace"),
            state=text_at(data, "state"),
            job_id=text_at(data, "job_id"),
            class_name=text_at(data, "class_name"),
            is_detached=text_at(data, "is_detached").lower() == "true",
            pid=_int(data.get("pid")),
            node_id=text_at(data, "node_id"),
            num_restarts=_int(data.get("num_restarts")),
            death_kind=kind,
            death_reason=reason,
            death_message=message,
            required_resources=MappingProxyType(
                {
                    str(k): float(v)
                    for k, v in as_map(resources).items()
                    if isinstance(v, int | float) and not isinstance(v, bool)
                }
            ),
        )


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    try:
        return int(as_text(value) or 0)
    except ValueError:
        return 0


def death_of(cause: Any) -> tuple[str, str, str]:
    """(context kind, reason, message) of an actor's `death_cause`, a oneof of
    `actor_died_error_context` (reason WORKER_DIED, NODE_DIED, OWNER_DIED, RAY_KILL …),
    `oom_context` (the memory monitor), `creation_task_failure_context`,
    `runtime_env_failed_context`, `actor_unschedulable_context`."""
    for kind, context in as_map(cause).items():
        if not isinstance(context, Mapping):
            continue
        message = text_at(context, "error_message") or text_at(
            context, "formatted_exception_string"
        )
        reason = text_at(context, "reason")
        if kind == "oom_context":
            reason = reason or "OUT_OF_MEMORY"
        return str(kind), reason, message
    return "", "", ""


def telling(actor: ActorInfo) -> bool:
    """Whether an actor's death tells a cause. Deaths that only follow from the job
    ending (owner died, out of scope, `ray.kill`, intended exits) do not: at teardown
    every actor dies that way, and they would hide the real error."""
    if not actor.death_kind:
        return False  # the plain table shows no death cause: a DEAD row alone tells nothing
    if actor.death_kind != "actor_died_error_context":
        return True  # OOM, creation failure, runtime_env failure, unschedulable
    if actor.death_reason in _CONSEQUENTIAL:
        return False
    return not _INTENDED.search(actor.death_message)


def actor_fields(actor: ActorInfo) -> dict[str, str]:
    """The fields every `ray_actor` signal carries about its actor (those with a value)."""
    return compact(
        {
            "actor_id": actor.actor_id,
            "actor_name": actor.name,
            "ray_namespace": actor.namespace,
            "class_name": actor.class_name,
            "state": actor.state,
            "is_detached": str(actor.is_detached).lower(),
        }
    )


def actor_ref(actor: ActorInfo) -> ObjectRef:
    """The object a `ray_actor` signal is about: the actor by name (else id), no namespace."""
    return ObjectRef("RayActor", actor.name or actor.actor_id)


def death_signal(
    actor: ActorInfo,
    origin: str,
    context: Mapping[str, str] | None = None,
    workload: ObjectRef | None = None,
    cluster: str = "",
) -> Signal:
    """The `ray_actor` signal of a dead actor: its death message as text, the death
    cause's reason (else its kind) as reason, `context` (where the job runs) beside the
    actor's own fields."""
    fields = {
        **(context or {}),
        **actor_fields(actor),
        "death_kind": actor.death_kind,
        "death_reason": actor.death_reason,
        "pid": str(actor.pid) if actor.pid else "",
        "node_id": actor.node_id,
        "actor_job_id": actor.job_id,
    }
    return Signal(
        source=SourceKind.RAY_ACTOR,
        text=actor.death_message or f"actor {actor.name or actor.actor_id} is DEAD",
        reason=actor.death_reason or actor.death_kind or "DEAD",
        fields=frozen_map(compact(fields)),
        obj=actor_ref(actor),
        workload=workload,
        cluster=cluster,
        origin=origin,
    )


def death_log(actors: Iterable[ActorInfo]) -> bytes:
    """The death messages of `actors` (each once per class), one line per message line,
    prefixed as Ray prefixes a worker's output: `(Class pid=N, actor_id=…)`; b"" if none."""
    lines: list[str] = []
    seen: set[tuple[str, str]] = set()
    for actor in actors:
        if not actor.death_message or (actor.class_name, actor.death_message) in seen:
            continue
        seen.add((actor.class_name, actor.death_message))
        prefix = (
            f"({actor.class_name or 'actor'} pid={actor.pid or '?'}, actor_id={actor.actor_id})"
        )
        lines.extend(
            f"{prefix} {line}" for line in actor.death_message.splitlines() if line.strip()
        )
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""

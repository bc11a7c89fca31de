"""Ray State API records (`ray list actors|nodes|jobs|tasks`, any output format) -> parts.

The records are what the State API returns (`ActorState`, `NodeState`,
`JobDetails`), read back from a table, YAML or JSON. They say the same as the
live Ray source's records, so they become the same signals:

- a DEAD actor whose death tells a cause -> a `ray_actor` signal (reason: the
  death cause's `reason`, or its kind) and its death message as worker log
  text, so the log signatures read it as they read a driver log with that
  text. Deaths that only follow from a job ending (the owner died, out of
  scope, `ray.kill`, an intended exit) are left out, as the live source does:
  at teardown every actor dies that way. An ALIVE actor, or a DEAD row without
  its death cause (the plain table), says nothing.
- a DEAD node -> a `node_status` signal (reason `DEAD`) with Ray's state
  message and the death reason it names (`UNEXPECTED_TERMINATION` …).
- a job -> its `ray_job` signal (`rayjob.job_info_parts`); a FAILED job's
  message is also handed on as driver log text.
- a FAILED task -> its error message (shown with `--detail`) as worker log
  text, as Ray forwards a task's error to the driver; the plain table's
  `ERROR_TYPE` alone names no cause pitcrew can check.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from bot.core.inputs import InputPart, LogText
from bot.core.inputs.rayjob import is_ray_job_info, job_info_parts
from bot.core.inputs.values import as_map, as_text, compact, text_at
from bot.core.model import ObjectRef, Signal, SourceKind

ACTOR_KEYS = frozenset({"actor_id", "class_name", "state"})
NODE_KEYS = frozenset({"node_id", "node_ip", "state"})
TASK_KEYS = frozenset({"task_id", "state", "func_or_class_name"})
# Deaths that follow from the job ending (or a deliberate kill), not a cause.
_CONSEQUENTIAL = frozenset({"OWNER_DIED", "OUT_OF_SCOPE", "REF_DELETED", "RAY_KILL"})
_INTENDED = re.compile(r"Worker exit type: INTENDED_(?:USER|SYSTEM)_EXIT")
# Ray's state message of a dead node (dashboard utils: the NodeDeathInfo reason, then
# its message).
_NODE_DEATHS = (
    ("Unexpected termination", "UNEXPECTED_TERMINATION"),
    ("Expected termination", "EXPECTED_TERMINATION"),
    ("Terminated due to preemption", "AUTOSCALER_DRAIN_PREEMPTED"),
    ("Terminated due to idle", "AUTOSCALER_DRAIN_IDLE"),
)
_MAX_RECORDS = 2000


def record_kind(record: Any) -> str:
    """`actor`, `node`, `task`, `job` or "" for one State API record."""
    if not isinstance(record, Mapping) or "kind" in record or "apiVersion" in record:
        return ""
    keys = set(record)
    if keys >= ACTOR_KEYS:
        return "actor"
    if keys >= NODE_KEYS:
        return "node"
    if keys >= TASK_KEYS:
        return "task"
    return "job" if is_ray_job_info(record) else ""


def state_parts(data: Any, origin: str = "") -> tuple[InputPart, ...] | None:
    """The parts of State API actor, node or task records (a list or one); None otherwise.
    Job records are Jobs API records and are read by `rayjob`."""
    records = data if isinstance(data, list) else [data]
    kinds = {record_kind(record) for record in records}
    if not records or len(kinds) != 1 or kinds & {"", "job"}:
        return None
    return records_parts(kinds.pop(), records, origin)


def records_parts(kind: str, records: Iterable[Any], origin: str) -> tuple[InputPart, ...]:
    """The parts of records of one kind (`actor`, `node`, `task`, `job`)."""
    kept = [as_map(r) for _, r in zip(range(_MAX_RECORDS), records, strict=False)]
    if kind == "actor":
        return actor_parts(kept, origin)
    if kind == "task":
        return task_parts(kept, origin)
    if kind == "node":
        return tuple(node_signal(r, origin) for r in kept if text_at(r, "state") == "DEAD")
    return tuple(part for record in kept for part in _job_parts(record, origin))


# -- actors ---------------------------------------------------------------------------


def death_of(cause: Any) -> tuple[str, str, str]:
    """(context kind, reason, message) of an actor's `death_cause`, a oneof of
    `actor_died_error_context` (reason WORKER_DIED, NODE_DIED, OWNER_DIED, RAY_KILL …),
    `oom_context`, `creation_task_failure_context`, `runtime_env_failed_context`,
    `actor_unschedulable_context`."""
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


def actor_parts(records: Iterable[Mapping[str, Any]], origin: str) -> tuple[InputPart, ...]:
    """A `ray_actor` signal per DEAD actor whose death tells a cause, and the death
    messages (each once) as worker log text."""
    parts: list[InputPart] = []
    lines: list[str] = []
    seen: set[tuple[str, str]] = set()
    for record in records:
        if text_at(record, "state") != "DEAD":
            continue
        kind, reason, message = death_of(record.get("death_cause"))
        if not telling(kind, reason, message):
            continue
        parts.append(_actor_signal(record, kind, reason, message, origin))
        class_name = text_at(record, "class_name")
        if not message or (class_name, message) in seen:
            continue
        seen.add((class_name, message))
        prefix = (
            f"({class_name or 'actor'} pid={text_at(record, 'pid') or '?'}, "
            f"actor_id={text_at(record, 'actor_id')})"
        )
        lines.extend(f"{prefix} {line}" for line in message.splitlines() if line.strip())
    if lines:
        text = ("\n".join(lines) + "\n").encode("utf-8")
        where = f"{origin} (actor deaths)" if origin else "actor deaths"
        parts.append(LogText((text,), SourceKind.WORKER_LOG, where))
    return tuple(parts)


def telling(kind: str, reason: str, message: str) -> bool:
    """Whether an actor's death tells a cause. Deaths that only follow from the job
    ending (owner died, out of scope, `ray.kill`, intended exits) do not: at teardown
    every actor dies that way, and they would hide the real error."""
    if not kind:
        return False  # the plain table shows no death cause: a DEAD row alone tells nothing
    if kind != "actor_died_error_context":
        return True  # OOM, creation failure, runtime_env failure, unschedulable
    if reason in _CONSEQUENTIAL:
        return False
    return not _INTENDED.search(message)


def _actor_signal(
    record: Mapping[str, Any], kind: str, reason: str, message: str, origin: str
) -> Signal:
    name, actor_id = text_at(record, "name"), text_at(record, "actor_id")
    fields = {
        "actor_id": actor_id,
        "actor_name": name,
        "ray_namespace": text_at(record, "ray_namespace"),
        "class_name": text_at(record, "class_name"),
        "state": "DEAD",
        "death_kind": kind,
        "death_reason": reason,
        "is_detached": as_text(record.get("is_detached")).lower(),
        "pid": "" if text_at(record, "pid") == "0" else text_at(record, "pid"),
        "node_id": text_at(record, "node_id"),
        "actor_job_id": text_at(record, "job_id"),
    }
    return Signal(
        source=SourceKind.RAY_ACTOR,
        text=message or f"actor {name or actor_id} is DEAD",
        reason=reason or kind or "DEAD",
        fields=compact(fields),
        obj=ObjectRef("RayActor", name or actor_id, text_at(record, "ray_namespace")),
        origin=origin,
    )


# -- tasks, nodes and jobs ------------------------------------------------------------


def task_parts(records: Iterable[Mapping[str, Any]], origin: str) -> tuple[InputPart, ...]:
    """The error messages of FAILED tasks (each once) as worker log text."""
    lines: list[str] = []
    seen: set[str] = set()
    for record in records:
        message = text_at(record, "error_message")
        if text_at(record, "state") != "FAILED" or not message or message in seen:
            continue
        seen.add(message)
        prefix = (
            f"({text_at(record, 'func_or_class_name') or 'task'} "
            f"pid={text_at(record, 'worker_pid') or '?'}, task_id={text_at(record, 'task_id')})"
        )
        lines.extend(f"{prefix} {line}" for line in message.splitlines() if line.strip())
    if not lines:
        return ()
    where = f"{origin} (task errors)" if origin else "task errors"
    return (LogText((("\n".join(lines) + "\n").encode("utf-8"),), SourceKind.WORKER_LOG, where),)


def node_signal(record: Mapping[str, Any], origin: str) -> Signal:
    """The `node_status` signal of a DEAD Ray node."""
    message = text_at(record, "state_message")
    name = text_at(record, "node_name") or text_at(record, "node_ip") or text_at(record, "node_id")
    fields = {
        "ray_node_id": text_at(record, "node_id"),
        "node_ip": text_at(record, "node_ip"),
        "node_name": text_at(record, "node_name"),
        "is_head_node": as_text(record.get("is_head_node")).lower(),
        "state": "DEAD",
        "state_message": message,
        "death_reason": next((r for words, r in _NODE_DEATHS if message.startswith(words)), ""),
    }
    return Signal(
        source=SourceKind.NODE_STATUS,
        text=message or f"Ray node {name} is DEAD",
        reason="DEAD",
        fields=compact(fields),
        obj=ObjectRef("RayNode", name),
        origin=origin,
    )


def _job_parts(record: Mapping[str, Any], origin: str) -> tuple[InputPart, ...]:
    parts = job_info_parts(record, origin)
    message = text_at(record, "message")
    if text_at(record, "status") != "FAILED" or not message or len(parts) > 1:
        return parts  # a multi-line message is already handed on as driver log
    job = text_at(record, "submission_id") or text_at(record, "job_id")
    where = f"{origin} (ray job {job} message)" if origin else f"ray job {job} message"
    return (*parts, LogText([message.encode("utf-8")], SourceKind.DRIVER_LOG, where))

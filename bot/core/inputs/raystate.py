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

from collections.abc import Iterable, Mapping
from typing import Any

from bot.core.inputs import InputPart, LogText
from bot.core.inputs.ray_actors import ActorInfo, death_log, death_signal, telling
from bot.core.inputs.rayjob import is_ray_job_info, job_info_parts
from bot.core.inputs.values import as_map, as_text, compact, text_at
from bot.core.model import ObjectRef, Signal, SourceKind

ACTOR_KEYS = frozenset({"actor_id", "class_name", "state"})
NODE_KEYS = frozenset({"node_id", "node_ip", "state"})
TASK_KEYS = frozenset({"task_id", "state", "func_or_class_name"})
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


def actor_parts(records: Iterable[Mapping[str, Any]], origin: str) -> tuple[InputPart, ...]:
    """A `ray_actor` signal per DEAD actor whose death tells a cause, and the death
    messages (each once) as worker log text, as the Ray source makes them
    (`bot.core.inputs.ray_actors`)."""
    actors = [ActorInfo.parse(r) for r in records if text_at(r, "state") == "DEAD"]
    dead = [actor for actor in actors if telling(actor)]
    parts: list[InputPart] = [death_signal(actor, origin) for actor in dead]
    text = death_log(dead)
    if text:
        where = f"{origin} (actor deaths)" if origin else "actor deaths"
        parts.append(LogText((text,), SourceKind.WORKER_LOG, where))
    return tuple(parts)


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

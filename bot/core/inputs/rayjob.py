"""Ray job output -> `ray_job` signals: Jobs API JSON (JobDetails) and `ray job status` text.

A failed job's `message` often carries the tail of the driver log ("…failed
with exit code 1, last available logs (truncated to 20,000 chars):\\n…"), so a
multi-line message is also handed on as driver log text for log signatures.
The same holds for a RayJob's `.status.message`, which KubeRay copies from
Ray (see `message_parts`, used by `kuberay.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from bot.core.inputs import InputPart, LogText
from bot.core.inputs.blocks import Block, Line, Miss, block_end, lines_from
from bot.core.inputs.values import compact, text_at
from bot.core.model import ObjectRef, Signal, SourceKind

SUBMISSION_KIND = "RayJobSubmission"

_ANSI = r"(?:\x1b\[[\d;]*m)*"
# Ray's CLI logger writes "record" lines when its output is not a terminal (a CI log,
# a pod's log): `2025-11-03 10:14:20,511\tERR cli.py:74 -- Job '…' failed`.
CLI_RECORD = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\s+[A-Z]{3,7}\s+\S+:\d+ -- "
# Where a status line can start (for the segmenter's candidate scan).
STATUS_START = rf"{_ANSI}(?:Status for job '|Job ')"
LOGGED_STATUS_START = rf"{CLI_RECORD}{_ANSI}(?:Status for job '|Job ')"
# `ray job status` / `ray job submit` (ray/dashboard/modules/job/cli.py `_log_job_status`).
STATUS_LINE = re.compile(
    rf"^(?:{CLI_RECORD})?{_ANSI}(?:Status for job '(?P<id>[^']+)': (?P<status>[A-Z_]+)"
    rf"|Job '(?P<done_id>[^']+)' (?P<verb>succeeded|failed|was stopped)){_ANSI}\s*$"
)
_MESSAGE_LINE = re.compile(rf"^(?:{CLI_RECORD})?{_ANSI}Status message: (?P<message>.*?){_ANSI}\s*$")
_VERB_STATUS = {"succeeded": "SUCCEEDED", "failed": "FAILED", "was stopped": "STOPPED"}
_LOOKAHEAD_LINES = 4
_RAY_JOB_ID = re.compile(r"^[0-9a-f]{8}$")


# -- Jobs API JSON --------------------------------------------------------------


def is_ray_job_info(data: Any) -> bool:
    """A Jobs API job (JobDetails / JobInfo dict), not a Kubernetes object."""
    if not isinstance(data, Mapping) or "kind" in data or "apiVersion" in data:
        return False
    has_id = "submission_id" in data or "job_id" in data
    return has_id and "status" in data and ("entrypoint" in data or "message" in data)


def ray_job_parts(data: Any, origin: str = "") -> tuple[InputPart, ...] | None:
    """The parts of one job or a list of jobs; None when `data` is not Ray job info."""
    if isinstance(data, list):
        jobs = [item for item in data if is_ray_job_info(item)]
        if not jobs:
            return None
        return tuple(part for job in jobs for part in job_info_parts(job, origin))
    if is_ray_job_info(data):
        return job_info_parts(data, origin)
    return None


def job_info_parts(info: Mapping[str, Any], origin: str = "") -> tuple[InputPart, ...]:
    """A `ray_job` signal for one job, plus its message as driver log text when it has logs."""
    submission_id = text_at(info, "submission_id")
    job_id = text_at(info, "job_id")
    status = text_at(info, "status")
    ref = ObjectRef(SUBMISSION_KIND, submission_id or job_id)
    summary, logs = message_parts(info.get("message"), ref, origin)
    fields = {
        "submission_id": submission_id,
        "job_id": job_id,
        "status": status,
        "error_type": text_at(info, "error_type"),
        "entrypoint": text_at(info, "entrypoint"),
        "driver_exit_code": text_at(info, "driver_exit_code"),
        "type": text_at(info, "type"),
    }
    signal = Signal(
        source=SourceKind.RAY_JOB,
        text=summary or f"Ray job {ref.name}: {status}",
        reason=status,
        fields=compact(fields),
        obj=ref,
        workload=ref,
        time=_epoch_ms(info.get("end_time")) or _epoch_ms(info.get("start_time")),
        origin=origin,
    )
    return (signal, logs) if logs is not None else (signal,)


def message_parts(message: Any, ref: ObjectRef, origin: str) -> tuple[str, LogText | None]:
    """(the status line of a job message, the whole message as driver log if multi-line)."""
    if not isinstance(message, str) or not message.strip():
        return "", None
    text = message.strip()
    first, newline, _ = text.partition("\n")
    if not newline:
        return text, None
    where = f"{origin} ({ref} message)" if origin else f"{ref} message"
    logs = LogText([text.encode("utf-8")], SourceKind.DRIVER_LOG, where, ref, ref)
    return first.rstrip("\r"), logs


def _epoch_ms(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    try:
        return datetime.fromtimestamp(value / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


# -- `ray job status` text ------------------------------------------------------


def job_status_block(text: str, start: int, origin: str) -> Block | Miss:
    """A `Status for job 'X': S` / `Job 'X' failed` line and its `Status message:`.

    Only the status line is consumed: the message and any log lines after it
    stay log text, so log signatures still see them.
    """
    lines = lines_from(text, start)
    first = next(lines, None)
    match = STATUS_LINE.match(first.text) if first else None
    if first is None or match is None:
        return Miss(start + 1)
    job = match["id"] or match["done_id"] or ""
    status = match["status"] or _VERB_STATUS.get(match["verb"] or "", "")
    message = _status_message(lines)
    return Block(block_end(first, text), (_status_signal(job, status, message, origin),))


def _status_message(lines: Iterator[Line]) -> str:
    for _, line in zip(range(_LOOKAHEAD_LINES), lines, strict=False):
        found = _MESSAGE_LINE.match(line.text)
        if found:
            return found["message"].strip()
        if STATUS_LINE.match(line.text):
            break
    return ""


def _status_signal(job: str, status: str, message: str, origin: str) -> Signal:
    ref = ObjectRef(SUBMISSION_KIND, job)
    id_field = "job_id" if _RAY_JOB_ID.match(job) else "submission_id"
    return Signal(
        source=SourceKind.RAY_JOB,
        text=message or f"Ray job {job}: {status}",
        reason=status,
        fields=compact({id_field: job, "status": status}),
        obj=ref,
        workload=ref,
        origin=origin,
    )

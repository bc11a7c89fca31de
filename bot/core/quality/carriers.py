"""Carriers: the ways a catalogued message reaches a user, applied to its filled text.

Why this exists: a message is never read bare. A raylet line comes behind its
glog prefix, a worker's line behind `(Actor pid=…, ip=…)` and perhaps
`[repeated 3x across cluster]`, in colour, JSON-escaped inside a RayJob's
`status.message` or a Ray job record, hard-wrapped by a terminal at 80 or 120
columns, or cut after its first line; an Event inside a describe's Events block
or a `kubectl get events` row; a status field in YAML or JSON. Each carrier is a
function of the entry and its filled message, applied by the entry's `kind`.
Pure: strings in, strings out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol


class Carried(Protocol):
    """What a carrier reads of the message it carries (a catalogue or an inventory entry)."""

    @property
    def source(self) -> str: ...
    @property
    def emitter(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def object(self) -> str | None: ...


Carry = Callable[[Carried, str], str | None]
"""The carried text, or None when the carrier does not apply (a one-line message
cut after its first line, a short one wrapped at a width it fits in)."""

_STAMP = "2025-01-01 12:00:00,123"
_ACTOR = "(TrainWorker pid=4721, ip=10.4.3.21) "
_RAYLET = "(raylet, ip=10.4.3.21) "
_CYAN, _RED, _BOLD, _RESET = "\x1b[36m", "\x1b[31m", "\x1b[1m", "\x1b[0m"
_CXX = (".cc", ".h", ".cpp", ".cu")
# Where a carrier puts a component that the entry's emitter does not name itself.
_FROM: Mapping[str, str] = {
    "scheduler": "default-scheduler",
    "eviction_manager": "kubelet",
    "operator": "raycluster-controller",
}


@dataclass(frozen=True, slots=True)
class Carrier:
    name: str
    kind: str
    carry: Carry


def _lines(message: str) -> list[str]:
    return message.split("\n")


def _each(prefix: str, message: str, suffix: str = "") -> str:
    return "\n".join(f"{prefix}{line}{suffix}" for line in _lines(message))


def _file(entry: Carried, fallback: str) -> str:
    name = entry.source.rsplit("/", 1)[-1]
    return name if name.endswith(fallback) else f"{name.rsplit('.', 1)[0]}{fallback}"


def bare(entry: Carried, message: str) -> str:
    return message


def glog(entry: Carried, message: str) -> str:
    """Ray's C++ log line (spdlog in glog's layout): the prefix on the first line."""
    name = entry.source.rsplit("/", 1)[-1]
    where = name if name.endswith(_CXX) else "core_worker.cc"
    return f"[{_STAMP} E 4721 4790] {where}:123: {message}"


def python_logging(entry: Carried, message: str) -> str:
    """Ray's Python logging layout: `stamp<TAB>LEVEL file.py:line -- message`."""
    return f"{_STAMP}\tERROR {_file(entry, '.py')}:123 -- {message}"


def actor(entry: Carried, message: str) -> str:
    """A worker's output forwarded to the driver: every line behind its process prefix."""
    return _each(_ACTOR, message)


def raylet(entry: Carried, message: str) -> str:
    return _each(_RAYLET, message)


def repeated(entry: Carried, message: str) -> str:
    """The driver's log deduplication: `[repeated Nx across cluster]` after each line."""
    return _each(_ACTOR, message, " [repeated 3x across cluster]")


def colour(entry: Carried, message: str) -> str:
    """The driver's coloured process prefix, and the message in bold red."""
    prefix = f"{_CYAN}{_ACTOR.strip()}{_RESET} "
    return "\n".join(f"{prefix}{_BOLD}{_RED}{line}{_RESET}" for line in _lines(message))


def rayjob_status(entry: Carried, message: str) -> str:
    """The message as a RayJob's `status.message` (KubeRay copies the Ray job's)."""
    return _json(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": "train-grpo", "namespace": "ml"},
            "status": {
                "jobDeploymentStatus": "Failed",
                "jobStatus": "FAILED",
                "reason": "AppFailed",
                "message": _entrypoint_failed(message),
            },
        }
    )


def job_record(entry: Carried, message: str) -> str:
    """The message inside a Ray job record (`ray job status`, the Jobs API)."""
    return _json(
        {
            "type": "SUBMISSION",
            "job_id": "05000000",
            "submission_id": "raysubmit_mN4b7Vc2Xz8Lk1Qp",
            "status": "FAILED",
            "entrypoint": "python train_grpo.py",
            "message": _entrypoint_failed(message),
            "error_type": None,
        }
    )


def _entrypoint_failed(message: str) -> str:
    return (
        "Job entrypoint command failed with exit code 1, last available logs "
        f"(truncated to 20,000 chars):\n{message}\n"
    )


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def wrapped(width: int) -> Carry:
    """A terminal's hard wrap: every line cut at `width` columns, mid-token or not."""

    def carry(entry: Carried, message: str) -> str | None:
        if all(len(line) <= width for line in _lines(message)):
            return None
        return "\n".join(
            line[start : start + width]
            for line in _lines(message)
            for start in range(0, max(len(line), 1), width)
        )

    return carry


def first_line(entry: Carried, message: str) -> str | None:
    """Only the first line of a multi-line message, as people quote it."""
    lines = [line for line in _lines(message) if line.strip()]
    return lines[0] if len(lines) > 1 else None


def markdown_fence(entry: Carried, message: str) -> str:
    """Issue markdown: a sentence, then the message in a fenced code block."""
    return f"The job fails with this error:\n\n```text\n{message}\n```\n"


def quoted(entry: Carried, message: str) -> str:
    """A reply quoting the message: every line behind `> `."""
    return _each("> ", message)


def pipe_prefixed(entry: Carried, message: str) -> str:
    """The `  | ` prefix a log viewer or a chat quote puts before every line."""
    return _each("  | ", message)


def table_cell(entry: Carried, message: str) -> str | None:
    """A one-line message in a markdown table's cell."""
    if "\n" in message:
        return None
    return f"| pod | error |\n|---|---|\n| train-grpo-worker-gpu-7xk2p | {message} |"


def indented(entry: Carried, message: str) -> str:
    """A markdown code block by indentation, after a sentence."""
    return "I see this in the logs:\n\n" + _each("    ", message)


def backticks(entry: Carried, message: str) -> str:
    """The message on its own line in backticks, as issue prose quotes it."""
    return f"The pod logs show\n`{message}`\nevery few minutes."


def journal(entry: Carried, message: str) -> str:
    """journalctl/syslog: `Mon DD hh:mm:ss host unit[pid]: ` before every line."""
    unit = {"kubelet": "kubelet", "containerd": "containerd"}.get(entry.emitter, "raylet")
    return _each(f"Nov 03 10:14:20 gke-ml-a100-pool-8f2c-vq4n {unit}[1234]: ", message)


def cri_log(entry: Carried, message: str) -> str:
    """The kubelet's CRI log format (the node's /var/log/pods files): `<RFC 3339> stderr F `."""
    return _each("2025-11-03T10:14:20.123456789Z stderr F ", message)


def operator_json(entry: Carried, message: str) -> str:
    """A zap JSON log line of an operator (KubeRay's), the message as its error."""
    record = {
        "level": "error",
        "ts": "2025-11-03T10:14:20.123Z",
        "logger": "controllers.RayCluster",
        "msg": "Reconciler error",
        "error": message,
    }
    return json.dumps(record, ensure_ascii=False)


def windows_lines(entry: Carried, message: str) -> str:
    """A raylet log read on Windows: glog's prefix and CRLF line ends."""
    return glog(entry, message).replace("\n", "\r\n") + "\r\n"


def _involved(entry: Carried) -> tuple[str, str]:
    kind = entry.object or "Pod"
    names = {"Pod": "train-grpo-worker-gpu-7xk2p", "Node": "gke-ml-a100-pool-8f2c-vq4n"}
    return kind, names.get(kind, "train-grpo")


def _source(entry: Carried) -> str:
    return _FROM.get(entry.emitter, entry.emitter)


def describe_events(entry: Carried, message: str) -> str:
    """The Event in a `kubectl describe` Events block (multi-line messages as printed)."""
    _kind, name = _involved(entry)
    return "\n".join(
        [
            f"Name:         {name}",
            "Namespace:    ml",
            "Events:",
            "  Type     Reason     Age                 From               Message",
            "  ----     ------     ----                ----               -------",
            f"  Warning  {entry.reason}  3m12s (x4 over 9m)  {_source(entry)}  {message}",
        ]
    )


def get_events(entry: Carried, message: str) -> str:
    """A `kubectl get events` row (kubectl ≥ 1.14's columns; `kubectl events` prints
    the same)."""
    kind, name = _involved(entry)
    one_line = message.replace("\n", " ")
    return (
        "LAST SEEN   TYPE      REASON   OBJECT   MESSAGE\n"
        f"3m12s       Warning   {entry.reason}   {kind.lower()}/{name}   {one_line}"
    )


def get_events_wide(entry: Carried, message: str) -> str:
    """A `kubectl get events -o wide` row: SUBOBJECT and SOURCE, then FIRST SEEN, COUNT,
    NAME after MESSAGE."""
    kind, name = _involved(entry)
    one_line = message.replace("\n", " ")
    return (
        "NAMESPACE   LAST SEEN   TYPE      REASON   OBJECT   SUBOBJECT   SOURCE   MESSAGE"
        "   FIRST SEEN   COUNT   NAME\n"
        f"ml          3m12s       Warning   {entry.reason}   {kind.lower()}/{name}"
        f"               {_source(entry)}   {one_line}   9m   4   {name}.17f2a8c1d2e3b4a5"
    )


def get_events_old(entry: Carried, message: str) -> str:
    """A `kubectl get events` row of kubectl ≤ 1.13 (FIRSTSEEN … SOURCE MESSAGE), tabs
    where a reply's paste kept them and a header-less row, as issues quote it."""
    kind, name = _involved(entry)
    one_line = message.replace("\n", " ")
    return (
        f"2016-05-23 17:14:02 -0700 PDT\t2016-05-23 17:14:12 -0700 PDT\t3\t{name}\t{kind}"
        f"\tspec.containers{{ray-worker}}\tWarning\t{entry.reason}\t{{{_source(entry)} "
        f"gke-ml-a100-pool-8f2c-vq4n}}\t{one_line}"
    )


def event_json(entry: Carried, message: str) -> str:
    """The Event as `kubectl get events -o json` prints one item."""
    kind, name = _involved(entry)
    return _json(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.17f2a8c1d2e3b4a5", "namespace": "ml"},
            "involvedObject": {"kind": kind, "name": name, "namespace": "ml"},
            "reason": entry.reason,
            "message": message,
            "type": "Warning",
            "count": 4,
            "source": {"component": _source(entry)},
        }
    )


def _status_object(entry: Carried, message: str) -> dict[str, object]:
    kind = entry.object or "Pod"
    status: dict[str, object]
    if kind == "RayJob":
        status = {"jobDeploymentStatus": "Failed", "jobStatus": "FAILED"}
        api = "ray.io/v1"
    elif kind == "RayCluster":
        status = {"state": "failed"}
        api = "ray.io/v1"
    else:
        status = {"phase": "Failed"}
        api = "v1"
    if entry.reason:
        status["reason"] = entry.reason
    status["message"] = message
    _, name = _involved(entry)
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "namespace": "ml"},
        "status": status,
    }


def status_yaml(entry: Carried, message: str) -> str:
    """The status as `kubectl get -o yaml` prints it (message as a quoted scalar)."""
    value = _status_object(entry, message)
    metadata = value["metadata"]
    assert isinstance(metadata, dict)
    status = value["status"]
    assert isinstance(status, dict)
    lines = [
        f"apiVersion: {value['apiVersion']}",
        f"kind: {value['kind']}",
        "metadata:",
        f"  name: {metadata['name']}",
        "  namespace: ml",
        "status:",
    ]
    lines.extend(f"  {key}: {json.dumps(item, ensure_ascii=False)}" for key, item in status.items())
    return "\n".join(lines)


def status_json(entry: Carried, message: str) -> str:
    return _json(_status_object(entry, message))


CARRIERS: tuple[Carrier, ...] = (
    Carrier("bare", "log", bare),
    Carrier("glog", "log", glog),
    Carrier("python-logging", "log", python_logging),
    Carrier("actor-prefix", "log", actor),
    Carrier("raylet-prefix", "log", raylet),
    Carrier("repeated", "log", repeated),
    Carrier("colour", "log", colour),
    Carrier("rayjob-status", "log", rayjob_status),
    Carrier("job-record", "log", job_record),
    Carrier("wrap-80", "log", wrapped(80)),
    Carrier("wrap-120", "log", wrapped(120)),
    Carrier("first-line", "log", first_line),
    Carrier("markdown-fence", "log", markdown_fence),
    Carrier("quoted", "log", quoted),
    Carrier("pipe-prefix", "log", pipe_prefixed),
    Carrier("table-cell", "log", table_cell),
    Carrier("indented", "log", indented),
    Carrier("backticks", "log", backticks),
    Carrier("journal", "log", journal),
    Carrier("cri-log", "log", cri_log),
    Carrier("operator-json", "log", operator_json),
    Carrier("windows-crlf", "log", windows_lines),
    Carrier("describe-events", "event", describe_events),
    Carrier("get-events", "event", get_events),
    Carrier("get-events-wide", "event", get_events_wide),
    Carrier("event-json", "event", event_json),
    Carrier("get-events-old", "event", get_events_old),
    Carrier("status-yaml", "status", status_yaml),
    Carrier("status-json", "status", status_json),
)


def carriers_for(kind: str) -> tuple[Carrier, ...]:
    return tuple(c for c in CARRIERS if c.kind == kind)

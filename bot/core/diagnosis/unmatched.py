"""Lines that look like failures but that no playbook knows: the playbook to write next.

Why this exists: "No failure found" should explain itself. When nothing matched,
`pitcrew diagnose --explain` shows the lines that look like a failure (a traceback,
an `ERROR`, `Killed`, a non-zero exit code, an exception type); the daemon keeps
them, grouped by shape (digits, ids, hex and addresses normalised away), so
`pitcrew unmatched` can list the failures a team keeps seeing with counts and
first and last seen. Pure: text in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from bot.core.model import Signal, SourceKind

UNKNOWN = "pitcrew does not know this failure"
"""The verdict on evidence no playbook matched that still looks like a failure."""
MAX_LINES = 20
"""At most this many failure-looking lines are kept from one input."""
LINE_LIMIT = 300

# What the emitting systems print at error level, whatever the system: a Python traceback
# and its exception, a log level (ERROR, FATAL, glog/klog `E`/`F` lines, Ray's spdlog
# `[… E pid tid]`, logrus' `level=error` and zap's JSON `"level":"error"`), a failed
# `RAY_CHECK`/`CHECK`, the kernel's and Slurm's OOM killer,
# lowercase runtime errors (`error:`, `failed to`), a non-zero exit code, a Kubernetes
# container or pod state that is not healthy, a Warning Event as a table row prints it.
_FAILURE = re.compile(
    r"Traceback \(most recent call last\)"
    r"|\b(?:ERROR|FATAL|CRITICAL|Error|Failed|FAILED)\b"
    r"|\bKilled\b|Segmentation fault|core dumped|\bpanic:"
    r"|\b(?:exit(?:ed)?(?: with)? (?:code|status)|Exit Code|exitCode|exit_code)[:=\s]+-?[1-9]\d*"
    r"|^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit)\b(?:\(\w+\))?:"
    r"|(?:^|[\s`'\"(>|])(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)(?:\(\w+\))?: \S"
    r"|^\s*[EF]\d{4} \d\d:\d\d:\d\d"
    r"|\blevel=(?:error|fatal|panic)\b|\"level\":\s*\"(?:error|fatal|panic|dpanic)\""
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ [EFC] \d+ \d+\]"
    r"|\bCheck failed\b|\*\*\* (?:Check failure|SIG[A-Z]+ |Aborted at)"
    r"|\bOut of memory: Kill|\bMemory cgroup out of memory|\binvoked oom-killer\b"
    r"|\boom[-_]kill(?: event)?s?\b|\bOOM[- ]?[Kk]ill|\bOUT_OF_MEMORY\b"
    r"|\b(?:error|fatal)(?::|\s+(?:while|when|during|creating|reading|getting|occurred|from)\b)"
    r"|\bunrecoverable error\b"
    r"|\bfailed(?: to| with| due|:)"
    r"|\bcommand not found\b|\bexec format error\b|\bEvict(?:ed|ion|s)?\b|\bis waiting to start\b"
    r"|^Unhandled error\b"
    r"|\b(?:Init:)?(?:CrashLoopBackOff|ImagePullBackOff|ErrImagePull|ErrImageNeverPull"
    r"|InvalidImageName|CreateContainerConfigError|CreateContainerError|RunContainerError"
    r"|PreStartHookError|PostStartHookError|ContainerCannotRun|StartError|OOMKilled|Evicted"
    r"|DeadlineExceeded|BackoffLimitExceeded|UnexpectedAdmissionError|NodeShutdown"
    r"|FailedScheduling|FailedMount|FailedAttachVolume|FailedCreate\w*)\b"
    r"|(?:^|\t|\s{2}|- )Warning(?:\t+|\s{2,})[A-Z][A-Za-z]+(?:\t|\s{2,})"
    # An operation refused or impossible, as the emitters word it: the API server's RBAC
    # refusal, strerror(EACCES), kopf's missing permissions, and "could not" / "unable to"
    # before the operation that did not happen.
    r"|\bis forbidden: User\b|\b[Pp]ermission denied\b|\bNot enough permissions to\b"
    r"|\b(?:[Cc]ould not|COULD NOT|[Uu]nable to) (?:create|open|connect|allocate|bind|mount"
    r"|attach|start|load|resolve|read|write|CREATE)\b"
    r"|\bhas been stuck (?:on|in|for)\b"
)
# A word every line `_FAILURE` matches contains: looked for first, it rules out the
# ordinary lines that are most of a log five times faster than `_FAILURE` itself (a
# flood of 1 MiB logs is read in a fraction of the time).
_MAYBE = re.compile(
    r"Traceback|ERROR|FATAL|CRITICAL|Error|Failed|FAILED|Killed|Segmentation fault"
    r"|core dumped|panic|[eE]xit|Exception|^\s*[EF]\d|\] |Check fail|\*\*\* "
    r"|[Oo]ut of memory|oom|OOM|error|fatal|failed|BackOff|Evicted|Exceeded"
    r"|Unexpected|Shutdown|Warning|not found|Evict|waiting to start|Unhandled|Err|OUT_OF|Invalid"
    r"|CannotRun|forbidden|ermission|ould not|OULD NOT|nable to|been stuck|nrecoverable"
)
_BENIGN = re.compile(
    r"\b(?:0 errors?|no errors?|errors?=0|error_count[:=]\s*0)\b|FutureWarning|UserWarning"
    r"|DeprecationWarning|\bINFO\b"
    # Benign alone (docs/failure-classes.md, "Benign noise").
    r"|Failed to look up actor with name '\w+_register_center'"
    # An optimistic-concurrency conflict (apimachinery's NewConflict): the controller
    # reads the object again and retries.
    r"|the object has been modified; please apply your changes to the latest version"
    # An error its emitter says it retries or retried: transient unless something fails.
    r"|\b(?:retried|retrying|will retry|will be retried)\b",
    re.IGNORECASE,
)
# Lines logged below warning level, whatever their words: DEBUG, glog/klog `I`/`W`
# lines, and the `I 09-12 …`/`D 09-12 …` layout of SkyPilot-style loggers.
_QUIET = re.compile(r"\b(?:DEBUG|TRACE)\b|^\s*[ID]\d{4} \d\d:\d\d|^\s*[ID] \d\d-\d\d \d\d:")
_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\x1b\[[0-9;]*[A-Za-z]|#033\[[0-9;]*[A-Za-z]"), ""),
    (re.compile(r"^\s*\((?:\w+)(?: pid=\d+)?(?:, ip=[\d.]+)?\)\s*"), ""),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.I), "<hex>"),
    (re.compile(r"\b[a-z0-9]+(?:-[a-z0-9]+)*-[a-z0-9]{5}\b"), "<name>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)


# The line that ends a Python traceback: the exception, whatever its name, at the
# margin (a frame's `File` line and its code are indented).
_TRACEBACK_END = re.compile(
    r"(?!Traceback|During handling|The above exception)[A-Za-z_][\w.]*(?::|$)"
)
_PROCESS_PREFIX = re.compile(
    r"^(?:\x1b\[[0-9;]*m)*\((?:[^()\n]*?\b(?:pid|ip)=[^()\n]*|raylet)\)(?:\x1b\[[0-9;]*m)* ?"
)


def shape_prefix(text: str) -> str:
    """`text` without Ray's process prefix (`(Actor pid=…, ip=…) `, `(raylet) `)."""
    return _PROCESS_PREFIX.sub("", text, count=1)


@dataclass(frozen=True, slots=True)
class FailureLine:
    """A line of the input that looks like a failure; `shape` groups its kind."""

    text: str
    line: int
    origin: str = ""

    @property
    def shape(self) -> str:
        return shape(self.text)


@dataclass(frozen=True, slots=True)
class UnmatchedShape:
    """Failures of one shape no playbook matched, as the daemon keeps them."""

    shape: str
    example: str
    origin: str
    count: int
    first_seen: datetime
    last_seen: datetime


def shape(text: str) -> str:
    """`text` with colour codes, Ray's process prefix, ids, addresses, hex and numbers
    replaced by placeholders, so one kind of failure is one shape."""
    for pattern, placeholder in _SHAPES:
        text = pattern.sub(placeholder, text)
    return text.strip()[:LINE_LIMIT]


def looks_like_failure(text: str) -> bool:
    bare = shape_prefix(text)
    return (
        _MAYBE.search(bare) is not None
        and _FAILURE.search(bare) is not None
        and _BENIGN.search(bare) is None
        and _QUIET.search(bare) is None
    )


def failure_lines(
    lines: Iterable[str], origin: str = "", limit: int = MAX_LINES
) -> list[FailureLine]:
    """The first `limit` lines that look like failures, one per shape: with the lines
    `looks_like_failure` names, the exception that ends a traceback, and the first frame
    of a traceback pasted without its header (its exception may be cut off). A pod row
    of `kubectl get -w` after the same pod's `Terminating` row is its deletion."""
    found: dict[str, FailureLine] = {}
    in_traceback = False
    deleted: set[str] = set()
    for number, text in enumerate(lines, start=1):
        text = text.rstrip("\r\n")
        bare = shape_prefix(text)
        ends_traceback = in_traceback and _TRACEBACK_END.match(bare) is not None
        frame = _FRAME.match(bare) is not None
        starts = (not in_traceback and frame) or "Traceback (most recent" in text
        in_traceback = (in_traceback and not ends_traceback) or starts
        if _deletion(bare, deleted) or not text.strip():
            continue
        if not (ends_traceback or starts or looks_like_failure(text)):
            continue
        item = FailureLine(text.strip()[:LINE_LIMIT], number, origin)
        found.setdefault(item.shape, item)
        if len(found) >= limit:
            break
    return list(found.values())


_FRAME = re.compile(r'\s*File "[^"\n]+", line \d+, in ')
_POD_ROW = re.compile(
    r"\s*(?:[a-z0-9][-a-z0-9]*\s+)?(?:pod/)?(?P<pod>[a-z0-9][-a-z0-9.]*)\s+\d+/\d+\s+"
    r"(?P<status>[\w:]+)\s+\d+"
)


def _deletion(text: str, deleted: set[str]) -> bool:
    """Whether `text` is a pod row of a pod seen `Terminating` before (remembered)."""
    row = _POD_ROW.match(text)
    if row is None:
        return False
    if row["status"] == "Terminating":
        deleted.add(row["pod"])
    return row["pod"] in deleted


def part_lines(parts: Iterable[object]) -> list[FailureLine]:
    """Failure-looking lines of the parts that can be read again: each signal that says
    something failed (its first line), and the log chunks held in memory (a one-shot
    stream was the classifier's alone)."""
    found: list[FailureLine] = []
    for part in parts:
        origin = str(getattr(part, "origin", ""))
        chunks = getattr(part, "chunks", None)
        if isinstance(part, Signal):
            said = signal_line(part)
            found.extend([said] if said is not None else [])
        elif isinstance(chunks, list | tuple):
            data = b"".join(c for c in chunks if isinstance(c, bytes))
            found.extend(failure_lines(data.decode("utf-8", "replace").splitlines(), origin))
        if len(found) >= MAX_LINES:
            break
    return found[:MAX_LINES]


# Container and pod states that are no failure: a container being created or started, a
# container that ran to completion, a pod still waiting for its turn.
_HEALTHY_REASONS = frozenset(
    {"", "ContainerCreating", "PodInitializing", "Completed", "Succeeded", "Running", "Pending"}
)
# What a signal's source says when something failed, besides a reason not healthy.
_FAILED_STATES = frozenset({"FAILED", "Failed", "STOPPED", "DEAD", "NotReady"})
# A Ray node that ended because it was asked to: scaled down when idle, or stopped.
_ENDED_AS_ASKED = frozenset({"AUTOSCALER_DRAIN_IDLE", "EXPECTED_TERMINATION"})


# Benign: a few readiness (or startup) probe failures while a pod starts.
_PROBE = re.compile(r"(?:Readiness|Startup) probe (?:failed|errored)")
_PERSISTENT_PROBE_COUNT = 10


def _transient_probe(signal: Signal) -> bool:
    count = signal.fields.get("count", "1")
    few = not count.isdigit() or int(count) < _PERSISTENT_PROBE_COUNT
    return signal.reason == "Unhealthy" and few and _PROBE.match(signal.text) is not None


def signal_line(signal: Signal) -> FailureLine | None:
    """The signal's first line when it says something failed: a Warning Event, a
    container state or pod status that is not healthy (a waiting reason, a termination
    with an error or a non-zero exit code, an eviction, a pod that cannot be scheduled), a
    Ray job, RayJob, RayCluster or node that failed, an actor that died."""
    fields = signal.fields
    source = signal.source
    if source is SourceKind.K8S_EVENT:
        failed = fields.get("type") == "Warning" and not _transient_probe(signal)
    elif source is SourceKind.POD_STATUS:
        code = fields.get("exit_code", "")
        failed = signal.reason not in _HEALTHY_REASONS or code not in ("", "0")
    elif source in (SourceKind.RAY_JOB, SourceKind.RAY_CLUSTER, SourceKind.NODE_STATUS):
        states = {signal.reason, fields.get("status", ""), fields.get("job_deployment_status", "")}
        failed = bool(states & _FAILED_STATES)
        failed = failed and fields.get("death_reason", "") not in _ENDED_AS_ASKED
    elif source is SourceKind.RAY_ACTOR:
        failed = signal.reason != "StaleActor"
    else:
        failed = bool(failure_lines(signal.text.splitlines()))
    if not failed:
        return None
    first = (signal.text.strip().splitlines() or [signal.reason])[0]
    shown = f"{signal.reason}: {first}" if signal.reason and signal.reason not in first else first
    return FailureLine(shown[:LINE_LIMIT], signal.line or 1, signal.origin)

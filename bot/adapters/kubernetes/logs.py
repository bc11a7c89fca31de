"""Reading the log a person would look at: a terminated container's tail, a RayJob's driver.

Why this exists: a signal about a crashed container or a failed RayJob is half the
story without the lines the process printed last. Both the live source and
`diagnose --kube` read them the same bounded way (tail lines, byte cap, a per-minute
rate limit), so the reading lives here once.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from bot.adapters.kubernetes.api import PODS, KubeApi
from bot.adapters.kubernetes.errors import KubeApiError, reason_of
from bot.adapters.kubernetes.state import (
    submitter_pods,
)
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.object_refs import object_ref
from bot.core.inputs.values import as_map, text_at
from bot.core.model import ObjectRef, Signal, SourceKind

log = logging.getLogger("bot.adapters.kubernetes.source")


class RateLimit:
    """At most `per_minute` events in any sliding minute."""

    def __init__(self, per_minute: int, clock: Callable[[], float]) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self.times: deque[float] = deque()
        self.lock = threading.Lock()

    def allow(self) -> bool:
        now = self.clock()
        with self.lock:
            while self.times and now - self.times[0] > 60:
                self.times.popleft()
            if len(self.times) >= self.per_minute:
                return False
            self.times.append(now)
            return True


def is_submitter(signal: Signal) -> bool:
    """A pod of a RayJob that is not a Ray node: the submitter, whose log is the driver's."""
    workload = signal.workload
    return (
        workload is not None
        and workload.kind == "RayJob"
        and not signal.fields.get("ray_node_type")
    )


def log_tail(
    api: KubeApi,
    pod: ObjectRef,
    container: str,
    *,
    previous: bool,
    workload: ObjectRef | None,
    source: SourceKind = SourceKind.WORKER_LOG,
    lines: int = 200,
    limit_bytes: int = 64 * 1024,
) -> LogText | None:
    """The bounded tail of a container's log (the previous instance's after a restart),
    or None when there is none to read."""
    try:
        data = api.pod_log(
            pod.namespace,
            pod.name,
            container,
            previous=previous,
            tail_lines=lines,
            limit_bytes=limit_bytes,
        )
    except KubeApiError as error:
        log.info("no log tail for %s [%s]: %s", pod, container, reason_of(error))
        return None
    if not data.strip() or data.lstrip().startswith(b'{"apiVersion"'):
        return None  # nothing logged, or a server that answers with the object itself
    which = "previous" if previous else "current"
    return LogText(
        chunks=(data,),
        source=source,
        origin=f"{pod} [{container}] {which} log",
        obj=pod,
        workload=workload,
    )


def driver_logs(
    api: KubeApi,
    rayjob: ObjectRef,
    tail: Callable[[ObjectRef, str], LogText | None],
) -> list[InputPart]:
    """The log tail of a RayJob's newest submitter pod (what `ray job logs` shows)."""
    try:
        pods = list(
            api.list_all(
                PODS,
                rayjob.namespace,
                label_selector=f"batch.kubernetes.io/job-name={rayjob.name}",
            )
        )
    except KubeApiError as error:
        log.info("no submitter pods for %s: %s", rayjob, reason_of(error))
        return []
    found: list[InputPart] = []
    for pod in submitter_pods(pods, rayjob.name, limit=1):
        ref = object_ref("Pod", as_map(pod.get("metadata")))
        containers = as_map(pod.get("spec")).get("containers")
        first = containers[0] if isinstance(containers, list) and containers else {}
        text = tail(ref, text_at(first, "name"))
        if text is not None:
            found.append(text)
    return found

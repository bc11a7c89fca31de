"""The live Kubernetes source: list+watch Events, Pods, Nodes, RayJobs and RayClusters and
hand the pipeline every new signal once, with the evidence a person would look at.

Why this exists: pitcrew has to notice a failing Ray workload by itself, from
what Kubernetes already knows, and keep noticing through everything a long
watch goes through: streams the server ends, connections that break, a 410
Gone when the resourceVersion has been compacted, an API server restart.

How it stays correct: each watched resource (per configured namespace, or
cluster-wide) has one thread that lists, then watches from the list's
resourceVersion, resuming from the last one it saw when a stream ends. On a
410 Gone or a broken stream it lists again and reconciles by state
(`kubernetes_state.Tracker`): an object's signals are keyed by what they
observe, so a relist reports exactly the states the watch missed and none it
already reported. Errors back off exponentially with jitter. Memory is bounded
whatever the cluster size: lists are paged, state is kept only for objects
with something to report (LRU-capped), owners are cached in a capped LRU, log
tails are cut and rate-limited, the optional output queue is capped.

What it emits (`bot.core.model.Signal`, and `bot.core.inputs.LogText` for log tails):
the signals `bot.core.inputs` makes of each object (docs/signals.md), carrying the
owning workload (Pod → ReplicaSet → Deployment, Pod → Job, Pod → RayCluster →
RayJob) and the relevant spec (limits, `node_selector`); the previous
container's log tail for a container that terminated; the submitter's log for
a RayJob that failed. A log read that found nothing (not served yet, an API error, the
per-minute budget) is tried again on a schedule (`log_retries`), since a Failed pod
sends no later event to read it on.

The daemon plugs it in with a small surface:

    source = KubernetesSource(api, config, sink=pipeline)  # bot.app.factories does this
    source.start()                        # observations go to the pipeline's queue
    # or: KubernetesSource(KubeApi.from_config(), config).start(callback)  (or poll())
    source.healthy(), source.status(), source.bookmarks()
    source.stop()
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from bot.adapters.kubernetes.api import (
    BY_KIND,
    EVENTS,
    NODES,
    PODS,
    RAY_CLUSTERS,
    RAY_JOBS,
    KubeApi,
    RbacRule,
    Resource,
)
from bot.adapters.kubernetes.errors import KubeApiError, reason_of
from bot.adapters.kubernetes.log_retries import LogRead, LogRetries
from bot.adapters.kubernetes.logs import RateLimit, driver_logs, is_submitter, log_tail
from bot.adapters.kubernetes.owner_resolver import OwnerResolver
from bot.adapters.kubernetes.resource_watch import KUBERAY_KINDS, ResourceWatch
from bot.adapters.kubernetes.state import (
    WATCHED_KINDS,
    Converter,
    containers_to_read,
    failed_rayjob,
)
from bot.core.inputs import InputPart, LogText
from bot.core.model import ObjectRef, Signal, SourceKind
from bot.daemon.feed import Context, Healthy, Item, observe
from bot.daemon.ports import Sink

log = logging.getLogger(__name__)

Emit = Callable[[InputPart], None]
_RESOURCES: Mapping[str, Resource] = {
    "Event": EVENTS,
    "Pod": PODS,
    "Node": NODES,
    "RayJob": RAY_JOBS,
    "RayCluster": RAY_CLUSTERS,
}
_MAX_REMEMBERED_PROBLEMS = 1_000
_LOG_REPEAT = 30.0  # seconds in which the same container log is not read twice
_MAX_RECENT_LOGS = 1_000
_LOG_RETRY_TICK = 0.5  # seconds between looks at the log reads due again


RBAC: tuple[RbacRule, ...] = (
    RbacRule("", ("events",), ("list", "watch"), "watch Events"),
    RbacRule("", ("pods",), ("list", "watch", "get"), "watch pods; owner of an event's pod"),
    RbacRule("", ("pods/log",), ("get",), "log tails of terminated containers"),
    RbacRule("", ("nodes",), ("list", "watch"), "watch nodes (cluster-scoped)"),
    RbacRule(
        "ray.io", ("rayjobs", "rayclusters"), ("list", "watch", "get"), "watch KubeRay objects"
    ),
    RbacRule("apps", ("replicasets",), ("get",), "owner resolution: ReplicaSet → Deployment"),
    RbacRule("batch", ("jobs",), ("get",), "owner resolution: Job → CronJob or RayJob"),
)
"""What the source needs (docs/rbac.md); `diagnose --kube` needs the same reads."""


@dataclass(frozen=True)
class KubeSourceConfig:
    """What to watch and how patiently. Empty `namespaces` watches the whole cluster."""

    namespaces: tuple[str, ...] = ()
    kinds: tuple[str, ...] = WATCHED_KINDS
    cluster: str = ""
    page_size: int = 500
    watch_timeout: int = 290  # the server ends each watch request after this many seconds
    read_timeout: float = 330.0  # no byte for this long (bookmarks included): the stream is dead
    backoff_initial: float = 0.5
    backoff_max: float = 60.0
    unhealthy_after: float = 120.0  # a watch not connected for this long makes the source unready
    max_tracked_objects: int = 50_000  # per watch
    max_cached_owners: int = 20_000
    owner_ttl: float = 300.0
    log_tail_lines: int = 200
    log_tail_bytes: int = 64 * 1024
    log_tails_per_minute: int = 30
    log_retry_delays: tuple[float, ...] = (2.0, 5.0, 15.0, 30.0, 60.0)  # after a read found none
    queue_size: int = 10_000  # only used without an emit callback or sink (poll mode)
    submit_attempts: int = 5  # full waits on the sink's queue before dropping
    resume_from: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


KINDS_BY_PLURAL = {
    "events": "Event",
    "pods": "Pod",
    "nodes": "Node",
    "rayjobs": "RayJob",
    "rayclusters": "RayCluster",
}


class KubernetesSource:
    """List+watch with resume, relist-and-reconcile, back-off and health; see module doc."""

    name = "kubernetes"

    def __init__(
        self,
        api: KubeApi,
        config: KubeSourceConfig | None = None,
        *,
        sink: Sink | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.api = api
        self._sink = sink
        self.config = config or KubeSourceConfig()
        self.clock = clock
        self.rng = rng
        self.resolver = OwnerResolver(
            self._fetch_owner,
            max_entries=self.config.max_cached_owners,
            ttl=self.config.owner_ttl,
            clock=clock,
        )
        self.converter = Converter(self.resolver, self.config.cluster)
        self._stop = threading.Event()
        self._emit: Emit | None = None
        self._queue: deque[InputPart] = deque()
        self._lock = threading.Lock()
        self._watches: list[ResourceWatch] = []
        self._threads: list[threading.Thread] = []
        self._log_limit = RateLimit(self.config.log_tails_per_minute, clock)
        self._problems: dict[str, None] = {}
        self._recent_logs: dict[tuple[str, str, str, bool], float] = {}
        self._log_retries = LogRetries(self.config.log_retry_delays)
        self.kuberay = "not checked"
        self.started = False
        self.counters = {
            "emitted": 0,
            "dropped": 0,
            "emit_errors": 0,
            "malformed": 0,
            "log_tails": 0,
            "log_tails_skipped": 0,
            "log_tails_retried": 0,
            "log_tails_given_up": 0,
            "log_retry_errors": 0,
            "healthy": 0,
        }

    # -- the surface the daemon uses ------------------------------------------------

    def start(self, emit: Emit | None = None) -> None:
        """Start one watch thread per resource and namespace. Parts go to `emit` (called
        from those threads) when given, else to the sink the source was built with (the
        daemon's pipeline queue), else to a bounded queue that `poll` drains."""
        if self.started:
            raise RuntimeError("the Kubernetes source is already started")
        self.started = True
        self._emit = emit
        self._stop.clear()
        self._watches = self._plan()
        for watch in self._watches:
            thread = threading.Thread(target=watch.run, name=f"pitcrew-k8s-{watch.id}", daemon=True)
            self._threads.append(thread)
            thread.start()
        retries = threading.Thread(target=self._retry_logs, name="pitcrew-k8s-logs", daemon=True)
        self._threads.append(retries)
        retries.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every watch (closing open streams) and wait for the threads."""
        self._stop.set()
        for watch in self._watches:
            watch.close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = []
        self.started = False

    def poll(self, now: datetime | None = None) -> list[InputPart]:
        """Everything queued since the last poll (`start()` without `emit` or a sink)."""
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
        return items

    def healthy(self) -> bool:
        """Ready: started, and every watch connected or in sync within `unhealthy_after`."""
        if not self.started or self._stop.is_set():
            return False
        now = self.clock()
        return all(w.healthy(now) for w in self._watches)

    def synced(self) -> bool:
        """Every watch has listed once and is watching (or is disabled)."""
        return self.started and all(w.synced for w in self._watches)

    def status(self) -> dict[str, Any]:
        """Watch health for readiness, metrics and `/pitcrew status`."""
        now = self.clock()
        return {
            "healthy": self.healthy(),
            "cluster": self.config.cluster,
            "namespaces": list(self.config.namespaces) or "all",
            "kuberay": self.kuberay,
            "watches": {w.id: w.status(now) for w in self._watches},
            "queued": len(self._queue),
            "owners": {
                "cached": len(self.resolver),
                "lookups": self.resolver.lookups,
                "failures": self.resolver.failures,
            },
            **self.counters,
        }

    def bookmarks(self) -> dict[str, str]:
        """The resourceVersion each watch has reached; pass back as `resume_from`."""
        return {w.id: w.rv for w in self._watches if w.rv}

    # -- planning ---------------------------------------------------------------------

    def _plan(self) -> list[ResourceWatch]:
        kinds = [k for k in self.config.kinds if k in _RESOURCES]
        if any(k in KUBERAY_KINDS for k in kinds) and not self._kuberay_served():
            kinds = [k for k in kinds if k not in KUBERAY_KINDS]
        scopes: list[str | None] = list(self.config.namespaces) or [None]
        watches = []
        for kind in kinds:
            resource = _RESOURCES[kind]
            for namespace in scopes if resource.namespaced else [None]:
                watches.append(ResourceWatch(self, kind, resource, namespace))
        return watches

    def _kuberay_served(self) -> bool:
        try:
            served = self.api.served(RAY_JOBS.group, RAY_JOBS.version, RAY_JOBS.plural)
            served = served or self.api.served(
                RAY_CLUSTERS.group, RAY_CLUSTERS.version, RAY_CLUSTERS.plural
            )
        except KubeApiError as error:  # discovery forbidden or failing: the watches will tell
            self.kuberay = f"discovery failed ({reason_of(error)}); watching anyway"
            return True
        if not served:
            self.kuberay_absent()
            return False
        self.kuberay = "watching"
        return True

    def kuberay_absent(self) -> None:
        with self._lock:
            if self.kuberay.startswith("absent"):
                return
            self.kuberay = "absent: ray.io/v1 RayJob and RayCluster are not served"
        log.warning(
            "KubeRay CRDs (ray.io/v1 rayjobs, rayclusters) are not installed in %s: "
            "RayJob and RayCluster are not watched",
            self.api.host,
        )

    # -- called by the watches ----------------------------------------------------------

    def stopping(self) -> bool:
        return self._stop.is_set()

    def sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def deliver(self, parts: list[InputPart]) -> None:
        """Hand on what one watch event showed: to the `emit` callback part by part, as
        one `Observation` to the daemon's sink, or to the poll queue."""
        if self._emit is not None:
            for part in parts:
                try:
                    self._emit(part)
                except Exception:
                    self._count("emit_errors")
                    log.exception("the Kubernetes source's consumer failed on %s", _label(part))
                    continue
                self._count("emitted")
        elif self._sink is not None:
            if self._submit(observe(parts, self._context(parts))):
                self._count("emitted", len(parts))
        else:
            with self._lock:
                for part in parts:
                    if len(self._queue) >= self.config.queue_size:
                        self._queue.popleft()
                        self.counters["dropped"] += 1
                    self._queue.append(part)
                    self.counters["emitted"] += 1

    def deliver_healthy(self, workload: ObjectRef, reason: str = "") -> None:
        """The workload is healthy again after a failure, or was deleted (`reason`): its
        open incidents resolve."""
        self._count("healthy")
        if self._sink is not None:
            notice = Healthy(workload, cluster=self.config.cluster)
            self._submit(replace(notice, reason=reason) if reason else notice)
        log.info("%s: %s", workload, reason or "healthy again")

    def _submit(self, item: Item) -> bool:
        """Put on the sink's queue, waiting while it is full (which slows the watch, the
        back-pressure wanted); dropped only after `submit_attempts` full waits."""
        assert self._sink is not None
        for _ in range(self.config.submit_attempts):
            if self._sink.submit(item):
                return True
            if self.stopping():
                break
        with self._lock:
            self.counters["dropped"] += 1
            dropped = self.counters["dropped"]
        if dropped == 1 or dropped % 100 == 0:
            log.warning("the pipeline queue is full: %d Kubernetes observations dropped", dropped)
        return False

    def _context(self, parts: list[InputPart]) -> Context:
        first = next((p for p in parts if isinstance(p, Signal)), None) or next(iter(parts), None)
        ref = (first.workload or first.obj) if first is not None else None
        return Context(
            cluster=self.config.cluster,
            namespace=ref.namespace if ref is not None else "",
            workload=first.workload if first is not None else None,
        )

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counters[name] += n

    def malformed(self, kind: str, uid: str, issues: list[str]) -> None:
        """Count and log each problem of a malformed object once (it is still read as far
        as it goes)."""
        key = f"{kind}/{uid}: {'; '.join(issues)}"
        with self._lock:
            if key in self._problems:
                return
            self._problems[key] = None
            if len(self._problems) > _MAX_REMEMBERED_PROBLEMS:
                self._problems.pop(next(iter(self._problems)))
            self.counters["malformed"] += 1
        log.warning("malformed %s %s: %s; reading what it has", kind, uid, "; ".join(issues))

    def evidence(self, new: list[InputPart]) -> list[InputPart]:
        """Log tails for new signals: the terminated container's, a failed RayJob's driver."""
        found: list[InputPart] = []
        for part in new:
            if not isinstance(part, Signal) or part.obj is None:
                continue
            target = containers_to_read(part)
            if target is not None and part.obj.kind == "Pod":
                container, previous = target
                kind = SourceKind.DRIVER_LOG if is_submitter(part) else SourceKind.WORKER_LOG
                tail = self._log_tail(part.obj, container, previous, part.workload, kind)
                if tail is not None:
                    found.append(tail)
            elif failed_rayjob(part):
                found.extend(self._driver_log(part.obj))
        return found

    def _log_tail(
        self,
        pod: ObjectRef,
        container: str,
        previous: bool,
        workload: ObjectRef | None,
        source: SourceKind = SourceKind.WORKER_LOG,
    ) -> LogText | None:
        read = LogRead(pod, container, previous, workload, source)
        now = self.clock()
        with self._lock:
            if now - self._recent_logs.get(read.key, -_LOG_REPEAT) < _LOG_REPEAT:
                return None  # read moments ago (a failed RayJob and its submitter pod)
            self._recent_logs[read.key] = now
            while len(self._recent_logs) > _MAX_RECENT_LOGS:
                self._recent_logs.pop(next(iter(self._recent_logs)))
        tail = self._read(read)
        if tail is None:  # not served yet, or put off: tried again on a schedule
            with self._lock:
                self._recent_logs.pop(read.key, None)
            self._log_retries.later(read, now)
        return tail

    def _read(self, read: LogRead) -> LogText | None:
        """One read within the per-minute log budget; None when put off or nothing there."""
        if not self._log_limit.allow():
            self._count("log_tails_skipped")
            return None
        tail = log_tail(
            self.api,
            read.pod,
            read.container,
            previous=read.previous,
            workload=read.workload,
            source=read.source,
            lines=self.config.log_tail_lines,
            limit_bytes=self.config.log_tail_bytes,
        )
        if tail is not None:
            self._count("log_tails")
            self._log_retries.done(read.key)
        return tail

    def retry_logs(self) -> None:
        """Read again the logs whose retry is due; one found is handed on alone (its
        workload joins it to the incident), one still missing after its last try is
        given up, counted and logged."""
        now = self.clock()
        for read in self._log_retries.due(now):
            try:
                tail = self._read(read)
            except Exception:  # a bug: kept for its next try, never dropped silently
                self._count("log_retry_errors")
                log.exception("reading the log of %s [%s] again failed", read.pod, read.container)
                tail = None
            if tail is not None:
                self._count("log_tails_retried")
                self.deliver([tail])
            elif not self._log_retries.later(read, now):
                self._count("log_tails_given_up")
                log.warning(
                    "no log of %s [%s] after %d reads; given up",
                    read.pod,
                    read.container,
                    read.attempt + 1,
                )

    def _retry_logs(self) -> None:
        while not self._stop.wait(_LOG_RETRY_TICK):
            self.retry_logs()

    def _driver_log(self, rayjob: ObjectRef) -> list[InputPart]:
        return driver_logs(
            self.api,
            rayjob,
            lambda pod, container: self._log_tail(
                pod, container, False, rayjob, SourceKind.DRIVER_LOG
            ),
        )

    def _fetch_owner(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        resource = BY_KIND.get(kind)
        if resource is None:
            return None
        return self.api.get(resource, namespace, name)


def _label(part: InputPart) -> str:
    if isinstance(part, Signal):
        return f"{part.source} {part.obj} {part.reason}"
    return f"log {part.origin}"

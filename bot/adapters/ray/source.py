"""The Ray source: polls each Ray cluster's dashboard and turns job failures into signals.

Why this exists: Ray keeps no event stream pitcrew could watch, so failures are
found by polling the Jobs API. A job that moved to FAILED (or STOPPED, unless
pitcrew stopped it) becomes one `ray_job` signal (status, message, error type,
entrypoint, metadata and the KubeRay RayJob it belongs to), the tail of its
driver log (at most 2 MB, streamed) as `driver_log` text, its DEAD actors with
their death causes (a `ray_actor` signal each, and the death messages as
`worker_log` text so playbooks recognise OOM kills, node deaths and SIGSEGVs),
and the ALIVE detached named actors its failure names whose owner job has
finished. A periodic scan reports stale detached named actors (`StaleActor`).

Guarantees:
- Exactly once per job across restarts: a per-cluster bookmark (`ray/<cluster>/jobs`)
  holds the end-time watermark of reported jobs and the ids reported within a
  window below it (late-visible jobs), written before `poll` returns (a batch whose
  bookmark cannot be written is held back and found again). The first start ever
  reports failures of the last `initial_lookback` only, and saves that floor.
- Independence: clusters are polled concurrently; one that does not answer is
  retried with exponential backoff, shows in `status()`/`healthy()`, and yields
  one `DashboardUnreachable` signal once it has been down for `down_after` (and a
  `DashboardReachable` one when it answers again), never an exception.

Use: `RaySource(clusters, bookmarks).poll(now)` (or `poll_batches(now)`, one batch
per job with its cluster context) on any schedule; the source keeps no thread of
its own. For the daemon, `bot.app.factories` builds the source kind `ray`: one
`RayClusterSource` per `sources.ray` entry, polled by the scheduler
every `poll_interval`, each batch put on the pipeline queue as an Observation.

This module is the polling (I/O, threads, backoff, health); what a job or actor record
means is `bot.adapters.ray.signals` (pure), gathering one job's parts is
`bot.adapters.ray.jobs`, and what is remembered across restarts is
`bot.adapters.ray.bookmarks`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.adapters.ray.bookmarks import (
    Ledger,
    MemoryBookmarks,
    expected_stop_key,
    jobs_key,
    stale_key,
)
from bot.adapters.ray.client import (
    LOG_LIMIT,
    RayApiError,
    RayClusterConfig,
    RayDashboard,
    job_key,
)
from bot.adapters.ray.jobs import job_parts
from bot.adapters.ray.signals import (
    DEFAULT_RAYJOB_KEYS,
    IGNORED_NAMESPACES,
    as_int,
    context_fields,
    is_stale,
    ms_time,
    stale_signal,
)
from bot.core.errors import PitcrewError
from bot.core.inputs import InputPart
from bot.core.model import ObjectRef, Signal, SourceKind, frozen_map
from bot.daemon.feed import Context, observe
from bot.daemon.ports import Bookmarks, Sink, utcnow

log = logging.getLogger(__name__)

REPORTED = frozenset({"FAILED", "STOPPED"})


@dataclass(frozen=True)
class RaySourceOptions:
    initial_lookback: timedelta = timedelta(hours=1)
    """On the very first start (no bookmark), report failures that ended this recently."""
    dedupe_window: timedelta = timedelta(minutes=10)
    """Jobs ending this long before the newest reported one are still checked by id."""
    log_limit: int = LOG_LIMIT
    backoff_base: timedelta = timedelta(seconds=5)
    backoff_max: timedelta = timedelta(minutes=5)
    down_after: timedelta = timedelta(minutes=2)
    """An unreachable dashboard is reported once it has been down this long."""
    stale_scan_every: timedelta = timedelta(minutes=10)
    stale_actor_age: timedelta = timedelta(hours=1)
    """A detached named actor is stale this long after its owner job finished."""
    report_stopped: bool = True
    max_jobs_per_poll: int = 20
    """Failures fetched in detail per cluster and poll (the rest come next poll)."""
    rayjob_keys: tuple[str, ...] = DEFAULT_RAYJOB_KEYS
    ignored_namespaces: tuple[str, ...] = IGNORED_NAMESPACES
    max_workers: int = 8


@dataclass(frozen=True)
class RayBatch:
    """The parts of one observation (one failed job, one stale actor, one health change)
    with the context the daemon hands the pipeline (bot.daemon.feed.Context)."""

    cluster: str
    parts: tuple[InputPart, ...]
    namespace: str = ""
    workload: ObjectRef | None = None


# -- the source --------------------------------------------------------------------------


@dataclass
class ClusterStatus:
    """What `status()` tells about one cluster (readiness, metrics, `/pitcrew status`)."""

    name: str
    url: str
    healthy: bool = True
    consecutive_failures: int = 0
    last_error: str = ""
    last_ok: datetime | None = None
    down_since: datetime | None = None
    next_attempt: datetime | None = None
    notified_down: bool = False
    starting: bool = False
    """Kubernetes says the head is not up yet: until the dashboard first answers, its
    silence is not an outage (a discovered RayCluster pulling its image)."""
    polls: int = 0
    failures: int = 0
    jobs_listed: int = 0
    reported: int = 0
    last_poll_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        def when(value: datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "url": self.url,
            "healthy": self.healthy,
            "consecutive_failures": self.consecutive_failures,
            "last_error": self.last_error,
            "last_ok": when(self.last_ok),
            "down_since": when(self.down_since),
            "next_attempt": when(self.next_attempt),
            "notified_down": self.notified_down,
            "starting": self.starting,
            "polls": self.polls,
            "failures": self.failures,
            "jobs_listed": self.jobs_listed,
            "reported": self.reported,
            "last_poll_seconds": round(self.last_poll_seconds, 4),
        }


@dataclass
class _Result:
    batches: list[RayBatch]
    jobs: list[tuple[str, int]]
    stale_ids: set[str] | None
    stale_batches: list[RayBatch]
    listed: int
    seconds: float


class _Cluster:
    def __init__(
        self,
        config: RayClusterConfig,
        client: RayDashboard,
        options: RaySourceOptions,
        bookmarks: Bookmarks,
    ) -> None:
        self.config = config
        self.client = client
        self.options = options
        self.bookmarks = bookmarks
        self.status = ClusterStatus(config.name, config.url)
        self.ledger: Ledger | None = None
        self.ledger_unsaved = False
        self.stale_reported: set[str] | None = None
        self.last_stale_scan: datetime | None = None

    def due(self, now: datetime) -> bool:
        return self.status.next_attempt is None or now >= self.status.next_attempt

    def collect(self, now: datetime) -> _Result:
        """I/O only (runs in a worker thread): list jobs, fetch details of new failures,
        scan for stale actors when due. Changes nothing until `commit`."""
        started = _clock()
        options = self.options
        window = _ms(options.dedupe_window)
        if self.ledger is None:
            floor = _ms_epoch(now - options.initial_lookback)
            saved = self.bookmarks.get(jobs_key(self.config.name))
            self.ledger = Ledger.load(saved, floor)
            # The first start's floor must survive a restart, or what fails while
            # pitcrew is down would fall below a new floor and never be reported.
            self.ledger_unsaved = saved is None
        jobs = self.client.list_jobs()
        by_id = {str(j.get("job_id")): j for j in jobs if j.get("job_id")}
        fresh: list[tuple[int, str, dict[str, Any]]] = []
        for job in jobs:
            status = str(job.get("status") or "")
            if status not in REPORTED or job.get("type") == "DRIVER":
                continue
            end = as_int(job.get("end_time")) or as_int(job.get("start_time"))
            key = job_key(job)
            if end and self.ledger.is_new(key, end, window):
                fresh.append((end, key, job))
        fresh.sort(key=lambda item: (item[0], item[1]))
        fresh = fresh[: options.max_jobs_per_poll]
        batches: list[RayBatch] = []
        done: list[tuple[str, int]] = []
        for end, key, job in fresh:
            done.append((key, end))
            if job.get("status") == "STOPPED" and not self._report_stop(job):
                continue
            parts = job_parts(
                self.client,
                job,
                self.config,
                log_limit=options.log_limit,
                rayjob_keys=options.rayjob_keys,
                jobs_by_id=by_id,
                ignored_namespaces=options.ignored_namespaces,
                now=now,
            )
            batches.append(self._batch(parts))
        stale_ids = None
        stale_batches: list[RayBatch] = []
        if self.last_stale_scan is None or now - self.last_stale_scan >= options.stale_scan_every:
            stale_ids, stale_batches = self._scan_stale(by_id, now)
        return _Result(batches, done, stale_ids, stale_batches, len(jobs), _clock() - started)

    def _report_stop(self, job: Mapping[str, Any]) -> bool:
        if not self.options.report_stopped:
            return False
        submission = str(job.get("submission_id") or "")
        return self.bookmarks.get(expected_stop_key(self.config.name, submission)) is None

    def _scan_stale(
        self, by_id: Mapping[str, Mapping[str, Any]], now: datetime
    ) -> tuple[set[str], list[RayBatch]]:
        if self.stale_reported is None:
            text = self.bookmarks.get(stale_key(self.config.name))
            try:
                self.stale_reported = set(json.loads(text)) if text else set()
            except ValueError:
                self.stale_reported = set()
        alive = self.client.actors(state="ALIVE", detached=True)
        batches: list[RayBatch] = []
        alive_ids: set[str] = set()
        new_ids: set[str] = set()
        for actor in alive:
            owner = by_id.get(actor.job_id)
            if not is_stale(actor, owner, self.options.ignored_namespaces):
                continue
            alive_ids.add(actor.actor_id)
            ended = ms_time(owner.get("end_time")) if owner else None
            if ended is None or now - ended < self.options.stale_actor_age:
                continue
            if actor.actor_id in self.stale_reported:
                continue
            context = context_fields(owner or {}, self.config, self.options.rayjob_keys)
            context = {k: v for k, v in context.items() if not k.startswith("metadata.")}
            signal = stale_signal(actor, owner, self.config, context, now)
            batches.append(self._batch([signal]))
            new_ids.add(actor.actor_id)
        return {a for a in self.stale_reported if a in alive_ids} | new_ids, batches

    def commit(self, result: _Result, now: datetime) -> list[RayBatch]:
        """Record what is reported (bookmarks first) and that the dashboard answered;
        returns the batches whose bookmark was written. A batch whose bookmark could
        not be written is not returned: it is found again by the next poll."""
        assert self.ledger is not None
        window = _ms(self.options.dedupe_window)
        out: list[RayBatch] = []
        ledger = Ledger(self.ledger.watermark, self.ledger.floor, dict(self.ledger.recent))
        for key, end in result.jobs:
            ledger.record(key, end, window)
        try:
            if result.jobs or self.ledger_unsaved:
                self.bookmarks.set(jobs_key(self.config.name), ledger.dump())
            self.ledger, self.ledger_unsaved = ledger, False
            out.extend(result.batches)
        except (PitcrewError, OSError):  # the store refused: found again next poll
            log.exception("Ray cluster %s: cannot save the jobs bookmark", self.config.name)
        if result.stale_ids is not None:
            try:
                if result.stale_ids != self.stale_reported:
                    text = json.dumps(sorted(result.stale_ids))
                    self.bookmarks.set(stale_key(self.config.name), text)
                self.stale_reported = result.stale_ids
                self.last_stale_scan = now
                out.extend(result.stale_batches)
            except (PitcrewError, OSError):
                log.exception("Ray cluster %s: cannot save the stale bookmark", self.config.name)
        status = self.status
        status.polls += 1
        status.jobs_listed = result.listed
        status.reported += len(out)
        status.last_poll_seconds = result.seconds
        status.last_ok = now
        return out

    def recovered(self, now: datetime) -> RayBatch | None:
        status = self.status
        was_notified = status.notified_down
        since = status.down_since
        status.healthy = True
        status.consecutive_failures = 0
        status.last_error = ""
        status.down_since = None
        status.next_attempt = None
        status.notified_down = False
        if not was_notified:
            return None
        log.info("Ray dashboard %s (%s) answers again", self.config.name, self.config.url)
        text = (
            f"The Ray dashboard of cluster {self.config.name} at {self.config.url} answers "
            f"again (unreachable since {_stamp(since)})"
        )
        return self._batch([self._health_signal("DashboardReachable", text, now)])

    def failed(self, error: Exception, now: datetime) -> None:
        status = self.status
        status.polls += 1
        status.failures += 1
        status.consecutive_failures += 1
        status.healthy = False
        status.last_error = str(error)
        status.down_since = status.down_since or now
        delay = min(
            self.options.backoff_base * 2 ** (status.consecutive_failures - 1),
            self.options.backoff_max,
        )
        status.next_attempt = now + delay
        log.warning(
            "Ray cluster %s: %s (attempt %d, next in %s)",
            self.config.name,
            error,
            status.consecutive_failures,
            delay,
        )

    def down_notice(self, now: datetime) -> RayBatch | None:
        """The one notification that this dashboard stays down."""
        status = self.status
        if status.healthy or status.notified_down or status.down_since is None:
            return None
        if status.starting and status.last_ok is None:
            return None
        if now - status.down_since < self.options.down_after:
            return None
        status.notified_down = True
        text = (
            f"pitcrew cannot reach the Ray dashboard of cluster {self.config.name} at "
            f"{self.config.url} since {_stamp(status.down_since)} "
            f"({status.consecutive_failures} attempts): {status.last_error}"
        )
        return self._batch([self._health_signal("DashboardUnreachable", text, now)])

    def _health_signal(self, reason: str, text: str, now: datetime) -> Signal:
        config = self.config
        fields = {
            "cluster": config.name,
            "k8s_cluster": config.k8s_cluster,
            "url": config.url,
            "namespace": config.k8s_namespace,
            "ray_cluster": config.ray_cluster,
            "down_since": _stamp(self.status.down_since),
            "attempts": str(self.status.consecutive_failures),
            "error": self.status.last_error[:500],
        }
        return Signal(
            source=SourceKind.RAY_CLUSTER,
            text=text,
            reason=reason,
            fields=frozen_map({k: v for k, v in fields.items() if v}),
            obj=ObjectRef("RayCluster", config.ray_cluster or config.name, config.k8s_namespace),
            cluster=config.name,
            time=now,
            origin=config.url,
        )

    def _batch(self, parts: Sequence[InputPart]) -> RayBatch:
        first = parts[0]
        workload = first.workload if isinstance(first, Signal) else None
        namespace = first.fields.get("namespace", "") if isinstance(first, Signal) else ""
        return RayBatch(self.config.name, tuple(parts), namespace, workload)


class RaySource:
    """Polls Ray clusters for failed jobs and stale actors; see the module docstring."""

    def __init__(
        self,
        clusters: Sequence[RayClusterConfig],
        bookmarks: Bookmarks | None = None,
        options: RaySourceOptions | None = None,
        client_factory: Callable[[RayClusterConfig], RayDashboard] = RayDashboard.of,
    ) -> None:
        names = [c.name for c in clusters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"Ray cluster names must be unique: {', '.join(duplicates)}")
        self.options = options or RaySourceOptions()
        self.bookmarks: Bookmarks = bookmarks if bookmarks is not None else MemoryBookmarks()
        self._clusters = [
            _Cluster(c, client_factory(c), self.options, self.bookmarks) for c in clusters
        ]
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def clusters(self) -> tuple[str, ...]:
        return tuple(c.config.name for c in self._clusters)

    def poll(self, now: datetime) -> list[InputPart]:
        """Signals and log text of everything new since the last poll, all clusters
        (`now`: timezone-aware; it drives backoff, notices and the stale-actor age)."""
        return [part for batch in self.poll_batches(now) for part in batch.parts]

    def poll_batches(self, now: datetime) -> list[RayBatch]:
        """Like `poll`, grouped: one batch per failed job, stale actor or health change."""
        with self._lock:  # one poll at a time; a slow one is not overtaken
            due = [c for c in self._clusters if c.due(now)]
            outcomes = self._collect_all(due, now)
            batches: list[RayBatch] = []
            for cluster, outcome in zip(due, outcomes, strict=True):
                if isinstance(outcome, _Result):
                    committed = cluster.commit(outcome, now)
                    notice = cluster.recovered(now)
                    batches.extend([notice] if notice else [])
                    batches.extend(committed)
                else:
                    cluster.failed(outcome, now)
            for cluster in self._clusters:
                notice = cluster.down_notice(now)
                if notice:
                    batches.append(notice)
            return batches

    def _collect_all(self, due: Sequence[_Cluster], now: datetime) -> list[_Result | Exception]:
        def run(cluster: _Cluster) -> _Result | Exception:
            try:
                return cluster.collect(now)
            except RayApiError as error:
                return error
            except Exception as error:  # a bug or a bookmark store failure: not fatal
                log.exception("Ray cluster %s: polling failed", cluster.config.name)
                return error

        if len(due) <= 1:
            return [run(c) for c in due]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=min(self.options.max_workers, len(self._clusters)),
                thread_name_prefix="ray-source",
            )
        return list(self._pool.map(run, due))

    def retry_now(self, name: str) -> None:
        """Poll cluster `name` at the next poll, whatever its backoff (its head came up)."""
        for cluster in self._clusters:
            if cluster.config.name == name:
                cluster.status.next_attempt = None

    def set_starting(self, name: str, starting: bool) -> None:
        """Whether cluster `name` is still starting (see ClusterStatus.starting). Once it
        is up, `down_after` counts from its next failure, not from its start-up's."""
        for cluster in self._clusters:
            if cluster.config.name != name:
                continue
            status = cluster.status
            if status.starting and not starting and status.last_ok is None:
                status.down_since = None
            status.starting = starting

    def healthy(self) -> bool:
        """Every cluster answered its last poll (or has not been polled yet)."""
        return all(c.status.healthy for c in self._clusters)

    def status(self) -> dict[str, Any]:
        """Per cluster: reachability, backoff, counters (see ClusterStatus.as_dict)."""
        return {c.config.name: c.status.as_dict() for c in self._clusters}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        for cluster in self._clusters:
            cluster.client.close()


# -- small helpers -----------------------------------------------------------------------


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def _ms_epoch(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _stamp(when: datetime | None) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else ""


def _clock() -> float:
    return time.perf_counter()


# -- the daemon's source kind `ray` (built by bot.app.factories) ----------------------------------


class RayClusterSource:
    """One Ray cluster as a daemon source (`bot.daemon.ports.Source` and `Polling`): the
    scheduler calls `poll()` every `poll_interval`; each batch goes to the pipeline as
    one `bot.daemon.feed.Observation` with its cluster, namespace and workload."""

    def __init__(
        self,
        config: RayClusterConfig,
        sink: Sink,
        bookmarks: Bookmarks,
        *,
        poll_interval: timedelta = timedelta(seconds=10),
        options: RaySourceOptions | None = None,
        clock: Callable[[], datetime] = utcnow,
        submit_attempts: int = 50,
    ) -> None:
        self.name = f"ray-{config.name}"
        self.poll_interval = poll_interval
        self.config = config
        self._sink = sink
        self._clock = clock
        self._attempts = submit_attempts
        self._source = RaySource([config], bookmarks, options)

    @property
    def source(self) -> RaySource:
        """The poller itself (backoff and start-up state: `retry_now`, `set_starting`)."""
        return self._source

    def start(self) -> None:
        """Nothing to start: the scheduler drives `poll`."""

    def stop(self) -> None:
        self._source.close()

    def healthy(self) -> bool:
        return self._source.healthy()

    def status(self) -> dict[str, Any]:
        return self._source.status()[self.config.name]  # type: ignore[no-any-return]

    def poll(self) -> None:
        for batch in self._source.poll_batches(self._clock()):
            context = Context(batch.cluster, batch.namespace, batch.workload)
            observation = observe(batch.parts, context)
            # Reported means bookmarked: wait for room on the queue rather than drop it.
            for attempt in range(self._attempts):
                if self._sink.submit(observation):
                    break
                time.sleep(min(0.1 * 2**attempt, 2.0))
            else:
                log.error("%s: pipeline queue full, dropped %s", self.name, batch.parts[0])

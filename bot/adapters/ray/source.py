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
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from bot.adapters.ray.client import (
    LOG_LIMIT,
    SUPERVISOR_NAME,
    SUPERVISOR_NAMESPACE,
    TERMINAL,
    ActorInfo,
    DashboardUnreachableError,
    RayApiError,
    RayClusterConfig,
    RayDashboard,
    job_key,
)
from bot.core.inputs import InputPart, LogText
from bot.core.inputs.rayjob import job_info_parts
from bot.core.model import ObjectRef, Signal, SourceKind, frozen_map
from bot.daemon.feed import Context, Sink, observe
from bot.daemon.ports import Bookmarks, utcnow

log = logging.getLogger(__name__)

REPORTED = frozenset({"FAILED", "STOPPED"})
DEFAULT_RAYJOB_KEYS = ("ray.io/rayjob", "kuberay.io/rayjob", "rayjob", "rayjob_name")
"""Job metadata keys naming the KubeRay RayJob (`name` or `namespace/name`)."""
IGNORED_NAMESPACES = ("serve", SUPERVISOR_NAMESPACE)
"""Namespaces whose detached actors outlive their drivers by design (Ray Serve)."""
_INTERNAL_PREFIX = "_ray_internal"
# Ray deaths that follow from the job ending (or a deliberate kill), not a cause:
# frameworks ray.kill their actors at teardown, owners exiting take their actors.
_CONSEQUENTIAL = frozenset({"OWNER_DIED", "OUT_OF_SCOPE", "REF_DELETED", "RAY_KILL"})
_INTENDED = re.compile(r"Worker exit type: INTENDED_(?:USER|SYSTEM)_EXIT")
_TAKEN = re.compile(r"The name (?P<name>[^\s(]+) (?:\(namespace=(?P<ns>[^)]*)\) )?is already taken")
_MAX_ACTORS = 20
_MAX_METADATA = 20


class MemoryBookmarks:
    """Bookmarks kept in memory (tests, `pitcrew diagnose`, a daemon without a store)."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.values = dict(values or {})
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        with self._lock:
            self.values[key] = value


def jobs_key(cluster: str) -> str:
    return f"ray/{cluster}/jobs"


def stale_key(cluster: str) -> str:
    return f"ray/{cluster}/stale-actors"


def expected_stop_key(cluster: str, submission_id: str) -> str:
    """Set by `ray.stop_job` before it stops a job, so its STOPPED is not reported."""
    return f"ray/{cluster}/expected-stop/{submission_id}"


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


# -- signals of one job ----------------------------------------------------------------


def job_parts(
    client: RayDashboard,
    job: Mapping[str, Any],
    config: RayClusterConfig,
    *,
    log_limit: int = LOG_LIMIT,
    rayjob_keys: Sequence[str] = DEFAULT_RAYJOB_KEYS,
    jobs_by_id: Mapping[str, Mapping[str, Any]] | None = None,
    ignored_namespaces: Sequence[str] = IGNORED_NAMESPACES,
    now: datetime | None = None,
) -> list[InputPart]:
    """Everything pitcrew reads about one job: its `ray_job` signal with context fields,
    its driver log tail, its DEAD actors' death causes, and the stale actors its failure
    names. Used by the source and by `pitcrew diagnose --ray-job`.

    Raises DashboardUnreachableError when the dashboard stops answering; other API
    errors on the log or actors only leave those parts out."""
    key = job_key(job)
    origin = f"ray://{config.name}/jobs/{key}"
    base = job_info_parts(job, origin)
    first = base[0]
    assert isinstance(first, Signal)
    message_log = next((p for p in base[1:] if isinstance(p, LogText)), None)
    context = context_fields(job, config, rayjob_keys)
    signal = replace(first, fields=frozen_map({**first.fields, **context}), cluster=config.name)
    ref = signal.obj
    parts: list[InputPart] = [signal]

    tail = _optional(lambda: client.driver_log_tail(job, log_limit), b"", f"driver log of {key}")
    if tail:
        parts.append(LogText((tail,), SourceKind.DRIVER_LOG, f"{origin}/driver.log", ref, ref))
    if message_log is not None and not _covered(message_log, tail):
        parts.append(message_log)

    job_id = str(job.get("job_id") or "")
    no_actors: list[ActorInfo] = []
    if job_id:
        dead = _optional(
            lambda: client.actors(job_id=job_id, state="DEAD"), no_actors, f"actors of {key}"
        )
        parts.extend(death_parts(dead, config, context, origin, ref))
    submission = str(job.get("submission_id") or "")
    if str(job.get("error_type") or "").startswith("JOB_SUPERVISOR") and submission:
        # The job died with its JobSupervisor actor (Ray's memory monitor can kill it):
        # its death cause, structured; the job message already carries the text.
        supervisors = _optional(
            lambda: client.actors(
                name=SUPERVISOR_NAME.format(submission_id=submission),
                namespace=SUPERVISOR_NAMESPACE,
                state="DEAD",
            ),
            no_actors,
            f"supervisor of {key}",
        )
        deaths = death_parts(supervisors, config, context, origin, ref)
        parts.extend(p for p in deaths if isinstance(p, Signal))
    names = _names_taken(parts)
    if names:
        parts.extend(_holders(client, names, config, context, jobs_by_id, ignored_namespaces, now))
    return parts


def context_fields(
    job: Mapping[str, Any], config: RayClusterConfig, rayjob_keys: Sequence[str]
) -> dict[str, str]:
    """Fields naming where a job runs: pitcrew's cluster name, the Kubernetes namespace,
    RayCluster and RayJob (from the cluster's config or the job's metadata), and the
    job's metadata as `metadata.<key>`."""
    fields: dict[str, str] = {"cluster": config.name}
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
    """A `ray_actor` signal per telling death, and the death messages as worker log text.

    Deaths that only follow from the job ending (owner died, out of scope, killed by
    `ray.kill`, intended exits) are left out: at teardown every actor dies that way,
    and they would hide the real error."""
    telling = [a for a in actors if _telling(a)][:_MAX_ACTORS]
    parts: list[InputPart] = []
    lines: list[str] = []
    seen: set[tuple[str, str]] = set()
    for actor in telling:
        fields = {
            **context,
            "actor_id": actor.actor_id,
            "actor_name": actor.name,
            "ray_namespace": actor.namespace,
            "class_name": actor.class_name,
            "state": actor.state,
            "death_kind": actor.death_kind,
            "death_reason": actor.death_reason,
            "is_detached": str(actor.is_detached).lower(),
            "pid": str(actor.pid) if actor.pid else "",
            "node_id": actor.node_id,
            "actor_job_id": actor.job_id,
        }
        parts.append(
            Signal(
                source=SourceKind.RAY_ACTOR,
                text=actor.death_message or f"actor {actor.name or actor.actor_id} is DEAD",
                reason=actor.death_reason or actor.death_kind or "DEAD",
                fields=frozen_map({k: v for k, v in fields.items() if v}),
                obj=ObjectRef("RayActor", actor.name or actor.actor_id),
                workload=workload,
                cluster=config.name,
                origin=f"{origin}/actors/{actor.actor_id}",
            )
        )
        if (actor.class_name, actor.death_message) in seen or not actor.death_message:
            continue
        seen.add((actor.class_name, actor.death_message))
        prefix = f"({actor.class_name or 'actor'} pid={actor.pid}, actor_id={actor.actor_id})"
        lines.extend(f"{prefix} {line}" for line in actor.death_message.splitlines() if line)
    if lines:
        text = ("\n".join(lines) + "\n").encode("utf-8")
        parts.append(
            LogText((text,), SourceKind.WORKER_LOG, f"{origin}/actor-deaths", workload, workload)
        )
    return parts


def _telling(actor: ActorInfo) -> bool:
    if actor.death_kind and actor.death_kind != "actor_died_error_context":
        return True  # OOM, creation failure, runtime_env failure, unschedulable
    if actor.death_reason in _CONSEQUENTIAL:
        return False
    return not _INTENDED.search(actor.death_message)


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
    ended = _ms_time(owner.get("end_time")) if owner else None
    age = f" {_human(now - ended)} ago" if ended else ""
    owner_text = f"job {actor.job_id}" + (f" ({submission})" if submission else "")
    fields = {
        **context,
        "actor_id": actor.actor_id,
        "actor_name": actor.name,
        "ray_namespace": actor.namespace,
        "class_name": actor.class_name,
        "state": actor.state,
        "is_detached": str(actor.is_detached).lower(),
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
        obj=ObjectRef("RayActor", actor.name),
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


def _names_taken(parts: Sequence[InputPart]) -> list[tuple[str, str]]:
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


def _holders(
    client: RayDashboard,
    names: Sequence[tuple[str, str]],
    config: RayClusterConfig,
    context: Mapping[str, str],
    jobs_by_id: Mapping[str, Mapping[str, Any]] | None,
    ignored: Sequence[str],
    now: datetime | None,
) -> list[InputPart]:
    """Stale signals for ALIVE actors holding a name the failure says is taken."""
    parts: list[InputPart] = []
    none: list[ActorInfo] = []
    no_jobs: list[dict[str, Any]] = []
    for name, namespace in names:
        scope = namespace if namespace not in ("", "None") else None

        def holding(name: str = name, scope: str | None = scope) -> list[ActorInfo]:
            return client.actors(name=name, namespace=scope, state="ALIVE")

        holders = _optional(holding, none, f"holders of {name}")
        if not holders:
            continue
        if jobs_by_id is None:
            jobs = _optional(client.list_jobs, no_jobs, "jobs")
            jobs_by_id = {str(j.get("job_id")): j for j in jobs if j.get("job_id")}
        for actor in holders:
            owner = jobs_by_id.get(actor.job_id)
            if is_stale(actor, owner, ignored):
                parts.append(stale_signal(actor, owner, config, context, now or datetime.now(UTC)))
    return parts


def _covered(message_log: LogText, tail: bytes) -> bool:
    """The job message's log excerpt is already in the driver log tail."""
    if not tail:
        return False
    text = b"".join(message_log.chunks)
    _, _, body = text.partition(b"\n")
    probe = body.strip()[-400:]
    return bool(probe) and probe in tail


_T = TypeVar("_T")


def _optional(call: Callable[[], _T], default: _T, what: str) -> _T:
    """Call; on an API error other than the dashboard being unreachable, log and go on."""
    try:
        return call()
    except DashboardUnreachableError:
        raise
    except RayApiError as error:
        log.info("%s: %s", what, error)
        return default


# -- the source --------------------------------------------------------------------------


@dataclass
class _Ledger:
    """Which terminal jobs were reported: an end-time watermark (Ray's clock, ms), the
    ids reported within `window` below it, and the floor set on the very first start
    (nothing that ended before it is ever reported)."""

    watermark: int
    floor: int
    recent: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, text: str | None, floor: int) -> _Ledger:
        if text:
            try:
                data = json.loads(text)
                recent = {str(k): int(v) for k, v in dict(data.get("recent", {})).items()}
                mark = int(data["watermark"])
                return cls(mark, int(data.get("floor", mark)), recent)
            except (ValueError, KeyError, TypeError, AttributeError):
                log.warning("ignoring an unreadable Ray bookmark: %.80s", text)
        return cls(floor, floor)

    def dump(self) -> str:
        return json.dumps(
            {"v": 1, "watermark": self.watermark, "floor": self.floor, "recent": self.recent}
        )

    def is_new(self, key: str, end: int, window: int) -> bool:
        return key not in self.recent and end >= max(self.floor, self.watermark - window)

    def record(self, key: str, end: int, window: int) -> None:
        self.recent[key] = end
        self.watermark = max(self.watermark, end)
        floor = self.watermark - window
        self.recent = {k: v for k, v in self.recent.items() if v >= floor}


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
        self.ledger: _Ledger | None = None
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
            self.ledger = _Ledger.load(saved, floor)
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
            end = _int(job.get("end_time")) or _int(job.get("start_time"))
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
            ended = _ms_time(owner.get("end_time")) if owner else None
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
        ledger = _Ledger(self.ledger.watermark, self.ledger.floor, dict(self.ledger.recent))
        for key, end in result.jobs:
            ledger.record(key, end, window)
        try:
            if result.jobs or self.ledger_unsaved:
                self.bookmarks.set(jobs_key(self.config.name), ledger.dump())
            self.ledger, self.ledger_unsaved = ledger, False
            out.extend(result.batches)
        except Exception:
            log.exception("Ray cluster %s: cannot save the jobs bookmark", self.config.name)
        if result.stale_ids is not None:
            try:
                if result.stale_ids != self.stale_reported:
                    text = json.dumps(sorted(result.stale_ids))
                    self.bookmarks.set(stale_key(self.config.name), text)
                self.stale_reported = result.stale_ids
                self.last_stale_scan = now
                out.extend(result.stale_batches)
            except Exception:
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


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _ms(delta: timedelta) -> int:
    return int(delta.total_seconds() * 1000)


def _ms_epoch(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _ms_time(value: Any) -> datetime | None:
    ms = _int(value)
    return datetime.fromtimestamp(ms / 1000, UTC) if ms > 0 else None


def _stamp(when: datetime | None) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else ""


def _human(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _clock() -> float:
    return time.perf_counter()


# -- the daemon's source kind `ray` (built by bot.app.factories) ----------------------------------


class RayClusterSource:
    """One Ray cluster as a daemon source (`bot.daemon.sources.Source` and `Polling`): the
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

"""Wiring only: the one place that knows every concrete class of the daemon.

settings -> store -> engine -> correlator -> chat -> pipeline thread, live-check
workers, memory worker, outbox thread, action runner, service, sources, scheduler,
HTTP. `Daemon.start` and `Daemon.stop` put them up and take them down in order;
`run` is `pitcrew run`: start, wait for SIGTERM or SIGINT, stop cleanly (stop
sources, drain the queue or keep what is left in the store for the next start,
flush the outbox within a bounded wait, stop the
scheduler, close the store) and return the exit status. Logging goes to stderr,
one line per event.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TextIO

from bot.adapters.console.chat import ConsoleChat
from bot.adapters.files.playbooks import builtin_engine, engine_of
from bot.adapters.http.alertmanager import PATH as ALERTMANAGER_PATH
from bot.adapters.http.alertmanager import Receiver
from bot.adapters.http.alertmanager import route as alertmanager_route
from bot.adapters.http.ingest import PATH as INGEST_PATH
from bot.adapters.http.ingest import route as ingest_route
from bot.adapters.http.server import Credentials, HealthServer
from bot.adapters.scheduler import Intervals, Jobs, Scheduler
from bot.adapters.store.lock import StoreLock
from bot.adapters.store.store import Store
from bot.app.bundles import bundle_writer
from bot.app.capture_wiring import bundles_dir, capture_worker, prune_bundles
from bot.app.factories import build_registry, build_sources, categorizer, open_store
from bot.app.memory_wiring import charts_dir, memory_worker, prune_charts
from bot.app.on_demand import Diagnoser
from bot.app.settings.sections import Settings
from bot.core.actions import tuning
from bot.core.diagnosis.engine import Engine
from bot.core.errors import PitcrewError, StoreError
from bot.core.incidents.assessment import Assess, adjusted, assessor
from bot.core.incidents.correlator import Correlator
from bot.core.playbooks.library import Library
from bot.daemon import live_checks
from bot.daemon.budget import Budget, budgeted_assess
from bot.daemon.capture import CaptureWorker
from bot.daemon.executor import Registry
from bot.daemon.feed import Item, Refresh, Tick
from bot.daemon.intake import Intake
from bot.daemon.live_checks import LiveChecks
from bot.daemon.memory_worker import MemoryWorker
from bot.daemon.metrics import Metrics
from bot.daemon.outbox import Outbox
from bot.daemon.pipeline import Pipeline
from bot.daemon.ports import CallableBookmarks, Chat, Clock, Polling, Source, utcnow
from bot.daemon.runner import Runner
from bot.daemon.service import Service

log = logging.getLogger("pitcrew")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass
class Daemon:
    settings: Settings
    metrics: Metrics
    store: Store
    chat: Chat
    pipeline: Pipeline
    outbox: Outbox
    registry: Registry
    runner: Runner
    service: Service
    sources: Sequence[Source]
    scheduler: Scheduler
    http: HealthServer
    live: LiveChecks
    intake: Intake
    memory: MemoryWorker | None = None  # memory evidence from sources.prometheus
    capture: CaptureWorker | None = None  # evidence bundles of failing RayJobs and RayClusters
    lock: StoreLock | None = None
    store_answer: str = ""  # which store, and whether it answered at the last readiness check

    def start(self) -> None:
        self.pipeline.restore()
        self.pipeline.start()
        self.intake.resume()  # what a stop or a crash left, before anything new
        self.outbox.start()
        self.http.start()
        _lifecycle(self.chat, "start")
        for source in self.sources:
            source.start()
        self.scheduler.start()
        self.outbox.wake()
        log.info(
            "pitcrew running: http://%s:%d, store %s, chat %s, %d sources, executors for %s",
            self.settings.http.host,
            self.http.port,
            self.store.describe(),
            self.settings.chat_kind,
            len(self.sources),
            ", ".join(self.registry.actions()) or "no action",
        )

    def stop(self) -> None:
        """Stop sources, drain the queue, flush the outbox, stop the scheduler, close."""
        timeouts = self.settings.pipeline
        _quietly("stop the chat", lambda: _lifecycle(self.chat, "stop"))
        for source in self.sources:
            _quietly(f"stop source {source.name}", source.stop)
        _quietly("stop the HTTP server", self.http.stop)
        if self.memory is not None:
            self.memory.close(wait=False)
        if self.capture is not None:
            self.capture.close(wait=False)
        if not self.pipeline.stop(timeouts.drain_timeout.total_seconds()):
            kept = self.intake.keep(self.pipeline.left_over())
            log.warning("the queue was not drained in time; %d items kept for the next start", kept)
        self.live.close()
        self.runner.close(wait=True)
        self.outbox.stop()
        _quietly("flush the outbox", lambda: _flush(self.outbox, timeouts.flush_timeout))
        self.scheduler.stop()
        self.store.close()
        if self.lock is not None:
            self.lock.release()
        log.info("pitcrew stopped")

    def liveness(self) -> dict[str, bool]:
        """The threads run and the chat's connection is not known to be dead."""
        return {
            "pipeline": self.pipeline.alive(),
            "outbox": self.outbox.alive(),
            "chat": _chat_ok(self.chat),
        }

    def readiness(self) -> dict[str, bool]:
        store_ok, self.store_answer = _store_answer(self.store)
        checks = {"store": store_ok, **self.liveness()}
        for source in self.sources:
            healthy = _source_ok(source)
            self.metrics.source_up.labels(source=source.name).set(1 if healthy else 0)
            checks[f"source:{source.name}"] = healthy
        return checks


def build(
    settings: Settings,
    *,
    chat: Chat | None = None,
    clock: Clock = utcnow,
    stdout: TextIO | None = None,
    engine: Engine | None = None,
    init_store: bool = False,
) -> Daemon:
    """Every part of the daemon, connected; nothing runs until `Daemon.start`. `engine`:
    an already compiled playbook library (tests share one); `init_store`: see
    `_open_store`."""
    metrics = Metrics()
    engine = engine or builtin_engine(list(settings.playbooks.dirs))
    chat = chat or make_chat(settings, stdout)
    lock, store = _open_store(settings, init_store)
    bookmarks = CallableBookmarks(store.bookmark, store.set_bookmark)
    registry = build_registry(settings, bookmarks, categorizer(engine.library))
    outbox = Outbox(store, chat, clock=clock, metrics=metrics)
    memory = memory_worker(settings, lambda item: pipeline.submit(item))
    capture = capture_worker(settings, store.save_bundle, lambda item: pipeline.submit(item))
    pipeline = _pipeline(
        settings, engine, store, outbox, clock, metrics, memory, lambda: checks, lambda: intake
    )
    pipeline.capture_with(capture)
    intake = Intake(store, pipeline, clock, metrics)
    checks = _live_checks(settings, registry, pipeline, clock)
    runner, service = _approvals(
        settings, store, registry, pipeline, clock, metrics, engine.library.actions_by_playbook
    )
    sources = build_sources(settings, pipeline, bookmarks)
    daemon = Daemon(
        settings=settings,
        metrics=metrics,
        store=store,
        chat=chat,
        pipeline=pipeline,
        outbox=outbox,
        registry=registry,
        runner=runner,
        service=service,
        sources=sources,
        scheduler=_scheduler(
            settings, clock, store, pipeline, outbox, runner, service, sources, intake
        ),
        http=_http(
            settings,
            metrics,
            lambda: daemon.liveness(),
            lambda: daemon.readiness(),
            lambda: {"store": daemon.store_answer},
        ),
        live=checks,
        intake=intake,
        memory=memory,
        capture=capture,
        lock=lock,
    )
    _serve(daemon, engine.library, clock)
    return daemon


def _open_store(settings: Settings, init_store: bool) -> tuple[StoreLock | None, Store]:
    """The store; a SQLite file is locked for this daemon first (`StoreLock`: a second
    daemon on it is refused). PostgreSQL is not: replicas share it, and the leader
    election picks the one that acts. `init_store` makes an empty or foreign database a
    store instead of refusing it."""
    lock = _lock(settings)
    try:
        return lock, open_store(settings, init=init_store)
    except StoreError:
        if lock is not None:
            lock.release()
        raise


def _lock(settings: Settings) -> StoreLock | None:
    path = str(settings.store.path)
    if settings.store.url or path == ":memory:":
        return None
    lock = StoreLock(str(Path(path).absolute()), min_free=settings.store.min_free_mib << 20)
    lock.acquire(create=lambda: Store(path).close())
    return lock


def _pipeline(
    settings: Settings,
    engine: Engine,
    store: Store,
    outbox: Outbox,
    clock: Clock,
    metrics: Metrics,
    memory: MemoryWorker | None,
    checks: Callable[[], LiveChecks],
    intake: Callable[[], Intake],
) -> Pipeline:
    """The pipeline thread; it hands the offers that wait on a live fact to `checks()`,
    asks `memory` for memory incidents' evidence and tells `intake()` what it took in."""
    budget = Budget(settings.pipeline.step_budget.total_seconds())
    assess = budgeted_assess(_assess(settings, engine.library), budget)
    correlator = Correlator(assess, settings.correlation)
    return Pipeline(
        engine=engine,
        correlator=correlator,
        store=store,
        notify=settings.notify,
        clock=clock,
        metrics=metrics,
        proposal_ttl=settings.approvals.ttl,
        propose=settings.actions.enabled,
        queue_size=settings.pipeline.queue_size,
        queue_bytes=settings.pipeline.queue_bytes,
        busy_limit=settings.pipeline.busy_limit.total_seconds(),
        queued=outbox.wake,
        memory=memory,
        check_live=lambda incident_id, offers: checks().request(incident_id, offers),
        live_hold=settings.pipeline.live_check_timeout + timedelta(seconds=1),
        keeper=_Kept(intake),
        budget=budget,
        fresh_engine=lambda: engine_of(engine.library),
    )


@dataclass(frozen=True)
class _Kept:
    """The intake, as the pipeline's keeper (made after the pipeline, which it feeds)."""

    intake: Callable[[], Intake]

    def taking(self, item: Item) -> None:
        self.intake().taking(item)

    def taken(self, item: Item) -> None:
        self.intake().taken(item)

    def set_aside(self, item: Item, state: str, stage: str, problem: str) -> int:
        return self.intake().set_aside(item, state, stage, problem)


def _assess(settings: Settings, library: Library) -> Assess:
    """Ranking and offers over an incident's findings, with the configured action values
    and the live facts the incident's checks found so far (an action withheld only for
    want of one is checked off the pipeline thread, `bot.daemon.live_checks`, and the incident
    assessed again with the answer)."""
    values = settings.actions.overrides()
    return adjusted(assessor(library), lambda diagnosis: tuning.tune(diagnosis, values))


def _live_checks(
    settings: Settings, registry: Registry, pipeline: Pipeline, clock: Clock
) -> LiveChecks:
    """The workers that ask the executors for live facts and answer on the pipeline."""
    return LiveChecks(
        live_checks.executor_checks(registry),
        pipeline,
        timeout=settings.pipeline.live_check_timeout.total_seconds(),
        workers=settings.pipeline.live_check_workers,
    )


def _approvals(
    settings: Settings,
    store: Store,
    registry: Registry,
    pipeline: Pipeline,
    clock: Clock,
    metrics: Metrics,
    offers: Callable[[], Mapping[str, tuple[str, ...]]],
) -> tuple[Runner, Service]:
    """The action runner and the service clicks and commands go through; both refresh
    an incident's card at once when its proposals move (and say a refusal in its
    thread). `offers`: the actions each playbook offers, for silencers' scopes."""

    def refresh(incident_id: str) -> None:
        pipeline.submit(Refresh(incident_id, urgent=True))

    def tell(incident_id: str, text: str) -> None:
        pipeline.submit(Refresh(incident_id, urgent=True, say=text))

    runner = Runner(
        store,
        registry,
        clock=clock,
        enabled=settings.actions.enabled,
        metrics=metrics,
        changed=refresh,
        tell=tell,
    )

    service = Service(
        store,
        settings.approvals,
        registry,
        metrics=metrics,
        execute=runner.submit,
        changed=refresh,
        tell=tell,
        offers=offers,
    )
    return runner, service


def _serve(daemon: Daemon, library: Library, clock: Clock) -> None:
    """`POST /ingest` and `POST /alertmanager` when enabled; a chat that takes clicks and
    commands (Slack) answers them through the service, `/pitcrew diagnose` included."""
    if daemon.settings.http.ingest:
        route = ingest_route(daemon.intake)
        daemon.http.mount(INGEST_PATH, route, private=True)
    if daemon.settings.alertmanager.enabled:
        _receive_alerts(daemon, clock)
    bind = getattr(daemon.chat, "bind", None)
    if callable(bind):
        diagnoser = Diagnoser(daemon.settings, library, daemon.pipeline)
        bind(
            daemon.service,
            http=daemon.http,
            metrics=daemon.metrics,
            diagnoser=diagnoser,
            replays=daemon.store,  # signed requests seen, kept across a restart
            bundle_writer=bundle_writer(daemon.store, bundles_dir(daemon.settings)),
            unchecked=daemon.store,  # cards posted while history did not answer
        )


def _receive_alerts(daemon: Daemon, clock: Clock) -> None:
    """Alertmanager's webhook on /alertmanager: the token from every client when set
    (bearer, or basic auth's password), loopback clients only without one."""
    settings = daemon.settings
    token = settings.secrets.alertmanager_token
    credentials = None
    if token is not None:
        credentials = Credentials(token.get_secret_value(), settings.alertmanager.username)
    receiver = Receiver(settings.alertmanager.url, settings.store.retention.total_seconds())
    route = alertmanager_route(daemon.intake, daemon.store, lambda: clock().timestamp(), receiver)
    daemon.http.mount(ALERTMANAGER_PATH, route, private=True, credentials=credentials)


def clean_up(settings: Settings, store: Store, now: datetime) -> None:
    """State past the retention: the store's rows, and the memory charts beside it."""
    cutoff = now - settings.store.retention
    removed = store.cleanup(now, settings.store.retention)
    charts = prune_charts(charts_dir(settings), cutoff)
    charts += prune_bundles(bundles_dir(settings), cutoff.timestamp())
    log.info(
        "cleaned up %d incidents, %d notifications, %d silences and %d charts and bundles",
        removed.incidents,
        removed.notifications,
        removed.silences,
        charts,
    )


def _scheduler(
    settings: Settings,
    clock: Clock,
    store: Store,
    pipeline: Pipeline,
    outbox: Outbox,
    runner: Runner,
    service: Service,
    sources: Sequence[Source],
    intake: Intake,
) -> Scheduler:
    scheduler = Scheduler()
    scheduler.install(
        Jobs(
            tick=lambda: pipeline.submit(Tick()),
            expire=lambda: service.expire(clock()),
            wake_outbox=outbox.wake,
            cleanup=lambda: clean_up(settings, store, clock()),
            run_approved=runner.run_approved,
            take_released=intake.take_released,
        ),
        Intervals(**dict(settings.scheduler)),
    )
    for source in sources:
        if isinstance(source, Polling):
            scheduler.every(f"poll-{source.name}", source.poll_interval, source.poll)
    return scheduler


def make_chat(settings: Settings, stdout: TextIO | None = None) -> Chat:
    """The console chat, or the Slack chat (`bot.app.slack_chat`)."""
    if settings.chat_kind == "console":
        return ConsoleChat(stdout or sys.stdout, width=settings.chat.console.width)
    from bot.app.slack_chat import slack_chat

    return slack_chat(settings)


def _http(
    settings: Settings,
    metrics: Metrics,
    liveness: Callable[[], dict[str, bool]],
    readiness: Callable[[], dict[str, bool]],
    notes: Callable[[], dict[str, str]],
) -> HealthServer:
    host, port = settings.http.host, settings.http.port
    token = settings.secrets.ingest_token
    try:
        return HealthServer(
            host,
            port,
            metrics,
            liveness,
            readiness,
            notes=notes,
            ingest_token=token.get_secret_value() if token else "",
        )
    except OSError as error:
        raise PitcrewError(f"http: cannot listen on {host}:{port}: {error.strerror}") from None


def _lifecycle(chat: Chat, step: str) -> None:
    """`start` / `stop` for chats that hold a connection (Slack's Socket Mode)."""
    method = getattr(chat, step, None)
    if callable(method):
        method()


def _store_answer(store: Store) -> tuple[bool, str]:
    """Readable, and its last write was not refused by the disk; and which store, in words."""
    try:
        store.ping()
    except StoreError as error:
        return False, f"{store.describe()}: does not answer: {error.problem}"
    failure = store.write_failure()
    if failure is not None:
        return False, f"{store.describe()}: answers, but its last write failed: {failure}"
    return True, f"{store.describe()}: answers"


def _chat_ok(chat: Chat) -> bool:
    try:
        return bool(chat.healthy())
    except Exception as error:  # a probe answers unhealthy rather than failing the request
        log.warning("the %s chat's health check failed: %s", chat.name, error)
        return False


def _source_ok(source: Source) -> bool:
    try:
        return bool(source.healthy())
    except Exception as error:  # a probe answers unhealthy rather than failing the request
        log.warning("the %s source's health check failed: %s", source.name, error)
        return False


def _flush(outbox: Outbox, within: timedelta) -> None:
    """Deliver what is due within the bounded wait; what is left stays in the store (a
    store that stopped answering, PostgreSQL gone, makes this fail: `_quietly`)."""
    if not outbox.flush(within.total_seconds()):
        log.warning("%d notifications stay in the outbox for the next start", outbox.pending())


def _quietly(what: str, step: Callable[[], object]) -> None:
    try:
        step()
    except Exception as error:
        log.error("could not %s: %s", what, error)


def setup_logging(level: int = logging.INFO) -> None:
    logging.basicConfig(level=level, stream=sys.stderr, format=LOG_FORMAT, force=True)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


def run(settings: Settings, *, init_store: bool = False) -> int:
    """`pitcrew run`: the daemon until SIGTERM or SIGINT; 0 after a clean stop."""
    setup_logging()
    daemon = build(settings, init_store=init_store)
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    daemon.start()
    while not stopping.wait(0.5):
        pass
    daemon.stop()
    return 0

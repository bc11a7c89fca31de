"""Wiring only: the one place that knows every concrete class of the daemon.

settings -> store -> engine -> chat -> outbox thread -> the pipeline's queue (built
before anything that puts items on it, so each is handed the queue itself) -> intake,
live-check workers, memory and capture workers -> pipeline -> action runner, service,
sources, scheduler, HTTP, and the Lease's elector with leader election.
`Daemon.start` and `Daemon.stop` put them up and take them down in order: the leader's
parts (pipeline, outbox, sources, scheduler: `Daemon.lead`) at once with one replica,
or once this replica takes the Lease; the HTTP server and the chat (probes, metrics,
Slack's requests) on every replica.
`run` is `pitcrew run`: start, wait for SIGTERM or SIGINT, stop cleanly (stop
sources, drain the queue or keep what is left in the store for the next start,
flush the outbox within a bounded wait, stop the scheduler, release the Lease, close
the store) and return the exit status. Logging goes to stderr, one line per event.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
from bot.adapters.http.server import Credentials, HealthServer, Probes
from bot.adapters.scheduler import Intervals, Jobs, Scheduler
from bot.adapters.store.lock import StoreLock
from bot.adapters.store.store import Store
from bot.app import leadership
from bot.app.bundles import bundle_writer
from bot.app.capture_wiring import bundles_dir, capture_worker, prune_bundles
from bot.app.factories import (
    build_registry,
    build_sources,
    categorizer,
    cluster_name,
    open_store,
)
from bot.app.memory_wiring import charts_dir, memory_worker, prune_charts
from bot.app.on_demand import Diagnoser
from bot.app.probes import Health, Leadership
from bot.app.settings.sections import Settings
from bot.core.actions import tuning
from bot.core.actions.reach import Reach
from bot.core.diagnosis.engine import Engine
from bot.core.errors import PitcrewError, StoreError
from bot.core.incidents.assessment import Assess, adjusted, assessor
from bot.core.incidents.correlator import Correlator
from bot.core.playbooks.library import Library
from bot.core.text import for_terminal
from bot.daemon import live_checks
from bot.daemon.budget import Budget, BudgetedClassifier, budgeted_assess
from bot.daemon.executor import Registry
from bot.daemon.feed import Refresh, Tick
from bot.daemon.intake import Intake
from bot.daemon.live_checks import LiveChecks
from bot.daemon.metrics import Metrics
from bot.daemon.outbox import Outbox
from bot.daemon.pipeline import Pipeline, PipelineConfig, Workers
from bot.daemon.ports import (
    CallableBookmarks,
    Chat,
    ChatService,
    Clock,
    Polling,
    Sink,
    Source,
    utcnow,
)
from bot.daemon.runner import Runner
from bot.daemon.service import Service
from bot.daemon.strays import StrayRecorder
from bot.daemon.taking import QueueLimits, Taking

log = logging.getLogger("pitcrew")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass
class Daemon:
    settings: Settings
    metrics: Metrics
    store: Store
    chat: Chat
    queue: Taking  # the pipeline's queue and thread (`bot.daemon.taking`)
    pipeline: Pipeline
    outbox: Outbox
    registry: Registry
    runner: Runner
    service: Service
    sources: Sequence[Source]
    scheduler: Scheduler
    http: HealthServer
    health: Health
    live: LiveChecks
    intake: Intake
    workers: Workers  # the memory and capture workers among them, closed by `stop`
    lock: StoreLock | None = None

    leadership: Leadership = field(default_factory=Leadership)  # and the Lease's elector

    def start(self) -> None:
        """Without leader election: lead at once, then serve. With it: serve (probes,
        metrics, Slack's requests) and stand by; `lead` runs when the Lease is taken."""
        elector = self.leadership.elector
        if elector is None:
            self.lead()
            self.http.start()
            _start_chat(self.chat, deliver=True)
        else:
            self.http.start()
            _start_chat(self.chat, deliver=False)
            elector.start()
        log.info(
            "pitcrew running: http://%s:%d, store %s, chat %s, %d sources, executors for %s%s",
            self.settings.http.host,
            self.http.port,
            self.store.describe(),
            self.settings.chat_kind,
            len(self.sources),
            ", ".join(self.registry.actions()) or "no action",
            ", standing by for the Lease" if elector is not None else "",
        )

    def lead(self, term: int | None = None) -> None:
        """Run the leader's parts: the pipeline (its open incidents restored first), what a
        stop or a crash left, the outbox, the sources, the scheduler. With a `term` (this
        replica just took the Lease) the store is fenced first, so a deposed leader's late
        writes are refused, and the actions the old leader was running are finished."""
        with self.leadership.phase:
            if self.leadership.stopping:
                return
            if term is not None:
                self.store.fence(term, leadership.refused)
            self.pipeline.restore()
            self.queue.start(self.pipeline, keeper=self.intake)
            self.intake.resume()  # what a stop or a crash left, before anything new
            self.outbox.start()
            if term is not None:
                _lifecycle(self.chat, "deliver")
            for source in self.sources:
                source.start()
            self.scheduler.start()
            self.leadership.running.set()
            self.metrics.leading.set(1)
        if term is not None:
            self.metrics.term.set(term)
            log.info("leading at term %d: the sources, pipeline, outbox and runner run here", term)
            self.runner.take_over()
        self.outbox.wake()

    def stop(self) -> None:
        """Stop sources, drain the queue, flush the outbox, stop the scheduler (what a
        leader runs), release the Lease, close."""
        timeouts = self.settings.pipeline
        with self.leadership.phase:
            self.leadership.stopping = True
        leading = self.leadership.leads()
        _quietly("stop the chat", lambda: _lifecycle(self.chat, "stop"))
        for source in self.sources if leading else ():
            _quietly(f"stop source {source.name}", source.stop)
        _quietly("stop the HTTP server", self.http.stop)
        if self.workers.memory is not None:
            self.workers.memory.close(wait=False)
        if self.workers.capture is not None:
            self.workers.capture.close(wait=False)
        if not self.queue.stop(timeouts.drain_timeout.total_seconds()):
            kept = self.intake.keep(self.queue.left_over())
            log.warning("the queue was not drained in time; %d items kept for the next start", kept)
        self.live.close()
        self.runner.close(wait=True)
        self.outbox.stop()
        if leading:
            _quietly("flush the outbox", lambda: _flush(self.outbox, timeouts.flush_timeout))
        self.scheduler.stop()
        if self.leadership.elector is not None:  # the standby takes over at its next try
            self.leadership.elector.stop(release=True)
        self.store.close()
        if self.lock is not None:
            self.lock.release()
        log.info("pitcrew stopped")


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
    metrics = Metrics(cluster=cluster_name(settings))
    engine = engine or builtin_engine(list(settings.playbooks.dirs))
    chat = chat or make_chat(settings, stdout)
    lock, store = _open_store(settings, init_store)
    bookmarks = CallableBookmarks(store.bookmark, store.set_bookmark)
    registry = build_registry(settings, bookmarks, categorizer(engine.library))
    outbox = Outbox(store, chat, clock=clock, metrics=metrics)
    queue = Taking(_queue_limits(settings), metrics)  # first: all below put items on it
    leads = Leadership()  # with leader election, `lead` runs once this replica takes the Lease
    intake = Intake(store, queue, clock, metrics, leading=leads.leads)
    checks = _live_checks(settings, registry, queue, metrics)
    workers = _workers(settings, store, outbox, checks, queue)
    reach = Reach.of(registry.actions(), settings.approvals, settings.actions.enabled)
    pipeline = _pipeline(settings, engine, store, clock, workers, metrics, reach)
    offers = engine.library.actions_by_playbook
    runner, service = _approvals(settings, store, registry, queue, clock, metrics, offers, leads)
    sources = build_sources(settings, queue, bookmarks)
    jobs = _jobs(settings, clock, store, queue, outbox, runner, service, intake)
    leads.elector = leadership.elector(settings, clock, lambda term: daemon.lead(term), store.term)
    health = Health(queue, outbox, chat, store, sources, metrics, _one_app(settings), leads)
    daemon = Daemon(
        settings=settings,
        metrics=metrics,
        store=store,
        chat=chat,
        queue=queue,
        pipeline=pipeline,
        outbox=outbox,
        registry=registry,
        runner=runner,
        service=service,
        sources=sources,
        scheduler=_scheduler(settings, jobs, sources),
        http=_http(settings, metrics, health),
        health=health,
        live=checks,
        intake=intake,
        workers=workers,
        lock=lock,
        leadership=leads,
    )
    _serve(daemon, engine.library, clock)
    return daemon


def _jobs(
    settings: Settings,
    clock: Clock,
    store: Store,
    queue: Sink,
    outbox: Outbox,
    runner: Runner,
    service: Service,
    intake: Intake,
) -> Jobs:
    """What the scheduler runs (the leader's: `Daemon.lead` starts it)."""
    return Jobs(
        tick=lambda: queue.submit(Tick()),
        expire=lambda: service.expire(clock()),
        wake_outbox=outbox.wake,
        cleanup=lambda: clean_up(settings, store, clock()),
        run_approved=runner.run_approved,
        take_released=intake.take_released,
    )


def _one_app(settings: Settings) -> bool:
    """Slack's Socket Mode: a Slack app shared with another cluster's pitcrew loses this
    one clicks (at random), so it makes /readyz not ready; HTTP mode only notes it."""
    return settings.chat_kind == "slack" and settings.chat.slack.socket_mode


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


def _queue_limits(settings: Settings) -> QueueLimits:
    pipeline = settings.pipeline
    return QueueLimits(
        pipeline.queue_size, pipeline.queue_bytes, pipeline.busy_limit.total_seconds()
    )


def _workers(
    settings: Settings, store: Store, outbox: Outbox, checks: LiveChecks, queue: Sink
) -> Workers:
    """What the pipeline hands off: the outbox it wakes, the live checks, and the memory
    evidence (`sources.prometheus`) and evidence bundles (the kuberay collector) when
    configured, each answering on `queue`."""
    return Workers(
        wake_outbox=outbox.wake,
        check_live=checks.request,
        memory=memory_worker(settings, queue.submit),
        capture=capture_worker(settings, store.save_bundle, queue.submit),
    )


def _pipeline(
    settings: Settings,
    engine: Engine,
    store: Store,
    clock: Clock,
    workers: Workers,
    metrics: Metrics,
    reach: Reach | None = None,
) -> Pipeline:
    """The pipeline: classification, correlation and rendering within the step budget
    (log text on a fresh engine after a classification ran over), cards decided as
    `notify` says, the offers that wait on a live fact held for `live_check_timeout`,
    only what this pitcrew can finish offered (`reach`: its executors and approvers)."""
    budget = Budget(settings.pipeline.step_budget.total_seconds())
    assess = budgeted_assess(_assess(settings, engine.library), budget)
    config = PipelineConfig(
        notify=settings.notify,
        propose=settings.actions.enabled,
        proposal_ttl=settings.approvals.ttl,
        live_hold=settings.pipeline.live_check_timeout + timedelta(seconds=1),
        resume_running=settings.leader_election.enabled,  # a new leader finishes them
    )
    return Pipeline(
        BudgetedClassifier(engine, budget, lambda: engine_of(engine.library)),
        Correlator(assess, settings.correlation, reach),
        store,
        clock,
        config=config,
        workers=workers,
        metrics=metrics,
    )


def _assess(settings: Settings, library: Library) -> Assess:
    """Ranking and offers over an incident's findings, with the configured action values
    and the live facts the incident's checks found so far (an action withheld only for
    want of one is checked off the pipeline thread, `bot.daemon.live_checks`, and the incident
    assessed again with the answer)."""
    values = settings.actions.overrides()
    return adjusted(assessor(library), lambda diagnosis: tuning.tune(diagnosis, values))


def _live_checks(
    settings: Settings, registry: Registry, queue: Sink, metrics: Metrics
) -> LiveChecks:
    """The workers that ask the executors for live facts and answer on the queue."""
    return LiveChecks(
        live_checks.executor_checks(registry),
        queue,
        timeout=settings.pipeline.live_check_timeout.total_seconds(),
        workers=settings.pipeline.live_check_workers,
        metrics=metrics,
    )


def _approvals(
    settings: Settings,
    store: Store,
    registry: Registry,
    queue: Sink,
    clock: Clock,
    metrics: Metrics,
    offers: Callable[[], Mapping[str, tuple[str, ...]]],
    leads: Leadership,
) -> tuple[Runner, Service]:
    """The action runner and the service clicks and commands go through; both refresh
    an incident's card at once when its proposals move (and say a refusal in its
    thread). `offers`: the actions each playbook offers, for silencers' scopes. A click
    on a standby (`leads`) only records the approval; the leader's runner runs it."""

    def refresh(incident_id: str) -> None:
        queue.submit(Refresh(incident_id, urgent=True))

    def tell(incident_id: str, text: str) -> None:
        queue.submit(Refresh(incident_id, urgent=True, say=text))

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
        execute=lambda proposal_id: runner.submit(proposal_id) if leads.leads() else None,
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
        diagnoser = Diagnoser(daemon.settings, library, daemon.intake)  # the leader's queue
        service: ChatService = daemon.service  # the port a chat calls
        bind(
            service,
            http=daemon.http,
            metrics=daemon.metrics,
            diagnoser=diagnoser,
            replays=daemon.store,  # signed requests seen, kept across a restart
            bundle_writer=bundle_writer(daemon.store, bundles_dir(daemon.settings)),
            unchecked=daemon.store,  # cards posted while history did not answer
            stray=StrayRecorder(
                CallableBookmarks(daemon.store.bookmark, daemon.store.set_bookmark), utcnow
            ),  # a click for another cluster's pitcrew: kept for /readyz and pitcrew status
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


def _scheduler(settings: Settings, jobs: Jobs, sources: Sequence[Source]) -> Scheduler:
    """`jobs` at `settings.scheduler`'s intervals, and each polled source at its own."""
    scheduler = Scheduler()
    scheduler.install(jobs, Intervals(**dict(settings.scheduler)))
    for source in sources:
        if isinstance(source, Polling):
            scheduler.every(f"poll-{source.name}", source.poll_interval, source.poll)
    return scheduler


def make_chat(settings: Settings, stdout: TextIO | None = None) -> Chat:
    """The console chat, or the Slack chat (`bot.app.slack_chat`)."""
    if settings.chat_kind == "console":
        return ConsoleChat(
            stdout or sys.stdout, width=settings.chat.console.width, cluster=cluster_name(settings)
        )
    from bot.app.slack_chat import slack_chat

    return slack_chat(settings)


def _http(settings: Settings, metrics: Metrics, health: Health) -> HealthServer:
    host, port = settings.http.host, settings.http.port
    token = settings.secrets.ingest_token
    try:
        return HealthServer(
            host,
            port,
            metrics,
            Probes(health.liveness, health.readiness, health.notes),
            ingest_token=token.get_secret_value() if token else "",
        )
    except OSError as error:
        raise PitcrewError(f"http: cannot listen on {host}:{port}: {error.strerror}") from None


def _start_chat(chat: Chat, deliver: bool) -> None:
    """Start a chat that holds a connection (Slack); a standby's delivers nothing yet."""
    start = getattr(chat, "start", None)
    if callable(start) and hasattr(chat, "deliver"):
        start(deliver=deliver)
    elif callable(start):
        start()


def _lifecycle(chat: Chat, step: str) -> None:
    """`start` / `stop` for chats that hold a connection (Slack's Socket Mode)."""
    method = getattr(chat, step, None)
    if callable(method):
        method()


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


class TerminalFormatter(logging.Formatter):
    """Log lines safe for the terminal they are read on (`kubectl logs`): a log line
    quoted in a message keeps its words and loses its escape sequences and controls."""

    def format(self, record: logging.LogRecord) -> str:
        return for_terminal(super().format(record))


def setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalFormatter(LOG_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
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

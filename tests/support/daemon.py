"""What the daemon tests share: a hand-driven clock, a chat that records what it was
asked to do (around the real console chat), the seed's evidence as observations,
a pipeline + outbox over a real SQLite file, and the config and HTTP calls of an
in-process daemon (the `daemon` fixture of tests/conftest.py)."""

from __future__ import annotations

import functools
import io
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from bot.adapters.console.chat import ConsoleChat
from bot.adapters.files.playbooks import builtin_engine
from bot.adapters.store.store import Store
from bot.app import wiring
from bot.app.settings.actions import ActionSettings
from bot.app.settings.sections import Settings
from bot.core.actions import tuning
from bot.core.actions.reach import Reach
from bot.core.diagnosis.engine import Engine
from bot.core.incidents.assessment import adjusted, assessor
from bot.core.incidents.correlator import Correlator
from bot.core.incidents.grouping import CorrelationConfig
from bot.core.incidents.notify import NotifyConfig
from bot.core.inputs.reader import read_stream
from bot.core.model import ObjectRef, Report
from bot.daemon.budget import BudgetedClassifier
from bot.daemon.feed import Context, Observation, Tick, observe
from bot.daemon.outbox import Backoff, Outbox
from bot.daemon.pipeline import Pipeline, PipelineConfig, Workers
from bot.daemon.ports import Attempt, Chat, ChatUnavailableError

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "seed"
T0 = datetime(2026, 11, 3, 10, 0, tzinfo=UTC)
NS = "ml-train"
RAYCLUSTER = ObjectRef("RayCluster", "verl-ppo-qwen-raycluster-x7k2p", NS)


class Clock:
    """Time that moves only when told to."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def at(self, seconds: float) -> datetime:
        self.now = T0 + timedelta(seconds=seconds)
        return self.now


@functools.cache
def engine() -> Engine:
    """The built-in playbook library, compiled once per test session."""
    return builtin_engine([])


def seed(name: str, workload: ObjectRef | None = None) -> Observation:
    """One file of the seed case, as `POST /ingest` would queue it."""
    path = SEED / name
    parts = read_stream(io.BytesIO(path.read_bytes()), name)
    return observe(parts, Context(workload=workload))


DRIVER_LOG = "driver.log"
DESCRIBE = "worker-pod.describe.txt"
WORKLOAD = "ml-train/RayCluster/verl-ppo-qwen-raycluster-x7k2p"  # the seed's, as keyed


class StartDaemon(Protocol):
    """tests/conftest.py's `start_daemon`: a daemon built from `settings` and started,
    stopped at the test's teardown."""

    def __call__(
        self, settings: Settings, *, chat: Chat | None = None, engine: Engine | None = None
    ) -> wiring.Daemon: ...


def config(tmp_path: Path, **extra: str) -> Path:
    """A daemon config with everything in `tmp_path`, fast timings and the echo executor;
    each of `extra`'s values is appended as more top-level YAML."""
    text = f"""\
store: {{path: {tmp_path / "state.db"}}}
http: {{port: 0}}
chat: {{kind: console, console: {{width: 160}}}}
notify: {{group_wait: 0s, group_interval: 1s}}
approvals:
  approvers: [{{users: ["console:tester"]}}]
actions:
  executors: {{k8s.bump_memory: echo}}
  echo: {{record: {tmp_path / "echo.log"}}}
scheduler: {{tick: 200ms, approved: 200ms, outbox: 1s, expiry: 1s}}
"""
    path = tmp_path / "pitcrew.yaml"
    path.write_text(text + "".join(extra.values()))
    return path


def http(url: str, body: bytes | None = None) -> tuple[int, bytes]:
    """GET `url`, or POST `body` to it: the status and the body, whatever the status."""
    request = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@dataclass
class Recorded:
    kind: str  # post | update | reply | attach
    ref: str
    report: Report | None = None
    text: str = ""
    path: str = ""


@dataclass
class RecordingChat:
    """The console chat (writing to a StringIO), recording each call; `down` makes it
    raise ChatUnavailableError as a chat in an outage would."""

    out: io.StringIO = field(default_factory=io.StringIO)
    calls: list[Recorded] = field(default_factory=list)
    down: bool = False
    retry_after: float | None = None
    name: str = "recording"

    def __post_init__(self) -> None:
        self.console = ConsoleChat(self.out, width=160)
        self.lock = threading.Lock()

    def _check(self) -> None:
        if self.down:
            raise ChatUnavailableError("chat is down", retry_after=self.retry_after)

    def post(self, channel: str, report: Report) -> str:
        self._check()
        ref = self.console.post(channel, report)
        with self.lock:
            self.calls.append(Recorded("post", ref, report))
        return ref

    def update(self, ref: str, report: Report) -> None:
        self._check()
        self.console.update(ref, report)
        with self.lock:
            self.calls.append(Recorded("update", ref, report))

    def reply(self, ref: str, text: str, attempt: Attempt | None = None) -> None:
        self._check()
        self.console.reply(ref, text)
        with self.lock:
            self.calls.append(Recorded("reply", ref, text=text))

    def attach(self, ref: str, path: str, text: str, attempt: Attempt | None = None) -> None:
        self._check()
        self.console.attach(ref, path, text)
        with self.lock:
            self.calls.append(Recorded("attach", ref, text=text, path=path))

    def healthy(self) -> bool:
        return not self.down

    def kinds(self) -> list[str]:
        return [c.kind for c in self.calls]


@dataclass
class Rig:
    """A pipeline and an outbox over one store file, driven by hand."""

    store: Store
    pipeline: Pipeline
    outbox: Outbox
    chat: RecordingChat
    clock: Clock

    def feed(self, *observations: Observation) -> None:
        for observation in observations:
            self.pipeline.process(observation)
        self.outbox.deliver_due()

    def tick(self, until: float | None = None, step: float = 1.0) -> None:
        """Tick every `step` seconds (of the clock) until `until` seconds after T0."""
        if until is None:
            self.pipeline.process(Tick())
            self.outbox.deliver_due()
            return
        while self.clock.now < T0 + timedelta(seconds=until):
            self.clock.advance(step)
            self.pipeline.process(Tick())
            self.outbox.deliver_due()


def rig(
    path: Path,
    clock: Clock,
    chat: RecordingChat | None = None,
    notify: NotifyConfig | None = None,
    correlation: CorrelationConfig | None = None,
    workers: Callable[[Store], Workers] | None = None,
    reach: Reach | None = None,
) -> Rig:
    """The pipeline and the outbox on a store at `path`; `workers`: what the pipeline
    hands off, made from that store (none: nothing); `reach`: what this pitcrew can
    carry out (none: anything)."""
    store = Store(path)
    base = assessor(engine().library)
    values = ActionSettings().overrides()
    correlator = Correlator(adjusted(base, lambda d: tuning.tune(d, values)), correlation, reach)
    chat = chat or RecordingChat()
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(jitter=0.0))
    pipeline = Pipeline(
        BudgetedClassifier(engine()),
        correlator,
        store,
        clock,
        config=PipelineConfig(notify=notify or NotifyConfig()),
        workers=workers(store) if workers is not None else None,
    )
    pipeline.restore()
    return Rig(store, pipeline, outbox, chat, clock)

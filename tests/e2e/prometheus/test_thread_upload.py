"""The daemon's memory evidence end to end: the seed's OOM kill arrives, the pipeline asks
for its memory off the pipeline thread, a real Prometheus answers, and the card gets the
memory line, a bump sized from the group's peak, and the chart in its thread, uploaded
with `files.uploadV2` to the Slack emulator (the real `slack_sdk` client)."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

from PIL import Image

from bot.adapters.prometheus.local import LocalPrometheus
from bot.adapters.slack.chat import SlackChat
from bot.adapters.store.store import Store
from bot.app.memory_wiring import chart_writer, fetcher
from bot.app.settings.actions import ActionSettings
from bot.app.settings.sections import Settings
from bot.core.actions import tuning
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import Correlator
from bot.core.incidents.notify import NotifyConfig
from bot.core.model import ProposalState
from bot.daemon.budget import BudgetedClassifier
from bot.daemon.feed import Item, Measured, Tick
from bot.daemon.memory_worker import MemoryWorker
from bot.daemon.outbox import Backoff, Outbox
from bot.daemon.pipeline import Pipeline, PipelineConfig, Workers
from tests.e2e.slack.conftest import CHANNEL, slack_config
from tests.support.daemon import DESCRIBE, RAYCLUSTER, Clock, RecordingChat, engine, seed
from tests.support.slack_emulator import SlackEmulator

SIZED = (
    "16Gi → 20Gi (the killed pod's usage at the kill (at least its 16Gi limit) × 1.25 "
    "headroom, from Prometheus; a leak: more memory only moves the next kill later)"
)


class Answers:
    """The pipeline's queue as the memory worker sees it: answers, and which thread
    put them there."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.threads: list[str] = []
        self.arrived = threading.Event()

    def submit(self, item: Measured) -> bool:
        self.items.append(item)
        self.threads.append(threading.current_thread().name)
        self.arrived.set()
        return True


def settings(url: str, store: Path) -> Settings:
    return Settings.model_validate(
        {
            "store": {"path": str(store)},
            "sources": {"prometheus": {"url": url, "timeout": 2}},
            "notify": {"default_channel": CHANNEL, "group_wait": 0},
        }
    )


def test_the_chart_goes_into_the_cards_thread(prometheus: LocalPrometheus, tmp_path: Path) -> None:
    config = settings(prometheus.url, tmp_path / "pitcrew.db")
    fetch = fetcher(config)
    assert fetch is not None
    answers = Answers()
    worker = MemoryWorker(fetch, answers.submit, headroom=1.25, chart=chart_writer(tmp_path))
    clock = Clock()
    store = Store(tmp_path / "pitcrew.db")
    base = assessor(engine().library)
    values = ActionSettings().overrides()
    pipeline = Pipeline(
        BudgetedClassifier(engine()),
        Correlator(lambda f: tuning.tune(base(f), values)),
        store,
        clock,
        config=PipelineConfig(notify=config.notify),
        workers=Workers(memory=worker),
    )
    emulator = SlackEmulator().start()
    chat = SlackChat(slack_config(emulator))
    outbox = Outbox(store, chat, clock=clock, backoff=Backoff(jitter=0.0))
    try:
        started = time.monotonic()
        pipeline.process(seed(DESCRIBE, RAYCLUSTER))
        assert time.monotonic() - started < 0.5  # the fetch does not run on this thread
        outbox.deliver_due()
        assert emulator.parents() == []  # the card waits for the evidence that sizes it

        assert answers.arrived.wait(20), "no memory answer"
        (measured,) = answers.items
        assert answers.threads[0].startswith("pitcrew-memory")
        pipeline.process(measured)
        outbox.deliver_due()
        (card,) = emulator.parents()

        (shared,) = emulator.shared_files()
        assert (shared.channel, shared.thread_ts) == (CHANNEL, card.ts)
        assert Image.open(io.BytesIO(shared.data)).size == (1000, 500)
        assert shared.comment.startswith(
            "Memory of verl-ppo-qwen-raycluster-x7k2p-gpu-group-worker-9zq4f before the kill: "
            "peak 15.9Gi of 16Gi, rising 0.8Gi/min for 16 min before the kill (looks like a leak)"
        )
        offered = [
            p
            for p in store.proposals_for_incident(measured.incident_id)
            if p.state is ProposalState.OFFERED
        ]
        assert [p.preview.split(": ", 1)[1] for p in offered] == [SIZED]
        shown = str(emulator.parents()[0].blocks)
        assert "*Memory:* peak 15.9Gi of 16Gi, rising 0.8Gi/min" in shown
        assert "16Gi → 20Gi" in shown
    finally:
        worker.close()
        chat.stop()
        emulator.stop()
        store.close()


def test_after_a_restart_the_evidence_is_asked_again_and_the_chart_not_reposted(
    prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    config = settings(prometheus.url, tmp_path / "pitcrew.db")
    fetch = fetcher(config)
    assert fetch is not None
    clock = Clock()
    base = assessor(engine().library)
    values = ActionSettings().overrides()

    def start(answers: Answers) -> tuple[Pipeline, MemoryWorker, Store]:
        worker = MemoryWorker(fetch, answers.submit, headroom=1.25, chart=chart_writer(tmp_path))
        store = Store(tmp_path / "pitcrew.db")
        pipeline = Pipeline(
            BudgetedClassifier(engine()),
            Correlator(lambda f: tuning.tune(base(f), values)),
            store,
            clock,
            config=PipelineConfig(notify=config.notify),
            workers=Workers(memory=worker),
        )
        pipeline.restore()
        return pipeline, worker, store

    first = Answers()
    pipeline, worker, store = start(first)
    pipeline.process(seed(DESCRIBE, RAYCLUSTER))
    assert first.arrived.wait(20)
    pipeline.process(first.items[0])
    worker.close()
    store.close()

    again = Answers()
    pipeline, worker, store = start(again)
    try:
        assert again.arrived.wait(20), "the restored incident was not measured again"
        (measured,) = again.items
        pipeline.process(measured)
        incident = store.incident(measured.incident_id)
        assert incident is not None
        assert incident.memory.startswith("peak 15.9Gi of 16Gi, rising 0.8Gi/min")
        offered = [
            p
            for p in store.proposals_for_incident(measured.incident_id)
            if p.state is ProposalState.OFFERED
        ]
        assert [p.preview.split(": ", 1)[1] for p in offered] == [SIZED]
        clock.advance(NotifyConfig().group_interval.total_seconds() + 1)
        pipeline.process(Tick())
        chat = RecordingChat()
        Outbox(store, chat, clock=clock, backoff=Backoff(jitter=0.0)).deliver_due()
        assert chat.kinds().count("attach") == 1  # the first run's chart, not a second
        assert chat.kinds()[0] == "post"
    finally:
        worker.close()
        store.close()

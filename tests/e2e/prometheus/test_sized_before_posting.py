"""Sized before it is offered: with a Prometheus source, the card of an OOM kill waits
for the memory evidence (within the evidence's deadline, never past `group_wait` plus
it) before it is first posted, so the first card's bump is already sized from what the
group used; when Prometheus does not answer in time the card goes out at the deadline,
its bump sized by the factor, saying why. The pipeline thread never waits: the fetch
runs on the memory worker's thread and its answer comes back as an item."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.adapters.prometheus.local import LocalPrometheus
from bot.adapters.store.store import Store
from bot.app.memory_wiring import chart_writer, fetcher
from bot.app.settings.actions import ActionSettings
from bot.app.settings.sections import Settings
from bot.core.actions import tuning
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import Correlator
from bot.core.model import Report
from bot.daemon.budget import BudgetedClassifier
from bot.daemon.feed import Measured, Tick
from bot.daemon.memory_worker import MemoryWorker
from bot.daemon.outbox import Backoff, Outbox
from bot.daemon.pipeline import Pipeline, PipelineConfig, Workers
from tests.support.daemon import DESCRIBE, RAYCLUSTER, Clock, RecordingChat, engine, seed

PATH = (
    "RayCluster ml-train/verl-ppo-qwen-raycluster-x7k2p workerGroupSpecs[gpu-group]"
    ".containers[ray-worker].resources.limits.memory: "
)
SIZED = PATH + (
    "16Gi → 20Gi (the killed pod's usage at the kill (at least its 16Gi limit) × 1.25 "
    "headroom, from Prometheus; a leak: more memory only moves the next kill later)"
)
BY_FACTOR = PATH + ("16Gi → 24Gi (× 1.5: no memory metrics: Prometheus did not answer within 3 s)")


class Answers:
    """The pipeline's queue as the memory worker sees it."""

    def __init__(self) -> None:
        self.items: list[Measured] = []
        self.arrived = threading.Event()

    def submit(self, item: Measured) -> bool:
        self.items.append(item)
        self.arrived.set()
        return True


class Rig:
    def __init__(self, url: str, tmp_path: Path, timeout: float) -> None:
        config = Settings.model_validate(
            {
                "store": {"path": str(tmp_path / "pitcrew.db")},
                "sources": {"prometheus": {"url": url, "timeout": 1}},
                "notify": {"group_wait": 1},
            }
        )
        fetch = fetcher(config)
        assert fetch is not None
        self.answers = Answers()
        self.worker = MemoryWorker(
            fetch,
            self.answers.submit,
            headroom=1.25,
            chart=chart_writer(tmp_path),
            timeout=timeout,
        )
        self.clock = Clock()
        self.store = Store(tmp_path / "pitcrew.db")
        base = assessor(engine().library)
        values = ActionSettings().overrides()
        self.pipeline = Pipeline(
            BudgetedClassifier(engine()),
            Correlator(lambda f: tuning.tune(base(f), values)),
            self.store,
            self.clock,
            config=PipelineConfig(notify=config.notify),
            workers=Workers(memory=self.worker),
        )
        self.chat = RecordingChat()
        self.outbox = Outbox(self.store, self.chat, clock=self.clock, backoff=Backoff(jitter=0.0))

    def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.pipeline.process(Tick())
        self.outbox.deliver_due()

    def cards(self) -> list[Report]:
        return [c.report for c in self.chat.calls if c.kind == "post" and c.report is not None]

    def close(self) -> None:
        self.worker.close()
        self.store.close()


def bump_preview(report: Report) -> str:
    bumps = [a for a in report.actions if a.action == "k8s.bump_memory"]
    assert len(bumps) == 1, report.actions
    return bumps[0].preview


def test_the_first_card_offers_the_bump_sized_from_prometheus(
    prometheus: LocalPrometheus, tmp_path: Path
) -> None:
    rig = Rig(prometheus.url, tmp_path, timeout=20.0)
    try:
        started = time.monotonic()
        rig.pipeline.process(seed(DESCRIBE, RAYCLUSTER))
        assert time.monotonic() - started < 0.5  # the fetch does not run on this thread
        rig.tick(5)  # past group_wait: the card waits for the evidence
        assert rig.cards() == []

        assert rig.answers.arrived.wait(20), "no memory answer"
        rig.pipeline.process(rig.answers.items[0])
        rig.outbox.deliver_due()

        (card,) = rig.cards()
        assert bump_preview(card) == SIZED
        assert card.memory.startswith(
            "peak 15.9Gi of 16Gi, rising 0.8Gi/min for 16 min before the kill (looks like a leak)"
        )
        assert rig.chat.kinds()[0] == "post"
        assert rig.chat.kinds().count("attach") == 1  # the chart, in the first card's thread
        rig.tick(120)
        assert "update" not in rig.chat.kinds()  # the offer was right the first time
    finally:
        rig.close()


@pytest.fixture
def silent() -> Iterator[str]:
    """A loopback Prometheus URL that takes connections and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize(
    ("ticks", "posted"),
    [
        ((1.0, 1.0), False),  # group_wait passed, the evidence's deadline not yet
        ((1.0, 1.0, 1.0), True),  # the deadline (3 s after the ask) passed: out it goes
    ],
    ids=["held", "deadline"],
)
def test_a_silent_prometheus_holds_the_card_until_the_deadline_then_the_factor_says_why(
    silent: str, tmp_path: Path, ticks: tuple[float, ...], posted: bool
) -> None:
    rig = Rig(silent, tmp_path, timeout=3.0)
    try:
        rig.pipeline.process(seed(DESCRIBE, RAYCLUSTER))
        for seconds in ticks:
            rig.tick(seconds)
        if not posted:
            assert rig.cards() == []
            return
        (card,) = rig.cards()
        assert bump_preview(card) == BY_FACTOR
        assert card.memory == "no memory metrics: Prometheus did not answer within 3 s"

        assert rig.answers.arrived.wait(20), "no late answer"  # the worker's own deadline
        (late,) = rig.answers.items
        assert late.evidence is None
        rig.pipeline.process(late)
        rig.tick(120)
        assert rig.chat.kinds().count("update") == 0  # the card keeps its reason
    finally:
        rig.close()

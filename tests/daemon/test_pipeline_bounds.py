"""The pipeline's queue is bounded in bytes as well as items, and one item that takes
too long makes the pipeline unhealthy (so `/healthz` says so) until it is done."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from bot.adapters.files.playbooks import load_library
from bot.adapters.store.store import Store
from bot.core.diagnosis.engine import Engine
from bot.core.incidents.assessment import assessor
from bot.core.incidents.correlator import Correlator
from bot.core.inputs import LogText
from bot.daemon.budget import BudgetedClassifier
from bot.daemon.feed import Observation, observe
from bot.daemon.pipeline import Pipeline
from bot.daemon.taking import QueueLimits, Taking
from tests.support.playbooks import playbook, write_library

SLOW = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}x"


def pipeline(tmp_path: Path, engine: Engine) -> Pipeline:
    return Pipeline(
        BudgetedClassifier(engine),
        Correlator(assessor(engine.library)),
        Store(tmp_path / "state.db"),
        lambda: datetime.now(UTC),
    )


def log_of(size: int) -> Observation:
    return observe([LogText([b"x" * (size - 1) + b"\n"], origin="flood.log")])


def test_the_queue_refuses_text_beyond_its_byte_bound() -> None:
    flooded = Taking(QueueLimits(text_bytes=3 << 20))
    accepted = [flooded.submit(log_of(1 << 20), timeout=0.01) for _ in range(5)]
    assert accepted == [True, True, True, False, False]
    assert flooded.pending() == 3


def test_an_item_over_the_busy_limit_makes_the_pipeline_unhealthy(tmp_path: Path) -> None:
    slow = playbook(
        "slow", "application_error", [{"name": "s", "regex": "BadThing"}], diagnosis=SLOW
    )
    engine = Engine(load_library([write_library(tmp_path / "pb", slow)]))
    running = Taking(QueueLimits(busy_limit=0.1))
    running.start(pipeline(tmp_path, engine))
    try:
        assert running.alive()
        assert running.submit(observe([LogText([b"BadThing happened\n"])]))
        deadline = time.monotonic() + 5
        while running.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not running.alive()  # a render is running into its 0.5 s budget
        while not running.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert running.alive()  # done: healthy again
    finally:
        assert running.stop(5)

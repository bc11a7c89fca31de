"""Ray's own memory monitor kills for real (a second head started with a 1 % threshold):
the source's signals carry its text, and the diagnosis is ray_memory_monitor_oom, never
a container OOMKilled."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.ray.bookmarks import MemoryBookmarks
from bot.adapters.ray.client import TERMINAL, RayClusterConfig, RayDashboard
from bot.adapters.ray.local import LocalRayHead
from bot.adapters.ray.source import RaySource, RaySourceOptions
from bot.core.diagnosis.engine import Engine
from bot.core.model import Signal, SourceKind

pytestmark = pytest.mark.ray

TRAINER = """
import time
import ray
ray.init()

@ray.remote(num_cpus=0)
class Trainer:
    def step(self):
        time.sleep(5)
        return "done"

print(ray.get(Trainer.remote().step.remote()))
"""


@pytest.fixture(scope="module")
def low_memory_head() -> Iterator[LocalRayHead]:
    head = LocalRayHead(
        num_cpus=1,
        env={"RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "100"},
    )
    head.start()
    try:
        yield head
    finally:
        assert head.stop() == []


@pytest.mark.slow
def test_memory_monitor_kill_is_recognised(
    low_memory_head: LocalRayHead, engine: Engine, tmp_path: Path
) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    client = RayDashboard(low_memory_head.url)
    source = RaySource(
        [RayClusterConfig("small", low_memory_head.url)],
        MemoryBookmarks(),
        RaySourceOptions(initial_lookback=timedelta(minutes=5)),
    )
    submission = client.submit_job(f"python {script}", entrypoint_num_cpus=0)
    deadline = time.monotonic() + 60
    while (client.get_job(submission) or {}).get("status") not in TERMINAL:
        assert time.monotonic() < deadline
        time.sleep(0.2)

    batches = source.poll_batches(datetime.now(UTC))
    assert len(batches) == 1
    parts = batches[0].parts
    job = parts[0]
    assert isinstance(job, Signal)
    assert job.reason == "FAILED"
    assert "killed due to the node running low on memory" in job.text
    deaths = [p for p in parts if isinstance(p, Signal) and p.source is SourceKind.RAY_ACTOR]
    assert [d.reason for d in deaths] == ["OUT_OF_MEMORY"]

    diagnosis = engine.diagnose(parts)
    assert diagnosis.primary is not None
    assert diagnosis.primary.category == "ray_memory_monitor_oom"
    assert "pod_oom_killed" not in {str(r.finding.category) for r in diagnosis.findings}
    client.close()

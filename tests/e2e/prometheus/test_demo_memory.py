"""The demo's seed scenario, memory step: a throwaway Prometheus with the seed pods'
series, the memory line, a sparkline, the sized bump and the chart file, all said on
screen; the Prometheus stopped afterwards."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from PIL import Image
from rich.console import Console

from bot.app.demo import memory_step
from bot.app.demo.screen import Screen
from bot.core.model import Incident
from tests.e2e.prometheus.test_bump_sizing import seed_diagnosis
from tests.support.memory_series import SEED_CLUSTER

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def test_the_seed_step_shows_the_memory_line_and_a_chart() -> None:
    incident = Incident("i-1", "k", NOW, NOW, seed_diagnosis(), namespace="ml-train")
    out = io.StringIO()
    shown = memory_step.show(Screen(Console(file=out, width=250)), incident, SEED_CLUSTER)
    text = " ".join(out.getvalue().split())
    assert shown, text
    assert (
        "memory: peak 15.9Gi of 16Gi, rising 0.8Gi/min for 16 min before the kill (looks like a "
        "leak); the other pod of gpu-group peaked at 11.2Gi"
    ) in text
    assert "the bump this evidence supports: RayCluster ml-train/" in text
    assert "16Gi → 20Gi (the killed pod's usage at the kill" in text
    assert f"chart (usage vs limit, the killed pod and its group): {memory_step.CHART}" in text
    assert Image.open(memory_step.CHART).size == (1000, 500)

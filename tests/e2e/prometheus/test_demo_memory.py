"""The demo's seed scenario, memory evidence: the throwaway Prometheus the demo starts
before the daemon holds the seed pods' series at the seed's kill, so the bump sized from
it is 20Gi with the memory line the card shows; it is said on screen and stopped by pid."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from bot.adapters.ray.local import is_running
from bot.app.demo import memory_step
from bot.app.demo.screen import Screen
from bot.app.memory_wiring import measure
from tests.e2e.prometheus.test_bump_sizing import seed_diagnosis

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def test_the_demos_prometheus_sizes_the_seed_bump_to_20gi() -> None:
    out = io.StringIO()
    server = memory_step.serve(Screen(Console(file=out, width=250)))
    assert server is not None
    pid = server.pid
    try:
        measured = measure(seed_diagnosis(), server.url, NOW)
    finally:
        server.stop()
    assert not is_running(pid)
    text = " ".join(out.getvalue().split())
    assert f"Prometheus at {server.url} (pid {pid}): pitcrew's memory source" in text
    assert measured is not None
    assert measured.line == (
        "peak 15.9Gi of 16Gi, rising 0.8Gi/min for 16 min before the kill (looks like a "
        "leak); the other pod of gpu-group peaked at 11.2Gi. At the 16Gi limit before the "
        "kill: the kernel's OOM kill"
    )
    (bump,) = [a for a in measured.diagnosis.actions if a.action == "k8s.bump_memory"]
    assert "16Gi → 20Gi (the killed pod's usage at the kill" in bump.preview

"""The seed scenario's memory step: what Prometheus says about the OOMKilled worker.

Why this exists: the seed's card says "OOMKilled at 16Gi, bump to 24Gi"; this step shows
the next answer pitcrew gives when the cluster runs Prometheus: whether the pod leaked or
spiked, how much its group used, the bump that evidence supports, and the chart. It
starts a throwaway Prometheus on loopback (Debian's package) holding the seed pods'
series (a leak in the killed worker, the other worker flat at 11Gi), reads it the way
`pitcrew diagnose --kube … --prometheus URL --chart FILE` does, and stops it by pid.
Without `prometheus` installed it says plainly that it skips the step.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from bot.adapters.prometheus.local import (
    LocalPrometheus,
    installed,
    memory_lines,
    openmetrics,
)
from bot.app.demo import seed as seed_case
from bot.app.demo.screen import Screen
from bot.app.memory_wiring import measure, render
from bot.core.memory_evidence import GI, PodSeries, Sample, target_of
from bot.core.model import Incident

CHART = Path(tempfile.gettempdir()) / "pitcrew-demo-memory.png"
STEP = timedelta(seconds=10)


def _series(shape: Callable[[float], float], end: datetime) -> tuple[Sample, ...]:
    count = int(timedelta(minutes=30) / STEP)
    return tuple(
        Sample(end - STEP * (count - i), round(shape((count - i) * STEP.total_seconds()) * GI))
        for i in range(count + 1)
    )


def _leak(before: float) -> float:
    return 15.9 - 0.8 * before / 60 if before <= 17 * 60 else 2.3


def exposition(cluster: str, killed_at: datetime) -> str:
    """The seed pods' working sets over the 30 minutes before the kill."""
    pods = [
        PodSeries(f"{cluster}-gpu-group-worker-9zq4f", "ray-worker", _series(_leak, killed_at)),
        PodSeries(
            f"{cluster}-gpu-group-worker-2mdkq", "ray-worker", _series(lambda _: 11.2, killed_at)
        ),
    ]
    limited = [PodSeries(p.pod, p.container, p.samples, 16 * GI) for p in pods]
    return openmetrics(memory_lines(seed_case.NS, limited, "gpu-group", cluster))


def show(screen: Screen, incident: Incident, cluster: str) -> bool:
    """The memory line, a sparkline, the sized bump and the chart; False if skipped."""
    if not installed():
        screen.say(
            "memory evidence: skipped, prometheus is not installed here "
            "(`make prometheus` installs Debian's package)"
        )
        return False
    target = target_of(incident)
    if target is None:
        screen.problem("memory evidence: no finding names the killed pod")
        return False
    with screen.step("Starting a throwaway Prometheus on 127.0.0.1 with the seed pods' memory"):
        server = LocalPrometheus(exposition(cluster, target.killed_at))
        server.start()
    try:
        measured = measure(incident.diagnosis, server.url, incident.opened_at)
    finally:
        server.stop()
    if measured is None:
        return False
    screen.done(f"memory: {measured.line}")
    if measured.spark:
        screen.say(f"  {measured.spark}")
    bump = next((a for a in measured.diagnosis.actions if a.action == "k8s.bump_memory"), None)
    if bump is not None:
        screen.say(f"  the bump this evidence supports: {bump.preview}")
    if measured.evidence is not None and measured.evidence.killed.samples:
        CHART.write_bytes(render(measured.evidence))
        screen.say(f"  chart (usage vs limit, the killed pod and its group): {CHART}")
    return True

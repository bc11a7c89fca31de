"""The seed scenario's memory evidence: what Prometheus says about the OOMKilled worker.

Why this exists: with a Prometheus source, pitcrew sizes the seed's memory bump from what
the worker group used before it posts the card (16Gi → 20Gi, not the factor's 24Gi).
This starts a throwaway Prometheus on loopback (Debian's package) holding the seed pods'
series (a leak in the killed worker, the other worker flat at 11.2Gi) before the daemon,
so the daemon's `sources.prometheus` points at it; once the card is out, the demo shows
the memory line and the sized offer the card carries, and the chart from its thread,
before anything is approved. The Prometheus is stopped by pid with the rest. Without
`prometheus` installed it says plainly that the bump is sized by the factor.
"""

from __future__ import annotations

import shutil
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
from bot.app.demo.screen import Card, DemoChat, Screen
from bot.core.actions.memory_evidence import GI, PodSeries, Sample
from bot.core.model import Incident

CHART = Path(tempfile.gettempdir()) / "pitcrew-demo-memory.png"
STEP = timedelta(seconds=10)
CHART_TIMEOUT = 30.0


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


def serve(screen: Screen) -> LocalPrometheus | None:
    """The seed pods' memory in a throwaway Prometheus on 127.0.0.1; None without one."""
    if not installed():
        screen.say(
            "memory evidence: skipped, prometheus is not installed here (`make prometheus` "
            "installs Debian's package); the seed's bump is sized by the factor"
        )
        return None
    cluster = str(seed_case.seed_objects()["cluster"]["metadata"]["name"])
    with screen.step("Starting a throwaway Prometheus on 127.0.0.1 with the seed pods' memory"):
        server = LocalPrometheus(exposition(cluster, seed_case.OOM_KILLED_AT))
        server.start()
    screen.done(f"Prometheus at {server.url} (pid {server.pid}): pitcrew's memory source")
    return server


def show(screen: Screen, chat: DemoChat, card: Card, incident: Incident, offered: str) -> None:
    """The memory evidence the card was posted with, the offer sized from it, and the
    chart from the card's thread (copied to CHART, which outlives the demo)."""
    screen.done(f"memory (from Prometheus, before the card was posted): {incident.memory}")
    screen.say(f"  the bump offered, sized from it: {offered}")
    try:
        path, text = chat.wait_for_file(card.ref, "Memory of", CHART_TIMEOUT)
    except TimeoutError:
        screen.problem("memory chart: none in the card's thread")
        return
    spark = text.splitlines()[-1] if "\n" in text else ""
    if spark:
        screen.say(f"  {spark}")
    shutil.copyfile(path, CHART)
    screen.say(f"  chart (usage vs limit, the killed pod and its group): {CHART}")

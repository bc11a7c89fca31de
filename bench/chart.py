"""How long the memory chart of an OOM kill takes to render (target: under 0.5 s).

    .venv/bin/python bench/chart.py

Renders the PNG of a 30-minute leak (a sample every 10 s) against its limit, with three
other pods of the group, several times, and prints the first (cold: fonts, matplotlib's
caches) and the median of the rest.
"""

from __future__ import annotations

import statistics
import time
from datetime import UTC, datetime, timedelta

from bot.adapters.charts.memory_chart import memory_chart
from bot.core.actions.memory_evidence import GI, MemoryEvidence, PodSeries, Sample

END = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
RUNS = 10


def _series(name: str, level: float, slope: float) -> PodSeries:
    samples = tuple(
        Sample(END - timedelta(seconds=10 * i), int((level + slope * (180 - i) / 6) * GI))
        for i in range(180, -1, -1)
    )
    return PodSeries(name, "ray-worker", samples, 16 * GI)


def main() -> None:
    evidence = MemoryEvidence(
        _series("worker-0", 2.0, 0.45),
        END,
        tuple(_series(f"worker-{i}", 6.0 + i, 0.0) for i in range(1, 4)),
        "gpu-group",
    )
    times: list[float] = []
    size = 0
    for _ in range(RUNS):
        started = time.perf_counter()
        size = len(memory_chart(evidence))
        times.append(time.perf_counter() - started)
    print(f"memory chart: {size} bytes PNG, 1000x500 px")
    print(f"first render (cold): {times[0] * 1000:.0f} ms")
    print(f"median of the next {RUNS - 1}: {statistics.median(times[1:]) * 1000:.0f} ms")


if __name__ == "__main__":
    main()

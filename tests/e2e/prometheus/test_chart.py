"""The memory chart posted in the card's thread: a PNG of the killed pod's working set
against its limit, with its group's other pods, read back from a real Prometheus."""

from __future__ import annotations

import io

from PIL import Image

from bot.adapters.charts.memory_chart import HEIGHT, LIMIT_COLOR, USAGE_COLOR, WIDTH, memory_chart
from bot.adapters.prometheus.client import PrometheusClient, PrometheusConfig
from bot.adapters.prometheus.local import LocalPrometheus
from bot.adapters.prometheus.working_set import fetch_memory
from bot.core.actions.memory_evidence import MemoryTarget, sparkline
from tests.support.memory_series import SEED_CLUSTER, SEED_KILLED_AT, SEED_NS, SEED_POD

TARGET = MemoryTarget(SEED_NS, SEED_POD, SEED_KILLED_AT, "ray-worker", "gpu-group", SEED_CLUSTER)


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def _where(image: Image.Image, color: str) -> list[tuple[int, int]]:
    """(x, y) of the pixels drawn exactly in `color` (antialiased edges left out)."""
    data, wanted = image.convert("RGB").tobytes(), bytes(_rgb(color))
    width = image.size[0]
    return [
        divmod(i // 3, width)[::-1] for i in range(0, len(data), 3) if data[i : i + 3] == wanted
    ]


def _pixels_of(image: Image.Image, color: str) -> int:
    return len(_where(image, color))


def test_the_chart_is_a_png_showing_usage_and_limit(prometheus: LocalPrometheus) -> None:
    evidence = fetch_memory(PrometheusClient(PrometheusConfig(prometheus.url)), TARGET)
    png = memory_chart(evidence)
    image = Image.open(io.BytesIO(png))
    assert (image.format, image.size) == ("PNG", (WIDTH, HEIGHT)) == ("PNG", (1000, 500))
    # Two lines: the working set (red), rising across the plot, and the limit (blue,
    # dashed), level; the legend's samples of each are a few pixels more.
    usage, limit = _where(image, USAGE_COLOR), _where(image, LIMIT_COLOR)
    assert len(usage) > 1000
    assert len(limit) > 400
    assert max(y for _, y in usage) - min(y for _, y in usage) > 200  # from 2Gi to 16Gi
    rows = sorted({y for x, y in limit if x > 300})  # right of the legend
    assert rows[-1] - rows[0] <= 3, rows  # one horizontal line
    assert max(x for x, _ in limit) - min(x for x, _ in limit) > 700  # across the window


def test_without_a_limit_only_the_usage_line_is_drawn(prometheus: LocalPrometheus) -> None:
    evidence = fetch_memory(
        PrometheusClient(PrometheusConfig(prometheus.url)),
        MemoryTarget("ml-spike", "spiky-worker-0", SEED_KILLED_AT),
    )
    unlimited = type(evidence.killed)(
        evidence.killed.pod, evidence.killed.container, evidence.killed.samples, None
    )
    image = Image.open(io.BytesIO(memory_chart(type(evidence)(unlimited, evidence.killed_at))))
    assert _pixels_of(image, USAGE_COLOR) > 1000
    assert _pixels_of(image, LIMIT_COLOR) == 0


def test_the_console_sparkline_rises_to_the_limit(prometheus: LocalPrometheus) -> None:
    evidence = fetch_memory(PrometheusClient(PrometheusConfig(prometheus.url)), TARGET)
    line = sparkline(evidence.killed, width=24)
    assert len(line) == 24
    assert line.startswith("▂▂▂▂▂▂▂▂▂▂▂▂")  # flat at 2.3Gi of 16Gi
    assert line[-1] == "█"

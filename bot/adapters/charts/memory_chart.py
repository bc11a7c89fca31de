"""The memory chart of an OOM kill: the killed pod's working set against its limit, and
the other pods of its worker group, up to the kill.

Why this exists: the card's one memory line says leak or spike; the chart in its thread
lets an engineer see it (and the group's pods beside it) without opening Grafana. It is
rendered with matplotlib's Agg backend to PNG bytes, off any chat or pipeline thread.
"""

from __future__ import annotations

import io
import threading
from datetime import datetime

import matplotlib

matplotlib.use("Agg")

from matplotlib.dates import DateFormatter, date2num
from matplotlib.figure import Figure

from bot.core.actions.memory_evidence import GI, MemoryEvidence, PodSeries

WIDTH, HEIGHT, DPI = 1000, 500, 100  # pixels of the PNG
USAGE_COLOR = "#d62728"  # the killed pod's working set
LIMIT_COLOR = "#1f77b4"  # its memory limit
GROUP_COLOR = "#b0b0b0"  # the group's other pods
_LOCK = threading.Lock()  # matplotlib's font cache and text layout are not thread-safe


def _times(pod: PodSeries) -> list[float]:
    return [_num(s.at) for s in pod.samples]


def _num(at: datetime) -> float:
    return float(date2num(at))  # type: ignore[no-untyped-call]


def _gib(pod: PodSeries) -> list[float]:
    return [s.used / GI for s in pod.samples]


def memory_chart(evidence: MemoryEvidence, title: str = "") -> bytes:
    """PNG of usage vs limit for the killed pod, its group's pods in grey."""
    with _LOCK:
        figure = Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI)
        axes = figure.add_subplot()
        killed = evidence.killed
        for other in evidence.group:
            axes.plot(_times(other), _gib(other), color=GROUP_COLOR, linewidth=1)
        if evidence.group:
            axes.plot([], [], color=GROUP_COLOR, label=f"other pods of {evidence.group_name}")
        axes.plot(_times(killed), _gib(killed), color=USAGE_COLOR, linewidth=2.5, label=killed.pod)
        if killed.limit and killed.samples:
            start, end = killed.samples[0].at, max(killed.samples[-1].at, evidence.killed_at)
            limit = killed.limit / GI
            axes.plot(
                [_num(start), _num(end)],
                [limit, limit],
                color=LIMIT_COLOR,
                linewidth=2,
                linestyle="--",
            )
            axes.plot([], [], color=LIMIT_COLOR, linestyle="--", label=f"limit {limit:g}Gi")
        axes.axvline(_num(evidence.killed_at), color="black", linewidth=1, linestyle=":")
        axes.set_ylabel("working set (GiB)")
        top = max(killed.peak, killed.limit or 0, *(p.peak for p in evidence.group)) / GI
        axes.set_ylim(0, max(top, 1.0) * 1.25)  # room for the legend above the limit
        axes.xaxis.set_major_formatter(DateFormatter("%H:%M"))  # type: ignore[no-untyped-call]
        axes.grid(True, alpha=0.3)
        axes.legend(loc="upper left", fontsize="small")
        axes.set_title(title or f"{killed.pod}: memory before the kill", fontsize="medium")
        figure.subplots_adjust(
            left=0.07, right=0.98, top=0.93, bottom=0.09
        )  # not tight_layout: half the time
        out = io.BytesIO()
        figure.savefig(out, format="png", dpi=DPI)
        return out.getvalue()

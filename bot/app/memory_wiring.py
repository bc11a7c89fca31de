"""Memory evidence wired from the settings: Prometheus for the series, a PNG chart file.

Why this exists: `sources.prometheus` turns on memory evidence for memory incidents
(the daemon's `bot.daemon.memory_worker.MemoryWorker`) and for `pitcrew diagnose --kube`.
This builds the fetch (the Prometheus adapter with the configured URL, headers and one
timeout per fetch) and the chart writer (matplotlib, imported only when a chart is
drawn), so the daemon knows neither adapter; and `measure`, the same evidence for
`pitcrew diagnose --kube … --prometheus URL [--chart FILE]`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bot.app.settings.sections import Settings
from bot.core.actions import memory_evidence, tuning
from bot.core.actions.memory_evidence import MemoryEvidence, MemoryTarget
from bot.core.errors import PitcrewError
from bot.core.model import Diagnosis
from bot.daemon.feed import Measured
from bot.daemon.memory_worker import Chart, Fetch, MemoryWorker


def fetcher(settings: Settings) -> Fetch | None:
    """`target -> MemoryEvidence` from the configured Prometheus; None when none is."""
    prometheus = settings.sources.prometheus
    if not prometheus.url:
        return None
    from bot.adapters.prometheus.client import PrometheusClient, PrometheusConfig
    from bot.adapters.prometheus.working_set import fetch_memory

    client = PrometheusClient(
        PrometheusConfig(
            url=prometheus.url,
            timeout=prometheus.timeout.total_seconds(),
            headers=dict(prometheus.headers),
            window=prometheus.window,
            step=prometheus.step,
        )
    )

    def fetch(target: MemoryTarget) -> MemoryEvidence:
        return fetch_memory(client, target)

    return fetch


def render(evidence: MemoryEvidence) -> bytes:
    """The memory chart as PNG bytes."""
    from bot.adapters.charts.memory_chart import memory_chart

    return memory_chart(evidence)


def chart_writer(directory: Path) -> Chart:
    """Charts saved as `memory-<incident>.png` in `directory` (beside the store)."""

    def write(incident_id: str, evidence: MemoryEvidence) -> str:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"memory-{incident_id}.png"
        path.write_bytes(render(evidence))
        return str(path)

    return write


def charts_dir(settings: Settings) -> Path:
    """Where the daemon keeps memory charts: `charts/` beside the store."""
    return settings.store.path.expanduser().resolve().parent / "charts"


def prune_charts(directory: Path, older_than: datetime) -> int:
    """Delete the chart files last written before `older_than` (their cards' threads
    have them, or their incidents are past the retention); returns how many."""
    cutoff = older_than.timestamp()
    removed = 0
    for path in directory.glob("memory-*.png"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed


def memory_worker(settings: Settings, submit: Callable[[Measured], bool]) -> MemoryWorker | None:
    fetch = fetcher(settings)
    if fetch is None:
        return None
    return MemoryWorker(
        fetch,
        submit,
        headroom=settings.actions.bump_memory.headroom,
        chart=chart_writer(charts_dir(settings)),
    )


@dataclass(frozen=True)
class Measurement:
    """What `pitcrew diagnose --kube … --prometheus URL` adds: the memory line, a
    sparkline, the bump sized from the evidence, and the evidence for a chart."""

    diagnosis: Diagnosis
    line: str
    spark: str = ""
    evidence: MemoryEvidence | None = None


def measure(
    diagnosis: Diagnosis, url: str, seen_at: datetime, timeout: float = 5.0, headroom: float = 1.25
) -> Measurement | None:
    """The memory evidence of a live diagnosis from the Prometheus at `url`; None when no
    finding names a killed pod. A Prometheus that does not answer is said in the line,
    and the factor applies."""
    from bot.adapters.prometheus.client import PrometheusClient, PrometheusConfig
    from bot.adapters.prometheus.working_set import fetch_memory

    client = PrometheusClient(PrometheusConfig(url, timeout=timeout))
    try:
        return measured_by(
            lambda target: fetch_memory(client, target), diagnosis, seen_at, headroom
        )
    finally:
        client.close()


def measured_by(
    fetch: Fetch, diagnosis: Diagnosis, seen_at: datetime, headroom: float = 1.25
) -> Measurement | None:
    """The memory evidence `fetch` finds for a live diagnosis (see `measure`)."""
    target = memory_evidence.target_in(diagnosis, seen_at)
    if target is None:
        return None
    try:
        evidence = fetch(target)
    except PitcrewError as error:
        problem = f"no memory metrics: {error}"
        return Measurement(tuning.sized(diagnosis, None, headroom, problem), problem)
    found = memory_evidence.verdict(evidence)
    sized = tuning.sized(diagnosis, evidence, headroom, found.line)
    limit = f" (limit {memory_evidence.gib(found.limit)})" if found.limit else ""
    spark = memory_evidence.sparkline(evidence.killed) + limit if evidence.killed.samples else ""
    return Measurement(sized, memory_evidence.explain(evidence, diagnosis), spark, evidence)

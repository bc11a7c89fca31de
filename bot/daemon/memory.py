"""Memory evidence for memory incidents, fetched off the pipeline thread.

Why this exists: an OOM kill's card should say whether the pod leaked or spiked and
size the bump from what its group used, but the metrics live in Prometheus, and the
pipeline thread must never wait on the network. The pipeline asks (`ask`, which only
queues the work); a small pool fetches the series with the adapter's bounded timeout,
renders the chart, and puts a `Measured` item back on the pipeline's queue. The next
decision about the incident uses it (`annotate`): the memory line on the card, the bump
sized from the group's peak, and the chart for the card's thread. An unreachable
Prometheus costs one timeout on a pool thread, never the card.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from bot.core import memory
from bot.core.actions import tuning
from bot.core.memory import MemoryEvidence, MemoryTarget
from bot.core.model import Incident
from bot.daemon.feed import Measured

log = logging.getLogger("pitcrew.memory")

Fetch = Callable[[MemoryTarget], MemoryEvidence]
Chart = Callable[[str, MemoryEvidence], str]
"""(incident id, evidence) -> the path of a PNG chart of it, or "" when none was drawn."""


def _no_chart(incident_id: str, evidence: MemoryEvidence) -> str:
    return ""


class MemoryWorker:
    """Fetches memory evidence for incidents on its own threads, once per incident."""

    def __init__(
        self,
        fetch: Fetch,
        submit: Callable[[Measured], bool],
        *,
        headroom: float,
        chart: Chart = _no_chart,
        workers: int = 2,
    ) -> None:
        self._fetch = fetch
        self._submit = submit  # onto the pipeline's queue
        self._chart = chart
        self.headroom = headroom
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="pitcrew-memory")
        self._asked: set[str] = set()
        self._lock = threading.Lock()

    def ask(self, incident: Incident) -> bool:
        """Queue a fetch for a memory incident not asked about before; returns at once."""
        target = memory.target_of(incident)
        with self._lock:
            if target is None or incident.id in self._asked:
                return False
            self._asked.add(incident.id)
        self._pool.submit(self._run, incident.id, target)
        return True

    def close(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def _run(self, incident_id: str, target: MemoryTarget) -> None:
        try:
            evidence = self._fetch(target)
        except Exception as error:  # a pool thread: the answer says why, the card stays
            log.warning("no memory evidence for incident %s: %s", incident_id, error)
            self._submit(Measured(incident_id, None, f"no memory metrics: {error}"))
            return
        chart = ""
        if evidence.killed.samples:
            try:
                chart = self._chart(incident_id, evidence)
            except Exception as error:
                log.warning("no memory chart for incident %s: %s", incident_id, error)
        self._submit(Measured(incident_id, evidence, "", chart))

    def annotate(self, incident: Incident, measured: Measured) -> Incident:
        """The incident with its memory line and its bump sized from the evidence."""
        evidence = measured.evidence
        if evidence is None:
            line = unmeasured = measured.problem
        else:
            line = memory.explain(evidence, incident.diagnosis)
            unmeasured = memory.verdict(evidence).line
        diagnosis = tuning.sized(incident.diagnosis, evidence, self.headroom, unmeasured)
        if diagnosis is incident.diagnosis and incident.memory == line:
            return incident
        return dataclasses.replace(incident, diagnosis=diagnosis, memory=line)


def thread_text(measured: Measured) -> str:
    """The chart's comment in the card's thread: the verdict and a sparkline."""
    evidence = measured.evidence
    if evidence is None:
        return measured.problem
    found = memory.verdict(evidence)
    spark = memory.sparkline(evidence.killed)
    limit = f" (limit {memory.gib(found.limit)})" if found.limit else ""
    return f"Memory of {evidence.killed.pod} before the kill: {found.line}\n{spark}{limit}"

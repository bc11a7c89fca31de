"""Memory evidence for memory incidents, fetched off the pipeline thread.

Why this exists: an OOM kill's card should say whether the pod leaked or spiked and
size the bump from what its group used, but the metrics live in Prometheus, and the
pipeline thread must never wait on the network. The pipeline asks (`ask`, which only
queues the work); a thread of its own (`OffThread`) fetches the series with the
adapter's bounded timeout, renders the chart, and puts a `Measured` item back on the
pipeline's queue (past `timeout`, one that says the metrics did not answer). The next
decision about the incident uses it (`annotate`): the memory line on the card, the bump
sized from the group's peak, and the chart for the card's thread. An unreachable
Prometheus costs one timeout on a pool thread, never the card.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

from bot.core.actions import memory_evidence, tuning
from bot.core.actions.memory_evidence import MemoryEvidence, MemoryTarget
from bot.core.model import Incident
from bot.daemon.feed import Measured
from bot.daemon.offthread import OffThread

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
        timeout: float = 60.0,
    ) -> None:
        """`submit` puts an item on the pipeline's queue; `timeout` bounds a fetch and
        its chart together (the fetch has its own, shorter, bound in the adapter)."""
        self._fetch = fetch
        self._chart = chart
        self.headroom = headroom
        self.timeout = timeout
        self._work = OffThread(submit, name="pitcrew-memory", workers=workers)
        self._asked: set[str] = set()
        self._lock = threading.Lock()

    def ask(self, incident: Incident) -> bool:
        """Queue a fetch for a memory incident not asked about before; returns at once."""
        target = memory_evidence.target_of(incident)
        with self._lock:
            if target is None or incident.id in self._asked:
                return False
            self._asked.add(incident.id)

        def late(why: str) -> Measured:
            return Measured(incident.id, None, f"no memory metrics: the fetch {why}")

        what = f"the memory evidence of {incident.id}"
        return self._work.run(lambda: self._run(incident.id, target), late, self.timeout, what)

    def close(self, wait: bool = True) -> None:
        self._work.close(wait=wait)

    def _run(self, incident_id: str, target: MemoryTarget) -> Measured:
        try:
            evidence = self._fetch(target)
        except Exception as error:  # off the pipeline: the answer says why, the card stays
            log.warning("no memory evidence for incident %s: %s", incident_id, error)
            return Measured(incident_id, None, f"no memory metrics: {error}")
        chart = ""
        if evidence.killed.samples:
            try:
                chart = self._chart(incident_id, evidence)
            except Exception as error:
                log.warning("no memory chart for incident %s: %s", incident_id, error)
        return Measured(incident_id, evidence, "", chart)

    def annotate(self, incident: Incident, measured: Measured) -> Incident:
        """The incident with its memory line and its bump sized from the evidence."""
        evidence = measured.evidence
        if evidence is None:
            line = unmeasured = measured.problem
        else:
            line = memory_evidence.explain(evidence, incident.diagnosis)
            unmeasured = memory_evidence.verdict(evidence).line
        diagnosis = tuning.sized(incident.diagnosis, evidence, self.headroom, unmeasured)
        if diagnosis is incident.diagnosis and incident.memory == line:
            return incident
        return dataclasses.replace(incident, diagnosis=diagnosis, memory=line)


def thread_text(measured: Measured) -> str:
    """The chart's comment in the card's thread: the verdict and a sparkline."""
    evidence = measured.evidence
    if evidence is None:
        return measured.problem
    found = memory_evidence.verdict(evidence)
    spark = memory_evidence.sparkline(evidence.killed)
    limit = f" (limit {memory_evidence.gib(found.limit)})" if found.limit else ""
    return f"Memory of {evidence.killed.pod} before the kill: {found.line}\n{spark}{limit}"

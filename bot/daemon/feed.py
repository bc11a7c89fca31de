"""What travels on the pipeline's one queue: observations, health notices, ticks and
the answers of live checks.

Why this exists: sources (Kubernetes watches, the Ray poller, `POST /ingest`),
the scheduler and the service all hand work to one pipeline thread, which is
what lets the core run without locks. They share these few values and the
`Sink` interface, and need nothing else from the pipeline. Pure: values only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.core.actions.facts import FactAnswer
from bot.core.actions.memory_evidence import MemoryEvidence
from bot.core.incidents.correlator import HEALTHY_AGAIN
from bot.core.incidents.workloads import SUBMISSION_KIND
from bot.core.inputs import InputPart, LogText
from bot.core.model import Finding, ObjectRef, frozen_map


@dataclass(frozen=True, slots=True)
class Context:
    """What the sender knows about where evidence came from (the cluster, the namespace,
    the owning workload), for findings that do not say it themselves: a driver log
    names no RayCluster, but the caller that fetched it knows which one it was."""

    cluster: str = ""
    namespace: str = ""
    workload: ObjectRef | None = None

    def apply(self, finding: Finding) -> Finding:
        """The finding, completed with what it lacks; what it says itself wins."""
        fields = dict(finding.fields)
        if self.cluster:
            fields.setdefault("cluster", self.cluster)
        namespace = self.namespace or (self.workload.namespace if self.workload else "")
        if namespace:
            fields.setdefault("namespace", namespace)
        workload = finding.workload
        if self.workload is not None and (workload is None or _submission_only(workload)):
            workload = self.workload  # a Ray job id alone: the sender knows whose job it is
        if fields == dict(finding.fields) and workload is finding.workload:
            return finding
        return dataclasses.replace(finding, fields=frozen_map(fields), workload=workload)


def _submission_only(workload: ObjectRef) -> bool:
    return workload.kind == SUBMISSION_KIND


@dataclass(frozen=True, slots=True)
class Observation:
    """Signals and log text observed together (one paste, one poll, one watch event)."""

    parts: tuple[InputPart, ...]
    context: Context = field(default_factory=Context)
    kept: int = 0  # the store's intake row that keeps it until taken in (0: none)


def observe(parts: Iterable[InputPart], context: Context | None = None) -> Observation:
    """An observation whose log chunks are read now, so it can wait on a queue and be
    consumed by another thread (a `LogText` may hold a one-shot stream)."""
    kept: list[InputPart] = []
    for part in parts:
        if isinstance(part, LogText):
            part = dataclasses.replace(part, chunks=tuple(part.chunks))
        kept.append(part)
    return Observation(tuple(kept), context or Context())


@dataclass(frozen=True, slots=True)
class Healthy:
    """The workload is healthy again (a RayJob running or succeeded, a RayCluster ready,
    a Deployment available): its open incidents resolve."""

    workload: ObjectRef
    cluster: str = ""
    reason: str = HEALTHY_AGAIN
    kept: int = 0  # the store's intake row that keeps it until taken in (0: none)


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: resolve quiet incidents, send what is due, notice proposal changes."""


@dataclass(frozen=True, slots=True)
class Refresh:
    """An incident's proposals changed in this process (a click, an action's result):
    decide about its card now; `urgent` skips the update interval for a person's click."""

    incident_id: str
    urgent: bool = False
    say: str = ""  # said in the card's thread first (a refusal at approval time)


@dataclass(frozen=True, slots=True)
class Measured:
    """Memory evidence fetched for an incident off the pipeline thread (`bot.daemon.memory_worker`),
    or why there is none; `chart` is a PNG of it for the card's thread."""

    incident_id: str
    evidence: MemoryEvidence | None
    problem: str = ""
    chart: str = ""


@dataclass(frozen=True, slots=True)
class Captured:
    """An evidence bundle captured for an incident off the pipeline thread
    (`bot.daemon.capture`), stored, and written to `path` for the card's thread; or why
    there is none (`problem`)."""

    incident_id: str
    path: str = ""
    text: str = ""
    problem: str = ""


@dataclass(frozen=True, slots=True)
class LiveFacts:
    """What the live checks of an incident's waiting offers found (`bot.daemon.live_checks`),
    or why they gave no answer: one more observation, for its next assessment."""

    incident_id: str
    answer: FactAnswer


Item = Observation | Healthy | Tick | Refresh | Measured | LiveFacts | Captured


def text_size(item: Item) -> int:
    """Bytes of log text an item holds while it waits (its chunks are read already)."""
    if not isinstance(item, Observation):
        return 0
    return sum(
        len(chunk)
        for part in item.parts
        if isinstance(part, LogText) and isinstance(part.chunks, list | tuple)  # never a stream
        for chunk in part.chunks
    )

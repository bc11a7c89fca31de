"""Memory evidence: what a killed pod's working set did before the kill, said in one line,
and the limit that evidence supports.

Why this exists: the card of an OOM kill says which limit was hit; the engineer's next
question is how much the workload needs and whether more memory helps at all (a leak
only moves the kill later, a load spike needs the room once). Given the series a
metrics adapter read (bytes over time, against the limit) for the killed pod and the
other pods of its worker group, this module names the shape (leak, spike, steady), words
it for the card, and sizes a new limit from what the group really used. Pure: series
in, verdict out; no clock, no I/O.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from bot.core.model import Diagnosis, Finding, Incident
from bot.core.taxonomy import Category

GI = 2**30
MI = 2**20
SPIKE_SECONDS = 120.0  # a rise this fast is a load, not a leak
SPIKE_SHARE = 0.25  # of the limit (or the peak, without one)
FLAT_SHARE = 0.10  # the level before a spike moved by at most this much
LEAK_MINUTES = 5.0  # a rise shorter than this is not called a leak
LEAK_SHARE = 0.20  # a leak rose by at least this share of the limit
LEAK_FIT = 0.85  # how straight (R²) the rise is
AT_LIMIT = 0.95  # the working set reached the limit
FAR_BELOW = 0.80  # the working set stayed well under the limit
MIN_SAMPLES = 3


KERNEL_KILL = frozenset({Category.POD_OOM_KILLED})
MEMORY_FINDINGS = frozenset({*KERNEL_KILL, Category.RAY_MEMORY_MONITOR_OOM})
SPARKS = "▁▂▃▄▅▆▇█"


class Shape(StrEnum):
    LEAK = "leak"
    SPIKE = "spike"
    STEADY = "steady"
    NO_DATA = "no_data"


@dataclass(frozen=True, slots=True)
class Sample:
    at: datetime
    used: int  # bytes


@dataclass(frozen=True, slots=True)
class PodSeries:
    """One container's working set over the window, and its memory limit if known."""

    pod: str
    container: str = ""
    samples: tuple[Sample, ...] = ()
    limit: int | None = None  # bytes

    @property
    def peak(self) -> int:
        return max((s.used for s in self.samples), default=0)


@dataclass(frozen=True, slots=True)
class MemoryEvidence:
    """The killed pod's series and its worker group's other pods, up to the kill."""

    killed: PodSeries
    killed_at: datetime
    group: tuple[PodSeries, ...] = ()
    group_name: str = ""
    kernel_kill: bool = True  # the kernel OOM killer ended it (not Ray's memory monitor)
    source: str = "Prometheus"


@dataclass(frozen=True, slots=True)
class MemoryVerdict:
    shape: Shape
    line: str  # for the card
    peak: int  # the killed pod's highest observed working set
    limit: int | None
    group_peak: int  # the highest working set of the group's other pods
    at_limit: bool  # the working set reached the limit before the kill
    far_below: bool  # it stayed well under the limit


@dataclass(frozen=True, slots=True)
class Sizing:
    limit: int  # bytes, rounded up to a Gi
    basis: str  # where the number came from, for the preview


def gib(size: float) -> str:
    """`15.9Gi`, `16Gi`, `0.8Gi`, `50Mi`: one decimal at most, as people read a chart."""
    if abs(size) < GI / 10:
        return f"{round(size / MI)}Mi"
    value = round(size / GI, 1)
    return f"{value:g}Gi"


def _before(evidence: MemoryEvidence) -> tuple[Sample, ...]:
    kept = [s for s in evidence.killed.samples if s.at <= evidence.killed_at]
    return tuple(sorted(kept, key=lambda s: s.at))


def verdict(evidence: MemoryEvidence) -> MemoryVerdict:
    """The shape of the killed pod's working set before the kill, in one line."""
    samples = _before(evidence)
    limit = evidence.killed.limit
    group_peak = max((p.peak for p in evidence.group), default=0)
    if len(samples) < MIN_SAMPLES:
        pod = evidence.killed.pod
        return MemoryVerdict(
            Shape.NO_DATA,
            f"no memory samples of pod {pod} before the kill",
            0,
            limit,
            0,
            False,
            False,
        )
    peak = max(s.used for s in samples)
    reference = limit or peak
    at_limit = limit is not None and peak >= AT_LIMIT * limit
    far_below = limit is not None and peak < FAR_BELOW * limit
    of = f" of {gib(limit)}" if limit else ""
    spike = _spike(samples, reference)
    if spike is not None:
        shape, (level, rise, took) = Shape.SPIKE, spike
        line = (
            f"flat at {gib(level)}, then +{gib(rise)} in {took} s to {gib(peak)}{of} "
            "(a spike: model or batch load)"
        )
    else:
        shape, said = _leak(samples, reference) or _steady(samples)
        line = f"peak {gib(peak)}{of}, {said}"
    line += _group_clause(evidence, group_peak)
    return MemoryVerdict(shape, line, peak, limit, group_peak, at_limit, far_below)


def explain(evidence: MemoryEvidence, diagnosis: Diagnosis) -> str:
    """The memory line for the card, with what the series says about the findings: a
    working set at the limit confirms the kernel's OOM kill; one far below it, with Ray's
    memory-monitor line, says Ray killed the worker, not the kernel at the pod limit."""
    found = verdict(evidence)
    if found.shape is Shape.NO_DATA or found.limit is None:
        return found.line
    categories = {r.finding.category for r in diagnosis.findings}
    primary = diagnosis.primary
    limit = gib(found.limit)
    if found.at_limit and primary is not None and primary.category in KERNEL_KILL:
        return f"{found.line}. At the {limit} limit before the kill: the kernel's OOM kill"
    if found.far_below and Category.RAY_MEMORY_MONITOR_OOM in categories:
        return (
            f"{found.line}. Far below the {limit} limit: Ray's memory monitor killed the "
            "worker (ray_memory_monitor_oom), not the kernel at the pod limit"
        )
    if found.far_below and primary is not None and primary.category in KERNEL_KILL:
        return (
            f"{found.line}. Far below the {limit} limit at the last sample: the rise was "
            "faster than the scrape interval, or the node ran out of memory"
        )
    return found.line


def _group_clause(evidence: MemoryEvidence, group_peak: int) -> str:
    others = [p for p in evidence.group if p.samples]
    if not others:
        return ""
    group = f" of {evidence.group_name}" if evidence.group_name else ""
    pods = "pod" if len(others) == 1 else f"{len(others)} pods"
    return f"; the other {pods}{group} peaked at {gib(group_peak)}"


def _seconds(a: Sample, b: Sample) -> float:
    return (b.at - a.at).total_seconds()


def _spike(samples: tuple[Sample, ...], reference: int) -> tuple[float, int, int] | None:
    """A fast rise (within SPIKE_SECONDS) of a large share from a flat level: the level,
    the rise to the peak after it, and how many seconds it took."""
    best: tuple[int, int, int] | None = None  # rise, start, end
    for end in range(1, len(samples)):
        for start in range(end - 1, -1, -1):
            if _seconds(samples[start], samples[end]) > SPIKE_SECONDS:
                break
            rise = samples[end].used - samples[start].used
            if best is None or rise > best[0]:
                best = (rise, start, end)
    if best is None or best[0] < SPIKE_SHARE * reference:
        return None
    rise, start, end = best
    before = [s.used for s in samples[: start + 1]]
    if len(before) < 2 or max(before) - min(before) > FLAT_SHARE * reference:
        return None
    level = statistics.median(before)
    while start + 1 < end and samples[start + 1].used <= level + FLAT_SHARE * reference / 2:
        start += 1  # the rise began at the last sample still at the level
    took = round(_seconds(samples[start], samples[end]))
    return level, round(samples[end].used - level), took


def _leak(samples: tuple[Sample, ...], reference: int) -> tuple[Shape, str] | None:
    """A steady, straight rise over minutes up to the peak."""
    top = max(range(len(samples)), key=lambda i: (samples[i].used, i))
    low = min(s.used for s in samples[: top + 1])
    start = max(i for i in range(top + 1) if samples[i].used <= low + FLAT_SHARE * reference / 2)
    run = samples[start : top + 1]
    minutes = _seconds(run[0], run[-1]) / 60
    if len(run) < MIN_SAMPLES or minutes < LEAK_MINUTES:
        return None
    slope, fit = _line(run)
    if slope <= 0 or fit < LEAK_FIT or slope * minutes < LEAK_SHARE * reference:
        return None
    return Shape.LEAK, (
        f"rising {gib(slope)}/min for {round(minutes)} min before the kill (looks like a leak)"
    )


def _line(run: tuple[Sample, ...]) -> tuple[float, float]:
    """Least-squares slope (bytes per minute) and R² of the run."""
    xs = [_seconds(run[0], s) / 60 for s in run]
    ys = [float(s.used) for s in run]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    if sxx == 0 or syy == 0:
        return 0.0, 0.0
    return sxy / sxx, (sxy * sxy) / (sxx * syy)


def _steady(samples: tuple[Sample, ...]) -> tuple[Shape, str]:
    minutes = round(_seconds(samples[0], samples[-1]) / 60)
    level = statistics.median(s.used for s in samples)
    return Shape.STEADY, (
        f"steady at about {gib(level)} for {minutes} min before the kill (no leak or spike)"
    )


def size_limit(evidence: MemoryEvidence, current: int, headroom: float, cap: int) -> Sizing | None:
    """The group's observed peak times `headroom`, rounded up to a Gi, at most `cap`.

    The killed pod's usage at a kernel OOM kill counts as at least its limit (the last
    sample is taken before the kill). None without samples, or when the evidence asks
    for no more than `current`: then the configured factor decides."""
    found = verdict(evidence)
    if found.shape is Shape.NO_DATA:
        return None
    limit = evidence.killed.limit or current
    at_kill = evidence.kernel_kill and bool(limit) and found.peak < limit
    killed = limit if at_kill else found.peak
    basis = max(killed, found.group_peak)
    wanted = math.ceil(basis * headroom / GI - 1e-6) * GI  # 19.0000001Gi is 19Gi
    proposed = min(wanted, cap)
    if proposed <= current:
        return None
    if found.group_peak > killed:
        whose = f"the group's peak {gib(basis)}"
    elif at_kill:
        whose = f"the killed pod's usage at the kill (at least its {gib(basis)} limit)"
    else:
        whose = f"the killed pod's peak {gib(basis)}"
    capped = f", capped at {gib(cap)}" if wanted > cap else ""
    leak = (
        "; a leak: more memory only moves the next kill later" if found.shape is Shape.LEAK else ""
    )
    return Sizing(
        proposed, f"{whose} × {headroom:g} headroom, from {evidence.source}{capped}{leak}"
    )


@dataclass(frozen=True, slots=True)
class MemoryTarget:
    """The pod a memory finding names, when it was killed, and where its group is."""

    namespace: str
    pod: str
    killed_at: datetime
    container: str = ""
    group: str = ""  # the pod's ray.io/group
    cluster: str = ""  # its ray.io/cluster
    spec_limit: str = ""  # the pod spec's memory limit, e.g. "16Gi"
    kernel_kill: bool = True


def sized_from_evidence(incident: Incident) -> bool:
    """The incident's root cause is an OOM kill: its card offers the memory bump, sized
    from this evidence, so the card waits for it (within its deadline) before it is
    first posted."""
    primary = incident.diagnosis.primary
    return primary is not None and primary.category in MEMORY_FINDINGS


def _for_memory(finding: Finding) -> bool:
    if finding.category in MEMORY_FINDINGS:
        return True
    said = {finding.captures.get("resource", ""), finding.captures.get("condition", "")}
    return finding.category is Category.POD_EVICTION and bool(said & {"memory", "MemoryPressure"})


def target_of(incident: Incident) -> MemoryTarget | None:
    """The pod whose memory explains the incident (see `target_in`)."""
    return target_in(incident.diagnosis, incident.opened_at, incident.namespace)


def target_in(diagnosis: Diagnosis, seen_at: datetime, namespace: str = "") -> MemoryTarget | None:
    """The pod whose memory explains the diagnosis: the most causal memory finding that
    names a pod (an OOM kill, a Ray memory-monitor kill, an eviction for memory), killed
    when its signal says (else `seen_at`)."""
    kernel = any(r.finding.category in KERNEL_KILL for r in diagnosis.findings)
    for ranked in diagnosis.findings:
        finding = ranked.finding
        fields = finding.fields
        named = finding.obj.name if finding.obj and finding.obj.kind == "Pod" else ""
        pod = fields.get("pod", "") or named
        where = fields.get("namespace", "") or namespace
        if not _for_memory(finding) or not pod or not where:
            continue
        return MemoryTarget(
            namespace=where,
            pod=pod,
            killed_at=finding.time or seen_at,
            container=fields.get("container", ""),
            group=fields.get("ray_group", ""),
            cluster=fields.get("ray_cluster", ""),
            spec_limit=fields.get("memory_limit", ""),
            kernel_kill=kernel,
        )
    return None


def sparkline(pod: PodSeries, width: int = 48) -> str:
    """The working set as block characters scaled to the limit (or the peak): `▁▂▅█`."""
    values = [s.used for s in pod.samples]
    if not values:
        return ""
    top = max(pod.limit or 0, max(values)) or 1
    buckets = [values[i * len(values) // width] for i in range(min(width, len(values)))]
    return "".join(SPARKS[min(len(SPARKS) - 1, int(v / top * len(SPARKS)))] for v in buckets)
